//! `clawbot_router node` against a fake gateway speaking protocol v4
//! (tests/common/gateway.rs). `wss://` gateways: certificate pins (given,
//! remembered, wrong, changed), the wrong scheme said once, plaintext to a
//! public host refused, and OpenClaw's endpoint flags building the URL.

#![cfg(unix)]

mod common;

use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, payload, tls_gateway};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_pinned_wss_gateway_is_served_and_its_pin_remembered() {
    let (gw, cert) = tls_gateway().await;
    let pin = cert.fingerprint().to_lowercase().replace(':', "");
    let mut node = Node::start(&gw.url(), &["--token", TOKEN, "--tls-fingerprint", &pin]);
    gw.wait_hellos(1, LONG).await;
    let r = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    assert!(payload(&r)["bins"]["sh"].is_string());
    node.wait_stderr("remembered the gateway's certificate", LONG)
        .await;
    let pins = std::fs::read_to_string(node.state().join("gateway-pins.json")).unwrap();
    assert!(pins.contains(&cert.fingerprint()), "{pins}");
    // Later, without the flag: the remembered pin is enough.
    node.restart(&gw.url(), &["--token", TOKEN]);
    gw.wait_hellos(2, LONG).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_or_missing_pin_is_refused_before_any_frame() {
    let (gw, cert) = tls_gateway().await;
    let wrong = "AB:".repeat(31) + "AB";
    let mut node = Node::start(&gw.url(), &["--token", TOKEN, "--tls-fingerprint", &wrong]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    // Its stderr is read by a thread of the test's: the last lines may
    // arrive a moment after the exit (seen under load).
    node.wait_stderr("is pinned", LONG).await;
    let said = node.stderr();
    assert!(
        said.contains(&format!(
            "presented a certificate with SHA-256 fingerprint {}, but {wrong} is pinned",
            cert.fingerprint()
        )),
        "{said}"
    );
    // Self-signed and nothing pinned: the system does not vouch for it.
    let mut node = Node::start(&gw.url(), &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    node.wait_stderr("--tls-fingerprint", LONG).await;
    let said = node.stderr();
    assert!(
        said.contains("presented a certificate the system does not trust")
            && said.contains(&format!("--tls-fingerprint {}", cert.fingerprint())),
        "{said}"
    );
    assert!(gw.accepted() >= 2, "the node did reach the server");
    assert!(gw.connects().is_empty(), "no frame (and no token) was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_certificate_is_refused_with_how_to_reset() {
    let (gw, cert) = tls_gateway().await;
    let mut node = Node::start(
        &gw.url(),
        &["--token", TOKEN, "--tls-fingerprint", &cert.fingerprint()],
    );
    gw.wait_hellos(1, LONG).await;
    node.wait_stderr("remembered the gateway's certificate", LONG)
        .await;
    // The same address, another certificate.
    let url = gw.url();
    drop(gw);
    let other = common::gateway::TestCert::self_signed();
    let gw2 = FakeGateway::start_at(
        url.trim_start_matches("wss://").parse().unwrap(),
        Config {
            tls: Some(other.clone()),
            ..Config::default()
        },
    )
    .await;
    node.restart(&url, &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    let said = node.stderr();
    assert!(
        said.contains(&format!(
            "fingerprint {}, but {} is pinned",
            other.fingerprint(),
            cert.fingerprint()
        )),
        "{said}"
    );
    assert!(
        said.contains("gateway-pins.json") && said.contains("--tls-fingerprint"),
        "{said}"
    );
    assert!(gw2.connects().is_empty());
}

/// The scheme that does not match the server is a setting, not a hiccup:
/// said once, and the node stops (exit 1) instead of retrying for ever.
async fn wrong_scheme_is_said_once_and_ends_the_node(node: &mut Node, sentence: &str) {
    assert_eq!(node.wait_exit(LONG).await, Some(1), "{}", node.stderr());
    let said = node.stderr();
    assert_eq!(
        said.matches(sentence).count(),
        1,
        "{sentence:?} once in:\n{said}"
    );
    assert!(!said.contains("reconnecting"), "{said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_to_a_tls_gateway_says_use_wss_and_stops() {
    let (gw, _) = tls_gateway().await;
    let plain = gw.url().replace("wss://", "ws://");
    let mut node = Node::start(&plain, &["--token", TOKEN]);
    let sentence = format!("the gateway at {plain} speaks TLS: use {}", gw.url());
    wrong_scheme_is_said_once_and_ends_the_node(&mut node, &sentence).await;
    assert!(gw.connects().is_empty(), "no frame was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn wss_to_a_plaintext_gateway_says_use_ws_and_stops() {
    let gw = FakeGateway::start(Config::default()).await;
    let tls = gw.url().replace("ws://", "wss://");
    // Pinned, and unpinned (the system's trust store): the same answer.
    let pin = "AB:".repeat(31) + "AB";
    let sentence = format!("the gateway at {tls} does not speak TLS: use {}", gw.url());
    for args in [
        &["--token", TOKEN, "--tls-fingerprint", &pin][..],
        &["--token", TOKEN],
    ] {
        let mut node = Node::start(&tls, args);
        wrong_scheme_is_said_once_and_ends_the_node(&mut node, &sentence).await;
    }
    assert!(gw.connects().is_empty(), "no frame was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn plaintext_to_a_public_host_is_refused_before_connecting() {
    let mut node = Node::start("ws://gateway.example.invalid:18789", &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    assert!(
        node.stderr()
            .contains("refusing plaintext ws:// to gateway.example.invalid"),
        "{}",
        node.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn openclaws_endpoint_flags_build_the_url_and_conflict_with_gateway() {
    let (gw, cert) = tls_gateway().await;
    let port = gw.addr.port().to_string();
    let node = Node::start_args(&[
        "node",
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--tls",
        "--tls-fingerprint",
        &cert.fingerprint(),
        "--token",
        TOKEN,
        "--display-name",
        "flags",
    ]);
    gw.wait_hellos(1, LONG).await;
    node.wait_stderr(&format!("connected to wss://127.0.0.1:{port}"), LONG)
        .await;
    let out = tokio::task::spawn_blocking(move || {
        common::run(common::router().args(["node", "--gateway", "ws://127.0.0.1:1", "--host", "h"]))
    })
    .await
    .unwrap();
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("--gateway ws://127.0.0.1:1 and --host/--port/--tls/--context-path both name the gateway"), "{}", out.stderr);
}
