//! `clawbot_router node install | uninstall | status | start | stop |
//! restart`: the node as a service of the machine's own manager, as
//! `openclaw node install` does — a systemd unit on Linux (user, or
//! system with `--system`), a launchd agent on macOS, a Task Scheduler
//! task on Windows.
//!
//! What the service file holds: the node's command line with every flag
//! resolved (absolute state directory and workspace, the gateway's URL and
//! pin), but never a secret. The gateway token and a setup code go to an
//! environment file of the node's own (`node.env` in its state directory,
//! 0600), which the node reads with `--env-file` — one format on all three
//! systems, with no shell or `cmd` quoting of a secret anywhere.
//!
//! What `status` says: whether the service is installed, whether the
//! manager runs it, and — from the node's own `node.status.json` —
//! whether it is connected and its commands approved.

mod launchd;
mod schtasks;
mod systemd;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::status;
use crate::runner;

/// The secrets file, in the state directory.
pub const ENV_FILE: &str = "node.env";
/// The keys an env file may hold.
pub const TOKEN_KEY: &str = "OPENCLAW_GATEWAY_TOKEN";
/// The attached browser's address (it may carry a token).
pub const CDP_URL_KEY: &str = "CLAWBOT_BROWSER_CDP_URL";
pub const SETUP_CODE_KEY: &str = "CLAWBOT_ROUTER_SETUP_CODE";
/// Inherited variables a service carries over (none of them secret).
const CARRIED: [&str; 6] = [
    "PATH",
    "CLAWBOT_ROUTER_LANG",
    "CLAWBOT_ROUTER_OPERATOR_DEVICE",
    "OPENCLAW_ALLOW_INSECURE_PRIVATE_WS",
    "OPENCLAW_CONFIG_PATH",
    "OPENCLAW_STATE_DIR",
];
/// How long one call of the manager's tool may take.
const TOOL_LIMIT: Duration = Duration::from_secs(30);
/// How long `install`/`start`/`restart` watch the node connect.
const SETTLE: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Install,
    Uninstall,
    Status,
    Start,
    Stop,
    Restart,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Install => "install",
            Action::Uninstall => "uninstall",
            Action::Status => "status",
            Action::Start => "start",
            Action::Stop => "stop",
            Action::Restart => "restart",
        }
    }
}

/// What to install: the node's command line and its secrets.
#[derive(Debug, Clone)]
pub struct Plan {
    pub program: PathBuf,
    /// After the program: `node --gateway … --state-dir …`.
    pub args: Vec<String>,
    pub state_dir: PathBuf,
    pub workspace: PathBuf,
    pub gateway: String,
    /// Non-secret variables the service sets.
    pub env: Vec<(String, String)>,
    /// Secret variables: to the env file, never into the service file.
    pub secrets: Vec<(String, String)>,
    /// The system-wide variant (`--system`); runs as `user`.
    pub system: bool,
    pub user: String,
    /// With `--system` (installed as root): the service account's uid and
    /// gid, which its state directory and env file must belong to.
    #[cfg_attr(not(unix), allow(dead_code))]
    pub owner: Option<(u32, u32)>,
}

/// Where the service lives and how to reach its manager.
#[derive(Debug, Clone)]
pub struct Scope {
    pub system: bool,
    /// Where the service definition is written (a test moves it).
    pub home: PathBuf,
    pub user: String,
}

impl Scope {
    pub fn current(system: bool) -> Self {
        Self {
            system,
            home: std::env::var_os("HOME")
                .or_else(|| std::env::var_os("USERPROFILE"))
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(".")),
            user: current_user(),
        }
    }
}

/// What the manager says about the service (`runtime` in the JSON reports).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Runtime {
    pub installed: bool,
    pub enabled: bool,
    pub running: bool,
    pub pid: Option<u32>,
    /// The manager's own words (`active (running)`, `Ready`, …).
    pub state: String,
    pub restarts: Option<u64>,
    pub last_exit: Option<i32>,
}

/// What `state` says when the manager was not asked (it is not available
/// here) or did not answer: never an empty string.
pub const UNKNOWN_STATE: &str = "unknown";

impl Runtime {
    /// The manager could not tell: only whether its file is there is known.
    fn unknown(installed: bool) -> Self {
        Self {
            installed,
            state: UNKNOWN_STATE.into(),
            ..Self::default()
        }
    }
}

