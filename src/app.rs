//! Dispatch: parse the command line once, run the router call or a
//! subcommand, print the answer once, and map every outcome to an exit code.
//! This is the only module that writes to stdout.

use std::ffi::OsString;
use std::future::Future;
use std::io::{IsTerminal, Write};

use clap::Parser;
use clap::error::ErrorKind;

use crate::cli::{CallArgs, CallOptions, Cli, Command, NodeArgs};
use crate::router::messages::{self, Lang};
use crate::router::request::{self, RequestError, StdinProblem};
use crate::router::result::Status;
use crate::router::{self, Interrupt};
use crate::{gateway, node, schema, ui};

/// The most `--args-json -` reads from stdin (a 4 MiB message, escaped).
const MAX_STDIN_ARGS: u64 = 64 * 1024 * 1024;

pub const PROMPT_ZH: &str = include_str!("../prompts/clawbot_router.zh.md");
pub const PROMPT_EN: &str = include_str!("../prompts/clawbot_router.en.md");

/// Runs the program; returns the process exit code.
pub async fn run(args: Vec<OsString>) -> u8 {
    let raw = args.clone();
    match Cli::try_parse_from(&args) {
        Ok(Cli {
            command: Some(Command::Node(args)),
            ..
        }) => {
            let gateway_flag =
                args_after_node(&raw).any(|w| w == "--gateway" || w.starts_with("--gateway="));
            match node_options(args, gateway_flag) {
                Ok(options) => Box::pin(node::run(options)).await,
                Err(problem) => {
                    eprintln!("[clawbot_router node] {problem}");
                    2
                }
            }
        }
        Ok(Cli {
            command: Some(Command::Mcp(options)),
            ..
        }) => Box::pin(crate::mcp::serve(call_options(&options, None))).await,
        Ok(Cli {
            command: Some(command),
            ..
        }) => {
            let text = match command {
                Command::Schema { format } => schema::render(format),
                Command::Prompt { lang } => prompt(lang).to_owned(),
                Command::Node(_) | Command::Mcp(_) => unreachable!("handled above"),
            };
            print(&text);
            0
        }
        // Each mode's state machine is boxed: the runtime polls this one on
        // the main thread's stack, which a caller may have made small.
        Ok(Cli { call, .. }) => Box::pin(router_call(call)).await,
        Err(e) => clap_error(e, &args),
    }
}

/// `$XDG_STATE_HOME/clawbot_router`, else `~/.local/state/clawbot_router`.
fn default_state_dir() -> std::path::PathBuf {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| home.map(|h| h.join(".local").join("state")))
        .unwrap_or_else(std::env::temp_dir)
        .join("clawbot_router")
}

/// The words after `node` on the command line.
fn args_after_node(args: &[OsString]) -> impl Iterator<Item = String> + '_ {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .skip_while(|w| w != "node")
        .skip(1)
}

/// The gateway the node connects to: `--gateway URL`, or OpenClaw's own
/// `--host/--port/--tls/--context-path` (so a command line or a service
/// file written for `openclaw node run` carries over) — not both.
fn node_endpoint(args: &NodeArgs, gateway_flag: bool) -> Result<gateway::Endpoint, String> {
    let pieces =
        args.host.is_some() || args.port.is_some() || args.tls || args.context_path.is_some();
    let url = if !pieces {
        args.gateway.url.clone()
    } else if gateway_flag {
        return Err(format!(
            "--gateway {} and --host/--port/--tls/--context-path both name the gateway: give one or the other",
            args.gateway.url
        ));
    } else {
        let tls = args.tls || args.gateway.tls_fingerprint().is_some();
        let host = args.host.clone().unwrap_or_else(|| "127.0.0.1".into());
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]") // an IPv6 address
        } else {
            host
        };
        let path = match args.context_path.as_deref().map(|p| p.trim_matches('/')) {
            None | Some("") => String::new(),
            Some(p) => format!("/{p}"),
        };
        let scheme = if tls { "wss" } else { "ws" };
        format!("{scheme}://{host}:{}{path}", args.port.unwrap_or(18789))
    };
    Ok(gateway::Endpoint {
        url,
        trust: gateway::Trust {
            pin: args.gateway.tls_fingerprint(),
        },
    })
}

/// `--pair CODE` (or `-`: one line of stdin), decoded; never echoed.
fn setup_code(args: &NodeArgs) -> Result<Option<gateway::setup_code::SetupCode>, String> {
    let Some(text) = args.pair.as_deref() else {
        return Ok(None);
    };
    let text = if text == "-" {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .map_err(|e| format!("--pair -: cannot read the setup code from stdin: {e}"))?;
        line
    } else {
        text.to_owned()
    };
    gateway::setup_code::decode(&text, gateway::setup_code::now_ms()).map(Some)
}

