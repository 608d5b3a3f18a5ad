//! The node's camera and location through the real OpenClaw gateway, side
//! by side with `openclaw node run` (its linux-node plugin with camera and
//! location on). No camera or GeoClue exists here: both nodes run the same
//! stand-ins on PATH (tests/fixtures/sensors), which record the command
//! lines they were given.

#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};

use common::e2e::{RealNode, TheirNode, nodes_invoke, openclaw, turn_with_approvals};
use common::sensors::{JPEG, World};
use serde_json::{Value, json};

/// One `openclaw nodes invoke`: the node's payload, or its error's message.
fn invoke(node: &str, command: &str, params: Value) -> Result<Value, String> {
    nodes_invoke(node, command, &params, None).payload()
}

/// The message of a node's error as the CLI prints it (the node's words,
/// `Error: …`, inside its own).
fn failure(node: &str, command: &str, params: Value) -> String {
    let invoked = nodes_invoke(node, command, &params, None);
    assert!(!invoked.ok, "a failure: {}", invoked.said);
    invoked.error_text()
}

fn without_test_root(env: Vec<(String, PathBuf)>) -> Vec<(String, PathBuf)> {
    env.into_iter()
        .filter(|(k, _)| k != "CLAWBOT_TEST_V4L2_ROOT")
        .collect()
}

/// The variables as the node starters take them.
fn borrowed(env: &[(String, PathBuf)]) -> Vec<(&str, &Path)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_path())).collect()
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_location_and_cameras_answer_as_openclaw_node_runs_do() {
    let world = World::new();
    // Both see this machine's real /dev (no camera) and the same demo.
    let env = without_test_root(world.env(&[("STANDIN_GEO", "fix")]));
    let theirs = TheirNode::start_env(
        "e2e-sensors-openclaw",
        &json!({ "plugins": { "entries": { "linux-node": { "config": {
            "camera": { "enabled": true }, "location": { "enabled": true } } } } } }),
        &borrowed(&env),
    );
    let ours = RealNode::start_env(
        "e2e-sensors-ours",
        &["--camera", "--location", "--allow-command", "camera.snap"],
        None,
        &borrowed(&env),
    );
    ours.approve_surface();
    theirs.approve();
    // The fix: the same command line, the same answer.
    let expected = invoke("e2e-sensors-openclaw", "location.get", json!({})).unwrap();
    world.wait_gone();
    let got = invoke("e2e-sensors-ours", "location.get", json!({})).unwrap();
    world.wait_gone();
    assert_eq!(got, expected, "our node's log:\n{}", ours.log());
    assert_eq!(expected["lat"], json!(48.8584));
    let precise = json!({"desiredAccuracy": "precise", "timeoutMs": 5000, "maxAgeMs": 1e15});
    assert_eq!(
        invoke("e2e-sensors-ours", "location.get", precise.clone()).unwrap(),
        invoke("e2e-sensors-openclaw", "location.get", precise).unwrap()
    );
    let lines = world.logged();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0], lines[1], "their command line, then ours");
    assert_eq!(lines[2], lines[3]);
    assert_eq!(lines[2], "-t 5 -a 8 LC_ALL=C");
    // No camera here: both list none, and a photo fails with the same words.
    assert_eq!(
        invoke("e2e-sensors-ours", "camera.list", json!({})).unwrap(),
        invoke("e2e-sensors-openclaw", "camera.list", json!({})).unwrap()
    );
    let theirs_said = failure("e2e-sensors-openclaw", "camera.snap", json!({}));
    assert_eq!(
        theirs_said,
        "Error: CAMERA_UNAVAILABLE: no V4L2 camera devices found"
    );
    assert_eq!(
        failure("e2e-sensors-ours", "camera.snap", json!({})),
        theirs_said
    );
    assert_eq!(
        failure("e2e-sensors-ours", "camera.snap", json!({"format": "gif"})),
        failure(
            "e2e-sensors-openclaw",
            "camera.snap",
            json!({"format": "gif"})
        )
    );
    drop(theirs);
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_operator_and_an_agent_use_the_nodes_camera_and_location() {
    let world = World::new();
    let node = RealNode::start_env(
        "e2e-sensors-agent",
        &["--camera", "--location", "--allow-command", "camera.snap"],
        None,
        &borrowed(&world.env(&[("STANDIN_GEO", "fix")])),
    );
    node.approve_surface();
    // The operator's own commands for them.
    let (stdout, stderr, code) = openclaw(&[
        "nodes",
        "camera",
        "list",
        "--node",
        "e2e-sensors-agent",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains(&world.device("video0")), "{stdout}");
    let (stdout, stderr, code) = openclaw(&[
        "nodes",
        "camera",
        "snap",
        "--node",
        "e2e-sensors-agent",
        "--delay-ms",
        "0",
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}\n{}", node.log());
    let saved = stdout
        .split_whitespace()
        .find(|w| w.contains('/') && std::path::Path::new(w.trim_start_matches("MEDIA:")).is_file())
        .unwrap_or_else(|| panic!("no saved photo in {stdout}"));
    let photo = std::fs::read(saved.trim_start_matches("MEDIA:")).unwrap();
    assert_eq!(photo, JPEG);
    world.wait_gone();
    let (stdout, stderr, code) = openclaw(&[
        "nodes",
        "location",
        "get",
        "--node",
        "e2e-sensors-agent",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("48.8584"), "{stdout}");
    world.wait_gone();
    // An agent's turn: the gateway's `nodes` tool asks where the node is.
    let (text, approvals) = turn_with_approvals(
        r#"[[tool:nodes {"action":"location_get","node":"e2e-sensors-agent"}]]"#,
        &|_| "deny",
    );
    assert_eq!(approvals, 0);
    assert!(text.contains("48.8584"), "{text}\n{}", node.log());
    world.wait_gone();
    let log = node.log();
    assert!(log.matches("location.get → ok").count() >= 2, "{log}");
    assert!(log.contains("camera.snap → ok"), "{log}");
}
