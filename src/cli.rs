//! Command-line definitions (clap) and their value parsers; nothing else.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::router::messages::Lang;
use crate::router::{Format, Via};
use crate::shared::log::{self, Level};

/// What `--version` prints after the name: the version, then the target
/// the build is for and the commit it was built from (build.rs), so a
/// downloaded executable says what it is.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("CLAWBOT_BUILD_TARGET"),
    ", commit ",
    env!("CLAWBOT_BUILD_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "clawbot_router",
    version = VERSION,
    about = "Forward a task to OpenClaw (`openclaw agent`) and print one JSON result.",
    long_about = "Forward a task to OpenClaw (`openclaw agent`) and print exactly one JSON object \
                  {\"content\", \"directTTS\", \"interruptMode\"} on stdout, whatever happens.",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub call: CallArgs,
}

/// The router call alone — what nearly every invocation is — parsed
/// without building every subcommand's arguments (that was a quarter of
/// the instructions a call spent starting), and the only parser the small
/// executable links, so that it stays small and starts fast (BENCHMARKS.md
/// item 1). It shares [`CallArgs`] with [`Cli`], so the two cannot take a
/// call differently. Anything it does not take goes to [`Cli`], which says
/// it in its own words.
#[derive(Debug, Parser)]
#[command(name = "clawbot_router", version = VERSION)]
pub struct CallCli {
    #[command(flatten)]
    pub call: CallArgs,
}

// Parsed once per process: the size of the node's variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the tool declaration for a host LLM.
    Schema {
        #[arg(long, value_enum, default_value_t = SchemaFormat::Openai)]
        format: SchemaFormat,
    },
    /// Serve this machine to an OpenClaw gateway as a node (or manage the
    /// node's service: install, status, …).
    Node(NodeCommand),
    /// Serve the tool over the Model Context Protocol on stdio (or, with
    /// --http, over Streamable HTTP).
    Mcp(McpArgs),
    /// Serve this machine's tools to coding-agent sessions over the bridge
    /// WebSocket of seed 004 (or, `bridge send`, hand one of them a message).
    Bridge(BridgeCommand),
    /// Talk to a General Agent Service (seed 001) and run the tools it asks
    /// for here: the message, then each line of stdin, one turn each (or,
    /// `chat memory`, write to or search its memory from a script).
    Chat(ChatCommand),
    /// Serve a cloud command queue (seed 003) as its desktop node: poll for
    /// commands and run them here behind the airlock.
    Poll(PollArgs),
    /// Print the system-prompt guidance for the host LLM.
    Prompt {
        #[arg(long, value_enum, ignore_case = true, env = "CLAWBOT_ROUTER_LANG", default_value_t = Lang::Zh)]
        lang: Lang,
    },
}

/// `clawbot_router node [install|uninstall|status|start|stop|restart]`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct NodeCommand {
    #[command(subcommand)]
    pub service: Option<ServiceCommand>,
    #[command(flatten)]
    pub run: NodeArgs,
}

/// The node as a service of this machine (systemd, launchd, Task
/// Scheduler), as `openclaw node install` and its siblings.
// Parsed once per process: the size of `Install` costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Install the node (with these flags) as a service and start it; the
    /// token goes to a 0600 env file, never into the service file.
    Install {
        #[command(flatten)]
        run: NodeArgs,
        #[command(flatten)]
        service: ServiceFlags,
        /// Replace a service installed with other settings.
        #[arg(long)]
        force: bool,
        /// Print the service definition instead of installing it.
        #[arg(long)]
        print: bool,
    },
    /// Stop the service and remove it (and its env file).
    Uninstall(ServiceArgs),
    /// Whether the service is installed, running and connected (exit 0
    /// when running, 3 when not).
    Status(ServiceArgs),
    Start(ServiceArgs),
    Stop(ServiceArgs),
    Restart(ServiceArgs),
}

#[derive(Debug, Args)]
pub struct ServiceArgs {
    #[command(flatten)]
    pub flags: ServiceFlags,
    /// The node's state directory, where an installed service does not say
    /// (a node run by hand); default as for `clawbot_router node`.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct ServiceFlags {
    /// Answer in JSON.
    #[arg(long)]
    pub json: bool,
    /// The system-wide service (systemd system unit, LaunchDaemon, a task
    /// at boot) instead of the user's; needs root / administrator.
    #[arg(long)]
    pub system: bool,
}

/// What every tool-running mode shares — the node and each link: where its
/// state lives, the workspace, and the one policy's flags.
#[derive(Debug, Args)]
pub struct HandsArgs {
    /// Where the device identity, tokens, approvals and audit log live
    /// (default: $XDG_STATE_HOME/clawbot_router or ~/.local/state/clawbot_router).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<std::path::PathBuf>,

