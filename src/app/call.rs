//! A router call: its options from the flags, `--args-json -` from stdin,
//! and a command line clap refuses answered as the tool's JSON (with a
//! secret flag's value redacted from the echo).

use std::ffi::OsString;
use std::future::Future;
use std::io::IsTerminal;
use std::pin::Pin;

use clap::Parser;
use clap::error::ErrorKind;

use super::print_json;
use crate::cli::{CallArgs, CallOptions};
use crate::router;
use crate::router::messages::{self, Lang};
use crate::router::request::{self, RequestError, StdinProblem};
use crate::router::result::Status;
#[cfg(unix)]
use crate::shared::log::tell;
use crate::shared::signals::{Interrupt, interrupts};
use crate::{gateway, ui};

pub(super) const MAX_STDIN_ARGS: u64 = 64 * 1024 * 1024;

/// The call the small executable runs itself: a well-formed router call
/// through the openclaw CLI. Anything else (`None`) is the full program's,
/// which also answers a malformed call with its JSON.
pub fn cli_call(args: &[OsString]) -> Option<CallArgs> {
    well_formed_call(args).filter(|call| call.options.via == router::Via::Cli)
}

/// A router call the call-only parser takes (the full parser, which builds
/// every mode's arguments, is for everything else and for errors).
pub(super) fn well_formed_call(args: &[OsString]) -> Option<CallArgs> {
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
/// says so on stderr, with the shell's "cannot run" status. (Unix: on
/// Windows the small executable runs everything itself.)
#[cfg(unix)]
pub fn not_handed_over(args: &[OsString], problem: &str) -> u8 {
    if !is_a_call(args) {
        tell("", problem);
        return 127;
    }
    let words = words_after_program(args);
    let lang = lang_from_words(&words);
    // The Chinese sentence cannot quote the English reason: it goes to
    // stderr, for whoever installed the two executables.
    if lang == Lang::Zh {
        tell("", problem);
    }
    let content = messages::cannot_hand_over(lang, problem);
    answer_unparsed(router::not_started(content, Status::CouldNotStart), &words)
}

/// Whether the command line starts as a router call does: options, and
/// not the ones that print help or the version. A look at one word, not
/// clap: it runs before any parser, so that the small executable decides
/// what to hand over without building one, and on lines clap refused.
pub(super) fn is_a_call(args: &[OsString]) -> bool {
    args.get(1).and_then(|a| a.to_str()).is_some_and(|first| {
        first.starts_with('-') && !matches!(first, "-h" | "--help" | "-V" | "--version")
    })
}

/// The command line's words after the program name, as text, for the
/// paths that read it after clap refused it (its `--lang`, `--meta`,
/// `--exit-code`, secrets to redact): no matches exist then to ask.
pub(super) fn words_after_program(args: &[OsString]) -> Vec<String> {
    args.iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// The router's options from the command line.
pub(super) fn call_options(args: &CallOptions, activity: Option<ui::Activity>) -> router::Options {
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
                .unwrap_or_else(crate::shared::paths::default_state_dir)
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

pub(super) fn any_path<'a>(
    request: Result<request::Request, RequestError>,
    options: &'a router::Options,
    cancel: Pin<Box<dyn Future<Output = Interrupt>>>,
) -> Pin<Box<dyn Future<Output = router::Reply> + 'a>> {
    Box::pin(router::call(request, options, cancel))
}

pub(super) fn cli_path<'a>(
    request: Result<request::Request, RequestError>,
    options: &'a router::Options,
    cancel: Pin<Box<dyn Future<Output = Interrupt>>>,
) -> Pin<Box<dyn Future<Output = router::Reply> + 'a>> {
    Box::pin(router::call_through_cli(request, options, cancel))
}

pub(super) async fn router_call(args: CallArgs, caller: Caller) -> u8 {
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
    let spinner = request
        .is_ok()
        .then(|| ui::Spinner::start(messages::announce(lang)))
        .flatten();
    let options = call_options(&args.options, spinner.as_ref().map(ui::Spinner::activity));
    let reply = caller(request, &options, interrupted).await;
    if let Some(spinner) = spinner {
        spinner.stop();
    }
    finish(reply, &args)
}

/// Prints the one JSON object and picks the exit status.
pub(super) fn finish(mut reply: router::Reply, args: &CallArgs) -> u8 {
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

/// Help and version print as usual; every subcommand's bad line is a usage
/// error (clap's message on stderr, status 2: a script or a service manager
/// must not see success); only a bad router call answers with the JSON
/// object, which the seed requires of every call.
pub(super) fn clap_error(e: clap::Error, args: &[OsString]) -> u8 {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return 0;
    }
    let words = words_after_program(args);
    // Not a router call (a subcommand, or a first word that is no option):
    // a usage error as every CLI gives it. The one predicate the small
    // executable also hands over by.
    if !is_a_call(args) {
        eprint!("{}", redact(&e.render().to_string(), &words));
        return u8::try_from(e.exit_code()).unwrap_or(2);
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
            // It reaches the host LLM, and a transcript: no secret in it.
            RequestError::CommandLine(redact(&detail, &words)).content(lang)
        }
    };
    answer_unparsed(router::not_started(content, Status::InvalidInput), &words)
}

/// Prints a call's answer when its command line could not be parsed:
/// `--meta` and `--exit-code` as far as its words say.
pub(super) fn answer_unparsed(mut reply: router::Reply, words: &[String]) -> u8 {
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
pub(super) fn own_value_problem(e: &clap::Error, lang: Lang) -> Option<String> {
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
pub(super) fn redact(text: &str, words: &[String]) -> String {
    let mut secrets: Vec<&str> = crate::shared::secrets::secret_spans(words)
        .into_iter()
        .filter_map(|(i, range)| words[i].get(range))
        .collect();
    // A long token-like word is taken for a secret too (a key pasted in
    // the wrong place).
    secrets.extend(
        words
            .iter()
            .filter(|w| {
                w.len() >= 24
                    && w.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
            .map(String::as_str),
    );
    let mut text = text.to_owned();
    for secret in secrets.into_iter().filter(|s| s.len() >= 4) {
        text = text.replace(secret, "<redacted>");
    }
    text
}

/// `--lang` as far as it can be read from a command line clap refused.
pub(super) fn lang_from_words(words: &[String]) -> Lang {
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
pub(super) async fn read_stdin(limit: std::time::Duration) -> Result<String, RequestError> {
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
