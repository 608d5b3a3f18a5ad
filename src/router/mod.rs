//! THE TOOL: `{agent?, message}` in, one `{content, directTTS, interruptMode}`
//! out (seed 002). Every outcome, including refusal, failure to start,
//! timeout and interruption, becomes a [`Reply`]; nothing here prints or
//! panics on bad input.

pub mod command;
mod gateway;
pub mod messages;
pub mod request;
pub mod result;
pub mod structured;

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use crate::runner::{self, End, Outcome, SpawnError};
use crate::shared::signals::Interrupt;
use command::{Launcher, Route};
use messages::Lang;
use request::{Request, RequestError};
use result::{Meta, Status, ToolResult};

/// How the router reaches OpenClaw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    /// Spawn `openclaw agent` (seed 002's way; works wherever the CLI does).
    Cli,
    /// One WebSocket turn with the gateway, as `openclaw agent` does inside.
    Gateway,
    /// The gateway when it answers, else the CLI; a turn the gateway
    /// accepted is never run again.
    Auto,
}

/// What `content` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Everything openclaw printed, in order (seed 002).
    Raw,
    /// The final answer only, plus `details` (from openclaw's `--json`).
    Structured,
}

/// Everything about a call that is not the call's own arguments.
#[derive(Debug, Clone)]
pub struct Options {
    pub via: Via,
    pub format: Format,
    /// The gateway and its shared token (`--via gateway|auto`).
    pub gateway: crate::gateway::Endpoint,
    pub token: Option<String>,
    /// This operator's device identity, for gateways away from loopback.
    pub operator_dir: Option<std::path::PathBuf>,
    /// Where a running turn's progress is shown (the spinner), if anywhere.
    pub activity: Option<crate::ui::Activity>,
    /// `--to` destination used when the call names no agent.
    pub default_to: Option<String>,
    /// `--session`.
    pub session: Session,
    pub timeout: Duration,
    pub grace: Duration,
    pub max_output: usize,
    /// `--openclaw` / `OPENCLAW_BIN`, as given (split later).
    pub openclaw: Option<String>,
    pub wsl: bool,
    pub wsl_distro: Option<String>,
    pub lang: Lang,
}

/// Which OpenClaw session a call runs in (`--session`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Session {
    /// The agent's own (`agent:<id>:main`): OpenClaw's default, nothing sent.
    Main,
    /// A session of its own for every call.
    New,
    /// A session the host names; bare keys are scoped to the agent.
    Key(String),
}

/// The longest session key taken.
const MAX_SESSION_KEY: usize = 256;

/// Why a `--session` value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionProblem {
    Empty,
    TooLong,
    NotPlain,
    Reserved(String),
    BadAgentKey,
}

impl SessionProblem {
    pub fn describe(&self, lang: Lang) -> String {
        use SessionProblem::*;
        match (lang, self) {
            (Lang::En, Empty) => "a session is main, new or a key".into(),
            (Lang::Zh, Empty) => "会话须为 main、new 或一个键".into(),
            (Lang::En, TooLong) => format!("a session key is at most {MAX_SESSION_KEY} characters"),
            (Lang::Zh, TooLong) => format!("会话键最多 {MAX_SESSION_KEY} 个字符"),
            (Lang::En, NotPlain) => "a session key is letters, digits and ._:@+- only".into(),
            (Lang::Zh, NotPlain) => "会话键只能由字母、数字和 ._:@+- 组成".into(),
            (Lang::En, Reserved(k)) => {
                format!("{k:?} is OpenClaw's shared {k} session, not a key of one's own")
            }
            (Lang::Zh, Reserved(k)) => {
                format!("{k:?} 是 OpenClaw 共用的 {k} 会话，不能作为自己的键")
            }
            (Lang::En, BadAgentKey) => "a whole key is agent:<agent>:<name>".into(),
            (Lang::Zh, BadAgentKey) => "完整的键须为 agent:<agent>:<名称>".into(),
        }
    }
}

impl Session {
    /// `main` and `new` in any case; a key as OpenClaw keeps it (lower
    /// case), plain words only (it may reach a shell on Windows), and a
    /// whole `agent:<id>:<name>` well formed.
    pub fn parse(text: &str) -> Result<Self, SessionProblem> {
        let key = text.trim().to_lowercase();
        match key.as_str() {
            "main" => return Ok(Session::Main),
            "new" => return Ok(Session::New),
            "" => return Err(SessionProblem::Empty),
            "global" | "unknown" => return Err(SessionProblem::Reserved(key)),
            _ => {}
        }
        if key.chars().count() > MAX_SESSION_KEY {
            return Err(SessionProblem::TooLong);
        }
        if !command::is_plain(&key) {
            return Err(SessionProblem::NotPlain);
        }
        if let Some(rest) = key.strip_prefix("agent:") {
            match rest.split_once(':') {
                Some((agent, name)) if !agent.is_empty() && !name.is_empty() => {}
                _ => return Err(SessionProblem::BadAgentKey),
            }
        }
        Ok(Session::Key(key))
    }