    /// The directory file tools are confined to (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<std::path::PathBuf>,

    /// What to do with risky calls (writes, commands) nothing pre-approved.
    #[arg(long, value_enum, default_value_t = crate::tools::policy::Mode::Ask)]
    pub approval: crate::tools::policy::Mode,

    /// Pre-approve a command (e.g. `write_file`) or a program (e.g. `ls`); repeatable.
    #[arg(long = "allow-command", value_name = "NAME")]
    pub allow: Vec<String>,

    /// Forbid a command or a program; repeatable; wins over everything.
    #[arg(long = "deny-command", value_name = "NAME")]
    pub deny: Vec<String>,
}

impl HandsArgs {
    /// `--state-dir`, else the default state directory.
    pub fn state_dir(&self) -> std::path::PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(crate::shared::paths::default_state_dir)
    }

    /// `--workspace`, else the current directory.
    pub fn workspace(&self) -> std::path::PathBuf {
        self.workspace.clone().unwrap_or_else(|| ".".into())
    }
}

/// The node's browser (`browser.proxy`): which one, and what it may do.
#[derive(Debug, Clone, Default, Args)]
pub struct BrowserArgs {
    /// The browser agents drive through OpenClaw's `browser` tool: a
    /// Chromium-family executable, `auto` (the first found on PATH) or `off`.
    #[arg(long, value_name = "PATH|auto|off", default_value = "auto")]
    pub browser: String,

    /// Show the browser's window (needs a display); headless otherwise.
    #[arg(long)]
    pub browser_headed: bool,

    /// Let the browser open pages on this machine and its private networks
    /// (loopback, 10/8, 192.168/16…), as OpenClaw's
    /// `browser.ssrfPolicy.dangerouslyAllowPrivateNetwork`.
    #[arg(long)]
    pub browser_private_network: bool,

    /// Let the browser open this host though it is private (repeatable), as
    /// OpenClaw's `browser.ssrfPolicy.allowedHostnames`.
    #[arg(long = "browser-allow-host", value_name = "HOST")]
    pub browser_allow_host: Vec<String>,

    /// Let agents run script in pages (`act` kind `evaluate`, `wait` with
    /// `fn`): off unless given, as `browser.evaluateEnabled=false`.
    #[arg(long)]
    pub browser_evaluate: bool,

    /// Attach to a browser started elsewhere instead of launching one, as
    /// OpenClaw's `attachOnly` profile with a `cdpUrl`: its DevTools
    /// endpoint, http://HOST:PORT or ws(s)://… (or CLAWBOT_BROWSER_CDP_URL;
    /// a token in it is kept secret). Agents see only the tabs they open.
    #[arg(long, value_name = "URL")]
    pub browser_cdp_url: Option<String>,
}

/// What the node may sense for agents: off unless the owner turns it on,
/// as OpenClaw's Linux node host (`plugins.entries.linux-node.config`).
#[derive(Debug, Clone, Default, Args)]
pub struct SensorArgs {
    /// Offer this machine's cameras (`camera.list`, `camera.snap`,
    /// `camera.clip`) through FFmpeg over V4L2 (Linux, ffmpeg on PATH), as
    /// OpenClaw's `camera.enabled`. Each photo or clip is a risky call:
    /// asked, or pre-approved with --allow-command camera.snap.
    #[arg(long)]
    pub camera: bool,

    /// Let a clip record the microphone too (PulseAudio's default source);
    /// without it clips are silent and say so (`hasAudio: false`).
    #[arg(long, requires = "camera")]
    pub camera_audio: bool,

    /// Offer where this machine is (`location.get`) through GeoClue's
    /// where-am-i (Linux), as OpenClaw's `location.enabled`.
    #[arg(long)]
    pub location: bool,
}

/// This machine's desktop, shown to the gateway's viewer (`desktop.stream`).
#[derive(Debug, Clone, Default, Args)]
pub struct DesktopArgs {
    /// Relay this loopback VNC server to the gateway's desktop viewer
    /// (`desktop.stream`, OpenClaw's `desktop.host.port`; OpenClaw offers
    /// 5900 by default, this node nothing unless named). A server that
    /// asks no password is refused.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub desktop_vnc_port: Option<u16>,

    /// The VNC server's password, in a file of its own (OpenClaw's
    /// `desktop.host.passwordFile`); without it the viewer's operator
    /// supplies the password.
    #[arg(long, value_name = "FILE", requires = "desktop_vnc_port")]
    pub desktop_password_file: Option<std::path::PathBuf>,
}

/// The desktop an agent may see and drive: off unless the owner turns it
/// on, as OpenClaw's computer-use node commands (its `cua-computer`
/// plugin, `plugins.entries.cua-computer.enabled`).
#[derive(Debug, Clone, Default, Args)]
pub struct ScreenArgs {
    /// Let agents see this machine's X display (the node's DISPLAY at
    /// start): `screen.snapshot`, the `nodes` tool's `screen_snapshot`,
    /// through FFmpeg's x11grab (Linux, ffmpeg on PATH). Safe once on.
    #[arg(long)]
    pub screen: bool,

