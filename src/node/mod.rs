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

mod doctor;
mod events;
mod lock;
mod mcp_publish;
mod name;
mod pins;
mod progress;
mod result;
pub mod service;
mod status;
mod surface;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::gateway;
use crate::gateway::client::{self, ConnectError, Connection, Outbox};
use crate::gateway::frames::{
    Auth, ClientInfo, ConnectParams, ErrorShape, Frame, InvokeRequest, MAX_PROTOCOL, MIN_PROTOCOL,
    NodeEvent,
};
use crate::gateway::identity::{Identity, SignedFields, TokenStore};
use crate::shared::backoff::Backoff;
use crate::shared::log::{flush_log, say};
use crate::tools::mcp_client::Servers;
use crate::tools::policy::Mode;
use crate::tools::{self, Invocation, ToolError, Tools};
use result::{content_budget, result_frame, send_result};
use surface::Surface;

/// The closed set of client ids the gateway accepts for nodes.
const CLIENT_ID: &str = "node-host";
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(20);
/// Default for an invocation that names no timeout.
const DEFAULT_INVOKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Answer this long before the caller gives up, so the answer still counts.
const ANSWER_MARGIN: Duration = Duration::from_millis(250);
/// A session this long proves the link works; shorter ones keep backing off.
const STABLE_SESSION: Duration = Duration::from_secs(30);
/// The shortest tick interval honoured, whatever the gateway says.
const MIN_TICK: Duration = Duration::from_secs(1);
/// One frame that takes longer than this to send means a stuck peer.
const SEND_LIMIT: Duration = Duration::from_secs(20);
/// How often to ask whether the command surface was approved.
const SURFACE_PROBE: Duration = Duration::from_secs(5);
/// On Ctrl-C, how long running invocations get to stop and report.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
/// How long a finished command's output stream may take to queue its
/// last chunks before the result goes without them.
const STREAM_FLUSH: Duration = Duration::from_secs(2);
/// Handshakes in a row that prove the server is not an OpenClaw gateway
/// before the node gives up (exit 1).
const NOT_GATEWAY_LIMIT: u32 = 3;
/// A pairing request is retried at least this often, so an approval is
/// picked up quickly, but never faster than the backoff allows.
const PAIRING_RETRY_CAP: Duration = Duration::from_secs(10);

pub struct Options {
    pub gateway: gateway::Endpoint,
    pub token: Option<String>,
    /// `--pair`: enrol with this setup code's bootstrap token.
    pub pair: Option<gateway::setup_code::SetupCode>,
    /// `--pair-if-needed`: only when no device token is saved yet.
    pub pair_if_needed: bool,
    pub display_name: Option<String>,
    pub state_dir: PathBuf,
    pub workspace: PathBuf,
    pub approval: Mode,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// `--commands`: declare only these (as `openclaw node run --commands`).
    pub commands: Option<Vec<String>>,
    /// `--log-file`: the log goes there instead of stderr.
    pub log_file: Option<PathBuf>,
    /// `--no-agent-tools`: publish no tools (node-mcp).
    pub no_agent_tools: bool,
    /// Local MCP servers whose tools are published too.
    pub mcp: crate::tools::mcp_client::Setup,
    /// `--doctor`: the agent to talk to and what to ask it.
    pub doctor: Option<Doctor>,
}

pub struct Doctor {
    pub agent: String,
    pub question: String,
}

const SAVED_GATEWAY: &str = "gateway.json";

/// The gateway this node last connected to (`gateway.json` in its state
/// directory), used when nothing names one.
pub fn saved_gateway(state_dir: &std::path::Path) -> Option<String> {
    let text = std::fs::read(state_dir.join(SAVED_GATEWAY)).ok()?;
    let value: Value = serde_json::from_slice(&text).ok()?;
    value["url"].as_str().map(str::to_owned)
}

fn save_gateway(state_dir: &std::path::Path, url: &str) {
    if saved_gateway(state_dir).as_deref() == Some(url) {
        return;
    }
    let body = serde_json::to_vec_pretty(&json!({ "url": url })).expect("plain data");
    if let Err(e) = crate::shared::paths::write_private(&state_dir.join(SAVED_GATEWAY), &body) {
        say(&format!("cannot save the gateway's address: {e}"));
    }
}

