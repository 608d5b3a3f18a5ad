//! Seed 001: the desktop side of the General Agent Service's HTTP/SSE
//! contract (charlieqf/jarvis, `docs/11-api-general-agent-service.md`).
//! A turn is `POST /v1/chat` read as SSE: deltas go to stdout, each
//! `tool.request` runs through the one dispatch and policy — the stricter
//! of the service's `risk` and our own class wins, `forbidden` never runs
//! — and is answered with `POST /v1/tools/result`. A stream that drops or
//! falls silent mid-turn is reopened with backoff: resumed with
//! `Last-Event-ID` when the service gave its events ids, the message
//! re-sent otherwise. The conversation's own commands (`/remember`,
//! `/search`, …: `lines`) and `chat memory` reach the service's memory
//! (`memory`). This module only translates.
//!
//! A service may be hostile. A `tool.request` id is run at most once: the
//! link's replay memory (`super::replay`, on disk) remembers every id run,
//! by time, across restarts. Results go back over at most [`POSTS`]
//! connections at once, and at most [`MAX_PENDING`] requests are held
//! (running or waiting to post); past that the stream is not read until
//! one ends, so a flood of requests slows the service's own stream rather
//! than growing the link.

mod lines;
pub mod memory;
mod script;
mod session;
mod sse;
mod turn;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::Method;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::http::{Failure, Service};
use super::replay::{Admit, Replay};
use crate::tools::policy::Gate;
use crate::tools::{Invocation, Tools};
use session::Session;

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

/// `text` cut to 300 characters, for a line that quotes a service.
fn cut(text: &str) -> String {
    text.chars().take(300).collect()
}

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

pub struct Chat {
    options: Options,
    tools: Arc<Tools>,
    session: Session,
    calls: Mutex<VecDeque<(String, Kept)>>,
    replay: Replay,
    running: Arc<tokio::sync::Semaphore>,
    pending: Arc<tokio::sync::Semaphore>,
    posts: tokio::sync::Semaphore,
    /// The assistant's text left a line open on stdout.
    open_line: std::sync::atomic::AtomicBool,
}