    /// Let agents drive its pointer and keyboard too (`computer.act`, the
    /// agent's `computer` tool; implies --screen) through xdotool (Linux).
    /// Each action is a risky call: asked, or pre-approved with
    /// --allow-command computer.act.
    #[arg(long)]
    pub computer: bool,
}

/// `clawbot_router node`: connect to a gateway and run its agents' tool calls.
#[derive(Debug, Args)]
pub struct NodeArgs {
    #[command(flatten)]
    pub gateway: GatewayArgs,

    /// The gateway's host, as `openclaw node run --host` (instead of --gateway).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,

    /// The gateway's port, as `openclaw node run --port` (default 18789).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,

    /// Use TLS (wss://), as `openclaw node run --tls`.
    #[arg(long)]
    pub tls: bool,

    /// Plaintext (ws://), as `openclaw node run --no-tls`: refused when the
    /// gateway is named with wss:// or pinned.
    #[arg(long, conflicts_with_all = ["tls", "tls_fingerprint"])]
    pub no_tls: bool,

    /// A path the gateway is served under, as `openclaw node run --context-path`.
    #[arg(long, value_name = "PATH")]
    pub context_path: Option<String>,

    /// Enrol with a setup code (or `oc-pair://` URL) from `openclaw qr
    /// --setup-code-only`; `-` reads it from stdin, keeping it off the
    /// command line. It names the gateway (and its TLS pin) too.
    #[arg(
        long,
        value_name = "CODE",
        env = "CLAWBOT_ROUTER_SETUP_CODE",
        hide_env_values = true
    )]
    pair: Option<String>,

    /// Use the setup code (given here, or with --pair) only while this node
    /// has no device token for that gateway (so the same command line, or
    /// service file, keeps working after enrolment and after the code
    /// expired). As `openclaw node run --pair-if-needed <code>`.
    #[arg(long, value_name = "CODE", num_args = 0..=1)]
    pub pair_if_needed: Option<Option<String>>,

    /// Read OPENCLAW_GATEWAY_TOKEN and CLAWBOT_ROUTER_SETUP_CODE from this
    /// file (KEY=VALUE lines; must not be readable by others), as the
    /// installed service does.
    #[arg(long, value_name = "FILE")]
    pub env_file: Option<std::path::PathBuf>,

    /// Write the node's log to this file (appending) instead of stderr.
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub log: LogArgs,

    /// The name operators see (default: the hostname).
    #[arg(long, value_name = "NAME")]
    pub display_name: Option<String>,

    #[command(flatten)]
    pub hands: HandsArgs,

    /// Declare only these commands (comma-separated), as `openclaw node run
    /// --commands` does; anything else is refused.
    #[arg(long, value_name = "A,B,C", value_delimiter = ',')]
    pub commands: Option<Vec<String>>,

    /// Publish no agent tools (node-mcp): agents then reach the node's
    /// tools only through `exec` and `openclaw nodes invoke`, under the
    /// gateway's per-command allow and deny lists.
    #[arg(long)]
    pub no_agent_tools: bool,

    #[command(flatten)]
    pub browser: BrowserArgs,

    #[command(flatten)]
    pub sensors: SensorArgs,

    #[command(flatten)]
    pub desktop: DesktopArgs,

    #[command(flatten)]
    pub screen: ScreenArgs,

    /// Do not offer this machine's Ollama (127.0.0.1:11434) to agents:
    /// `ollama.models` and `ollama.chat` are declared otherwise, whether
    /// Ollama runs or not, as OpenClaw's node host does unless
    /// `plugins.entries.ollama.config.nodeInference.enabled` is false.
    #[arg(long)]
    pub no_ollama: bool,

    /// Share this machine's Claude Code sessions with the gateway's
    /// operators (`anthropic.claude.sessions.list.v1` / `.read.v1`, what
    /// `sessions.catalog.list` and `.read` show): the transcripts under
    /// $CLAUDE_CONFIG_DIR/projects or ~/.claude/projects (found at start),
    /// read-only; while it does not exist the list is empty and a read
    /// answers "Claude session is unavailable", as OpenClaw's. Off unless
    /// given: transcripts hold prompts and code. (OpenClaw's node declares
    /// them whenever that directory exists.)
    #[arg(long)]
    pub claude_sessions: bool,

    /// Let OpenClaw's file transfers (file.fetch, file.stat, dir.list,
    /// dir.fetch, file.write) reach this directory too, to read and write
    /// (repeatable); the workspace always. The gateway still needs
    /// `gateway.nodes.commands.allow` and its file-transfer path policy
    /// (`plugins.entries.file-transfer.config`); our state and OpenClaw's
    /// private files stay out of reach in every root.
    #[arg(long = "file-root", value_name = "DIR")]
    pub file_root: Vec<std::path::PathBuf>,

    /// Bring a local MCP server's tools to the gateway's agents:
    /// NAME=COMMAND [ARGS…] as one value, split as a shell splits words but
    /// run without one (repeatable), e.g. `--mcp-server 'fs=npx -y
    /// @modelcontextprotocol/server-filesystem /srv'`. Its tools are called
    /// under this node's policy: `readOnlyHint` tools are safe, others
    /// risky; `--deny-command NAME.TOOL` (or `NAME.*`) forbids.
    #[arg(long, value_name = "NAME=COMMAND", conflicts_with = "no_agent_tools")]
    pub mcp_server: Vec<String>,

    /// Local MCP servers from a JSON file in the `mcpServers` shape Claude
    /// Desktop and Cursor use (`command`, `args`, `env`, `cwd`).
    #[arg(long, value_name = "FILE", conflicts_with = "no_agent_tools")]
    pub mcp_config: Option<std::path::PathBuf>,

    /// Declare every command this machine offers (the default), as
    /// `openclaw node run --all-commands`.
    #[arg(long, conflicts_with = "commands")]
    pub all_commands: bool,

    /// Also start a doctor session: send this machine's diagnostic context
    /// to the agent, stream its reply to stdout, and send each stdin line
    /// as a follow-up until end of input.
    #[arg(long)]
    pub doctor: bool,

    /// The doctor agent's id on the gateway.
    #[arg(long, value_name = "ID", default_value = "doctor", requires = "doctor")]
    pub agent: String,

    /// What to ask the doctor first.
    #[arg(
        long,
        value_name = "TEXT",
        requires = "doctor",
        default_value = "Diagnose this OpenClaw installation: find what is wrong and fix it, using this node's tools."
    )]
    pub message: String,
}

