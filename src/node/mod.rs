//! THE LOOP: `clawbot_router node` — connect to the gateway as a node, keep
//! the connection alive for ever, answer `node.invoke.request` with
//! `node.invoke.result`, several at a time, and stop cleanly on Ctrl-C.
//!
//! Connection policy (what OpenClaw's own node host does, seen on the wire):
//! - the device token from `hello-ok` is saved and used on later connects;
//!   if the gateway refuses it, the shared token is tried, and the reverse
//!   when the gateway says `canRetryWithDeviceToken`;
//! - `PAIRING_REQUIRED` prints the operator's command and keeps retrying;
//! - any drop reconnects with exponential backoff (1 s → 30 s, jittered);
//!   two tick intervals of silence count as a drop;
//! - only configuration errors the user must fix end the process (exit 1).
//!
//! Everything the node prints goes to stderr: it is a long-running service.

pub mod backoff;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::gateway::client::{self, ConnectError, Connection};
use crate::gateway::frames::{
    Auth, ClientInfo, ConnectParams, ErrorShape, Frame, InvokeError, InvokeRequest, InvokeResult,
    MAX_PROTOCOL, MIN_PROTOCOL, NodeEvent,
};
use crate::gateway::identity::{self, Identity, SignedFields, TokenStore};
use crate::tools::policy::{Mode, Policy};
use crate::tools::sandbox::Workspace;
use crate::tools::{self, Invocation, ToolError, Tools};
use crate::ui::Prompter;
use backoff::Backoff;

/// The closed set of client ids the gateway accepts for nodes.
const CLIENT_ID: &str = "node-host";
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(20);
/// Default for an invocation that names no timeout.
const DEFAULT_INVOKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Answer this long before the caller gives up, so the answer still counts.
const ANSWER_MARGIN: Duration = Duration::from_millis(250);
/// How often to ask whether the command surface was approved.
const SURFACE_PROBE: Duration = Duration::from_secs(5);
/// On Ctrl-C, how long running invocations get to stop and report.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
/// A pairing request is retried at least this often, so an approval is
/// picked up quickly, but never faster than the backoff allows.
const PAIRING_RETRY_CAP: Duration = Duration::from_secs(10);

pub struct Options {
    pub gateway: String,
    pub token: Option<String>,
    pub display_name: Option<String>,
    pub state_dir: PathBuf,
    pub workspace: PathBuf,
    pub approval: Mode,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// Runs the node until Ctrl-C (exit 0) or a configuration error (exit 1).
pub async fn run(options: Options) -> u8 {
    match Node::start(options) {
        Ok(node) => node.serve().await,
        Err(message) => {
            say(&message);
            1
        }
    }
}

fn say(message: &str) {
    eprintln!("[clawbot_router node] {message}");
}

struct Node {
    options: Options,
    identity: Identity,
    tokens: TokenStore,
    tools: Arc<Tools>,
    display_name: String,
}

/// How a session ended.
enum End {
    Shutdown,
    Dropped(String),
}

/// Which token the next connect presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenChoice {
    Device,
    Shared,
}

impl Node {
    fn start(options: Options) -> Result<Self, String> {
        identity::create_private_dir(&options.state_dir).map_err(|e| {
            format!(
                "cannot create the state directory {}: {e}",
                options.state_dir.display()
            )
        })?;
        let identity = Identity::load_or_create(&options.state_dir)
            .map_err(|e| format!("cannot load the device identity: {e}"))?;
        let workspace = Workspace::new(&options.workspace)
            .map_err(|e| format!("--workspace {}: {e}", options.workspace.display()))?;
        let prompter = match options.approval {
            Mode::Ask => {
                let prompter = Prompter::for_terminal();
                if prompter.is_none() {
                    say(
                        "stdin/stderr is not a terminal: risky commands will be refused unless pre-approved (--allow-command, --approval allow)",
                    );
                }
                prompter
            }
            _ => None,
        };
        let policy = Policy::new(
            options.approval,
            options.allow.clone(),
            options.deny.clone(),
            &options.state_dir,
            prompter,
        );
        let audit = tools::audit::Audit::open(&options.state_dir);
        let display_name = options
            .display_name
            .clone()
            .or_else(tools::system::hostname)
            .unwrap_or_else(|| "clawbot_router".into());
        Ok(Self {
            tokens: TokenStore::new(&options.state_dir),
            tools: Tools::new(workspace, policy, audit),
            identity,
            display_name,
            options,
        })
    }

