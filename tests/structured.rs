//! `--format structured` through the fake openclaw: openclaw is asked for
//! `--json`, and `content` is the final answer with a `details` object, for
//! the gateway and embedded shapes, the error envelope, a timeout, output
//! that is not JSON, and an answer from a process that never exits.

#![cfg(unix)]

mod common;

use common::*;
use serde_json::{Value, json};

fn structured(scenario: &str, fake: &[&str], args: &[&str]) -> Run {
    run(router_with(scenario, fake)
        .args([
            "--format",
            "structured",
            "--lang",
            "en",
            "--exit-code",
            "--meta",
        ])
        .args(args))
}

fn details(run: &Run) -> Value {
    run.json()["details"].clone()
}

#[test]
fn the_answer_is_clean_and_the_details_say_the_rest() {
    let dir = tempdir();
    let record = dir.path().join("record");
    let run = structured(
        "reply",
        &["--record", record.to_str().unwrap()],
        &["-a", "ops", "-m", "hi"],
    );
    assert_eq!(
        run.content(),
        "ECHO: hi",
        "no trailing newline, nothing but the answer"
    );
    assert_eq!(run.code, Some(0));
    let d = details(&run);
    assert_eq!(d["status"], "ok");
    assert_eq!(d["summary"], "completed");
    assert!(d["runId"].is_string());
    assert_eq!(run.meta()["runId"], d["runId"]);
    assert_eq!(
        d["payloads"],
        json!([{"text": "ECHO: hi", "mediaUrl": null, "isError": false}])
    );
    assert_eq!(d["model"], "fakellm/fake-model");
    assert!(d["durationMs"].is_number());
    assert!(d.get("diagnostics").is_none(), "nothing on stderr");
    assert!(argv(&records(&record)[0]).contains(&"--json".to_owned()));
    // The default stays the seed's raw passthrough.
    let raw = run_raw(&["-m", "hi"]);
    assert_eq!(raw.content(), "ECHO: hi\n");
    assert!(raw.json().get("details").is_none());
}

fn run_raw(args: &[&str]) -> Run {
    run(router_with("reply", &[]).args(args))
}

#[test]
fn the_embedded_shape_and_its_diagnostics() {
    let run = run(router_with("reply", &[])
        .env("FAKE_OPENCLAW_LOCAL", "1")
        .args(["--format", "structured", "-m", "local one"]));
    assert_eq!(run.content(), "ECHO: local one");
    let d = details(&run);
    assert_eq!(d["status"], "ok");
    assert_eq!(d["runId"], Value::Null);
    assert_eq!(
        d["diagnostics"], "[memory] sqlite store opened (embedded run, no gateway)",
        "stderr kept apart from the JSON"
    );
}

#[test]
fn the_error_envelope_becomes_an_error() {
    let run = structured("reply", &[], &["-a", "nosuchagent", "-m", "hi"]);
    assert_eq!(
        run.content(),
        "Unknown agent id \"nosuchagent\". Use \"openclaw agents list\" to see configured agents."
    );
    assert_eq!(run.code, Some(1));
    let d = details(&run);
    assert_eq!(d["status"], "error");
    assert_eq!(d["error"]["type"], "cli_error");
    assert!(
        d["diagnostics"]
            .as_str()
            .unwrap()
            .contains("The CLI command failed")
    );
}

#[test]
fn openclaws_own_timeout() {
    let run = structured("gateway-timeout", &[], &["-m", "slow"]);
    assert!(
        run.content()
            .starts_with("Request timed out before a response was generated.")
    );
    assert_eq!(run.code, Some(1));
    assert_eq!(details(&run)["status"], "timeout");
}

#[test]
fn the_routers_timeout() {
    let run = structured(
        "sleep",
        &["--sleep", "30"],
        &["--timeout", "1", "--grace", "0.2", "-m", "x"],
    );
    assert_eq!(
        run.content(),
        "[clawbot_router] The remote clawBot timed out (not finished after 1 seconds); this result was aborted."
    );
    assert_eq!(run.code, Some(124));
    let d = details(&run);
    assert_eq!(d["status"], "timeout");
    assert_eq!(d["error"]["type"], "timeout");
}

#[test]
fn output_that_is_not_json_is_passed_on_as_an_error() {
    let run = structured("gateway-down", &[], &["-m", "x"]);
    assert!(
        run.content().contains("Gateway not reachable"),
        "{}",
        run.content()
    );
    assert_eq!(run.code, Some(1));
    assert_eq!(details(&run)["error"]["type"], "no_json");
}

#[test]
fn a_complete_answer_from_a_process_that_hangs_returns_at_once() {
    let dir = tempdir();
    let pid_file = dir.path().join("pids");
    let run = structured(
        "hang-after-reply",
        &["--sleep", "30", "--pid-file", pid_file.to_str().unwrap()],
        &["--grace", "0.5", "-m", "and then hang"],
    );
    assert_eq!(run.content(), "ECHO: and then hang");
    assert_eq!(run.code, Some(0));
    assert!(
        run.elapsed < std::time::Duration::from_secs(5),
        "{:?}",
        run.elapsed
    );
    assert_eq!(details(&run)["status"], "ok");
    assert_all_gone(&pids(&pid_file));
    // Raw mode has no answer to recognise: it waits for the timeout.
    let raw = run_with_timeout("hang-after-reply", "1");
    assert_eq!(raw.json()["meta"]["timedOut"], true);
}

fn run_with_timeout(scenario: &str, timeout: &str) -> Run {
    run(router_with(scenario, &["--sleep", "30"]).args([
        "--meta",
        "--timeout",
        timeout,
        "--grace",
        "0.2",
        "-m",
        "x",
    ]))
}

#[test]
fn a_json_log_line_before_the_answer_is_not_taken_for_it() {
    let dir = tempdir();
    let script = dir.path().join("openclaw.sh");
    let answer = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/openclaw-samples/agent-gateway-json.stdout.json"
    );
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho '{{\"level\":\"info\",\"msg\":\"gateway connected\"}}'\nsleep 0.5\ncat '{answer}'\nexec sleep 30\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = run(router()
        .args([
            "--openclaw",
            script.to_str().unwrap(),
            "--format",
            "structured",
            "--grace",
            "0.3",
        ])
        .args(["--exit-code", "-m", "x"]));
    assert_eq!(run.content(), "ECHO: hello gw json");
    assert_eq!(run.code, Some(0));
    assert_eq!(
        details(&run)["runId"],
        "410a2d58-4ab5-442d-9fb8-0d3beac73aaf"
    );
    assert!(
        run.elapsed < std::time::Duration::from_secs(5),
        "{:?}",
        run.elapsed
    );
}
