//! End to end against the real OpenClaw (issues 4 and 5): the router's CLI
//! and gateway paths and the node, through a gateway started by
//! `scripts/sandbox.sh` with a fake model. Ignored by a plain `cargo test` (they need the sandbox); run them
//! with `scripts/e2e.sh`, which brings the sandbox up, runs
//! `cargo test --test e2e -- --ignored --test-threads=1`, and takes it down.

#![cfg(unix)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

/// The sandbox's environment, as `scripts/sandbox.sh env` exports it.
fn sandbox() -> Vec<(String, String)> {
    let keys = [
        "PATH",
        "OPENCLAW_STATE_DIR",
        "OPENCLAW_CONFIG_PATH",
        "OPENCLAW_HOME",
        "XDG_CACHE_HOME",
        "OPENCLAW_NO_AUTO_UPDATE",
        "OPENCLAW_DISABLE_BONJOUR",
        "OPENCLAW_OFFLINE",
        "DO_NOT_TRACK",
        "OPENCLAW_HIDE_BANNER",
        "OPENCLAW_SUPPRESS_NOTES",
        "NO_COLOR",
        "OPENCLAW_GATEWAY_TOKEN",
        "OPENCLAW_GATEWAY_URL",
    ];
    assert!(
        std::env::var_os("CLAWBOT_SANDBOX_MODEL_LOG").is_some(),
        "no sandbox: run these tests with scripts/e2e.sh"
    );
    keys.iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect()
}

/// The router, pointed at the sandbox's real openclaw.
fn real_router() -> Command {
    let mut cmd = router();
    cmd.envs(sandbox());
    cmd
}

/// `openclaw ARGS` in the sandbox: stdout, stderr, exit code.
fn openclaw(args: &[&str]) -> (String, String, Option<i32>) {
    let out = Command::new("openclaw")
        .args(args)
        .envs(sandbox())
        .stdin(Stdio::null())
        .output()
        .expect("openclaw on PATH");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

fn openclaw_json(args: &[&str]) -> Value {
    let (stdout, stderr, code) = openclaw(args);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("openclaw {args:?} gave no JSON ({e}, rc {code:?}):\n{stdout}\n{stderr}")
    })
}

/// What the fake model last received as the user's own words.
fn last_user_text() -> String {
    let log = model_log();
    let request: Value =
        serde_json::from_str(log.lines().last().expect("no model request")).unwrap();
    let text = |c: &Value| match c {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    };
    let user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| text(&m["content"]))
        .rfind(|t| !t.starts_with("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"))
        .unwrap();
    let body = user
        .split_once("] ")
        .map(|(_, b)| b.to_owned())
        .unwrap_or(user);
    match body.find("\n\nRuntime:") {
        Some(cut) => body[..cut].to_owned(),
        None => body,
    }
}

/// Processes anywhere carrying a router run tag (none may outlive a run).
fn tagged_processes() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| {
                    env.split(|b| *b == 0)
                        .any(|v| v.starts_with(b"CLAWBOT_ROUTER_RUN_ID="))
                })
                .unwrap_or(false)
                && alive(*pid as i32)
        })
        .collect()
}

fn unique(label: &str) -> String {
    format!("{label} {}", uuid::Uuid::new_v4().simple())
}

// ---- Router, CLI path ------------------------------------------------------

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_a_reply_arrives_as_content() {
    let message = unique("总结最近的日志");
    let run = run(real_router().args(["-a", "main", "-m", &message, "--timeout", "120"]));
    assert_eq!(run.stdout, expected_line(&format!("ECHO: {message}\n")));
    assert_eq!(run.code, Some(0));
}

/// The sandbox model's request log so far.
fn model_log() -> String {
    std::fs::read_to_string(std::env::var("CLAWBOT_SANDBOX_MODEL_LOG").unwrap()).unwrap()
}