/// One service manager.
trait Manager {
    /// `systemd`, `launchd`, `Task Scheduler`.
    fn name(&self) -> &'static str;
    /// The service's name in the manager's own terms.
    fn id(&self) -> String;
    /// Where the definition lives.
    fn path(&self) -> PathBuf;
    /// The definition's text.
    fn definition(&self, plan: &Plan) -> Result<String, String>;
    /// The manager can be used here, or why not.
    async fn available(&self) -> Result<(), String>;
    /// Registers the definition written at `path()` and starts it.
    async fn activate(&self) -> Result<(), String>;
    /// Stops and unregisters it (the file is removed afterwards).
    async fn deactivate(&self) -> Result<(), String>;
    async fn start(&self) -> Result<(), String>;
    async fn stop(&self) -> Result<(), String>;
    async fn restart(&self) -> Result<(), String>;
    async fn runtime(&self) -> Runtime;
    /// Anything the user should know after an install (systemd: lingering).
    async fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
    /// Where the node's log goes.
    fn log_hint(&self) -> String;
    /// Files the definition relies on (Task Scheduler: the launcher).
    fn extra_files(&self, _plan: &Plan) -> Vec<(PathBuf, String)> {
        Vec::new()
    }
}

/// The answer: what to print, and the exit code.
pub struct Report {
    pub json: ReportJson,
    pub text: String,
    pub code: u8,
}

/// What `node install|uninstall|status|start|stop|restart --json` prints.
/// One shape for every action; a field an action does not fill is left
/// out (`node` and `runtime` come together, `node` may be `null`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportJson {
    pub action: &'static str,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hints: Option<Vec<String>>,
    /// `installed`, `started`, `not-installed`, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    #[serde(flatten)]
    pub settled: Option<Settled>,
}

impl ReportJson {
    fn new(action: Action, ok: bool) -> Self {
        Self {
            action: action.name(),
            ok,
            error: None,
            hints: None,
            result: None,
            message: None,
            service: None,
            warnings: None,
            settled: None,
        }
    }
}

/// The service as installed (install) or looked for (status).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceJson {
    pub manager: &'static str,
    pub id: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<bool>,
    /// Status only: `null` when the manager is available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable_reason: Option<Option<String>>,
}

/// What the manager and the node itself say, after a start or on status.
#[derive(Debug, Serialize)]
pub struct Settled {
    pub runtime: Runtime,
    pub node: Option<status::Status>,
}

impl Report {
    fn failed(action: Action, error: String, hints: Vec<String>) -> Self {
        let mut text = format!("{} failed: {error}", action.name());
        for hint in &hints {
            text.push_str(&format!("\n  {hint}"));
        }
        Self {
            json: ReportJson {
                error: Some(error),
                hints: Some(hints),
                ..ReportJson::new(action, false)
            },
            text,
            code: 1,
        }
    }
}

