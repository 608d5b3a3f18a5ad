//! `anthropic.claude.sessions.list.v1` / `.read.v1` against the fake
//! gateway, on the fixture (tests/fixtures/claude): off unless the owner
//! turns them on, then OpenClaw's rows, pages and cursors. Every page goes
//! through the gateway's own checks (tests/common/claude_pages.rs).

#![cfg(unix)]

mod common;

use common::claude::{A, B, C, ClaudeDir, F, cursor};
use common::claude_pages::{check_catalog_page, check_transcript_page};
use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, payload};
use serde_json::{Value, json};

const LIST: &str = "anthropic.claude.sessions.list.v1";
const READ: &str = "anthropic.claude.sessions.read.v1";

async fn node_on(claude: &ClaudeDir, extra: &[&str]) -> (FakeGateway, Node) {
    let gw = FakeGateway::start(Config::default()).await;
    let mut args = vec!["--token", TOKEN, "--claude-sessions"];
    args.extend(extra);
    let node = Node::start_with_env(&gw.url(), &args, &[("CLAUDE_CONFIG_DIR", claude.path())]);
    gw.wait_hellos(1, LONG).await;
    (gw, node)
}

async fn list(gw: &FakeGateway, params: Value) -> Value {
    let page = payload(&gw.invoke(LIST, params).await);
    check_catalog_page(&page).unwrap();
    page
}

async fn read(gw: &FakeGateway, params: Value) -> Value {
    let page = payload(&gw.invoke(READ, params.clone()).await);
    check_transcript_page(&page, params["threadId"].as_str().unwrap()).unwrap();
    page
}

fn ids(page: &Value) -> Vec<&str> {
    page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["threadId"].as_str().unwrap())
        .collect()
}

