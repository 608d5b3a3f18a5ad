//! One user message, to the end of its turn, across the streams it takes
//! (seed 001's resilience contract and its post-MVP `Last-Event-ID`).
//!
//! A stream that drops or falls silent is reopened after 1 s, doubling to
//! 30 s with each drop of the turn. If the service gave
//! its events ids, the same `POST /v1/chat` goes again with
//! `Last-Event-ID` — the SSE spec's reconnection — and the turn goes on:
//! its text so far stays, its tool calls keep running (the service's turn
//! waits for them). Otherwise, or when the service will not resume, the
//! message is re-sent and the turn starts over (its tool calls cancelled:
//! see [`Chat::once`]).
//!
//! A service may send ids and still ignore the header (the seed defers
//! the replay): a resumed stream whose first event names an id this turn
//! already had is such a service running the turn again, and the turn
//! starts over with it. A resumed stream that ends without an event
//! cannot resume either; three that break without one give up on it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::Method;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Chat, MAX_ANSWER, REQUEST_WITHIN, Step, cut, error, sse, warn};

/// Reconnecting waits 1 s, doubling to this.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Bytes of an event id resumed from: an id longer than this (or not
/// printable ASCII) cannot go in a `Last-Event-ID` header, and the
/// message is re-sent instead.
const MAX_EVENT_ID: usize = 256;
/// Ids a turn remembers, to see a service start the turn over.
const MAX_SEEN: usize = 4096;
/// Resumed streams in a row that break before any event: then re-send.
const MAX_QUIET_RESUMES: u32 = 3;

/// How a turn's stream ended.
enum End {
    /// `assistant.final`, or the service closed it after an `error`.
    Done,
    /// Dropped or silent mid-turn: reopen (resume, or re-send).
    Dropped(String),
    /// The service would not resume from the last event id: re-send.
    NoResume(String),
    /// A 404: the session may be forgotten.
    NotFound(String),
    /// The service refused the turn: reported, not retried.
    Refused(String),
}

/// One turn's state: what was streamed, the ids seen, and the tool calls
/// it started.
struct Turn {
    text: String,
    stop: CancellationToken,
    /// The streamed text, to compare with the final; None once it grew
    /// past MAX_DELTAS (the final is then not printed again).
    deltas: Option<String>,
    /// An `error` event came: the stream's end ends the turn.
    failed: bool,
    /// The stream's last event id, if any.
    last_id: Option<Arc<str>>,
    /// The ids events set in this turn (at most MAX_SEEN).
    seen: HashSet<Arc<str>>,
    /// Events the current stream brought.
    events: usize,
    tasks: tokio_util::task::TaskTracker,
    /// Cancels the turn's tool calls when the turn is dropped or starts over.
    _cancel_tools: tokio_util::sync::DropGuard,
    cancel: CancellationToken,
}

impl Turn {
    fn new(text: &str, stop: &CancellationToken) -> Self {
        let cancel = stop.child_token();
        Self {
            text: text.to_owned(),
            stop: stop.clone(),
            deltas: Some(String::new()),
            failed: false,
            last_id: None,
            seen: HashSet::new(),
            events: 0,
            tasks: tokio_util::task::TaskTracker::new(),
            _cancel_tools: cancel.clone().drop_guard(),
            cancel,
        }
    }

    /// Starts over: the earlier attempt's tool calls are cancelled.
    fn restart(&mut self) {
        *self = Self::new(&self.text, &self.stop);
    }

    /// The id to resume from, if it can be sent back.
    fn resume_id(&self) -> Option<String> {
        self.last_id
            .as_deref()
            .filter(|id| resumable(id))
            .map(str::to_owned)
    }
}

/// `id` if it can be sent back as `Last-Event-ID`.
fn resumable(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_EVENT_ID && id.bytes().all(|b| (b' '..=b'~').contains(&b))
}

impl Chat {
    /// One user message, to the end of its turn, or until `stop`.
    pub(super) async fn turn(self: &Arc<Self>, text: &str, stop: &CancellationToken) -> bool {
        let mut wait = Duration::from_secs(1);
        let mut turn = Turn::new(text, stop);
        let mut resume: Option<String> = None;
        let mut quiet_resumes = 0;
        let mut reopened = false;
        loop {
            let end = tokio::select! {
                end = self.stream(&mut turn, resume.as_deref()) => end,
                _ = stop.cancelled() => return false,
            };
            // Progress forgives quiet resumes; the wait still doubles with
            // every drop of the turn (the seed's backoff on repeated
            // failures), so no service can have the turn retried faster.
            if turn.events > 0 {
                quiet_resumes = 0;
            }
            let (what, can_resume) = match end {
                End::Done => return true,
                End::Refused(why) => {
                    error(&format!("the service refused the message: {why}"));
                    return false;
                }
                // Asked to resume the session, the service hands back the
                // one to use (a new one if it forgot ours); the message is
                // sent there once, from the start. A second 404 is told.
                End::NotFound(why) if !reopened => {
                    reopened = true;
                    if let Err(e) = self.session.open(true, REQUEST_WITHIN).await {
                        error(&format!(
                            "the service refused the message ({why}); cannot open a session: {}",
                            e.shown()
                        ));
                        return false;
                    }
                    warn(&format!(
                        "the service did not know the session ({why}); sending the message again in the session it gave"
                    ));
                    self.start_over(&mut turn, &mut resume);
                    continue;
                }
                End::NotFound(why) => {
                    error(&format!("the service refused the message: {why}"));
                    return false;
                }
                End::NoResume(why) => (
                    format!("the service would not resume the stream ({why})"),
                    false,
                ),
                End::Dropped(why) => (format!("the stream dropped mid-turn ({why})"), true),
            };
            if can_resume && resume.is_some() && turn.events == 0 {
                quiet_resumes += 1;
            }
            resume = turn
                .resume_id()
                .filter(|_| can_resume && quiet_resumes < MAX_QUIET_RESUMES);
            let next = match (&resume, &turn.last_id) {
                (Some(id), _) => format!("resuming after event {id:?}"),
                (None, Some(_)) if can_resume && quiet_resumes >= MAX_QUIET_RESUMES => format!(
                    "{quiet_resumes} resumed streams brought nothing; re-sending the message"
                ),
                (None, Some(_)) if can_resume => {
                    "its last event id cannot be sent back; re-sending the message".into()
                }
                _ => "re-sending the message".into(),
            };
            if resume.is_none() {
                self.start_over(&mut turn, &mut resume);
                quiet_resumes = 0;
            }
            warn(&format!("{what}; {next} in {} s", wait.as_secs()));
            if !back_off(&mut wait, stop).await {
                return false;
            }
        }
    }
}

