//! Seed 001: the desktop side of the General Agent Service's HTTP/SSE
//! contract (charlieqf/jarvis, `docs/11-api-general-agent-service.md`).
//! A turn is `POST /v1/chat` read as SSE: deltas go to stdout, each
//! `tool.request` runs through the one dispatch and policy — the stricter
//! of the service's `risk` and our own class wins, `forbidden` never runs
//! — and is answered with `POST /v1/tools/result`. A stream that drops or
//! falls silent mid-turn is reopened with backoff and the message re-sent.
//! This module only translates.
//!
//! A service may be hostile. A `tool.request` id is run at most once: the
//! link's replay memory (`super::replay`, on disk) remembers every id run,
//! by time, across restarts. Results go back over at most [`POSTS`]
//! connections at once, and at most [`MAX_PENDING`] requests are held
//! (running or waiting to post); past that the stream is not read until
//! one ends, so a flood of requests slows the service's own stream rather
//! than growing the link.

mod sse;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::Method;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::http::{Failure, Service};
use super::replay::{Admit, Replay};
use crate::tools::policy::Gate;
use crate::tools::{Invocation, Tools};

/// The stream reader, for the fuzz targets (`crate::fuzzing`).
#[doc(hidden)]
pub use sse::{Event as SseEvent, Parser as SseParser};

/// A `tool.request`'s data read as [`Chat::tool`] reads it (its id and
/// risk), for the fuzz targets (`crate::fuzzing`).
#[doc(hidden)]
pub fn read_tool_request(data: Value) -> Result<(String, String), String> {
    let call: ToolCall = serde_json::from_value(data).map_err(|e| e.to_string())?;
    Ok((call.id, call.risk))
}

const FILE: &str = "agent-service-sessions.json";
/// Small requests (health, sessions, tool results) take at most this.
const REQUEST_WITHIN: Duration = Duration::from_secs(30);
/// Bytes of a JSON answer.
const MAX_ANSWER: usize = 1 << 20;
/// Bytes of a tool result sent back.
const MAX_RESULT: usize = 1 << 20;
/// Results kept by id: a repeated request (a replayed turn) gets the same
/// result. Older repeats are refused by the replay memory instead.
const KEPT_CALLS: usize = 64;
/// A result larger than this is not kept (a repeat is refused, not shared).
const MAX_KEPT: usize = 64 << 10;
/// Tool calls one turn may have running at once; more are answered BUSY.
const MAX_CALLS: usize = 8;
/// Requests held at once, running or waiting to post their result.
const MAX_PENDING: usize = 2 * MAX_CALLS;
/// Results posted at once (each on a connection of its own).
const POSTS: usize = 4;
/// Bytes of streamed text kept to compare with the final text.
const MAX_DELTAS: usize = 1 << 20;
/// Reconnecting waits 1 s, doubling to this.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

fn say(message: &str) {
    crate::shared::log::say_as("chat", message);
}

/// Something went wrong and this link carries on.
fn warn(message: &str) {
    crate::shared::log::warn_as("chat", message);
}

/// Something this link was asked to do failed.
fn error(message: &str) {
    crate::shared::log::error_as("chat", message);
}

pub struct Options {
    pub service: Service,
    /// The desktop's conversation id (`jarvis_session_id`).
    pub conversation: String,
    pub state_dir: PathBuf,
    /// No data (heartbeats included) for this long: the stream is dead.
    pub dead_after: Duration,
    pub tool_timeout: Duration,
    /// Writes the assistant's text for the user (stdout).
    pub print: fn(&str),
}

#[derive(Debug, Deserialize)]
struct ToolCall {
    id: String,
    name: String,
    #[serde(default)]
    arguments: Value,
    risk: String,
    #[serde(default)]
    reason: Option<String>,
}

/// How a turn's stream ended.
enum End {
    /// `assistant.final`, or the service closed it after an `error`.
    Done,
    /// Dropped or silent mid-turn: reopen and re-send.
    Dropped(String),
    /// The service refused the turn: reported, not retried.
    Refused(String),
}

