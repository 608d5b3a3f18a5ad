//! Text a stranger sends — a gateway, a link's client, a local MCP server,
//! the doctor's agent — reaches the terminal escaped: no escape sequence,
//! control character or bidi override of theirs is ever written raw to
//! stderr, the log, or the doctor's stdout.
#![cfg(unix)]

mod common;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, connected};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

/// What a hostile peer puts in a name: a window-title OSC, a CSI that
/// clears the screen, a carriage return, a bell, a C1 CSI, a bidi override
/// and a line break that would forge a log line of ours.
const HOSTILE: &str =
    "a\u{1b}]0;owned\u{7}b\u{1b}[2Jc\rd\u{9b}31me\u{202e}f\u{2066}g\n[clawbot_router node] forged";

/// No raw control of a stranger's in `text`: only the line breaks and
/// tabs we write ourselves.
fn assert_clean(text: &str) {
    for c in text.chars() {
        let bad = (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}' | '\u{2028}' | '\u{2029}');
        assert!(!bad, "raw {c:?} reached the terminal:\n{text:?}");
    }
    assert!(
        !text.contains("\n[clawbot_router node] forged"),
        "a stranger's line break forged a log line:\n{text}"
    );
}

async fn wait_for(of: &Arc<Mutex<String>>, needle: &str) -> String {
    let deadline = Instant::now() + LONG;
    loop {
        let text = of.lock().unwrap().clone();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "never printed {needle:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn what_the_gateway_sends_reaches_the_nodes_log_escaped() {
    let (gw, node) = connected(Config::default(), &[]).await;
    gw.send_event(
        "node.pair.resolved",
        json!({"requestId": HOSTILE, "nodeId": "n", "decision": HOSTILE}),
    );
    let log = wait_for(&node.stderr, "forged").await;
    assert_clean(&log);
    assert!(
        log.contains("a\\u{1b}]0;owned\\u{7}b\\u{1b}[2Jc\\rd\\u{9b}31me\\u{202e}f\\u{2066}g\\n[clawbot_router node] forged"),
        "shown escaped, whole: {log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_local_mcp_servers_stderr_says_reaches_the_log_escaped() {
    let gw = FakeGateway::start(Config::default()).await;
    let server = "evil=sh -c 'printf \"x\\033]0;owned\\007y\\342\\200\\256z\\033[2Jw\\rend-of-stderr\\n\" >&2; sleep 30'";
    let node = Node::start(&gw.url(), &["--token", TOKEN, "--mcp-server", server]);
    let log = wait_for(&node.stderr, "end-of-stderr").await;
    assert_clean(&log);
    assert!(
        log.contains("x\\u{1b}]0;owned\\u{7}y\\u{202e}z\\u{1b}[2Jw\\rend-of-stderr"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_bridge_client_sends_reaches_the_bridges_log_escaped() {
    const BRIDGE_TOKEN: &str = "bridge-test-token-0123456789";
    let node = Node::start_args_env(
        &["bridge", "--listen", "127.0.0.1:0", "--session", "s1"],
        &[("CLAWBOT_BRIDGE_TOKEN", BRIDGE_TOKEN)],
    );
    node.wait_stderr("listening on ws://", LONG).await;
    let at = node
        .stderr()
        .split("listening on ws://")
        .nth(1)
        .and_then(|rest| rest.split("/bridge").next())
        .unwrap()
        .to_owned();
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{at}/bridge"))
        .await
        .unwrap();
    let hello = json!({"type": "hello", "openclaw_session": "s1", "claude_session": HOSTILE, "pid": 1, "token": BRIDGE_TOKEN});
    ws.send(Message::text(hello.to_string())).await.unwrap();
    let _ack = ws.next().await;
    let log = wait_for(&node.stderr, "bound").await;
    assert_clean(&log);
    assert!(log.contains("\\u{202e}f\\u{2066}g"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn what_the_doctors_agent_says_reaches_stdout_and_stderr_escaped() {
    use std::io::Write;
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let mut child = common::router()
        .args(["node", "--gateway", &gw.url(), "--token", TOKEN, "--doctor"])
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = common::collect(child.stdout.take().unwrap());
    let stderr = common::collect(child.stderr.take().unwrap());
    let node = Node { child, stderr, dir };
    wait_for(&stdout, "ECHO: {").await;
    wait_for(&node.stderr, "type a follow-up").await;
    // The fake agent echoes what it is told: its reply is the stranger's text.
    let line = HOSTILE.split('\n').next().unwrap();
    writeln!(stdin, "{line} end-of-reply").unwrap();
    let reply = wait_for(&stdout, "end-of-reply").await;
    assert_clean(&reply);
    assert!(
        reply.contains(
            "a\\u{1b}]0;owned\\u{7}b\\u{1b}[2Jc\\rd\\u{9b}31me\\u{202e}f\\u{2066}g end-of-reply"
        ),
        "{reply}"
    );
    drop(stdin);
    let log = wait_for(&node.stderr, "session over").await;
    assert_clean(&log);
}