    async fn serve(self) -> u8 {
        let shutdown = shutdown_signal();
        tokio::pin!(shutdown);
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let mut choice = if self.tokens.get(&self.options.gateway).is_some() {
            TokenChoice::Device
        } else {
            TokenChoice::Shared
        };
        let mut tried_device_after_mismatch = false;
        let mut announced_pairing = HashSet::new();
        say(&format!(
            "device {} ({}), workspace {}",
            &self.identity.device_id[..16],
            self.display_name,
            self.tools.workspace().root().display()
        ));
        loop {
            let token = self.token(choice);
            let attempt = tokio::select! {
                _ = &mut shutdown => return 0,
                attempt = client::open(&self.options.gateway, HANDSHAKE_LIMIT, |c| self.connect_params(c, token.as_deref())) => attempt,
            };
            let mut wait = None;
            match attempt {
                Ok(conn) => {
                    backoff.reset();
                    tried_device_after_mismatch = false;
                    if let Some(device_token) = conn.device_token() {
                        if let Err(e) = self.tokens.set(&self.options.gateway, Some(device_token)) {
                            say(&format!("cannot save the device token: {e}"));
                        }
                        choice = TokenChoice::Device;
                    }
                    say(&format!(
                        "connected to {} (protocol {})",
                        self.options.gateway, conn.hello.protocol
                    ));
                    match self.session(conn, &mut shutdown).await {
                        End::Shutdown => return 0,
                        End::Dropped(why) => say(&format!("connection lost: {why}")),
                    }
                }
                Err(ConnectError::Rejected(error)) => match error.detail_code() {
                    "PAIRING_REQUIRED" => {
                        let request = error
                            .details
                            .as_ref()
                            .and_then(|d| d.request_id.clone())
                            .unwrap_or_default();
                        if announced_pairing.insert(request.clone()) {
                            let reason = error
                                .details
                                .as_ref()
                                .and_then(|d| d.reason.clone())
                                .unwrap_or_default();
                            say(&format!(
                                "pairing required ({reason}): ask the gateway's operator to run\n    openclaw devices approve {request}\n  (retrying until approved)"
                            ));
                        }
                        wait = Some(backoff.next().min(PAIRING_RETRY_CAP));
                    }
                    "AUTH_TOKEN_MISMATCH" if choice == TokenChoice::Device => {
                        say("the gateway no longer accepts the saved device token; forgetting it");
                        let _ = self.tokens.set(&self.options.gateway, None);
                        if self.options.token.is_none() {
                            say(
                                "no shared token to fall back on: pass --token or set OPENCLAW_GATEWAY_TOKEN",
                            );
                            return 1;
                        }
                        choice = TokenChoice::Shared;
                        wait = Some(Duration::ZERO);
                    }
                    "AUTH_TOKEN_MISMATCH" => {
                        let can_retry = error
                            .details
                            .as_ref()
                            .and_then(|d| d.can_retry_with_device_token)
                            .unwrap_or(false);
                        if can_retry
                            && !tried_device_after_mismatch
                            && self.tokens.get(&self.options.gateway).is_some()
                        {
                            tried_device_after_mismatch = true;
                            choice = TokenChoice::Device;
                            wait = Some(Duration::ZERO);
                        } else {
                            say(&format!(
                                "{}: {} — check --token / OPENCLAW_GATEWAY_TOKEN",
                                error.detail_code(),
                                error.message
                            ));
                            return 1;
                        }
                    }
                    "AUTH_TOKEN_MISSING" => {
                        say(
                            "the gateway requires a token: pass --token or set OPENCLAW_GATEWAY_TOKEN",
                        );
                        return 1;
                    }
                    _ if is_terminal(&error) => {
                        say(&format!(
                            "the gateway refused this node: {}: {}",
                            error.code, error.message
                        ));
                        return 1;
                    }
                    _ => say(&format!(
                        "the gateway refused the connection: {}: {}",
                        error.code, error.message
                    )),
                },
                Err(e) => say(&e.to_string()),
            }
            let delay = wait.unwrap_or_else(|| backoff.next());
            if !delay.is_zero() {
                say(&format!("reconnecting in {:.1}s", delay.as_secs_f64()));
            }
            tokio::select! {
                _ = &mut shutdown => return 0,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn token(&self, choice: TokenChoice) -> Option<String> {
        match choice {
            TokenChoice::Device => self
                .tokens
                .get(&self.options.gateway)
                .or_else(|| self.options.token.clone()),
            TokenChoice::Shared => self.options.token.clone(),
        }
    }

    fn connect_params(
        &self,
        challenge: &crate::gateway::frames::Challenge,
        token: Option<&str>,
    ) -> ConnectParams {
        let client = ClientInfo {
            id: CLIENT_ID.into(),
            display_name: self.display_name.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            platform: platform().into(),
            device_family: device_family().into(),
            mode: "node".into(),
            instance_id: self.identity.device_id[..16].to_owned(),
        };
        let scopes: Vec<String> = Vec::new();
        let device = self.identity.prove(&SignedFields {
            client_id: &client.id,
            client_mode: &client.mode,
            role: "node",
            scopes: &scopes,
            signed_at: challenge.ts,
            token,
            nonce: &challenge.nonce,
            platform: &client.platform,
            device_family: &client.device_family,
        });
        ConnectParams {
            min_protocol: MIN_PROTOCOL,
            max_protocol: MAX_PROTOCOL,
            client,
            caps: vec!["system".into(), "file".into()],
            commands: tools::COMMANDS.iter().map(|c| c.to_string()).collect(),
            permissions: Default::default(),
            path_env: std::env::var("PATH").ok(),
            auth: Auth {
                token: token.map(str::to_owned),
            },
            role: "node".into(),
            scopes,
            device: Some(device),
        }
    }

    /// Serves one connection until it drops or the user stops the node.
    async fn session(
        &self,
        mut conn: Connection,
        shutdown: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> End {
        let max_payload = conn.max_payload();
        let silence_limit = conn.tick_interval() * 2;
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<InvokeResult>();
        let mut running: HashMap<String, CancellationToken> = HashMap::new();
        let mut last_heard = Instant::now();
        let mut watchdog = tokio::time::interval(Duration::from_secs(1));
        let mut probe = Surface::default();
        probe.send(&mut conn).await;
        let mut probe_timer =
            tokio::time::interval_at(Instant::now() + SURFACE_PROBE, SURFACE_PROBE);

        let end = loop {
            tokio::select! {
                _ = &mut *shutdown => break End::Shutdown,
                frame = conn.recv() => {
                    let Some(frame) = frame else { break End::Dropped("the gateway closed the connection".into()) };
                    last_heard = Instant::now();
                    match frame {
                        Frame::Event(event) => match NodeEvent::from(event) {
                            NodeEvent::Invoke(request) => {
                                let cancel = CancellationToken::new();
                                running.insert(request.id.clone(), cancel.clone());
                                self.spawn_invocation(request, cancel, max_payload, done_tx.clone());
                            }
                            NodeEvent::Cancel(cancel) => {
                                if let Some(token) = running.get(&cancel.invoke_id) {
                                    say(&format!("invoke {} cancelled by the gateway", short(&cancel.invoke_id)));
                                    token.cancel();
                                }
                            }
                            NodeEvent::PairResolved(resolved) => {
                                say(&format!("pairing request {} {}", resolved.request_id, resolved.decision));
                                probe.resolved();
                            }
                            NodeEvent::Other { event, problem: Some(problem) } => {
                                say(&format!("ignored a malformed {event} event: {problem}"));
                            }
                            _ => {}
                        },
                        Frame::Res(res) => probe.answered(&res.id, res.ok, res.error.as_ref()),
                        Frame::Req(_) | Frame::Unknown => {}
                    }
                }
                Some(result) = done_rx.recv() => {
                    running.remove(&result.id);
                    if let Err(e) = send_result(&mut conn, result, max_payload).await {
                        break End::Dropped(format!("cannot send a result: {e}"));
                    }
                }
                _ = watchdog.tick() => {
                    if last_heard.elapsed() > silence_limit {
                        break End::Dropped(format!("no word from the gateway for {}s", silence_limit.as_secs()));
                    }
                }
                _ = probe_timer.tick(), if probe.pending() => probe.send(&mut conn).await,
            }
        };

        for token in running.values() {
            token.cancel();
        }
        if matches!(end, End::Shutdown) {
            // Let stopped commands report, so the agent learns why.
            let deadline = Instant::now() + SHUTDOWN_GRACE;
            while !running.is_empty() {
                match tokio::time::timeout_at(deadline, done_rx.recv()).await {
                    Ok(Some(result)) => {
                        running.remove(&result.id);
                        let _ = send_result(&mut conn, result, max_payload).await;
                    }
                    _ => break,
                }
            }
            say("stopped");
            conn.close().await;
        }
        end
    }

    fn spawn_invocation(
        &self,
        request: InvokeRequest,
        cancel: CancellationToken,
        max_payload: usize,
        done: mpsc::UnboundedSender<InvokeResult>,
    ) {
        let tools = Arc::clone(&self.tools);
        let node_id = if request.node_id.is_empty() {
            self.identity.device_id.clone()
        } else {
            request.node_id.clone()
        };
        tokio::spawn(async move {
            let timeout = request
                .timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_INVOKE_TIMEOUT)
                .saturating_sub(ANSWER_MARGIN)
                .max(Duration::from_secs(1));
            let outcome = tools
                .invoke(Invocation {
                    id: &request.id,
                    command: &request.command,
                    params_json: request.params_json.as_deref(),
                    timeout,
                    max_bytes: content_budget(max_payload),
                    cancel,
                })
                .await;
            let verdict = match &outcome {
                Ok(_) => "ok".to_owned(),
                Err(e) => e.code.to_owned(),
            };
            say(&format!(
                "invoke {} {} → {verdict}",
                short(&request.id),
                request.command
            ));
            let _ = done.send(result_frame(request.id, node_id, outcome));
        });
    }
}

/// The gateway reports its command-surface approval through the answers to
/// node requests; this asks (`node.runnerInventory.update`, as OpenClaw's
/// node host does) until the surface is approved, and prints the operator's
/// command while it waits.
#[derive(Default)]
struct Surface {
    request_id: Option<String>,
    approved: bool,
    announced: Option<String>,
}

impl Surface {
    fn pending(&self) -> bool {
        !self.approved
    }

    async fn send(&mut self, conn: &mut Connection) {
        let params = json!({ "protocolFeatures": [], "workerHost": { "enabled": false } });
        self.request_id = conn
            .request("node.runnerInventory.update", params)
            .await
            .ok();
    }

    fn answered(&mut self, id: &str, ok: bool, error: Option<&ErrorShape>) {
        if self.request_id.as_deref() != Some(id) {
            return;
        }
        self.request_id = None;
        let Some(error) = error.filter(|_| !ok) else {
            if !self.approved && self.announced.is_some() {
                say("command surface approved: invocations can run");
            }
            self.approved = true;
            return;
        };
        if !error.message.contains("awaiting operator approval") {
            self.approved = true; // not a surface question: stop asking
            return;
        }
        let request = error
            .message
            .split("nodes approve ")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| c == '`' || c.is_whitespace()).next())
            .unwrap_or("<requestId>")
            .to_owned();
        if self.announced.as_deref() != Some(request.as_str()) {
            say(&format!(
                "this node's commands await the operator's approval: run\n    openclaw nodes approve {request}\n  (see `openclaw nodes pending`)"
            ));
            self.announced = Some(request);
        }
    }

    fn resolved(&mut self) {
        self.approved = true;
    }
}

/// Bytes of content one result may carry: JSON escaping can grow text up to
/// six-fold and a command has two streams.
fn content_budget(max_payload: usize) -> usize {
    (max_payload / 12).clamp(16 * 1024, 8 * 1024 * 1024)
}

fn result_frame(id: String, node_id: String, outcome: Result<Value, ToolError>) -> InvokeResult {
    match outcome {
        Ok(payload) => InvokeResult {
            id,
            node_id,
            ok: true,
            payload_json: Some(payload.to_string()),
            error: None,
        },
        Err(e) => InvokeResult {
            id,
            node_id,
            ok: false,
            payload_json: None,
            error: Some(InvokeError {
                code: e.code.to_owned(),
                message: e.message,
            }),
        },
    }
}

/// Sends a result; one that would exceed the gateway's limit is replaced by
/// an error saying so, never dropped.
async fn send_result(
    conn: &mut Connection,
    mut result: InvokeResult,
    max_payload: usize,
) -> Result<(), tokio_tungstenite::tungstenite::Error> {
    let size = serde_json::to_string(&result)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    if size + 512 > max_payload {
        result.ok = false;
        result.payload_json = None;
        result.error = Some(InvokeError {
            code: "PAYLOAD_TOO_LARGE".into(),
            message: format!(
                "the result is {size} bytes, over the gateway's limit of {max_payload}"
            ),
        });
    }
    conn.request(
        "node.invoke.result",
        serde_json::to_value(&result).expect("plain data"),
    )
    .await
    .map(|_| ())
}

/// Refusals that retrying cannot fix.
fn is_terminal(error: &ErrorShape) -> bool {
    error.code == "INVALID_REQUEST" && error.message.contains("connect params")
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

fn platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

fn device_family() -> &'static str {
    match std::env::consts::OS {
        "macos" => "Mac",
        "windows" => "Windows",
        _ => "Linux",
    }
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_results_become_an_error() {
        let r = result_frame(
            "i".into(),
            "n".into(),
            Ok(json!({"content": "x".repeat(100)})),
        );
        assert!(r.ok);
        let e = result_frame(
            "i".into(),
            "n".into(),
            Err(ToolError::new("NOT_FOUND", "gone")),
        );
        assert_eq!(e.error.unwrap().code, "NOT_FOUND");
        assert_eq!(content_budget(26_214_400), 26_214_400 / 12);
        assert_eq!(content_budget(1000), 16 * 1024);
    }

    #[test]
    fn surface_hint_names_the_request() {
        let mut s = Surface {
            request_id: Some("1".into()),
            ..Default::default()
        };
        let error = ErrorShape {
            code: "UNAVAILABLE".into(),
            message: "node capability surface is awaiting operator approval; run `openclaw nodes approve 08c50ca7-f3f0` (see `openclaw nodes pending`), then this node retries automatically".into(),
            details: None,
            retryable: None,
        };
        s.answered("1", false, Some(&error));
        assert_eq!(s.announced.as_deref(), Some("08c50ca7-f3f0"));
        assert!(s.pending());
        s.request_id = Some("2".into());
        s.answered("2", true, None);
        assert!(!s.pending());
    }
}
