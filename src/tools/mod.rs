//! THE HANDS and their rules: the one tool executor every link to a remote
//! agent uses. A command name and its JSON parameters come in; the executor
//! parses them, classifies the call (safe / risky), asks the one policy,
//! runs the handler, writes the audit line, and returns a JSON payload or a
//! [`ToolError`] with a stable code.
//!
//! Must never panic on what an agent sends, never run a risky call the
//! policy did not allow, and never let a file tool leave the workspace
//! (every path goes through [`sandbox::Workspace`]).

pub mod approvals;
pub mod audit;
pub mod binding;
pub mod browser;
pub mod catalog;
pub mod claude;
pub mod cmdline;
pub mod desktop;
mod environment;
mod error;
pub mod exec;
pub mod files;
pub mod forbidden;
pub mod fs;
pub mod host;
pub mod js;
pub mod mcp_client;
mod ollama;
mod permit;
pub mod plans;
pub mod policy;
mod redact;
pub mod sandbox;
pub mod screen;
pub mod sensors;
pub mod setup;
pub mod system;
pub mod upstream;

/// Our credentials as variables ([`crate::shared::secrets::VARS`]): no command a
/// tool runs may see them (an agent's `env` would put them in a
/// transcript). Taken out of our environment at start-up; removed from a
/// child's all the same, for a process that was not sealed.
pub const SECRET_VARS: &[&str] = crate::shared::secrets::VARS;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use error::ToolError;
use policy::{Call, Decision, Policy, Risk};
use sandbox::Workspace;

/// Every command this node declares in `connect.commands`: OpenClaw's own
/// (allowed by the gateway's default Linux allowlist) and the seed's tools
/// (which the operator must add to `gateway.nodes.commands.allow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Prepare,
    Run,
    Which,
    ReadFile,
    ListFiles,
    SearchFiles,
    ReadConfig,
    ValidateConfig,
    SystemInfo,
    WriteFile,
    RunCommand,
    ListDir,
    Upload,
    Notify,
    ApprovalsGet,
    ApprovalsSet,
    BrowserProxy,
    BrowserUpload,
    CameraList,
    CameraSnap,
    CameraClip,
    Location,
    DesktopStream,
    OllamaModels,
    OllamaChat,
    ClaudeList,
    ClaudeRead,
    FileFetch,
    FileStat,
    DirList,
    DirFetch,
    FileWrite,
    ScreenSnapshot,
    ComputerAct,
}

impl Tool {
    const ALL: [Tool; 34] = [
        Tool::Prepare,
        Tool::Run,
        Tool::Which,
        Tool::ReadFile,
        Tool::ListFiles,
        Tool::SearchFiles,
        Tool::ReadConfig,
        Tool::ValidateConfig,
        Tool::SystemInfo,
        Tool::WriteFile,
        Tool::RunCommand,
        Tool::ListDir,
        Tool::Upload,
        Tool::Notify,
        Tool::ApprovalsGet,
        Tool::ApprovalsSet,
        Tool::BrowserProxy,
        Tool::BrowserUpload,
        Tool::CameraList,
        Tool::CameraSnap,
        Tool::CameraClip,
        Tool::Location,
        Tool::DesktopStream,
        Tool::OllamaModels,
        Tool::OllamaChat,
        Tool::ClaudeList,
        Tool::ClaudeRead,
        Tool::FileFetch,
        Tool::FileStat,
        Tool::DirList,
        Tool::DirFetch,
        Tool::FileWrite,
        Tool::ScreenSnapshot,
        Tool::ComputerAct,
    ];