/// Runs the node until `stop` (a signal: exit 0) or a configuration error
/// (exit 1); with `--doctor`, until the doctor session ends too.
pub async fn run(mut options: Options, stop: CancellationToken) -> u8 {
    if let Some(path) = &options.log_file
        && let Err(e) = crate::shared::log::to_file(path)
    {
        crate::shared::log::tell(
            "node",
            &format!("cannot write the log to {}: {e}", path.display()),
        );
        return 1;
    }
    let wanted = options.doctor.take();
    let node = Node::start(options);
    let servers = node.as_ref().ok().and_then(|n| n.servers.clone());
    let code = match node {
        Ok(node) => match wanted {
            None => node.serve(stop.cancelled()).await,
            Some(wanted) => {
                let session = doctor::Options {
                    gateway: node.endpoint().0,
                    credentials: gateway::operator::Credentials {
                        token: node.options.token.clone(),
                        device_dir: Some(node.options.state_dir.join("operator")),
                    },
                    agent: wanted.agent,
                    question: wanted.question,
                    instance_id: node.identity.device_id.clone(),
                };
                let doctor = async {
                    let code = doctor::session(session, stop.clone()).await;
                    stop.cancel(); // the session is over: so is the node
                    code
                };
                let serving = async {
                    let code = node.serve(stop.cancelled()).await;
                    stop.cancel(); // a node that gave up ends the session too
                    code
                };
                let (served, doctored) = tokio::join!(serving, doctor);
                if served != 0 { served } else { doctored }
            }
        },
        Err(message) => {
            say(&message);
            1
        }
    };
    if let Some(servers) = servers {
        servers.shutdown().await;
    }
    flush_log();
    code
}

struct Node {
    options: Options,
    identity: Identity,
    tokens: TokenStore,
    tools: Arc<Tools>,
    display_name: String,
    /// The gateways' certificates this node has seen.
    pins: pins::Pins,
    /// Held for the node's lifetime: one node per state directory.
    _lock: lock::StateLock,
    /// Whether the gateway's name for us was checked (once per run).
    name_checked: std::sync::atomic::AtomicBool,
    /// The door to the agents: our tools (none under `--commands`, as
    /// OpenClaw's node host, or `--no-agent-tools`) and the local MCP
    /// servers'.
    door: Arc<mcp_publish::Door>,
    servers: Option<Arc<Servers>>,
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
    /// A setup code's bootstrap token (`--pair`), until the device token.
    Bootstrap,
}

impl Node {
    fn start(options: Options) -> Result<Self, String> {
        let setup = tools::setup::Setup {
            state_dir: &options.state_dir,
            workspace: &options.workspace,
            approval: options.approval,
            allow: &options.allow,
            deny: &options.deny,
            asker: "OpenClaw",
            gateway: true,
        };
        let (tools, asks) = tools::setup::hands(
            &setup,
            tools::declared_commands(options.commands.as_deref())?,
        )?;
        if options.approval == Mode::Ask && !asks {
            say(
                "stdin/stderr is not a terminal: risky calls go to the gateway for approval (an agent's exec raises an exec approval) or are refused unless pre-approved (--allow-command, --approval allow, openclaw approvals allowlist add --node)",
            );
        }
        let lock = lock::StateLock::acquire(&options.state_dir)?;
        let identity = Identity::load_or_create(&options.state_dir)
            .map_err(|e| format!("cannot load the device identity: {e}"))?;
        let display_name = options
            .display_name
            .clone()
            .or_else(tools::system::hostname)
            .unwrap_or_else(|| "clawbot_router".into());
        let ours = if options.commands.is_some() || options.no_agent_tools {
            Vec::new()
        } else {
            mcp_publish::ours(tools.declared())
        };
        for note in &options.mcp.notes {
            say(note);
        }
        let servers = (!options.mcp.servers.is_empty())
            .then(|| Servers::start(options.mcp.servers.clone(), tools.workspace().root()));
        let door = Arc::new(mcp_publish::Door::new(
            ours,
            servers.clone(),
            Arc::clone(&tools),
        ));
        Ok(Self {
            tokens: TokenStore::new(&options.state_dir),
            tools,
            door,
            servers,
            identity,
            display_name,
            pins: pins::Pins::new(&options.state_dir),
            _lock: lock,
            name_checked: Default::default(),
            options,
        })
    }

