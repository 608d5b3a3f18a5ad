//! Seed 004: the bridge server a coding agent's channel plugin connects
//! back to (`ws://127.0.0.1:18801/bridge`). Each client proves the shared
//! token and binds one OpenClaw session; its `tool_call`s run through the
//! one dispatch and policy, its `permission_request`s go to the local
//! user, and messages for its session (`bridge send`) reach it — buffered
//! while it is away. This module only translates frames. Strangers — those
//! who have not proven the token — are held to a small budget
//! ([`strangers`]).

mod frames;
mod hub;
mod strangers;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::{
    CloseFrame, WebSocketConfig, frame::coding::CloseCode,
};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_util::sync::CancellationToken;

use crate::tools::policy::Gate;
use crate::tools::{Invocation, Tools, catalog};
use frames::{In, Out};

/// The frame reader, for the fuzz targets (`crate::fuzzing`).
#[doc(hidden)]
pub use frames::{call_id_of, is_request_id, parse as parse_frame};
pub use hub::Hub;
use strangers::{Budget, Metered, PRE_HELLO_BYTES, Stranger, Strangers};

/// The path the seed's clients connect to.
pub const PATH: &str = "/bridge";
/// The largest frame taken from a bound client; a bigger one closes that
/// connection (1009). Strangers get far less (`strangers`).
const MAX_FRAME: usize = 16 << 20;
/// Bytes read from the socket at a time: the buffer every connection,
/// strangers' included, holds (tungstenite's default is 128 KiB).
const READ_BUFFER: usize = 16 << 10;
/// Tool calls one connection may have running at once; more are refused.
const MAX_CALLS: usize = 8;
/// Frames queued for one client before its error answers are dropped.
const QUEUE: usize = 256;
/// A client that takes no frame for this long is gone.
const SEND_WITHIN: Duration = Duration::from_secs(30);
/// How long a new connection has to say `hello`.
const HELLO_WITHIN: Duration = Duration::from_secs(10);
/// Bytes a tool result may carry.
const MAX_RESULT: usize = 4 << 20;

fn say(message: &str) {
    crate::shared::log::say_as("bridge", message);
}

/// Something went wrong and this link carries on.
fn warn(message: &str) {
    crate::shared::log::warn_as("bridge", message);
}

/// Something this link was asked to do failed.
fn error(message: &str) {
    crate::shared::log::error_as("bridge", message);
}

/// How the bridge runs.
pub struct Options {
    pub listen: SocketAddr,
    pub token: String,
    pub sessions: Vec<String>,
    pub buffer: usize,
    pub ping_every: Duration,
    pub tool_timeout: Duration,
}