fn node_options(args: NodeArgs, gateway_flag: bool) -> Result<node::Options, String> {
    let state_dir = args.state_dir.clone().unwrap_or_else(default_state_dir);
    let pair = setup_code(&args)?;
    let from_env = std::env::var_os("OPENCLAW_GATEWAY_URL").is_some_and(|v| !v.is_empty());
    let mut gateway = node_endpoint(&args, gateway_flag)?;
    let named =
        gateway_flag || args.host.is_some() || args.port.is_some() || args.context_path.is_some();
    if let Some(code) = &pair {
        // The code names the gateway; a flag that names another is a mistake.
        if named && gateway.url != code.url {
            return Err(format!(
                "the setup code is for {} but the command line names {}: drop one",
                code.url, gateway.url
            ));
        }
        gateway.url = code.url.clone();
        if gateway.trust.pin.is_none() {
            gateway.trust.pin = code.fingerprint;
        }
    } else if !named && !from_env {
        // Nothing names a gateway: the one this node last served, as
        // `openclaw node run` reuses its saved endpoint.
        if let Some(saved) = node::saved_gateway(&state_dir) {
            gateway.url = saved;
        }
    }

    Ok(node::Options {
        gateway,
        pair,
        pair_if_needed: args.pair_if_needed,
        token: args.gateway.token.filter(|t| !t.trim().is_empty()),
        display_name: args.display_name,
        state_dir,
        workspace: args.workspace.unwrap_or_else(|| ".".into()),
        approval: args.approval,
        allow: args.allow,
        deny: args.deny,
        doctor: args.doctor.then_some(node::Doctor {
            agent: args.agent,
            question: args.message,
        }),
    })
}

pub fn prompt(lang: Lang) -> &'static str {
    match lang {
        Lang::Zh => PROMPT_ZH,
        Lang::En => PROMPT_EN,
    }
}

/// The router's options from the command line.
fn call_options(args: &CallOptions, activity: Option<ui::Activity>) -> router::Options {
    router::Options {
        via: args.via,
        format: args.format,
        gateway: gateway::Endpoint {
            url: args.gateway.url.clone(),
            trust: gateway::Trust {
                pin: args.gateway.tls_fingerprint(),
            },
        },
        token: args.gateway.token.clone(),
        // The router's own operator identity (remote gateways only), apart
        // from any node's: CLAWBOT_ROUTER_STATE_DIR moves it.
        operator_dir: Some(
            std::env::var_os("CLAWBOT_ROUTER_STATE_DIR")
                .filter(|d| !d.is_empty())
                .map(std::path::PathBuf::from)
                .unwrap_or_else(default_state_dir)
                .join("operator"),
        ),
        activity,
        default_to: args.to.clone(),
        timeout: args.timeout,
        grace: args.grace,
        max_output: args.max_output,
        openclaw: args.openclaw.clone().filter(|s| !s.trim().is_empty()),
        wsl: args.wsl,
        wsl_distro: args.wsl_distro.clone(),
        lang: args.lang,
    }
}

async fn router_call(args: CallArgs) -> u8 {
    let lang = args.options.lang;
    // Handlers go in before anything else, so an early Ctrl-C still gets a
    // JSON answer and reaches our cleanup instead of killing us.
    let mut interrupted = Box::pin(interrupts());
    let request = match args.args_json.as_deref() {
        Some("-") => {
            tokio::select! {
                text = read_stdin(args.options.timeout) => text.and_then(|text| request::from_json(&text)),
                signal = &mut interrupted => {
                    let reply = router::not_started(messages::interrupted(lang, signal.name), Status::Interrupted(signal.number));
                    return finish(reply, &args);
                }
            }
        }
        Some(text) => request::from_json(text),
        None => request::from_parts(args.agent.clone(), args.message.clone()),
    };
    let spinner = request.is_ok().then(|| ui::Spinner::start(lang)).flatten();
    let options = call_options(&args.options, spinner.as_ref().map(ui::Spinner::activity));
    let reply = router::call(request, &options, interrupted).await;
    if let Some(spinner) = spinner {
        spinner.stop();
    }
    finish(reply, &args)
}

/// Prints the one JSON object and picks the exit status.
fn finish(mut reply: router::Reply, args: &CallArgs) -> u8 {
    if !args.meta {
        reply.result.meta = None;
    }
    print_json(&reply.result);
    if args.exit_code {
        reply.status.exit_code()
    } else {
        0
    }
}