    /// The agent a whole key names (`agent:<id>:…`).
    pub fn agent(key: &str) -> Option<&str> {
        key.strip_prefix("agent:")?.split(':').next()
    }

    /// The key this call sends: none for `main`, a fresh one for `new`
    /// (OpenClaw scopes a bare key to the call's agent, on both paths).
    fn key_for_call(&self) -> Option<String> {
        match self {
            Session::Main => None,
            Session::New => Some(format!("clawbot-{}", uuid::Uuid::new_v4().simple())),
            Session::Key(key) => Some(key.clone()),
        }
    }
}

/// The finished call: the JSON to print (meta always filled in; the caller
/// drops it unless asked) and the outcome class.
#[derive(Debug)]
pub struct Reply {
    pub result: ToolResult,
    pub status: Status,
}

/// A reply for a call that never got as far as starting openclaw.
pub fn not_started(content: String, status: Status) -> Reply {
    Reply {
        result: with_meta(content, Meta::default()),
        status,
    }
}

/// A call that passed the checks every path makes.
struct Accepted {
    request: Request,
    route: Route,
    /// One key for the call, whichever path runs it (a gateway attempt and
    /// its CLI fallback are the same call).
    session: Option<String>,
    started: Instant,
}

impl Accepted {
    fn check(
        request: Result<Request, RequestError>,
        options: &Options,
    ) -> Result<Self, Box<Reply>> {
        let started = Instant::now();
        let request = request.map_err(|e| {
            Box::new(refuse(
                started,
                e.content(options.lang),
                Status::InvalidInput,
                None,
            ))
        })?;
        let route = Route::choose(request.agent.as_deref(), options.default_to.as_deref());
        let session = options.session.key_for_call();
        // A whole key names its agent; a call for another agent would be
        // refused by OpenClaw only after starting (and differently per path).
        if let (Route::Agent(agent), Some(named)) =
            (&route, session.as_deref().and_then(Session::agent))
            && agent.to_lowercase() != named
        {
            return Err(Box::new(refuse(
                started,
                messages::session_for_another_agent(options.lang, named, agent),
                Status::InvalidInput,
                None,
            )));
        }
        Ok(Self {
            request,
            route,
            session,
            started,
        })
    }
}

/// Runs one tool call through the openclaw CLI, whatever `options.via`
/// says: the small executable runs only such calls (it hands the others to
/// the full program), and this entry keeps the gateway client out of it.
pub async fn call_through_cli(
    request: Result<Request, RequestError>,
    options: &Options,
    cancel: impl Future<Output = Interrupt>,
) -> Reply {
    let call = match Accepted::check(request, options) {
        Ok(call) => call,
        Err(reply) => return *reply,
    };
    tokio::pin!(cancel);
    Box::pin(through_cli(
        &call.request.message,
        &call.route,
        call.session.as_deref(),
        options,
        call.started,
        cancel,
    ))
    .await
}