/// Serves until `stop`; returns the exit code.
pub async fn serve(options: Options, tools: Arc<Tools>, stop: CancellationToken) -> u8 {
    let listener = match TcpListener::bind(options.listen).await {
        Ok(l) => l,
        Err(e) => {
            error(&format!("cannot listen on {}: {e}", options.listen));
            crate::shared::log::flush_log();
            return 1;
        }
    };
    let at = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    say(&format!(
        "listening on ws://{at}{PATH} for sessions {}",
        options.sessions.join(", ")
    ));
    let hub = Arc::new(Hub::new(options.sessions.clone(), options.buffer));
    let shared = Arc::new(Shared {
        options,
        tools,
        hub,
        strangers: Strangers::new(),
        tasks: tokio_util::task::TaskTracker::new(),
    });
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let shared = Arc::clone(&shared);
                    let stop = stop.child_token();
                    let tasks = shared.tasks.clone();
                    tasks.spawn(async move { connection(shared, stream, peer, stop).await });
                }
                Err(e) => {
                    warn(&format!("accept failed: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    say("stopping: calls in flight are cancelled");
    // Connections see the stop through their child tokens; their calls
    // stop their trees (TERM, grace, KILL) and end.
    shared.tasks.close();
    if tokio::time::timeout(Duration::from_secs(15), shared.tasks.wait())
        .await
        .is_err()
    {
        warn("calls still stopping after 15 s; leaving");
    }
    crate::shared::log::flush_log();
    0
}

struct Shared {
    options: Options,
    tools: Arc<Tools>,
    hub: Arc<Hub>,
    strangers: Arc<Strangers>,
    /// Every connection and every call or question it started: the bridge
    /// stops when they have.
    tasks: tokio_util::task::TaskTracker,
}

/// The WebSocket upgrade: only the seed's path, and never from a web page
/// (a browser always sends `Origin`; the plugin never does). An
/// `Authorization: Bearer` header (`bridge send`'s) must carry the token,
/// and then the connection is no stranger.
#[allow(clippy::result_large_err)] // tungstenite's callback signature
fn check_upgrade(
    request: &Request,
    response: Response,
    token: &str,
    budget: &Budget,
) -> Result<Response, ErrorResponse> {
    let refuse = |status: u16, why: &str| {
        let mut r = ErrorResponse::new(Some(why.to_owned()));
        *r.status_mut() = tokio_tungstenite::tungstenite::http::StatusCode::from_u16(status)
            .unwrap_or(tokio_tungstenite::tungstenite::http::StatusCode::BAD_REQUEST);
        r
    };
    if request.uri().path() != PATH {
        return Err(refuse(404, "the bridge is at /bridge"));
    }
    if request.headers().contains_key("origin") {
        return Err(refuse(403, "web pages may not connect to the bridge"));
    }
    if let Some(value) = request.headers().get("authorization") {
        let given = value.to_str().unwrap_or_default();
        match given.strip_prefix("Bearer ") {
            Some(given) if crate::shared::secrets::same_secret(given, token) => budget.trust(),
            _ => return Err(refuse(401, "wrong token")),
        }
    }
    Ok(response)
}

async fn connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    stop: CancellationToken,
) {
    let mut stranger = Some(shared.strangers.admit());
    let evicted = stranger
        .as_ref()
        .map(|s| s.evicted.clone())
        .unwrap_or_default();
    let budget = Arc::new(Budget::default());
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME));
    let token = shared.options.token.clone();
    let checked = Arc::clone(&budget);
    #[allow(clippy::result_large_err)] // tungstenite's callback signature
    let upgrade = tokio_tungstenite::accept_hdr_async_with_config(
        Metered::new(stream, Arc::clone(&budget)),
        move |request: &Request, response: Response| {
            check_upgrade(request, response, &token, &checked)
        },
        Some(config),
    );
    let ws = tokio::select! {
        upgraded = tokio::time::timeout(HELLO_WITHIN, upgrade) => match upgraded {
            Ok(Ok(ws)) => ws,
            Ok(Err(e)) => {
                warn(&format!("{peer}: refused the upgrade: {e}"));
                return;
            }
            Err(_) => return,
        },
        _ = evicted.cancelled() => return,
    };
    if budget.trusted() {
        stranger = None;
    }
    let (mut sink, mut source) = ws.split();
    let (out, mut outgoing) = mpsc::channel::<Message>(QUEUE);
    // A client that stops reading ends its connection, not the bridge's
    // memory: each frame has SEND_WITHIN to go out.
    let gone = stop.clone();
    let mut writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            let closing = matches!(message, Message::Close(_));
            let sent = tokio::time::timeout(SEND_WITHIN, sink.send(message)).await;
            if !matches!(sent, Ok(Ok(()))) || closing {
                break;
            }
        }
        gone.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(2), sink.close()).await;
    });
    let mut link = Link {
        shared,
        out,
        bound: None,
        calls: Arc::new(Semaphore::new(MAX_CALLS)),
        cancel: stop,
        peer,
        stranger,
        budget,
    };
    link.run(&mut source).await;
    link.cancel.cancel();
    if let Some((session, id)) = &link.bound {
        link.shared.hub.unbind(session, *id);
        say(&format!("{peer}: session {session} disconnected"));
    }
    drop(link);
    if tokio::time::timeout(Duration::from_secs(3), &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
}

