//! `clawbot_router node` against a fake gateway speaking protocol v4
//! (tests/common/gateway.rs). What the node reads and writes about itself:
//! `--log-file` and `--env-file`, the system-info and config tools
//! (`read_config` with secrets redacted), and the audit log of every
//! invocation.

#![cfg(unix)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, connected, error_code, payload};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn log_file_takes_the_log_and_env_file_the_token() {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("node.env");
    std::fs::write(
        &env_file,
        format!("# secrets\nOPENCLAW_GATEWAY_TOKEN={TOKEN}\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let log = dir.path().join("node.log");
    let node = Node::start(
        &gw.url(),
        &[
            "--env-file",
            env_file.to_str().unwrap(),
            "--log-file",
            log.to_str().unwrap(),
        ],
    );
    gw.wait_hellos(1, LONG).await;
    let deadline = Instant::now() + LONG;
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("connected to")
    {
        assert!(
            Instant::now() < deadline,
            "no log in the file: {}",
            node.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(node.stderr(), "", "the log went to the file");
    assert_eq!(
        gw.connects()[0]["auth"]["token"],
        TOKEN,
        "the token from the file"
    );
    let mode = std::fs::metadata(&log).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the log is private");
    // A file others can read is refused before connecting.
    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut refused = Node::start(&gw.url(), &["--env-file", env_file.to_str().unwrap()]);
    assert_eq!(refused.wait_exit(LONG).await, Some(2));
    assert!(
        refused.stderr().contains("chmod 600"),
        "{}",
        refused.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn system_info_and_config_tools_answer() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let info = payload(&gw.invoke("system_info", json!({})).await);
    assert_eq!(info["os"], std::env::consts::OS);
    assert!(info["path"].is_string());
    assert_eq!(
        Path::new(info["workspace"].as_str().unwrap()),
        node.ws().canonicalize().unwrap()
    );
}

/// `read_config` through a node whose OPENCLAW_CONFIG_PATH is `config`.
async fn read_config_via(config: &Path) -> Value {
    let gw = FakeGateway::start(Config::default()).await;
    let _node = Node::start_with_env(
        &gw.url(),
        &["--token", TOKEN],
        &[("OPENCLAW_CONFIG_PATH", config)],
    );
    gw.wait_hellos(1, LONG).await;
    gw.invoke("read_config", json!({})).await
}

#[tokio::test(flavor = "multi_thread")]
async fn read_config_sends_the_users_config_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("openclaw.json");
    std::fs::write(
        &config,
        r#"{ // gateway
  "gateway": { "auth": { "mode": "token", "token": "s3cr3t-gateway-token" } },
  models: { providers: { fakellm: { baseUrl: "http://127.0.0.1:18555/v1", apiKey: 'sk-live-123' } } },
}"#,
    )
    .unwrap();
    let r = payload(&read_config_via(&config).await);
    let content = r["content"].as_str().unwrap();
    assert_eq!(Path::new(r["path"].as_str().unwrap()), config);
    assert!(
        content.contains("http://127.0.0.1:18555/v1") && content.contains("// gateway"),
        "{content}"
    );
    assert!(
        !content.contains("s3cr3t-gateway-token") && !content.contains("sk-live-123"),
        "{content}"
    );
    assert_eq!(content.matches("<redacted>").count(), 2, "{content}");

    let missing = read_config_via(&dir.path().join("absent.json")).await;
    assert_eq!(error_code(&missing), "NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_invocation_lands_in_the_audit_log() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let _ = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    let _ = gw.invoke("run_command", json!({"command": "id"})).await;
    let log = std::fs::read_to_string(node.state().join("audit.jsonl")).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert_eq!(lines[0]["command"], "system.which");
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(lines[1]["decision"], "refused:APPROVAL_REQUIRED");
    for l in &lines {
        assert!(
            l["ts"].is_u64()
                && l["durationMs"].is_u64()
                && l["paramsSha256"].as_str().unwrap().len() == 64
        );
    }
}