impl NodeArgs {
    /// `--pair`'s setup code: the flag, else the variable (taken out of the
    /// environment at start-up: see `secrets`).
    pub fn pair(&self) -> Option<String> {
        self.pair
            .clone()
            .or_else(|| crate::shared::secrets::var("CLAWBOT_ROUTER_SETUP_CODE"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaFormat {
    Openai,
    Anthropic,
    Mcp,
}

/// The router call: one tool invocation.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The task for the remote agent (passed to openclaw byte for byte).
    #[arg(short = 'm', long, allow_hyphen_values = true)]
    pub message: Option<String>,

    /// Remote agent id (default: the --to route, else `main`).
    #[arg(short = 'a', long, allow_hyphen_values = true)]
    pub agent: Option<String>,

    /// The tool-call arguments object as a host LLM emits it; `-` reads stdin.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["message", "agent"], allow_hyphen_values = true)]
    pub args_json: Option<String>,

    /// Add a `meta` object: exitCode, signal, timedOut, truncated, durationMs
    /// (and via, runId).
    #[arg(long)]
    pub meta: bool,

    /// Make the exit status tell the outcome (0, openclaw's code, 124 timeout,
    /// 127 could not start, 2 invalid input) instead of always 0.
    #[arg(long)]
    pub exit_code: bool,

    #[command(flatten)]
    pub options: CallOptions,
}

/// How every call is run: the router's and `mcp`'s.
#[derive(Debug, Args)]
pub struct CallOptions {
    /// Destination for `openclaw agent --to` when no agent is named.
    #[arg(long, value_name = "DEST", env = "CLAWBOT_ROUTER_DEFAULT_TO")]
    pub to: Option<String>,

    /// Seconds before the openclaw process tree is stopped.
    #[arg(long, value_name = "SECS", env = "CLAWBOT_ROUTER_TIMEOUT", default_value = "60", value_parser = parse_timeout, allow_negative_numbers = true)]
    pub timeout: Duration,

    /// Seconds between SIGTERM and SIGKILL when stopping the tree.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_grace, allow_negative_numbers = true)]
    pub grace: Duration,

    /// The openclaw command, split into words as the platform's users
    /// write command lines (e.g. `npx openclaw`).
    #[arg(long, value_name = "COMMAND", env = "OPENCLAW_BIN")]
    pub openclaw: Option<String>,

    /// The OpenClaw session a call runs in: `main` (the agent's own,
    /// OpenClaw's default), `new` (a session of its own for every call:
    /// nothing carries over, not even a timed-out call's message), or a
    /// KEY the host keeps per conversation (`support-42`, scoped to the
    /// agent, or a whole `agent:main:support-42`).
    #[arg(long, value_name = "main|new|KEY", env = "CLAWBOT_ROUTER_SESSION", default_value = "main", value_parser = parse_session)]
    pub session: crate::router::Session,

    /// Launch openclaw inside WSL (`wsl.exe --exec`).
    #[arg(long)]
    pub wsl: bool,

    /// WSL distribution to launch in (implies --wsl).
    #[arg(long, value_name = "NAME")]
    pub wsl_distro: Option<String>,

    /// Bytes of output kept, 1K at least; the middle of longer output is
    /// dropped (K/M suffixes).
    #[arg(long, value_name = "BYTES", default_value = "256K", value_parser = parse_size, allow_negative_numbers = true)]
    pub max_output: usize,

    /// Language of the router's own messages.
    #[arg(long, value_enum, ignore_case = true, env = "CLAWBOT_ROUTER_LANG", default_value_t = Lang::Zh)]
    pub lang: Lang,

    /// How to reach OpenClaw: spawn `openclaw agent` (cli), talk to the
    /// gateway over WebSocket (gateway), or the gateway when it answers and
    /// the CLI otherwise (auto).
    #[arg(long, value_enum, ignore_case = true, env = "CLAWBOT_ROUTER_VIA", default_value_t = Via::Cli)]
    pub via: Via,

    /// What `content` holds: everything openclaw printed (raw), or the
    /// final answer plus a `details` object (structured).
    #[arg(long, value_enum, ignore_case = true, env = "CLAWBOT_ROUTER_FORMAT", default_value_t = Format::Raw)]
    pub format: Format,

    /// The gateway (for --via gateway|auto).
    #[command(flatten)]
    pub gateway: GatewayArgs,
}

/// Where the gateway is and how to authenticate: the node's, the router's
/// `--via gateway` and `mcp`'s.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// The gateway's WebSocket URL.
    #[arg(
        long = "gateway",
        value_name = "URL",
        env = "OPENCLAW_GATEWAY_URL",
        default_value = "ws://127.0.0.1:18789"
    )]
    pub url: String,

