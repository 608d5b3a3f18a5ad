//! End to end beyond plain loopback (issue 11), against the real OpenClaw
//! 2026.9.6 that `scripts/e2e.sh` starts beside the main sandbox:
//!
//! - a gateway serving `wss://` with its self-signed certificate
//!   (`gateway.tls.autoGenerate`) on loopback: the router's gateway path,
//!   the node, the doctor and `mcp` over TLS with the pin; a wrong and a
//!   missing pin refused; the node's remembered pin, and a regenerated
//!   certificate refused with how to reset it;
//! - (as root) a gateway bound to a veth address whose clients run in a
//!   network namespace, so OpenClaw treats them as remote: node pairing
//!   with `openclaw devices approve`, operator pairing for `--via gateway`,
//!   the device tokens reused, plaintext refused, and a node enrolled with
//!   a setup code from `openclaw qr --setup-code-only --json` and restarted
//!   without it.
//!
//! Ignored by a plain `cargo test`; `scripts/e2e.sh` runs them.

#![cfg(unix)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ROUTER, router, run};
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);

/// A sandbox's `scripts/sandbox.sh env`, from the file e2e.sh wrote.
#[derive(Clone)]
struct Sandbox(Vec<(String, String)>);

impl Sandbox {
    fn from(var: &str) -> Self {
        let path =
            std::env::var(var).unwrap_or_else(|_| panic!("{var}: run these with scripts/e2e.sh"));
        let text = std::fs::read_to_string(path).unwrap();
        let mut vars = Vec::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("export ") else {
                continue;
            };
            for word in shell_words::split(rest).unwrap() {
                if let Some((k, v)) = word.split_once('=') {
                    vars.push((
                        k.to_owned(),
                        v.replace("$PATH", &std::env::var("PATH").unwrap()),
                    ));
                }
            }
        }
        Sandbox(vars)
    }

    fn tls() -> Self {
        Self::from("CLAWBOT_E2E_TLS_ENV")
    }

    /// The remote gateway, or `None` (said on stderr) where this machine
    /// cannot make a second host; CI runs as root and must have it.
    fn remote() -> Option<Self> {
        if let Ok(why) = std::env::var("CLAWBOT_E2E_REMOTE_SKIP") {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the remote tests: {why}"
            );
            eprintln!("skipped: {why}");
            return None;
        }
        Some(Self::from("CLAWBOT_E2E_REMOTE_ENV"))
    }

    fn get(&self, key: &str) -> String {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    fn url(&self) -> String {
        self.get("OPENCLAW_GATEWAY_URL")
    }

    /// The gateway certificate's fingerprint now (it can be regenerated).
    fn pin(&self) -> String {
        let cert = Path::new(&self.get("OPENCLAW_STATE_DIR")).join("gateway/tls/gateway-cert.pem");
        let out = Command::new("openssl")
            .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
            .arg(&cert)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        text.trim().rsplit('=').next().unwrap().to_owned()
    }

    /// `openclaw ARGS` on the gateway's own machine (its local config knows
    /// the certificate; the URL override would not).
    fn openclaw(&self, args: &[&str]) -> (String, String, Option<i32>) {
        let out = Command::new("openclaw")
            .args(args)
            .envs(self.0.iter().cloned())
            .env_remove("OPENCLAW_GATEWAY_URL")
            .env_remove("OPENCLAW_GATEWAY_TLS_FINGERPRINT")
            .stdin(Stdio::null())
            .output()
            .expect("openclaw on PATH");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.code(),
        )
    }

    fn openclaw_json(&self, args: &[&str]) -> Value {
        let (out, err, _) = self.openclaw(args);
        serde_json::from_str(&out).unwrap_or_else(|_| panic!("openclaw {args:?}: {out}\n{err}"))
    }

    /// The router with this sandbox's environment (URL, token, pin).
    fn router(&self) -> Command {
        let mut cmd = router();
        cmd.envs(self.0.iter().cloned());
        cmd.env("OPENCLAW_GATEWAY_TLS_FINGERPRINT", self.pin());
        cmd
    }

    /// The router inside the network namespace (a remote client).
    fn router_remote(&self) -> Command {
        let mut cmd = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/netns.sh"));
        cmd.arg("exec").arg(ROUTER);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("OPENCLAW_") || k.starts_with("CLAWBOT_ROUTER_") {
                cmd.env_remove(k);
            }
        }
        cmd.envs(self.0.iter().cloned());
        cmd.env("OPENCLAW_GATEWAY_TLS_FINGERPRINT", self.pin());
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Approves a pending device request by id, as an operator would.
    fn approve_device(&self, request: &str) {
        let (out, err, code) = self.openclaw(&["devices", "approve", request]);
        assert_eq!(code, Some(0), "devices approve {request}: {out}\n{err}");
    }

    /// `system.which` on the node `name`, through the gateway, must work.
    fn which_on(&self, name: &str) {
        let params = r#"{"bins":["sh"]}"#;
        let invoked = self.openclaw_json(&[
            "nodes",
            "invoke",
            "--node",
            name,
            "--command",
            "system.which",
            "--params",
            params,
            "--json",
        ]);
        assert_eq!(invoked["ok"], true, "{invoked}");
    }

    fn approve_surface(&self, request: &str) {
        let (out, err, code) = self.openclaw(&["nodes", "approve", request]);
        assert_eq!(code, Some(0), "nodes approve {request}: {out}\n{err}");
    }

    fn restart_gateway(&self) {
        let status = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sandbox.sh"))
            .arg("restart-gateway")
            .envs(self.sandbox_settings())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The CLAWBOT_SANDBOX_* settings that name this sandbox.
    fn sandbox_settings(&self) -> Vec<(String, String)> {
        let url = self.url();
        let port = url.rsplit(':').next().unwrap().to_owned();
        let dir = Path::new(&self.get("OPENCLAW_STATE_DIR"))
            .parent()
            .unwrap()
            .display()
            .to_string();
        let model = self.get("CLAWBOT_SANDBOX_MODEL_PORT");
        let mut vars = vec![
            ("CLAWBOT_SANDBOX_DIR".to_owned(), dir),
            ("CLAWBOT_SANDBOX_PORT".to_owned(), port),
            ("CLAWBOT_SANDBOX_TLS".to_owned(), "1".to_owned()),
        ];
        if !model.is_empty() {
            vars.push(("CLAWBOT_SANDBOX_MODEL_PORT".to_owned(), model));
        }
        vars
    }
}