/// Runs one tool call end to end, on the path `options.via` names.
pub async fn call(
    request: Result<Request, RequestError>,
    options: &Options,
    cancel: impl Future<Output = Interrupt>,
) -> Reply {
    if options.via == Via::Cli {
        return call_through_cli(request, options, cancel).await;
    }
    let Accepted {
        request,
        route,
        session,
        started,
    } = match Accepted::check(request, options) {
        Ok(call) => call,
        Err(reply) => return *reply,
    };
    let session = session.as_deref();
    tokio::pin!(cancel);
    // Boxed: the two paths' state machines stay off the stack, which a
    // caller may have made small (`ulimit -s`, to shrink ARG_MAX).
    match Box::pin(gateway::call(
        &request.message,
        &route,
        session,
        options,
        started,
        cancel.as_mut(),
    ))
    .await
    {
        gateway::Attempt::Done(reply) => reply,
        gateway::Attempt::NotReached(not) if options.via == Via::Auto => {
            // Nothing ran on the gateway: the CLI gets what is left of the time.
            let left = options.timeout.saturating_sub(started.elapsed());
            if left < Duration::from_millis(100) {
                let mut reply = refuse(
                    started,
                    messages::timed_out(options.lang, &seconds(options.timeout)),
                    Status::TimedOut,
                    Some("gateway"),
                );
                if let Some(meta) = reply.result.meta.as_mut() {
                    meta.timed_out = true;
                }
                return reply;
            }
            let cli_options = Options {
                timeout: left,
                ..options.clone()
            };
            let mut reply = Box::pin(through_cli(
                &request.message,
                &route,
                session,
                &cli_options,
                started,
                cancel,
            ))
            .await;
            // Neither path could run it: both reasons, or the user fixes
            // the CLI only to meet the gateway's problem next.
            if matches!(reply.status, Status::CouldNotStart | Status::InvalidInput) {
                reply.result.content.push('\n');
                reply.result.content += &gateway_sentence(not, options);
            }
            reply
        }
        // Refused or unreachable: what `openclaw agent` exits with for the
        // same (1), not "could not start" — nothing was to be started.
        gateway::Attempt::NotReached(not) => refuse(
            started,
            gateway_sentence(not, options),
            Status::Failed(1),
            Some("gateway"),
        ),
    }
}

/// Why the gateway did not take the call: it refused us, or never answered.
fn gateway_sentence(not: gateway::NotReached, options: &Options) -> String {
    if not.refused {
        messages::gateway_refused(options.lang, &options.gateway.url, &not.why, not.token)
    } else {
        messages::gateway_unreachable(options.lang, &options.gateway.url, &not.why)
    }
}

/// A reply for a call that ended before reaching OpenClaw.
fn refuse(started: Instant, content: String, status: Status, via: Option<&'static str>) -> Reply {
    Reply {
        result: with_meta(
            content,
            Meta {
                duration_ms: started.elapsed().as_millis() as u64,
                via,
                ..Meta::default()
            },
        ),
        status,
    }
}

/// Seed 002's way: spawn `openclaw agent` and pass its output through.
async fn through_cli(
    message: &str,
    route: &Route,
    session: Option<&str>,
    options: &Options,
    started: Instant,
    mut cancel: std::pin::Pin<&mut impl Future<Output = Interrupt>>,
) -> Reply {
    let lang = options.lang;
    let launcher = match command::locate(
        options.openclaw.as_deref(),
        options.wsl,
        options.wsl_distro.as_deref(),
    ) {
        Ok(launcher) => launcher,
        // A command that cannot be split (an unbalanced quote) is a usage
        // error, like any bad flag: nothing could have been started.
        Err(e @ command::LocateError::Unparsable(_)) => {
            return refuse(
                started,
                messages::invalid_arguments(lang, &e),
                Status::InvalidInput,
                Some("cli"),
            );
        }
        Err(e) => {
            return refuse(
                started,
                messages::spawn_failed(lang, &e),
                Status::CouldNotStart,
                Some("cli"),
            );
        }
    };
    let mut interrupt = None;
    // The argv limit is per argument *and* for all arguments plus the
    // environment together; when the kernel still says E2BIG, the message
    // moves to a file and the spawn is tried once more.
    for through_file in [false, true] {
        let structured = options.format == Format::Structured;
        let invocation = match launcher.build(route, session, message, through_file, structured) {
            Ok(invocation) => invocation,
            Err(e) => {
                let reason = build_error(lang, &e);
                return refuse(
                    started,
                    messages::spawn_failed(lang, &reason),
                    Status::CouldNotStart,
                    Some("cli"),
                );
            }
        };
        let spec = runner::Spec {
            // openclaw agent needs the gateway's token and password we were
            // given: it gets them back; no other secret of ours (they left
            // our environment at start-up).
            env_remove: &[],
            env_filter: None,
            program: invocation.program.clone(),
            args: invocation.args.clone(),
            cwd: None,
            env: crate::shared::secrets::for_openclaw(),
            timeout: options.timeout,
            grace: options.grace,
            // The JSON answer must arrive whole to be read.
            max_output: if structured {
                options.max_output.max(structured::MAX_ANSWER)
            } else {
                options.max_output
            },
            // Structured: openclaw's JSON alone on stdout, its diagnostics
            // apart; a whole answer from a process that hangs is enough.
            split_stderr: structured,
            stop_after_json: structured.then_some(structured::is_answer as fn(&[u8]) -> bool),
            tap: None,
        };
        let outcome = runner::run(&spec, async {
            interrupt = Some(cancel.as_mut().await);
        })
        .await;
        let retry = !through_file
            && invocation.message_file.is_none()
            && matches!(&outcome, Err(e) if e.source.kind() == io::ErrorKind::ArgumentListTooLong);
        drop(invocation); // removes the message file, now that the tree is gone
        match outcome {
            Ok(outcome) if structured => return finish_structured(outcome, interrupt, options),
            Ok(outcome) => return finish(outcome, interrupt, options),
            Err(_) if retry => continue,
            Err(e) => {
                return refuse(
                    started,
                    messages::spawn_failed(lang, &spawn_reason(lang, &e, &launcher)),
                    Status::CouldNotStart,
                    Some("cli"),
                );
            }
        }
    }
    unreachable!("the second attempt always returns")
}

