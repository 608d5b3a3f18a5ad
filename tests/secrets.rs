//! Secrets stay secret: a program the router, the node or a link runs
//! cannot read its parent's secrets in `/proc/PID/environ` or
//! `/proc/PID/cmdline`, the parent is not dumpable (no process of the same
//! user may read its memory or environment at all), and the files that
//! hold our secrets are out of every file tool's reach, under any name.
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, error_code, payload};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// Secrets of other modes, set beside the one a mode uses: none may show.
const OTHER_SECRETS: &[(&str, &str)] = &[
    ("OPENCLAW_GATEWAY_PASSWORD", "password-secret-7f3a9c2e"),
    ("CLAWBOT_ROUTER_SETUP_CODE", "setup-code-secret-5b1d8e4a"),
    ("CLAWBOT_ROUTER_MCP_TOKEN", "mcp-token-secret-0c6f2a91"),
    ("CLAWBOT_ROUTER_POLL_KEY", "poll-key-secret-9e4b7d13"),
];

/// What `/proc/PID/environ` and `/proc/PID/cmdline` show, as one text.
fn shown_by_proc(pid: u32) -> String {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    format!(
        "environ: {}\ncmdline: {}",
        String::from_utf8_lossy(&environ).replace('\0', " "),
        String::from_utf8_lossy(&cmdline).replace('\0', " ")
    )
}

/// A shell line that prints the parent's environ and cmdline (as
/// `shown_by_proc` does) — what an approved command can do.
fn read_parent(pid: u32) -> String {
    format!(
        "printf 'environ: '; tr '\\0' ' ' < /proc/{pid}/environ; printf '\\ncmdline: '; tr '\\0' ' ' < /proc/{pid}/cmdline"
    )
}

fn assert_none_shown(shown: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!shown.contains(secret), "{secret} shows in:\n{shown}");
    }
}

// ---- 1. /proc/PPID of the router, the node and a link ------------------------

/// An openclaw stand-in that reports what it can learn about its parent.
fn spying_openclaw(dir: &Path) -> PathBuf {
    let script = dir.join("openclaw-spy");
    std::fs::write(
        &script,
        "#!/bin/sh\n\
         printf 'environ: '; tr '\\0' ' ' < /proc/$PPID/environ\n\
         printf '\\ncmdline: '; tr '\\0' ' ' < /proc/$PPID/cmdline\n\
         printf '\\nowner of the parent environ: %s\\n' \"$(stat -c %u /proc/$PPID/environ)\"\n\
         if cat /proc/$PPID/environ > /dev/null 2>&1; then echo parent-readable; else echo parent-sealed; fi\n\
         echo \"own token: ${OPENCLAW_GATEWAY_TOKEN:-none}\"\n\
         echo \"own bridge token: ${CLAWBOT_BRIDGE_TOKEN:-none}\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The part of the spy's report about its parent (before its own variables).
fn about_parent(content: &str) -> &str {
    content.split("own token:").next().unwrap()
}

#[test]
fn the_routers_openclaw_cannot_read_the_routers_secrets_in_either_executable() {
    let dir = common::tempdir();
    let spy = spying_openclaw(dir.path());
    for via in [
        // The small executable runs a CLI call itself ...
        &[][..],
        // ... and hands this one to the full program, which runs openclaw
        // once the gateway is found closed.
        &["--via", "auto", "--gateway", "ws://127.0.0.1:9"][..],
    ] {
        let run = common::run(
            common::router()
                .env("OPENCLAW_BIN", &spy)
                .env("OPENCLAW_GATEWAY_TOKEN", "gateway-token-env-3d9f")
                .env("CLAWBOT_BRIDGE_TOKEN", "bridge-token-env-81ac")
                .envs(OTHER_SECRETS.iter().copied())
                .args(["-m", "hi", "--token", "gateway-token-flag-6b2e"])
                .args(via),
        );
        let content = run.content();
        assert!(content.contains("cmdline: "), "{via:?}: {content}");
        assert!(content.contains(" -m hi --token "), "{via:?}: {content}");
        let parent = about_parent(&content);
        assert_none_shown(
            parent,
            &[
                "gateway-token-env-3d9f",
                "bridge-token-env-81ac",
                "gateway-token-flag-6b2e",
            ],
        );
        assert_none_shown(
            parent,
            &OTHER_SECRETS.iter().map(|s| s.1).collect::<Vec<_>>(),
        );
        // openclaw itself still gets the gateway's token (it needs it),
        // and nothing of ours.
        assert!(
            content.contains("own token: gateway-token-env-3d9f"),
            "{via:?}: {content}"
        );
        assert!(
            content.contains("own bridge token: none"),
            "{via:?}: {content}"
        );
    }
}

/// `cmd` run as an unprivileged user when the tests run as root (root may
/// read any process's environment, dumpable or not).
fn unprivileged(program: &Path) -> Command {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Command::new(program);
    }
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--",
    ])
    .arg(program);
    cmd
}