type Source =
    futures_util::stream::SplitStream<tokio_tungstenite::WebSocketStream<Metered<TcpStream>>>;

/// One client connection.
struct Link {
    shared: Arc<Shared>,
    out: mpsc::Sender<Message>,
    /// The session this connection serves, and its binding's id.
    bound: Option<(String, u64)>,
    calls: Arc<Semaphore>,
    /// Cancelled when the connection ends or the bridge stops: every call
    /// it started stops with it.
    cancel: CancellationToken,
    peer: SocketAddr,
    /// Its place among the strangers, until it proves the token.
    stranger: Option<Stranger>,
    budget: Arc<Budget>,
}

impl Link {
    async fn run(&mut self, source: &mut Source) {
        let mut ticks = tokio::time::interval(self.shared.options.ping_every);
        ticks.tick().await;
        let mut unanswered = 0u32;
        let hello_by = tokio::time::sleep(HELLO_WITHIN);
        tokio::pin!(hello_by);
        let evicted = self
            .stranger
            .as_ref()
            .map(|s| s.evicted.clone())
            .unwrap_or_default();
        loop {
            let frame = tokio::select! {
                _ = self.cancel.cancelled() => {
                    self.close(CloseCode::Away, "the bridge is stopping").await;
                    return;
                }
                _ = evicted.cancelled(), if self.stranger.is_some() => {
                    self.close(CloseCode::Policy, "too many connections are waiting to say hello; the oldest is closed").await;
                    return;
                }
                _ = &mut hello_by, if self.bound.is_none() => {
                    self.close(CloseCode::Policy, "no hello in time").await;
                    return;
                }
                _ = ticks.tick(), if self.bound.is_some() => {
                    // Two pings without a pong: the client is gone.
                    if unanswered >= 2 {
                        warn(&format!("{}: two pings unanswered; the connection is dead", self.peer));
                        self.close(CloseCode::Away, "two pings unanswered").await;
                        return;
                    }
                    unanswered += 1;
                    // A queue too full for a ping: the client is not reading.
                    if self.out.try_send(Message::text(Out::Ping { ts: crate::shared::clock::now_ms() }.text())).is_err() {
                        warn(&format!("{}: frames are not being read; the connection is dead", self.peer));
                        return;
                    }
                    continue;
                }
                frame = source.next() => frame,
            };
            let text = match frame {
                None => return,
                Some(Ok(Message::Text(text))) => text.to_string(),
                Some(Ok(Message::Binary(_))) => {
                    self.complain(
                        "binary frames are not taken: send JSON text frames".into(),
                        None,
                    );
                    continue;
                }
                Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => continue, // WebSocket ping/pong: tungstenite answers
                Some(Err(WsError::Io(e))) if Budget::spent(&e) => {
                    warn(&format!(
                        "{}: more than {PRE_HELLO_BYTES} bytes before hello; closing",
                        self.peer
                    ));
                    self.close(
                        CloseCode::Size,
                        &format!("before hello, a connection may send {PRE_HELLO_BYTES} bytes"),
                    )
                    .await;
                    return;
                }
                Some(Err(WsError::Capacity(e))) => {
                    warn(&format!("{}: frame too large ({e}); closing", self.peer));
                    self.close(
                        CloseCode::Size,
                        &format!("frames are limited to {MAX_FRAME} bytes"),
                    )
                    .await;
                    return;
                }
                Some(Err(e)) => {
                    warn(&format!("{}: connection failed: {e}", self.peer));
                    return;
                }
            };
            let frame = match frames::parse(&text) {
                Ok(frame) => frame,
                Err(why) => {
                    self.complain(why, frames::call_id_of(&text));
                    continue;
                }
            };
            match frame {
                In::Hello { .. } if self.bound.is_some() => {
                    self.complain("this connection already said hello".into(), None);
                }
                In::Hello {
                    openclaw_session,
                    claude_session,
                    pid,
                    token,
                } => {
                    if !self
                        .hello(openclaw_session, claude_session, pid, &token)
                        .await
                    {
                        return;
                    }
                }
                In::Send {
                    token,
                    session,
                    content,
                    meta,
                } => {
                    self.deliver(&token, session, content, meta).await;
                    return;
                }
                _ if self.bound.is_none() => {
                    self.close(CloseCode::Policy, "say hello first").await;
                    return;
                }
                In::ToolCall {
                    call_id,
                    tool,
                    args,
                } => self.tool_call(call_id, tool, args),
                In::PermissionRequest {
                    request_id,
                    tool,
                    args,
                    rationale,
                } => self.permission(request_id, tool, args, rationale),
                In::Ping { ts } => self.try_send(Out::Pong { ts }),
                In::Pong { .. } => unanswered = 0,
            }
        }
    }

