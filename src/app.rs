//! Dispatch: parse the command line once, run the router call or a
//! subcommand, print the answer once, and map every outcome to an exit code.
//! This is the only module that writes to stdout.

use std::ffi::OsString;
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::pin::Pin;

use clap::Parser;
use clap::error::ErrorKind;

use crate::cli::{CallArgs, CallOptions, Cli, Command, NodeArgs, NodeCommand, ServiceCommand};
use crate::log::tell;
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
    if let Some(call) = well_formed_call(&args) {
        return Box::pin(router_call(call, any_path)).await;
    }
    let raw = args.clone();
    match Cli::try_parse_from(&args) {
        Ok(Cli {
            command: Some(Command::Node(NodeCommand { service, run })),
            ..
        }) => {
            let gateway_flag =
                args_after_node(&raw).any(|w| w == "--gateway" || w.starts_with("--gateway="));
            if let Some(service) = service {
                return Box::pin(node_service(service, gateway_flag)).await;
            }
            match node_options(run, gateway_flag) {
                Ok(options) => Box::pin(node::run(options)).await,
                Err(problem) => {
                    tell("node", &problem);
                    2
                }
            }
        }
        Ok(Cli {
            command: Some(Command::Mcp(args)),
            ..
        }) => match mcp_http(&args) {
            Ok(http) => Box::pin(crate::mcp::serve(call_options(&args.call, None), http)).await,
            Err(problem) => {
                tell("mcp", &problem);
                2
            }
        },
        Ok(Cli {
            command: Some(Command::Bridge(command)),
            ..
        }) => Box::pin(crate::links::bridge::main(command, stopped())).await,
        Ok(Cli {
            command: Some(Command::Chat(args)),
            ..
        }) => Box::pin(crate::links::agent_service::main(args, print, stopped())).await,
        Ok(Cli {
            command: Some(Command::Poll(args)),
            ..
        }) => Box::pin(crate::links::command_queue::main(args, stopped())).await,
        Ok(Cli {
            command: Some(command),
            ..
        }) => {
            let text = match command {
                Command::Schema { format } => schema::render(format),
                Command::Prompt { lang } => prompt(lang).to_owned(),
                Command::Node(_)
                | Command::Mcp(_)
                | Command::Bridge(_)
                | Command::Chat(_)
                | Command::Poll(_) => {
                    unreachable!("handled above")
                }
            };
            print(&text);
            0
        }
        // Each mode's state machine is boxed: the runtime polls this one on
        // the main thread's stack, which a caller may have made small.
        Ok(Cli { call, .. }) => Box::pin(router_call(call, any_path)).await,
        Err(e) => clap_error(e, &args),
    }
}

/// The call the small executable runs itself: a well-formed router call
/// through the openclaw CLI. Anything else (`None`) is the full program's,
/// which also answers a malformed call with its JSON.
pub fn cli_call(args: &[OsString]) -> Option<CallArgs> {
    well_formed_call(args).filter(|call| call.options.via == router::Via::Cli)
}

/// A router call the call-only parser takes (the full parser, which builds
/// every mode's arguments, is for everything else and for errors).
fn well_formed_call(args: &[OsString]) -> Option<CallArgs> {
    if !is_a_call(args) {
        return None;
    }
    crate::cli::CallCli::try_parse_from(args)
        .ok()
        .map(|cli| cli.call)
}

/// Runs a call [`cli_call`] picked out.
pub async fn run_cli_call(call: CallArgs) -> u8 {
    Box::pin(router_call(call, cli_path)).await
}

/// The small executable could not hand this command line to the full
/// program: a call still answers with its one JSON object; anything else
/// says so on stderr, with the shell's "cannot run" status.
pub fn not_handed_over(args: &[OsString], problem: &str) -> u8 {
    if !is_a_call(args) {
        tell("", problem);
        return 127;
    }
    let words = words_after_program(args);
    let content = messages::cannot_hand_over(lang_from_words(&words), problem);
    answer_unparsed(router::not_started(content, Status::CouldNotStart), &words)
}

/// Whether the command line starts as a router call does: options, and
/// not the ones that print help or the version.
fn is_a_call(args: &[OsString]) -> bool {
    args.get(1).and_then(|a| a.to_str()).is_some_and(|first| {
        first.starts_with('-') && !matches!(first, "-h" | "--help" | "-V" | "--version")
    })
}

