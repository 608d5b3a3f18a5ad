//! A doctor session against the real OpenClaw: it streams, runs its tools
//! here through the node, and follows up. Ignored by a plain `cargo test`
//! (they need the sandbox); `scripts/e2e.sh` brings the sandbox up, runs them
//! with `--ignored --test-threads=1`, and takes it down.

#![cfg(unix)]

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::e2e::{RealNode, last_user_text};
use serde_json::Value;

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