    /// Checks the token and the session, binds, answers `hello_ack`, then
    /// flushes what was buffered for the session. False: closed.
    async fn hello(
        &mut self,
        session: String,
        claude: Option<String>,
        pid: Option<u64>,
        token: &str,
    ) -> bool {
        if !crate::shared::secrets::same_secret(token, &self.shared.options.token) {
            warn(&format!("{}: hello with a wrong token; closed", self.peer));
            self.close(CloseCode::Policy, "wrong token").await;
            return false;
        }
        let Some((id, buffered)) =
            self.shared
                .hub
                .bind(&session, self.out.clone(), self.cancel.clone())
        else {
            say(&format!(
                "{}: hello for unknown session {:?}; closed",
                self.peer,
                session.chars().take(100).collect::<String>()
            ));
            self.close(CloseCode::Policy, "unknown session").await;
            return false;
        };
        self.bound = Some((session.clone(), id));
        // No stranger now: the full frame limit, and its place freed.
        self.budget.trust();
        self.stranger = None;
        let tools: Vec<Value> = catalog::ENTRIES
            .iter()
            .filter(|e| self.shared.tools.declared().iter().any(|d| d == e.name))
            .map(|e| json!({"name": e.name, "description": e.description, "input_schema": (e.parameters)()}))
            .collect();
        let meta = json!({
            "openclaw_session": session,
            "claude_session": claude,
            "pid": pid,
            "workspace": self.shared.tools.workspace().root().display().to_string(),
            "buffered": buffered.len(),
        });
        say(&format!(
            "{}: session {session} bound (claude session {}, pid {}); {} buffered message(s) follow",
            self.peer,
            claude
                .as_deref()
                .unwrap_or("-")
                .chars()
                .take(100)
                .collect::<String>(),
            pid.map_or("-".into(), |p| p.to_string()),
            buffered.len()
        ));
        self.send(Out::HelloAck {
            tools,
            session_meta: meta,
        })
        .await;
        for message in buffered {
            self.send(message).await;
        }
        true
    }

    /// `bridge send`: hand the message to the session's client, or buffer it.
    async fn deliver(&mut self, token: &str, session: String, content: String, meta: Value) {
        if !crate::shared::secrets::same_secret(token, &self.shared.options.token) {
            self.close(CloseCode::Policy, "wrong token").await;
            return;
        }
        let answer = match self.shared.hub.deliver(&session, content, meta) {
            Ok((request_id, delivered, buffered)) => Out::SendAck {
                request_id,
                delivered,
                buffered,
            },
            Err(why) => Out::Error {
                error: why,
                call_id: None,
            },
        };
        self.send(answer).await;
        self.close(CloseCode::Normal, "done").await;
    }