    /// The name on the wire.
    fn name(self) -> &'static str {
        match self {
            Tool::Prepare => "system.run.prepare",
            Tool::Run => "system.run",
            Tool::Which => "system.which",
            Tool::ReadFile => "read_file",
            Tool::ListFiles => "list_files",
            Tool::SearchFiles => "search_files",
            Tool::ReadConfig => "read_config",
            Tool::ValidateConfig => "validate_config",
            Tool::SystemInfo => "system_info",
            Tool::WriteFile => "write_file",
            Tool::RunCommand => "run_command",
            Tool::ListDir => "fs.listDir",
            Tool::Upload => "terminal.upload",
            Tool::Notify => "system.notify",
            Tool::ApprovalsGet => "system.execApprovals.get",
            Tool::ApprovalsSet => "system.execApprovals.set",
            Tool::BrowserProxy => "browser.proxy",
            Tool::BrowserUpload => "browser.proxy.upload.v1",
            Tool::CameraList => "camera.list",
            Tool::CameraSnap => "camera.snap",
            Tool::CameraClip => "camera.clip",
            Tool::Location => "location.get",
            Tool::DesktopStream => "desktop.stream",
            Tool::OllamaModels => "ollama.models",
            Tool::OllamaChat => "ollama.chat",
            Tool::ClaudeList => "anthropic.claude.sessions.list.v1",
            Tool::ClaudeRead => "anthropic.claude.sessions.read.v1",
            Tool::FileFetch => "file.fetch",
            Tool::FileStat => "file.stat",
            Tool::DirList => "dir.list",
            Tool::DirFetch => "dir.fetch",
            Tool::FileWrite => "file.write",
            Tool::ScreenSnapshot => "screen.snapshot",
            Tool::ComputerAct => "computer.act",
        }
    }

    /// Whether this machine can offer it at all, given what its owner
    /// turned on.
    fn available(self, offer: &Offer) -> bool {
        match self {
            Tool::Notify => host::can_notify(),
            Tool::BrowserProxy | Tool::BrowserUpload => offer.browser,
            Tool::CameraList | Tool::CameraSnap | Tool::CameraClip => offer.camera,
            Tool::Location => offer.location,
            Tool::DesktopStream => offer.desktop.is_some(),
            Tool::OllamaModels | Tool::OllamaChat => !offer.no_ollama,
            Tool::ClaudeList | Tool::ClaudeRead => offer.claude.is_some(),
            // Declared by default, as OpenClaw's node host declares them:
            // the gateway runs none unless its `gateway.nodes.commands.allow`
            // and its file-transfer path policy both allow it. Bindings are
            // device and inode: Unix.
            Tool::FileFetch | Tool::FileStat | Tool::DirList | Tool::DirFetch | Tool::FileWrite => {
                cfg!(unix)
            }
            Tool::ScreenSnapshot => offer.screen.is_some(),
            Tool::ComputerAct => offer.screen.as_ref().is_some_and(|s| s.computer),
            _ => true,
        }
    }

    /// What the owner must do for it to be offered, when it is not.
    fn needs(self) -> Option<&'static str> {
        match self {
            Tool::BrowserProxy | Tool::BrowserUpload => {
                Some("a browser, and none was found or named (--browser PATH)")
            }
            Tool::CameraList | Tool::CameraSnap | Tool::CameraClip => {
                Some("--camera, and ffmpeg on PATH (Linux)")
            }
            Tool::Location => Some("--location, and GeoClue's where-am-i (Linux)"),
            Tool::DesktopStream => Some("--desktop-vnc-port PORT (this machine's VNC server)"),
            Tool::OllamaModels | Tool::OllamaChat => {
                Some("Ollama inference, which --no-ollama turned off")
            }
            Tool::ClaudeList | Tool::ClaudeRead => {
                Some("the owner's consent to share Claude Code transcripts (--claude-sessions)")
            }
            Tool::FileFetch | Tool::FileStat | Tool::DirList | Tool::DirFetch | Tool::FileWrite => {
                Some("a Unix node (file transfers bind a path to its device and inode)")
            }
            Tool::ScreenSnapshot => Some("--screen, an X display (DISPLAY) and ffmpeg (Linux)"),
            Tool::ComputerAct => {
                Some("--computer, an X display (DISPLAY), ffmpeg and xdotool (Linux)")
            }
            _ => None,
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// What the node's owner turned on beyond the commands every node has:
/// the families that need a program found here or the owner's consent.
#[derive(Debug, Clone, Default)]
pub struct Offer {
    /// A browser was found or named (`browser.proxy`).
    pub browser: bool,
    /// `--camera`, with FFmpeg found (`camera.*`).
    pub camera: bool,
    /// `--camera-audio`: a clip may record the microphone too.
    pub microphone: bool,
    /// `--location`, with GeoClue's demo found (`location.get`).
    pub location: bool,
    /// `--desktop-vnc-port`: the VNC server `desktop.stream` relays.
    pub desktop: Option<desktop::Host>,
    /// `--no-ollama`: `ollama.*` not declared (they are by default, as
    /// OpenClaw declares them whether Ollama runs or not).
    pub no_ollama: bool,
    /// Claude Code's sessions, when the owner shares them
    /// (`--claude-sessions`).
    pub claude: Option<claude::Sessions>,
    /// `--screen` on an X display, with FFmpeg found (`screen.snapshot`;
    /// `computer.act` too with `--computer` and xdotool).
    pub screen: Option<screen::Offer>,
}

/// Every command this machine offers with nothing turned on, by name.
#[cfg(test)]
pub fn available_commands() -> Vec<String> {
    offered(&Offer::default())
}

/// Every command this machine can offer, given what is turned on.
fn offered(offer: &Offer) -> Vec<String> {
    Tool::ALL
        .iter()
        .filter(|c| c.available(offer))
        .map(|c| c.name().to_owned())
        .collect()
}

/// Whether `command`'s answer carries a file or an archive as base64,
/// whose size and sha256 the gateway checks: it gets its own budget (what
/// the gateway's frame carries, not a share of it) and is never cut to fit.
pub fn carries_files(command: &str) -> bool {
    matches!(
        Tool::parse(command),
        Some(Tool::FileFetch | Tool::FileStat | Tool::DirList | Tool::DirFetch | Tool::FileWrite)
    )
}

/// Whether `command`'s answer is a picture or a clip as base64: never cut
/// to fit (a cut JPEG is no picture).
pub fn carries_media(command: &str) -> bool {
    matches!(
        Tool::parse(command),
        Some(Tool::CameraSnap | Tool::CameraClip | Tool::ScreenSnapshot)
    )
}

/// Whether `command` runs a program whose output can be streamed while
/// it runs (through [`Invocation::tap`]).
pub fn streams_output(command: &str) -> bool {
    matches!(
        Tool::parse(command),
        Some(Tool::Run | Tool::RunCommand | Tool::DesktopStream)
    )
}

/// Whether `command` is a lifecycle the gateway holds open as long as it
/// likes (`timeoutMs: 0`: no deadline), rather than a call with an answer.
pub fn without_deadline(command: &str) -> bool {
    Tool::parse(command) == Some(Tool::DesktopStream)
}

/// The declared surface: every available command, or (`--commands`, as
/// `openclaw node run --commands` does) those of `only` that are available.
/// Nothing left is an error, and so is a name this node has never heard of.
pub fn declared_commands(only: Option<&[String]>, offer: &Offer) -> Result<Vec<String>, String> {
    let available = offered(offer);
    let Some(only) = only else {
        return Ok(available);
    };
    if let Some(unknown) = only.iter().find(|n| Tool::parse(n).is_none()) {
        return Err(format!(
            "--commands: this node has no command {unknown:?}; it offers {}",
            available.join(", ")
        ));
    }
    for name in only {
        let tool = Tool::parse(name).expect("checked above");
        if let Some(need) = tool.needs().filter(|_| !tool.available(offer)) {
            return Err(format!("--commands: {name} needs {need}"));
        }
    }
    let kept: Vec<String> = available.into_iter().filter(|n| only.contains(n)).collect();
    if kept.is_empty() {
        return Err("--commands leaves this node nothing it can offer here".into());
    }
    Ok(kept)
}

/// A command's work, prepared but not started.
type Work<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, ToolError>> + Send + 'a>>;

/// Entries a listing or search returns at most.
const MAX_ENTRIES: usize = 5_000;
const MAX_MATCHES: usize = 500;

/// The executor, shared by every invocation in flight.
pub struct Tools {
    workspace: Workspace,
    policy: Policy,
    audit: audit::Audit,
    /// The commands declared to the gateway; anything else is refused.
    declared: Vec<String>,
    /// Plans `system.run.prepare` handed out, which an approval may name.
    plans: plans::Plans,
    /// The browser `browser.proxy` drives, when there is one.
    browser: Option<browser::Browser>,
    /// What the owner turned on.
    offer: Offer,
    /// Where OpenClaw's file transfers (file.*, dir.*) may reach.
    files: Arc<files::Files>,
    /// The X display `screen.snapshot` and `computer.act` work on.
    desktop: Option<Arc<screen::Desktop>>,
}

/// One invocation.
pub struct Invocation<'a> {
    pub id: &'a str,
    pub command: &'a str,
    pub params_json: Option<&'a str>,
    /// What the caller waits at most; commands and approval questions fit
    /// inside it.
    pub timeout: Duration,
    /// Bytes of content a result may carry (per stream for commands).
    pub max_bytes: usize,
    pub cancel: CancellationToken,
    /// Where a running command's output is copied while it runs (the
    /// node streams it as progress); commands that run no program drop it.
    pub tap: Option<crate::runner::Tap>,
    /// The agent the call is made for, when the gateway says so outside
    /// the parameters (a published tool's call: its session's agent):
    /// whose exec-approvals allowlist applies to a `run_command`.
    pub agent: Option<&'a str>,
    /// The gateway the node is connected to, for a command that opens a
    /// socket back to it (`desktop.stream`); none on a link.
    pub gateway: Option<&'a crate::gateway::Endpoint>,
    /// What the remote side said of the call's risk (a link's `risk` or
    /// airlock level): it can only make our own class stricter.
    pub gate: policy::Gate,
    /// Where a file transfer leaves its slot for the caller to let go of
    /// once the answer is sent (the node: when it is written); without
    /// one the slot ends with the call.
    pub keep: Option<&'a Keep>,
}

