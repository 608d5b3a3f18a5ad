//! `clawbot_router node` against a fake gateway speaking protocol v4
//! (tests/common/gateway.rs). Connecting to the gateway and staying
//! connected: the signed `connect`, device tokens, pings and dead links,
//! garbage frames, servers that are not a gateway, reconnects after a gateway
//! restart, and a gateway that stops reading.

#![cfg(unix)]

mod common;

use std::time::{Duration, Instant};

use common::gateway::{Config, TOKEN};
use common::node::{LONG, Node, connected, payload};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn connect_is_signed_and_declares_the_node() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let connect = &gw.connects()[0];
    assert_eq!(
        gw.signatures_ok(),
        [true],
        "the gateway could not verify the v3 signature"
    );
    assert_eq!(connect["role"], "node");
    assert_eq!(connect["scopes"], json!([]));
    assert_eq!(connect["client"]["id"], "node-host");
    assert_eq!(connect["client"]["mode"], "node");
    assert_eq!(connect["client"]["displayName"], "test-node");
    assert_eq!(connect["minProtocol"], 3);
    assert_eq!(connect["maxProtocol"], 4);
    assert_eq!(connect["auth"]["token"], TOKEN);
    assert_eq!(connect["device"]["id"], node.device_id());
    let commands: Vec<&str> = connect["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for c in [
        "system.run.prepare",
        "system.run",
        "system.which",
        "read_file",
        "list_files",
        "search_files",
        "read_config",
        "validate_config",
        "system_info",
        "write_file",
        "run_command",
    ] {
        assert!(commands.contains(&c), "{c} not declared");
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(node.state().join("device-identity.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_device_token_is_saved_and_used_on_reconnect() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let issued = gw.device_token(&node.device_id()).unwrap();
    gw.drop_connection();
    gw.wait_hellos(2, LONG).await;
    let connects = gw.connects();
    assert_eq!(connects[1]["auth"]["token"], issued.as_str());
    assert_eq!(
        connects[1]["device"]["id"], connects[0]["device"]["id"],
        "the identity changed"
    );
    assert_eq!(gw.signatures_ok(), [true, true]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_device_token_falls_back_to_the_shared_token() {
    let (gw, node) = connected(Config::default(), &[]).await;
    gw.revoke_device_tokens();
    gw.drop_connection();
    gw.wait_hellos(2, LONG).await;
    let connects = gw.connects();
    assert_ne!(
        connects[1]["auth"]["token"], TOKEN,
        "the second connect should try the device token"
    );
    assert_eq!(connects.last().unwrap()["auth"]["token"], TOKEN);
    node.wait_stderr("forgetting it", LONG).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn websocket_pings_are_answered() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    gw.ping();
    gw.wait_pongs(1, LONG).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_ticks_of_silence_count_as_a_dead_link() {
    let config = Config {
        tick_ms: 300,
        ..Config::default()
    };
    let (gw, node) = connected(config, &[]).await;
    gw.fall_silent();
    node.wait_stderr("no word from the gateway", LONG).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_events_and_garbage_frames_are_ignored() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    gw.send_raw("not json at all");
    gw.send_raw(r#"{"type":"mystery","x":1}"#);
    gw.send_event("voicewake.changed", json!({"triggers": ["openclaw"]}));
    gw.send_event("node.invoke.request", json!({"id": 42}));
    let r = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    assert!(payload(&r)["bins"]["sh"].as_str().unwrap().ends_with("/sh"));
}

/// A server on loopback that answers every connection with `answer`.
fn http_server(answer: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    format!("ws://127.0.0.1:{port}")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_is_not_a_gateway_is_named_and_given_up_on() {
    let url = http_server("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    let mut node = Node::start(&url, &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    let said = node.stderr();
    assert!(
        said.contains(&format!("{url} is not an OpenClaw gateway (it answered HTTP 200 OK to the WebSocket upgrade; 3 handshakes in a row): check --gateway")),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_whose_gateway_is_down_is_a_hiccup_not_proof() {
    // 502/503 from nginx while OpenClaw restarts: keep trying.
    let url = http_server(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    let mut node = Node::start(&url, &["--token", TOKEN]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.stderr().matches("reconnecting in").count() < 4 {
        assert!(Instant::now() < deadline, "{}", node.stderr());
        assert!(
            node.child.try_wait().unwrap().is_none(),
            "gave up: {}",
            node.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        node.stderr().contains("503 Service Unavailable"),
        "{}",
        node.stderr()
    );
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(LONG).await, Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_websocket_that_does_not_speak_openclaw_is_given_up_on() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                use futures_util::SinkExt;
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                let _ = ws
                    .send(tokio_tungstenite::tungstenite::Message::text(
                        "welcome to the echo server",
                    ))
                    .await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    let mut node = Node::start(&url, &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    let said = node.stderr();
    assert!(
        said.contains(
            "its first message was not OpenClaw's connect.challenge: \"welcome to the echo server\""
        ),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_stopped_while_it_waits_to_reconnect_says_so() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut node = Node::start(&format!("ws://127.0.0.1:{port}"), &["--token", TOKEN]);
    node.wait_stderr("reconnecting in", LONG).await;
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(LONG).await, Some(0));
    // The pipe's last bytes may still be on their way to the collector.
    node.wait_stderr("] stopped", LONG).await;
    assert!(
        node.stderr().trim_end().ends_with("stopped"),
        "{}",
        node.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_node_survives_a_gateway_restart() {
    let (mut gw, node) = connected(Config::default(), &[]).await;
    gw.stop();
    node.wait_stderr("connection lost", LONG).await;
    tokio::time::sleep(Duration::from_millis(1500)).await; // a few failed attempts
    gw.restart().await;
    gw.wait_hellos(2, Duration::from_secs(40)).await;
    let r = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    assert!(payload(&r)["bins"]["sh"].is_string());
    let connects = gw.connects();
    assert_eq!(
        connects[0]["device"]["id"],
        connects.last().unwrap()["device"]["id"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gateway_that_stops_reading_cannot_freeze_the_node() {
    let (gw, mut node) = connected(Config::default(), &[]).await;
    std::fs::write(node.ws().join("big.txt"), "x".repeat(3 * 1024 * 1024)).unwrap();
    gw.stop_reading();
    for _ in 0..20 {
        gw.request("read_file", r#"{"path":"big.txt"}"#, 60_000);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    node.signal(libc::SIGINT);
    assert_eq!(node.wait_exit(Duration::from_secs(10)).await, Some(0));
}