/// The command line's words after the program name, as text, for the
/// paths that read it without clap (or after clap refused it).
fn words_after_program(args: &[OsString]) -> Vec<String> {
    args.iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// The words after `node` on the command line.
fn args_after_node(args: &[OsString]) -> impl Iterator<Item = String> {
    words_after_program(args)
        .into_iter()
        .skip_while(|w| w != "node")
        .skip(1)
}

/// The gateway the node connects to, as `openclaw node run` finds it:
/// `--gateway URL`, or OpenClaw's own `--host/--port/--tls/--context-path`
/// (so a command line or a service file carries over) — not both; a setup
/// code's; `OPENCLAW_GATEWAY_URL`; else the one this node last served.
/// `--tls` and a pin make a URL nobody typed `wss://` (a pin implies TLS,
/// as in OpenClaw); one typed as `ws://` stays so, and is refused beside
/// them rather than silently upgraded.
fn node_endpoint(
    args: &NodeArgs,
    gateway_flag: bool,
    pair: Option<&gateway::setup_code::SetupCode>,
    from_env: bool,
    saved: impl FnOnce() -> Option<String>,
) -> Result<gateway::Endpoint, String> {
    let pin = args.gateway.tls_fingerprint();
    let tls = args.tls || pin.is_some();
    let pieces = args.host.is_some() || args.port.is_some() || args.context_path.is_some();
    if gateway_flag && (pieces || args.tls) {
        return Err(format!(
            "--gateway {} and --host/--port/--tls/--context-path both name the gateway: give one or the other",
            args.gateway.url
        ));
    }
    let typed = gateway_flag || (from_env && !pieces && pair.is_none());
    let mut url = if pieces {
        let host = args.host.clone().unwrap_or_else(|| "127.0.0.1".into());
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]") // an IPv6 address
        } else {
            host
        };
        let path = match args.context_path.as_deref().map(str::trim) {
            None | Some("") => String::new(),
            Some(p) if p.starts_with('/') => p.to_owned(),
            Some(p) => format!("/{p}"),
        };
        let scheme = if tls { "wss" } else { "ws" };
        format!("{scheme}://{host}:{}{path}", args.port.unwrap_or(18789))
    } else if let Some(code) = pair {
        if gateway_flag && args.gateway.url != code.url {
            return Err(format!(
                "the setup code is for {} but --gateway names {}: drop one",
                code.url, args.gateway.url
            ));
        }
        code.url.clone()
    } else if typed {
        args.gateway.url.clone()
    } else {
        saved().unwrap_or_else(|| args.gateway.url.clone())
    };
    if let Some(code) = pair
        && pieces
        && url != code.url
    {
        return Err(format!(
            "the setup code is for {} but --host/--port/--context-path name {url}: drop one",
            code.url
        ));
    }
    if tls
        && !typed
        && let Some(rest) = url.strip_prefix("ws://")
    {
        url = format!("wss://{rest}");
    }
    if args.tls && url.starts_with("ws://") {
        return Err(format!(
            "--tls, but the gateway is named as {url}: use wss://"
        ));
    }
    if args.no_tls && url.starts_with("wss://") {
        return Err(format!(
            "--no-tls, but the gateway is named as {url}: use ws://, or drop --no-tls"
        ));
    }
    Ok(gateway::Endpoint {
        url,
        trust: gateway::Trust {
            pin: pin.or(pair.and_then(|c| c.fingerprint)),
        },
    })
}

