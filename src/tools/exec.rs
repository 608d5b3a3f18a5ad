//! Running programs for a remote agent: OpenClaw's own `system.run`,
//! `system.run.prepare` and `system.which`, and the seed's `run_command` —
//! all through the one process runner (tree kill, timeout, byte caps).
//!
//! The program is resolved to an absolute path *before* approval and that
//! path is what runs, from the node's own `PATH` (a call cannot set one).
//! What the approval covers — the programs and scripts the command line
//! runs, its directory, its variables — is bound when the call is shown
//! and checked again just before the program starts ([`super::binding`]).
//! The variables a call may set, and those its command never inherits,
//! are OpenClaw's node-host policy ([`super::environment`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::ToolError;
use super::binding::{Binding, Drift};
use super::policy::{Call, Exec, Risk};
use crate::runner::{self, End, Outcome};

/// Time between SIGTERM and SIGKILL for agent commands.
const GRACE: Duration = Duration::from_secs(2);

/// A program run, parsed and resolved, not yet approved.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecRequest {
    pub argv: Vec<String>,
    pub executable: PathBuf,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// Variables the call asked for and did not get (a shell wrapper gets
    /// only the terminal's and the locale's).
    pub stripped: Vec<String>,
    /// Every variable the call asked for: what its approver was shown.
    pub requested: Vec<(String, String)>,
    /// What its approval covers, as things stood when it was resolved.
    pub binding: Binding,
    pub timeout: Duration,
    /// The agent the gateway runs it for (`system.run`'s `agentId`): whose
    /// allowlist in the exec-approvals document applies.
    pub agent: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SystemRun {
    command: Vec<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    agent_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum CommandLine {
    Argv(Vec<String>),
    Text(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunCommand {
    command: CommandLine,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    cwd: Option<String>,
}

/// `system.run {command: argv, cwd?, env?, timeoutMs?}`.
pub fn parse_system_run(
    params: Value,
    workspace: &Path,
    limit: Duration,
) -> Result<ExecRequest, ToolError> {
    let p: SystemRun = serde_json::from_value(params).map_err(invalid)?;
    let timeout = p
        .timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(limit)
        .min(limit);
    let mut request = resolve(
        p.command,
        p.cwd,
        p.env.unwrap_or_default(),
        workspace,
        timeout,
    )?;
    request.agent = p.agent_id.filter(|a| !a.trim().is_empty());
    Ok(request)
}

/// `run_command {command, args?, cwd?}`: `command` is an argv array, a
/// program with `args`, or — alone — a shell command line run by `sh -c`.
pub fn parse_run_command(
    params: Value,
    workspace: &Path,
    limit: Duration,
) -> Result<ExecRequest, ToolError> {
    let p: RunCommand = serde_json::from_value(params).map_err(invalid)?;
    let argv = match (p.command, p.args) {
        (CommandLine::Argv(argv), None) => argv,
        (CommandLine::Argv(mut argv), Some(args)) => {
            argv.extend(args);
            argv
        }
        (CommandLine::Text(program), Some(args)) => std::iter::once(program).chain(args).collect(),
        (CommandLine::Text(line), None) => shell(line),
    };
    resolve(argv, p.cwd, Default::default(), workspace, limit)
}

#[cfg(unix)]
fn shell(line: String) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), line]
}

#[cfg(not(unix))]
fn shell(line: String) -> Vec<String> {
    vec!["cmd.exe".into(), "/C".into(), line]
}

