//! `clawbot_router mcp`: the same tool over the Model Context Protocol, for
//! hosts that load tools from an MCP server instead of spawning a command
//! per call. stdio transport, built on the official Rust SDK (`rmcp`).
//!
//! - `tools/list`: the one declaration of `tool-schemas/mcp.json`.
//! - `tools/call`: exactly the command line's call (CLI or gateway path,
//!   timeout, the seed's sentences); the result's text is the one JSON
//!   object the command line prints, also given as `structuredContent`;
//!   `isError` when the call did not succeed. While it runs, a client that
//!   sent a progress token gets `notifications/progress` every second (the
//!   elapsed seconds of `--timeout`, and what the agent is doing when the
//!   gateway streams it). `notifications/cancelled` stops the process tree
//!   (or aborts the gateway run). Calls run concurrently.
//! - `prompts/list` / `prompts/get`: the usage guidance of `prompts/` as the
//!   prompt `clawbot_router` (argument `lang`: zh | en).
//!
//! stdout carries the protocol and nothing else; the server ends at end of
//! input or on SIGINT/SIGTERM/SIGHUP, stopping every running call first.
//!
//! In front of rmcp sits a thin framing layer ([`frame_stdio`]): rmcp
//! silently drops a line that is not JSON, and ends the session when a
//! notification arrives before `initialize`; here a line that is not JSON
//! (or is longer than 64 MiB) is answered with JSON-RPC's -32700,
//! notifications and responses before `initialize` are dropped with a line
//! on stderr, and
//! a request before it (rmcp would end the session without a word) gets
//! [`not_initialized`]'s error, "send initialize first" — a `ping` an empty
//! result, as MCP allows pings before `initialize`.

pub mod http;

use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    Implementation, JsonObject, ListPromptsResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, Prompt, PromptArgument, PromptMessage, Role, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::router::messages::Lang;
use crate::router::result::Status;
use crate::router::{self, request};
use crate::schema;
use crate::shared::signals::Interrupt;

/// How often a running call reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// At end of input, running calls get this long before they are stopped.
const DRAIN: Duration = Duration::from_secs(5);

#[derive(Clone)]
struct Server {
    options: router::Options,
    tool: Tool,
    /// Fired when input ended and running calls had their time: they stop
    /// and answer, rather than vanish with the session.
    input_over: tokio_util::sync::CancellationToken,
    /// Why `input_over` fired, as a stopped call's answer says it.
    ending: &'static str,
    /// The calls running now (the HTTP server waits for them to answer).
    calls: tokio_util::task::TaskTracker,
}

/// Serves on stdio until end of input or a signal — or, with `http`, over
/// Streamable HTTP until a signal; the exit status.
pub async fn serve(options: router::Options, http: Option<http::Http>) -> u8 {
    let Some(tool) = tool() else {
        crate::shared::log::tell("mcp", "the tool declaration is not an object");
        return 1;
    };
    let input_over = tokio_util::sync::CancellationToken::new();
    let server = Server {
        options,
        tool,
        input_over: input_over.clone(),
        ending: "end of input",
        calls: tokio_util::task::TaskTracker::new(),
    };
    let interrupted = crate::shared::signals::interrupts();
    if let Some(http) = http {
        return http::serve(server, http, interrupted).await;
    }
    tokio::pin!(interrupted);
    let (input, output, writer) = frame_stdio(input_over);
    // A signal counts from the start: rmcp's `serve` waits for the client's
    // `initialize`, which a stuck client may never send.
    let started = tokio::select! {
        started = server.serve((input, output)) => started,
        signal = &mut interrupted => {
            say(&format!("{}: stopping (no session had begun)", signal.name));
            return 0;
        }
    };
    let running = match started {
        Ok(running) => running,
        Err(e) => {
            warn(&format!("no MCP session: {e}"));
            return 1;
        }
    };
    let cancel = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        _ = &mut waiting => {}
        signal = &mut interrupted => {
            // Every running call sees its request cancelled and stops its
            // tree before the process goes.
            say(&format!("{}: stopping", signal.name));
            cancel.cancel();
            let _ = tokio::time::timeout(DRAIN + Duration::from_secs(5), waiting).await;
        }
    }
    // rmcp is done (its side of the pipe is closed): what it wrote last
    // must still reach stdout before the process goes.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    0
}