    /// The gateway's shared token (a paired node uses the device token it
    /// was issued).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "OPENCLAW_GATEWAY_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,

    /// Trust a wss:// gateway by the SHA-256 fingerprint of its certificate
    /// (hex, colons optional), as OpenClaw's clients pin a self-signed one.
    #[arg(
        long,
        value_name = "SHA256",
        env = "OPENCLAW_GATEWAY_TLS_FINGERPRINT",
        value_parser = parse_fingerprint
    )]
    tls_fingerprint: Option<Pin>,
}

impl GatewayArgs {
    /// The shared token: the flag, else the variable (which the program
    /// took out of its environment at start-up: see `secrets`).
    pub fn token(&self) -> Option<String> {
        self.token
            .clone()
            .or_else(|| crate::shared::secrets::var("OPENCLAW_GATEWAY_TOKEN"))
    }

    /// The pin, if one was given (a blank variable counts as none).
    pub fn tls_fingerprint(&self) -> Option<crate::gateway::Fingerprint> {
        self.tls_fingerprint.clone().and_then(|p| p.0)
    }
}

/// `--tls-fingerprint`'s value: blank (an empty variable) is no pin.
#[derive(Debug, Clone)]
struct Pin(Option<crate::gateway::Fingerprint>);

fn parse_fingerprint(text: &str) -> Result<Pin, String> {
    if text.trim().is_empty() {
        return Ok(Pin(None));
    }
    crate::gateway::Fingerprint::parse(text).map(|f| Pin(Some(f)))
}

const MAX_TIMEOUT_SECS: f64 = 7.0 * 24.0 * 3600.0;
const MAX_GRACE_SECS: f64 = 300.0;
const MAX_SIZE: usize = 1 << 30;
/// The least `--max-output` takes: room for the marker line (about 70
/// bytes) and some of the head and tail around it; below it a long output
/// would keep little but the marker.
pub const MIN_SIZE: usize = 1024;

/// Why a flag's value was refused, in words for either language (clap
/// carries the English; the router's JSON speaks the caller's language).
#[derive(Debug, Clone, PartialEq)]
pub enum ValueProblem {
    NotSeconds,
    SecondsOutOfRange { above_zero: bool, max: f64 },
    UnknownUnit,
    NotBytes,
    TooLarge,
    TooSmall,
}