fn resolve(
    argv: Vec<String>,
    cwd: Option<String>,
    env: std::collections::BTreeMap<String, String>,
    workspace: &Path,
    timeout: Duration,
) -> Result<ExecRequest, ToolError> {
    let Some(program) = argv.first().filter(|p| !p.trim().is_empty()) else {
        return Err(ToolError::new(
            "INVALID_PARAMS",
            "command must name a program",
        ));
    };
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(ToolError::new(
            "INVALID_PARAMS",
            "arguments cannot contain NUL bytes",
        ));
    }
    let cwd = working_directory(cwd, workspace)?;
    let overrides = super::environment::overrides(&env, runs_a_shell_script(&argv))?;
    let executable = which::which_in(program, std::env::var_os("PATH"), &cwd)
        .map_err(|_| ToolError::new("NOT_FOUND", format!("program not found: {program}")))?;
    let mut request = ExecRequest {
        argv,
        executable,
        cwd,
        env: overrides.kept,
        stripped: overrides.dropped,
        requested: requested(env),
        binding: Binding::default(),
        timeout,
        agent: None,
    };
    request.binding = Binding::of(&request.exec(), &request.requested);
    Ok(request)
}

/// Every variable a call asked for, by its trimmed name.
fn requested(env: std::collections::BTreeMap<String, String>) -> Vec<(String, String)> {
    env.into_iter()
        .map(|(k, v)| (k.trim().to_owned(), v))
        .collect()
}

/// Where a call runs: the workspace, or a directory relative to it (an
/// absolute one replaces it), by its real path — what the plan shows and
/// the binding holds to.
fn working_directory(cwd: Option<String>, workspace: &Path) -> Result<PathBuf, ToolError> {
    let dir = match cwd.filter(|c| !c.trim().is_empty()) {
        None => return Ok(workspace.to_path_buf()),
        Some(dir) => workspace.join(dir),
    };
    match std::fs::canonicalize(&dir) {
        Ok(real) if real.is_dir() => Ok(real),
        _ => Err(ToolError::new(
            "INVALID_PARAMS",
            format!("cwd {} is not a directory", dir.display()),
        )),
    }
}

/// Whether a command line hands a shell its script (`sh -c`, `cmd /c`,
/// `pwsh -Command`, behind `env` or `nice` too): such a shell reads any
/// variable as code, so it gets only the terminal's and the locale's.
fn runs_a_shell_script(argv: &[String]) -> bool {
    (0..argv.len()).any(|at| {
        super::cmdline::is_shell(&argv[at])
            && argv[at + 1..]
                .iter()
                .take_while(|a| a.starts_with('-') && *a != "--")
                .any(|a| !a.starts_with("--") && a.contains('c'))
    }) || shell_payload(argv).is_some()
}

impl ExecRequest {
    /// The run as the policy reads it.
    fn exec(&self) -> Exec {
        Exec {
            executable: self.executable.clone(),
            argv: self.argv.clone(),
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            bound: None,
        }
    }

    /// The call as the policy and the user see it.
    pub fn call(&self, command: &str) -> Call {
        let env: String = self
            .env
            .iter()
            .map(|(k, v)| format!(" {k}={}", shell_words::quote(v)))
            .collect();
        Call {
            command: command.to_owned(),
            risk: Risk::Risky,
            summary: format!(
                "{command}: {}  (in {}{}{env})",
                shell_words::join(&self.argv),
                self.cwd.display(),
                if env.is_empty() { "" } else { ", with" },
            ),
            agent: self.agent.clone(),
            upstream: false,
            one_shot: self.binding.runs_a_script(),
            exec: Some(Exec {
                bound: Some(self.binding.digest()),
                ..self.exec()
            }),
        }
    }