/// The service's plan from the node's resolved options: every path made
/// absolute (a service starts elsewhere), the secrets set apart.
pub fn plan(o: &crate::node::Options, system: bool, program: PathBuf) -> Result<Plan, String> {
    if o.doctor.is_some() {
        return Err(
            "--doctor is a conversation on this terminal; a service cannot hold one".into(),
        );
    }
    // What the node would refuse at its first connect, refused now.
    crate::gateway::transport::precheck(&o.gateway.url, &o.gateway.trust)
        .map_err(|e| e.to_string())?;
    let account = if system {
        Some(service_account()?)
    } else {
        None
    };
    // A system service runs as the account that ran sudo: its state
    // directory by default, not root's.
    let state_dir = match &account {
        Some(a) if cfg!(unix) && o.state_dir == crate::shared::paths::default_state_dir() => {
            a.home.join(".local/state/clawbot_router")
        }
        _ => o.state_dir.clone(),
    };
    let state_dir = std::path::absolute(&state_dir)
        .map_err(|e| format!("--state-dir {}: {e}", state_dir.display()))?;
    let workspace = o.workspace.canonicalize().map_err(|e| {
        format!(
            "the workspace {} cannot be used ({e}): create it, or give --workspace DIR",
            o.workspace.display()
        )
    })?;
    let word = |s: &str| s.to_owned();
    let mut args = vec![word("node"), word("--gateway"), o.gateway.url.clone()];
    if let Some(pin) = &o.gateway.trust.pin {
        args.extend([word("--tls-fingerprint"), pin.to_string()]);
    }
    if let Some(name) = &o.display_name {
        args.extend([word("--display-name"), name.clone()]);
    }
    args.extend([
        word("--state-dir"),
        state_dir.to_string_lossy().into_owned(),
        word("--workspace"),
        workspace.to_string_lossy().into_owned(),
        word("--approval"),
        clap::ValueEnum::to_possible_value(&o.approval)
            .map(|v| v.get_name().to_owned())
            .unwrap_or_else(|| "ask".into()),
    ]);
    for name in &o.allow {
        args.extend([word("--allow-command"), name.clone()]);
    }
    for name in &o.deny {
        args.extend([word("--deny-command"), name.clone()]);
    }
    if let Some(commands) = &o.commands {
        args.extend([word("--commands"), commands.join(",")]);
    }
    if o.no_agent_tools {
        args.push(word("--no-agent-tools"));
    }
    if o.no_ollama {
        args.push(word("--no-ollama"));
    }
    if o.claude_sessions {
        args.push(word("--claude-sessions"));
    }
    let b = &o.browser;
    match b.browser.trim() {
        "" | "auto" => {}
        "off" => args.extend([word("--browser"), word("off")]),
        // As an absolute path: the service's PATH is not this shell's.
        named => {
            let found = which::which(named).map_err(|_| {
                format!("--browser {named}: no such executable (name a Chromium-family browser, or auto, or off)")
            })?;
            let found = std::path::absolute(&found).unwrap_or(found);
            args.extend([word("--browser"), found.to_string_lossy().into_owned()]);
        }
    }
    for (on, flag) in [
        (b.browser_headed, "--browser-headed"),
        (b.browser_private_network, "--browser-private-network"),
        (b.browser_evaluate, "--browser-evaluate"),
    ] {
        if on {
            args.push(word(flag));
        }
    }
    for host in &b.browser_allow_host {
        args.extend([word("--browser-allow-host"), host.clone()]);
    }
    if let Some(port) = o.desktop.desktop_vnc_port {
        args.extend([word("--desktop-vnc-port"), port.to_string()]);
    }
    if let Some(file) = &o.desktop.desktop_password_file {
        let file = std::path::absolute(file).unwrap_or_else(|_| file.clone());
        args.extend([
            word("--desktop-password-file"),
            file.to_string_lossy().into_owned(),
        ]);
    }
    let sensors = &o.sensors;
    for (on, flag) in [
        (sensors.camera, "--camera"),
        (sensors.camera_audio, "--camera-audio"),
        (sensors.location, "--location"),
        (o.screen.screen, "--screen"),
        (o.screen.computer, "--computer"),
    ] {
        if on {
            args.push(word(flag));
        }
    }
    // As absolute paths: the service does not start where this shell is.
    for root in &o.file_roots {
        let root = root
            .canonicalize()
            .map_err(|e| format!("--file-root {}: {e}", root.display()))?;
        args.extend([word("--file-root"), root.to_string_lossy().into_owned()]);
    }
    for server in &o.mcp.flags {
        args.extend([word("--mcp-server"), server.clone()]);
    }
    if let Some(file) = &o.mcp.file {
        args.extend([word("--mcp-config"), file.to_string_lossy().into_owned()]);
    }
    let mut secrets = Vec::new();
    // Kept with the secrets, not on the command line: it may carry a token.
    if let Some(url) = b.browser_cdp_url.clone().filter(|u| !u.trim().is_empty()) {
        crate::tools::browser::check_cdp_url(&url)?;
        secrets.push((CDP_URL_KEY.to_owned(), url));
    }
    if let Some(token) = &o.token {
        secrets.push((TOKEN_KEY.to_owned(), token.clone()));
    }
    if let Some(code) = &o.pair {
        // Used only until the node holds a device token: the service's
        // command line keeps working after enrolment and after the code
        // expired.
        secrets.push((SETUP_CODE_KEY.to_owned(), code.code.clone()));
        args.push(word("--pair-if-needed"));
    }
    if secrets.iter().any(|(_, v)| v.contains(['\n', '\r'])) {
        return Err(
            "a token, setup code or browser address with a line break cannot be stored".into(),
        );
    }
    if !secrets.is_empty() {
        args.extend([
            word("--env-file"),
            state_dir.join(ENV_FILE).to_string_lossy().into_owned(),
        ]);
    }
    // On Windows the log always goes to a file: nothing else keeps it.
    let log_file = match &o.log_file {
        Some(path) => Some(
            std::path::absolute(path).map_err(|e| format!("--log-file {}: {e}", path.display()))?,
        ),
        None if cfg!(windows) => Some(state_dir.join("node.log")),
        None => None,
    };
    if let Some(path) = &log_file {
        args.extend([word("--log-file"), path.to_string_lossy().into_owned()]);
    }
    // The log's shape and level, where they are not the defaults.
    use crate::shared::log::{Format, Level};
    if o.log_format != Format::Text {
        args.extend([word("--log-format"), value_name(&o.log_format)]);
    }
    if o.log_level != Level::Info {
        args.extend([word("--log-level"), value_name(&o.log_level)]);
    }
    // A path that is not UTF-8 could not be written into the definition
    // as it is: refused, not silently changed.
    for path in [&program, &state_dir, &workspace]
        .into_iter()
        .chain(log_file.as_ref())
    {
        if path.to_str().is_none() {
            return Err(format!(
                "{} is not valid UTF-8; a service definition cannot name it",
                path.display()
            ));
        }
    }
    Ok(Plan {
        program,
        args,
        state_dir,
        workspace,
        gateway: o.gateway.url.clone(),
        env: carried_env(),
        secrets,
        system,
        user: account
            .as_ref()
            .map(|a| a.name.clone())
            .unwrap_or_else(current_user),
        owner: account.map(|a| (a.uid, a.gid)),
    })
}

/// The account a system-wide service runs as.
struct Account {
    name: String,
    uid: u32,
    gid: u32,
    home: PathBuf,
}

