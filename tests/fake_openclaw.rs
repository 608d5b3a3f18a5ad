//! The fake openclaw speaks like the real one: its replies have the shapes
//! recorded from OpenClaw 2026.9.6 (`tests/fixtures/openclaw-samples/`, copied
//! from shared/openclaw/samples).

#![cfg(unix)]

mod common;

use std::process::Command;

use common::FAKE;
use serde_json::Value;

fn fake(args: &[&str]) -> (String, String, Option<i32>) {
    let out = Command::new(FAKE)
        .args(args)
        .env_remove("FAKE_OPENCLAW_SCENARIO")
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code(),
    )
}

fn sample(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/openclaw-samples/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// serde_json sorts keys; compare key *sets*, and check the order on the text.
fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn gateway_json_reply_has_the_real_shape() {
    let (stdout, stderr, code) =
        fake(&["agent", "--agent", "ops", "--json", "-m", "hello gw json"]);
    assert_eq!((stderr.as_str(), code), ("", Some(0)));
    let got: Value = serde_json::from_str(&stdout).unwrap();
    let real = sample("agent-gateway-json.stdout.json");
    assert_eq!(sorted(keys(&got)), sorted(keys(&real)));
    assert_eq!(got["status"], real["status"]);
    assert_eq!(got["summary"], real["summary"]);
    let payload = &got["result"]["payloads"][0];
    assert_eq!(
        sorted(keys(payload)),
        sorted(keys(&real["result"]["payloads"][0]))
    );
    assert_eq!(payload["text"], real["result"]["payloads"][0]["text"]);
    assert!(got["result"]["meta"]["durationMs"].is_u64());
    // Pretty-printed with the real key order.
    assert!(stdout.starts_with("{\n  \"runId\": "), "{stdout}");
}

#[test]
fn gateway_timeout_json_has_the_real_shape() {
    let (stdout, _, code) = fake(&[
        "--scenario",
        "gateway-timeout",
        "agent",
        "--json",
        "-m",
        "hi",
    ]);
    assert_eq!(code, Some(1));
    let got: Value = serde_json::from_str(&stdout).unwrap();
    let real = sample("agent-gateway-timeout-json.stdout.json");
    assert_eq!(sorted(keys(&got)), sorted(keys(&real)));
    for key in ["status", "summary", "timeoutPhase", "providerStarted"] {
        assert_eq!(got[key], real[key], "{key}");
    }
    assert_eq!(got["result"]["payloads"][0], real["result"]["payloads"][0]);
}

#[test]
fn errors_match_the_real_cli() {
    let (stdout, stderr, code) = fake(&["agent", "--agent", "nosuchagent", "-m", "hi"]);
    assert_eq!(code, Some(1));
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "Unknown agent id \"nosuchagent\". Use \"openclaw agents list\" to see configured agents.\n"
    );
    let (stdout, stderr, code) = fake(&["agent", "--agent", "nosuchagent", "--json", "-m", "hi"]);
    assert_eq!(code, Some(1));
    let envelope: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(envelope["ok"], Value::Bool(false));
    assert_eq!(envelope["error"]["type"], "cli_error");
    assert!(stderr.contains("[openclaw] The CLI command failed."));
    let (_, stderr, code) = fake(&["agent", "--message", "  "]);
    assert_eq!(code, Some(1));
    assert!(stderr.starts_with("Missing message."), "{stderr}");
}

#[test]
fn version_and_greedy_option_values() {
    assert_eq!(fake(&["--version"]).0, "OpenClaw 2026.9.6 (fake)\n");
    // commander.js gives a required option the next argument, dashes or not.
    let (stdout, _, code) = fake(&["--scenario", "echo", "agent", "--message", "--help"]);
    assert_eq!((stdout.as_str(), code), ("--help", Some(0)));
}
