//! `clawbot_router node` against a fake gateway speaking protocol v4
//! (tests/common/gateway.rs). Joining a gateway: pairing and the operator's
//! approve hints, the shared token (flag, environment, wrong or missing),
//! setup codes, the display name, and one node per state directory.

#![cfg(unix)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::KillOnDrop;
use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, connected, tls_gateway};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn pairing_required_prints_the_operator_command_and_retries() {
    let gw = FakeGateway::start(Config {
        manual_pairing: true,
        ..Config::default()
    })
    .await;
    let node = Node::start(&gw.url(), &["--token", TOKEN]);
    node.wait_stderr("openclaw devices approve ", LONG).await;
    let device = node.device_id();
    let request = gw.pair_request(&device).unwrap();
    assert!(
        node.stderr()
            .contains(&format!("openclaw devices approve {request}"))
    );
    gw.approve_device(&device);
    gw.wait_hellos(1, LONG).await;
    let refusals = gw.connects().len() - 1;
    assert!(refusals >= 1);
    // one announcement, however many retries
    assert_eq!(node.stderr().matches("openclaw devices approve").count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_command_surface_prints_the_nodes_approve_hint() {
    let (gw, node) = connected(
        Config {
            surface_pending: true,
            ..Config::default()
        },
        &[],
    )
    .await;
    node.wait_stderr("openclaw nodes approve surface-req-1", LONG)
        .await;
    let stats = |gw: &FakeGateway| {
        gw.node_requests()
            .iter()
            .filter(|r| r["params"]["event"] == "node.host.stats")
            .count()
    };
    // OpenClaw refuses node events while the surface waits: none are sent.
    assert_eq!(stats(&gw), 0);
    gw.approve_surface(&node.device_id());
    node.wait_stderr("pairing request surface-req-1 approved", LONG)
        .await;
    let deadline = Instant::now() + LONG;
    while stats(&gw) == 0 {
        assert!(
            Instant::now() < deadline,
            "no host stats after the approval"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stats(&gw), 1, "once, not a burst of missed ticks");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_token_stops_with_a_clear_message() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = Node::start(&gw.url(), &["--token", "wrong-token"]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    assert!(
        node.stderr().contains("AUTH_TOKEN_MISMATCH"),
        "{}",
        node.stderr()
    );
    assert!(node.stderr().contains("--token"), "{}", node.stderr());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_token_stops_with_a_clear_message() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = Node::start(&gw.url(), &[]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    assert!(
        node.stderr().contains("OPENCLAW_GATEWAY_TOKEN"),
        "{}",
        node.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_token_comes_from_the_environment() {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let mut cmd = common::router();
    let mut child = cmd
        .args(["node", "--gateway", &gw.url(), "--state-dir"])
        .arg(dir.path().join("state"))
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .env("OPENCLAW_GATEWAY_TOKEN", TOKEN)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    gw.wait_hellos(1, LONG).await;
    assert_eq!(gw.connects()[0]["auth"]["token"], TOKEN);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_node_on_the_same_state_directory_is_refused() {
    let (gw, first) = connected(Config::default(), &[]).await;
    let out = tokio::task::spawn_blocking({
        let (url, state, ws) = (gw.url(), first.state(), first.ws());
        move || {
            common::run(
                common::router()
                    .args(["node", "--gateway", &url, "--token", TOKEN])
                    .arg("--state-dir")
                    .arg(state)
                    .arg("--workspace")
                    .arg(ws)
                    .stdin(Stdio::null()),
            )
        }
    })
    .await
    .unwrap();
    let said = &out.stderr;
    assert_eq!(out.code, Some(1), "{said}");
    assert!(
        said.contains(&format!("(pid {})", first.child.id())) && said.contains("--state-dir"),
        "names the holder and the flag: {said}"
    );
    assert_eq!(gw.connects().len(), 1, "the second node never connected");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_name_given_is_the_name_the_gateway_lists() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = Node::start(&gw.url(), &["--token", TOKEN]);
    gw.wait_hellos(1, LONG).await;
    let id = node.device_id();
    node.wait_stderr("the gateway lists this node as \"test-node\"", LONG)
        .await;
    // Paired long ago under another name (OpenClaw keeps the first).
    node.signal(libc::SIGINT);
    assert_eq!(node.wait_exit(LONG).await, Some(0));
    gw.set_node_name(&id, "old-name");
    node.restart(&gw.url(), &["--token", TOKEN]);
    node.wait_stderr(
        "the gateway listed this node as \"old-name\"; renamed it to \"test-node\"",
        LONG,
    )
    .await;
    assert_eq!(gw.node_name(&id).as_deref(), Some("test-node"));
    assert_eq!(gw.renames()[0]["nodeId"], id.as_str());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_setup_code_enrols_the_node_and_the_device_token_carries_on() {
    let (gw, cert) = tls_gateway().await;
    let code = gw.setup_code(Some(&cert.fingerprint()));
    // No shared token, no URL, no pin: the code carries all three.
    let mut node = Node::start_args(&[
        "node",
        "--pair",
        &format!("oc-pair://{code}"),
        "--display-name",
        "paired",
    ]);
    node.wait_stderr("connected to", LONG).await;
    assert_eq!(gw.bootstrap_used(), 1);
    let connect = &gw.connects()[0];
    assert!(connect["auth"].get("token").is_none(), "{connect}");
    assert!(connect["auth"]["bootstrapToken"].is_string());
    let said = node.stderr();
    assert!(!said.contains(&code), "the code is never printed: {said}");
    // Restarted with nothing: the saved gateway, pin and device token.
    node.signal(libc::SIGINT);
    assert_eq!(node.wait_exit(LONG).await, Some(0));
    let state = node.state();
    let files = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect::<String>();
    assert!(
        !files.contains(&code)
            && !files.contains(connect["auth"]["bootstrapToken"].as_str().unwrap()),
        "the code is never written"
    );
    let restarted = common::router()
        .args(["node", "--display-name", "paired"])
        .arg("--state-dir")
        .arg(&state)
        .arg("--workspace")
        .arg(node.ws())
        .env_remove("OPENCLAW_GATEWAY_URL")
        .env_remove("OPENCLAW_GATEWAY_TOKEN")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = KillOnDrop(restarted);
    gw.wait_hellos(2, LONG).await;
    let again = &gw.connects()[1];
    assert!(
        again["auth"]["token"].is_string() && again["auth"].get("bootstrapToken").is_none(),
        "{again}"
    );
    // The same command line again: --pair-if-needed skips the used code.
    drop(_guard);
    let with_code = common::router()
        .args([
            "node",
            "--pair",
            &code,
            "--pair-if-needed",
            "--display-name",
            "paired",
        ])
        .arg("--state-dir")
        .arg(&state)
        .arg("--workspace")
        .arg(node.ws())
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = KillOnDrop(with_code);
    gw.wait_hellos(3, LONG).await;
    assert!(gw.connects()[2]["auth"]["token"].is_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_used_or_expired_setup_code_gets_openclaws_reason_and_a_hint() {
    let gw = FakeGateway::start(Config::default()).await;
    let code = gw.setup_code(None);
    let first = Node::start_args(&["node", "--pair", &code]);
    first.wait_stderr("connected to", LONG).await;
    drop(first);
    // Used already (another node, its own state).
    let mut second = Node::start_args(&["node", "--pair", &code]);
    assert_eq!(second.wait_exit(LONG).await, Some(1));
    let said = second.stderr();
    assert!(
        said.contains("the gateway refused the setup code: unauthorized: setup code invalid, expired, revoked, or already used")
            && said.contains("openclaw qr --setup-code-only"),
        "{said}"
    );
    // Expired: refused before connecting.
    use base64::Engine;
    let expired = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"url": gw.url(), "bootstrapToken": "x", "expiresAtMs": 1000}).to_string());
    let before = gw.accepted();
    let mut third = Node::start_args(&["node", "--pair", &expired]);
    assert_eq!(third.wait_exit(LONG).await, Some(2));
    assert!(
        third
            .stderr()
            .contains("the pairing setup code has expired"),
        "{}",
        third.stderr()
    );
    assert_eq!(gw.accepted(), before);
}