    /// Runs it; stdout and stderr are captured apart, each within
    /// `max_output` bytes; `tap`, if given, gets a live copy of both.
    pub async fn run(
        &self,
        max_output: usize,
        cancel: impl std::future::Future<Output = ()>,
        tap: Option<runner::Tap>,
    ) -> Result<Value, ToolError> {
        // What was approved is what starts: the files, the directory and
        // the variables, checked once more at the last moment — on the
        // blocking pool, as binding reads the filesystem (and hashes
        // scripts) and this is the node's one thread.
        let (exec, requested) = (self.exec(), self.requested.clone());
        let now = tokio::task::spawn_blocking(move || Binding::of(&exec, &requested))
            .await
            .map_err(|e| ToolError::new("IO_ERROR", format!("the approval check failed: {e}")))?;
        self.binding.check(&now).map_err(|drift| drift.error())?;
        let spec = runner::Spec {
            // An agent's command gets none of our credentials, and none of
            // the node's own that OpenClaw keeps from its commands.
            env_remove: crate::tools::SECRET_VARS,
            env_filter: Some(super::environment::blocked_inherited),
            program: self.executable.clone().into(),
            args: self.argv.iter().skip(1).map(OsString::from).collect(),
            cwd: Some(self.cwd.clone()),
            env: self.env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            timeout: self.timeout,
            grace: GRACE,
            max_output,
            split_stderr: true,
            stop_after_json: None,
            tap,
        };
        match runner::run(&spec, cancel).await {
            Ok(outcome) if outcome.end == End::Cancelled => Err(ToolError::new(
                "CANCELLED",
                "the invocation was cancelled and its process tree stopped",
            )),
            Ok(outcome) => Ok(self.result(&outcome)),
            Err(e) => Ok(json!({
                "exitCode": null, "timedOut": false, "success": false,
                "stdout": "", "stderr": "", "error": format!("{}: {}", e, e.source),
            })),
        }
    }