/// `--pair CODE` / `--pair-if-needed CODE` (`-`: one line of stdin),
/// decoded; never echoed. With `--pair-if-needed` an expired code is kept:
/// the node only needs it while it has no device token.
fn setup_code(
    args: &NodeArgs,
    from_file: Option<&str>,
) -> Result<Option<gateway::setup_code::SetupCode>, String> {
    let pair = args.pair();
    let text = match (
        pair.as_deref().or(from_file),
        args.pair_if_needed.as_ref().map(Option::as_deref),
    ) {
        (Some(_), Some(Some(_))) => {
            return Err("--pair and --pair-if-needed both carry a setup code: give one".into());
        }
        (Some(text), _) | (None, Some(Some(text))) => text,
        (None, _) => return Ok(None),
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    let text = if text == "-" {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .map_err(|e| format!("cannot read the setup code from stdin: {e}"))?;
        line
    } else {
        text.to_owned()
    };
    let now = gateway::setup_code::now_ms();
    let checked_at = if args.pair_if_needed.is_some() {
        0
    } else {
        now
    };
    gateway::setup_code::decode(&text, checked_at).map(Some)
}

fn node_options(args: NodeArgs, gateway_flag: bool) -> Result<node::Options, String> {
    let state_dir = args
        .hands
        .state_dir
        .clone()
        .unwrap_or_else(node::default_state_dir);
    let file = match &args.env_file {
        Some(path) => node::service::read_env_file(path)?,
        None => Vec::new(),
    };
    let from_file = |key: &str| {
        file.iter()
            .find(|(k, v)| k == key && !v.trim().is_empty())
            .map(|(_, v)| v.clone())
    };
    let pair = setup_code(&args, from_file(node::service::SETUP_CODE_KEY).as_deref())?;
    let from_env = std::env::var_os("OPENCLAW_GATEWAY_URL").is_some_and(|v| !v.is_empty());
    let gateway = node_endpoint(&args, gateway_flag, pair.as_ref(), from_env, || {
        node::saved_gateway(&state_dir)
    })?;
    Ok(node::Options {
        gateway,
        pair,
        pair_if_needed: args.pair_if_needed.is_some(),
        token: args
            .gateway
            .token()
            .filter(|t| !t.trim().is_empty())
            .or_else(|| from_file(node::service::TOKEN_KEY)),
        log_file: args.log_file,
        no_agent_tools: args.no_agent_tools,
        mcp: crate::links::mcp_servers::gather(args.mcp_server, args.mcp_config.as_deref())?,
        display_name: args.display_name,
        state_dir,
        workspace: args.hands.workspace.unwrap_or_else(|| ".".into()),
        approval: args.hands.approval,
        allow: args.hands.allow,
        deny: args.hands.deny,
        commands: args.commands.map(|c| {
            c.into_iter()
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect()
        }),
        doctor: args.doctor.then_some(node::Doctor {
            agent: args.agent,
            question: args.message,
        }),
    })
}

/// `clawbot_router node install|uninstall|status|start|stop|restart`.
async fn node_service(command: ServiceCommand, gateway_flag: bool) -> u8 {
    use node::service::{self, Action, Scope};
    let (action, flags, plan, force, state_dir) = match command {
        ServiceCommand::Install {
            run,
            service: flags,
            force,
            print: only_print,
        } => {
            let program = std::env::current_exe()
                .and_then(|p| p.canonicalize())
                .map_err(|e| format!("cannot tell where this program is: {e}"));
            let plan = node_options(run, gateway_flag)
                .and_then(|o| service::plan(&o, flags.system, program?));
            let plan = match plan {
                Ok(plan) => plan,
                Err(problem) => {
                    tell("node install", &problem);
                    return 2;
                }
            };
            if only_print {
                return match service::print(&plan, &Scope::current(flags.system)) {
                    Ok(text) => {
                        print(&text);
                        0
                    }
                    Err(problem) => {
                        tell("node install", &problem);
                        2
                    }
                };
            }
            (Action::Install, flags, Some(plan), force, None)
        }
        ServiceCommand::Uninstall(a) => (Action::Uninstall, a.flags, None, false, a.state_dir),
        ServiceCommand::Status(a) => (Action::Status, a.flags, None, false, a.state_dir),
        ServiceCommand::Start(a) => (Action::Start, a.flags, None, false, a.state_dir),
        ServiceCommand::Stop(a) => (Action::Stop, a.flags, None, false, a.state_dir),
        ServiceCommand::Restart(a) => (Action::Restart, a.flags, None, false, a.state_dir),
    };
    let report = service::run(action, plan, Scope::current(flags.system), force, state_dir).await;
    if flags.json {
        print_json(&report.json);
    } else if report.code == 1 {
        for line in report.text.lines() {
            tell("node", line);
        }
    } else {
        print(&format!("{}\n", report.text));
    }
    report.code
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
        token: args.gateway.token(),
        // The router's own operator identity (remote gateways only), apart
        // from any node's: CLAWBOT_ROUTER_STATE_DIR moves it.
        operator_dir: Some(
            std::env::var_os("CLAWBOT_ROUTER_STATE_DIR")
                .filter(|d| !d.is_empty())
                .map(std::path::PathBuf::from)
                .unwrap_or_else(node::default_state_dir)
                .join("operator"),
        ),
        activity,
        default_to: args.to.clone(),
        session: args.session.clone(),
        timeout: args.timeout,
        grace: args.grace,
        max_output: args.max_output,
        openclaw: args.openclaw.clone().filter(|s| !s.trim().is_empty()),
        wsl: args.wsl,
        wsl_distro: args.wsl_distro.clone(),
        lang: args.lang,
    }
}

