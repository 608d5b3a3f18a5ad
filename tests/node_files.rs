//! `clawbot_router node` against a fake gateway speaking protocol v4
//! (tests/common/gateway.rs). The file commands and the workspace:
//! `fs.listDir`, `terminal.upload`, the file tools, hostile paths refused,
//! and the node's own state out of reach.

#![cfg(unix)]

mod common;

use std::process::Stdio;

use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, connected, error_code, payload};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn fs_list_dir_and_terminal_upload_have_openclaws_shapes_inside_the_workspace() {
    let (gw, node) = connected(Config::default(), &["--allow-command", "terminal.upload"]).await;
    std::fs::create_dir_all(node.ws().join("src/deep")).unwrap();
    std::fs::write(node.ws().join("README"), "x").unwrap();
    let listed = payload(&gw.invoke("fs.listDir", json!({})).await);
    let root = std::fs::canonicalize(node.ws()).unwrap();
    assert_eq!(listed["path"], json!(root));
    assert_eq!(listed["home"], json!(root));
    assert_eq!(
        listed["entries"],
        json!([{"name": "src", "path": root.join("src")}])
    );
    let deeper = payload(
        &gw.invoke("fs.listDir", json!({"path": root.join("src")}))
            .await,
    );
    assert_eq!(deeper["parent"], json!(root));
    assert_eq!(
        error_code(&gw.invoke("fs.listDir", json!({"path": "/"})).await),
        "PATH_OUTSIDE_WORKSPACE"
    );
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD.encode(b"uploaded bytes");
    let up = payload(
        &gw.invoke(
            "terminal.upload",
            json!({"name": "a/../b.txt", "contentBase64": body}),
        )
        .await,
    );
    assert_eq!(up["size"], 14);
    assert_eq!(
        std::fs::read(node.ws().join("uploads/b.txt")).unwrap(),
        b"uploaded bytes"
    );
    let connect = &gw.connects()[0];
    let commands: Vec<&str> = connect["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(commands.contains(&"fs.listDir") && commands.contains(&"terminal.upload"));
    assert_eq!(
        commands.contains(&"system.notify"),
        which_notify_send(),
        "system.notify is declared exactly where notify-send exists"
    );
}

fn which_notify_send() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("notify-send").is_file()))
}

#[tokio::test(flavor = "multi_thread")]
async fn file_tools_work_inside_the_workspace() {
    let (gw, node) = connected(Config::default(), &["--allow-command", "write_file"]).await;
    // Writes never create directories.
    let r = gw
        .invoke("write_file", json!({"path": "notes/a.md", "content": "x"}))
        .await;
    assert_eq!(error_code(&r), "NOT_FOUND");
    std::fs::create_dir_all(node.ws().join("notes")).unwrap();
    let w = payload(
        &gw.invoke(
            "write_file",
            json!({"path": "notes/a.md", "content": "line1\nline2\nline3\n"}),
        )
        .await,
    );
    assert_eq!(w["bytes"], 18);
    let r = payload(
        &gw.invoke("read_file", json!({"path": "notes/a.md", "maxLines": 2}))
            .await,
    );
    assert_eq!(r["content"], "line1\nline2\n");
    let l = payload(
        &gw.invoke("list_files", json!({"path": ".", "recursive": true}))
            .await,
    );
    let names: Vec<&str> = l["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"notes/a.md"), "{names:?}");
    let s = payload(
        &gw.invoke(
            "search_files",
            json!({"query": "LINE2", "searchContent": true}),
        )
        .await,
    );
    assert!(
        s["matches"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["kind"] == "content" && m["line"] == 2)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_paths_are_refused() {
    let (gw, node) = connected(Config::default(), &["--approval", "allow"]).await;
    std::os::unix::fs::symlink("/etc", node.ws().join("etc-link")).unwrap();
    for (command, params) in [
        ("read_file", json!({"path": "../../../etc/passwd"})),
        ("read_file", json!({"path": "/etc/passwd"})),
        ("read_file", json!({"path": "etc-link/passwd"})),
        ("list_files", json!({"path": ".."})),
        (
            "write_file",
            json!({"path": "../escape.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "etc-link/evil", "content": "x"}),
        ),
    ] {
        let r = gw.invoke(command, params.clone()).await;
        assert_eq!(
            error_code(&r),
            "PATH_OUTSIDE_WORKSPACE",
            "{command} {params}"
        );
    }
    let r = gw.invoke("read_file", json!({"path": "a\u{0}b"})).await;
    assert_eq!(error_code(&r), "INVALID_PARAMS");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_nodes_own_state_is_out_of_reach_even_inside_the_workspace() {
    // The workspace is the directory that holds the state dir, as when the
    // node runs from $HOME with the default state dir.
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let mut cmd = common::router();
    let mut child = cmd
        .args([
            "node",
            "--gateway",
            &gw.url(),
            "--token",
            TOKEN,
            "--approval",
            "allow",
        ])
        .arg("--state-dir")
        .arg(ws.join(".local/state/clawbot_router"))
        .arg("--workspace")
        .arg(&ws)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    gw.wait_hellos(1, LONG).await;
    for (command, params) in [
        (
            "read_file",
            json!({"path": ".local/state/clawbot_router/device-identity.json"}),
        ),
        ("list_files", json!({"path": ".local/state/clawbot_router"})),
        (
            "write_file",
            json!({"path": ".local/state/clawbot_router/approvals.json", "content": "[]"}),
        ),
    ] {
        let r = gw.invoke(command, params).await;
        assert_eq!(error_code(&r), "PROTECTED_PATH", "{command}");
    }
    let listed = payload(&gw.invoke("list_files", json!({"recursive": true})).await);
    assert!(!listed.to_string().contains("device-identity"), "{listed}");
    let found = payload(
        &gw.invoke(
            "search_files",
            json!({"query": "privateKey", "searchContent": true}),
        )
        .await,
    );
    assert_eq!(found["matches"], json!([]), "{found}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_codes_transcripts_and_token_are_out_of_reach_of_the_file_tools() {
    // A node run from $HOME: ~/.claude holds the transcripts (shared only
    // through --claude-sessions) and Claude Code's sign-in token.
    let gw = FakeGateway::start(Config::default()).await;
    let home = tempfile::tempdir().unwrap();
    let claude = home.path().join(".claude");
    std::fs::create_dir_all(claude.join("projects/-p")).unwrap();
    std::fs::write(claude.join(".credentials.json"), r#"{"token":"sk-ant-x"}"#).unwrap();
    std::fs::write(claude.join("projects/-p/s.jsonl"), "{}\n").unwrap();
    std::fs::write(home.path().join(".claude.json"), "{}").unwrap();
    let mut child = common::router()
        .args(["node", "--gateway", &gw.url(), "--token", TOKEN])
        .arg("--state-dir")
        .arg(home.path().join("state"))
        .arg("--workspace")
        .arg(home.path())
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    gw.wait_hellos(1, LONG).await;
    for (command, params) in [
        ("read_file", json!({"path": ".claude/.credentials.json"})),
        ("read_file", json!({"path": ".claude/projects/-p/s.jsonl"})),
        ("read_file", json!({"path": ".claude.json"})),
        ("list_files", json!({"path": ".claude"})),
    ] {
        let r = gw.invoke(command, params).await;
        assert_eq!(error_code(&r), "PROTECTED_PATH", "{command}: {r}");
    }
    let found = payload(
        &gw.invoke(
            "search_files",
            json!({"query": "sk-ant", "searchContent": true}),
        )
        .await,
    );
    assert_eq!(found["matches"], json!([]), "{found}");
    let _ = child.kill();
    let _ = child.wait();
}