/// A line of the log (escaped: a client's method names are its own
/// words), at the level `--log-level`/`--quiet` filter.
fn say(message: &str) {
    crate::shared::log::say_as("mcp", message);
}

fn warn(message: &str) {
    crate::shared::log::warn_as("mcp", message);
}

fn tool() -> Option<Tool> {
    let Value::Object(mut declaration) = schema::mcp_tool() else {
        return None;
    };
    let Some(Value::Object(input)) = declaration.remove("inputSchema") else {
        return None;
    };
    let text = |v: Option<Value>| v.and_then(|v| v.as_str().map(str::to_owned));
    let mut tool = Tool::new(
        schema::TOOL_NAME,
        text(declaration.remove("description")).unwrap_or_default(),
        std::sync::Arc::new(input),
    );
    tool.title = text(declaration.remove("title"));
    Some(tool)
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new(
            "clawbot_router",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(crate::schema::prompt(self.options.lang))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != schema::TOOL_NAME {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {:?}; this server has only {}",
                    request.name,
                    schema::TOOL_NAME
                ),
                None,
            ));
        }
        // The same validation, and the same sentences, as `--args-json`.
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let parsed = request::from_json(&arguments.to_string());
        let activity = crate::ui::Activity::default();
        let options = router::Options {
            activity: Some(activity.clone()),
            ..self.options.clone()
        };
        let _running = self.calls.token();
        let cancelled = context.ct.clone();
        let input_over = self.input_over.clone();
        let ending = self.ending;
        let cancel = async move {
            tokio::select! {
                _ = cancelled.cancelled() => Interrupt {
                    name: "MCP cancellation",
                    number: 0,
                },
                _ = input_over.cancelled() => Interrupt {
                    name: ending,
                    number: 0,
                },
            }
        };
        let call = router::call(parsed, &options, cancel);
        let progress = report_progress(&context, &options, &activity);
        let reply = tokio::select! {
            reply = call => reply,
            _ = progress => unreachable!("progress reports never end"),
        };
        let mut result = reply.result;
        result.meta = None;
        let value = serde_json::to_value(&result).expect("plain data");
        let text = serde_json::to_string(&result).expect("plain data");
        let mut answer = if reply.status == Status::Success {
            CallToolResult::success(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::error(vec![ContentBlock::text(text)])
        };
        answer.structured_content = Some(value);
        Ok(answer.into())
    }

    /// rmcp turns a `tools/call` whose params do not parse into an unknown
    /// method; it is a bad request for a method we have.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        const OURS: &[&str] = &["tools/call", "tools/list", "prompts/get", "prompts/list"];
        if OURS.contains(&request.method.as_str()) {
            Err(McpError::invalid_params(
                format!("invalid params for {}", request.method),
                None,
            ))
        } else {
            Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("unknown method {}", request.method),
                None,
            ))
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            schema::TOOL_NAME,
            Some(
                "When and how to use the clawbot_router tool (system-prompt guidance for the host LLM)",
            ),
            Some(vec![
                PromptArgument::new("lang")
                    .with_description("zh (default) or en")
                    .with_required(false),
            ]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name != schema::TOOL_NAME {
            return Err(McpError::invalid_params(
                format!(
                    "unknown prompt {:?}; this server has only {}",
                    request.name,
                    schema::TOOL_NAME
                ),
                None,
            ));
        }
        let lang = match prompt_lang(request.arguments.as_ref()) {
            Ok(lang) => lang,
            Err(e) => return Err(McpError::invalid_params(e, None)),
        };
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            crate::schema::prompt(lang),
        )])
        .with_description("clawbot_router usage guidance")
        .into())
    }
}