/// See [`Invocation::keep`].
pub type Keep = std::sync::Mutex<Option<tokio::sync::OwnedSemaphorePermit>>;

impl Tools {
    pub fn new(
        workspace: Workspace,
        policy: Policy,
        audit: audit::Audit,
        declared: Vec<String>,
        browser: Option<browser::Options>,
        offer: Offer,
        files: files::Files,
    ) -> Arc<Self> {
        Arc::new(Self {
            workspace,
            policy,
            audit,
            declared,
            plans: plans::Plans::default(),
            browser: browser.map(browser::Browser::new),
            desktop: offer.screen.as_ref().and_then(screen::Desktop::new),
            offer,
            files: Arc::new(files),
        })
    }

    /// What must happen before the node exits: an attached browser (the
    /// user's) loses the tabs we opened in it (a launched one stops with
    /// our process tree anyway).
    pub async fn let_go(&self) {
        if let Some(browser) = &self.browser {
            browser.let_go().await;
        }
    }

    /// The gateway connection is gone: a computer-use execution ends with
    /// it (what it held is let go).
    pub async fn disconnected(&self) {
        if let Some(desktop) = &self.desktop {
            desktop.disconnected().await;
        }
    }

    /// The `computerUse` descriptor `connect` carries when both commands
    /// of the pair are declared (the gateway publishes it only then).
    pub fn computer_use(&self) -> Option<screen::Descriptor> {
        let declared = |c: Tool| self.declared.iter().any(|d| d == c.name());
        let desktop = self.desktop.as_ref()?;
        (declared(Tool::ScreenSnapshot) && declared(Tool::ComputerAct))
            .then(|| desktop.descriptor())
    }