    async fn serve(self, shutdown: impl std::future::Future<Output = ()>) -> u8 {
        tokio::pin!(shutdown);
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let mut choice = self.first_choice();
        if choice == TokenChoice::Bootstrap
            && let Some(why) = self.expired_code()
        {
            say(&why);
            return 1;
        }
        let mut tried_device_after_mismatch = false;
        let mut announced_pairing = HashSet::new();
        let mut not_gateway = 0;
        let mut ever_connected = false;
        let mut beacon = status::Beacon::new(&self.options.state_dir, &self.options.gateway.url);
        say(&format!(
            "device {} ({}), workspace {}; `--node {}` finds this node in openclaw nodes commands",
            &self.identity.device_id[..16],
            self.display_name,
            self.tools.workspace().root().display(),
            &self.identity.device_id[..16],
        ));
        say(&format!("connecting to {}", self.options.gateway));
        loop {
            let token = self.token(choice);
            let (endpoint, trusted_by) = self.endpoint();
            let attempt = tokio::select! {
                _ = &mut shutdown => {
                    say("stopped");
                    return 0;
                }
                attempt = client::open(&endpoint, HANDSHAKE_LIMIT, |c| self.connect_params(c, token.as_deref(), choice == TokenChoice::Bootstrap)) => attempt,
            };
            let was_not_gateway = matches!(attempt, Err(ConnectError::NotGateway(_)));
            let mut wait = None;
            match attempt {
                Ok(conn) => {
                    tried_device_after_mismatch = false;
                    ever_connected = true;
                    save_gateway(&self.options.state_dir, &endpoint.url);
                    if let Some(presented) = conn.certificate {
                        match self.pins.remember(&endpoint.url, presented, trusted_by) {
                            Ok(Some(line)) => say(&line),
                            Ok(None) => {}
                            Err(e) => {
                                say(&format!("cannot remember the gateway's certificate: {e}"))
                            }
                        }
                    }
                    if let Some(device_token) = conn.device_token() {
                        if let Err(e) = self
                            .tokens
                            .set(&self.options.gateway.url, Some(device_token))
                        {
                            say(&format!("cannot save the device token: {e}"));
                        }
                        choice = TokenChoice::Device;
                    }
                    say(&format!(
                        "connected to {} (protocol {})",
                        self.options.gateway, conn.hello.protocol
                    ));
                    beacon.connected();
                    let began = Instant::now();
                    match self.session(conn, &mut shutdown, &mut beacon).await {
                        End::Shutdown => return 0,
                        End::Dropped(why) => {
                            say(&format!("connection lost: {why}"));
                            beacon.lost(&why);
                        }
                    }
                    // A gateway that accepts and drops at once must not get
                    // a reconnect storm: only a session that lasted resets.
                    if began.elapsed() >= STABLE_SESSION {
                        backoff.reset();
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
                                "pairing required ({reason}): ask the gateway's operator to run"
                            ));
                            say(&format!("    openclaw devices approve {request}"));
                            say("  (retrying until approved)");
                        }
                        beacon.lost(&format!(
                            "pairing required: openclaw devices approve {request}"
                        ));
                        wait = Some(backoff.next().min(PAIRING_RETRY_CAP));
                    }
                    "AUTH_TOKEN_MISMATCH" | "AUTH_DEVICE_TOKEN_MISMATCH"
                        if choice == TokenChoice::Device =>
                    {
                        say("the gateway no longer accepts the saved device token; forgetting it");
                        let _ = self.tokens.set(&self.options.gateway.url, None);
                        if self.options.pair.is_some() {
                            // The setup code in hand enrols the device again.
                            if let Some(code) = self.expired_code() {
                                say(&code);
                                return 1;
                            }
                            choice = TokenChoice::Bootstrap;
                            wait = Some(Duration::ZERO);
                        } else if self.options.token.is_none() {
                            say(
                                "no shared token to fall back on: pass --token or set OPENCLAW_GATEWAY_TOKEN",
                            );
                            return 1;
                        } else {
                            choice = TokenChoice::Shared;
                            wait = Some(Duration::ZERO);
                        }
                    }
                    "AUTH_TOKEN_MISMATCH" => {
                        let can_retry = error
                            .details
                            .as_ref()
                            .and_then(|d| d.can_retry_with_device_token)
                            .unwrap_or(false);
                        if can_retry
                            && !tried_device_after_mismatch
                            && self.tokens.get(&self.options.gateway.url).is_some()
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
                    "AUTH_BOOTSTRAP_TOKEN_INVALID" => {
                        say(&format!(
                            "the gateway refused the setup code: {}: create a new one with `openclaw qr --setup-code-only` (or the Control UI's Node host dialog){}",
                            error.message,
                            if self.options.pair_if_needed {
                                ""
                            } else {
                                ", or start with --pair-if-needed to reuse this node's device token"
                            }
                        ));
                        return 1;
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
                // Settings to fix, not hiccups: retrying changes nothing.
                Err(ConnectError::Refused(why)) => {
                    say(&why);
                    beacon.lost(&why); // `node status` shows why it stopped
                    return 1;
                }
                Err(ConnectError::Untrusted(why)) => {
                    say(&why);
                    beacon.lost(&why);
                    if trusted_by == pins::Source::Remembered {
                        say(&self.pins.reset_hint(&endpoint.url));
                    }
                    return 1;
                }
                Err(ConnectError::NotGateway(what)) => {
                    // Proof, not a hiccup: a few in a row and we stop
                    // rather than knock on the wrong door for ever — unless
                    // this URL was a gateway earlier in this run (then it is
                    // one being replaced or restarted: keep trying).
                    not_gateway += 1;
                    if not_gateway >= NOT_GATEWAY_LIMIT && !ever_connected {
                        say(&format!(
                            "{} is not an OpenClaw gateway ({what}; {not_gateway} handshakes in a row): check --gateway (OpenClaw's default is ws://127.0.0.1:18789)",
                            self.options.gateway
                        ));
                        return 1;
                    }
                    say(&format!(
                        "{}: this does not look like an OpenClaw gateway: {what}",
                        self.options.gateway
                    ));
                }
                Err(e) => say(&e.to_string()),
            }
            if !was_not_gateway {
                not_gateway = 0;
            }
            let delay = wait.unwrap_or_else(|| backoff.next());
            if !delay.is_zero() {
                say(&format!("reconnecting in {:.1}s", delay.as_secs_f64()));
            }
            tokio::select! {
                _ = &mut shutdown => {
                    say("stopped");
                    return 0;
                }
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn token(&self, choice: TokenChoice) -> Option<String> {
        match choice {
            TokenChoice::Device => self
                .tokens
                .get(&self.options.gateway.url)
                .or_else(|| self.options.token.clone()),
            TokenChoice::Shared => self.options.token.clone(),
            TokenChoice::Bootstrap => self
                .options
                .pair
                .as_ref()
                .map(|c| c.bootstrap_token.clone()),
        }
    }

    /// Why the setup code cannot be used any more, if it cannot.
    fn expired_code(&self) -> Option<String> {
        let code = self.options.pair.as_ref()?;
        code.expires_at_ms
            .is_some_and(|at| at <= crate::shared::clock::now_ms())
            .then(|| {
                "the pairing setup code has expired and this node has no device token for its gateway: create a new one with `openclaw qr --setup-code-only` (or the Control UI's Node host dialog)".to_owned()
            })
    }

    /// The first token to present: a setup code's unless `--pair-if-needed`
    /// finds a device token already; then the saved device token; then the
    /// shared one.
    fn first_choice(&self) -> TokenChoice {
        let saved = self.tokens.get(&self.options.gateway.url).is_some();
        match (&self.options.pair, saved) {
            (Some(_), true) if self.options.pair_if_needed => TokenChoice::Device,
            (Some(_), _) => TokenChoice::Bootstrap,
            (None, true) => TokenChoice::Device,
            (None, false) => TokenChoice::Shared,
        }
    }

    /// Whether agent tools are published (and their door declared).
    fn publishing(&self) -> bool {
        self.door.is_open()
    }

    /// What `connect` declares: the tools' commands, and the published
    /// tools' one door.
    fn commands(&self) -> Vec<String> {
        let mut commands = self.tools.declared().to_vec();
        if self.publishing() {
            commands.push(mcp_publish::COMMAND.to_owned());
        }
        commands
    }

    fn caps(&self) -> Vec<String> {
        let mut caps = caps(self.tools.declared());
        if self.publishing() {
            caps.push("mcp".to_owned());
        }
        caps
    }

    /// The gateway to connect to, trusted by the pin given or the one this
    /// node remembered (and which of the two it was).
    fn endpoint(&self) -> (gateway::Endpoint, pins::Source) {
        let url = &self.options.gateway.url;
        let (trust, source) = self.pins.trust(url, &self.options.gateway.trust);
        (
            gateway::Endpoint {
                url: url.clone(),
                trust,
            },
            source,
        )
    }

    fn connect_params(
        &self,
        challenge: &crate::gateway::frames::Challenge,
        token: Option<&str>,
        bootstrap: bool,
    ) -> ConnectParams {
        let client = ClientInfo {
            id: CLIENT_ID.into(),
            display_name: self.display_name.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            platform: gateway::platform().into(),
            device_family: gateway::device_family().into(),
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
            caps: self.caps(),
            commands: self.commands(),
            permissions: Some(Default::default()),
            path_env: std::env::var("PATH").ok(),
            auth: if bootstrap {
                Auth {
                    token: None,
                    bootstrap_token: token.map(str::to_owned),
                    device_token: None,
                }
            } else {
                Auth {
                    token: token.map(str::to_owned),
                    bootstrap_token: None,
                    device_token: None,
                }
            },
            role: "node".into(),
            scopes,
            device: Some(device),
        }
    }

    /// Serves one connection until it drops or the user stops the node.
    /// Nothing in this loop waits on the peer: frames go out through the
    /// outbox's own writer, results straight from the invocations.
    async fn session(
        &self,
        conn: Connection,
        shutdown: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
        beacon: &mut status::Beacon,
    ) -> End {
        let max_payload = conn.max_payload();
        let silence_limit = conn.tick_interval().max(MIN_TICK) * 2;
        let (mut inbox, outbox) = conn.serve(SEND_LIMIT);
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<String>();
        let mut running: HashMap<String, CancellationToken> = HashMap::new();
        let mut last_heard = Instant::now();
        let mut watchdog = tokio::time::interval(Duration::from_secs(1));
        let mut surface = Surface::default();
        // Requests of ours the gateway refused, by method: told once.
        let mut refused: HashSet<String> = HashSet::new();
        surface.ask(&outbox);
        let mut publisher = mcp_publish::Publisher::new(Arc::clone(&self.door));
        publisher.publish(&outbox);
        let mut offered = self.door.changes();
        let mut surface_timer =
            tokio::time::interval_at(Instant::now() + SURFACE_PROBE, SURFACE_PROBE);
        // Host stats: once the commands are approved (before that the
        // gateway refuses node events: "node pairing changed"), then every
        // minute; not with a --commands surface, as OpenClaw's node host.
        let mut stats_timer = tokio::time::interval(events::STATS_EVERY);
        stats_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stats = self.options.commands.is_none();

        let end = loop {
            tokio::select! {
                _ = &mut *shutdown => break End::Shutdown,
                _ = outbox.dead() => break End::Dropped("the gateway stopped reading what the node sends".into()),
                frame = inbox.recv() => {
                    let Some(frame) = frame else { break End::Dropped("the gateway closed the connection".into()) };
                    last_heard = Instant::now();
                    match frame {
                        Frame::Event(event) => match NodeEvent::from(event) {
                            NodeEvent::Invoke(request) if running.contains_key(&request.id) => {
                                say(&format!("invoke {} is already running; duplicate ignored", short(&request.id)));
                            }
                            NodeEvent::Invoke(request) => {
                                let cancel = CancellationToken::new();
                                running.insert(request.id.clone(), cancel.clone());
                                self.spawn_invocation(request, cancel, max_payload, outbox.clone(), done_tx.clone());
                            }
                            NodeEvent::BadInvoke { id, node_id, problem } => {
                                say(&format!("malformed invoke request: {problem}"));
                                if let Some(id) = id {
                                    let node_id = node_id.unwrap_or_else(|| self.identity.device_id.clone());
                                    let error = ToolError::new("INVALID_REQUEST", format!("malformed node.invoke.request: {problem}"));
                                    send_result(&outbox, result_frame(id, node_id, Err(error)), max_payload);
                                }
                            }
                            NodeEvent::Cancel(cancel) => {
                                if let Some(token) = running.get(&cancel.invoke_id) {
                                    say(&format!("invoke {} cancelled by the gateway", short(&cancel.invoke_id)));
                                    token.cancel();
                                }
                            }
                            NodeEvent::PairResolved(resolved) => {
                                say(&format!("pairing request {} {}", resolved.request_id, resolved.decision));
                                surface.resolved(resolved.decision == "approved");
                                if surface.confirmed {
                                    beacon.approved();
                                }
                                publisher.approval(surface.confirmed, &outbox);
                                self.check_name();
                            }
                            NodeEvent::Other { event, problem: Some(problem) } => {
                                say(&format!("ignored a malformed {event} event: {problem}"));
                            }
                            _ => {}
                        },
                        Frame::Res(res) => {
                            let method = outbox.answered(&res.id);
                            if let (Some(method), Some(error)) = (method, res.error.as_ref().filter(|_| !res.ok))
                                && method != "node.runnerInventory.update"
                                && method != "node.pluginTools.update"
                                && refused.insert(method.clone())
                            {
                                say(&format!(
                                    "the gateway refused {method}: {}: {} (further refusals of {method} on this connection are not shown)",
                                    error.code, error.message
                                ));
                            }
                            surface.answered(&res.id, res.ok, res.error.as_ref());
                            let answer = mcp_publish::Answer { ok: res.ok, payload: res.payload.as_ref(), error: res.error.as_ref() };
                            publisher.answered(&res.id, answer, surface.confirmed);
                            publisher.approval(surface.confirmed, &outbox);
                            if surface.confirmed {
                                beacon.approved();
                            }
                            if surface.approved {
                                self.check_name();
                            }
                        }
                        Frame::Req(_) | Frame::Unknown => {}
                    }
                }
                Some(id) = done_rx.recv() => {
                    running.remove(&id);
                }
                _ = watchdog.tick() => {
                    if last_heard.elapsed() > silence_limit {
                        break End::Dropped(format!("no word from the gateway for {}s", silence_limit.as_secs()));
                    }
                }
                _ = surface_timer.tick(), if surface.pending() => surface.ask(&outbox),
                _ = tokio::time::sleep_until(publisher.retry_at().unwrap_or_else(Instant::now)), if publisher.retry_at().is_some() => {
                    publisher.publish(&outbox);
                }
                // The door holds its sender: this never ends.
                Ok(()) = offered.changed() => publisher.publish(&outbox),
                _ = stats_timer.tick(), if stats && surface.approved => {
                    if let Some(event) = events::host_stats() {
                        outbox.request("node.event", event);
                    }
                }
            }
        };

        for token in running.values() {
            token.cancel();
        }
        if matches!(end, End::Shutdown) {
            // Let stopped commands report, so the agent learns why; bounded.
            let deadline = Instant::now() + SHUTDOWN_GRACE;
            while !running.is_empty() {
                match tokio::time::timeout_at(deadline, done_rx.recv()).await {
                    Ok(Some(id)) => {
                        running.remove(&id);
                    }
                    _ => break,
                }
            }
            say("stopped");
            outbox.close(Duration::from_secs(2)).await;
        }
        end
    }

    /// Once per run, after the commands are approved: make the gateway
    /// list this node under the name it was given (see `name.rs`).
    fn check_name(&self) {
        use std::sync::atomic::Ordering;
        if self.name_checked.swap(true, Ordering::Relaxed) {
            return;
        }
        let (endpoint, _) = self.endpoint();
        let token = self.options.token.clone();
        let node_id = self.identity.device_id.clone();
        let wanted = self.display_name.clone();
        let explicit = self.options.display_name.is_some();
        tokio::spawn(async move {
            let outcome =
                name::reconcile(&endpoint, token.as_deref(), &node_id, &wanted, explicit).await;
            if let Some(line) = outcome.describe(&node_id, &wanted, explicit) {
                say(&line);
            }
        });
    }

    fn spawn_invocation(
        &self,
        request: InvokeRequest,
        cancel: CancellationToken,
        max_payload: usize,
        outbox: Outbox,
        done: mpsc::UnboundedSender<String>,
    ) {
        let tools = Arc::clone(&self.tools);
        let door = self.publishing().then(|| Arc::clone(&self.door));
        let node_id = if request.node_id.is_empty() {
            self.identity.device_id.clone()
        } else {
            request.node_id.clone()
        };
        tokio::spawn(async move {
            let params_json = request.params_json.clone();
            // A program's output streams while it runs; the result follows
            // the last chunk.
            let (tap, streaming) = if tools::streams_output(&request.command) {
                let (tap, handle) = progress::start(
                    outbox.clone(),
                    request.id.clone(),
                    node_id.clone(),
                    cancel.clone(),
                );
                (Some(tap), Some(handle))
            } else {
                (None, None)
            };
            let invocation = Invocation {
                id: &request.id,
                command: &request.command,
                params_json: request.params_json.as_deref(),
                timeout: work_time(request.timeout_ms),
                max_bytes: content_budget(max_payload),
                cancel,
                tap,
                // A published tool's call names its agent only in its
                // session (`agent:<id>:…`).
                agent: request
                    .session_key
                    .as_deref()
                    .and_then(|k| k.strip_prefix("agent:"))
                    .and_then(|k| k.split(':').next())
                    .filter(|a| !a.is_empty()),
                gate: tools::policy::Gate::Ours,
            };
            // An agent's call of a published tool: the same dispatch
            // (only where tools are published: the command is declared).
            let (outcome, decision, what, verdict) =
                if let Some(door) = door.filter(|_| request.command == mcp_publish::COMMAND) {
                    let called = mcp_publish::call(&door, invocation).await;
                    let verdict = called.verdict();
                    (called.result, called.decision, called.label, verdict)
                } else {
                    let (outcome, decision) = tools.invoke(invocation).await;
                    let verdict = match &outcome {
                        Ok(_) => "ok".to_owned(),
                        Err(e) => e.code.to_owned(),
                    };
                    (outcome, decision, request.command.clone(), verdict)
                };
            let streamed = match streaming {
                // Bounded: the tap is gone with the invocation, so the
                // stream only has its queue to flush.
                Some(mut handle) => match tokio::time::timeout(STREAM_FLUSH, &mut handle).await {
                    Ok(summary) => summary.ok(),
                    Err(_) => {
                        // Nothing of it may follow the result.
                        handle.abort();
                        None
                    }
                },
                None => None,
            };
            if let Some(s) = streamed.filter(|s| s.chunks > 0) {
                say(&format!(
                    "invoke {} streamed {} progress chunk(s), {} bytes{}",
                    short(&request.id),
                    s.chunks,
                    s.bytes,
                    if s.skipped > 0 {
                        format!(" ({} bytes not streamed)", s.skipped)
                    } else {
                        String::new()
                    }
                ));
            }
            say(&format!(
                "invoke {} {what} → {verdict} ({decision})",
                short(&request.id),
            ));
            // Serialising and fitting a result of megabytes is CPU work:
            // off the runtime thread, so signals and other invocations are
            // never kept waiting behind it.
            // The run's event goes first, as OpenClaw's node host sends it.
            if let Some(event) =
                events::exec_event(&request.command, params_json.as_deref(), &outcome)
            {
                outbox.request("node.event", event);
            }
            let id = request.id.clone();
            let _ = tokio::task::spawn_blocking(move || {
                send_result(&outbox, result_frame(id, node_id, outcome), max_payload);
            })
            .await;
            let _ = done.send(request.id);
        });
    }
}

/// The time a tool may take: the caller's timeout minus room to stop a
/// process tree (SIGTERM, grace) and still answer before the caller gives up.
fn work_time(timeout_ms: Option<u64>) -> Duration {
    let total = timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_INVOKE_TIMEOUT);
    let margin = (total / 4).clamp(ANSWER_MARGIN, Duration::from_secs(3));
    total.saturating_sub(margin).max(Duration::from_millis(500))
}

/// Refusals that retrying cannot fix.
/// The capability families the declared commands belong to: OpenClaw's
/// own host commands are `system` (as its node host files them), the
/// seed's tools `file`.
fn caps(declared: &[String]) -> Vec<String> {
    let openclaws =
        |c: &String| c.starts_with("system.") || c == "fs.listDir" || c == "terminal.upload";
    let mut caps = Vec::new();
    if declared.iter().any(openclaws) {
        caps.push("system".to_owned());
    }
    if declared.iter().any(|c| !openclaws(c)) {
        caps.push("file".to_owned());
    }
    caps
}

fn is_terminal(error: &ErrorShape) -> bool {
    error.code == "INVALID_REQUEST" && error.message.contains("connect params")
}

/// The first 8 characters of an id, for log lines.
fn short(id: &str) -> &str {
    id.char_indices().nth(8).map_or(id, |(i, _)| &id[..i])
}
