//! `clawbot_router node` against a fake gateway speaking protocol v4
//! (tests/common/gateway.rs). The commands the gateway invokes:
//! `system.which`, `system.run` (prepare, exec events), `run_command`, the
//! restricted command surface, unknown commands and malformed or odd
//! requests, several invocations at once, payload limits, cut output, and the
//! environment a command gets.

#![cfg(unix)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::gateway::{Config, TOKEN};
use common::node::{LONG, Node, connected, error_code, payload};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn uploads_are_risky_and_commands_restricts_the_surface() {
    let (gw, node) = connected(
        Config::default(),
        &["--commands", "system.which,fs.listDir,terminal.upload"],
    )
    .await;
    let connect = &gw.connects()[0];
    assert_eq!(
        connect["commands"],
        json!(["system.which", "fs.listDir", "terminal.upload"])
    );
    assert_eq!(
        connect["caps"],
        json!(["system"]),
        "OpenClaw files all three under system"
    );
    let refused = gw.invoke("read_file", json!({"path": "x"})).await;
    assert_eq!(error_code(&refused), "UNAVAILABLE");
    // No terminal, nothing pre-approved: an upload is a write, and refused.
    let up = gw
        .invoke(
            "terminal.upload",
            json!({"name": "x", "contentBase64": "eA=="}),
        )
        .await;
    assert_eq!(error_code(&up), "USER_REJECTED");
    assert!(!node.ws().join("uploads/x").exists());
    drop(node);
    // A name this node has never heard of is a mistake, said at start.
    let mut bad = Node::start(
        &gw.url(),
        &["--token", TOKEN, "--commands", "system.which,no.such"],
    );
    assert_eq!(bad.wait_exit(LONG).await, Some(1));
    assert!(
        bad.stderr()
            .contains("--commands: this node has no command \"no.such\""),
        "{}",
        bad.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_system_run_reports_exec_finished_before_its_result_and_the_host_its_stats() {
    let (gw, _node) = connected(Config::default(), &["--approval", "allow"]).await;
    let params = json!({"command": ["sh", "-c", "echo out; echo err >&2"], "runId": "run-42", "sessionKey": "agent:main:s1"});
    let result = gw.invoke("system.run", params).await;
    assert_eq!(payload(&result)["exitCode"], 0);
    let requests = gw.node_requests();
    let event_at = requests
        .iter()
        .position(|r| r["method"] == "node.event" && r["params"]["event"] == "exec.finished")
        .expect("exec.finished sent");
    let result_at = requests
        .iter()
        .position(|r| r["method"] == "node.invoke.result")
        .unwrap();
    assert!(
        event_at < result_at,
        "the event comes first, as OpenClaw's node host sends it"
    );
    let event: Value = serde_json::from_str(
        requests[event_at]["params"]["payloadJSON"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(event["runId"], "run-42");
    assert_eq!(event["sessionKey"], "agent:main:s1");
    assert_eq!(
        event["output"], "out\n\nerr",
        "joined with a newline, then trimmed, as OpenClaw does"
    );
    assert_eq!(event["command"], "sh -c \"echo out; echo err >&2\"");
    // Sent once the surface is approved; under load, maybe after the run.
    let deadline = Instant::now() + LONG;
    let stats = loop {
        if let Some(stats) = gw
            .node_requests()
            .into_iter()
            .find(|r| r["params"]["event"] == "node.host.stats")
        {
            break stats;
        }
        assert!(Instant::now() < deadline, "no host stats at connect");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let stats: Value =
        serde_json::from_str(stats["params"]["payloadJSON"].as_str().unwrap()).unwrap();
    assert!(stats["memoryTotalBytes"].as_u64().unwrap() > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_system_run_reports_exec_denied() {
    let (gw, _node) = connected(Config::default(), &["--approval", "deny"]).await;
    let params =
        json!({"command": ["touch", "x"], "runId": "run-7", "sessionKey": "agent:main:s2"});
    let result = gw.invoke("system.run", params).await;
    assert_eq!(error_code(&result), "USER_REJECTED");
    let requests = gw.node_requests();
    let denied = requests
        .iter()
        .find(|r| r["params"]["event"] == "exec.denied")
        .expect("exec.denied sent");
    let event: Value =
        serde_json::from_str(denied["params"]["payloadJSON"].as_str().unwrap()).unwrap();
    assert_eq!(
        (event["runId"].as_str(), event["reason"].as_str()),
        (Some("run-7"), Some("approval-required"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn system_which_has_openclaws_shape() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    let r = gw
        .invoke(
            "system.which",
            json!({"bins": ["uname", "sh", "nonexistentbin"]}),
        )
        .await;
    let bins = payload(&r)["bins"].clone();
    assert!(bins["sh"].as_str().unwrap().ends_with("/sh"));
    assert!(bins.get("nonexistentbin").is_none());
    assert_eq!(
        r["nodeId"], "node",
        "the result echoes the request's nodeId"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn system_run_prepare_then_run_like_the_exec_tool() {
    let (gw, node) = connected(Config::default(), &["--allow-command", "system.run"]).await;
    let argv = json!(["/bin/sh", "-lc", "echo hello-from-node; uname -s"]);
    let plan = payload(&gw.invoke("system.run.prepare", json!({"command": argv, "rawCommand": "echo hello-from-node; uname -s", "agentId": "main", "sessionKey": "agent:main:x"})).await);
    assert_eq!(plan["plan"]["argv"], argv);
    assert_eq!(
        Path::new(plan["plan"]["cwd"].as_str().unwrap()),
        node.ws().canonicalize().unwrap()
    );
    let run = payload(&gw.invoke("system.run", json!({"command": argv, "systemRunPlan": plan["plan"], "cwd": plan["plan"]["cwd"], "timeoutMs": 30000})).await);
    assert_eq!(run["exitCode"], 0);
    assert_eq!(run["success"], true);
    assert_eq!(run["timedOut"], false);
    assert_eq!(run["stdout"], "hello-from-node\nLinux\n");
    assert_eq!(run["stderr"], "");
    assert_eq!(run["error"], Value::Null);
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_commands_and_malformed_params_get_clear_errors() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    assert_eq!(
        error_code(&gw.invoke("format_disk", json!({})).await),
        "UNKNOWN_COMMAND"
    );
    let id = gw.request("read_file", "{this is not json", 15_000);
    assert_eq!(error_code(&gw.result(&id, LONG).await), "INVALID_PARAMS");
    let id = gw.request("system.which", "[1,2]", 15_000);
    assert_eq!(error_code(&gw.result(&id, LONG).await), "INVALID_PARAMS");
}

#[tokio::test(flavor = "multi_thread")]
async fn several_invocations_run_at_once() {
    let (gw, _node) = connected(Config::default(), &["--approval", "allow"]).await;
    let started = Instant::now();
    let ids: Vec<String> = (0..4)
        .map(|i| {
            gw.request(
                "run_command",
                &json!({"command": format!("sleep 1; echo {i}")}).to_string(),
                30_000,
            )
        })
        .collect();
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            payload(&gw.result(id, LONG).await)["stdout"],
            format!("{i}\n")
        );
    }
    assert!(
        started.elapsed() < Duration::from_millis(3000),
        "{:?}: not concurrent",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn results_respect_the_gateways_max_payload() {
    let config = Config {
        max_payload: 256 * 1024,
        ..Config::default()
    };
    let (gw, node) = connected(config, &["--approval", "allow"]).await;
    std::fs::write(node.ws().join("big.txt"), "x".repeat(2 * 1024 * 1024)).unwrap();
    let r = gw.invoke("read_file", json!({"path": "big.txt"})).await;
    let p = payload(&r);
    assert_eq!(p["truncated"], true);
    assert!(r.to_string().len() < 256 * 1024);
    let r = gw
        .invoke(
            "run_command",
            json!({"command": "head -c 3000000 /dev/zero | tr '\\0' y"}),
        )
        .await;
    let p = payload(&r);
    assert_eq!(p["truncated"], true);
    assert!(p["stdout"].as_str().unwrap().contains("bytes omitted"));
    assert!(r.to_string().len() < 256 * 1024);
}

#[tokio::test(flavor = "multi_thread")]
async fn variables_that_change_what_runs_are_refused_and_a_shell_gets_only_the_locale() {
    let (gw, node) = connected(Config::default(), &["--approval", "allow"]).await;
    // OpenClaw's node host refuses the whole call, and so does this node:
    // nothing runs with part of what it asked for.
    for env in [
        json!({"LD_PRELOAD": "/tmp/evil.so", "GREETING": "hi"}),
        json!({"NODE_OPTIONS": "--require /tmp/evil.js"}),
        json!({"PATH": format!("{}:/usr/bin:/bin", node.ws().display())}),
        json!({"BASH_ENV": "/tmp/x"}),
        json!({"BAD-KEY": "x"}),
    ] {
        let r = gw
            .invoke(
                "system.run",
                json!({"command": ["/bin/sh", "-c", "touch ran"], "env": env}),
            )
            .await;
        assert_eq!(error_code(&r), "INVALID_REQUEST", "{env}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("SYSTEM_RUN_DENIED: environment override rejected"),
            "{r}"
        );
        assert!(!node.ws().join("ran").exists(), "{env}");
    }
    // A shell wrapper is given the locale and the terminal only.
    let r = payload(&gw.invoke("system.run", json!({"command": ["/bin/sh", "-c", "echo \"[$LANG][$GREETING]\""], "env": {"LANG": "C", "GREETING": "hi"}})).await);
    assert_eq!(r["stdout"], "[C][]\n");
    assert_eq!(r["strippedEnv"], json!(["GREETING"]));
    // A program gets what it asked for.
    let r = payload(
        &gw.invoke(
            "system.run",
            json!({"command": ["printenv", "GREETING"], "env": {"GREETING": "hi"}}),
        )
        .await,
    );
    assert_eq!(r["stdout"], "hi\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn odd_invoke_ids_and_malformed_requests_are_answered() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    gw.send_event(
        "node.invoke.request",
        json!({"id": "aéééé-ü", "nodeId": "node", "command": "system.which", "paramsJSON": "{\"bins\":[\"sh\"]}", "timeoutMs": 5000}),
    );
    assert_eq!(gw.result("aéééé-ü", LONG).await["ok"], true);
    gw.cancel("aéééé-ü");
    gw.send_event(
        "node.invoke.request",
        json!({"id": "bad-1", "nodeId": "node", "command": 42}),
    );
    assert_eq!(
        error_code(&gw.result("bad-1", LONG).await),
        "INVALID_REQUEST"
    );
    // still serving
    let r = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    assert_eq!(r["ok"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn escaped_output_is_cut_to_fit_not_dropped() {
    let config = Config {
        max_payload: 256 * 1024,
        ..Config::default()
    };
    let (gw, _node) = connected(config, &["--approval", "allow"]).await;
    // NUL bytes grow seven-fold on the wire (\u0000, escaped again in payloadJSON).
    let r = gw
        .invoke(
            "run_command",
            json!({"command": "head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2"}),
        )
        .await;
    let p = payload(&r);
    assert_eq!(p["truncated"], true);
    assert_eq!(p["exitCode"], 0);
    assert!(p["stdout"].as_str().unwrap().starts_with('\0'));
    assert!(r.to_string().len() < 256 * 1024);
}
