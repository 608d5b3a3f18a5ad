//! Shared by the end-to-end files (tests/e2e_*.rs) against the real
//! OpenClaw sandbox: its environment, the `openclaw` CLI in it, the fake
//! model's logs, and a real node joined to its gateway.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::*;

/// The sandbox's environment, as `scripts/sandbox.sh env` exports it.
pub fn sandbox() -> Vec<(String, String)> {
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
pub fn real_router() -> Command {
    let mut cmd = router();
    cmd.envs(sandbox());
    cmd
}

/// The same for another build of ours (a release archive's: tests/dist.rs).
fn real_program(program: Option<&Path>) -> Command {
    let Some(program) = program else {
        return real_router();
    };
    let mut cmd = super::program(program);
    cmd.envs(sandbox());
    cmd
}

/// `openclaw ARGS` in the sandbox: stdout, stderr, exit code.
pub fn openclaw(args: &[&str]) -> (String, String, Option<i32>) {
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

/// What one `openclaw nodes invoke … --json` answered.
pub struct Invoked {
    /// Its JSON answer: stdout, else the last JSON line it printed on
    /// stderr (a failure's).
    pub json: Option<Value>,
    /// All it printed.
    pub said: String,
    /// It exited 0.
    pub ok: bool,
}

impl Invoked {
    /// The node's payload, or all the CLI printed.
    pub fn payload(self) -> Result<Value, String> {
        match self.json {
            Some(answer) if self.ok && answer["ok"] != false => Ok(answer["payload"].clone()),
            _ => Err(self.said),
        }
    }

    /// The error an operator reads: the node's words (`Error: …`), else the
    /// gateway's reason, up to the end of its line or string.
    pub fn error_text(&self) -> String {
        let said = &self.said;
        let at = said
            .find("Error: ")
            .or_else(|| said.find("Reason: ").map(|r| r + "Reason: ".len()))
            .unwrap_or_else(|| panic!("no error in {said}"));
        said[at..]
            .split(['"', '\n'])
            .next()
            .unwrap()
            .trim()
            .to_owned()
    }
}

/// `openclaw nodes invoke --node NODE --command COMMAND --params PARAMS
/// --json`, with `--invoke-timeout MS` (and the CLI's own timeout 30 s
/// past it) when given.
pub fn nodes_invoke(node: &str, command: &str, params: &Value, invoke_ms: Option<u64>) -> Invoked {
    let params = params.to_string();
    let mut args = vec![
        "nodes".to_owned(),
        "invoke".into(),
        "--node".into(),
        node.into(),
        "--command".into(),
        command.into(),
        "--params".into(),
        params,
        "--json".into(),
    ];
    if let Some(ms) = invoke_ms {
        args.extend([
            "--invoke-timeout".into(),
            ms.to_string(),
            "--timeout".into(),
            (ms + 30_000).to_string(),
        ]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (stdout, stderr, code) = openclaw(&args);
    let json = serde_json::from_str(&stdout).ok().or_else(|| {
        stderr
            .lines()
            .rfind(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok())
    });
    Invoked {
        json,
        said: format!("{stdout}{stderr}"),
        ok: code == Some(0),
    }
}

pub fn openclaw_json(args: &[&str]) -> Value {
    let (stdout, stderr, code) = openclaw(args);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("openclaw {args:?} gave no JSON ({e}, rc {code:?}):\n{stdout}\n{stderr}")
    })
}

/// What the fake model last received as the user's own words.
pub fn last_user_text() -> String {
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

/// The sandbox model's request log so far.
pub fn model_log() -> String {
    std::fs::read_to_string(std::env::var("CLAWBOT_SANDBOX_MODEL_LOG").unwrap()).unwrap()
}

pub struct RealNode {
    pub stdin: Option<std::process::ChildStdin>,
    pub child: Child,
    pub log: PathBuf,
    pub name: String,
    pub _dir: tempfile::TempDir,
    pub ws: PathBuf,
    /// Another build of ours to run, if not this one's.
    program: Option<PathBuf>,
}

impl RealNode {
    pub fn start(name: &str, args: &[&str]) -> Self {
        Self::start_with(name, args, None)
    }

    /// With `stdout`, stdin is a pipe (`self.stdin`) and stdout goes to that
    /// file: what a doctor session wants.
    pub fn start_with(name: &str, args: &[&str], stdout: Option<&std::path::Path>) -> Self {
        Self::start_env(name, args, stdout, &[])
    }

    /// The same, with these variables set (e.g. `CLAUDE_CONFIG_DIR`).
    pub fn start_env(
        name: &str,
        args: &[&str],
        stdout: Option<&std::path::Path>,
        env: &[(&str, &Path)],
    ) -> Self {
        Self::start_program(None, name, args, stdout, env)
    }

    /// Any of those, run by `program` (another build of ours) if given.
    pub fn start_program(
        program: Option<&Path>,
        name: &str,
        args: &[&str],
        stdout: Option<&std::path::Path>,
        env: &[(&str, &Path)],
    ) -> Self {
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
        let mut child = Self::spawn_env(program, dir.path(), name, args, stdin, stdout, env);
        RealNode {
            stdin: child.stdin.take(),
            child,
            log,
            name: name.to_owned(),
            _dir: dir,
            ws,
            program: program.map(Path::to_path_buf),
        }
    }

    fn spawn_env(
        program: Option<&Path>,
        dir: &Path,
        name: &str,
        args: &[&str],
        stdin: Stdio,
        stdout: Stdio,
        env: &[(&str, &Path)],
    ) -> Child {
        real_program(program)
            .envs(env.iter().copied())
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
    pub fn restart(&mut self, name: &str, args: &[&str]) {
        self.stop();
        self.child = Self::spawn_env(
            self.program.as_deref(),
            self._dir.path(),
            name,
            args,
            Stdio::null(),
            Stdio::null(),
            &[],
        );
        self.name = name.to_owned();
    }

    pub fn stop(&mut self) {
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

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn wait_log(&self, needle: &str, within: Duration) -> String {
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
    pub fn approve_surface(&self) {
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

    pub fn invoke(&self, command: &str, params: Value) -> Value {
        let invoked = nodes_invoke(&self.name, command, &params, None);
        invoked
            .json
            .unwrap_or_else(|| panic!("no JSON from nodes invoke {command}:\n{}", invoked.said))
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How often `needle` appears in the sandbox gateway's log so far.
pub fn gateway_log_count(needle: &str) -> usize {
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

/// One agent turn started by an approver (`scripts/approver.mjs`): each
/// exec approval it sees is resolved with `decide(command)`; the turn's
/// text, and the approvals that were raised.
pub fn turn_with_approvals(
    message: &str,
    decide: &dyn Fn(&str) -> &'static str,
) -> (String, usize) {
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

/// OpenClaw's own node host (`openclaw node run`) joined to the sandbox
/// gateway with `config` as its OpenClaw config, in a directory of its
/// own: what our answers are compared with. Stopped with its whole tree
/// on drop, and whatever it left behind (OpenClaw leaves its browser
/// running when stopped: node-commands.md §1.7) is found by its directory
/// in the command line and stopped too.
pub struct TheirNode {
    pub child: Child,
    pub name: String,
    pub dir: tempfile::TempDir,
}

impl TheirNode {
    pub fn start(name: &str, config: &Value) -> Self {
        Self::start_env(name, config, &[])
    }

    /// The same, with these variables set (e.g. `CLAUDE_CONFIG_DIR`, `HOME`).
    pub fn start_env(name: &str, config: &Value, env: &[(&str, &Path)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("openclaw.json"), config.to_string()).unwrap();
        let url = std::env::var("OPENCLAW_GATEWAY_URL").unwrap();
        let port = url.rsplit(':').next().unwrap().to_owned();
        let child = Command::new("openclaw")
            .args(["node", "run", "--host", "127.0.0.1", "--port", &port])
            .args(["--no-tls", "--display-name", name])
            .envs(sandbox())
            .env("OPENCLAW_STATE_DIR", dir.path().join("state"))
            .env("OPENCLAW_CONFIG_PATH", dir.path().join("openclaw.json"))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("node.log")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("node.err")).unwrap())
            .process_group(0)
            .spawn()
            .expect("openclaw on PATH");
        TheirNode {
            child,
            name: name.to_owned(),
            dir,
        }
    }

    /// Approves its pairing request as an operator does.
    pub fn approve(&self) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let pending = openclaw_json(&["nodes", "pending", "--json"]);
            if let Some(request) = pending
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["displayName"] == self.name.as_str())
            {
                let id = request["requestId"].as_str().unwrap();
                let (_, stderr, code) = openclaw(&["nodes", "approve", id]);
                assert_eq!(code, Some(0), "{stderr}");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "openclaw node run never asked to pair"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for TheirNode {
    fn drop(&mut self) {
        let group = self.child.id() as i32;
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
        let _ = self.child.wait();
        let mark = self.dir.path().to_string_lossy().into_owned();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let line = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&line).contains(&mark) {
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}