impl ValueProblem {
    pub fn describe(&self, text: &str, lang: Lang) -> String {
        use ValueProblem::*;
        match (self, lang) {
            (NotSeconds, Lang::En) => format!("`{text}` is not a number of seconds"),
            (NotSeconds, Lang::Zh) => format!("“{text}”不是秒数"),
            (SecondsOutOfRange { above_zero, max }, Lang::En) => {
                let low = if *above_zero { "above 0" } else { "0 or more" };
                format!("`{text}` must be {low} and at most {max} seconds")
            }
            (SecondsOutOfRange { above_zero, max }, Lang::Zh) => {
                let low = if *above_zero {
                    "大于 0"
                } else {
                    "不小于 0"
                };
                format!("“{text}”必须{low} 且不超过 {max} 秒")
            }
            (UnknownUnit, Lang::En) => {
                format!("`{text}`: unknown size unit (use a byte count, K or M)")
            }
            (UnknownUnit, Lang::Zh) => format!("“{text}”的单位无法识别（请用字节数、K 或 M）"),
            (NotBytes, Lang::En) => format!("`{text}` is not a byte count"),
            (NotBytes, Lang::Zh) => format!("“{text}”不是字节数"),
            (TooLarge, Lang::En) => format!("`{text}` is larger than 1 GiB"),
            (TooLarge, Lang::Zh) => format!("“{text}”超过 1 GiB"),
            (TooSmall, Lang::En) => format!("`{text}` is less than 1K, the least output kept"),
            (TooSmall, Lang::Zh) => format!("“{text}”小于 1K（保留输出的下限）"),
        }
    }
}

fn seconds(text: &str, above_zero: bool, max: f64) -> Result<Duration, ValueProblem> {
    let secs: f64 = text.trim().parse().map_err(|_| ValueProblem::NotSeconds)?;
    let too_small = if above_zero { secs <= 0.0 } else { secs < 0.0 };
    if !secs.is_finite() || too_small || secs > max {
        return Err(ValueProblem::SecondsOutOfRange { above_zero, max });
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `262144`, `256K`, `256KiB`, `1M`, `1MiB` (powers of 1024), from
/// [`MIN_SIZE`] to 1 GiB.
fn size(text: &str) -> Result<usize, ValueProblem> {
    let lower = text.trim().to_ascii_lowercase();
    if lower.starts_with('-') {
        return Err(ValueProblem::NotBytes);
    }
    let (digits, unit) = match lower.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => lower.split_at(i),
        None => (lower.as_str(), ""),
    };
    let multiplier: usize = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        _ => return Err(ValueProblem::UnknownUnit),
    };
    let n: usize = digits.parse().map_err(|_| ValueProblem::NotBytes)?;
    let n = n
        .checked_mul(multiplier)
        .filter(|n| *n <= MAX_SIZE)
        .ok_or(ValueProblem::TooLarge)?;
    if n < MIN_SIZE {
        return Err(ValueProblem::TooSmall);
    }
    Ok(n)
}

fn english<T>(text: &str, parsed: Result<T, ValueProblem>) -> Result<T, String> {
    parsed.map_err(|p| p.describe(text, Lang::En))
}

pub fn parse_session(text: &str) -> Result<crate::router::Session, String> {
    crate::router::Session::parse(text).map_err(|p| p.describe(Lang::En))
}

pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    english(text, seconds(text, true, MAX_TIMEOUT_SECS))
}

pub fn parse_grace(text: &str) -> Result<Duration, String> {
    english(text, seconds(text, false, MAX_GRACE_SECS))
}

pub fn parse_size(text: &str) -> Result<usize, String> {
    english(text, size(text))
}