    fn tool_call(&self, call_id: String, tool: String, args: Value) {
        let Ok(permit) = Arc::clone(&self.calls).try_acquire_owned() else {
            self.try_send(Out::ToolResult {
                call_id,
                ok: false,
                result: None,
                error: Some(format!(
                    "BUSY: {MAX_CALLS} tool calls are already running on this connection; try again when one ends"
                )),
            });
            return;
        };
        self.answer(move |tools, cancel, timeout| async move {
            let _permit = permit;
            let params = serde_json::to_string(&args).unwrap_or_default();
            let (result, _) = tools
                .invoke(Invocation {
                    keep: None,
                    id: &call_id,
                    command: &tool,
                    params_json: Some(&params),
                    timeout,
                    max_bytes: MAX_RESULT,
                    cancel,
                    tap: None,
                    agent: None,
                    gate: Gate::Ours,
                    gateway: None,
                })
                .await;
            match result {
                Ok(value) => Out::ToolResult {
                    call_id,
                    ok: true,
                    result: Some(value),
                    error: None,
                },
                Err(e) => Out::ToolResult {
                    call_id,
                    ok: false,
                    result: None,
                    error: Some(format!("{}: {}", e.code, e.message)),
                },
            }
        });
    }

    /// Runs `work` beside the connection (with the tools, a token the
    /// connection's end cancels, and the time a call may take) and sends
    /// the frame it makes.
    fn answer<F, W>(&self, work: W)
    where
        W: FnOnce(Arc<Tools>, CancellationToken, Duration) -> F,
        F: std::future::Future<Output = Out> + Send + 'static,
    {
        let frame = work(
            Arc::clone(&self.shared.tools),
            self.cancel.child_token(),
            self.shared.options.tool_timeout,
        );
        let out = self.out.clone();
        self.shared.tasks.spawn(async move {
            let frame = frame.await;
            let _ = out.send(Message::text(frame.text())).await;
        });
    }

    /// The client's agent asks to use one of its own tools: the local
    /// user (or the policy's standing answer) decides.
    fn permission(&self, request_id: String, tool: String, args: Value, rationale: String) {
        if !frames::is_request_id(&request_id) {
            self.complain(
                format!("permission_request: request_id {request_id:?} is not five lowercase letters without l"),
                None,
            );
            return;
        }
        let Ok(permit) = Arc::clone(&self.calls).try_acquire_owned() else {
            say(&format!(
                "{}: permission_request {request_id} while {MAX_CALLS} calls and questions are open: denied",
                self.peer
            ));
            self.try_send(Out::PermissionReply {
                request_id,
                behavior: "deny",
            });
            return;
        };
        self.answer(move |tools, cancel, timeout| async move {
            let _permit = permit;
            let allowed = tools
                .permit(&request_id, &tool, &args, &rationale, timeout, &cancel)
                .await;
            Out::PermissionReply {
                request_id,
                behavior: if allowed { "allow" } else { "deny" },
            }
        });
    }

    /// An error answer; dropped when the client is not reading them.
    fn complain(&self, error: String, call_id: Option<String>) {
        self.try_send(Out::Error { error, call_id });
    }

    fn try_send(&self, frame: Out) {
        let _ = self.out.try_send(Message::text(frame.text()));
    }

    async fn send(&self, frame: Out) {
        let _ = self.out.send(Message::text(frame.text())).await;
    }

    async fn close(&self, code: CloseCode, reason: &str) {
        let _ = self
            .out
            .send(Message::Close(Some(CloseFrame {
                code,
                reason: reason.to_owned().into(),
            })))
            .await;
    }
}