/// `lang` is optional; anything but zh / en is a mistake worth saying.
fn prompt_lang(arguments: Option<&JsonObject>) -> Result<Lang, String> {
    match arguments.and_then(|a| a.get("lang")) {
        None | Some(Value::Null) => Ok(Lang::Zh),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("zh") => Ok(Lang::Zh),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("en") => Ok(Lang::En),
        Some(other) => Err(format!("lang must be \"zh\" or \"en\", not {other}")),
    }
}

/// Sends progress every second while the call runs, if the client asked
/// for it (a progress token); never returns.
async fn report_progress(
    context: &RequestContext<RoleServer>,
    options: &router::Options,
    activity: &crate::ui::Activity,
) {
    let Some(token) = context.meta.get_progress_token() else {
        return std::future::pending().await;
    };
    let started = Instant::now();
    let total = options.timeout.as_secs_f64();
    let mut ticks =
        tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
    loop {
        ticks.tick().await;
        let elapsed = started.elapsed().as_secs_f64().min(total);
        let doing = activity.text();
        let message = if doing.is_empty() {
            format!("waiting for OpenClaw ({elapsed:.0}s of {total:.0}s)")
        } else {
            format!("{doing} ({elapsed:.0}s of {total:.0}s)")
        };
        let param = ProgressNotificationParam::new(token.clone(), elapsed)
            .with_total(total)
            .with_message(message);
        let _ = context.peer.notify_progress(param).await;
    }
}

/// How long the framing waits for rmcp's answer to `initialize`.
const INITIALIZE_LIMIT: Duration = Duration::from_secs(30);

/// The longest line accepted (a 4 MiB message escaped, with room to spare).
const MAX_LINE: usize = 64 * 1024 * 1024;

