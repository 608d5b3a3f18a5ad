//! A node process under test, against the fake gateway.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::gateway::{Config, FakeGateway, TOKEN};

pub const LONG: Duration = Duration::from_secs(15);

/// The node binary, its directories, and what it printed.
pub struct Node {
    pub child: Child,
    pub stderr: Arc<Mutex<String>>,
    pub dir: tempfile::TempDir,
}

impl Node {
    pub fn start(url: &str, args: &[&str]) -> Node {
        Self::start_with_env(url, args, &[])
    }

    pub fn start_with_env(url: &str, args: &[&str], env: &[(&str, &Path)]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        let (child, stderr) = Self::spawn(dir.path(), url, args, env);
        Node { child, stderr, dir }
    }

    /// A node started with exactly `args` (after the router's own path),
    /// state and workspace in a directory of its own.
    pub fn start_args(args: &[&str]) -> Node {
        Self::start_args_env(args, &[])
    }

    /// The same, with these variables set.
    pub fn start_args_env(args: &[&str], env: &[(&str, &str)]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        let mut child = super::router()
            .envs(env.iter().copied())
            .args(args)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--workspace")
            .arg(dir.path().join("ws"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = super::collect(child.stderr.take().unwrap());
        Node { child, stderr, dir }
    }

    /// The same node (its state and workspace) started again with `args`.
    pub fn restart(&mut self, url: &str, args: &[&str]) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        (self.child, self.stderr) = Self::spawn(self.dir.path(), url, args, &[]);
    }

    pub fn spawn(
        dir: &Path,
        url: &str,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> (Child, Arc<Mutex<String>>) {
        let mut cmd = super::router();
        for (key, value) in env {
            cmd.env(key, value);
        }
        cmd.args(["node", "--gateway", url, "--display-name", "test-node"])
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--workspace")
            .arg(dir.join("ws"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = super::collect(child.stderr.take().unwrap());
        (child, stderr)
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub async fn wait_stderr(&self, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.stderr().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "node never printed {needle:?}; it printed:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn device_id(&self) -> String {
        let identity: Value = serde_json::from_slice(
            &std::fs::read(self.state().join("device-identity.json")).unwrap(),
        )
        .unwrap();
        identity["deviceId"].as_str().unwrap().to_owned()
    }

    pub fn signal(&self, sig: i32) {
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }

    pub async fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "node did not exit; it printed:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Everything `pipe` yields, as it arrives.
/// Stopped as a user stops it (SIGTERM), so that what it started — local
/// MCP servers and their children — is stopped by the node itself; KILLed
/// only if it does not exit in time. (A KILLed node left a server's child
/// running for minutes, which a later end-to-end test counted as a leak.)
impl Drop for Node {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: a plain kill(2) on our own child's pid.
            unsafe {
                libc::kill(self.child.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A gateway and a node connected to it with `args`.
pub async fn connected(config: Config, args: &[&str]) -> (FakeGateway, Node) {
    let gw = FakeGateway::start(config).await;
    let mut all = vec!["--token", TOKEN];
    all.extend(args);
    let node = Node::start(&gw.url(), &all);
    gw.wait_hellos(1, LONG).await;
    (gw, node)
}

pub fn payload(result: &Value) -> Value {
    assert_eq!(result["ok"], true, "{result}");
    serde_json::from_str(result["payloadJSON"].as_str().unwrap()).unwrap()
}

pub fn error_code(result: &Value) -> String {
    assert_eq!(result["ok"], false, "{result}");
    result["error"]["code"].as_str().unwrap().to_owned()
}

/// Replaces the node's approvals document with an allowlist of `patterns`
/// for every agent, as `openclaw approvals allowlist add --node` does.
pub async fn allowlist(gw: &FakeGateway, patterns: Value) -> Value {
    allowlist_for(gw, "*", patterns).await
}

/// As [`allowlist`], for one agent only.
pub async fn allowlist_for(gw: &FakeGateway, agent: &str, patterns: Value) -> Value {
    let hash = payload(&gw.invoke("system.execApprovals.get", json!({})).await)["hash"].clone();
    let entries: Vec<Value> = patterns
        .as_array()
        .unwrap()
        .iter()
        .map(|p| json!({"pattern": p}))
        .collect();
    let file = json!({"version": 1, "agents": {agent: {"allowlist": entries}}});
    payload(
        &gw.invoke(
            "system.execApprovals.set",
            json!({"file": file, "baseHash": hash}),
        )
        .await,
    )
}

/// The node under `script`, so its stdin and stderr are a terminal; what it
/// shows is read from script's stdout, answers go to script's stdin.
pub struct TtyNode {
    pub ws: PathBuf,
    pub child: Child,
    pub screen: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
    pub state: PathBuf,
}

impl TtyNode {
    pub fn start(url: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        let state = dir.path().join("state");
        let (child, screen) = super::under_terminal(&[
            super::ROUTER,
            "node",
            "--gateway",
            url,
            "--token",
            TOKEN,
            "--state-dir",
            state.to_str().unwrap(),
            "--workspace",
            dir.path().join("ws").to_str().unwrap(),
        ]);
        TtyNode {
            ws: dir.path().join("ws"),
            child,
            screen,
            _dir: dir,
            state,
        }
    }

    pub fn prompts(&self) -> usize {
        self.screen.lock().unwrap().matches("Allow [o]nce").count()
    }

    pub async fn wait_prompts(&self, n: usize) {
        let deadline = Instant::now() + LONG;
        while self.prompts() < n {
            assert!(
                Instant::now() < deadline,
                "no prompt; screen:\n{}",
                self.screen.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn answer(&mut self, text: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }
}

impl Drop for TtyNode {
    /// The node first: it runs under `script` in a terminal session of
    /// its own and ignores the SIGHUP that killing `script` sends it, so
    /// killing `script` alone left it running.
    fn drop(&mut self) {
        for pid in super::children_of(self.child.id() as i32) {
            // SAFETY: a plain kill(2) on our own grandchild's pid.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while super::alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn which(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap()
}

pub async fn tls_gateway() -> (FakeGateway, super::gateway::TestCert) {
    let cert = super::gateway::TestCert::self_signed();
    let gw = FakeGateway::start(Config {
        tls: Some(cert.clone()),
        ..Config::default()
    })
    .await;
    (gw, cert)
}

/// Starts `sleep 30` through `run_command`; its invocation id and pid.
pub async fn start_sleeper(gw: &FakeGateway, node: &Node) -> (String, i32) {
    let pid_file = node.ws().join("pid");
    let script = format!("echo $$ > {}; exec sleep 30", pid_file.display());
    let id = gw.request(
        "run_command",
        &json!({"command": ["/bin/sh", "-c", script]}).to_string(),
        60_000,
    );
    let deadline = Instant::now() + LONG;
    loop {
        if let Ok(pid) = std::fs::read_to_string(&pid_file)
            .unwrap_or_default()
            .trim()
            .parse()
        {
            return (id, pid);
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