/// `--system` is installed with sudo and runs as the account that ran it:
/// never as root, whose agents' commands would run as root.
#[cfg(unix)]
fn service_account() -> Result<Account, String> {
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "--system writes a system-wide service: run it with sudo, from the account the node should run as"
                .into(),
        );
    }
    let name = std::env::var("SUDO_USER")
        .ok()
        .filter(|u| !u.is_empty() && u != "root")
        .ok_or_else(|| {
            "--system would run agents' commands as root: run `sudo clawbot_router node install --system …` from the account the node should run as".to_owned()
        })?;
    let c_name = std::ffi::CString::new(name.clone()).map_err(|_| "SUDO_USER is not a name")?;
    // SAFETY: getpwnam returns null or a pointer into static storage; the
    // fields are copied out at once.
    unsafe {
        let pw = libc::getpwnam(c_name.as_ptr());
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return Err(format!("no account {name:?} (SUDO_USER) on this machine"));
        }
        let home = std::ffi::CStr::from_ptr((*pw).pw_dir)
            .to_string_lossy()
            .into_owned();
        Ok(Account {
            name,
            uid: (*pw).pw_uid,
            gid: (*pw).pw_gid,
            home: PathBuf::from(home),
        })
    }
}

/// Windows: the task runs as the installing account (S4U, at boot).
#[cfg(not(unix))]
fn service_account() -> Result<Account, String> {
    Ok(Account {
        name: current_user(),
        uid: 0,
        gid: 0,
        home: Scope::current(true).home,
    })
}

/// The manager for this operating system.
enum Host {
    Systemd(systemd::Systemd),
    Launchd(launchd::Launchd),
    Schtasks(schtasks::Schtasks),
}

macro_rules! each {
    ($host:expr, $m:ident => $body:expr) => {
        match $host {
            Host::Systemd($m) => $body,
            Host::Launchd($m) => $body,
            Host::Schtasks($m) => $body,
        }
    };
}

impl Host {
    fn for_this_system(scope: &Scope) -> Self {
        if cfg!(target_os = "macos") {
            Host::Launchd(launchd::Launchd::new(scope.clone()))
        } else if cfg!(windows) {
            Host::Schtasks(schtasks::Schtasks::new(scope.clone()))
        } else {
            Host::Systemd(systemd::Systemd::new(scope.clone()))
        }
    }
}

/// `node install --print`: the definition, exactly as it would be written.
pub fn print(plan: &Plan, scope: &Scope) -> Result<String, String> {
    each!(&Host::for_this_system(scope), m => m.definition(plan))
}

/// Runs one action. `plan` is given for `install` only.
/// `state_dir`: where to look for the node when no installed service
/// names its own.
pub async fn run(
    action: Action,
    plan: Option<Plan>,
    scope: Scope,
    force: bool,
    state_dir: Option<PathBuf>,
) -> Report {
    let host = Host::for_this_system(&scope);
    each!(&host, m => act(m, action, plan, force, state_dir).await)
}

async fn act(
    m: &impl Manager,
    action: Action,
    plan: Option<Plan>,
    force: bool,
    given_state_dir: Option<PathBuf>,
) -> Report {
    let path = m.path();
    let installed = path.exists();
    // The installed service's own state directory first: its env file
    // (the token) must go with it, whatever --state-dir says.
    let state_dir = plan
        .as_ref()
        .map(|p| p.state_dir.clone())
        .or_else(|| installed_state_dir(&path))
        .or(given_state_dir);
    // Status first: it works without a manager (the node may run by hand).
    if action == Action::Status {
        return status_report(m, installed, state_dir.as_deref()).await;
    }
    if let Err(why) = m.available().await {
        let mut hints = vec![format!(
            "{} cannot be used here ({why}); run `clawbot_router node …` under your own supervisor instead",
            m.name()
        )];
        if let Some(plan) = plan.as_ref().filter(|_| action == Action::Install) {
            hints[0] = format!(
                "{} cannot be used here ({why}); to run the node under your own supervisor: {}{}",
                m.name(),
                by_hand(plan),
                if plan.secrets.is_empty() {
                    ""
                } else {
                    " (with OPENCLAW_GATEWAY_TOKEN, or CLAWBOT_ROUTER_SETUP_CODE for --pair-if-needed, in its environment or in a 0600 file for --env-file)"
                }
            );
            hints.push(
                "`clawbot_router node install --print` shows the service definition that would be written"
                    .into(),
            );
        }
        // Nothing to stop is not a failure (as `openclaw node stop`).
        if matches!(action, Action::Stop | Action::Uninstall) && !installed {
            return not_installed(action);
        }
        return Report::failed(action, format!("{} is not available", m.name()), hints);
    }
    match action {
        Action::Install => install(m, plan.expect("install has a plan"), force).await,
        Action::Uninstall => uninstall(m, installed, state_dir.as_deref()).await,
        Action::Stop if !installed => not_installed(action),
        Action::Start | Action::Restart if !installed => Report::failed(
            action,
            format!(
                "the node service is not installed ({} does not exist)",
                path.display()
            ),
            vec!["install it first: clawbot_router node install --gateway URL …".into()],
        ),
        Action::Start | Action::Restart | Action::Stop => {
            let (step, result) = match action {
                Action::Start => (m.start().await, "started"),
                Action::Stop => (m.stop().await, "stopped"),
                _ => (m.restart().await, "restarted"),
            };
            if let Err(e) = step {
                return Report::failed(action, e, vec![m.log_hint()]);
            }
            let (settled, text) = if action == Action::Stop {
                (None, String::new())
            } else {
                let (settled, text) = settle(m, state_dir.as_deref()).await;
                (Some(settled), text)
            };
            let mut report = done(action, result, &format!("node service {result}"));
            report.json.settled = settled;
            if !text.is_empty() {
                report.text.push('\n');
                report.text.push_str(&text);
            }
            report
        }
        Action::Status => unreachable!("answered above"),
    }
}