/// The router's own sentence for a numeric flag clap refused (`--grace -1`),
/// in `lang`; `None` for flags that are not ours to explain.
pub fn explain_value(flag: &str, text: &str, lang: Lang) -> Option<String> {
    if flag == "--session" {
        let reason = crate::router::Session::parse(text).err()?.describe(lang);
        return Some(match lang {
            Lang::En => format!("invalid value for {flag}: {reason}"),
            Lang::Zh => format!("{flag} 的值无效：{reason}"),
        });
    }
    let problem = match flag {
        "--timeout" => seconds(text, true, MAX_TIMEOUT_SECS).err(),
        "--grace" => seconds(text, false, MAX_GRACE_SECS).err(),
        "--max-output" => size(text).err(),
        _ => None,
    }?;
    let reason = problem.describe(text, lang);
    Some(match lang {
        Lang::En => format!("invalid value for {flag}: {reason}"),
        Lang::Zh => format!("{flag} 的值无效：{reason}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own consistency checks (unique names, valid groups) for
    /// every subcommand: a clash would otherwise only show when that
    /// subcommand runs.
    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("262144"), Ok(262_144));
        assert_eq!(parse_size("256K"), Ok(262_144));
        assert_eq!(parse_size("1MiB"), Ok(1_048_576));
        assert_eq!(parse_size("1K"), Ok(MIN_SIZE));
        assert!(parse_size("0").is_err());
        assert!(parse_size("1023").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("2048M").is_err());
    }

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("-3").is_err());
        assert!(parse_timeout("NaN").is_err());
        assert!(parse_timeout("abc").is_err());
        assert_eq!(parse_grace("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn clap_definitions_are_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}

/// `clawbot_router bridge [send]`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BridgeCommand {
    #[command(subcommand)]
    pub send: Option<BridgeSend>,
    #[command(flatten)]
    pub run: BridgeArgs,
}

#[derive(Debug, Subcommand)]
pub enum BridgeSend {
    /// Deliver a message to a session's client through the running bridge
    /// (kept for it while it is away); prints the answer as JSON.
    Send(BridgeSendArgs),
}

/// The bridge's shared token: never on the command line.
#[derive(Debug, Args)]
pub struct BridgeToken {
    /// A file holding the shared token (else CLAWBOT_BRIDGE_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,

    /// Refused: a token on the command line is visible to every user.
    #[arg(long, hide = true)]
    pub token: Option<String>,
}

#[derive(Debug, Args)]
pub struct BridgeArgs {
    /// Where to listen (the clients connect to ws://ADDR/bridge).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:18801")]
    pub listen: String,

    /// An OpenClaw session a client may bind (repeatable; others are refused).
    #[arg(long = "session", value_name = "ID")]
    pub sessions: Vec<String>,

    /// Messages kept per session while its client is away (oldest dropped).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u16).range(0..=10000))]
    pub buffer: u16,

    /// Seconds between pings; two unanswered pings end a connection.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub ping_interval: u64,

    /// The longest a tool call (approval included) may take, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub tool_timeout: u64,

    /// Listen on a private-network address too (loopback only by default;
    /// the token crosses the wire in plaintext, so never a public one).
    #[arg(long)]
    pub allow_remote: bool,

    #[command(flatten)]
    pub token: BridgeToken,

    #[command(flatten)]
    pub hands: HandsArgs,

    #[command(flatten)]
    pub log: LogArgs,
}

#[derive(Debug, Args)]
pub struct BridgeSendArgs {
    /// The running bridge's address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:18801")]
    pub listen: String,

    /// The session whose client gets the message.
    #[arg(long, value_name = "ID")]
    pub session: String,

    /// The message's meta (a JSON object: user, source_channel, …).
    #[arg(long, value_name = "JSON")]
    pub meta: Option<String>,

    #[command(flatten)]
    pub token: BridgeToken,

    /// The message.
    pub text: String,
}

/// `clawbot_router chat [memory write|search]`. A conversation's own
/// flags given with `memory` are refused (app: `chat_flag_for_memory`).
#[derive(Debug, Args)]
pub struct ChatCommand {
    #[command(subcommand)]
    pub memory: Option<ChatMemory>,
    /// Global: given before or after `memory write|search`.
    #[command(flatten)]
    pub on: AgentService,
    #[command(flatten)]
    pub run: ChatArgs,
}

impl ChatCommand {
    pub fn log(&self) -> LogArgs {
        match &self.memory {
            Some(ChatMemory::Memory(MemoryCommand::Write(m))) => m.log,
            Some(ChatMemory::Memory(MemoryCommand::Search(m))) => m.log,
            None => self.run.log,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ChatMemory {
    /// The service's memory from a script: one command, its answer as one
    /// JSON object on stdout (`ok` true or false).
    #[command(subcommand)]
    Memory(MemoryCommand),
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Save a note to long-term or today's memory, in the conversation's
    /// session; prints {ok, path, target, general_session_id}.
    Write(MemoryWriteArgs),
    /// Search the memory; prints {ok, query, results: [{path, excerpt,
    /// line_start, line_end, score}]}.
    Search(MemorySearchArgs),
}

/// The General Agent Service, as `chat` and `chat memory` name it.
#[derive(Debug, Args)]
pub struct AgentService {
    /// The service's base URL (loopback unless --allow-remote).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        default_value = "http://127.0.0.1:8765"
    )]
    pub service: String,

    /// Allow a service off this machine (https://, or http:// on a private network).
    #[arg(long, global = true)]
    pub allow_remote: bool,
}

/// The most a memory command may take.
#[derive(Debug, Args)]
pub struct MemoryTimeout {
    /// The most the whole command may take, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub timeout: u64,
}

#[derive(Debug, Args)]
pub struct MemoryWriteArgs {
    /// The conversation whose session the note goes in (as `chat
    /// --conversation`); opened if it has none yet.
    #[arg(long, value_name = "ID", default_value = "clawbot_router")]
    pub conversation: String,

    /// Where the conversation's session is kept (default:
    /// $XDG_STATE_HOME/clawbot_router or ~/.local/state/clawbot_router).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<std::path::PathBuf>,

    /// Which memory: the agent's long-term memory, or today's.
    #[arg(long, value_enum, default_value_t = MemoryTarget::LongTerm)]
    pub target: MemoryTarget,

    #[command(flatten)]
    pub timeout: MemoryTimeout,

    #[command(flatten)]
    pub log: LogArgs,

    /// The note (`-`: read it from stdin, up to 1 MiB).
    pub content: String,
}

/// Which memory a note goes to (the seed's `target`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MemoryTarget {
    /// The agent's long-term memory (`memory/MEMORY.md`, nanobot-style).
    #[value(name = "long_term")]
    LongTerm,
    /// Today's daily memory (`memory/YYYY-MM-DD.md`).
    #[value(name = "daily")]
    Daily,
}

impl MemoryTarget {
    pub fn name(self) -> &'static str {
        match self {
            MemoryTarget::LongTerm => "long_term",
            MemoryTarget::Daily => "daily",
        }
    }
}

#[derive(Debug, Args)]
pub struct MemorySearchArgs {
    /// Only this kind of memory (passed to the service as it is).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,

    /// At most this many results.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub limit: Option<u16>,

    #[command(flatten)]
    pub timeout: MemoryTimeout,

    #[command(flatten)]
    pub log: LogArgs,

    /// What to look for.
    pub query: String,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// This conversation's id on the desktop side (jarvis_session_id); its
    /// service session is kept in the state directory and resumed.
    #[arg(long, value_name = "ID", default_value = "clawbot_router")]
    pub conversation: String,

    /// Seconds without any data, heartbeats included, before a stream counts as dead.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub dead_after: u64,

    /// The longest a tool call (approval included) may take, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub tool_timeout: u64,

    #[command(flatten)]
    pub hands: HandsArgs,

    #[command(flatten)]
    pub log: LogArgs,

    /// The first message (more follow as lines of stdin; /help lists the
    /// conversation's own commands: /remember, /daily, /search).
    pub message: Option<String>,
}

#[derive(Debug, Args)]
pub struct PollArgs {
    /// The command queue's base URL (https://, or http:// on loopback or a private network).
    #[arg(long, value_name = "URL")]
    pub api: String,

    /// A file holding the API key (else CLAWBOT_ROUTER_POLL_KEY).
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<std::path::PathBuf>,

    /// Refused: a key on the command line is visible to every user.
    #[arg(long, hide = true)]
    pub key: Option<String>,

    /// The workspace to register in (default: the one the key belongs to).
    #[arg(long, value_name = "ID")]
    pub workspace_id: Option<String>,

    /// Run airlock levels 0 and 1 without asking (level 2 always asks; our
    /// own rules still apply).
    #[arg(long)]
    pub headless: bool,

    /// Milliseconds between polls while commands come (jittered ±10%).
    #[arg(long, hide = true, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(50..=600000))]
    pub active_ms: u64,

    /// Milliseconds between polls when idle (jittered ±10%).
    #[arg(long, hide = true, default_value_t = 10000, value_parser = clap::value_parser!(u64).range(50..=600000))]
    pub idle_ms: u64,

    #[command(flatten)]
    pub hands: HandsArgs,

    #[command(flatten)]
    pub log: LogArgs,
}

/// `clawbot_router mcp`: the call options, and the HTTP transport's.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub call: CallOptions,

    /// Serve MCP's Streamable HTTP at http://ADDR/mcp instead of stdio
    /// (loopback; a private address only with a bearer token).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,

    /// A file holding the bearer token HTTP clients must send (else
    /// CLAWBOT_ROUTER_MCP_TOKEN; required off loopback).
    #[arg(long, value_name = "FILE", requires = "http")]
    pub http_token_file: Option<std::path::PathBuf>,

    /// Refused: a token on the command line is visible to every user.
    #[arg(long, hide = true)]
    pub http_token: Option<String>,

    /// A browser origin allowed to call (scheme://host:port; repeatable).
    /// None by default: a request with an Origin header is refused.
    #[arg(long = "http-allow-origin", value_name = "ORIGIN", requires = "http")]
    pub http_origins: Vec<String>,

    #[command(flatten)]
    pub log: LogArgs,
}

/// How the long-running modes (node, bridge, chat, poll, mcp) log, on
/// stderr or `--log-file`: the same three flags on each.
#[derive(Debug, Clone, Copy, Args)]
pub struct LogArgs {
    /// `text` for a person, `json` for a service manager or a log shipper
    /// (one object a line: ts in ms, level, who, msg).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = log::Format::Text)]
    pub log_format: log::Format,

    /// The least severe lines written.
    #[arg(long, value_enum, value_name = "LEVEL", default_value_t = Level::Info)]
    pub log_level: Level,

    /// Warnings and errors only (as --log-level warn).
    #[arg(long, short = 'q', conflicts_with = "log_level")]
    pub quiet: bool,
}

impl LogArgs {
    /// The least severe level kept: `--quiet` is `--log-level warn`.
    pub fn least(&self) -> Level {
        if self.quiet {
            Level::Warn
        } else {
            self.log_level
        }
    }
}
