//! Claude Code sessions through the real OpenClaw gateway: the operator's
//! `sessions.catalog.list` / `.read` on our node (fixture
//! tests/fixtures/claude, `--claude-sessions`), and our raw payloads
//! against `openclaw node run`'s on the same directory. Ignored by a plain
//! `cargo test` (they need the sandbox); `scripts/e2e.sh` runs them.

#![cfg(unix)]

mod common;

use std::path::Path;

use common::claude::{A, B, C, ClaudeDir, F};
use common::claude_pages::{check_catalog_page, check_transcript_page};
use common::e2e::{RealNode, TheirNode, nodes_invoke, openclaw, openclaw_json};
use serde_json::{Value, json};

const LIST: &str = "anthropic.claude.sessions.list.v1";
const READ: &str = "anthropic.claude.sessions.read.v1";

fn our_node(name: &str, claude: &ClaudeDir, home: &Path) -> RealNode {
    let env = [("CLAUDE_CONFIG_DIR", claude.path()), ("HOME", home)];
    let node = RealNode::start_env(name, &["--claude-sessions"], None, &env);
    node.approve_surface();
    node
}

fn node_id(name: &str) -> String {
    let listed = openclaw_json(&["nodes", "list", "--json"]);
    listed["paired"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["displayName"] == name)
        .and_then(|n| n["nodeId"].as_str())
        .unwrap_or_else(|| panic!("{name} is not paired: {listed}"))
        .to_owned()
}

/// `openclaw gateway call METHOD --params P --json`.
fn call(method: &str, params: Value) -> Value {
    let (stdout, stderr, code) = openclaw(&[
        "gateway",
        "call",
        method,
        "--params",
        &params.to_string(),
        "--json",
    ]);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("{method} gave no JSON (rc {code:?}):\n{stdout}\n{stderr}"))
}

/// The one host of a `sessions.catalog.list` answer.
fn host(listed: &Value) -> Value {
    let hosts = &listed["catalogs"][0]["hosts"];
    assert_eq!(hosts.as_array().map(Vec::len), Some(1), "{listed}");
    assert!(hosts[0].get("error").is_none(), "{listed}");
    hosts[0].clone()
}