/// The node's command line as a shell runs it, without the env file
/// that was not written.
fn by_hand(plan: &Plan) -> String {
    let mut words = vec![plan.program.to_string_lossy().into_owned()];
    let mut args = plan.args.iter();
    while let Some(arg) = args.next() {
        if arg == "--env-file" {
            args.next();
            continue;
        }
        words.push(arg.clone());
    }
    shell_words::join(words)
}

/// Nothing to stop or remove is not a failure (as `openclaw node stop`).
fn not_installed(action: Action) -> Report {
    done(action, "not-installed", "the node service is not installed")
}

fn done(action: Action, result: &'static str, message: &str) -> Report {
    Report {
        json: ReportJson {
            result: Some(result),
            message: Some(message.to_owned()),
            ..ReportJson::new(action, true)
        },
        text: message.to_owned(),
        code: 0,
    }
}

async fn install(m: &impl Manager, plan: Plan, force: bool) -> Report {
    let action = Action::Install;
    let path = m.path();
    let definition = match m.definition(&plan) {
        Ok(d) => d,
        Err(e) => return Report::failed(action, e, vec![]),
    };
    let extras = m.extra_files(&plan);
    let previous = std::fs::read(&path).ok();
    if previous.is_some() && !force {
        // The extra files hold part of the settings (Windows: the whole
        // command line): all must be the same.
        let same = read_text(&path).is_some_and(|old| old == definition)
            && extras
                .iter()
                .all(|(extra, text)| read_text(extra).is_some_and(|old| &old == text));
        if !same {
            return Report::failed(
                action,
                format!(
                    "a node service is already installed ({}) with other settings",
                    path.display()
                ),
                vec!["`--force` replaces it (the old file is kept as .bak)".into()],
            );
        }
    }
    // The definition first (where a missing permission shows), then the
    // extra files and the secrets; if anything fails, every file is put
    // back exactly as it was and the manager is told so.
    if let Some(old) = &previous {
        let _ = std::fs::write(path.with_extension(bak_extension(&path)), old);
    }
    let env_path = plan.state_dir.join(ENV_FILE);
    let touched: Vec<PathBuf> = std::iter::once(path.clone())
        .chain(extras.iter().map(|(p, _)| p.clone()))
        .chain(std::iter::once(env_path))
        .collect();
    let before = Snapshot::take(&touched);
    let written = write_definition(&path, &definition).and_then(|()| {
        for (extra, text) in &extras {
            write_definition(extra, text)?;
        }
        state_dir_for(&plan)?;
        write_env_file(&plan.state_dir, &plan.secrets)?;
        own(&plan)
    });
    let activated = match written {
        Ok(()) => m.activate().await,
        Err(e) => Err(e),
    };
    if let Err(e) = activated {
        before.restore();
        let _ = if previous.is_some() {
            m.activate().await // the old service, as it was
        } else {
            m.deactivate().await
        };
        return Report::failed(action, e, vec![m.log_hint()]);
    }
    let warnings = m.warnings().await;
    let (settled, text) = settle(m, Some(&plan.state_dir)).await;
    let mut report = done(
        action,
        "installed",
        &format!("installed {} ({}) and started it", m.id(), path.display()),
    );
    report.json.service = Some(ServiceJson {
        manager: m.name(),
        id: m.id(),
        path: path.to_string_lossy().into_owned(),
        system: Some(plan.system),
        user: Some(plan.user.clone()),
        available: None,
        unavailable_reason: None,
    });
    report.json.warnings = Some(warnings.clone());
    report.json.settled = Some(settled);
    report.text.push('\n');
    report.text.push_str(&text);
    for w in warnings {
        report.text.push_str(&format!("\nwarning: {w}"));
    }
    report
}

/// Files as they were before an install: their bytes, or their absence.
struct Snapshot(Vec<(PathBuf, Option<Vec<u8>>)>);

impl Snapshot {
    fn take(paths: &[PathBuf]) -> Self {
        Self(
            paths
                .iter()
                .map(|p| (p.clone(), std::fs::read(p).ok()))
                .collect(),
        )
    }