/// stdin and stdout as rmcp sees them: lines checked on the way in (see the
/// module's notes), and one writer for stdout, so our own error answers
/// never interleave with rmcp's. At end of input, requests still running
/// get [`DRAIN`]; then `input_over` stops them, they answer, and only then
/// does rmcp see the end (it would drop their answers otherwise).
fn frame_stdio(
    input_over: tokio_util::sync::CancellationToken,
) -> (
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<()>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let (rmcp_in, mut to_rmcp) = tokio::io::duplex(1 << 20);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(1 << 20);
    // Bounded: a client that never reads its answers makes us stop reading
    // its requests (the pipe pushes back), not hold every answer.
    let (answers_tx, mut answers) = tokio::sync::mpsc::channel::<String>(64);
    let pending = Pending::default();
    let answered = pending.clone();
    // stdin → checks → rmcp.
    tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut initialized = false;
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = (&mut stdin)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
                .await;
            match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let too_long = line.len() > MAX_LINE && !line.ends_with(b"\n");
            if too_long {
                // Skip the rest of the line without holding it.
                while let Ok(buf) = stdin.fill_buf().await {
                    if buf.is_empty() {
                        break;
                    }
                    let (used, found) = match buf.iter().position(|b| *b == b'\n') {
                        Some(i) => (i + 1, true),
                        None => (buf.len(), false),
                    };
                    stdin.consume(used);
                    if found {
                        break;
                    }
                }
                let _ = answers_tx
                    .send(parse_error("line longer than 64 MiB"))
                    .await;
                continue;
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let message = match serde_json::from_slice::<Value>(&line) {
                Ok(message) => message,
                Err(e) => {
                    let _ = answers_tx.send(parse_error(&e.to_string())).await;
                    continue;
                }
            };
            if let Some(problem) = not_json_rpc(&message) {
                // rmcp answers these without the request's id.
                let _ = answers_tx
                    .send(invalid_request(message.get("id"), problem))
                    .await;
                continue;
            }
            let method = message.get("method").and_then(Value::as_str);
            let is_request = message.get("id").is_some();
            let mut begins = None;
            if method == Some("initialize") && is_request {
                // Begun only if rmcp accepts it: after a failed one, rmcp
                // still takes nothing else (it would end the server).
                begins = message.get("id").map(|id| pending.initialize(id));
            } else if !initialized && is_request && method.is_some() {
                let id = message.get("id");
                let answer = match method {
                    Some("ping") => pong(id),
                    _ => not_initialized(id),
                };
                let _ = answers_tx.send(answer).await;
                continue;
            } else if !initialized && !is_request && method.is_some() {
                say(&format!(
                    "ignored {} before initialize",
                    method.unwrap_or("a notification")
                ));
                continue;
            } else if !initialized && method.is_none() {
                // A response to nothing we asked: rmcp would end the
                // server on it, before any session began.
                say("ignored a response before initialize");
                continue;
            }
            match (method, message.get("id")) {
                (Some("notifications/cancelled"), _) => {
                    // A cancelled request is not answered (MCP's rule).
                    pending.answered(&message["params"]["requestId"]);
                }
                (Some(_), Some(id)) => pending.asked(id),
                _ => {}
            }
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            if to_rmcp.write_all(&line).await.is_err() {
                break;
            }
            if let Some(begins) = begins {
                // The client waits for this answer too; a reader that never
                // hears (rmcp gone) lets the rest through as before.
                initialized = tokio::time::timeout(INITIALIZE_LIMIT, begins)
                    .await
                    .map_or(true, |begun| begun.unwrap_or(true));
            }
        }
        // End of input: running calls finish, or are stopped and answer.
        if !pending.wait_empty(DRAIN).await {
            input_over.cancel();
            pending.wait_empty(DRAIN).await;
        }
        let _ = to_rmcp.shutdown().await;
    });
    // rmcp's lines and our answers → stdout, whole lines only: rmcp's
    // bytes wait in their own buffer until their line is complete (a read
    // interrupted by an answer loses nothing, and an answer never lands in
    // the middle of one of rmcp's lines).
    let writer = tokio::spawn(async move {
        let mut from_rmcp = from_rmcp;
        let mut stdout = tokio::io::stdout();
        let mut partial: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        let (mut rmcp_open, mut answers_open) = (true, true);
        while rmcp_open || answers_open {
            let mut out: Vec<u8> = Vec::new();
            let mut from_rmcp_now = false;
            tokio::select! {
                read = from_rmcp.read(&mut chunk), if rmcp_open => match read {
                    Ok(0) | Err(_) => {
                        rmcp_open = false;
                        from_rmcp_now = true;
                        out = std::mem::take(&mut partial); // a last line without its newline
                    }
                    Ok(n) => {
                        from_rmcp_now = true;
                        partial.extend_from_slice(&chunk[..n]);
                        if let Some(end) = partial.iter().rposition(|b| *b == b'\n') {
                            out = partial.drain(..=end).collect();
                        }
                    }
                },
                answer = answers.recv(), if answers_open => match answer {
                    // Ours: never an answer to a pending request.
                    Some(answer) => out = answer.into_bytes(),
                    None => answers_open = false,
                },
            }
            if from_rmcp_now && !answered.is_empty() {
                for line in out.split(|b| *b == b'\n') {
                    answered.saw_output(line);
                }
            }
            if !out.is_empty()
                && (stdout.write_all(&out).await.is_err() || stdout.flush().await.is_err())
            {
                break;
            }
        }
    });
    (rmcp_in, rmcp_out, writer)
}

/// The ids of requests sent to rmcp and not answered yet.
#[derive(Clone, Default)]
struct Pending {
    ids: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    changed: std::sync::Arc<tokio::sync::Notify>,
    /// An `initialize` sent to rmcp: its id, and who hears whether rmcp
    /// answered it with a result (the session began) or an error.
    initialize: std::sync::Arc<std::sync::Mutex<Option<Awaited>>>,
}

type Awaited = (String, tokio::sync::oneshot::Sender<bool>);