    /// The commands to declare in `connect.commands`.
    pub fn declared(&self) -> &[String] {
        &self.declared
    }

    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// Whether the policy forbids the command `name` outright (a tool not
    /// worth offering).
    pub fn forbids(&self, name: &str, upstream: bool) -> bool {
        self.policy.forbids(name, upstream)
    }

    /// Runs one invocation; the result, and how the policy decided (for
    /// the node's log: `allowed:safe`, `allowed:user-once`, `refused:...`).
    pub async fn invoke(
        self: &Arc<Self>,
        inv: Invocation<'_>,
    ) -> (Result<Value, ToolError>, String) {
        let started = Instant::now();
        let mut decision = None;
        let result = self.dispatch(&inv, &mut decision).await;
        let label = self.record(&inv, inv.command, decision, &result, started);
        (result, label)
    }

    /// Records a call refused before it reached a command (a published
    /// tool's malformed or unknown call): the audit log misses nothing.
    pub fn record_refused(&self, inv: &Invocation<'_>, error: &ToolError) {
        self.record(inv, inv.command, None, &Err(error.clone()), Instant::now());
    }

    /// The one audit line of a call, under the name it ran as; returns the
    /// decision's label (`none` when nothing was decided).
    fn record(
        &self,
        inv: &Invocation<'_>,
        command: &str,
        decision: Option<Decision>,
        result: &Result<Value, ToolError>,
        started: Instant,
    ) -> String {
        let label = decision.map(|d| d.label()).unwrap_or_else(|| "none".into());
        self.audit.record(&audit::Entry {
            ts: crate::shared::clock::now_ms(),
            invoke_id: inv.id,
            command,
            params_sha256: audit::digest(inv.params_json.unwrap_or("")),
            decision: label.clone(),
            outcome: match result {
                Ok(_) => "ok".into(),
                Err(e) => format!("error:{}", e.code),
            },
            duration_ms: started.elapsed().as_millis() as u64,
        });
        label
    }