pub struct Chat {
    options: Options,
    tools: Arc<Tools>,
    session: Mutex<String>,
    calls: Mutex<VecDeque<(String, Kept)>>,
    replay: Replay,
    running: Arc<tokio::sync::Semaphore>,
    pending: Arc<tokio::sync::Semaphore>,
    posts: tokio::sync::Semaphore,
    /// The assistant's text left a line open on stdout.
    open_line: std::sync::atomic::AtomicBool,
}

impl Chat {
    pub async fn start(options: Options, tools: Arc<Tools>) -> Result<Arc<Self>, String> {
        let health = options
            .service
            .json(
                Method::GET,
                "/health",
                None,
                None,
                REQUEST_WITHIN,
                MAX_ANSWER,
            )
            .await
            .map_err(|e| {
                format!(
                    "the General Agent Service at {} is not reachable: {e}",
                    options.service.shown()
                )
            })?;
        if health["healthy"] != true {
            return Err(format!(
                "the General Agent Service at {} says it is not healthy: {health}",
                options.service.shown()
            ));
        }
        say(&format!(
            "{} is healthy (version {}, up {} ms)",
            options.service.shown(),
            health["version"].as_str().unwrap_or("?"),
            health["uptime_ms"]
        ));
        let scope = format!("{} {}", options.service.shown(), options.conversation);
        let replay = Replay::open(&options.state_dir, "chat", &scope)?;
        let chat = Arc::new(Self {
            options,
            tools,
            session: Mutex::new(String::new()),
            calls: Mutex::new(VecDeque::new()),
            replay,
            running: Arc::new(tokio::sync::Semaphore::new(MAX_CALLS)),
            pending: Arc::new(tokio::sync::Semaphore::new(MAX_PENDING)),
            posts: tokio::sync::Semaphore::new(POSTS),
            open_line: std::sync::atomic::AtomicBool::new(false),
        });
        chat.open_session(true).await?;
        Ok(chat)
    }

    /// `POST /v1/sessions`, resuming the session this conversation had
    /// (`resume`) — kept in the state directory for the next run.
    async fn open_session(&self, resume: bool) -> Result<(), String> {
        let key = format!(
            "{} {}",
            self.options.service.shown(),
            self.options.conversation
        );
        let path = self.options.state_dir.join(FILE);
        let mut saved: HashMap<String, String> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let mut body = json!({"jarvis_session_id": self.options.conversation});
        if let Some(previous) = saved.get(&key).filter(|_| resume) {
            body["preferred_session_id"] = json!(previous);
        }
        let answer = self
            .options
            .service
            .json(
                Method::POST,
                "/v1/sessions",
                Some(&body),
                None,
                REQUEST_WITHIN,
                MAX_ANSWER,
            )
            .await
            .map_err(|e| format!("cannot open a session: {e}"))?;
        let Some(id) = answer["general_session_id"]
            .as_str()
            .filter(|s| !s.is_empty() && s.len() <= 256)
        else {
            return Err(format!(
                "the service answered no general_session_id: {answer}"
            ));
        };
        if saved.get(&key).map(String::as_str) != Some(id) {
            say(&format!(
                "session {id} for conversation {}",
                self.options.conversation
            ));
        }
        saved.insert(key, id.to_owned());
        if let Ok(bytes) = serde_json::to_vec_pretty(&saved) {
            let _ = crate::shared::paths::write_private(&path, &bytes);
        }
        *self.session.lock().unwrap() = id.to_owned();
        Ok(())
    }

    fn session(&self) -> String {
        self.session.lock().unwrap().clone()
    }

