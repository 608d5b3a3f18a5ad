//! `clawbot_router node` against a fake gateway speaking protocol v4
//! (tests/common/gateway.rs). A running command's output streamed as
//! `node.invoke.progress` before its result, keep-alive chunks for a quiet
//! command, and cancelling a running invocation.

#![cfg(unix)]

mod common;

use std::time::{Duration, Instant};

use common::gateway::{Config, FakeGateway};
use common::node::{LONG, connected, error_code, payload, start_sleeper};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_kills_the_running_invocation() {
    let (gw, node) = connected(Config::default(), &["--approval", "allow"]).await;
    let (id, pid) = start_sleeper(&gw, &node).await;
    gw.cancel(&id);
    assert_eq!(error_code(&gw.result(&id, LONG).await), "CANCELLED");
    common::assert_all_gone(&[pid]);
}

/// The `node.invoke.progress` params the node sent for `id`, in order.
fn progress_of(gw: &FakeGateway, id: &str) -> Vec<Value> {
    gw.node_requests()
        .into_iter()
        .filter(|r| r["method"] == "node.invoke.progress" && r["params"]["invokeId"] == id)
        .map(|r| r["params"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_command_streams_its_output_as_progress_before_the_result() {
    let (gw, node) = connected(Config::default(), &["--approval", "allow"]).await;
    // A line, a pause, then 60 KB of three-byte characters: several
    // chunks, each cut between characters.
    let script = "echo started; sleep 1.5; i=0; while [ $i -lt 20000 ]; do printf '€'; i=$((i+1)); done; echo; echo done >&2";
    let id = gw.request(
        "system.run",
        &json!({"command": ["sh", "-c", script]}).to_string(),
        30_000,
    );
    let deadline = Instant::now() + LONG;
    while progress_of(&gw, &id).is_empty() {
        assert!(Instant::now() < deadline, "no progress: {}", node.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !gw.node_requests()
            .iter()
            .any(|r| r["method"] == "node.invoke.result" && r["params"]["id"] == id),
        "the first chunk arrived while the command was still running"
    );
    let result = gw.result(&id, LONG).await;
    let chunks = progress_of(&gw, &id);
    let requests = gw.node_requests();
    let last_chunk = requests
        .iter()
        .rposition(|r| r["method"] == "node.invoke.progress" && r["params"]["invokeId"] == id)
        .unwrap();
    let result_at = requests
        .iter()
        .position(|r| r["method"] == "node.invoke.result" && r["params"]["id"] == id)
        .unwrap();
    assert!(
        last_chunk < result_at,
        "every chunk comes before the result"
    );
    for (i, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk["seq"], i as u64, "zero-based, gapless");
        assert!(chunk["chunk"].as_str().unwrap().len() <= 16384);
        assert_eq!(chunk["nodeId"], result["nodeId"], "the invoke's node id");
    }
    assert!(chunks.len() >= 4, "60 KB is at least four chunks");
    let streamed: String = chunks
        .iter()
        .map(|c| c["chunk"].as_str().unwrap())
        .collect();
    let payload = payload(&result);
    let stdout = payload["stdout"].as_str().unwrap();
    assert_eq!(
        streamed.replace("done\n", ""),
        stdout,
        "the stream is the output, whole characters"
    );
    assert!(streamed.contains("done\n"), "stderr streams too");
    assert!(!node.stderr().contains("refused node.invoke.progress"));
    node.wait_stderr("streamed", LONG).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_command_streams_nothing_more() {
    let (gw, node) = connected(Config::default(), &["--approval", "allow"]).await;
    let id = gw.request(
        "run_command",
        &json!({"command": ["sh", "-c", "while :; do echo tick; sleep 0.05; done"]}).to_string(),
        60_000,
    );
    let deadline = Instant::now() + LONG;
    while progress_of(&gw, &id).is_empty() {
        assert!(Instant::now() < deadline, "no progress: {}", node.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The ticks come every 50 ms and are sent every 200 ms: at the cancel,
    // at most the chunk already on its way may still arrive.
    let at_cancel = progress_of(&gw, &id).len();
    gw.cancel(&id);
    assert_eq!(error_code(&gw.result(&id, LONG).await), "CANCELLED");
    let after_result = progress_of(&gw, &id).len();
    assert!(
        after_result <= at_cancel + 1,
        "{at_cancel} chunks at the cancel, {after_result} at the answer"
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        progress_of(&gw, &id).len(),
        after_result,
        "no chunk after the cancelled call's answer"
    );
    let requests = gw.node_requests();
    let result_at = requests
        .iter()
        .position(|r| r["method"] == "node.invoke.result" && r["params"]["id"] == id)
        .unwrap();
    assert!(
        !requests[result_at..]
            .iter()
            .any(|r| r["method"] == "node.invoke.progress"),
        "nothing streamed after the answer"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_end_of_a_burst_is_not_held_back_while_the_command_is_quiet() {
    let (gw, node) = connected(Config::default(), &["--approval", "allow"]).await;
    // 20,001 bytes (more than one chunk) in one write (cat's), then three
    // quiet seconds.
    let id = gw.request(
        "system.run",
        &json!({"command": ["sh", "-c", "head -c 20000 /dev/zero | tr '\\0' y > burst; echo >> burst; cat burst; sleep 3; touch over"]})
            .to_string(),
        30_000,
    );
    let streamed = || -> usize {
        progress_of(&gw, &id)
            .iter()
            .map(|c| c["chunk"].as_str().unwrap().len())
            .sum()
    };
    let deadline = Instant::now() + LONG;
    while streamed() < 20_001 {
        assert!(
            Instant::now() < deadline,
            "{} bytes streamed: {}",
            streamed(),
            node.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !node.ws().join("over").exists(),
        "all of it arrived while the command was still quiet"
    );
    assert_eq!(streamed(), 20_001);
    gw.result(&id, LONG).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_that_prints_nothing_streams_nothing_and_a_file_tool_never_streams() {
    let (gw, _node) = connected(Config::default(), &["--approval", "allow"]).await;
    let quiet = gw
        .invoke("system.run", json!({"command": ["sh", "-c", "sleep 0.5"]}))
        .await;
    assert_eq!(payload(&quiet)["exitCode"], 0);
    let listing = gw.invoke("list_files", json!({"path": "."})).await;
    assert_eq!(listing["ok"], true, "{listing}");
    assert!(
        !gw.node_requests()
            .iter()
            .any(|r| r["method"] == "node.invoke.progress"),
        "no empty chunks for a short quiet command, none for file tools"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_quiet_long_command_says_it_is_alive_with_empty_chunks() {
    let (gw, _node) = connected(Config::default(), &["--approval", "allow"]).await;
    let result = gw
        .invoke(
            "run_command",
            json!({"command": ["sh", "-c", "sleep 5.6; echo late"]}),
        )
        .await;
    assert_eq!(payload(&result)["exitCode"], 0, "{result}");
    let id = result["id"].as_str().unwrap();
    let chunks: Vec<String> = progress_of(&gw, id)
        .iter()
        .map(|c| c["chunk"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        chunks,
        ["", "late\n"],
        "a heartbeat after 5 s, then the output"
    );
}