    /// One command, three steps: describe the call and prepare its work
    /// (lazily: nothing runs yet), ask the policy once, then run it.
    async fn dispatch(
        self: &Arc<Self>,
        inv: &Invocation<'_>,
        decision: &mut Option<Decision>,
    ) -> Result<Value, ToolError> {
        let Some(command) = Tool::parse(inv.command) else {
            return Err(ToolError::new(
                "UNKNOWN_COMMAND",
                format!(
                    "this node has no command {:?}; it offers {}",
                    inv.command,
                    self.declared.join(", ")
                ),
            ));
        };
        if !self.declared.iter().any(|d| d == command.name()) {
            return Err(ToolError::new(
                "UNAVAILABLE",
                format!("{} is not advertised by this node", command.name()),
            ));
        }
        // desktop.stream and OpenClaw's inference and Claude commands read
        // their parameters their own way (and answer in OpenClaw's words).
        let params = match command {
            Tool::DesktopStream
            | Tool::OllamaModels
            | Tool::OllamaChat
            | Tool::ClaudeList
            | Tool::ClaudeRead => Value::Null,
            // The computer-use pair reads its parameters as OpenClaw's
            // contract does (any JSON; the schema judges), with its words.
            Tool::ScreenSnapshot | Tool::ComputerAct => screen::params::parse(inv.params_json)?,
            _ => parse_params(inv.params_json)?,
        };
        let root = self.workspace.root().to_path_buf();
        let max = inv.max_bytes;
        let name = command.name();
        let mut grant = None;
        let safe = Call::plain(name, Risk::Safe, name.to_owned());
        // `stops_itself`: a command stops its process tree on cancel (TERM,
        // grace, KILL); other work is simply abandoned.
        let (call, work, stops_itself): (Call, Work<'_>, bool) = match command {
            Tool::Which => (
                safe,
                Box::pin(self.blocking(move |_| exec::which(params))),
                false,
            ),
            Tool::Prepare => {
                // How this very call would be decided here tells the
                // gateway whether to ask its operators first.
                let timeout = inv.timeout;
                let (p, r) = (params.clone(), root.clone());
                let call = self
                    .blocking(move |_| exec::parse_system_run(p, &r, timeout))
                    .await
                    .ok()
                    .map(|request| request.call("system.run"));
                let stance = self.policy.stance_for(call.as_ref());
                let rules = self.policy.document().rules();
                let tools = Arc::clone(self);
                (
                    safe,
                    Box::pin(async move {
                        let (prepared, binding) = tools
                            .blocking(move |_| exec::prepare(params, &root, stance, rules))
                            .await?;
                        tools.plans.remember(&prepared["plan"], binding);
                        Ok(prepared)
                    }),
                    false,
                )
            }
            Tool::SystemInfo => (
                safe,
                Box::pin(async move { Ok(system::system_info(&root).await) }),
                false,
            ),
            Tool::ReadConfig => (
                safe,
                Box::pin(self.blocking(|_| system::read_config())),
                false,
            ),
            Tool::ValidateConfig => (safe, Box::pin(system::validate_config()), false),
            Tool::ReadFile => {
                let p = typed(&params)?;
                (
                    safe,
                    Box::pin(self.blocking(move |ws| fs::read_file(ws, p, max))),
                    false,
                )
            }
            Tool::ListFiles => {
                let p = typed(&params)?;
                (
                    safe,
                    Box::pin(self.blocking(move |ws| fs::list_files(ws, p, MAX_ENTRIES))),
                    false,
                )
            }
            Tool::SearchFiles => {
                let p = typed(&params)?;
                (
                    safe,
                    Box::pin(self.blocking(move |ws| fs::search_files(ws, p, MAX_MATCHES))),
                    false,
                )
            }
            Tool::WriteFile => {
                let p: fs::WriteFile = typed(&params)?;
                let call = Call::plain(
                    name,
                    Risk::Risky,
                    format!("write_file: {} ({} bytes)", p.path, p.content.len()),
                );
                (
                    call,
                    Box::pin(self.blocking(move |ws| fs::write_file(ws, p))),
                    false,
                )
            }
            Tool::ListDir => {
                let p = typed(&params)?;
                (
                    safe,
                    Box::pin(self.blocking(move |ws| host::list_dir(ws, p))),
                    false,
                )
            }
            Tool::Notify => {
                let p = typed(&params)?;
                (safe, Box::pin(host::notify(p)), false)
            }
            // The gateway forwards these only from operators with
            // operator.admin (`openclaw approvals … --node`); the document
            // can pre-approve programs but never unforbid one.
            Tool::ApprovalsGet => {
                let tools = Arc::clone(self);
                (
                    safe,
                    Box::pin(async move { tools.policy.document().get() }),
                    false,
                )
            }
            Tool::ApprovalsSet => {
                let tools = Arc::clone(self);
                (
                    safe,
                    Box::pin(async move { tools.policy.document().set(params) }),
                    false,
                )
            }
            Tool::Upload => {
                let p: host::Upload = typed(&params)?;
                let call = Call::plain(
                    name,
                    Risk::Risky,
                    format!(
                        "terminal.upload: {} into {}/ ({} bytes of base64)",
                        p.file_name()?,
                        host::UPLOAD_DIR,
                        p.content_base64.len()
                    ),
                );
                (
                    call,
                    Box::pin(self.blocking(move |ws| host::upload(ws, p))),
                    false,
                )
            }
            Tool::BrowserProxy | Tool::BrowserUpload => {
                let request = browser::Request::parse(&params, command == Tool::BrowserUpload)?;
                let (risk, summary) = browser::classify(&request);
                let call = Call::plain(name, risk, summary);
                let tools = Arc::clone(self);
                // The caller's time counts from now: what an approval took
                // is not given back to the route.
                let (timeout, asked) = (inv.timeout, Instant::now());
                let work = Box::pin(async move {
                    let budget = timeout.saturating_sub(asked.elapsed());
                    match &tools.browser {
                        Some(b) => b.proxy(request, budget).await,
                        None => Err(ToolError::new(
                            "UNAVAILABLE",
                            "UNAVAILABLE: node browser proxy disabled",
                        )),
                    }
                });
                (call, work as Work<'_>, false)
            }
            // What the machine senses: listing cameras or asking where it
            // is once the owner turned them on is a read; a photo or a
            // clip is asked for each time, as a write is.
            Tool::CameraList | Tool::CameraSnap | Tool::CameraClip | Tool::Location => {
                let (risk, summary) = match command {
                    Tool::CameraSnap | Tool::CameraClip => {
                        let device = params["deviceId"].as_str().unwrap_or("the first camera");
                        (Risk::Risky, format!("{name}: capture from {device}"))
                    }
                    _ => (Risk::Safe, name.to_owned()),
                };
                let (timeout, asked, microphone) =
                    (inv.timeout, Instant::now(), self.offer.microphone);
                let work: Work<'_> = Box::pin(async move {
                    let timeout = timeout.saturating_sub(asked.elapsed());
                    match command {
                        Tool::CameraList => sensors::camera::list(timeout).await,
                        Tool::CameraSnap => sensors::camera::snap(params, timeout).await,
                        Tool::CameraClip => {
                            sensors::camera::clip(params, microphone, timeout).await
                        }
                        _ => sensors::location::get(params, timeout).await,
                    }
                });
                (Call::plain(name, risk, summary), work, false)
            }
            // Naming the VNC server is the owner's consent to show (and,
            // with its password file, to hand) this desktop to the
            // gateway's viewers, who hold operator.admin: no call asks
            // again (the gateway holds it open with no deadline; nobody
            // could answer in time).
            Tool::DesktopStream => {
                let host = self.offer.desktop.clone();
                let (raw, gateway, timeout) = (inv.params_json, inv.gateway, inv.timeout);
                let (tap, cancel) = (inv.tap.clone(), inv.cancel.clone());
                let work: Work<'_> = Box::pin(async move {
                    match &host {
                        Some(host) => {
                            let tap = tap.as_ref();
                            desktop::stream(host, raw, gateway, tap, &cancel, timeout).await
                        }
                        None => Err(ToolError::new(
                            "UNAVAILABLE",
                            "desktop host streaming is disabled on this node",
                        )),
                    }
                });
                (safe, work, true)
            }
            Tool::OllamaModels | Tool::OllamaChat => {
                let prepared = ollama::Prepared::new(command == Tool::OllamaChat, inv.params_json)?;
                let call = prepared.call.clone();
                let (timeout, asked) = (inv.timeout, Instant::now());
                let work = Box::pin(async move {
                    let left = timeout.saturating_sub(asked.elapsed());
                    prepared.run(left, timeout).await
                });
                (call, work as Work<'_>, false)
            }
            // Reads of the owner's transcripts, shared on purpose: safe.
            Tool::ClaudeList | Tool::ClaudeRead => {
                let sessions = self.offer.claude.clone().ok_or_else(|| {
                    ToolError::new(
                        "UNAVAILABLE",
                        format!("{name} is not advertised by this node"),
                    )
                })?;
                let (raw, cancel) = (inv.params_json.map(str::to_owned), inv.cancel.clone());
                let work = self.blocking(move |_| {
                    let stop = || cancel.is_cancelled();
                    match command {
                        Tool::ClaudeList => sessions.list(raw.as_deref(), &stop),
                        _ => sessions.read(raw.as_deref(), &stop),
                    }
                });
                (safe, Box::pin(work), false)
            }
            Tool::FileFetch | Tool::FileStat | Tool::DirList | Tool::DirFetch | Tool::FileWrite => {
                let op = match command {
                    Tool::FileFetch => files::Op::Fetch,
                    Tool::FileStat => files::Op::Stat,
                    Tool::DirList => files::Op::List,
                    Tool::DirFetch => files::Op::Archive,
                    _ => files::Op::Write,
                };
                let request = files::Request::parse(op, params, max);
                let call = Call::plain(name, request.risk(), request.summary());
                let files = Arc::clone(&self.files);
                let (timeout, asked, cancel) = (inv.timeout, Instant::now(), inv.cancel.clone());
                let keep = inv.keep;
                let work = Box::pin(async move {
                    let budget = timeout.saturating_sub(asked.elapsed());
                    files.run(request, budget, cancel, keep).await
                });
                (call, work as Work<'_>, false)
            }
            // The screen: a picture is safe once the owner turned it on
            // (the computer tool takes one after every action); an action
            // is risky, closing an execution is not.
            Tool::ScreenSnapshot | Tool::ComputerAct => {
                let (risk, summary) = match command {
                    Tool::ComputerAct => screen::classify(&params)?,
                    _ => (Risk::Safe, name.to_owned()),
                };
                let desktop = self.desktop.clone().ok_or_else(|| {
                    sensors::failure("COMPUTER_DRIVER_UNAVAILABLE: no X display on this node")
                })?;
                let (timeout, asked) = (inv.timeout, Instant::now());
                let work: Work<'_> = Box::pin(async move {
                    let budget = timeout.saturating_sub(asked.elapsed());
                    match command {
                        Tool::ComputerAct => desktop.act(params, budget).await,
                        _ => desktop.snapshot(params, budget).await,
                    }
                });
                (Call::plain(name, risk, summary), work, false)
            }
            Tool::Run | Tool::RunCommand => {
                // An operator's approval from the gateway, checked against
                // the plan it was given for (system.run only).
                let plan = params["systemRunPlan"].clone();
                if command == Tool::Run {
                    grant = plans::gateway_grant(&params)?;
                }
                // Resolving touches the filesystem (PATH, cwd): blocking pool.
                let timeout = inv.timeout;
                let agent = inv.agent.map(str::to_owned);
                let request = self
                    .blocking(move |_| {
                        if command == Tool::Run {
                            exec::parse_system_run(params, &root, timeout)
                        } else {
                            exec::parse_run_command(params, &root, timeout).map(|mut r| {
                                r.agent = agent;
                                r
                            })
                        }
                    })
                    .await?;
                // ... spent on this run only, for a plan this node prepared
                // itself and whose binding still holds.
                if grant.is_some() {
                    self.plans.redeem(&plan, &request.binding)?;
                }
                let call = request.call(name);
                let cancel = inv.cancel.clone();
                let tap = inv.tap.clone();
                let work = Box::pin(async move { request.run(max, cancel.cancelled(), tap).await });
                (call, work, true)
            }
        };
        let verdict = cancellable(
            &inv.cancel,
            self.policy
                .decide_gated(&call, inv.timeout, inv.gate, grant),
        )
        .await?;
        *decision = Some(verdict.clone());
        if !matches!(verdict, Decision::Allowed(_)) {
            return Err(refusal(verdict, command));
        }
        if stops_itself {
            work.await
        } else {
            cancellable(&inv.cancel, work).await?
        }
    }

    /// File work runs on the blocking pool, never on the connection's thread.
    async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Workspace) -> Result<T, ToolError> + Send + 'static,
    ) -> Result<T, ToolError> {
        let tools = Arc::clone(self);
        tokio::task::spawn_blocking(move || work(&tools.workspace))
            .await
            .unwrap_or_else(|e| Err(ToolError::new("IO_ERROR", format!("the tool failed: {e}"))))
    }
}