/// Turns a finished run into content: the raw output, plus the seed's line
/// for a timeout or an interruption.
fn finish(outcome: Outcome, interrupt: Option<Interrupt>, options: &Options) -> Reply {
    let lang = options.lang;
    let mut content = outcome
        .output
        .join(|dropped| messages::truncated(lang, dropped));
    let status = match (outcome.end, interrupt) {
        (End::TimedOut, _) => {
            push_line(
                &mut content,
                &messages::timed_out(lang, &seconds(options.timeout)),
            );
            Status::TimedOut
        }
        (End::Cancelled, Some(signal)) => {
            push_line(&mut content, &messages::interrupted(lang, signal.name));
            Status::Interrupted(signal.number)
        }
        (End::Cancelled, None) | (End::Exited | End::Completed, _) => {
            let status = match (outcome.exit_code(), outcome.signal()) {
                (Some(0), _) => Status::Success,
                (Some(code), _) => Status::Failed(code),
                (None, Some(signal)) => Status::Signalled(signal),
                (None, None) => Status::Failed(1),
            };
            if status != Status::Success && content.trim().is_empty() {
                let how = match status {
                    Status::Signalled(signal) => messages::killed_by(lang, signal),
                    _ => messages::exited_with(lang, outcome.exit_code().unwrap_or(1)),
                };
                push_line(&mut content, &messages::silent_failure(lang, &how));
            }
            status
        }
    };
    let meta = cli_meta(&outcome, None);
    Reply {
        result: with_meta(content, meta),
        status,
    }
}

/// `--format structured`: openclaw's JSON, cleaned; the router's sentence
/// when there is none.
fn finish_structured(outcome: Outcome, interrupt: Option<Interrupt>, options: &Options) -> Reply {
    let lang = options.lang;
    let stdout = outcome
        .output
        .join(|dropped| messages::truncated(lang, dropped));
    let diagnostics = outcome
        .stderr
        .as_ref()
        .map(|e| e.join(|dropped| messages::truncated(lang, dropped)))
        .unwrap_or_default();
    let (cleaned, status) = match (outcome.end, interrupt) {
        (End::TimedOut, _) => (
            structured::without_answer(
                "timeout",
                "timeout",
                messages::timed_out(lang, &seconds(options.timeout)),
            ),
            Status::TimedOut,
        ),
        (End::Cancelled, Some(signal)) => (
            structured::without_answer(
                "error",
                "interrupted",
                messages::interrupted(lang, signal.name),
            ),
            Status::Interrupted(signal.number),
        ),
        _ => match structured::find_json(&stdout) {
            Some(answer) => {
                let cleaned = structured::from_openclaw(&answer);
                let status = if cleaned.ok {
                    Status::Success
                } else {
                    Status::Failed(outcome.exit_code().filter(|c| *c != 0).unwrap_or(1))
                };
                (cleaned, status)
            }
            None => {
                let code = outcome.exit_code().unwrap_or(1);
                let said = [stdout.trim(), diagnostics.trim()]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n");
                let how = messages::exited_with(lang, code);
                let content = if said.is_empty() {
                    messages::silent_failure(lang, &how)
                } else {
                    said
                };
                (
                    structured::without_answer("error", "no_json", content),
                    Status::Failed(code.max(1)),
                )
            }
        },
    };
    let mut details = cleaned.details;
    if !diagnostics.trim().is_empty() {
        details["diagnostics"] = serde_json::Value::from(diagnostics.trim_end());
    }
    let meta = cli_meta(&outcome, details["runId"].as_str().map(str::to_owned));
    let mut result = with_meta(cleaned.content, meta);
    result.details = Some(details);
    Reply { result, status }
}

/// `meta` for a run of the CLI.
fn cli_meta(outcome: &Outcome, run_id: Option<String>) -> Meta {
    Meta {
        exit_code: outcome.exit_code(),
        signal: outcome.signal(),
        timed_out: outcome.end == End::TimedOut,
        truncated: outcome.output.truncated(),
        duration_ms: outcome.duration.as_millis() as u64,
        via: Some("cli"),
        run_id,
    }
}