    fn result(&self, outcome: &Outcome) -> Value {
        let marker = |n: u64| format!("[clawbot_router] ... {n} bytes omitted ...");
        let stderr = outcome.stderr.as_ref();
        let truncated = outcome.output.truncated() || stderr.is_some_and(|s| s.truncated());
        let timed_out = outcome.end == End::TimedOut;
        let mut result = json!({
            "exitCode": outcome.exit_code(),
            "signal": outcome.signal(),
            "timedOut": timed_out,
            "success": outcome.exit_code() == Some(0) && !timed_out,
            "stdout": outcome.output.join(marker),
            "stderr": stderr.map(|s| s.join(marker)).unwrap_or_default(),
            "error": timed_out.then(|| format!("timed out after {} ms", self.timeout.as_millis())),
            "truncated": truncated,
        });
        if !self.stripped.is_empty() {
            result["strippedEnv"] = json!(self.stripped);
        }
        result
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Prepare {
    command: Vec<String>,
    #[serde(default)]
    security: Option<String>,
    #[serde(default)]
    ask: Option<String>,
    #[serde(default)]
    raw_command: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    session_key: Option<String>,
}

/// `system.run.prepare`: the plan OpenClaw shows and then hands back to
/// `system.run`, and what an approval of it binds. Nothing runs here.
pub fn prepare(
    params: Value,
    workspace: &Path,
    stance: super::policy::Stance,
    rules: Vec<Value>,
) -> Result<(Value, Binding), ToolError> {
    let p: Prepare = serde_json::from_value(params).map_err(invalid)?;
    if p.command.first().is_none_or(|c| c.trim().is_empty()) {
        return Err(ToolError::new(
            "INVALID_PARAMS",
            "command must name a program",
        ));
    }
    let cwd = working_directory(p.cwd, workspace)?;
    // Variables it may not set are refused now, before anyone is asked.
    let env = p.env.unwrap_or_default();
    let overrides = super::environment::overrides(&env, runs_a_shell_script(&p.command))?;
    let text = format_exec_command(&p.command);
    // What the operator is shown must be what runs: the caller's
    // `rawCommand` is taken only when it is the argv's own text or the
    // script of a shell wrapper, as OpenClaw's node host checks it.
    let preview = shell_payload(&p.command).map(str::trim);
    if let Some(raw) = p
        .raw_command
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        && raw != text
        && Some(raw) != preview
    {
        return Err(ToolError::new(
            "INVALID_REQUEST",
            "rawCommand does not match command",
        ));
    }
    let preview = preview.filter(|p| *p != text).map(str::to_owned);
    // The stricter of the gateway's policy (sent here) and this node's, as
    // OpenClaw's node host combines them: a node that asks through the
    // gateway says allowlist/on-miss, so the gateway raises an approval for
    // what its allowlist does not cover before sending system.run.
    let security = p.security.unwrap_or_else(|| "full".into());
    let ask = p.ask.unwrap_or_else(|| "off".into());
    let rank = |v: &str, order: &[&str]| order.iter().position(|o| *o == v).unwrap_or(0);
    const SECURITY: &[&str] = &["deny", "allowlist", "full"];
    const ASK: &[&str] = &["off", "on-miss", "always"];
    let (mine_security, mine_ask) = match stance {
        super::policy::Stance::Open => ("full", "off"),
        super::policy::Stance::Approvals => ("allowlist", "on-miss"),
        super::policy::Stance::Closed => ("deny", "off"),
    };
    let security =
        SECURITY[rank(&security, SECURITY).min(rank(mine_security, SECURITY))].to_owned();
    let ask = ASK[rank(&ask, ASK).max(rank(mine_ask, ASK))].to_owned();
    let coverage = if security == "allowlist" {
        super::approvals::coverage(&p.command, &cwd)
    } else {
        json!({ "complete": false, "patterns": [] })
    };
    let exec = Exec {
        executable: which::which_in(&p.command[0], std::env::var_os("PATH"), &cwd)
            .unwrap_or_else(|_| PathBuf::from(&p.command[0])),
        argv: p.command.clone(),
        cwd: cwd.clone(),
        env: overrides.kept,
        bound: None,
    };
    let binding = Binding::of(&exec, &requested(env));
    if let Some(why) = binding.unbindable() {
        return Err(Drift::Unbindable {
            why: why.to_owned(),
        }
        .error());
    }
    let mut plan = json!({
        "argv": p.command,
        "cwd": cwd,
        "commandText": text,
        "commandPreview": preview,
        "agentId": p.agent_id,
        "sessionKey": p.session_key,
        "policySnapshot": {
            "security": security, "ask": ask, "askFallback": "deny",
            "autoAllowSkills": false, "allowlistRules": rules,
        },
    });
    // The script it runs, as OpenClaw's plans show it to the gateway.
    if let Some(operand) = binding.operand(&exec.argv) {
        plan["mutableFileOperand"] = operand;
    }
    Ok((
        json!({
            "plan": plan,
            "execPolicy": { "security": security, "ask": ask },
            "allowAlwaysCoverage": coverage,
        }),
        binding,
    ))
}

/// The script of a shell wrapper, as OpenClaw shows it for a preview:
/// `sh|bash|dash|zsh|ksh [-opts] -c|-lc SCRIPT` (what its exec tool sends
/// a Unix node), `cmd.exe [/d /s …] /c SCRIPT` (a Windows node) and
/// `powershell|pwsh [-opts] -Command SCRIPT`.
pub(crate) fn shell_payload(argv: &[String]) -> Option<&str> {
    let (script, head) = argv.split_last()?;
    let (flag, head) = head.split_last()?;
    let (program, options) = head.split_first()?;
    let name = program.rsplit(['/', '\\']).next()?.to_ascii_lowercase();
    let name = name.strip_suffix(".exe").unwrap_or(&name);
    let flag = flag.to_ascii_lowercase();
    let wrapper = match name {
        "sh" | "bash" | "dash" | "zsh" | "ksh" => {
            matches!(flag.as_str(), "-c" | "-lc") && options.iter().all(|o| o.starts_with('-'))
        }
        "cmd" => flag == "/c" && options.iter().all(|o| o.starts_with('/')),
        "powershell" | "pwsh" => {
            matches!(flag.as_str(), "-command" | "-c") && options.iter().all(|o| o.starts_with('-'))
        }
        _ => false,
    };
    wrapper.then_some(script.as_str())
}

/// OpenClaw's own rendering of an argv (`formatExecCommand`): the gateway
/// checks that `system.run`'s `rawCommand` equals it, so the plan's
/// `commandText` must be written exactly this way — an argument is quoted
/// with `"` only when it is empty or holds whitespace or a `"`.
pub fn format_exec_command(argv: &[String]) -> String {
    // JavaScript's \s: Unicode White_Space without U+0085, plus U+FEFF.
    let js_space = |c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}';
    argv.iter()
        .map(|arg| {
            if arg.is_empty() {
                "\"\"".to_owned()
            } else if !arg.chars().any(|c| js_space(c) || c == '"') {
                arg.clone()
            } else {
                format!("\"{}\"", arg.replace('"', "\\\""))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Names one `system.which` looks up at most.
const MAX_WHICH: usize = 256;

#[derive(Deserialize)]
struct Which {
    bins: Vec<String>,
}

/// `system.which {bins}` → `{bins: {name: path}}` for the names found.
pub fn which(params: Value) -> Result<Value, ToolError> {
    let p: Which = serde_json::from_value(params).map_err(invalid)?;
    if p.bins.len() > MAX_WHICH {
        return Err(ToolError::new(
            "INVALID_PARAMS",
            format!("at most {MAX_WHICH} names per call"),
        ));
    }
    let found: serde_json::Map<String, Value> = p
        .bins
        .into_iter()
        .filter_map(|bin| {
            let path = which::which(&bin).ok()?;
            Some((bin, Value::from(path.to_string_lossy().into_owned())))
        })
        .collect();
    Ok(json!({ "bins": found }))
}

fn invalid(e: serde_json::Error) -> ToolError {
    ToolError::new("INVALID_PARAMS", e.to_string())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn run_command_forms() {
        let ws = Path::new("/tmp");
        let argv = |v: Value| parse_run_command(v, ws, MINUTE).unwrap().argv;
        assert_eq!(argv(json!({"command": ["ls", "-la"]})), ["ls", "-la"]);
        assert_eq!(
            argv(json!({"command": "ls", "args": ["-la"]})),
            ["ls", "-la"]
        );
        assert_eq!(
            argv(json!({"command": "ls | wc -l"})),
            ["/bin/sh", "-c", "ls | wc -l"]
        );
    }

    #[test]
    fn variables_that_change_what_runs_refuse_the_call_and_a_shell_gets_only_the_locale() {
        let refused = parse_system_run(
            json!({"command": ["env"], "env": {"LD_PRELOAD": "/x.so", "PATH": "/tmp", "GREETING": "hi"}}),
            Path::new("/tmp"),
            MINUTE,
        )
        .unwrap_err();
        assert_eq!(refused.code, "INVALID_REQUEST");
        assert!(
            refused
                .message
                .contains("blocked override keys: LD_PRELOAD, PATH"),
            "{}",
            refused.message
        );
        let req = parse_system_run(
            json!({"command": ["/bin/sh", "-lc", "env"], "env": {"GREETING": "hi", "LANG": "C"}}),
            Path::new("/tmp"),
            MINUTE,
        )
        .unwrap();
        assert_eq!(req.env, [("LANG".to_string(), "C".to_string())]);
        assert_eq!(req.stripped, ["GREETING"]);
        // What the approver saw is every variable asked for.
        assert_eq!(req.requested.len(), 2);
    }

    #[test]
    fn names_that_are_one_name_once_trimmed_are_refused() {
        // `FOO` and `FOO ` both set FOO, the later one winning: an
        // approval of {FOO: a, "FOO ": b} (FOO=b) had the fingerprint of
        // {FOO: b, "FOO ": a} (FOO=a), so the other value ran approved.
        for env in [
            json!({"FOO": "a", "FOO ": "b"}),
            json!({" FOO": "a", "FOO\t": "b"}),
        ] {
            let refused = parse_system_run(
                json!({"command": ["printenv", "FOO"], "env": env}),
                Path::new("/tmp"),
                MINUTE,
            )
            .unwrap_err();
            assert_eq!(refused.code, "INVALID_REQUEST", "{env}");
            assert!(refused.message.contains("FOO"), "{}", refused.message);
        }
    }

    /// The last check and the interpreter opening its script are
    /// milliseconds apart (the spawn, then the interpreter's start-up): a
    /// script swapped in then runs approved. Here a swap is timed every
    /// 0.1 ms from 0 to 12 ms after the run begins.
    #[tokio::test(flavor = "multi_thread")]
    #[ignore = "finding: a script swapped between the last check and the interpreter's open runs (measured: 21-24 of 120 timed swaps, 0.4-6 ms after the run began); fix: hand the interpreter the checked file by descriptor (/dev/fd/N), fexecve the program"]
    async fn a_script_swapped_after_the_last_check_does_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        let mut swapped_in = Vec::new();
        for step in 0..120u64 {
            let delay = Duration::from_micros(step * 100);
            std::fs::write(d.join("job.sh"), "echo approved\n").unwrap();
            std::fs::write(d.join("other"), "echo swapped\n").unwrap();
            let req = parse_system_run(
                json!({"command": ["sh", "job.sh"], "cwd": d.to_str().unwrap()}),
                Path::new("/tmp"),
                MINUTE,
            )
            .unwrap();
            let (from, to) = (d.join("other"), d.join("job.sh"));
            let started = std::time::Instant::now();
            let swap = std::thread::spawn(move || {
                while started.elapsed() < delay {}
                std::fs::rename(from, to).unwrap();
            });
            let out = req.run(1024, std::future::pending(), None).await;
            swap.join().unwrap();
            if out.is_ok_and(|v| v["stdout"] == "swapped\n") {
                swapped_in.push(step * 100);
            }
        }
        assert!(swapped_in.is_empty(), "swapped in at {swapped_in:?} µs");
    }

    #[test]
    fn the_program_is_resolved_before_approval() {
        let req = parse_system_run(
            json!({"command": ["sh", "-c", "true"]}),
            Path::new("/tmp"),
            MINUTE,
        )
        .unwrap();
        assert!(req.executable.is_absolute());
        let call = req.call("system.run");
        assert_eq!(call.exec.unwrap().executable, req.executable);
        let missing = parse_system_run(
            json!({"command": ["no-such-program-xyz"]}),
            Path::new("/tmp"),
            MINUTE,
        );
        assert_eq!(missing.unwrap_err().code, "NOT_FOUND");
    }

    #[test]
    fn the_call_timeout_never_exceeds_the_invoke_timeout() {
        let req = parse_system_run(
            json!({"command": ["true"], "timeoutMs": 999_999}),
            Path::new("/tmp"),
            MINUTE,
        )
        .unwrap();
        assert_eq!(req.timeout, MINUTE);
    }

    #[tokio::test]
    async fn system_run_result_has_the_real_shape() {
        let req = parse_system_run(
            json!({"command": ["/bin/sh", "-c", "echo hello-from-node; echo oops >&2; exit 3"], "env": {"GREETING": "x"}}),
            Path::new("/tmp"),
            MINUTE,
        )
        .unwrap();
        let result = req.run(1024, std::future::pending(), None).await.unwrap();
        assert_eq!(result["exitCode"], 3);
        assert_eq!(result["success"], false);
        assert_eq!(result["timedOut"], false);
        assert_eq!(result["stdout"], "hello-from-node\n");
        assert_eq!(result["stderr"], "oops\n");
        assert_eq!(result["error"], Value::Null);
        assert_eq!(result["strippedEnv"], json!(["GREETING"]));
    }

    #[test]
    fn which_reports_only_what_exists() {
        let result = which(json!({"bins": ["sh", "nonexistentbin"]})).unwrap();
        assert!(result["bins"]["sh"].as_str().unwrap().ends_with("/sh"));
        assert!(result["bins"].get("nonexistentbin").is_none());
    }

    #[test]
    fn command_text_is_rendered_as_openclaw_renders_it() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // from frames/openclaw-node-host-first-connect.jsonl
        assert_eq!(
            format_exec_command(&argv(&["/bin/sh", "-lc", "echo hello-from-node; uname -s"])),
            r#"/bin/sh -lc "echo hello-from-node; uname -s""#
        );
        assert_eq!(
            format_exec_command(&argv(&["echo", "", r#"say "hi""#, "a'b"])),
            r#"echo "" "say \"hi\"" a'b"#
        );
    }

    #[test]
    fn prepare_returns_a_plan() {
        let plan = prepare(
            json!({"command": ["/bin/sh", "-lc", "echo hi"], "rawCommand": "echo hi", "agentId": "main", "sessionKey": "k"}),
            Path::new("/work"),
            super::super::policy::Stance::Open,
            vec![],
        )
        .unwrap().0;
        assert_eq!(plan["plan"]["argv"], json!(["/bin/sh", "-lc", "echo hi"]));
        assert_eq!(plan["plan"]["cwd"], "/work");
        assert_eq!(plan["plan"]["commandPreview"], "echo hi");
        // A preview that is not what runs is refused; none is made up.
        let lie = prepare(
            json!({"command": ["/bin/sh", "-lc", "rm -rf ~/work"], "rawCommand": "ls"}),
            Path::new("/work"),
            super::super::policy::Stance::Open,
            vec![],
        )
        .unwrap_err();
        assert_eq!(lie.message, "rawCommand does not match command");
        let plain = prepare(
            json!({"command": ["uname", "-s"], "rawCommand": "uname -s"}),
            Path::new("/work"),
            super::super::policy::Stance::Open,
            vec![],
        )
        .unwrap()
        .0;
        assert_eq!(plain["plan"]["commandPreview"], Value::Null);
        // A Windows node's wrapper, as OpenClaw's exec tool sends it.
        let windows = prepare(
            json!({"command": ["cmd.exe", "/d", "/s", "/c", "dir /b"], "rawCommand": "dir /b"}),
            Path::new("/work"),
            super::super::policy::Stance::Open,
            vec![],
        )
        .unwrap()
        .0;
        assert_eq!(windows["plan"]["commandPreview"], "dir /b");
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ps = [
            "C:\\Program Files\\PowerShell\\7\\pwsh.exe",
            "-NoProfile",
            "-Command",
            "Get-Date",
        ];
        assert_eq!(shell_payload(&argv(&ps)), Some("Get-Date"));
        assert_eq!(
            shell_payload(&argv(&["sh", "-e", "-c", "true"])),
            Some("true")
        );
        assert_eq!(shell_payload(&argv(&["python3", "-c", "print(1)"])), None);
        assert_eq!(
            plan["execPolicy"],
            json!({"security": "full", "ask": "off"})
        );
    }

    #[test]
    fn a_node_that_asks_through_the_gateway_says_allowlist_on_miss() {
        use super::super::policy::Stance;
        let asked = json!({"command": ["uname", "-s"], "security": "full", "ask": "off"});
        let plan = prepare(
            asked.clone(),
            Path::new("/"),
            Stance::Approvals,
            vec![json!({"pattern": "/usr/bin/id"})],
        )
        .unwrap()
        .0;
        assert_eq!(
            plan["execPolicy"],
            json!({"security": "allowlist", "ask": "on-miss"})
        );
        assert_eq!(
            plan["plan"]["policySnapshot"]["allowlistRules"],
            json!([{"pattern": "/usr/bin/id"}])
        );
        assert_eq!(plan["allowAlwaysCoverage"]["complete"], true);
        let argp = plan["allowAlwaysCoverage"]["patterns"][0]["argPattern"]
            .as_str()
            .unwrap();
        assert!(argp.starts_with("sha256:cwd-argv:v1:"), "{argp}");
        // The stricter of the two: a gateway that asks always keeps asking.
        let always = json!({"command": ["uname"], "security": "allowlist", "ask": "always"});
        let plan = prepare(always, Path::new("/"), Stance::Open, vec![])
            .unwrap()
            .0;
        assert_eq!(
            plan["execPolicy"],
            json!({"security": "allowlist", "ask": "always"})
        );
        let closed = prepare(asked, Path::new("/"), Stance::Closed, vec![])
            .unwrap()
            .0;
        assert_eq!(closed["execPolicy"]["security"], "deny");
    }
}