/// Help and version print as usual; a bad subcommand line is a usage error;
/// a bad router call still answers with the JSON object.
fn clap_error(e: clap::Error, args: &[OsString]) -> u8 {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return 0;
    }
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if matches!(
        words.first().map(String::as_str),
        Some("schema" | "prompt" | "node" | "mcp" | "help")
    ) {
        let _ = e.print();
        return 2;
    }
    let lang = lang_from_words(&words);
    let content = match own_value_problem(&e, lang) {
        // A numeric flag of ours: our sentence, in the caller's language.
        Some(problem) => crate::router::messages::invalid_arguments(lang, &problem),
        // Anything else is clap's (English) text, quoted as such.
        None => {
            let detail = e.render().to_string();
            let detail = detail
                .lines()
                .find(|l| l.starts_with("error:"))
                .map(|l| l.trim_start_matches("error:").trim().to_owned())
                .unwrap_or(detail);
            RequestError::CommandLine(detail).content(lang)
        }
    };
    let mut reply = router::not_started(content, Status::InvalidInput);
    if !words.iter().any(|w| w == "--meta") {
        reply.result.meta = None;
    }
    print_json(&reply.result);
    if words.iter().any(|w| w == "--exit-code") {
        Status::InvalidInput.exit_code()
    } else {
        0
    }
}

/// Our own explanation of a value clap's parser refused (`--grace -1`).
fn own_value_problem(e: &clap::Error, lang: Lang) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let arg = text(ContextKind::InvalidArg)?;
    let value = text(ContextKind::InvalidValue)?;
    let flag = arg.split([' ', '=']).next().unwrap_or(&arg);
    crate::cli::explain_value(flag, &value, lang)
}

/// `--lang` as far as it can be read from a command line clap refused.
fn lang_from_words(words: &[String]) -> Lang {
    let flag = words.iter().enumerate().find_map(|(i, w)| {
        w.strip_prefix("--lang=")
            .map(str::to_owned)
            .or_else(|| (w == "--lang").then(|| words.get(i + 1).cloned()).flatten())
    });
    let env = std::env::var("CLAWBOT_ROUTER_LANG").ok();
    Lang::guess(flag.or(env).as_deref())
}

/// The arguments from stdin, within the call's own timeout: a host that
/// never closes stdin gets an answer, not a hang.
async fn read_stdin(limit: std::time::Duration) -> Result<String, RequestError> {
    use tokio::io::AsyncReadExt;
    if std::io::stdin().is_terminal() {
        return Err(RequestError::Stdin(StdinProblem::IsTerminal));
    }
    let mut bytes = Vec::new();
    let mut stdin = tokio::io::stdin().take(MAX_STDIN_ARGS + 1);
    let read = stdin.read_to_end(&mut bytes);
    match tokio::time::timeout(limit, read).await {
        Err(_) => {
            let secs = format!("{}", limit.as_secs_f64());
            return Err(RequestError::Stdin(StdinProblem::NoInput(secs)));
        }
        Ok(Err(e)) => return Err(RequestError::Stdin(StdinProblem::Unreadable(e.to_string()))),
        Ok(Ok(_)) => {}
    }
    if bytes.len() as u64 > MAX_STDIN_ARGS {
        return Err(RequestError::Stdin(StdinProblem::TooLarge(MAX_STDIN_ARGS)));
    }
    String::from_utf8(bytes).map_err(|_| RequestError::Stdin(StdinProblem::NotUtf8))
}

/// Resolves when the router is told to stop.
pub fn interrupts() -> impl Future<Output = Interrupt> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let int = signal(SignalKind::interrupt());
        let term = signal(SignalKind::terminate());
        let hup = signal(SignalKind::hangup());
        async move {
            let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (int, term, hup) else {
                return std::future::pending().await;
            };
            tokio::select! {
                _ = int.recv() => Interrupt { name: "SIGINT", number: libc::SIGINT },
                _ = term.recv() => Interrupt { name: "SIGTERM", number: libc::SIGTERM },
                _ = hup.recv() => Interrupt { name: "SIGHUP", number: libc::SIGHUP },
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            match tokio::signal::ctrl_c().await {
                Ok(()) => Interrupt {
                    name: "Ctrl-C",
                    number: 2,
                },
                Err(_) => std::future::pending().await,
            }
        }
    }
}

fn print_json(value: &impl serde::Serialize) {
    let line = serde_json::to_string(value).expect("results are plain data") + "\n";
    print(&line);
}

/// Writes to stdout; a closed stdout is the reader's choice, not a panic.
fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}