fn with_meta(content: String, meta: Meta) -> ToolResult {
    ToolResult {
        meta: Some(meta),
        ..ToolResult::new(content)
    }
}

/// Appends `line` after the captured output, on a line of its own.
fn push_line(content: &mut String, line: &str) {
    if !content.is_empty() && !content.ends_with('\n') {
        content.push('\n');
    }
    content.push_str(line);
}

/// `60` for whole seconds, `1.5` otherwise.
fn seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        d.as_secs().to_string()
    } else {
        let text = format!("{:.3}", d.as_secs_f64());
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

fn spawn_reason(lang: Lang, e: &SpawnError, launcher: &Launcher) -> String {
    let program = e.program.to_string_lossy();
    let via_wsl = launcher.wsl.is_some();
    match (e.source.kind(), lang) {
        (io::ErrorKind::NotFound, Lang::Zh) if via_wsl => {
            format!("找不到 {program}，本机似乎没有安装 WSL")
        }
        (io::ErrorKind::NotFound, Lang::En) if via_wsl => {
            format!("{program} not found; WSL does not seem to be installed")
        }
        (io::ErrorKind::NotFound, Lang::Zh) => format!("找不到程序 {program}"),
        (io::ErrorKind::NotFound, Lang::En) => format!("program not found: {program}"),
        (io::ErrorKind::PermissionDenied, Lang::Zh) => format!("没有权限执行 {program}"),
        (io::ErrorKind::PermissionDenied, Lang::En) => {
            format!("permission denied: {program} is not executable")
        }
        (_, Lang::Zh) => format!("启动 {program} 出错（系统原文：“{}”）", e.source),
        (_, Lang::En) => format!("error spawning {program}: {}", e.source),
    }
}

fn build_error(lang: Lang, e: &command::BuildError) -> String {
    use command::BuildError::*;
    match (lang, e) {
        (Lang::Zh, MessageFile(e)) => format!("无法写入临时消息文件（系统原文：“{e}”）"),
        (Lang::Zh, NotPlain { arg, program }) => format!(
            "{arg:?} 含有 cmd.exe 或 PowerShell 会解释的字符，而 openclaw 在此经由 {program} 启动（只允许字母、数字和 ._:+@-）；请改用这样的名称，或用 --openclaw 直接指向 node 与 openclaw 的脚本"
        ),
        (Lang::En, NotPlain { .. }) => {
            format!("{e}; use such a name, or point --openclaw at node and openclaw's script")
        }
        (Lang::En, MessageFile(_)) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_values_are_checked_as_openclaw_keeps_keys() {
        assert_eq!(Session::parse(" Main "), Ok(Session::Main));
        assert_eq!(Session::parse("NEW"), Ok(Session::New));
        assert_eq!(
            Session::parse("Support-42"),
            Ok(Session::Key("support-42".into()))
        );
        assert_eq!(
            Session::parse("agent:ops:x.y"),
            Ok(Session::Key("agent:ops:x.y".into()))
        );
        for (bad, why) in [
            ("", SessionProblem::Empty),
            ("a b", SessionProblem::NotPlain),
            ("x&calc", SessionProblem::NotPlain),
            ("%PATH%", SessionProblem::NotPlain),
            ("global", SessionProblem::Reserved("global".into())),
            ("agent:", SessionProblem::BadAgentKey),
            ("agent:main", SessionProblem::BadAgentKey),
            ("agent::x", SessionProblem::BadAgentKey),
        ] {
            assert_eq!(Session::parse(bad), Err(why), "{bad:?}");
        }
        assert_eq!(
            Session::parse(&"k".repeat(257)),
            Err(SessionProblem::TooLong)
        );
        assert_eq!(Session::agent("agent:ops:x"), Some("ops"));
        assert_eq!(Session::agent("support"), None);
    }

    #[test]
    fn seconds_are_printed_plainly() {
        assert_eq!(seconds(Duration::from_secs(60)), "60");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5");
        assert_eq!(seconds(Duration::from_millis(250)), "0.25");
    }

    #[test]
    fn lines_are_appended_on_their_own_line() {
        let mut s = String::from("partial");
        push_line(&mut s, "[x]");
        assert_eq!(s, "partial\n[x]");
        let mut s = String::new();
        push_line(&mut s, "[x]");
        assert_eq!(s, "[x]");
    }
}
