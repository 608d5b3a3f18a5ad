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
//!

//! Where to read, by idea:
//! - this file: the node's options, its start (tools, identity, lock, the
//!   published tools' door) and `run`, which serves it (with `--doctor`, a
//!   doctor session beside it);
//! - `connection`: the connection loop, what to do after each refusal;
//! - `session`: one connection served; `invoke`: one invocation run;
//! - `hello`: what `connect` declares; `saved_gateway`: `gateway.json`.

mod connection;
mod doctor;
mod events;
mod hello;
mod invoke;
mod lock;
mod mcp_publish;
mod name;
mod pins;
mod progress;
mod result;
mod saved_gateway;
pub mod service;
mod session;
mod status;
mod surface;

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::gateway;
use crate::gateway::identity::{Identity, TokenStore};
use crate::shared::log::{flush_log, say};
use crate::tools::mcp_client::Servers;
use crate::tools::policy::Mode;
use crate::tools::{self, Tools};
pub use saved_gateway::saved_gateway;

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
    /// `--log-format`, and `--log-level`/`--quiet` as the least level kept
    /// (a service definition repeats them).
    pub log_format: crate::shared::log::Format,
    pub log_level: crate::shared::log::Level,
    /// `--no-agent-tools`: publish no tools (node-mcp).
    pub no_agent_tools: bool,
    /// Local MCP servers whose tools are published too.
    pub mcp: crate::tools::mcp_client::Setup,
    /// `--browser` and its rules.
    pub browser: crate::cli::BrowserArgs,
    /// Cameras and location, when the owner turned them on.
    pub sensors: crate::cli::SensorArgs,
    /// The VNC server `desktop.stream` relays, when named.
    pub desktop: crate::cli::DesktopArgs,
    /// `--no-ollama`: `ollama.*` not declared.
    pub no_ollama: bool,
    /// `--claude-sessions`: Claude Code's sessions are shared.
    pub claude_sessions: bool,
    /// `--file-root`: more directories OpenClaw's file transfers may reach.
    pub file_roots: Vec<PathBuf>,
    /// The X display, when the owner turned it on.
    pub screen: crate::cli::ScreenArgs,
    /// `--doctor`: the agent to talk to and what to ask it.
    pub doctor: Option<Doctor>,
}

pub struct Doctor {
    pub agent: String,
    pub question: String,
}