fn ids(sessions: &Value) -> Vec<&str> {
    sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["threadId"].as_str().unwrap())
        .collect()
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_the_operator_lists_and_reads_our_sessions() {
    let claude = ClaudeDir::fixture();
    let home = tempfile::tempdir().unwrap();
    let _node = our_node("e2e-claude", &claude, home.path());
    let host_id = format!("node:{}", node_id("e2e-claude"));
    let list = |extra: Value| {
        let mut params = json!({"catalogId": "claude", "hostIds": [host_id], "limitPerHost": 2});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        host(&call("sessions.catalog.list", params))
    };
    let first = list(json!({}));
    assert_eq!(ids(&first["sessions"]), [F, B], "{first}");
    assert_eq!(first["nextCursor"], "eyJvZmZzZXQiOjJ9");
    let second = list(json!({"cursors": {&host_id: first["nextCursor"]}}));
    assert_eq!(ids(&second["sessions"]), [A, C], "{second}");
    assert!(second.get("nextCursor").is_none());
    let found = list(json!({"search": "release-1.2"}));
    assert_eq!(ids(&found["sessions"]), [F]);
    // Read backwards one item at a time, to the first line.
    let mut texts = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..20 {
        let mut params =
            json!({"catalogId": "claude", "hostId": host_id, "threadId": A, "limit": 1});
        if let Some(c) = &cursor {
            params["cursor"] = c.clone();
        }
        let page = call("sessions.catalog.read", params);
        assert_eq!(page["threadId"], A, "{page}");
        for item in page["items"].as_array().unwrap() {
            texts.push(item["text"].as_str().unwrap_or_default().to_owned());
        }
        match page.get("nextCursor") {
            Some(c) => cursor = Some(c.clone()),
            None => break,
        }
    }
    assert_eq!(
        texts.last().map(String::as_str),
        Some("The login form rejects valid passwords. Fix it."),
        "{texts:?}"
    );
    assert!(
        !texts
            .iter()
            .any(|t| t.contains("subagent") || t.contains("/clear"))
    );
    assert!(texts.iter().any(|t| t.contains("removed the strip")));
    // A direct invoke answers OpenClaw's error.
    let (stdout, stderr, _) = openclaw(&[
        "nodes",
        "invoke",
        "--node",
        "e2e-claude",
        "--command",
        LIST,
        "--params",
        r#"{"limit":0}"#,
        "--json",
    ]);
    assert!(
        format!("{stdout}{stderr}").contains("limit must be an integer from 1 to 100"),
        "{stdout}\n{stderr}"
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_off_by_default_the_commands_are_not_declared() {
    let claude = ClaudeDir::fixture();
    let env = [("CLAUDE_CONFIG_DIR", claude.path())];
    let node = RealNode::start_env("e2e-claude-off", &[], None, &env);
    node.approve_surface();
    let host_id = format!("node:{}", node_id("e2e-claude-off"));
    let listed = call(
        "sessions.catalog.list",
        json!({"catalogId": "claude", "hostIds": [host_id]}),
    );
    assert_eq!(listed["catalogs"][0]["hosts"], json!([]), "{listed}");
    let answer = node.invoke(LIST, json!({}));
    assert_ne!(answer["ok"], true, "{answer}");
    assert!(
        !node.log().contains(LIST),
        "the node was never asked:\n{}",
        node.log()
    );
}

/// The raw payload of one invoke of `command` on node `name`.
fn invoke(name: &str, command: &str, params: &Value) -> Value {
    let invoked = nodes_invoke(name, command, params, None);
    let said = invoked.said;
    invoked.json.unwrap_or_else(|| json!({ "error": said }))
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_our_payloads_are_openclaw_node_runs_on_the_same_directory() {
    let claude = ClaudeDir::fixture();
    let home = tempfile::tempdir().unwrap();
    let env = [("CLAUDE_CONFIG_DIR", claude.path()), ("HOME", home.path())];
    let theirs = TheirNode::start_env("e2e-claude-openclaw", &json!({}), &env);
    let _ours = our_node("e2e-claude-ours", &claude, home.path());
    theirs.approve();
    let both = |command: &str, params: Value| {
        let expected = invoke("e2e-claude-openclaw", command, &params);
        let got = invoke("e2e-claude-ours", command, &params);
        (got, expected)
    };
    let mut compared = 0;
    for params in [
        json!({"limit": 5}),
        json!({"limit": 2, "cursor": "eyJvZmZzZXQiOjJ9"}),
        json!({"searchTerm": "PARSER"}),
    ] {
        let (got, expected) = both(LIST, params.clone());
        assert_eq!(
            got["payload"], expected["payload"],
            "{params}\nours: {got:#}\ntheirs: {expected:#}"
        );
        check_catalog_page(&got["payload"]).unwrap();
        compared += got["payload"]["sessions"].as_array().unwrap().len();
    }
    assert_eq!(compared, 4 + 2 + 1);
    let (first, expected) = both(READ, json!({"threadId": C, "limit": 7}));
    assert_eq!(
        first["payload"], expected["payload"],
        "ours: {first:#}\ntheirs: {expected:#}"
    );
    let next = first["payload"]["nextCursor"].clone();
    assert!(next.is_string(), "{first}");
    for params in [
        json!({"threadId": C, "limit": 50, "cursor": next}),
        json!({"threadId": A}),
    ] {
        let (got, expected) = both(READ, params.clone());
        assert_eq!(
            got["payload"], expected["payload"],
            "{params}\nours: {got:#}\ntheirs: {expected:#}"
        );
        check_transcript_page(&got["payload"], params["threadId"].as_str().unwrap()).unwrap();
    }
    // The same refusals, word for word.
    for (command, params, words) in [
        (
            LIST,
            json!({"limit": 0}),
            "Error: limit must be an integer from 1 to 100",
        ),
        (
            LIST,
            json!({"cursor": "bad cursor!"}),
            "Error: catalog cursor is invalid",
        ),
        (
            READ,
            json!({"threadId": "a/b"}),
            "Error: threadId is invalid",
        ),
        (
            READ,
            json!({"threadId": "99999999"}),
            "Error: Claude session is unavailable",
        ),
    ] {
        let (got, expected) = both(command, params.clone());
        assert!(got.get("payload").is_none(), "{got}");
        assert!(got.to_string().contains(words), "{got}");
        let text = |v: &Value| {
            v.to_string()
                .replace("e2e-claude-ours", "N")
                .replace("e2e-claude-openclaw", "N")
        };
        assert_eq!(text(&got), text(&expected), "{command} {params}");
    }
}