/// Waits `wait` (false if stopped first), then doubles it up to 30 s.
async fn back_off(wait: &mut Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(*wait) => {}
        _ = stop.cancelled() => return false,
    }
    *wait = (*wait * 2).min(MAX_BACKOFF);
    true
}

impl Chat {
    /// The message goes again from the start: what the lost attempt
    /// printed stays on a line of its own, its tool calls are cancelled.
    fn start_over(&self, turn: &mut Turn, resume: &mut Option<String>) {
        self.end_line();
        turn.restart();
        *resume = None;
    }

    /// One stream of `turn`: the message sent (with `Last-Event-ID` when
    /// resuming), read to its end.
    async fn stream(self: &Arc<Self>, turn: &mut Turn, resume: Option<&str>) -> End {
        turn.events = 0;
        let body = json!({
            "general_session_id": self.session(),
            "mode": "general",
            "message": {"parts": [{"type": "text", "text": turn.text}]},
            "stream": true,
        });
        let headers = resume
            .map(|id| vec![("last-event-id", id.to_owned())])
            .unwrap_or_default();
        let service = self.service().with_headers(headers);
        let sent = service.send(
            Method::POST,
            "/v1/chat",
            Some(&body),
            None,
            "text/event-stream",
        );
        let (status, mut body) = match tokio::time::timeout(REQUEST_WITHIN, sent).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(why)) => return End::Dropped(why),
            Err(_) => return End::Dropped("no answer to POST /v1/chat in time".into()),
        };
        if !(200..300).contains(&status) {
            let said = tokio::time::timeout(
                REQUEST_WITHIN,
                super::super::http::read_all(body, MAX_ANSWER),
            )
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
            let why = format!("HTTP {status}: {}", cut(&String::from_utf8_lossy(&said)));
            return match status {
                404 => End::NotFound(why),
                500.. => End::Dropped(why),
                _ if resume.is_some() => End::NoResume(why),
                _ => End::Refused(why),
            };
        }
        // The spec's last event id carries over a reconnection.
        let mut parser = sse::Parser::resuming(resume);
        loop {
            let frame = match tokio::time::timeout(self.options.dead_after, body.frame()).await {
                Err(_) => {
                    return End::Dropped(format!(
                        "no data for {} s, not even a heartbeat",
                        self.options.dead_after.as_secs()
                    ));
                }
                Ok(None) if turn.failed => return End::Done,
                Ok(None) if resume.is_some() && turn.events == 0 => {
                    return End::NoResume("the resumed stream ended without an event".into());
                }
                Ok(None) => return End::Dropped("the stream ended before assistant.final".into()),
                Ok(Some(Err(e))) => return End::Dropped(format!("the stream broke: {e}")),
                Ok(Some(Ok(frame))) => frame,
            };
            let Some(bytes) = frame.data_ref() else {
                continue;
            };
            let events = match parser.feed(bytes) {
                Ok(events) => events,
                Err(why) => return End::Dropped(why),
            };
            for event in events {
                let first = turn.events == 0;
                turn.events += 1;
                if event.own_id
                    && let Some(id) = &event.id
                {
                    if resume.is_some() && first && turn.seen.contains(id) {
                        warn(&format!(
                            "the service sent event {id:?} again: it started the turn over rather than resuming; following it from the start"
                        ));
                        self.end_line();
                        turn.restart();
                        turn.events = 1;
                    }
                    if turn.seen.len() < MAX_SEEN && resumable(id) {
                        turn.seen.insert(id.clone());
                    }
                }
                turn.last_id = event.id.clone();
                if event.name == "tool.request" {
                    // Held requests are bounded: wait here, unread, for one to end.
                    let Ok(held) = Arc::clone(&self.pending).acquire_owned().await else {
                        continue;
                    };
                    let chat = Arc::clone(self);
                    let cancel = turn.cancel.child_token();
                    let data = event.data;
                    turn.tasks.spawn(async move {
                        let _held = held;
                        chat.tool(&data, cancel).await
                    });
                    continue;
                }
                match self.event(&event, &mut turn.deltas) {
                    Some(Step::Final(text)) => {
                        // The final text, unless the deltas already said it.
                        if turn.deltas.as_ref().is_some_and(|d| *d != text) {
                            self.end_line();
                            self.print(&text);
                        }
                        self.end_line();
                        turn.tasks.close();
                        let _ =
                            tokio::time::timeout(Duration::from_secs(5), turn.tasks.wait()).await;
                        return End::Done;
                    }
                    Some(Step::Failed) => turn.failed = true,
                    None => {}
                }
            }
        }
    }
}
