//! `clawbot_router node` against a fake gateway speaking protocol v4
//! (tests/common/gateway.rs). The node's tools published to the gateway as
//! node-mcp tools (`mcp.tools.call.v1`): publication and its retries, a
//! restricted surface publishing nothing, calls going through the one
//! dispatch and policy, and malformed calls.

#![cfg(unix)]

mod common;

use std::time::{Duration, Instant};

use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, allowlist_for, connected, error_code, payload, which};
use serde_json::{Value, json};

/// `mcp.tools.call.v1` for one of our tools; the node.invoke.result.
async fn mcp_call(gw: &FakeGateway, tool: &str, arguments: Value) -> Value {
    gw.invoke(
        "mcp.tools.call.v1",
        json!({"server": "clawbot", "tool": tool, "arguments": arguments}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_nodes_tools_are_published_as_node_mcp_tools_the_gateway_accepts() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let connect = gw.connects()[0].clone();
    assert!(
        connect["commands"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp.tools.call.v1"))
    );
    assert!(connect["caps"].as_array().unwrap().contains(&json!("mcp")));
    node.wait_stderr("published 8 tools", LONG).await;
    let published = gw.publications();
    assert_eq!(published.len(), 1, "one publication per connect");
    let tools = published[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "clawbot_read_file",
            "clawbot_list_files",
            "clawbot_search_files",
            "clawbot_read_config",
            "clawbot_validate_config",
            "clawbot_system_info",
            "clawbot_write_file",
            "clawbot_run_command"
        ]
    );
    assert_eq!(
        tools[0]["mcp"],
        json!({"server": "clawbot", "tool": "read_file"})
    );
    assert_eq!(tools[0]["parameters"]["required"], json!(["path"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn publication_is_retried_after_a_transient_refusal_and_repeated_after_a_reconnect() {
    let mut gw = FakeGateway::start(Config::default()).await;
    gw.fail_publications(2);
    let node = Node::start(&gw.url(), &["--token", TOKEN]);
    gw.wait_hellos(1, LONG).await;
    node.wait_stderr("published 8 tools", LONG).await;
    assert_eq!(
        gw.publications().len(),
        3,
        "two refused as transient, then taken"
    );
    gw.stop();
    node.wait_stderr("connection lost", LONG).await;
    gw.restart().await;
    gw.wait_hellos(2, Duration::from_secs(40)).await;
    let deadline = Instant::now() + LONG;
    while gw.publications().len() < 4 {
        assert!(
            Instant::now() < deadline,
            "not republished: {}",
            node.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restricted_surface_publishes_nothing() {
    for flags in [&["--commands", "read_file"][..], &["--no-agent-tools"][..]] {
        let (gw, node) = connected(Config::default(), flags).await;
        let commands = gw.connects()[0]["commands"].as_array().unwrap().clone();
        assert!(!commands.contains(&json!("mcp.tools.call.v1")), "{flags:?}");
        let listed = gw.invoke("read_file", json!({"path": "."})).await;
        assert_eq!(
            listed["ok"], false,
            "a directory is no file: the node answered"
        );
        // Not declared, so not served either.
        let call = mcp_call(&gw, "read_file", json!({"path": "x"})).await;
        assert_eq!(error_code(&call), "UNKNOWN_COMMAND", "{flags:?}: {call}");
        assert!(gw.publications().is_empty(), "{}", node.stderr());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_published_tool_call_runs_through_the_one_dispatch_and_policy() {
    let (gw, node) = connected(Config::default(), &["--approval", "deny"]).await;
    std::fs::write(node.ws().join("notes.txt"), "remember the milk\n").unwrap();
    let read = mcp_call(&gw, "read_file", json!({"path": "notes.txt"})).await;
    let result = payload(&read);
    assert_eq!(
        result["structuredContent"]["content"], "remember the milk\n",
        "{read}"
    );
    assert_eq!(result["content"], json!([]), "the result once, not twice");
    assert!(result.get("isError").is_none());
    // The policy decides as for any call: refused, as a result the agent reads.
    let write = mcp_call(&gw, "write_file", json!({"path": "x.txt", "content": "x"})).await;
    let refused = payload(&write);
    assert_eq!(refused["isError"], true, "{write}");
    assert_eq!(
        refused["structuredContent"]["error"]["code"],
        "USER_REJECTED"
    );
    assert!(!node.ws().join("x.txt").exists());
    let sudo = mcp_call(&gw, "run_command", json!({"command": "sudo true"})).await;
    assert_eq!(
        payload(&sudo)["structuredContent"]["error"]["code"],
        "FORBIDDEN"
    );
    // The audit log names the tool, not the door.
    let audit = std::fs::read_to_string(node.state().join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"command\":\"read_file\""), "{audit}");
    assert!(audit.contains("\"command\":\"write_file\""), "{audit}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_published_commands_agent_is_its_sessions_for_the_allowlist() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    let truth = std::fs::canonicalize(which("true")).unwrap();
    allowlist_for(&gw, "main", json!([truth])).await;
    let call = |session: &str| {
        let id = uuid::Uuid::new_v4().to_string();
        let params =
            json!({"server": "clawbot", "tool": "run_command", "arguments": {"command": ["true"]}});
        gw.send_event(
            "node.invoke.request",
            json!({"id": id, "nodeId": "node", "command": "mcp.tools.call.v1",
                   "paramsJSON": params.to_string(), "timeoutMs": 30_000, "sessionKey": session}),
        );
        id
    };
    let mains = call("agent:main:explicit:s1");
    let result = payload(&gw.result(&mains, LONG).await);
    assert_eq!(
        result["structuredContent"]["exitCode"], 0,
        "main's entry: {result}"
    );
    let ops = call("agent:ops:explicit:s2");
    let result = payload(&gw.result(&ops, LONG).await);
    assert_eq!(result["isError"], true, "not ops': {result}");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_mcp_calls_get_openclaws_codes() {
    let (gw, node) = connected(Config::default(), &[]).await;
    for (params, code) in [
        (json!({"server": "clawbot"}), "INVALID_REQUEST"),
        (
            json!({"server": "clawbot", "tool": "read_file", "arguments": "x"}),
            "INVALID_REQUEST",
        ),
        (
            json!({"server": "elsewhere", "tool": "read_file"}),
            "MCP_SERVER_UNAVAILABLE",
        ),
        (
            json!({"server": "clawbot", "tool": "system.run"}),
            "MCP_TOOL_UNAVAILABLE",
        ),
        (
            json!({"server": "clawbot", "tool": "nope"}),
            "MCP_TOOL_UNAVAILABLE",
        ),
    ] {
        let answer = gw.invoke("mcp.tools.call.v1", params.clone()).await;
        assert_eq!(error_code(&answer), code, "{params}: {answer}");
    }
    let raw = gw.request("mcp.tools.call.v1", "{not json", 10_000);
    assert_eq!(error_code(&gw.result(&raw, LONG).await), "INVALID_REQUEST");
    // Every one is in the audit log, refused before any tool ran.
    let audit = std::fs::read_to_string(node.state().join("audit.jsonl")).unwrap();
    let refused = audit
        .lines()
        .filter(|l| {
            l.contains("\"command\":\"mcp.tools.call.v1\"") && l.contains("\"outcome\":\"error:")
        })
        .count();
    assert_eq!(refused, 6, "{audit}");
}
