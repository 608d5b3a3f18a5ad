//! Local MCP servers proxied by `clawbot_router node` (issue 13, items 2
//! and 3) against the fake gateway and a stdio MCP server of our own
//! (`tests/fixtures/fake-mcp-server.py`, for the misbehaviour a real one
//! will not show on demand): publication beside our tools, calls under the
//! one policy and audit, cancellation forwarded, crashes restarted and
//! republished, tool list changes republished, a server that cannot start
//! left out, and every tree stopped with the node.

#![cfg(unix)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, error_code, payload};
use serde_json::{Value, json};

fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fake-mcp-server.py")
        .display()
        .to_string()
}

/// A node serving the fake MCP server as `fake`, its records in `dir`.
async fn with_fake(args: &[&str], extra: &str) -> (FakeGateway, Node, tempfile::TempDir) {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let server = format!("fake=python3 {} {extra}", fixture());
    let mut all = vec!["--token", TOKEN, "--mcp-server", &server];
    all.extend(args);
    let node = Node::start_with_env(&gw.url(), &all, &[("FAKE_MCP_DIR", dir.path())]);
    gw.wait_hellos(1, LONG).await;
    node.wait_stderr("MCP server fake (pid", LONG).await;
    (gw, node, dir)
}

async fn call(gw: &FakeGateway, tool: &str, arguments: Value) -> Value {
    gw.invoke(
        "mcp.tools.call.v1",
        json!({"server": "fake", "tool": tool, "arguments": arguments}),
    )
    .await
}