/// A call in `session` that times out after its turn reached the model
/// (the model is told to take 60 s): what it leaves behind is `marker`.
/// 25 s is long enough for the CLI to start and the turn to reach the
/// model on a loaded machine (15 s was not, twice, with a gateway that had
/// just started beside two builds), and short of the model's delay.
fn time_out_in(mut path: std::process::Command, session: &str, marker: &str) {
    let message = format!("[[delay:60]] {marker}");
    let slow = run(path.args(["--session", session, "-m", &message, "--timeout", "25"]));
    assert!(slow.content().contains("处理超时"), "{}", slow.stdout);
    assert!(
        model_log().contains(marker),
        "the turn reached the model before the timeout"
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_sessions_keep_a_timed_out_call_where_it_belongs() {
    // A session the host names: a timed-out call's message is handed to
    // that session's next turn (OpenClaw's repair of an orphaned turn) —
    // and the two paths share the session: the CLI times out, the gateway
    // path's next turn in it carries the message.
    let marker = unique("left behind");
    let key = format!("e2e-session-{}", uuid::Uuid::new_v4().simple());
    time_out_in(real_router(), &key, &marker);
    let next_message = unique("next one");
    let next = run(via_gateway().args(["--session", &key, "-m", &next_message, "--timeout", "60"]));
    let content = next.content();
    assert!(content.ends_with(&format!("{next_message}\n")), "{content}");
    // The message stayed in this session, whichever way OpenClaw kept it:
    // queued into this turn ("[Queued user message from a previous active
    // turn; …]", when the CLI's abort landed first) or answered in the
    // session before this turn ran (when the run outlived its client) —
    // either way the model sees it in this turn's request.
    let request = model_log()
        .lines()
        .rev()
        .find(|l| l.contains(&next_message))
        .map(str::to_owned)
        .expect("the next turn reached the model");
    assert!(
        request.contains(&marker),
        "the next turn's request lacks the timed-out message: {content}"
    );
    // new: a session of its own per call; nothing carries over, on either
    // path.
    time_out_in(via_gateway(), "new", &unique("left in a new session"));
    for path in [real_router(), via_gateway()].iter_mut() {
        let fresh = run(path.args(["--session", "new", "-m", "fresh", "--timeout", "60"]));
        assert_eq!(fresh.content(), "ECHO: fresh\n");
    }
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_agent_and_to_routes() {
    let message = unique("for main");
    let named = run(real_router().args(["--agent", "main", "-m", &message, "--timeout", "120"]));
    assert_eq!(named.content(), format!("ECHO: {message}\n"));
    let log = model_log();
    assert!(
        log.lines().last().unwrap().contains("agent=main"),
        "the turn did not run as main"
    );

    let message = unique("to a destination");
    let routed =
        run(real_router().args(["--to", "+15555550123", "-m", &message, "--timeout", "120"]));
    assert_eq!(routed.content(), format!("ECHO: {message}\n"));
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_unknown_agents_error_arrives_verbatim() {
    let run = run(real_router().args([
        "-a",
        "nosuchagent",
        "-m",
        "hi",
        "--timeout",
        "120",
        "--meta",
    ]));
    let (stdout, stderr, code) = openclaw(&["agent", "--agent", "nosuchagent", "--message", "hi"]);
    assert_eq!(code, Some(1));
    assert_eq!(run.content(), format!("{stdout}{stderr}"));
    assert!(run.content().contains("nosuchagent"));
    assert_eq!(run.meta()["exitCode"], 1);
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_a_slow_model_times_out_and_leaves_nothing_behind() {
    let started = Instant::now();
    // A session of its own: OpenClaw hands an aborted turn's message to
    // its session's next turn ("queued"), which must not be another test's.
    let session = format!("agent:main:e2e-slow-{}", uuid::Uuid::new_v4().simple());
    let timed_out = run(real_router().args([
        "--to",
        &session,
        "-m",
        "[[delay:12]] slow",
        "--timeout",
        "5",
        "--grace",
        "1",
    ]));
    assert!(
        timed_out.content().ends_with(
            "[clawbot_router] 远程 clawBot 处理超时（超过 5 秒未完成），本次结果已中止。"
        ),
        "{}",
        timed_out.stdout
    );
    assert!(
        timed_out.elapsed < Duration::from_secs(5 + 1 + 1),
        "{:?}",
        timed_out.elapsed
    );
    // Stopped by then (KILLed at worst); a Node.js process of hundreds of
    // MiB may take a moment on a loaded machine to finish dying.
    let deadline = Instant::now() + Duration::from_secs(3);
    while !tagged_processes().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<String> = tagged_processes()
        .into_iter()
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            format!(
                "{pid} {} [{}]",
                String::from_utf8_lossy(&cmd).replace('\0', " "),
                stat.trim()
            )
        })
        .collect();
    assert_eq!(left, Vec::<String>::new(), "processes outlived the router");
    // SIGTERM makes `openclaw agent` abort its turn, but OpenClaw still
    // hands the aborted message (`[[delay]]` and all) to the session's next
    // turn as "queued": let that turn happen here, not in another test.
    std::thread::sleep(Duration::from_secs(14).saturating_sub(started.elapsed()));
    let next =
        run(real_router().args(["-a", "main", "-m", "after the timeout", "--timeout", "120"]));
    assert!(
        next.content().contains("after the timeout"),
        "{}",
        next.stdout
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_hostile_messages_reach_the_model_byte_for_byte() {
    let big = format!("{} end", "长文本 long text ".repeat(5_000)); // ~100 KB
    let over_argv = "y".repeat(200_000); // through --message-file
    for message in [
        r#"say "hi" and 'bye'"#,
        "line one\nline two\n  indented",
        "$(touch /tmp/clawbot_e2e_pwned) `id` ${HOME}",
        "--help --agent evil",
        "-m",
        "emoji 🦀🔥 中文",
        big.as_str(),
        over_argv.as_str(),
    ] {
        let args = json!({ "agent": "main", "message": message }).to_string();
        let run = run_with_stdin(
            real_router().args(["--args-json", "-", "--timeout", "120"]),
            args.as_bytes(),
        );
        assert_eq!(last_user_text(), message, "the model got something else");
        assert_eq!(run.content(), format!("ECHO: {message}\n"));
    }
    assert!(!Path::new("/tmp/clawbot_e2e_pwned").exists());
}

// ---- Router, gateway path (--via gateway|auto) --------------------------------

/// The router with `--via gateway`; the URL and token are the sandbox's
/// OPENCLAW_GATEWAY_URL/TOKEN, the defaults a user's shell would give it.
fn via_gateway() -> Command {
    let mut cmd = real_router();
    cmd.args(["--via", "gateway"]);
    cmd
}

/// The lines of the fake model's hang-up log (callers that gave up during
/// a `[[delay]]`: how an aborted run shows from outside the gateway).
fn hangups() -> Vec<String> {
    let path = format!(
        "{}.hangups",
        std::env::var("CLAWBOT_SANDBOX_MODEL_LOG").unwrap()
    );
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_via_gateway_a_reply_is_the_cli_paths_reply() {
    let message = unique("总结最近的日志 over the gateway");
    let gateway = run(via_gateway().args([
        "-a",
        "main",
        "-m",
        &message,
        "--timeout",
        "120",
        "--meta",
        "--exit-code",
    ]));
    assert_eq!(
        gateway.content(),
        format!("ECHO: {message}\n"),
        "{}",
        gateway.stdout
    );
    assert_eq!(gateway.code, Some(0));
    assert_eq!(gateway.meta()["via"], "gateway");
    assert!(gateway.meta()["runId"].is_string(), "{}", gateway.stdout);
    assert_eq!(last_user_text(), message, "the model got something else");
    let log = model_log();
    assert!(
        log.lines().last().unwrap().contains("agent=main"),
        "the turn did not run as main"
    );
    // The same message through the CLI: the same content, byte for byte.
    let cli = run(real_router().args(["-a", "main", "-m", &message, "--timeout", "120", "--meta"]));
    assert_eq!(cli.meta()["via"], "cli");
    assert_eq!(cli.content(), gateway.content());
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_via_gateway_an_unknown_agent_is_refused_in_the_gateways_words() {
    let run = run(via_gateway().args([
        "-a",
        "nosuchagent",
        "-m",
        "hi",
        "--timeout",
        "120",
        "--meta",
        "--exit-code",
    ]));
    assert_eq!(
        run.content(),
        "invalid agent params: unknown agent id \"nosuchagent\"\n"
    );
    assert_eq!(run.code, Some(1));
    assert_eq!(run.meta()["via"], "gateway");
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_via_gateway_a_failing_model_reads_as_on_the_cli_path() {
    // OpenClaw retries a model that answers 500, opening an assistant item
    // per attempt that never says anything: no empty lines for them.
    // A session of its own (see the timeout test): the aborted turns stay
    // out of every other test's.
    let message = unique("[[fail:500]] a failing model");
    let session = format!("agent:main:e2e-fail-{}", uuid::Uuid::new_v4().simple());
    let args = [
        "--to",
        &session,
        "-m",
        &message,
        "--timeout",
        "8",
        "--lang",
        "en",
        "--exit-code",
    ];
    let gateway = run(via_gateway().args(args));
    let sentence = "[clawbot_router] The remote clawBot timed out (not finished after 8 seconds); this result was aborted.";
    assert_eq!(gateway.content(), sentence, "{}", gateway.stdout);
    assert_eq!(gateway.code, Some(124));
    let cli = run(real_router().args(args));
    assert_eq!(cli.content(), gateway.content(), "the paths agree");
    assert_eq!(cli.code, gateway.code);
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_via_gateway_a_missing_or_wrong_token_is_named_and_exits_1() {
    let url = std::env::var("OPENCLAW_GATEWAY_URL").unwrap();
    let missing = run(via_gateway().env_remove("OPENCLAW_GATEWAY_TOKEN").args([
        "-m",
        "hi",
        "--lang",
        "en",
        "--exit-code",
    ]));
    assert_eq!(
        missing.content(),
        format!(
            "[clawbot_router] The OpenClaw gateway at {url} refused the connection (DEVICE_IDENTITY_REQUIRED: device identity required; no gateway token was given: pass the gateway's gateway.auth.token with --token or OPENCLAW_GATEWAY_TOKEN); the remote agent was not called."
        )
    );
    assert_eq!(missing.code, Some(1));
    let wrong = run(via_gateway().args(["--token", "not-the-token", "-m", "hi", "--exit-code"]));
    let content = wrong.content();
    assert!(
        content.contains("AUTH_TOKEN_MISMATCH")
            && content.contains("请核对 --token / OPENCLAW_GATEWAY_TOKEN"),
        "{content}"
    );
    assert_eq!(wrong.code, Some(1), "as openclaw agent exits for the same");
    let (_, _, cli_code) = {
        let out = Command::new("openclaw")
            .args(["agent", "--agent", "main", "--message", "hi"])
            .envs(sandbox())
            .env("OPENCLAW_GATEWAY_TOKEN", "not-the-token")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.stdout, out.stderr, out.status.code())
    };
    assert_eq!(
        cli_code, wrong.code,
        "the CLI's own status for a refused token"
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_via_gateway_the_to_route() {
    let message = unique("to a destination over the gateway");
    let routed = run(via_gateway().args([
        "--to",
        "+15555550123",
        "-m",
        &message,
        "--timeout",
        "120",
        "--exit-code",
    ]));
    assert_eq!(
        routed.content(),
        format!("ECHO: {message}\n"),
        "{}",
        routed.stdout
    );
    assert_eq!(routed.code, Some(0));
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_via_gateway_a_timeout_aborts_the_run_on_the_gateway() {
    // An aborted turn's message is handed to its session's next turn as
    // "queued", `[[delay]]` and all. A session of its own (a `--to` shaped
    // like a session key is used as the key, by the CLI and the gateway
    // alike), fresh each run, keeps that from every other turn.
    let marker = unique("abort me");
    let session = format!("agent:main:e2e-abort-{}", uuid::Uuid::new_v4().simple());
    let seen = hangups().len();
    let timed_out = run(via_gateway().args([
        "--to",
        &session,
        "-m",
        &format!("[[delay:30]] {marker}"),
        "--timeout",
        "3",
        "--meta",
        "--exit-code",
    ]));
    assert!(
        timed_out.content().ends_with(
            "[clawbot_router] 远程 clawBot 处理超时（超过 3 秒未完成），本次结果已中止。"
        ),
        "{}",
        timed_out.stdout
    );
    assert_eq!(timed_out.code, Some(124));
    assert_eq!(timed_out.meta()["timedOut"], true);
    assert_eq!(timed_out.meta()["via"], "gateway");
    assert!(
        timed_out.elapsed < Duration::from_secs(3 + 3),
        "{:?}",
        timed_out.elapsed
    );
    // Aborted on the gateway: the model's call is dropped. A gateway slow
    // to prepare the turn may be aborted before it calls the model at all;
    // then no call may come later either.
    let model_got_it = || model_log().contains(&marker);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let new: Vec<String> = hangups().into_iter().skip(seen).collect();
        if new.iter().any(|line| line.contains(&marker)) {
            break;
        }
        if Instant::now() >= deadline {
            assert!(
                !model_got_it(),
                "the model is still answering an aborted run: {new:?}"
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // And the gateway ended the run because we aborted it ("rpc"), not on
    // its own backstop (our timeout plus 2 s, status "timeout"), which
    // would also hang up on the model a moment later.
    let run_id = timed_out.meta()["runId"].as_str().unwrap().to_owned();
    let params = json!({ "runId": run_id, "timeoutMs": 5_000 }).to_string();
    let ended = openclaw_json(&[
        "gateway",
        "call",
        "agent.wait",
        "--params",
        &params,
        "--json",
    ]);
    assert_eq!(ended["stopReason"], "rpc", "{ended}");
    assert_ne!(ended["status"], "ok", "{ended}");
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_via_auto_falls_back_to_the_cli_when_the_gateway_is_closed() {
    // A port nobody listens on, for the router only: the spawned openclaw
    // still reaches the sandbox through OPENCLAW_GATEWAY_URL.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let message = unique("auto falls back");
    let run = run(real_router().args([
        "--via",
        "auto",
        "--gateway",
        &format!("ws://127.0.0.1:{port}"),
        "-a",
        "main",
        "-m",
        &message,
        "--timeout",
        "120",
        "--meta",
        "--exit-code",
    ]));
    assert_eq!(
        run.content(),
        format!("ECHO: {message}\n"),
        "{}",
        run.stdout
    );
    assert_eq!(run.code, Some(0));
    assert_eq!(run.meta()["via"], "cli");
}

// ---- Node --------------------------------------------------------------------

struct RealNode {
    stdin: Option<std::process::ChildStdin>,
    child: Child,
    log: PathBuf,
    name: String,
    _dir: tempfile::TempDir,
    ws: PathBuf,
}

impl RealNode {
    fn start(name: &str, args: &[&str]) -> Self {
        Self::start_with(name, args, None)
    }

    /// With `stdout`, stdin is a pipe (`self.stdin`) and stdout goes to that
    /// file: what a doctor session wants.
    fn start_with(name: &str, args: &[&str], stdout: Option<&std::path::Path>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("peer.txt"), "peer-file-content-42\n").unwrap();
        let log = dir.path().join("node.log");
        let (stdin, stdout) = match stdout {
            Some(path) => (
                Stdio::piped(),
                Stdio::from(std::fs::File::create(path).unwrap()),
            ),
            None => (Stdio::null(), Stdio::null()),
        };
        let mut child = Self::spawn(dir.path(), name, args, stdin, stdout);
        RealNode {
            stdin: child.stdin.take(),
            child,
            log,
            name: name.to_owned(),
            _dir: dir,
            ws,
        }
    }

    fn spawn(dir: &Path, name: &str, args: &[&str], stdin: Stdio, stdout: Stdio) -> Child {
        real_router()
            .args(["node", "--display-name", name])
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--workspace")
            .arg(dir.join("ws"))
            .args(args)
            .stdin(stdin)
            .stdout(stdout)
            .stderr(std::fs::File::create(dir.join("node.log")).unwrap())
            .spawn()
            .unwrap()
    }

    /// Stops the node (Ctrl-C) and starts it again, same device and
    /// workspace, as `name` with `args`.
    fn restart(&mut self, name: &str, args: &[&str]) {
        self.stop();
        self.child = Self::spawn(self._dir.path(), name, args, Stdio::null(), Stdio::null());
        self.name = name.to_owned();
    }

    fn stop(&mut self) {
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGINT);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_log(&self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "the node never printed {needle:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Approves the node's command surface the way an operator does.
    fn approve_surface(&self) {
        let log = self.wait_log("openclaw nodes approve ", Duration::from_secs(60));
        let request = log
            .split("openclaw nodes approve ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        let pending = openclaw_json(&["nodes", "pending", "--json"]);
        assert!(pending.to_string().contains(request), "{pending}");
        let (_, stderr, code) = openclaw(&["nodes", "approve", request]);
        assert_eq!(code, Some(0), "{stderr}");
        self.wait_log("approved", Duration::from_secs(30));
    }

    fn invoke(&self, command: &str, params: Value) -> Value {
        let params = params.to_string();
        let (stdout, stderr, _) = openclaw(&[
            "nodes",
            "invoke",
            "--node",
            &self.name,
            "--command",
            command,
            "--params",
            &params,
            "--json",
        ]);
        serde_json::from_str(&stdout)
            .unwrap_or_else(|_| panic!("no JSON from nodes invoke {command}:\n{stdout}\n{stderr}"))
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_the_name_given_is_the_name_the_gateway_lists() {
    let mut node = RealNode::start("e2e-name-first", &[]);
    node.approve_surface();
    node.wait_log(
        "the gateway lists this node as \"e2e-name-first\"",
        Duration::from_secs(30),
    );
    // OpenClaw keeps the first approval's name; the node renames itself
    // through an operator link so the new one is what the gateway lists.
    node.restart("e2e-name-second", &[]);
    node.wait_log(
        "the gateway listed this node as \"e2e-name-first\"; renamed it to \"e2e-name-second\"",
        Duration::from_secs(60),
    );
    let (listed, _, _) = openclaw(&["nodes", "list", "--json"]);
    assert!(
        listed.contains("e2e-name-second") && !listed.contains("e2e-name-first"),
        "{listed}"
    );
    let which = node.invoke("system.which", json!({"bins": ["sh"]}));
    assert_eq!(which["ok"], true, "found by its new name: {which}");
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_a_second_node_on_the_same_state_directory_is_refused() {
    let node = RealNode::start("e2e-lock", &[]);
    node.wait_log("connected to", Duration::from_secs(30));
    let out = run(real_router()
        .args(["node", "--state-dir"])
        .arg(node._dir.path().join("state"))
        .stdin(Stdio::null()));
    let said = &out.stderr;
    assert_eq!(out.code, Some(1), "{said}");
    assert!(
        said.contains(&format!("(pid {})", node.child.id())) && said.contains("--state-dir"),
        "{said}"
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_a_server_that_is_not_a_gateway_stops_the_node() {
    // The fake model's HTTP server: it answers, but not as OpenClaw does.
    let model = std::env::var("CLAWBOT_SANDBOX_MODEL_PORT").unwrap_or_else(|_| "18555".into());
    let url = format!("ws://127.0.0.1:{model}");
    let dir = tempfile::tempdir().unwrap();
    let began = Instant::now();
    let out = run(real_router()
        .args(["node", "--gateway", &url, "--state-dir"])
        .arg(dir.path())
        .stdin(Stdio::null()));
    let said = &out.stderr;
    assert_eq!(out.code, Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "{url} is not an OpenClaw gateway (it answered HTTP "
        )),
        "{said}"
    );
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "{:?}",
        began.elapsed()
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_node_serves_openclaws_commands_and_its_own() {
    let node = RealNode::start("e2e-tools", &["--approval", "deny"]);
    node.approve_surface();
    let which = node.invoke("system.which", json!({"bins": ["sh"]}));
    assert!(
        which["payload"]["bins"]["sh"]
            .as_str()
            .unwrap()
            .ends_with("/sh"),
        "{which}"
    );
    let read = node.invoke("read_file", json!({"path": "peer.txt"}));
    assert_eq!(
        read["payload"]["content"], "peer-file-content-42\n",
        "{read}"
    );
    let list = node.invoke("list_files", json!({"path": "."}));
    assert!(list.to_string().contains("peer.txt"), "{list}");
    std::fs::create_dir_all(node.ws.join("sub")).unwrap();
    let dirs = node.invoke("fs.listDir", json!({}));
    assert_eq!(
        dirs["payload"]["entries"][0]["name"], "sub",
        "OpenClaw's own fs.listDir: {dirs}"
    );
    let search = node.invoke(
        "search_files",
        json!({"query": "content-42", "searchContent": true}),
    );
    assert!(search.to_string().contains("peer.txt"), "{search}");
    let info = node.invoke("system_info", json!({}));
    assert_eq!(info["payload"]["os"], "linux", "{info}");
    assert!(
        info["payload"]["openclaw"]["version"]
            .as_str()
            .unwrap_or("")
            .contains("2026.9.6"),
        "{info}"
    );
    let config = node.invoke("read_config", json!({}));
    let text = config["payload"]["content"].as_str().unwrap_or_default();
    assert!(
        text.contains("fakellm") && !text.contains("clawbot-sandbox-token"),
        "{config}"
    );
    let validated = node.invoke("validate_config", json!({}));
    assert_eq!(validated["ok"], true, "{validated}");
    assert!(validated["payload"]["exitCode"].is_number(), "{validated}");
    for (command, params) in [
        ("write_file", json!({"path": "x.txt", "content": "x"})),
        ("run_command", json!({"command": "touch y.txt"})),
    ] {
        let refused = node.invoke(command, params);
        assert_eq!(refused["ok"], false, "{refused}");
        assert!(refused.to_string().contains("USER_REJECTED"), "{refused}");
    }
    assert!(!node.ws.join("x.txt").exists() && !node.ws.join("y.txt").exists());
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_a_long_commands_output_streams_as_progress_the_gateway_takes() {
    let node = RealNode::start("e2e-progress", &["--allow-command", "run_command"]);
    node.approve_surface();
    let refused_before = gateway_log_count("res ✗ node.invoke.progress");
    // A line, a pause, then 40 KB: at least three chunks (that they go
    // out while the command runs is tests/node.rs's to prove).
    let script = "echo first; sleep 2; head -c 40000 /dev/zero | tr '\\0' x; echo; echo second";
    let result = node.invoke(
        "run_command",
        json!({"command": ["sh", "-c", script], "timeoutMs": 30000}),
    );
    let stdout = result["payload"]["stdout"].as_str().unwrap_or_default();
    assert!(
        stdout.starts_with("first\n") && stdout.ends_with("second\n"),
        "{result}"
    );
    let log = node.wait_log("progress chunk(s)", Duration::from_secs(10));
    let chunks: u64 = log
        .split(" streamed ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(chunks >= 3, "{log}");
    // The real gateway validated every chunk (closed schema, 16384-byte
    // cap, this node's id) and refused none; OpenClaw 2026.9.6 hands them
    // to plugin-runtime listeners only, so `nodes invoke` shows the result.
    assert!(!log.contains("refused node.invoke.progress"), "{log}");
    assert_eq!(
        gateway_log_count("res ✗ node.invoke.progress"),
        refused_before
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_the_installed_service_joins_the_real_gateway_with_its_env_file() {
    // No systemd here: tests/fixtures/fake-systemd runs the unit as
    // systemd would (its ExecStart=, its environment only).
    let m = common::systemd::FakeSystemd::new();
    let env: Vec<(String, String)> = sandbox().into_iter().filter(|(k, _)| k != "PATH").collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let token = std::env::var("OPENCLAW_GATEWAY_TOKEN").unwrap();
    let state = m.path("state");
    let out = m.node(
        &[
            "install",
            "--state-dir",
            state.to_str().unwrap(),
            "--display-name",
            "e2e-service",
        ],
        &env,
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{said}\n{}", m.journal());
    assert!(said.contains("node: connected to"), "{said}");
    assert!(!std::fs::read_to_string(m.unit()).unwrap().contains(&token));
    let pid = m.service_pid().unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains(&token),
        "no secret on the service's command line"
    );
    // The operator approves its commands; the service is then an ordinary
    // node of the gateway.
    let deadline = Instant::now() + Duration::from_secs(60);
    let request = loop {
        let journal = m.journal();
        if let Some(rest) = journal.split("openclaw nodes approve ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "no approval hint:\n{journal}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let (_, stderr, code) = openclaw(&["nodes", "approve", &request]);
    assert_eq!(code, Some(0), "{stderr}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, code) = m.status();
        if code == 0 && status["node"]["approved"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "never approved: {status}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (stdout, stderr, _) = openclaw(&[
        "nodes",
        "invoke",
        "--node",
        "e2e-service",
        "--command",
        "system.which",
        "--params",
        r#"{"bins":["sh"]}"#,
        "--json",
    ]);
    assert!(stdout.contains("/sh"), "{stdout}{stderr}");
    let out = m.node(&["uninstall"], &env);
    assert_eq!(out.status.code(), Some(0));
    common::assert_all_gone(&[pid]);
    assert!(!m.env_file().exists());
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_agent_calls_the_nodes_published_tools_with_no_allowlist_edit() {
    // The sandbox's gateway.nodes.commands.allow names the seed's tools
    // for the `nodes invoke` tests; the published tools need none of it:
    // they travel as mcp.tools.call.v1, in OpenClaw's Linux defaults.
    let node = RealNode::start("e2e-published", &[]);
    node.approve_surface();
    node.wait_log("published 8 tools", Duration::from_secs(30));
    let agent = |message: &str| {
        run(real_router().args(["-a", "main", "-m", message, "--timeout", "120"])).content()
    };
    // Safe: runs at once; the model reads the file's content.
    let read = agent(r#"[[tool:clawbot_read_file {"path": "peer.txt"}]]"#);
    assert!(read.contains("peer-file-content-42"), "{read}");
    // Risky, on a node without a terminal: the node's approval policy
    // answers, with how to allow it; nothing is written.
    let write = agent(r#"[[tool:clawbot_write_file {"path": "made.txt", "content": "x"}]]"#);
    assert!(write.contains("USER_REJECTED"), "{write}");
    assert!(!node.ws.join("made.txt").exists());
    // Forbidden, whatever approvals say.
    let sudo = agent(r#"[[tool:clawbot_run_command {"command": "sudo true"}]]"#);
    assert!(sudo.contains("FORBIDDEN"), "{sudo}");
    let log = node.log();
    for call in [
        "read_file (mcp.tools.call.v1) → ok (allowed:safe)",
        "write_file (mcp.tools.call.v1) → USER_REJECTED (refused:APPROVAL_REQUIRED)",
        "run_command (mcp.tools.call.v1) → FORBIDDEN (refused:FORBIDDEN)",
    ] {
        assert!(log.contains(call), "{call}: {log}");
    }
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_agent_calls_a_real_mcp_server_through_the_node() {
    // Two MCP servers nobody here wrote, from the npm registry
    // (scripts/sandbox.sh install): the filesystem server on a directory
    // of its own, and the "everything" server, which announces a tool
    // list change right after it starts.
    let bin = PathBuf::from(std::env::var("CLAWBOT_SANDBOX_MCP_BIN").expect("scripts/e2e.sh"));
    let docs = tempfile::tempdir().unwrap();
    let docs_dir = docs.path().canonicalize().unwrap();
    std::fs::write(docs_dir.join("note.txt"), "mcp-proxied-content-77\n").unwrap();
    let fs = format!(
        "fs={} {}",
        bin.join("mcp-server-filesystem").display(),
        docs_dir.display()
    );
    let everything = format!("everything={}", bin.join("mcp-server-everything").display());
    let node = RealNode::start(
        "e2e-mcp",
        &[
            "--mcp-server",
            &fs,
            "--mcp-server",
            &everything,
            "--deny-command",
            "fs.move_file",
        ],
    );
    node.approve_surface();
    node.wait_log("MCP server fs (pid", Duration::from_secs(60));
    node.wait_log(
        "MCP server everything announced a tool list change; listing again",
        Duration::from_secs(60),
    );
    let published = |log: &str| log.matches("published ").count();
    node.wait_log(
        "fs.move_file is not offered to agents",
        Duration::from_secs(30),
    );
    // All of it, taken by the gateway once the node is approved: ours (8),
    // fs (13 of 14) and everything (13).
    let log = node.wait_log(
        "published 34 tools to the gateway's agents",
        Duration::from_secs(30),
    );
    assert!(!log.contains("MCP server fs cannot start"), "{log}");
    let agent = |message: &str| {
        run(real_router().args(["-a", "main", "-m", message, "--timeout", "120"])).content()
    };
    let note = docs_dir.join("note.txt").display().to_string();
    let read = format!(r#"[[tool:fs_read_text_file {{"path": "{note}"}}]]"#);
    // Read-only (readOnlyHint): runs at once.
    let answer = agent(&read);
    assert!(
        answer.contains("mcp-proxied-content-77"),
        "{answer}\n{}",
        node.log()
    );
    let sum = agent(r#"[[tool:everything_get-sum {"a": 2, "b": 40}]]"#);
    assert!(sum.contains("42"), "{sum}");
    // Destructive, no terminal, no pre-approval: the node's policy refuses.
    let made = docs_dir.join("made.txt").display().to_string();
    let write = agent(&format!(
        r#"[[tool:fs_write_file {{"path": "{made}", "content": "x"}}]]"#
    ));
    assert!(write.contains("USER_REJECTED"), "{write}");
    assert!(!docs_dir.join("made.txt").exists());
    // Forbidden: not offered, and refused when called anyway.
    let moved = node.invoke(
        "mcp.tools.call.v1",
        json!({"server": "fs", "tool": "move_file", "arguments": {"source": note, "destination": made}}),
    );
    assert!(moved.to_string().contains("FORBIDDEN"), "{moved}");
    assert!(docs_dir.join("note.txt").exists());
    // Killed mid-session: withdrawn, started again, published again.
    let log = node.log();
    let pid: i32 = log
        .split("MCP server fs (pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|p| p.parse().ok())
        .expect("the server's pid in the log");
    let before = published(&log);
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    node.wait_log("MCP server fs exited (signal: 9", Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(node.log().matches("MCP server fs (pid").count() == 2
        && published(&node.log()) >= before + 2)
    {
        assert!(Instant::now() < deadline, "not back: {}", node.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    let again = agent(&read);
    assert!(
        again.contains("mcp-proxied-content-77"),
        "{again}\n{}",
        node.log()
    );
    let log = node.log();
    for call in [
        "fs.read_text_file (mcp.tools.call.v1) → ok (allowed:safe)",
        "everything.get-sum (mcp.tools.call.v1) → ok (allowed:safe)",
        "fs.write_file (mcp.tools.call.v1) → USER_REJECTED (refused:APPROVAL_REQUIRED)",
        "fs.move_file (mcp.tools.call.v1) → FORBIDDEN (refused:FORBIDDEN)",
    ] {
        assert!(log.contains(call), "{call}: {log}");
    }
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_agents_exec_on_the_node_runs_here() {
    let node = RealNode::start("e2e-exec", &["--allow-command", "system.run"]);
    node.approve_surface();
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let run = run(real_router().args([
        "-a",
        "main",
        "-m",
        &format!("[[exec:echo from-node-{marker}; uname -s]]"),
        "--timeout",
        "120",
    ]));
    assert!(
        run.content()
            .contains(&format!("from-node-{marker}\nLinux")),
        "{}",
        run.stdout
    );
    let log = node.log();
    assert!(
        log.contains("system.run.prepare → ok") && log.contains("system.run → ok"),
        "{log}"
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_openclaw_approvals_manage_the_nodes_allowlist() {
    // Headless and nothing pre-approved: a command refused here...
    let node = RealNode::start("e2e-approvals", &[]);
    node.approve_surface();
    let uname_run = || node.invoke("run_command", json!({"command": ["uname", "-s"]}));
    let refused = uname_run();
    assert!(refused.to_string().contains("USER_REJECTED"), "{refused}");
    assert!(
        refused
            .to_string()
            .contains("openclaw approvals allowlist add --node"),
        "says how: {refused}"
    );
    // ... until an operator allowlists the program from the gateway.
    let (got, err, code) = openclaw(&["approvals", "get", "--node", "e2e-approvals", "--json"]);
    assert_eq!(code, Some(0), "{got}\n{err}");
    let uname = std::fs::canonicalize(
        std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join("uname"))
            .find(|p| p.is_file())
            .unwrap(),
    )
    .unwrap();
    let uname = uname.to_str().unwrap();
    let (out, err, code) = openclaw(&[
        "approvals",
        "allowlist",
        "add",
        "--node",
        "e2e-approvals",
        uname,
    ]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let (got, _, _) = openclaw(&["approvals", "get", "--node", "e2e-approvals", "--json"]);
    assert!(got.contains(uname), "the round trip shows the entry: {got}");
    let ran = uname_run();
    assert_eq!(ran["payload"]["stdout"], "Linux\n", "{ran}");
    assert!(
        node.log().contains("run_command → ok (allowed:allowlist)"),
        "{}",
        node.log()
    );
}

/// One agent turn started by an approver (`scripts/approver.mjs`): each
/// exec approval it sees is resolved with `decide(command)`; the turn's
/// text, and the approvals that were raised.
fn turn_with_approvals(message: &str, decide: &dyn Fn(&str) -> &'static str) -> (String, usize) {
    let mut child = Command::new("node")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/approver.mjs"))
        .arg(message)
        .envs(sandbox())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node on PATH (the sandbox's)");
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut approvals = 0;
    for line in std::io::BufRead::lines(stdout) {
        let line: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(id) = line["approval"].as_str() {
            approvals += 1;
            let decision = decide(line["command"].as_str().unwrap_or(""));
            let (out, err, code) = openclaw(&["approvals", "resolve", id, decision, "--json"]);
            assert_eq!(
                code,
                Some(0),
                "approvals resolve {id} {decision}: {out}\n{err}"
            );
        } else if line.get("text").is_some() {
            let _ = child.wait();
            return (line["text"].as_str().unwrap_or("").to_owned(), approvals);
        } else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("approver: {line}");
        }
    }
    let _ = child.wait();
    panic!("the approver ended without an answer");
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_a_headless_node_asks_through_the_gateway_and_honours_its_approvals() {
    // No terminal, nothing pre-approved: the gateway's operators decide.
    let refused_events = refused_node_events();
    let node = RealNode::start("e2e-gateway-approvals", &[]);
    node.approve_surface();
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let command = format!("echo approved-{marker}");
    let message = format!("[[exec:{command}]] {marker}");
    let (text, asked) = turn_with_approvals(&message, &|_| "allow-once");
    assert_eq!(asked, 1, "one approval raised");
    assert!(text.contains(&format!("approved-{marker}")), "{text}");
    assert!(
        node.log()
            .contains("system.run → ok (allowed:gateway-once)"),
        "{}",
        node.log()
    );
    // Once means once: the same command is asked again...
    let (_, asked) = turn_with_approvals(&message, &|_| "allow-always");
    assert_eq!(asked, 1);
    // ... and after allow-always, not any more (the node's document says so).
    let (text, asked) = turn_with_approvals(&message, &|_| panic!("asked again"));
    assert_eq!(asked, 0);
    assert!(text.contains(&format!("approved-{marker}")), "{text}");
    let (doc, _, _) = openclaw(&[
        "approvals",
        "get",
        "--node",
        "e2e-gateway-approvals",
        "--json",
    ]);
    assert!(doc.contains("allow-always"), "{doc}");
    // A denial is the node's last word too: nothing runs.
    let runs = |log: &str| log.matches(" system.run → ").count();
    let before = runs(&node.log());
    let other = format!("[[exec:echo denied-{marker}]] {marker}");
    let (_, asked) = turn_with_approvals(&other, &|_| "deny");
    assert_eq!(asked, 1);
    assert_eq!(
        runs(&node.log()),
        before,
        "no system.run reached the node: {}",
        node.log()
    );
    // Every exec.finished / exec.denied and host stats the node sent was
    // taken by the real gateway (it logs `res ✗ node.event` for refusals).
    assert_eq!(
        refused_node_events(),
        refused_events,
        "the gateway refused node events"
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_approval_does_not_cover_a_script_rewritten_while_it_was_asked() {
    // OpenClaw's exec sends `/bin/sh -lc "sh job.sh"`: the node binds
    // job.sh to the plan the operator is shown.
    let node = RealNode::start("e2e-approval-binding", &[]);
    node.approve_surface();
    let marker = uuid::Uuid::new_v4().simple().to_string();
    std::fs::write(node.ws.join("job.sh"), format!("echo shown-{marker}\n")).unwrap();
    let message = format!("[[exec:sh job.sh]] {marker}");
    let ws = node.ws.clone();
    let (text, asked) = turn_with_approvals(&message, &|_| {
        // Rewritten while the operator looks at it.
        std::fs::write(ws.join("job.sh"), "touch pwned\n").unwrap();
        "allow-once"
    });
    assert_eq!(asked, 1, "one approval raised");
    assert!(!node.ws.join("pwned").exists(), "the rewritten script ran");
    assert!(!text.contains(&format!("shown-{marker}")), "{text}");
    assert!(
        node.log().contains("system.run → SYSTEM_RUN_DENIED"),
        "{}",
        node.log()
    );
    // Left alone, the same approval runs it.
    std::fs::write(node.ws.join("job.sh"), format!("echo shown-{marker}\n")).unwrap();
    let (text, asked) = turn_with_approvals(&message, &|_| "allow-once");
    assert_eq!(asked, 1);
    assert!(text.contains(&format!("shown-{marker}")), "{text}");
}

/// How many `node.event` requests the sandbox gateway has refused so far.
fn refused_node_events() -> usize {
    gateway_log_count("res ✗ node.event")
}

/// How often `needle` appears in the sandbox gateway's log so far.
fn gateway_log_count(needle: &str) -> usize {
    let config = std::env::var("OPENCLAW_CONFIG_PATH").unwrap();
    let log = Path::new(&config)
        .parent()
        .unwrap()
        .join("logs/openclaw.log");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches(needle)
        .count()
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_the_node_survives_a_gateway_restart() {
    let node = RealNode::start("e2e-restart", &[]);
    node.approve_surface();
    let status = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sandbox.sh"))
        .arg("restart-gateway")
        .status()
        .unwrap();
    assert!(status.success());
    node.wait_log("connection lost", Duration::from_secs(30));
    let connected = node.log().matches("connected to").count();
    assert!(connected >= 1);
    let deadline = Instant::now() + Duration::from_secs(90);
    while node.log().matches("connected to").count() < 2 {
        assert!(Instant::now() < deadline, "no reconnect:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    let which = node.invoke("system.which", json!({"bins": ["sh"]}));
    assert_eq!(which["ok"], true, "{which}");
}

/// Sets `gateway.nodes.pairing.autoApproveLocal` and gives the gateway's
/// hot reload a moment.
fn auto_approve_local(on: bool) {
    let key = "gateway.nodes.pairing.autoApproveLocal";
    let value = if on { "true" } else { "false" };
    // openclaw 2026.9.6's `config set` may exit 1 on an unrelated migration
    // warning after writing the value; what counts is the value it reads back.
    let (_, stderr, _) = openclaw(&["config", "set", key, value, "--strict-json"]);
    let (now, _, _) = openclaw(&["config", "get", key]);
    assert_eq!(now.trim(), value, "config set did not take: {stderr}");
    std::thread::sleep(Duration::from_secs(3)); // hot reload
}

/// Puts loopback auto-approval back, even when the test fails.
struct AutoApproveBack;

impl Drop for AutoApproveBack {
    fn drop(&mut self) {
        auto_approve_local(true);
    }
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_manual_pairing_with_devices_approve() {
    let _back = AutoApproveBack;
    auto_approve_local(false);
    let node = RealNode::start("e2e-manual", &[]);
    let log = node.wait_log("openclaw devices approve ", Duration::from_secs(60));
    let request = log
        .split("openclaw devices approve ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let devices = openclaw_json(&["devices", "list", "--json"]);
    assert!(devices.to_string().contains(&request), "{devices}");
    let (_, stderr, code) = openclaw(&["devices", "approve", &request]);
    assert_eq!(code, Some(0), "{stderr}");
    node.wait_log("connected to", Duration::from_secs(60));
    node.approve_surface();
    let read = node.invoke("read_file", json!({"path": "peer.txt"}));
    assert_eq!(read["ok"], true, "{read}");
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_doctor_session_streams_runs_tools_here_and_follows_up() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("doctor.out");
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let question = format!("doctor question {marker}");
    let mut node = RealNode::start_with(
        "e2e-doctor",
        &[
            "--doctor",
            "--agent",
            "main",
            "--message",
            &question,
            "--allow-command",
            "system.run",
        ],
        Some(&out),
    );
    let mut stdin = node.stdin.take().unwrap();
    let stdout = || std::fs::read_to_string(&out).unwrap_or_default();
    let wait_stdout = |needle: &str, node: &RealNode| {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !stdout().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "the doctor never printed {needle:?}:\n{}\n--- stderr ---\n{}",
                stdout(),
                node.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // The diagnostic context reached the model as the first message, with
    // the real openclaw's version and a redacted config.
    wait_stdout(&marker, &node);
    let context: Value =
        serde_json::from_str(&last_user_text()).expect("the first message is JSON");
    assert_eq!(context["type"], "doctor_diagnosis_request");
    assert_eq!(context["question"], question.as_str());
    assert!(
        context["context"]["openclawVersion"]
            .as_str()
            .unwrap()
            .contains("2026.9.6"),
        "{context}"
    );
    let config = context["context"]["configContent"].as_str().unwrap();
    assert!(config.contains("<redacted>"), "{config}");
    let token = std::env::var("OPENCLAW_GATEWAY_TOKEN").unwrap();
    assert!(
        !last_user_text().contains(&token),
        "the gateway token left the machine"
    );
    // Tools on this node need the operator's approval of its surface first.
    node.approve_surface();
    writeln!(stdin, "[[exec:echo doctor-ran-{marker}]]").unwrap();
    stdin.flush().unwrap();
    wait_stdout(&format!("doctor-ran-{marker}"), &node);
    let log = node.wait_log("system.run → ok (allowed:", Duration::from_secs(30));
    assert!(log.contains("doctor: the agent runs"), "{log}");
    // End of input ends the session and the node.
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = node.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the doctor did not end at EOF");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(0), "{}", node.log());
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_structured_results_from_both_paths() {
    let message = unique("structured please");
    let mut contents = Vec::new();
    for via in ["cli", "gateway"] {
        let run = run(real_router().args([
            "--via",
            via,
            "--format",
            "structured",
            "-a",
            "main",
            "-m",
            &message,
            "--timeout",
            "120",
            "--meta",
            "--exit-code",
        ]));
        assert_eq!(run.code, Some(0), "{}", run.stdout);
        let json = run.json();
        let details = &json["details"];
        assert_eq!(details["status"], "ok", "{via}: {details}");
        assert!(details["runId"].is_string(), "{via}: {details}");
        assert_eq!(details["model"], "fakellm/fake-model", "{via}");
        assert!(details["durationMs"].is_number(), "{via}");
        assert!(details["usage"].is_object(), "{via}: {details}");
        assert_eq!(
            details["payloads"][0]["text"],
            format!("ECHO: {message}"),
            "{via}"
        );
        contents.push(run.content());
    }
    assert_eq!(contents[0], format!("ECHO: {message}"));
    assert_eq!(contents[0], contents[1], "the same answer either way");
    // OpenClaw's error envelope, read from the real CLI.
    let run = run(real_router().args([
        "--format",
        "structured",
        "-a",
        "nosuchagent",
        "-m",
        "x",
        "--timeout",
        "120",
    ]));
    let details = &run.json()["details"];
    assert_eq!(details["status"], "error", "{details}");
    assert!(run.content().contains("nosuchagent"), "{}", run.stdout);
}