#[test]
fn the_router_and_the_full_program_are_not_dumpable() {
    // Both executables, where an unprivileged user can run them.
    let dir = common::tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for exe in [common::ROUTER, env!("CARGO_BIN_EXE_clawbot_router-full")] {
        let name = Path::new(exe).file_name().unwrap();
        std::fs::copy(exe, dir.path().join(name)).unwrap();
    }
    let spy = spying_openclaw(dir.path());
    let router = dir.path().join("clawbot_router");
    for via in [
        &[][..],
        &["--via", "auto", "--gateway", "ws://127.0.0.1:9"][..],
    ] {
        let mut cmd = unprivileged(&router);
        common::without_our_settings(&mut cmd);
        let run = common::run(
            cmd.env("OPENCLAW_BIN", &spy)
                .env("HOME", dir.path())
                .args(["-m", "hi"])
                .args(via),
        );
        let content = run.content();
        // Non-dumpable: /proc/PID's files belong to root, and another
        // process of the same user cannot read them.
        assert!(
            content.contains("owner of the parent environ: 0\n"),
            "{via:?}: {content}"
        );
        assert!(content.contains("parent-sealed"), "{via:?}: {content}");
    }
}

/// A node with the gateway's token in its environment and on its command
/// line, which runs whatever it is asked.
async fn open_node(extra_env: &[(&str, &str)]) -> (FakeGateway, Node) {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let mut env: Vec<(&str, &str)> = vec![("OPENCLAW_GATEWAY_TOKEN", TOKEN)];
    env.extend(extra_env);
    let mut cmd = common::router();
    cmd.envs(env)
        .args(["node", "--gateway", &gw.url(), "--token", TOKEN])
        .args(["--approval", "allow", "--state-dir"])
        .arg(dir.path().join("state"))
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = common::collect(child.stderr.take().unwrap());
    let node = Node { child, stderr, dir };
    gw.wait_hellos(1, LONG).await;
    (gw, node)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_the_node_runs_cannot_read_the_nodes_token_or_setup_code() {
    let (gw, node) = open_node(&[("CLAWBOT_BRIDGE_TOKEN", "bridge-token-env-81ac")]).await;
    assert_eq!(
        gw.connects()[0]["auth"]["token"],
        TOKEN,
        "the node still has it"
    );
    let pid = node.child.id();
    for (command, params) in [
        ("run_command", json!({"command": read_parent(pid)})),
        (
            "system.run",
            json!({"command": ["/bin/sh", "-c", read_parent(pid)]}),
        ),
    ] {
        let out = payload(&gw.invoke(command, params).await);
        let shown = out["stdout"].as_str().unwrap();
        assert!(shown.contains("cmdline: "), "{command}: {out}");
        assert!(shown.contains(" --token "), "{command}: {shown}");
        assert_none_shown(shown, &[TOKEN, "bridge-token-env-81ac"]);
    }
    // And as root sees it, from outside.
    assert_none_shown(&shown_by_proc(pid), &[TOKEN, "bridge-token-env-81ac"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_the_bridge_runs_cannot_read_the_bridge_token() {
    const BRIDGE_TOKEN: &str = "bridge-secret-token-4e7a0b";
    let mut env = vec![
        ("CLAWBOT_BRIDGE_TOKEN", BRIDGE_TOKEN),
        ("OPENCLAW_GATEWAY_TOKEN", "gateway-token-env-3d9f"),
    ];
    env.extend(OTHER_SECRETS);
    let node = Node::start_args_env(
        &[
            "bridge",
            "--listen",
            "127.0.0.1:0",
            "--session",
            "s1",
            "--approval",
            "allow",
        ],
        &env,
    );
    node.wait_stderr("listening on ws://", LONG).await;
    let at = node
        .stderr()
        .split("listening on ws://")
        .nth(1)
        .and_then(|rest| rest.split("/bridge").next())
        .unwrap()
        .to_owned();
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{at}/bridge"))
        .await
        .unwrap();
    let hello = json!({"type": "hello", "openclaw_session": "s1", "claude_session": "c", "pid": 1, "token": BRIDGE_TOKEN});
    ws.send(Message::text(hello.to_string())).await.unwrap();
    let pid = node.child.id();
    let call = json!({"type": "tool_call", "call_id": "c1", "tool": "run_command", "args": {"command": read_parent(pid)}});
    ws.send(Message::text(call.to_string())).await.unwrap();
    let result = loop {
        let Some(Ok(Message::Text(text))) = ws.next().await else {
            panic!("the bridge closed: {}", node.stderr());
        };
        let frame: Value = serde_json::from_str(&text).unwrap();
        if frame["type"] == "tool_result" {
            break frame;
        }
    };
    assert_eq!(result["ok"], true, "{result}");
    let shown = result["result"]["stdout"].as_str().unwrap();
    assert!(shown.contains("cmdline: "), "{result}");
    let mut secrets = vec![BRIDGE_TOKEN, "gateway-token-env-3d9f"];
    secrets.extend(OTHER_SECRETS.iter().map(|s| s.1));
    assert_none_shown(shown, &secrets);
    assert_none_shown(&shown_by_proc(pid), &secrets);
}

// ---- 2. Files that hold our secrets ------------------------------------------

fn private_file(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Every name `list_files` and `search_files` show under the workspace.
async fn names_shown(gw: &FakeGateway, query: &str) -> String {
    let listed = payload(
        &gw.invoke("list_files", json!({"path": ".", "recursive": true}))
            .await,
    );
    let by_name = payload(&gw.invoke("search_files", json!({"query": query})).await);
    let by_content = payload(
        &gw.invoke(
            "search_files",
            json!({"query": "SECRET", "searchContent": true}),
        )
        .await,
    );
    format!("{listed}\n{by_name}\n{by_content}")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_nodes_secret_files_are_refused_under_every_name_inside_the_workspace() {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("deep")).unwrap();
    // The env file and the MCP config sit in the workspace itself.
    let env_file = ws.join("node.env");
    private_file(&env_file, &format!("OPENCLAW_GATEWAY_TOKEN={TOKEN}\n"));
    let mcp_config = ws.join("mcp.json");
    private_file(
        &mcp_config,
        r#"{"mcpServers": {}, "note": "SECRET in the MCP config"}"#,
    );
    std::fs::write(ws.join("ordinary.txt"), "SECRET-free notes\n").unwrap();
    let node = Node {
        child: {
            let mut cmd = common::router();
            cmd.args(["node", "--gateway", &gw.url(), "--approval", "allow"])
                .arg("--env-file")
                .arg(&env_file)
                .arg("--mcp-config")
                .arg(&mcp_config)
                .arg("--state-dir")
                .arg(dir.path().join("state"))
                .arg("--workspace")
                .arg(&ws)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            cmd.spawn().unwrap()
        },
        stderr: Default::default(),
        dir,
    };
    gw.wait_hellos(1, LONG).await;
    // Other names for them: hard links, symlinks, and a hard link to a
    // key in the state directory (which sits outside the workspace).
    std::fs::hard_link(&env_file, ws.join("deep/alias-of-env")).unwrap();
    std::os::unix::fs::symlink(&env_file, ws.join("link-to-env")).unwrap();
    std::os::unix::fs::symlink("../mcp.json", ws.join("deep/link-to-mcp")).unwrap();
    std::fs::hard_link(
        node.state().join("device-identity.json"),
        ws.join("identity-copy"),
    )
    .unwrap();
    let names = [
        "node.env",
        "mcp.json",
        "deep/alias-of-env",
        "link-to-env",
        "deep/link-to-mcp",
        "identity-copy",
    ];
    for name in names {
        let r = gw.invoke("read_file", json!({"path": name})).await;
        assert_eq!(error_code(&r), "PROTECTED_PATH", "{name}: {r}");
        let w = gw
            .invoke("write_file", json!({"path": name, "content": "x"}))
            .await;
        assert_eq!(error_code(&w), "PROTECTED_PATH", "{name}: {w}");
    }
    let shown = names_shown(&gw, "-").await;
    for name in [
        "node.env",
        "mcp.json",
        "alias-of-env",
        "link-to-env",
        "link-to-mcp",
        "identity-copy",
    ] {
        assert!(!shown.contains(name), "{name} shows:\n{shown}");
    }
    assert!(!shown.contains(TOKEN), "{shown}");
    assert!(!shown.contains("in the MCP config"), "{shown}");
    // What is not a secret still shows.
    assert!(shown.contains("ordinary.txt"), "{shown}");
    assert!(shown.contains("SECRET-free notes"), "{shown}");
    let listed = payload(&gw.invoke("list_files", json!({"path": "deep"})).await);
    assert_eq!(listed["entries"], json!([]), "{listed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bridges_token_file_is_refused_inside_the_workspace() {
    const BRIDGE_TOKEN: &str = "bridge-secret-token-4e7a0b";
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let token_file = ws.join("bridge.token");
    private_file(&token_file, BRIDGE_TOKEN);
    std::fs::hard_link(&token_file, ws.join("innocent.txt")).unwrap();
    let mut child = common::router()
        .args(["bridge", "--listen", "127.0.0.1:0", "--session", "s1"])
        .arg("--token-file")
        .arg(&token_file)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--workspace")
        .arg(&ws)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = common::collect(child.stderr.take().unwrap());
    let node = Node { child, stderr, dir };
    node.wait_stderr("listening on ws://", LONG).await;
    let at = node
        .stderr()
        .split("listening on ws://")
        .nth(1)
        .and_then(|rest| rest.split("/bridge").next())
        .unwrap()
        .to_owned();
    let (mut ws_client, _) = tokio_tungstenite::connect_async(format!("ws://{at}/bridge"))
        .await
        .unwrap();
    let hello = json!({"type": "hello", "openclaw_session": "s1", "claude_session": "c", "pid": 1, "token": BRIDGE_TOKEN});
    ws_client
        .send(Message::text(hello.to_string()))
        .await
        .unwrap();
    let mut results = Vec::new();
    for (i, (tool, args)) in [
        ("read_file", json!({"path": "bridge.token"})),
        ("read_file", json!({"path": "innocent.txt"})),
        ("list_files", json!({"path": "."})),
        (
            "search_files",
            json!({"query": "bridge-secret", "searchContent": true}),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let call =
            json!({"type": "tool_call", "call_id": format!("c{i}"), "tool": tool, "args": args});
        ws_client
            .send(Message::text(call.to_string()))
            .await
            .unwrap();
        loop {
            let Some(Ok(Message::Text(text))) = ws_client.next().await else {
                panic!("the bridge closed: {}", node.stderr());
            };
            let frame: Value = serde_json::from_str(&text).unwrap();
            if frame["type"] == "tool_result" {
                results.push(frame);
                break;
            }
        }
    }
    for refused in &results[..2] {
        assert_eq!(refused["ok"], false, "{refused}");
        assert!(
            refused["error"]
                .as_str()
                .unwrap()
                .starts_with("PROTECTED_PATH"),
            "{refused}"
        );
    }
    assert_eq!(results[2]["result"]["entries"], json!([]), "{}", results[2]);
    assert_eq!(results[3]["result"]["matches"], json!([]), "{}", results[3]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bind_mount_of_the_state_directory_is_refused_inside_the_workspace() {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = (dir.path().join("ws"), dir.path().join("state"));
    std::fs::create_dir_all(ws.join("mnt")).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    // The node runs in a mount namespace of its own, where the workspace's
    // `mnt` is the state directory under another name.
    // SAFETY: geteuid has no preconditions.
    let namespace: &[&str] = if unsafe { libc::geteuid() } == 0 {
        &["--mount", "--propagation", "private"]
    } else {
        &["--map-root-user", "--mount", "--propagation", "private"]
    };
    let mut cmd = Command::new("unshare");
    common::without_our_settings(&mut cmd);
    let child = cmd
        .args(namespace)
        .args([
            "--",
            "sh",
            "-c",
            "mount --bind \"$1\" \"$2/mnt\" && shift 2 && exec \"$@\"",
            "sh",
        ])
        .arg(&state)
        .arg(&ws)
        .arg(common::ROUTER)
        .args([
            "node",
            "--gateway",
            &gw.url(),
            "--token",
            TOKEN,
            "--state-dir",
        ])
        .arg(&state)
        .arg("--workspace")
        .arg(&ws)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _node = Node {
        child,
        stderr: Default::default(),
        dir,
    };
    gw.wait_hellos(1, LONG).await;
    let r = gw
        .invoke("read_file", json!({"path": "mnt/device-identity.json"}))
        .await;
    assert_eq!(error_code(&r), "PROTECTED_PATH", "{r}");
    let r = gw.invoke("list_files", json!({"path": "mnt"})).await;
    assert_eq!(error_code(&r), "PROTECTED_PATH", "{r}");
    let listed = payload(
        &gw.invoke("list_files", json!({"path": ".", "recursive": true}))
            .await,
    );
    assert_eq!(listed["entries"], json!([]), "{listed}");
}