async fn cancellable<T>(
    cancel: &CancellationToken,
    work: impl std::future::Future<Output = T>,
) -> Result<T, ToolError> {
    tokio::select! {
        value = work => Ok(value),
        _ = cancel.cancelled() => Err(ToolError::new("CANCELLED", "the invocation was cancelled")),
    }
}

/// `paramsJSON`: absent, blank or `null` means `{}`; anything but an object
/// is refused.
fn parse_params(text: Option<&str>) -> Result<Value, ToolError> {
    let text = text
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or("{}");
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Null) => Ok(Value::Object(Default::default())),
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(ToolError::new(
            "INVALID_PARAMS",
            "paramsJSON must be a JSON object",
        )),
        Err(e) => Err(ToolError::new(
            "INVALID_PARAMS",
            format!("paramsJSON is not valid JSON: {e}"),
        )),
    }
}

fn typed<T: DeserializeOwned>(params: &Value) -> Result<T, ToolError> {
    serde_json::from_value(params.clone())
        .map_err(|e| ToolError::new("INVALID_PARAMS", e.to_string()))
}

/// A refusal as the caller expects it: a `system.run` that needs a human
/// nobody here can be gets OpenClaw's `SYSTEM_RUN_DENIED: approval
/// required` (what makes its gateway ask an operator); anything else that
/// needs one is `USER_REJECTED`, with how to allow it.
fn refusal(decision: Decision, command: Tool) -> ToolError {
    match decision {
        Decision::Refused {
            code: "APPROVAL_REQUIRED",
            message,
        } if command == Tool::Run => ToolError::new(
            "SYSTEM_RUN_DENIED",
            format!("SYSTEM_RUN_DENIED: approval required ({message})"),
        ),
        other => refusal_of(other),
    }
}