/// How a call runs once its request is read: [`any_path`] or [`cli_path`].
/// A function pointer, not a branch: the small executable names only
/// `cli_path`, so the gateway client is not linked into it.
type Caller = for<'a> fn(
    Result<request::Request, RequestError>,
    &'a router::Options,
    Pin<Box<dyn Future<Output = Interrupt>>>,
) -> Pin<Box<dyn Future<Output = router::Reply> + 'a>>;

fn any_path<'a>(
    request: Result<request::Request, RequestError>,
    options: &'a router::Options,
    cancel: Pin<Box<dyn Future<Output = Interrupt>>>,
) -> Pin<Box<dyn Future<Output = router::Reply> + 'a>> {
    Box::pin(router::call(request, options, cancel))
}

fn cli_path<'a>(
    request: Result<request::Request, RequestError>,
    options: &'a router::Options,
    cancel: Pin<Box<dyn Future<Output = Interrupt>>>,
) -> Pin<Box<dyn Future<Output = router::Reply> + 'a>> {
    Box::pin(router::call_through_cli(request, options, cancel))
}

async fn router_call(args: CallArgs, caller: Caller) -> u8 {
    let lang = args.options.lang;
    // Handlers go in before anything else, so an early Ctrl-C still gets a
    // JSON answer and reaches our cleanup instead of killing us.
    let mut interrupted: Pin<Box<dyn Future<Output = Interrupt>>> = Box::pin(interrupts());
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
    let reply = caller(request, &options, interrupted).await;
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
    let words = words_after_program(args);
    if matches!(
        words.first().map(String::as_str),
        Some("schema" | "prompt" | "node" | "mcp" | "help")
    ) {
        eprint!("{}", redact(&e.render().to_string(), &words));
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
    answer_unparsed(router::not_started(content, Status::InvalidInput), &words)
}

/// Prints a call's answer when its command line could not be parsed:
/// `--meta` and `--exit-code` as far as its words say.
fn answer_unparsed(mut reply: router::Reply, words: &[String]) -> u8 {
    if !words.iter().any(|w| w == "--meta") {
        reply.result.meta = None;
    }
    print_json(&reply.result);
    if words.iter().any(|w| w == "--exit-code") {
        reply.status.exit_code()
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

/// clap's message with every secret of the command line taken out: the
/// values of `--token`, `--pair`, `--pair-if-needed`, and any word that
/// looks like a token or a setup code (a service's log keeps stderr).
fn redact(text: &str, words: &[String]) -> String {
    use crate::secrets::FLAGS as SECRET_FLAGS;
    let mut secrets: Vec<&str> = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if let Some((flag, value)) = word.split_once('=')
            && SECRET_FLAGS.contains(&flag)
        {
            secrets.push(value);
        } else if SECRET_FLAGS.contains(&word.as_str())
            && let Some(value) = words.get(i + 1)
        {
            secrets.push(value);
        } else if word.len() >= 24
            && word
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            secrets.push(word);
        }
    }
    let mut text = text.to_owned();
    for secret in secrets.into_iter().filter(|s| s.len() >= 4) {
        text = text.replace(secret, "<redacted>");
    }
    text
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

/// `mcp --http`'s address and token, checked; None: stdio.
fn mcp_http(args: &crate::cli::McpArgs) -> Result<Option<crate::mcp::http::Http>, String> {
    let Some(listen) = &args.http else {
        if args.http_token.is_some() {
            return Err("--http-token is refused; and it needs --http".into());
        }
        return Ok(None);
    };
    let from_env =
        crate::secrets::var("CLAWBOT_ROUTER_MCP_TOKEN").is_some_and(|t| !t.trim().is_empty());
    let token = if args.http_token.is_some() || args.http_token_file.is_some() || from_env {
        Some(crate::links::secret(&crate::links::SecretSource {
            flag: args.http_token.as_deref(),
            file: args.http_token_file.as_deref(),
            file_flag: "--http-token-file",
            var: "CLAWBOT_ROUTER_MCP_TOKEN",
            what: "the bearer token",
        })?)
    } else {
        None
    };
    crate::mcp::http::Http::new(listen, token, args.http_origins.clone()).map(Some)
}

/// Cancelled when the process is told to stop (a link's whole life).
fn stopped() -> tokio_util::sync::CancellationToken {
    let stop = tokio_util::sync::CancellationToken::new();
    let cancel = stop.clone();
    let signal = interrupts();
    tokio::spawn(async move {
        signal.await;
        cancel.cancel();
    });
    stop
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
    #[cfg(windows)]
    {
        // Ctrl-C, Ctrl-Break, and the console window closing (Windows then
        // allows a few seconds before it ends the process).
        use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
        let (c, brk, close) = (ctrl_c(), ctrl_break(), ctrl_close());
        async move {
            let (Ok(mut c), Ok(mut brk), Ok(mut close)) = (c, brk, close) else {
                return std::future::pending().await;
            };
            tokio::select! {
                _ = c.recv() => Interrupt { name: "Ctrl-C", number: 2 },
                _ = brk.recv() => Interrupt { name: "Ctrl-Break", number: 21 },
                _ = close.recv() => Interrupt { name: "CTRL_CLOSE_EVENT", number: 1 },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `clawbot_router node ARGS`'s endpoint, with `saved` as the last one.
    fn endpoint(args: &[&str], from_env: bool, saved: Option<&str>) -> Result<String, String> {
        let mut words = vec!["clawbot_router", "node"];
        words.extend(args);
        let Ok(Cli {
            command: Some(Command::Node(node)),
            ..
        }) = Cli::try_parse_from(&words)
        else {
            panic!("{words:?} does not parse");
        };
        let flag = args
            .iter()
            .any(|w| *w == "--gateway" || w.starts_with("--gateway="));
        node_endpoint(&node.run, flag, None, from_env, || saved.map(str::to_owned)).map(|e| e.url)
    }

    const PIN: &str = "ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab";

    #[test]
    fn openclaws_endpoint_flags_build_the_url_as_openclaw_does() {
        assert_eq!(endpoint(&[], false, None).unwrap(), "ws://127.0.0.1:18789");
        assert_eq!(
            endpoint(&["--host", "::1", "--port", "9"], false, None).unwrap(),
            "ws://[::1]:9"
        );
        assert_eq!(
            endpoint(
                &["--host", "gw", "--tls", "--context-path", "gw/"],
                false,
                None
            )
            .unwrap(),
            "wss://gw:18789/gw/",
            "a trailing slash is kept (a proxy's location may need it)"
        );
        assert_eq!(
            endpoint(&["--tls"], false, None).unwrap(),
            "wss://127.0.0.1:18789"
        );
        assert_eq!(
            endpoint(&["--host", "gw.lan", "--no-tls"], false, None).unwrap(),
            "ws://gw.lan:18789"
        );
        assert!(
            endpoint(&["--gateway", "wss://gw:1", "--no-tls"], false, None)
                .unwrap_err()
                .contains("--no-tls")
        );
        // A pin implies TLS, as in OpenClaw.
        assert_eq!(
            endpoint(&["--tls-fingerprint", PIN], false, None).unwrap(),
            "wss://127.0.0.1:18789"
        );
        // The gateway it last served, and --tls upgrades it rather than being dropped.
        assert_eq!(
            endpoint(&[], false, Some("ws://10.0.0.5:18789")).unwrap(),
            "ws://10.0.0.5:18789"
        );
        assert_eq!(
            endpoint(&["--tls"], false, Some("ws://10.0.0.5:18789")).unwrap(),
            "wss://10.0.0.5:18789"
        );
        // Named on purpose: kept as typed.
        assert_eq!(
            endpoint(&["--gateway", "ws://10.0.0.9:1"], false, Some("ws://x:2")).unwrap(),
            "ws://10.0.0.9:1"
        );
        assert!(
            endpoint(&["--gateway", "ws://h:1", "--host", "h"], false, None)
                .unwrap_err()
                .contains("both name the gateway")
        );
        assert!(
            endpoint(&["--gateway", "ws://h:1", "--tls"], false, None)
                .unwrap_err()
                .contains("both name the gateway")
        );
    }
}