/// A node process, its state directory and its log.
struct Node {
    child: Child,
    dir: tempfile::TempDir,
    log: PathBuf,
}

impl Node {
    fn start(mut cmd: Command, args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        Self::start_in(dir, &mut cmd, args)
    }

    fn start_in(dir: tempfile::TempDir, cmd: &mut Command, args: &[&str]) -> Self {
        let log = dir
            .path()
            .join(format!("node-{}.log", uuid::Uuid::new_v4().simple()));
        let child = cmd
            .arg("node")
            .args(args)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--workspace")
            .arg(dir.path().join("ws"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Node { child, dir, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for `needle`; returns what follows it on its line.
    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + MINUTE;
        loop {
            let log = self.log();
            if let Some(at) = log.find(needle) {
                let rest = &log[at + needle.len()..];
                return rest.lines().next().unwrap_or("").trim().to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "the node never printed {needle:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + MINUTE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the node did not exit:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn stop(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.wait_exit();
    }

    /// Stops it and starts it again on the same state, with `cmd` + `args`.
    fn restart(mut self, mut cmd: Command, args: &[&str]) -> Self {
        self.stop();
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        Self::start_in(dir, &mut cmd, args)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.stop();
        }
    }
}

fn request_after(line: &str) -> String {
    line.split_whitespace().next().unwrap().to_owned()
}

// ---- wss:// on loopback --------------------------------------------------------

#[test]
#[ignore = "needs the TLS sandbox: scripts/e2e.sh"]
fn e2e_tls_the_gateway_path_over_wss_with_the_pin_and_refusals_without_it() {
    let sandbox = Sandbox::tls();
    let url = sandbox.url();
    assert!(url.starts_with("wss://127.0.0.1:"), "{url}");
    let ok = run(sandbox.router().args([
        "--via",
        "gateway",
        "-m",
        "over tls",
        "--timeout",
        "60",
        "--exit-code",
    ]));
    assert_eq!(ok.content(), "ECHO: over tls\n", "{}", ok.stdout);
    let pin = sandbox.pin();
    let wrong = "AB:".repeat(31) + "AB";
    let refused = run(sandbox.router().args([
        "--via",
        "gateway",
        "--lang",
        "en",
        "--exit-code",
        "-m",
        "x",
        "--tls-fingerprint",
        &wrong,
    ]));
    assert!(
        refused.content().contains(&format!(
            "presented a certificate with SHA-256 fingerprint {pin}, but {wrong} is pinned"
        )),
        "{}",
        refused.stdout
    );
    assert_eq!(refused.code, Some(1));
    let unpinned = run(sandbox
        .router()
        .env_remove("OPENCLAW_GATEWAY_TLS_FINGERPRINT")
        .args(["--via", "gateway", "--lang", "en", "--exit-code", "-m", "x"]));
    assert!(
        unpinned
            .content()
            .contains("presented a certificate the system does not trust")
            && unpinned
                .content()
                .contains(&format!("--tls-fingerprint {pin}")),
        "{}",
        unpinned.stdout
    );
    assert_eq!(unpinned.code, Some(1));
}

#[test]
#[ignore = "needs the TLS sandbox: scripts/e2e.sh"]
fn e2e_tls_the_node_pins_remembers_and_refuses_a_regenerated_certificate() {
    let sandbox = Sandbox::tls();
    let node = Node::start(sandbox.router(), &["--display-name", "e2e-tls-node"]);
    let request = request_after(&node.wait_for("openclaw nodes approve "));
    sandbox.approve_surface(&request);
    node.wait_for(&format!("pairing request {request} approved"));
    sandbox.which_on("e2e-tls-node");
    node.wait_for("remembered the gateway's certificate");
    // No flag, no variable: the pin it remembered.
    let mut bare = sandbox.router();
    bare.env_remove("OPENCLAW_GATEWAY_TLS_FINGERPRINT");
    let node = node.restart(bare, &["--display-name", "e2e-tls-node"]);
    node.wait_for("connected to wss://");
    // The gateway's certificate regenerated: refused, with how to reset.
    let old = sandbox.pin();
    let tls_dir = Path::new(&sandbox.get("OPENCLAW_STATE_DIR")).join("gateway/tls");
    std::fs::remove_dir_all(&tls_dir).unwrap();
    sandbox.restart_gateway();
    let new = sandbox.pin();
    assert_ne!(old, new);
    let mut bare = sandbox.router();
    bare.env_remove("OPENCLAW_GATEWAY_TLS_FINGERPRINT");
    let mut node = node.restart(bare, &["--display-name", "e2e-tls-node"]);
    assert_eq!(node.wait_exit(), Some(1));
    let log = node.log();
    assert!(
        log.contains(&format!("fingerprint {new}, but {old} is pinned")),
        "{log}"
    );
    assert!(
        log.contains("gateway-pins.json") && log.contains("--tls-fingerprint"),
        "{log}"
    );
}

#[test]
#[ignore = "needs the TLS sandbox: scripts/e2e.sh"]
fn e2e_tls_a_doctor_session_over_wss() {
    let sandbox = Sandbox::tls();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let out = run(sandbox
        .router()
        .args([
            "node",
            "--doctor",
            "--agent",
            "main",
            "--message",
            "doctor over tls",
        ])
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .stdin(Stdio::null()));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("doctor over tls") && out.stdout.starts_with("ECHO: "),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
}

#[test]
#[ignore = "needs the TLS sandbox: scripts/e2e.sh"]
fn e2e_tls_mcp_over_wss() {
    let sandbox = Sandbox::tls();
    let mut child = sandbox
        .router()
        .args(["mcp", "--via", "gateway", "--lang", "en", "--timeout", "60"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "clawbot_router", "arguments": {"message": "mcp over tls"}}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let answer = loop {
        let line = rx.recv_timeout(MINUTE).expect("an answer to the call");
        let value: Value = serde_json::from_str(&line).unwrap();
        if value["id"] == 2 {
            break value;
        }
    };
    drop(stdin);
    assert_eq!(
        answer["result"]["structuredContent"]["content"], "ECHO: mcp over tls\n",
        "{answer}"
    );
    assert_eq!(answer["result"]["isError"], false);
    let _ = child.wait();
}

// ---- A remote gateway (network namespace) -------------------------------------

#[test]
#[ignore = "needs the remote sandbox: scripts/e2e.sh as root"]
fn e2e_remote_a_node_pairs_with_devices_approve_and_serves() {
    let Some(sandbox) = Sandbox::remote() else {
        return;
    };
    assert!(sandbox.url().starts_with("wss://198.18.0.1:"));
    let node = Node::start(
        sandbox.router_remote(),
        &["--display-name", "e2e-remote-node"],
    );
    // Remote: the device needs an operator's approval first.
    let request = request_after(&node.wait_for("openclaw devices approve "));
    sandbox.approve_device(&request);
    let request = request_after(&node.wait_for("openclaw nodes approve "));
    sandbox.approve_surface(&request);
    node.wait_for(&format!("pairing request {request} approved"));
    sandbox.which_on("e2e-remote-node");
    let listed = sandbox
        .openclaw_json(&["nodes", "list", "--json"])
        .to_string();
    assert!(
        listed.contains("198.18.0.2"),
        "seen from the namespace: {listed}"
    );
}

#[test]
#[ignore = "needs the remote sandbox: scripts/e2e.sh as root"]
fn e2e_remote_the_routers_operator_device_is_approved_then_its_token_reused() {
    let Some(sandbox) = Sandbox::remote() else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let call = |message: &str, token: bool| {
        let mut cmd = sandbox.router_remote();
        cmd.env("CLAWBOT_ROUTER_STATE_DIR", state.path());
        if !token {
            cmd.env_remove("OPENCLAW_GATEWAY_TOKEN");
        }
        run(cmd.args([
            "--via",
            "gateway",
            "--lang",
            "en",
            "--exit-code",
            "--timeout",
            "60",
            "-m",
            message,
        ]))
    };
    let first = call("remote operator", true);
    let content = first.content();
    let request = content
        .split("openclaw devices approve ")
        .nth(1)
        .unwrap_or_else(|| panic!("no approve command: {content}"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    assert!(content.contains("PAIRING_REQUIRED"), "{content}");
    assert_eq!(first.code, Some(1));
    sandbox.approve_device(&request);
    let second = call("remote operator", true);
    assert_eq!(
        second.content(),
        "ECHO: remote operator\n",
        "{}",
        second.stdout
    );
    // No shared token now: the device token this device was issued.
    let third = call("remote operator again", false);
    assert_eq!(
        third.content(),
        "ECHO: remote operator again\n",
        "{}",
        third.stdout
    );
}

#[test]
#[ignore = "needs the remote sandbox: scripts/e2e.sh as root"]
fn e2e_remote_plaintext_to_a_public_looking_address_is_refused() {
    let Some(sandbox) = Sandbox::remote() else {
        return;
    };
    let plain = sandbox.url().replace("wss://", "ws://");
    let out = run(sandbox
        .router_remote()
        .env_remove("OPENCLAW_GATEWAY_TLS_FINGERPRINT")
        .args([
            "--via",
            "gateway",
            "--gateway",
            &plain,
            "--lang",
            "en",
            "-m",
            "x",
        ]));
    assert!(
        out.content()
            .contains("refusing plaintext ws:// to 198.18.0.1"),
        "{}",
        out.stdout
    );
    let mut node = Node::start(
        {
            let mut cmd = sandbox.router_remote();
            cmd.env_remove("OPENCLAW_GATEWAY_TLS_FINGERPRINT");
            cmd
        },
        &["--gateway", &plain],
    );
    assert_eq!(node.wait_exit(), Some(1));
    assert!(
        node.log()
            .contains("refusing plaintext ws:// to 198.18.0.1"),
        "{}",
        node.log()
    );
}

#[test]
#[ignore = "needs the remote sandbox: scripts/e2e.sh as root"]
fn e2e_remote_a_setup_code_enrols_the_node_and_a_bare_restart_reuses_its_device_token() {
    let Some(sandbox) = Sandbox::remote() else {
        return;
    };
    let qr = sandbox.openclaw_json(&["qr", "--setup-code-only", "--json"]);
    let code = qr["setupCode"].as_str().expect("a setup code").to_owned();
    // What must never leak is the bootstrap token inside it.
    let decoded: Value = {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&code)
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    };
    let secret = decoded["bootstrapToken"].as_str().unwrap().to_owned();
    // Nothing but the code: no URL, no token, no pin in the environment.
    let bare = || {
        let mut cmd = sandbox.router_remote();
        for key in [
            "OPENCLAW_GATEWAY_URL",
            "OPENCLAW_GATEWAY_TOKEN",
            "OPENCLAW_GATEWAY_TLS_FINGERPRINT",
        ] {
            cmd.env_remove(key);
        }
        cmd
    };
    let mut with_code = bare();
    with_code.env("CLAWBOT_ROUTER_SETUP_CODE", &code);
    let node = Node::start(with_code, &["--display-name", "e2e-setup-code"]);
    // OpenClaw's qr code is the mobile profile: a remote node still needs approval.
    let request = request_after(&node.wait_for("openclaw devices approve "));
    sandbox.approve_device(&request);
    node.wait_for("connected to wss://198.18.0.1:");
    assert!(
        !node.log().contains(&code) && !node.log().contains(&secret),
        "the code is never printed"
    );
    // Restarted with nothing at all: the saved gateway, pin and device token.
    let node = node.restart(bare(), &["--display-name", "e2e-setup-code"]);
    node.wait_for("connected to wss://198.18.0.1:");
    let log = node.log();
    assert!(
        !log.contains("devices approve"),
        "no second approval: {log}"
    );
    let state = node.dir.path().join("state");
    for entry in std::fs::read_dir(&state).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        assert!(
            !text.contains(&code) && !text.contains(&secret),
            "the code is never written"
        );
    }
}