impl Pending {
    /// Whether the `initialize` with `id`, about to be sent, begins the
    /// session: known once rmcp answers it.
    fn initialize(&self, id: &Value) -> tokio::sync::oneshot::Receiver<bool> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        *self.initialize.lock().unwrap() = Some((id_key(id), tx));
        rx
    }

    fn asked(&self, id: &Value) {
        self.ids.lock().unwrap().insert(id_key(id));
    }

    fn answered(&self, id: &Value) {
        if self.ids.lock().unwrap().remove(&id_key(id)) {
            self.changed.notify_waiters();
        }
    }

    fn is_empty(&self) -> bool {
        self.ids.lock().unwrap().is_empty()
    }

    /// A line of output: a response answers its request.
    fn saw_output(&self, line: &[u8]) {
        if line.is_empty() {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let is_response = message.get("method").is_none()
            && (message.get("result").is_some() || message.get("error").is_some());
        if let (true, Some(id)) = (is_response, message.get("id")) {
            let mut initialize = self.initialize.lock().unwrap();
            if initialize
                .as_ref()
                .is_some_and(|(key, _)| *key == id_key(id))
                && let Some((_, begun)) = initialize.take()
            {
                let _ = begun.send(message.get("result").is_some());
            }
            drop(initialize);
            self.answered(id);
        }
    }

    /// Until no request is pending (true) or `limit` passes (false).
    async fn wait_empty(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let changed = self.changed.notified();
            if self.is_empty() {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.is_empty();
            }
        }
    }
}

/// A line's message as the stdio framing reads it, for the fuzz targets
/// (`crate::fuzzing`): the answer it gets from us instead of rmcp, if any,
/// and the key its id is tracked by.
#[doc(hidden)]
pub fn read_message(message: &Value) -> (Option<String>, Option<String>) {
    let answer = not_json_rpc(message).map(|problem| invalid_request(message.get("id"), problem));
    (answer, message.get("id").map(id_key))
}

/// `prompts/get`'s `lang`, for the fuzz targets (`crate::fuzzing`).
#[doc(hidden)]
pub fn read_prompt_lang(arguments: Option<&JsonObject>) -> Result<(), String> {
    prompt_lang(arguments).map(drop)
}

/// A request id as rmcp writes it back: integers in their plain form.
fn id_key(id: &Value) -> String {
    match id {
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// Why `message` is not a JSON-RPC 2.0 request or notification (a
/// response — `result` or `error` without `method` — is never answered,
/// as JSON-RPC requires: it goes on to rmcp as it is).
pub(crate) fn not_json_rpc(message: &Value) -> Option<&'static str> {
    let Some(fields) = message.as_object() else {
        return Some("a JSON-RPC message is an object");
    };
    if !fields.contains_key("method")
        && (fields.contains_key("result") || fields.contains_key("error"))
    {
        return None;
    }
    if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some("\"jsonrpc\" must be \"2.0\"");
    }
    match fields.get("id") {
        None | Some(Value::String(_)) => {}
        // What rmcp takes: an integer that fits 64 bits.
        Some(Value::Number(n)) if n.is_i64() => {}
        Some(_) => return Some("\"id\" must be a string or an integer"),
    }
    match fields.get("method") {
        Some(Value::String(_)) => None,
        Some(_) => Some("\"method\" must be a string"),
        None => Some("a request needs a \"method\""),
    }
}

/// JSON-RPC's answer to a message that is not a valid request: with its id
/// when it has a usable one.
pub(crate) fn invalid_request(id: Option<&Value>, problem: &str) -> String {
    let id = match id {
        Some(id @ Value::String(_)) => id.clone(),
        Some(Value::Number(n)) if n.is_i64() => Value::Number(n.clone()),
        _ => Value::Null,
    };
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32600, "message": format!("Invalid request: {problem}")},
    })
    .to_string()
        + "\n"
}

/// The answer to a request sent before `initialize` (stdio and HTTP): MCP
/// takes none but `initialize` (and `ping`) until the session has begun.
pub(crate) fn not_initialized(id: Option<&Value>) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {
            "code": -32600,
            "message": "Invalid request: the session has not begun: send initialize first",
        },
    })
    .to_string()
        + "\n"
}

/// `ping`'s empty result.
pub(crate) fn pong(id: Option<&Value>) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null), "result": {}})
        .to_string()
        + "\n"
}

/// JSON-RPC's answer to a line that is not JSON.
fn parse_error(detail: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: {detail}")},
    })
    .to_string()
        + "\n"
}