/// Runs the node until `stop` (a signal: exit 0) or a configuration error
/// (exit 1); with `--doctor`, until the doctor session ends too. `print`
/// is app's stdout, where the doctor's replies go.
pub async fn run(mut options: Options, print: fn(&str), stop: CancellationToken) -> u8 {
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
    let tools = node.as_ref().ok().map(|n| Arc::clone(&n.tools));
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
                    let code = doctor::session(session, print, stop.clone()).await;
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
            crate::shared::log::error(&message);
            1
        }
    };
    if let Some(servers) = servers {
        servers.shutdown().await;
    }
    if let Some(tools) = tools {
        tools.let_go().await;
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

impl Node {
    fn start(options: Options) -> Result<Self, String> {
        let browser = browser_options(&options.browser, &options.state_dir)?;
        let offer = tools::Offer {
            browser: browser.is_some(),
            desktop: desktop_host(&options.desktop),
            no_ollama: options.no_ollama,
            claude: claude_sessions(options.claude_sessions),
            screen: screen_offer(&options.screen),
            ..sensors_offer(&options.sensors)
        };
        let setup = tools::setup::Setup {
            state_dir: &options.state_dir,
            workspace: &options.workspace,
            approval: options.approval,
            allow: &options.allow,
            deny: &options.deny,
            asker: "OpenClaw",
            gateway: true,
            browser: browser.clone(),
            offer: offer.clone(),
            file_roots: &options.file_roots,
        };
        let tools = tools::setup::hands(
            &setup,
            tools::declared_commands(options.commands.as_deref(), &offer)?,
        )?;
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

    /// Whether agent tools are published (and their door declared).
    pub(super) fn publishing(&self) -> bool {
        self.door.is_open()
    }

    /// The gateway to connect to, trusted by the pin given or the one this
    /// node remembered (and which of the two it was).
    pub(super) fn endpoint(&self) -> (gateway::Endpoint, pins::Source) {
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
}

/// The VNC server the owner named; its password file is a secret of ours
/// from then on (no file tool reaches it).
fn desktop_host(args: &crate::cli::DesktopArgs) -> Option<tools::desktop::Host> {
    let port = args.desktop_vnc_port?;
    let password_file = args
        .desktop_password_file
        .as_ref()
        .map(|f| std::path::absolute(f).unwrap_or_else(|_| f.clone()));
    if let Some(file) = &password_file {
        crate::shared::secrets::holds_secrets(file);
    }
    Some(tools::desktop::Host {
        port,
        password_file,
    })
}

/// The X display, when the owner turned it on and this machine can serve
/// it (said once, with why, when it cannot).
fn screen_offer(args: &crate::cli::ScreenArgs) -> Option<tools::screen::Offer> {
    use tools::screen;
    if !args.screen && !args.computer {
        return None;
    }
    let flag = if args.computer {
        "--computer"
    } else {
        "--screen"
    };
    let why = if !screen::SUPPORTED {
        "only Linux nodes offer it".to_owned()
    } else if let Some(display) = screen::display() {
        match (
            screen::ffmpeg(),
            args.computer && screen::xdotool().is_none(),
        ) {
            (None, _) => "ffmpeg was not found".to_owned(),
            (Some(_), true) => "xdotool was not found".to_owned(),
            (Some(_), false) => {
                return Some(screen::Offer {
                    display,
                    computer: args.computer,
                });
            }
        }
    } else {
        "no X display (DISPLAY is not set)".to_owned()
    };
    crate::shared::log::warn(&format!("{flag}: {why}; not offered"));
    None
}

/// The sensors the owner turned on that this machine can serve; each one
/// turned on that cannot be is said once, with why.
fn sensors_offer(args: &crate::cli::SensorArgs) -> tools::Offer {
    use tools::sensors::{SUPPORTED, camera, location};
    // Called only for a flag that is on; the program is looked for then.
    let usable = |flag: &str, program: &str, found: fn() -> bool| {
        let why = if !SUPPORTED {
            "only Linux nodes offer it"
        } else if !found() {
            &format!("{program} was not found")
        } else {
            return true;
        };
        crate::shared::log::warn(&format!("{flag}: {why}; not offered"));
        false
    };
    let camera = args.camera && usable("--camera", "ffmpeg", || camera::ffmpeg().is_some());
    tools::Offer {
        camera,
        microphone: camera && args.camera_audio,
        location: args.location
            && usable("--location", "GeoClue's where-am-i", || {
                location::program().is_some()
            }),
        ..Default::default()
    }
}

/// Claude Code's sessions, when the owner shares them: the directory is
/// found once, now. One that does not exist (yet) lists nothing, as
/// OpenClaw's node answers without one.
fn claude_sessions(on: bool) -> Option<tools::claude::Sessions> {
    if !on {
        return None;
    }
    let Some(projects) = tools::claude::projects_dir() else {
        say("--claude-sessions: no home directory and no CLAUDE_CONFIG_DIR: the lists are empty");
        return Some(tools::claude::Sessions::new(std::path::PathBuf::new()));
    };
    if !projects.is_dir() {
        say(&format!(
            "--claude-sessions: {} does not exist: the lists are empty until it does",
            projects.display()
        ));
    } else {
        say(&format!(
            "claude sessions: shared from {}",
            projects.display()
        ));
    }
    Some(tools::claude::Sessions::new(projects))
}

/// The browser `browser.proxy` drives: the one named, else the first
/// found (none found: the commands are not declared, as OpenClaw's node
/// host leaves them out without a browser); `off`: none.
fn browser_options(
    args: &crate::cli::BrowserArgs,
    state_dir: &std::path::Path,
) -> Result<Option<tools::browser::Options>, String> {
    if args.browser.trim() == "off" {
        return Ok(None);
    }
    let attach = args
        .browser_cdp_url
        .clone()
        .filter(|u| !u.trim().is_empty());
    if let Some(url) = &attach {
        tools::browser::check_cdp_url(url)?;
        say(&format!(
            "browser: attaching to the browser at {} (not launching one)",
            tools::browser::shown_cdp_url(url)
        ));
        return Ok(Some(tools::browser::Options {
            executable: std::path::PathBuf::new(),
            dir: state_dir.join("browser"),
            headless: false,
            no_sandbox: false,
            reach: tools::browser::Reach::new(
                args.browser_private_network,
                &args.browser_allow_host,
            ),
            evaluate: args.browser_evaluate,
            attach,
        }));
    }
    let named = match args.browser.trim() {
        "" | "auto" => None,
        path => Some(std::path::Path::new(path)),
    };
    let executable = match tools::browser::find_browser(named) {
        Ok(path) => path,
        Err(e) if named.is_some() => return Err(e),
        Err(e) => {
            say(&format!("{e}: browser.proxy is not offered"));
            return Ok(None);
        }
    };
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()));
    if args.browser_headed && !display {
        crate::shared::log::warn(
            "--browser-headed: no DISPLAY or WAYLAND_DISPLAY, so the browser runs headless",
        );
    }
    Ok(Some(tools::browser::Options {
        executable,
        dir: state_dir.join("browser"),
        headless: !(args.browser_headed && display),
        no_sandbox: tools::browser::running_as_root(),
        reach: tools::browser::Reach::new(args.browser_private_network, &args.browser_allow_host),
        evaluate: args.browser_evaluate,
        attach: None,
    }))
}
