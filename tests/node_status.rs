//! What `clawbot_router node status` reports about a node, read from the
//! file the node writes (`node.status.json`) and from the service manager.

#![cfg(target_os = "linux")]

mod common;

use common::gateway::TOKEN;
use common::node::{LONG, Node};
use serde_json::Value;

/// A node that stops because its connection was refused leaves the reason
/// in its status file: `node status` can say why nothing runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_is_the_last_error_in_the_status_file() {
    let mut node = Node::start("ws://gateway.example.invalid:18789", &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1), "{}", node.stderr());
    let file = std::fs::read(node.state().join("node.status.json")).unwrap();
    let status: Value = serde_json::from_slice(&file).unwrap();
    assert_eq!(status["stopped"], true, "{status}");
    let last = status["lastError"].as_str().unwrap_or_default();
    assert!(
        last.contains("refusing plaintext ws:// to gateway.example.invalid"),
        "{status}"
    );
}

/// Issue 24: `runtime.state` was `""` when the manager could not be asked.
/// It now says `unknown` then, and the manager's words otherwise (a stopped
/// systemd unit: `inactive (dead)`).
#[test]
fn status_json_names_the_runtime_state_even_without_a_manager() {
    let m = common::systemd::FakeSystemd::new();
    let (status, code) = m.status();
    assert_eq!(code, 3, "{status}");
    assert_eq!(status["runtime"]["state"], "inactive (dead)", "{status}");
    m.systemd_down();
    let (status, code) = m.status();
    assert_eq!(code, 3, "{status}");
    assert_eq!(status["runtime"]["state"], "unknown", "{status}");
    assert_eq!(status["service"]["available"], false, "{status}");
}