fn error(result: &Value) -> (String, String) {
    assert_eq!(result["ok"], false, "{result}");
    (
        result["error"]["code"].as_str().unwrap().to_owned(),
        result["error"]["message"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn off_unless_the_owner_turns_them_on() {
    let claude = ClaudeDir::fixture();
    let gw = FakeGateway::start(Config::default()).await;
    let _node = Node::start_with_env(
        &gw.url(),
        &["--token", TOKEN],
        &[("CLAUDE_CONFIG_DIR", claude.path())],
    );
    gw.wait_hellos(1, LONG).await;
    let connect = &gw.connects()[0];
    assert!(!connect["commands"].to_string().contains("anthropic."));
    assert!(!connect["caps"].to_string().contains("claude-sessions"));
    let (code, message) = error(&gw.invoke(LIST, json!({})).await);
    assert_eq!(code, "UNAVAILABLE");
    assert!(message.contains("not advertised"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_list_has_openclaws_rows_newest_first() {
    let claude = ClaudeDir::fixture();
    let (gw, _node) = node_on(&claude, &[]).await;
    let connect = &gw.connects()[0];
    assert!(
        connect["caps"]
            .as_array()
            .unwrap()
            .contains(&json!("claude-sessions"))
    );
    for c in [LIST, READ] {
        assert!(connect["commands"].as_array().unwrap().contains(&json!(c)));
    }
    let page = list(&gw, json!({})).await;
    assert_eq!(ids(&page), [F, B, A, C]);
    assert!(page.get("nextCursor").is_none());
    let rows = page["sessions"].as_array().unwrap();
    // From the index: its summary, project path, branch and times.
    assert_eq!(
        rows[2],
        json!({"threadId": A, "name": "Fix the login bug", "cwd": "/tmp/proj",
               "status": "stored", "createdAt": 1748772000000u64,
               "updatedAt": 1748772420000u64, "recencyAt": 1748772420000u64,
               "source": "claude-cli", "modelProvider": "anthropic",
               "gitBranch": "feature/login", "archived": false})
    );
    // A blank summary falls back to the first prompt; a blank project
    // path is left out (the gateway rejects "").
    assert_eq!(rows[3]["name"], "Profile the importer");
    assert!(rows[3].get("cwd").is_none());
    assert_eq!(rows[3]["updatedAt"], 1748770000000u64);
    // From the file alone: its custom title wins over the AI title and
    // the first prompt; its colour, version and time.
    assert_eq!(rows[1]["name"], "My parser work");
    assert_eq!(rows[1]["color"], "purple");
    assert_eq!(rows[1]["cliVersion"], "2.0.14");
    assert_eq!(rows[1]["gitBranch"], "main");
    assert_eq!(rows[1]["recencyAt"], 1748822400000u64);
    assert_eq!(rows[0]["cwd"], "/tmp/other");
}

#[tokio::test(flavor = "multi_thread")]
async fn paging_and_search() {
    let claude = ClaudeDir::fixture();
    let (gw, _node) = node_on(&claude, &[]).await;
    let first = list(&gw, json!({"limit": 2})).await;
    assert_eq!(ids(&first), [F, B]);
    assert_eq!(first["nextCursor"], "eyJvZmZzZXQiOjJ9");
    let second = list(&gw, json!({"limit": 2, "cursor": first["nextCursor"]})).await;
    assert_eq!(ids(&second), [A, C]);
    assert!(second.get("nextCursor").is_none());
    let past = list(&gw, json!({"cursor": cursor(99)})).await;
    assert!(ids(&past).is_empty() && past.get("nextCursor").is_none());
    // Over name, cwd, branch and id, without case.
    let by_branch = list(&gw, json!({"searchTerm": "RELEASE-1.2"})).await;
    assert_eq!(ids(&by_branch), [F]);
    assert_eq!(ids(&list(&gw, json!({"searchTerm": "parser"})).await), [B]);
    assert_eq!(
        ids(&list(&gw, json!({"searchTerm": "/tmp/proj"})).await),
        [B, A]
    );
    assert_eq!(
        ids(&list(&gw, json!({"searchTerm": "33333333"})).await),
        [C]
    );
    let (code, message) = error(&gw.invoke(LIST, json!({"limit": 0})).await);
    assert_eq!(
        (code.as_str(), message.as_str()),
        (
            "INVALID_REQUEST",
            "Error: limit must be an integer from 1 to 100"
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transcript_reads_backwards_without_sidechain_or_meta_lines() {
    let claude = ClaudeDir::fixture();
    let (gw, _node) = node_on(&claude, &[]).await;
    let page = read(&gw, json!({"threadId": A})).await;
    let items = page["items"].as_array().unwrap();
    let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "agentMessage",
            "toolResult",
            "toolCall",
            "reasoning",
            "userMessage"
        ]
    );
    assert_eq!(
        items[0]["text"],
        "The check strips the password; I removed the strip."
    );
    assert_eq!(items[0]["model"], "claude-sonnet-4-5");
    assert_eq!(
        items[2]["content"][0]["input"]["file_path"],
        "/tmp/proj/login.py"
    );
    assert_eq!(items[4]["uuid"], "11111111-0001");
    assert!(page.get("nextCursor").is_none());
    // One at a time, following the cursor back to the first line.
    let mut seen = Vec::new();
    let mut next: Option<Value> = None;
    loop {
        let mut params = json!({"threadId": A, "limit": 1});
        if let Some(c) = &next {
            params["cursor"] = c.clone();
        }
        let page = read(&gw, params).await;
        seen.push(page["items"][0]["uuid"].clone());
        match page.get("nextCursor") {
            Some(c) => next = Some(c.clone()),
            None => break,
        }
    }
    let all: Vec<Value> = items.iter().map(|i| i["uuid"].clone()).collect();
    assert_eq!(seen, all);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_transcript_pages_back_to_its_first_line() {
    let claude = ClaudeDir::fixture();
    let (gw, _node) = node_on(&claude, &[]).await;
    let mut uuids = Vec::new();
    let mut next: Option<Value> = None;
    let mut pages = 0;
    loop {
        let mut params = json!({"threadId": C, "limit": 50});
        if let Some(c) = &next {
            params["cursor"] = c.clone();
        }
        let page = read(&gw, params).await;
        pages += 1;
        for item in page["items"].as_array().unwrap() {
            uuids.push(item["uuid"].as_str().unwrap().to_owned());
            assert!(item["resumeCursor"].is_string());
        }
        match page.get("nextCursor") {
            Some(c) => next = Some(c.clone()),
            None => break,
        }
    }
    assert_eq!(pages, 8);
    let want: Vec<String> = (0..400).rev().map(|i| format!("33333333-{i:04}")).collect();
    assert_eq!(uuids, want);
}

#[tokio::test(flavor = "multi_thread")]
async fn read_errors_have_openclaws_words() {
    let claude = ClaudeDir::fixture();
    let (gw, _node) = node_on(&claude, &[]).await;
    let rows = [
        (
            json!({"threadId": "99999999"}),
            "Error: Claude session is unavailable",
        ),
        (json!({"threadId": "a/b"}), "Error: threadId is invalid"),
        (
            json!({"threadId": A, "limit": 51}),
            "Error: limit must be an integer from 1 to 50",
        ),
        (
            json!({"threadId": A, "cursor": cursor(10_000_000)}),
            "Error: transcript cursor is invalid",
        ),
        (
            json!({"threadId": A, "x": 1}),
            "Error: unknown Claude session read parameter: x",
        ),
        // Sessions the list leaves out cannot be read either.
        (
            json!({"threadId": "44444444-4444-4444-8444-444444444444"}),
            "Error: Claude session is unavailable",
        ),
        (
            json!({"threadId": "88888888-8888-4888-8888-888888888888"}),
            "Error: Claude session is unavailable",
        ),
    ];
    for (params, want) in rows {
        let (code, message) = error(&gw.invoke(READ, params.clone()).await);
        assert_eq!(
            (code.as_str(), message.as_str()),
            ("INVALID_REQUEST", want),
            "{params}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn on_without_a_directory_the_lists_are_empty() {
    let claude = ClaudeDir::empty();
    let (gw, node) = node_on(&claude, &[]).await;
    node.wait_stderr("does not exist", LONG).await;
    let connect = &gw.connects()[0];
    assert!(
        connect["commands"]
            .as_array()
            .unwrap()
            .contains(&json!(LIST))
    );
    assert_eq!(list(&gw, json!({})).await, json!({"sessions": []}));
    let (_, message) = error(&gw.invoke(READ, json!({"threadId": A})).await);
    assert_eq!(message, "Error: Claude session is unavailable");
    // Created later, it is read from then on.
    std::fs::create_dir_all(claude.path().join("projects")).unwrap();
    let copy = ClaudeDir::fixture();
    std::fs::rename(
        copy.projects().join("-tmp-other"),
        claude.path().join("projects/-tmp-other"),
    )
    .unwrap();
    assert_eq!(ids(&list(&gw, json!({})).await), [F]);
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_command_forbids_them() {
    let claude = ClaudeDir::fixture();
    let (gw, _node) = node_on(&claude, &["--deny-command", READ]).await;
    assert_eq!(ids(&list(&gw, json!({"limit": 1})).await), [F]);
    let (code, _) = error(&gw.invoke(READ, json!({"threadId": A})).await);
    assert_ne!(code, "INVALID_REQUEST");
}