/// `bridge send`: one message for `session`, through the running bridge.
pub async fn send(
    url: &str,
    token: &str,
    session: &str,
    content: &str,
    meta: Value,
) -> Result<Value, String> {
    let frame = json!({"type": "send", "token": token, "session": session, "content": content, "meta": meta});
    let work = async {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        // The token in the upgrade too: the bridge then takes a message
        // larger than a stranger's budget.
        let mut request = url
            .into_client_request()
            .map_err(|e| format!("{url} is not a bridge address: {e}"))?;
        let bearer = format!("Bearer {token}")
            .parse()
            .map_err(|_| "the bridge token cannot go in an HTTP header".to_owned())?;
        request.headers_mut().insert("authorization", bearer);
        let (mut ws, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|e| match e {
                WsError::Http(answer) if answer.status() == 401 => "wrong token".to_owned(),
                e => format!("cannot reach the bridge at {url}: {e}"),
            })?;
        ws.send(Message::text(frame.to_string()))
            .await
            .map_err(|e| format!("cannot send to the bridge: {e}"))?;
        while let Some(message) = ws.next().await {
            match message {
                Ok(Message::Text(text)) => {
                    let value: Value = serde_json::from_str(&text)
                        .map_err(|e| format!("the bridge answered something else: {e}"))?;
                    return match value["type"].as_str() {
                        Some("send_ack") => Ok(value),
                        _ => Err(value["error"].as_str().unwrap_or("refused").to_owned()),
                    };
                }
                Ok(Message::Close(frame)) => {
                    return Err(format!(
                        "the bridge closed the connection: {}",
                        frame.map(|f| f.reason.to_string()).unwrap_or_default()
                    ));
                }
                Ok(_) => {}
                Err(e) => return Err(format!("the bridge connection failed: {e}")),
            }
        }
        Err("the bridge closed the connection without an answer".into())
    };
    tokio::time::timeout(Duration::from_secs(10), work)
        .await
        .unwrap_or_else(|_| Err("the bridge did not answer within 10 s".into()))
}

/// `clawbot_router bridge …` from its flags; the exit code. `print` is
/// app's stdout writer: `bridge send`'s answer is the only thing this room
/// has for stdout, and app is the only room that writes there.
pub async fn main(
    command: crate::cli::BridgeCommand,
    print: fn(&str),
    stop: CancellationToken,
) -> u8 {
    let result = match command.send {
        Some(crate::cli::BridgeSend::Send(args)) => send_main(args, print).await,
        None => serve_main(command.run, stop).await,
    };
    result.unwrap_or_else(|problem| {
        crate::shared::log::tell("bridge", &problem);
        2
    })
}

fn token(t: &crate::cli::BridgeToken) -> Result<String, String> {
    crate::shared::secrets::secret(&crate::shared::secrets::SecretSource {
        flag: t.token.as_deref(),
        file: t.token_file.as_deref(),
        file_flag: "--token-file",
        var: "CLAWBOT_BRIDGE_TOKEN",
        what: "the bridge token",
    })
}

async fn serve_main(args: crate::cli::BridgeArgs, stop: CancellationToken) -> Result<u8, String> {
    let listen =
        crate::shared::net::listen_address(&args.listen, args.allow_remote, "the bridge token")?;
    let token = token(&args.token)?;
    let mut sessions = Vec::new();
    for s in args.sessions {
        let s = s.trim().to_owned();
        if s.is_empty() || s.len() > 256 || s.chars().any(char::is_control) {
            return Err(format!(
                "--session {s:?}: a session id is 1 to 256 printable characters"
            ));
        }
        if !sessions.contains(&s) {
            sessions.push(s);
        }
    }
    if sessions.is_empty() {
        return Err("name the sessions clients may bind: --session ID (repeatable)".into());
    }
    let tools = super::link_tools(&args.hands, "The bridged agent")?;
    let options = Options {
        listen,
        token,
        sessions,
        buffer: usize::from(args.buffer),
        ping_every: Duration::from_secs(args.ping_interval),
        tool_timeout: Duration::from_secs(args.tool_timeout),
    };
    Ok(serve(options, tools, stop).await)
}

async fn send_main(args: crate::cli::BridgeSendArgs, print: fn(&str)) -> Result<u8, String> {
    let token = token(&args.token)?;
    let meta = match &args.meta {
        Some(text) => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .ok_or("--meta must be a JSON object")?,
        None => Value::Null,
    };
    let listen = crate::shared::net::listen_address(&args.listen, true, "the bridge token")?;
    let url = format!("ws://{listen}{PATH}");
    match send(&url, &token, &args.session, &args.text, meta).await {
        Ok(answer) => {
            print(&format!("{answer}\n"));
            Ok(0)
        }
        Err(problem) => {
            crate::shared::log::tell("bridge send", &problem);
            Ok(1)
        }
    }
}