    /// One user message, to the end of its turn: reopened and re-sent
    /// after a drop (1 s, doubling to 30 s) until it ends or `stop`.
    pub async fn turn(self: &Arc<Self>, text: &str, stop: &CancellationToken) -> bool {
        let mut wait = Duration::from_secs(1);
        loop {
            let end = tokio::select! {
                end = self.stream(text, stop) => end,
                _ = stop.cancelled() => return false,
            };
            match end {
                End::Done => return true,
                End::Refused(why) => {
                    error(&format!("the service refused the message: {why}"));
                    return false;
                }
                End::Dropped(why) => {
                    // What the lost attempt printed stays on a line of its own.
                    self.end_line();
                    warn(&format!(
                        "the stream dropped mid-turn ({why}); re-sending the message in {} s",
                        wait.as_secs()
                    ));
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = stop.cancelled() => return false,
                    }
                    wait = (wait * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    async fn stream(self: &Arc<Self>, text: &str, stop: &CancellationToken) -> End {
        let body = json!({
            "general_session_id": self.session(),
            "mode": "general",
            "message": {"parts": [{"type": "text", "text": text}]},
            "stream": true,
        });
        let sent = self.options.service.send(
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
            let said =
                tokio::time::timeout(REQUEST_WITHIN, super::http::read_all(body, MAX_ANSWER))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or_default();
            let said = String::from_utf8_lossy(&said)
                .chars()
                .take(300)
                .collect::<String>();
            return match status {
                // The service forgot the session (restarted): a new one.
                404 => match self.open_session(false).await {
                    Ok(()) => End::Dropped(
                        "the service no longer knew the session; opened a new one".into(),
                    ),
                    Err(why) => End::Refused(why),
                },
                500.. => End::Dropped(format!("HTTP {status}: {said}")),
                _ => End::Refused(format!("HTTP {status}: {said}")),
            };
        }
        let mut parser = sse::Parser::default();
        // The streamed text, to compare with the final; None once it grew
        // past MAX_DELTAS (the final is then not printed again).
        let mut deltas = Some(String::new());
        let mut failed = false;
        let tasks = tokio_util::task::TaskTracker::new();
        let cancel = stop.child_token();
        let _stop_tools = cancel.clone().drop_guard();
        loop {
            let frame = match tokio::time::timeout(self.options.dead_after, body.frame()).await {
                Err(_) => {
                    return End::Dropped(format!(
                        "no data for {} s, not even a heartbeat",
                        self.options.dead_after.as_secs()
                    ));
                }
                Ok(None) if failed => return End::Done,
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
                if event.name == "tool.request" {
                    // Held requests are bounded: wait here, unread, for one to end.
                    let Ok(held) = Arc::clone(&self.pending).acquire_owned().await else {
                        continue;
                    };
                    let chat = Arc::clone(self);
                    let cancel = cancel.child_token();
                    let data = event.data;
                    tasks.spawn(async move {
                        let _held = held;
                        chat.tool(&data, cancel).await
                    });
                    continue;
                }
                match self.event(&event, &mut deltas) {
                    Some(Step::Final(text)) => {
                        // The final text, unless the deltas already said it.
                        if deltas.as_ref().is_some_and(|d| *d != text) {
                            self.end_line();
                            self.print(&text);
                        }
                        self.end_line();
                        tasks.close();
                        let _ = tokio::time::timeout(Duration::from_secs(5), tasks.wait()).await;
                        return End::Done;
                    }
                    Some(Step::Failed) => failed = true,
                    None => {}
                }
            }
        }
    }

    /// Prints the assistant's `text` (escaped for the terminal).
    fn print(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        (self.options.print)(&crate::shared::escape::text(text));
        self.open_line
            .store(!text.ends_with('\n'), std::sync::atomic::Ordering::Relaxed);
    }

    /// Ends the line the assistant's text left open.
    fn end_line(&self) {
        if self
            .open_line
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            (self.options.print)("\n");
        }
    }

    /// One event of the stream.
    fn event(&self, event: &sse::Event, deltas: &mut Option<String>) -> Option<Step> {
        let data: Value = match serde_json::from_str(&event.data) {
            Ok(v) => v,
            Err(e) => {
                say(&format!(
                    "{}: its data is not JSON ({e}); skipped",
                    event.name
                ));
                return None;
            }
        };
        match event.name.as_str() {
            "assistant.delta" => {
                let text = data["text"].as_str().unwrap_or_default();
                if let Some(d) = deltas {
                    d.push_str(text);
                    if d.len() > MAX_DELTAS {
                        *deltas = None;
                    }
                }
                self.print(text);
                None
            }
            "assistant.final" => Some(Step::Final(
                data["text"].as_str().unwrap_or_default().to_owned(),
            )),
            "tool.result.ack" | "tool.result" => None,
            "error" => {
                say(&format!(
                    "the service reported an error: {}: {}",
                    data["code"].as_str().unwrap_or("?"),
                    data["message"].as_str().unwrap_or("?")
                ));
                Some(Step::Failed)
            }
            other => {
                say(&format!("unknown event {other:?}; skipped"));
                None
            }
        }
    }

    /// Runs one `tool.request` (its event data) and posts its result.
    async fn tool(&self, data: &str, cancel: CancellationToken) {
        let data: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                say(&format!(
                    "tool.request: its data is not JSON ({e}); skipped"
                ));
                return;
            }
        };
        let id = data["id"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .take(256)
            .collect::<String>();
        let result = match serde_json::from_value::<ToolCall>(data) {
            Err(e) if id.is_empty() => {
                say(&format!(
                    "a tool.request without an id cannot be answered: {e}"
                ));
                return;
            }
            Err(e) => failure(
                &id,
                format!("BAD_REQUEST: the tool request is malformed: {e}"),
            ),
            Ok(call) => match Arc::clone(&self.running).try_acquire_owned() {
                Ok(_slot) => self.once(call, cancel).await,
                Err(_) => failure(
                    &id,
                    format!(
                        "BUSY: {MAX_CALLS} tool calls are already running; ask again when one ends"
                    ),
                ),
            },
        };
        self.post_result(result).await;
    }

    /// Runs `call` once per id, ever: a repeat while its result is kept
    /// waits for the first run and shares its result; a later one (or one
    /// after a restart) is refused by the replay memory. A run cancelled
    /// with its stream is not run afresh either: it may have done part of
    /// its work, and the replayed turn gets the cancellation.
    async fn once(&self, call: ToolCall, cancel: CancellationToken) -> Value {
        let (kept, repeat) = self.kept(&call.id);
        if repeat {
            say(&format!(
                "tool call {} was asked for before; it is not run again",
                &call.id
            ));
        }
        let result = kept
            .get_or_init(|| self.first_run(&call, cancel))
            .await
            .clone();
        if result.to_string().len() > MAX_KEPT {
            self.forget(&call.id, &kept);
        }
        result
    }

    /// Runs `call` if the replay memory has never seen its id (and now
    /// has it recorded); otherwise the refusal.
    async fn first_run(&self, call: &ToolCall, cancel: CancellationToken) -> Value {
        let shown = &call.id;
        match self.replay.admit(&call.id) {
            Ok(Admit::New) => self.run(call, cancel).await,
            Ok(Admit::Again) => {
                say(&format!(
                    "tool call {shown} was run before (its result was posted then); it is not run again"
                ));
                failure(
                    &call.id,
                    format!(
                        "DUPLICATE: tool call {} was run before; it is not run again",
                        call.id
                    ),
                )
            }
            Ok(Admit::Full { first }) => {
                let why = format!(
                    "{} tool calls were run within the last {} h and each is remembered so that none runs twice; new ones are refused until the oldest expire",
                    super::replay::CAP,
                    super::replay::KEEP.as_secs() / 3600
                );
                if first {
                    say(&why);
                }
                failure(&call.id, format!("TOO_MANY: {why}"))
            }
            Err(why) => {
                say(&format!("tool call {shown} is not run: {why}"));
                failure(
                    &call.id,
                    format!("UNAVAILABLE: the call cannot be recorded, so it is not run ({why})"),
                )
            }
        }
    }

    async fn run(&self, call: &ToolCall, cancel: CancellationToken) -> Value {
        let gate = match call.risk.as_str() {
            "safe" => Gate::Ours,
            "risky" => Gate::Risky,
            "forbidden" => {
                let error = format!(
                    "FORBIDDEN: the service itself classed {} as forbidden; it never runs",
                    call.name
                );
                return failure(&call.id, error);
            }
            other => {
                return failure(
                    &call.id,
                    format!("BAD_REQUEST: risk {other:?} is not safe, risky or forbidden"),
                );
            }
        };
        if let Some(reason) = &call.reason {
            say(&format!(
                "tool {} ({}): {}",
                call.name,
                call.risk,
                reason.chars().take(200).collect::<String>()
            ));
        }
        let params = serde_json::to_string(&call.arguments).unwrap_or_default();
        let (outcome, decision) = self
            .tools
            .invoke(Invocation {
                keep: None,
                id: &call.id,
                command: &call.name,
                params_json: Some(&params),
                timeout: self.options.tool_timeout,
                max_bytes: MAX_RESULT,
                cancel,
                tap: None,
                agent: None,
                gate,
                gateway: None,
            })
            .await;
        say(&format!("tool {} → {decision}", call.name));
        match outcome {
            Ok(value) => json!({"id": call.id, "ok": true, "result": value, "error": null}),
            Err(e) => failure(&call.id, format!("{}: {}", e.code, e.message)),
        }
    }

    /// The run kept for `id` (a new one if none), and whether it was
    /// there already.
    fn kept(&self, id: &str) -> (Kept, bool) {
        let mut calls = self.calls.lock().unwrap();
        if let Some((_, kept)) = calls.iter().find(|(k, _)| k == id) {
            return (Arc::clone(kept), true);
        }
        if calls.len() >= KEPT_CALLS {
            calls.pop_front();
        }
        let kept = Kept::default();
        calls.push_back((id.to_owned(), Arc::clone(&kept)));
        (kept, false)
    }

    /// Forgets the run kept for `id`, if it is still `kept`.
    fn forget(&self, id: &str, kept: &Kept) {
        let mut calls = self.calls.lock().unwrap();
        calls.retain(|(k, v)| !(k == id && Arc::ptr_eq(v, kept)));
    }

    async fn post_result(&self, result: Value) {
        let Ok(_post) = self.posts.acquire().await else {
            return;
        };
        let body = json!({"general_session_id": self.session(), "tool_result": result});
        let posted = self
            .options
            .service
            .json(
                Method::POST,
                "/v1/tools/result",
                Some(&body),
                None,
                REQUEST_WITHIN,
                MAX_ANSWER,
            )
            .await;
        match posted {
            Ok(answer) if answer["accepted"] == true => {}
            Ok(answer) => warn(&format!(
                "the service did not accept tool result {}: {answer}",
                result["id"]
            )),
            Err(Failure::Network(why) | Failure::Status(_, why)) => {
                warn(&format!("cannot post tool result {}: {why}", result["id"]))
            }
        }
    }
}

/// One tool call's run, shared by every request with its id.
type Kept = Arc<tokio::sync::OnceCell<Value>>;

enum Step {
    Final(String),
    Failed,
}

fn failure(id: &str, error: String) -> Value {
    json!({"id": id, "ok": false, "result": null, "error": error})
}

/// `clawbot_router chat …`: the first message (if given), then each line
/// of stdin, one turn each; the exit code.
pub async fn main(args: crate::cli::ChatArgs, print: fn(&str), stop: CancellationToken) -> u8 {
    let service = match Service::parse(&args.service, args.allow_remote) {
        Ok(s) => s,
        Err(why) => return usage(&why),
    };
    let conversation = args.conversation.trim().to_owned();
    if conversation.is_empty()
        || conversation.len() > 256
        || conversation.chars().any(char::is_control)
    {
        return usage("--conversation is 1 to 256 printable characters");
    }
    let tools = match super::link_tools(&args.hands, "The General Agent Service") {
        Ok(hands) => hands,
        Err(why) => return usage(&why),
    };
    let options = Options {
        service,
        conversation,
        state_dir: args.hands.state_dir(),
        dead_after: Duration::from_secs(args.dead_after),
        tool_timeout: Duration::from_secs(args.tool_timeout),
        print,
    };
    let chat = match Chat::start(options, tools).await {
        Ok(chat) => chat,
        Err(why) => {
            error(&why);
            crate::shared::log::flush_log();
            return 1;
        }
    };
    let mut lines = crate::ui::stdin_messages();
    let mut ok = true;
    if let Some(first) = args
        .message
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        ok &= chat.turn(first, &stop).await;
    }
    while let Some(rx) = lines.as_mut() {
        let line = tokio::select! {
            line = rx.recv() => line,
            _ = stop.cancelled() => None,
        };
        let Some(line) = line else { break };
        let line = line.trim();
        if !line.is_empty() {
            ok &= chat.turn(line, &stop).await;
        }
        if stop.is_cancelled() {
            break;
        }
    }
    crate::shared::log::flush_log();
    if stop.is_cancelled() || ok { 0 } else { 1 }
}

fn usage(why: &str) -> u8 {
    crate::shared::log::tell("chat", why);
    2
}