/// The names in the newest publication, once it satisfies `wanted`.
async fn published_until(
    gw: &FakeGateway,
    node: &Node,
    wanted: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + LONG;
    loop {
        if let Some(last) = gw.publications().last() {
            let names: Vec<String> = last["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect();
            if wanted(&names) {
                return names;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{:#?}\n{}",
            gw.publications(),
            node.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn log(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("log.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn grandchild(dir: &Path) -> (i32, i32) {
    let first = log(dir)
        .into_iter()
        .find(|e| e.get("grandchild").is_some())
        .unwrap();
    (
        first["server"].as_i64().unwrap() as i32,
        first["grandchild"].as_i64().unwrap() as i32,
    )
}

async fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + LONG;
    while common::alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_servers_tools_are_published_beside_ours_and_called_under_the_one_policy() {
    let (gw, node, dir) = with_fake(&["--approval", "deny"], "").await;
    let names = published_until(&gw, &node, |n| n.iter().any(|n| n == "fake_echo")).await;
    assert!(names.contains(&"clawbot_read_file".to_owned()), "{names:?}");
    for tool in ["fake_echo", "fake_write", "fake_slow", "fake_big"] {
        assert!(names.contains(&tool.to_owned()), "{tool}: {names:?}");
    }
    let last = gw.publications().last().unwrap().clone();
    let echo = last["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fake_echo")
        .unwrap()
        .clone();
    assert_eq!(echo["mcp"], json!({"server": "fake", "tool": "echo"}));
    assert_eq!(echo["parameters"]["required"], json!(["text"]));
    assert_eq!(echo["command"], "mcp.tools.call.v1");

    // Read-only: runs; the server's result comes back as it gave it.
    let answer = payload(&call(&gw, "echo", json!({"text": "hi"})).await);
    assert_eq!(answer["content"][0]["text"], "echo: hi", "{answer}");
    assert_eq!(answer["structuredContent"]["echoed"], "hi");
    // Destructive, and the node's policy is deny: never reaches the server.
    let refused = payload(&call(&gw, "write", json!({})).await);
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["structuredContent"]["error"]["code"],
        "USER_REJECTED"
    );
    assert!(!dir.path().join("written").exists());
    // A tool the server does not have, and arguments that are no object.
    assert_eq!(
        error_code(&call(&gw, "nope", json!({})).await),
        "MCP_TOOL_UNAVAILABLE"
    );
    let bad = gw
        .invoke(
            "mcp.tools.call.v1",
            json!({"server": "fake", "tool": "echo", "arguments": [1]}),
        )
        .await;
    assert_eq!(error_code(&bad), "INVALID_REQUEST");
    // Every call is audited under the server's name for it.
    let audit = std::fs::read_to_string(node.state().join("audit.jsonl")).unwrap();
    assert!(
        audit.contains("\"command\":\"fake.echo\"")
            && audit.contains("\"decision\":\"allowed:safe\""),
        "{audit}"
    );
    assert!(
        audit.contains("\"command\":\"fake.write\",") && audit.contains("refused:USER_REJECTED"),
        "{audit}"
    );
    let log = node.stderr();
    assert!(
        log.contains("fake.echo (mcp.tools.call.v1) → ok (allowed:safe)"),
        "{log}"
    );
    assert!(
        log.contains("MCP server fake: fake mcp server ready"),
        "its stderr is in the log: {log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_and_deny_name_a_servers_tools() {
    let (gw, node, dir) = with_fake(
        &[
            "--approval",
            "deny",
            "--allow-command",
            "fake.write",
            "--deny-command",
            "fake.big",
        ],
        "",
    )
    .await;
    let names = published_until(&gw, &node, |n| n.iter().any(|n| n == "fake_echo")).await;
    assert!(
        !names.contains(&"fake_big".to_owned()),
        "forbidden: not offered: {names:?}"
    );
    node.wait_stderr(
        "fake.big is not offered to agents: --deny-command forbids it",
        LONG,
    )
    .await;
    let refused = payload(&call(&gw, "big", json!({})).await);
    assert_eq!(
        refused["structuredContent"]["error"]["code"], "FORBIDDEN",
        "{refused}"
    );
    let written = payload(&call(&gw, "write", json!({})).await);
    assert_eq!(written["content"][0]["text"], "written", "{written}");
    assert!(dir.path().join("written").exists());
    // A whole server.
    let (gw, node, _dir) = with_fake(&["--deny-command", "fake.*"], "").await;
    published_until(&gw, &node, |n| {
        !n.is_empty() && !n.iter().any(|n| n.starts_with("fake_"))
    })
    .await;
    let refused = payload(&call(&gw, "echo", json!({"text": "x"})).await);
    assert_eq!(refused["structuredContent"]["error"]["code"], "FORBIDDEN");
}

#[tokio::test(flavor = "multi_thread")]
async fn words_on_a_servers_stdout_are_skipped_not_fatal() {
    let (gw, node, _dir) = with_fake(&[], "--banner").await;
    published_until(&gw, &node, |n| n.iter().any(|n| n == "fake_echo")).await;
    let junk = payload(&call(&gw, "junk", json!({})).await);
    assert_eq!(junk["content"][0]["text"], "after junk", "{junk}");
    let big = payload(&call(&gw, "big", json!({"bytes": 3_000_000})).await);
    assert!(big.to_string().len() < 3_000_000, "cut to the result limit");
    // Many small blocks (once a loop that froze the node): cut in one pass.
    let many = payload(&call(&gw, "big", json!({"bytes": 100, "blocks": 40_000})).await);
    assert!(
        many.to_string().contains("more text block(s) left out"),
        "cut"
    );
    let answer = payload(&call(&gw, "echo", json!({"text": "still"})).await);
    assert_eq!(answer["content"][0]["text"], "echo: still");
    assert_eq!(
        node.stderr().matches("MCP server fake (pid").count(),
        1,
        "never restarted: {}",
        node.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restricted_surface_still_publishes_the_local_servers() {
    let (gw, node, _dir) = with_fake(&["--commands", "system.which"], "").await;
    let names = published_until(&gw, &node, |n| n.iter().any(|n| n == "fake_echo")).await;
    assert!(
        names.iter().all(|n| n.starts_with("fake_")),
        "none of ours: {names:?}"
    );
    let commands = gw.connects()[0]["commands"].clone();
    assert_eq!(commands, json!(["system.which", "mcp.tools.call.v1"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_from_the_gateway_reaches_the_server() {
    let (gw, _node, dir) = with_fake(&[], "").await;
    let params = json!({"server": "fake", "tool": "slow", "arguments": {}}).to_string();
    let id = gw.request("mcp.tools.call.v1", &params, 60_000);
    let deadline = Instant::now() + LONG;
    while !log(dir.path()).iter().any(|e| e["method"] == "tools/call") {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gw.cancel(&id);
    assert_eq!(error_code(&gw.result(&id, LONG).await), "CANCELLED");
    let deadline = Instant::now() + LONG;
    loop {
        let entries = log(dir.path());
        let cancelled = entries
            .iter()
            .find(|e| e["method"] == "notifications/cancelled");
        // The server heard the cancel for its request (and stopped waiting).
        if let Some(c) = cancelled
            && entries.iter().any(|e| e["slow"] == "cancelled")
        {
            let asked = entries.iter().find(|e| e["slow"] == "cancelled").unwrap();
            assert_eq!(c["params"]["requestId"], asked["id"], "{entries:?}");
            break;
        }
        assert!(Instant::now() < deadline, "{entries:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_server_is_withdrawn_restarted_and_republished_and_its_tree_stopped() {
    let (gw, node, dir) = with_fake(&[], "--grandchild").await;
    published_until(&gw, &node, |n| n.iter().any(|n| n == "fake_echo")).await;
    let (server, left) = grandchild(dir.path());
    let crashed = call(&gw, "crash", json!({})).await;
    assert_eq!(error_code(&crashed), "MCP_SERVER_UNAVAILABLE", "{crashed}");
    // Withdrawn: a publication without its tools...
    published_until(&gw, &node, |n| {
        !n.is_empty() && !n.iter().any(|n| n.starts_with("fake_"))
    })
    .await;
    node.wait_stderr(
        "MCP server fake exited (exit status: 3); starting it again in",
        LONG,
    )
    .await;
    assert!(
        gone(server).await && gone(left).await,
        "what the crashed server left is stopped"
    );
    let down = call(&gw, "echo", json!({"text": "x"})).await;
    if down["ok"] == false {
        assert!(
            ["MCP_SERVER_UNAVAILABLE", "MCP_TOOL_UNAVAILABLE"]
                .contains(&error_code(&down).as_str())
        );
    }
    // ...then back, with them.
    published_until(&gw, &node, |n| n.iter().any(|n| n == "fake_echo")).await;
    let answer = payload(&call(&gw, "echo", json!({"text": "again"})).await);
    assert_eq!(answer["content"][0]["text"], "echo: again");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_list_change_is_republished() {
    let (gw, node, _dir) = with_fake(&[], "").await;
    published_until(&gw, &node, |n| n.iter().any(|n| n == "fake_echo")).await;
    assert!(
        !gw.publications()
            .last()
            .unwrap()
            .to_string()
            .contains("fake_extra")
    );
    payload(&call(&gw, "grow", json!({})).await);
    published_until(&gw, &node, |n| n.iter().any(|n| n == "fake_extra")).await;
    node.wait_stderr("MCP server fake changed its tools", LONG)
        .await;
    // Unannotated: risky; the node has no terminal: refused as a result.
    let extra = payload(&call(&gw, "extra", json!({})).await);
    assert_eq!(
        extra["structuredContent"]["error"]["code"], "USER_REJECTED",
        "{extra}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_is_reported_and_left_out() {
    let gw = FakeGateway::start(Config::default()).await;
    let node = Node::start(
        &gw.url(),
        &[
            "--token",
            TOKEN,
            "--mcp-server",
            "gone=/nonexistent/mcp-server --flag",
        ],
    );
    gw.wait_hellos(1, LONG).await;
    node.wait_stderr("MCP server gone cannot start", LONG).await;
    node.wait_stderr("published 8 tools", LONG).await;
    let answer = gw
        .invoke("mcp.tools.call.v1", json!({"server": "gone", "tool": "x"}))
        .await;
    assert_eq!(error_code(&answer), "MCP_TOOL_UNAVAILABLE", "{answer}");
    let answer = gw
        .invoke("mcp.tools.call.v1", json!({"server": "other", "tool": "x"}))
        .await;
    assert_eq!(error_code(&answer), "MCP_SERVER_UNAVAILABLE", "{answer}");
    // Ours still work.
    std::fs::write(node.ws().join("a.txt"), "still here").unwrap();
    let ours = gw
        .invoke(
            "mcp.tools.call.v1",
            json!({"server": "clawbot", "tool": "read_file", "arguments": {"path": "a.txt"}}),
        )
        .await;
    assert_eq!(payload(&ours)["structuredContent"]["content"], "still here");
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_the_node_stops_every_servers_tree() {
    let (_gw, mut node, dir) = with_fake(&[], "--grandchild").await;
    let (server, left) = grandchild(dir.path());
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(LONG).await, Some(0), "{}", node.stderr());
    assert!(gone(server).await, "server {server} outlived the node");
    assert!(gone(left).await, "its child {left} outlived the node");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_killed_outright_takes_every_servers_tree_with_it() {
    let (_gw, node, dir) = with_fake(&[], "--grandchild").await;
    let (server, left) = grandchild(dir.path());
    node.signal(libc::SIGKILL);
    common::assert_gone_in_time(&[server, left], "a local MCP server's tree");
}

#[test]
fn bad_server_flags_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(&config, r#"{"mcpServers": {"a": {"command": 5}}}"#).unwrap();
    let config = config.display().to_string();
    for (args, says) in [
        (vec!["--mcp-server", "no-equals"], "NAME=COMMAND"),
        (vec!["--mcp-server", "clawbot=x"], "own tools"),
        (
            vec!["--mcp-server", "a=x", "--mcp-server", "a=y"],
            "named twice",
        ),
        (
            vec!["--mcp-config", &config],
            "\"command\" must be a non-empty string",
        ),
        (
            vec!["--mcp-server", "a=x", "--no-agent-tools"],
            "cannot be used with",
        ),
    ] {
        let mut cmd = common::router();
        cmd.args(["node", "--gateway", "ws://127.0.0.1:9", "--state-dir"])
            .arg(dir.path().join("state"))
            .args(&args);
        let run = common::run(&mut cmd);
        assert_ne!(run.code, Some(0), "{args:?}");
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
}