impl Chat {
    pub async fn start(
        session: Session,
        options: Options,
        tools: Arc<Tools>,
    ) -> Result<Arc<Self>, String> {
        let service = session.service();
        let health = service
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
                    service.shown()
                )
            })?;
        if health["healthy"] != true {
            return Err(format!(
                "the General Agent Service at {} says it is not healthy: {health}",
                service.shown()
            ));
        }
        say(&format!(
            "{} is healthy (version {}, up {} ms)",
            service.shown(),
            health["version"].as_str().unwrap_or("?"),
            health["uptime_ms"]
        ));
        let scope = format!("{} {}", service.shown(), session.conversation());
        let replay = Replay::open(session.state_dir(), "chat", &scope)?;
        session
            .open(true, REQUEST_WITHIN)
            .await
            .map_err(|e| format!("cannot open a session: {}", e.shown()))?;
        Ok(Arc::new(Self {
            options,
            tools,
            session,
            calls: Mutex::new(VecDeque::new()),
            replay,
            running: Arc::new(tokio::sync::Semaphore::new(MAX_CALLS)),
            pending: Arc::new(tokio::sync::Semaphore::new(MAX_PENDING)),
            posts: tokio::sync::Semaphore::new(POSTS),
            open_line: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    fn service(&self) -> &Service {
        self.session.service()
    }

    fn session(&self) -> String {
        self.session.id()
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
            .service()
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

/// `clawbot_router chat …`: a conversation, or (`chat memory …`) one
/// memory command from a script; the exit code.
pub async fn main(
    command: crate::cli::ChatCommand,
    print: fn(&str),
    stop: CancellationToken,
) -> u8 {
    match command.memory {
        Some(crate::cli::ChatMemory::Memory(memory)) => {
            script::main(memory, &command.on, print, stop).await
        }
        None => chat_main(command.run, &command.on, print, stop).await,
    }
}

/// The conversation's session with the service `on` names (not opened).
fn session_for(
    on: &crate::cli::AgentService,
    conversation: &str,
    state_dir: std::path::PathBuf,
) -> Result<Session, String> {
    let service = Service::parse(&on.service, on.allow_remote)?;
    let conversation = conversation.trim().to_owned();
    if conversation.is_empty()
        || conversation.len() > 256
        || conversation.chars().any(char::is_control)
    {
        return Err("--conversation is 1 to 256 bytes of printable text".into());
    }
    Ok(Session::new(service, conversation, state_dir))
}

/// The first message (if given), then each line of stdin: a turn each,
/// or one of the conversation's own commands (`lines`).
async fn chat_main(
    args: crate::cli::ChatArgs,
    on: &crate::cli::AgentService,
    print: fn(&str),
    stop: CancellationToken,
) -> u8 {
    let session = match session_for(on, &args.conversation, args.hands.state_dir()) {
        Ok(session) => session,
        Err(why) => return usage(&why),
    };
    let tools = match super::link_tools(&args.hands, "The General Agent Service") {
        Ok(hands) => hands,
        Err(why) => return usage(&why),
    };
    let options = Options {
        dead_after: Duration::from_secs(args.dead_after),
        tool_timeout: Duration::from_secs(args.tool_timeout),
        print,
    };
    let chat = match Chat::start(session, options, tools).await {
        Ok(chat) => chat,
        Err(why) => {
            error(&why);
            crate::shared::log::flush_log();
            return 1;
        }
    };
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        say(
            "each line is a message; /help lists the conversation's own commands (/remember, /daily, /search)",
        );
    }
    let mut lines = crate::ui::stdin_messages();
    let mut ok = true;
    if let Some(first) = args
        .message
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        ok &= chat.line(first, &stop).await;
    }
    while let Some(rx) = lines.as_mut() {
        let line = tokio::select! {
            line = rx.recv() => line,
            _ = stop.cancelled() => None,
        };
        let Some(line) = line else { break };
        let line = line.trim();
        if !line.is_empty() {
            ok &= chat.line(line, &stop).await;
        }
        if stop.is_cancelled() {
            break;
        }
    }
    crate::shared::log::flush_log();
    if stop.is_cancelled() || ok { 0 } else { 1 }
}

impl Chat {
    /// One line of the conversation: a turn, or a command of ours.
    async fn line(self: &Arc<Self>, line: &str, stop: &CancellationToken) -> bool {
        let work = async {
            match lines::parse(line) {
                lines::Line::Say(text) => return self.turn(&text, stop).await,
                lines::Line::Help => self.print(lines::HELP),
                lines::Line::Wrong(why) => {
                    error(&format!(
                        "{why} (/help lists the commands; nothing was sent)"
                    ));
                    return false;
                }
                lines::Line::Remember(target, content) => {
                    let write = memory::write(&self.session, target, &content, REQUEST_WITHIN);
                    match memory::deadline(REQUEST_WITHIN, write).await {
                        Ok(path) => self.print(&memory::shown_write(target, &path)),
                        Err(problem) => {
                            error(&format!("the note was not saved: {}", problem.shown()));
                            return false;
                        }
                    }
                }
                lines::Line::Search(search) => {
                    let found = memory::search(self.service(), &search, REQUEST_WITHIN);
                    match memory::deadline(REQUEST_WITHIN, found).await {
                        Ok(found) => self.print(&memory::shown_found(&search.query, &found)),
                        Err(problem) => {
                            error(&format!("the search failed: {}", problem.shown()));
                            return false;
                        }
                    }
                }
            }
            true
        };
        tokio::select! {
            ok = work => ok,
            _ = stop.cancelled() => false,
        }
    }
}

fn usage(why: &str) -> u8 {
    crate::shared::log::tell("chat", why);
    2
}