    fn restore(&self) {
        for (path, bytes) in &self.0 {
            let _ = match bytes {
                Some(bytes) => crate::shared::paths::write_private(path, bytes),
                None => std::fs::remove_file(path).or(Ok(())),
            };
        }
    }
}

/// A system service's state directory, made as the account it runs as:
/// every component install creates (it runs as root) is given to it, so
/// the account can reach its own directory (`~/.local` included).
fn state_dir_for(plan: &Plan) -> Result<(), String> {
    #[cfg(unix)]
    if let Some((uid, gid)) = plan.owner {
        use std::os::unix::fs::DirBuilderExt;
        let mut missing = Vec::new();
        let mut dir = plan.state_dir.as_path();
        while !dir.exists() {
            missing.push(dir.to_path_buf());
            match dir.parent() {
                Some(parent) => dir = parent,
                None => break,
            }
        }
        for dir in missing.iter().rev() {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .and_then(|()| std::os::unix::fs::chown(dir, Some(uid), Some(gid)))
                .map_err(|e| format!("cannot create {} for {}: {e}", dir.display(), plan.user))?;
        }
    }
    #[cfg(not(unix))]
    let _ = plan;
    Ok(())
}

/// A system service's state directory and env file belong to the account
/// it runs as (install ran as root).
fn own(plan: &Plan) -> Result<(), String> {
    #[cfg(unix)]
    if let Some((uid, gid)) = plan.owner {
        for path in [plan.state_dir.clone(), plan.state_dir.join(ENV_FILE)] {
            if path.exists() {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                    .map_err(|e| format!("cannot give {} to {}: {e}", path.display(), plan.user))?;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = plan;
    Ok(())
}

async fn uninstall(m: &impl Manager, installed: bool, state_dir: Option<&Path>) -> Report {
    let action = Action::Uninstall;
    if !installed {
        return not_installed(action);
    }
    if let Err(e) = m.deactivate().await {
        return Report::failed(action, e, vec![m.log_hint()]);
    }
    let path = m.path();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension(bak_extension(&path)));
    // The secrets go with the service; the device identity stays (the
    // gateway still knows this device: `openclaw devices remove` forgets it).
    if let Some(dir) = state_dir {
        let _ = std::fs::remove_file(dir.join(ENV_FILE));
    }
    done(
        action,
        "uninstalled",
        &format!("stopped and removed {} ({})", m.id(), path.display()),
    )
}

/// Watches the node for a few seconds after a start: connected, waiting
/// for pairing, or gone.
async fn settle(m: &impl Manager, state_dir: Option<&Path>) -> (Settled, String) {
    // The node's own file says when it is connected (a read); the
    // manager is asked once, at the end (a process each time).
    let deadline = tokio::time::Instant::now() + SETTLE;
    while tokio::time::Instant::now() < deadline
        && !state_dir
            .and_then(|d| node_view(d, None))
            .is_some_and(|n| n.connected)
    {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let runtime = m.runtime().await;
    let node = state_dir.and_then(|d| node_view(d, runtime.pid));
    let text = describe(&runtime, node.as_ref(), m);
    let settled = Settled {
        runtime: runtime.clone(),
        node,
    };
    (settled, text)
}

async fn status_report(m: &impl Manager, installed: bool, state_dir: Option<&Path>) -> Report {
    let available = m.available().await;
    let runtime = match &available {
        Ok(()) => m.runtime().await,
        Err(_) => Runtime::unknown(installed),
    };
    // A node run by hand (no service) still reports itself.
    let state_dir = state_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(crate::shared::paths::default_state_dir);
    let node = node_view(&state_dir, runtime.pid);
    let mut text = format!(
        "service: {} ({} {})",
        if runtime.installed {
            "installed"
        } else {
            "not installed"
        },
        m.name(),
        m.id()
    );
    if let Err(why) = &available {
        text.push_str(&format!("\n{} is not available here: {why}", m.name()));
    }
    text.push('\n');
    text.push_str(&describe(&runtime, node.as_ref(), m));
    let running = runtime.running || node.as_ref().is_some_and(|n| !n.stopped);
    Report {
        json: ReportJson {
            service: Some(ServiceJson {
                manager: m.name(),
                id: m.id(),
                path: m.path().to_string_lossy().into_owned(),
                system: None,
                user: None,
                available: Some(available.is_ok()),
                unavailable_reason: Some(available.err()),
            }),
            settled: Some(Settled {
                runtime: runtime.clone(),
                node,
            }),
            ..ReportJson::new(Action::Status, true)
        },
        text,
        // As `systemctl status` and LSB: 0 running, 3 not running.
        code: if running { 0 } else { 3 },
    }
}

/// The node's own status file, if the process that wrote it still runs
/// (and is the service's, when the manager names a pid).
fn node_view(state_dir: &Path, service_pid: Option<u32>) -> Option<status::Status> {
    let mut node = status::read(state_dir)?;
    let current =
        !node.stopped && status::alive(node.pid) && service_pid.is_none_or(|pid| pid == node.pid);
    if !current {
        node.connected = false;
        node.approved = false;
        node.stopped = true;
    }
    Some(node)
}

fn describe(runtime: &Runtime, node: Option<&status::Status>, m: &impl Manager) -> String {
    let mut lines = Vec::new();
    if runtime.installed {
        let mut line = format!(
            "manager: {}{}",
            if runtime.running {
                "running"
            } else {
                "not running"
            },
            if runtime.state.is_empty() {
                String::new()
            } else {
                format!(" ({})", runtime.state)
            }
        );
        if let Some(pid) = runtime.pid {
            line.push_str(&format!(", pid {pid}"));
        }
        if let Some(n) = runtime.restarts.filter(|n| *n > 0) {
            line.push_str(&format!(", restarted {n} times"));
        }
        lines.push(line);
    }
    match node {
        Some(n) if !n.stopped && n.connected && n.approved => lines.push(format!(
            "node: connected to {}, commands approved (pid {})",
            n.gateway, n.pid
        )),
        Some(n) if !n.stopped && n.connected => lines.push(format!(
            "node: connected to {}, commands awaiting approval: openclaw nodes pending (pid {})",
            n.gateway, n.pid
        )),
        Some(n) if !n.stopped => lines.push(format!(
            "node: not connected to {}{} (pid {})",
            n.gateway,
            n.last_error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default(),
            n.pid
        )),
        _ => lines.push("node: not running".into()),
    }
    if runtime.installed && !node.is_some_and(|n| n.connected) {
        lines.push(m.log_hint());
    }
    lines.join("\n")
}

/// The state directory a definition was written for: a marker line each
/// format carries as a comment (JSON, with `-` escaped so that an XML
/// comment stays valid).
pub fn marker(state_dir: &Path) -> String {
    let json = json!({"stateDir": state_dir}).to_string();
    format!("clawbot_router: {}", json.replace('-', "\\u002d"))
}

fn installed_state_dir(path: &Path) -> Option<PathBuf> {
    let text = read_text(path)?;
    let at = text.find("clawbot_router: {")? + "clawbot_router: ".len();
    let mut de = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
    let value = de.next()?.ok()?;
    value["stateDir"].as_str().map(PathBuf::from)
}

/// A definition as text; Task Scheduler's XML is UTF-16.
fn read_text(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.starts_with(&[0xff, 0xfe]) {
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        return String::from_utf16(&units).ok();
    }
    String::from_utf8(bytes).ok()
}

/// Text for XML content and attribute values.
fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

fn bak_extension(path: &Path) -> String {
    match path.extension() {
        Some(ext) => format!("{}.bak", ext.to_string_lossy()),
        None => "bak".into(),
    }
}

fn write_definition(path: &Path, text: &str) -> Result<(), String> {
    // Task Scheduler's XML and Windows Script Host's VBScript: UTF-16.
    let bytes = if path.extension().is_some_and(|e| e == "xml" || e == "vbs") {
        schtasks::utf16(text)
    } else {
        text.as_bytes().to_vec()
    };
    crate::shared::paths::write_private(path, &bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes the secrets (0600, atomically); with none, removes the file.
fn write_env_file(state_dir: &Path, secrets: &[(String, String)]) -> Result<(), String> {
    let path = state_dir.join(ENV_FILE);
    if secrets.is_empty() {
        let _ = std::fs::remove_file(&path);
        return Ok(());
    }
    let mut text = String::from(
        "# Secrets of the clawbot_router node service (read with --env-file); keep it 0600.\n",
    );
    for (key, value) in secrets {
        text.push_str(&format!("{key}={value}\n"));
    }
    crate::shared::paths::write_private(&path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Reads an env file written by `install` (or by hand): `KEY=VALUE` lines
/// of the known keys, blank lines and `#` comments. A file other users can
/// read is refused: it holds a gateway token.
pub fn read_env_file(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--env-file {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        if mode & 0o077 != 0 {
            return Err(format!(
                "--env-file {} can be read by other users (mode {:o}) and holds secrets: chmod 600 {}",
                path.display(),
                mode & 0o777,
                path.display()
            ));
        }
    }
    let mut vars = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!(
                "--env-file {} line {}: not KEY=VALUE",
                path.display(),
                n + 1
            ));
        };
        let key = key.trim();
        if ![TOKEN_KEY, SETUP_CODE_KEY, CDP_URL_KEY].contains(&key) {
            return Err(format!(
                "--env-file {} line {}: unknown key {key:?} (known: {TOKEN_KEY}, {SETUP_CODE_KEY}, {CDP_URL_KEY})",
                path.display(),
                n + 1
            ));
        }
        vars.push((key.to_owned(), value.to_owned()));
    }
    crate::shared::secrets::holds_secrets(path);
    Ok(vars)
}

/// The variables a service carries over from the installing shell.
pub fn carried_env() -> Vec<(String, String)> {
    CARRIED
        .iter()
        .filter_map(|k| {
            std::env::var(k)
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| ((*k).to_owned(), v))
        })
        .collect()
}

pub fn current_user() -> String {
    for var in ["USER", "LOGNAME", "USERNAME"] {
        if let Some(name) = std::env::var(var).ok().filter(|v| !v.is_empty()) {
            return name;
        }
    }
    #[cfg(unix)]
    {
        // SAFETY: getpwuid returns a pointer into static storage or null;
        // the name is copied out at once.
        unsafe {
            let pw = libc::getpwuid(libc::getuid());
            if !pw.is_null() && !(*pw).pw_name.is_null() {
                return std::ffi::CStr::from_ptr((*pw).pw_name)
                    .to_string_lossy()
                    .into_owned();
            }
        }
    }
    "user".into()
}

/// Runs a manager's tool (through the one runner): exit code and output,
/// or why it could not run.
async fn tool(program: &str, args: &[&str]) -> Result<(i32, String), String> {
    let spec = runner::Spec {
        program: OsString::from(program),
        args: args.iter().map(OsString::from).collect(),
        cwd: None,
        env: vec![],
        env_remove: crate::tools::SECRET_VARS,
        env_filter: None,
        timeout: TOOL_LIMIT,
        grace: Duration::from_secs(2),
        max_output: 256 * 1024,
        split_stderr: false,
        stop_after_json: None,
        tap: None,
    };
    let outcome = runner::run(&spec, std::future::pending())
        .await
        .map_err(|e| format!("cannot run {program}: {}", e.source))?;
    let text = outcome.output.join(|n| format!("… {n} bytes …"));
    match outcome.end {
        runner::End::TimedOut => Err(format!(
            "{program} {} took longer than {}s",
            args.join(" "),
            TOOL_LIMIT.as_secs()
        )),
        _ => Ok((outcome.exit_code().unwrap_or(-1), text.trim().to_owned())),
    }
}

/// A tool call that must succeed.
async fn must(program: &str, args: &[&str]) -> Result<String, String> {
    match tool(program, args).await? {
        (0, out) => Ok(out),
        (code, out) => Err(format!(
            "`{program} {}` failed (exit {code}): {out}",
            args.join(" ")
        )),
    }
}

/// A flag value as the command line spells it.
fn value_name(value: &impl clap::ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_dir_marker_reads_back_even_with_dashes() {
        let dir = tempfile::tempdir().unwrap();
        let state = PathBuf::from("/home/a-b/--state \"x\"");
        let path = dir.path().join("unit.service");
        std::fs::write(&path, format!("# {}\n[Unit]\n", marker(&state))).unwrap();
        assert!(
            !marker(&state).contains("--"),
            "valid inside an XML comment"
        );
        assert_eq!(installed_state_dir(&path), Some(state));
    }

    /// As root (CI): every directory install creates for a system
    /// service's state belongs to the service's account.
    #[cfg(unix)]
    #[test]
    fn a_system_services_state_directory_belongs_to_its_account() {
        use std::os::unix::fs::MetadataExt;
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("not root: chown cannot be tested here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut plan = systemd::tests::plan(true);
        plan.state_dir = dir.path().join("home/.local/state/clawbot_router");
        plan.owner = Some((65534, 65534));
        state_dir_for(&plan).unwrap();
        write_env_file(&plan.state_dir, &plan.secrets).unwrap();
        own(&plan).unwrap();
        for rel in [
            "home",
            "home/.local",
            "home/.local/state",
            "home/.local/state/clawbot_router",
            "home/.local/state/clawbot_router/node.env",
        ] {
            let meta = std::fs::metadata(dir.path().join(rel)).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{rel}");
        }
        let top = std::fs::metadata(dir.path()).unwrap();
        assert_eq!(top.uid(), 0, "what existed before is left as it was");
    }

    #[test]
    fn env_files_are_private_and_strict() {
        let dir = tempfile::tempdir().unwrap();
        write_env_file(
            dir.path(),
            &[(TOKEN_KEY.into(), "s3cret=with=equals".into())],
        )
        .unwrap();
        let path = dir.path().join(ENV_FILE);
        assert_eq!(
            read_env_file(&path).unwrap(),
            [(TOKEN_KEY.to_owned(), "s3cret=with=equals".to_owned())]
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = read_env_file(&path).unwrap_err();
            assert!(e.contains("chmod 600"), "{e}");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        std::fs::write(&path, "OPENCLAW_GATEWAY_TOKN=x\n").unwrap();
        let e = read_env_file(&path).unwrap_err();
        assert!(e.contains("unknown key \"OPENCLAW_GATEWAY_TOKN\""), "{e}");
        write_env_file(dir.path(), &[]).unwrap();
        assert!(!path.exists(), "no secrets, no file");
    }
}