/// A refusal of any other call.
fn refusal_of(decision: Decision) -> ToolError {
    match decision {
        Decision::Refused {
            code: "APPROVAL_REQUIRED",
            message,
        } => ToolError::new("USER_REJECTED", message),
        Decision::Refused { code, message } => ToolError::new(code, message),
        Decision::Allowed(_) => ToolError::new("INTERNAL", "refusal of an allowed call"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::Mode;

    fn tools(dir: &std::path::Path, mode: Mode) -> Arc<Tools> {
        let ws = dir.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let state = dir.join("state");
        std::fs::create_dir_all(&state).unwrap();
        Tools::new(
            Workspace::new(&ws).unwrap(),
            Policy::new(mode, vec![], vec![], &state, None),
            audit::Audit::open(&state),
            available_commands(),
            None,
            Offer::default(),
            files::Files::new(&Workspace::new(&ws).unwrap(), &[]).unwrap(),
        )
    }

    async fn invoke(t: &Arc<Tools>, command: &str, params: &str) -> Result<Value, ToolError> {
        t.invoke(Invocation {
            keep: None,
            id: "i1",
            command,
            params_json: Some(params),
            timeout: Duration::from_secs(10),
            max_bytes: 1 << 20,
            cancel: CancellationToken::new(),
            tap: None,
            agent: None,
            gate: policy::Gate::Ours,
            gateway: None,
        })
        .await
        .0
    }

    #[tokio::test]
    async fn unknown_commands_and_bad_params_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let t = tools(dir.path(), Mode::Deny);
        assert_eq!(
            invoke(&t, "format_disk", "{}").await.unwrap_err().code,
            "UNKNOWN_COMMAND"
        );
        assert_eq!(
            invoke(&t, "read_file", "{not json").await.unwrap_err().code,
            "INVALID_PARAMS"
        );
        assert_eq!(
            invoke(&t, "read_file", "[1]").await.unwrap_err().code,
            "INVALID_PARAMS"
        );
        assert_eq!(
            invoke(&t, "read_file", r#"{"path":5}"#)
                .await
                .unwrap_err()
                .code,
            "INVALID_PARAMS"
        );
    }

    #[tokio::test]
    async fn writes_need_approval_and_reads_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let t = tools(dir.path(), Mode::Deny);
        let refused = invoke(&t, "write_file", r#"{"path":"a.txt","content":"x"}"#).await;
        assert_eq!(refused.unwrap_err().code, "USER_REJECTED");
        assert!(!dir.path().join("ws/a.txt").exists());
        std::fs::write(dir.path().join("ws/b.txt"), "hello").unwrap();
        let read = invoke(&t, "read_file", r#"{"path":"b.txt"}"#)
            .await
            .unwrap();
        assert_eq!(read["content"], "hello");
    }

    #[tokio::test]
    async fn every_invocation_is_audited() {
        let dir = tempfile::tempdir().unwrap();
        let t = tools(dir.path(), Mode::Deny);
        let _ = invoke(&t, "run_command", r#"{"command":["true"]}"#).await;
        let _ = invoke(&t, "system.which", r#"{"bins":["sh"]}"#).await;
        let log = std::fs::read_to_string(dir.path().join("state/audit.jsonl")).unwrap();
        let lines: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["command"], "run_command");
        assert_eq!(lines[0]["decision"], "refused:USER_REJECTED");
        assert_eq!(lines[0]["outcome"], "error:USER_REJECTED");
        assert_eq!(
            lines[0]["paramsSha256"],
            audit::digest(r#"{"command":["true"]}"#)
        );
        assert_eq!(lines[1]["decision"], "allowed:safe");
        assert_eq!(lines[1]["outcome"], "ok");
    }

    #[tokio::test]
    async fn cancel_stops_a_running_command() {
        let dir = tempfile::tempdir().unwrap();
        let t = tools(dir.path(), Mode::Allow);
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            c2.cancel();
        });
        let started = Instant::now();
        let result = t
            .invoke(Invocation {
                keep: None,
                id: "i",
                command: "run_command",
                params_json: Some(r#"{"command":["sleep","30"]}"#),
                timeout: Duration::from_secs(60),
                max_bytes: 1024,
                cancel,
                tap: None,
                agent: None,
                gate: policy::Gate::Ours,
                gateway: None,
            })
            .await
            .0;
        assert_eq!(result.unwrap_err().code, "CANCELLED");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
