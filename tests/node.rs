//! `clawbot_router node` against a fake gateway speaking protocol v4: one
//! test per bullet of issue 3 (connection, pairing, reconnects, commands,
//! policy, limits).

#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, TtyNode, allowlist, allowlist_for, connected, error_code, payload};
use serde_json::{Value, json};

// ---- Connection ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn connect_is_signed_and_declares_the_node() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let connect = &gw.connects()[0];
    assert_eq!(
        gw.signatures_ok(),
        [true],
        "the gateway could not verify the v3 signature"
    );
    assert_eq!(connect["role"], "node");
    assert_eq!(connect["scopes"], json!([]));
    assert_eq!(connect["client"]["id"], "node-host");
    assert_eq!(connect["client"]["mode"], "node");
    assert_eq!(connect["client"]["displayName"], "test-node");
    assert_eq!(connect["minProtocol"], 3);
    assert_eq!(connect["maxProtocol"], 4);
    assert_eq!(connect["auth"]["token"], TOKEN);
    assert_eq!(connect["device"]["id"], node.device_id());
    let commands: Vec<&str> = connect["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for c in [
        "system.run.prepare",
        "system.run",
        "system.which",
        "read_file",
        "list_files",
        "search_files",
        "read_config",
        "validate_config",
        "system_info",
        "write_file",
        "run_command",
    ] {
        assert!(commands.contains(&c), "{c} not declared");
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(node.state().join("device-identity.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_device_token_is_saved_and_used_on_reconnect() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let issued = gw.device_token(&node.device_id()).unwrap();
    gw.drop_connection();
    gw.wait_hellos(2, LONG).await;
    let connects = gw.connects();
    assert_eq!(connects[1]["auth"]["token"], issued.as_str());
    assert_eq!(
        connects[1]["device"]["id"], connects[0]["device"]["id"],
        "the identity changed"
    );
    assert_eq!(gw.signatures_ok(), [true, true]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_device_token_falls_back_to_the_shared_token() {
    let (gw, node) = connected(Config::default(), &[]).await;
    gw.revoke_device_tokens();
    gw.drop_connection();
    gw.wait_hellos(2, LONG).await;
    let connects = gw.connects();
    assert_ne!(
        connects[1]["auth"]["token"], TOKEN,
        "the second connect should try the device token"
    );
    assert_eq!(connects.last().unwrap()["auth"]["token"], TOKEN);
    node.wait_stderr("forgetting it", LONG).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn websocket_pings_are_answered() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    gw.ping();
    gw.wait_pongs(1, LONG).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_ticks_of_silence_count_as_a_dead_link() {
    let config = Config {
        tick_ms: 300,
        ..Config::default()
    };
    let (gw, node) = connected(config, &[]).await;
    gw.fall_silent();
    node.wait_stderr("no word from the gateway", LONG).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_events_and_garbage_frames_are_ignored() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    gw.send_raw("not json at all");
    gw.send_raw(r#"{"type":"mystery","x":1}"#);
    gw.send_event("voicewake.changed", json!({"triggers": ["openclaw"]}));
    gw.send_event("node.invoke.request", json!({"id": 42}));
    let r = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    assert!(payload(&r)["bins"]["sh"].as_str().unwrap().ends_with("/sh"));
}

// ---- Pairing -------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn pairing_required_prints_the_operator_command_and_retries() {
    let gw = FakeGateway::start(Config {
        manual_pairing: true,
        ..Config::default()
    })
    .await;
    let node = Node::start(&gw.url(), &["--token", TOKEN]);
    node.wait_stderr("openclaw devices approve ", LONG).await;
    let device = node.device_id();
    let request = gw.pair_request(&device).unwrap();
    assert!(
        node.stderr()
            .contains(&format!("openclaw devices approve {request}"))
    );
    gw.approve_device(&device);
    gw.wait_hellos(1, LONG).await;
    let refusals = gw.connects().len() - 1;
    assert!(refusals >= 1);
    // one announcement, however many retries
    assert_eq!(node.stderr().matches("openclaw devices approve").count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_command_surface_prints_the_nodes_approve_hint() {
    let (gw, node) = connected(
        Config {
            surface_pending: true,
            ..Config::default()
        },
        &[],
    )
    .await;
    node.wait_stderr("openclaw nodes approve surface-req-1", LONG)
        .await;
    let stats = |gw: &FakeGateway| {
        gw.node_requests()
            .iter()
            .filter(|r| r["params"]["event"] == "node.host.stats")
            .count()
    };
    // OpenClaw refuses node events while the surface waits: none are sent.
    assert_eq!(stats(&gw), 0);
    gw.approve_surface(&node.device_id());
    node.wait_stderr("pairing request surface-req-1 approved", LONG)
        .await;
    let deadline = Instant::now() + LONG;
    while stats(&gw) == 0 {
        assert!(
            Instant::now() < deadline,
            "no host stats after the approval"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stats(&gw), 1, "once, not a burst of missed ticks");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_token_stops_with_a_clear_message() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = Node::start(&gw.url(), &["--token", "wrong-token"]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    assert!(
        node.stderr().contains("AUTH_TOKEN_MISMATCH"),
        "{}",
        node.stderr()
    );
    assert!(node.stderr().contains("--token"), "{}", node.stderr());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_token_stops_with_a_clear_message() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = Node::start(&gw.url(), &[]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    assert!(
        node.stderr().contains("OPENCLAW_GATEWAY_TOKEN"),
        "{}",
        node.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_token_comes_from_the_environment() {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let mut cmd = common::router();
    let mut child = cmd
        .args(["node", "--gateway", &gw.url(), "--state-dir"])
        .arg(dir.path().join("state"))
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .env("OPENCLAW_GATEWAY_TOKEN", TOKEN)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    gw.wait_hellos(1, LONG).await;
    assert_eq!(gw.connects()[0]["auth"]["token"], TOKEN);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_node_on_the_same_state_directory_is_refused() {
    let (gw, first) = connected(Config::default(), &[]).await;
    let out = tokio::task::spawn_blocking({
        let (url, state, ws) = (gw.url(), first.state(), first.ws());
        move || {
            common::run(
                common::router()
                    .args(["node", "--gateway", &url, "--token", TOKEN])
                    .arg("--state-dir")
                    .arg(state)
                    .arg("--workspace")
                    .arg(ws)
                    .stdin(Stdio::null()),
            )
        }
    })
    .await
    .unwrap();
    let said = &out.stderr;
    assert_eq!(out.code, Some(1), "{said}");
    assert!(
        said.contains(&format!("(pid {})", first.child.id())) && said.contains("--state-dir"),
        "names the holder and the flag: {said}"
    );
    assert_eq!(gw.connects().len(), 1, "the second node never connected");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_name_given_is_the_name_the_gateway_lists() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = Node::start(&gw.url(), &["--token", TOKEN]);
    gw.wait_hellos(1, LONG).await;
    let id = node.device_id();
    node.wait_stderr("the gateway lists this node as \"test-node\"", LONG)
        .await;
    // Paired long ago under another name (OpenClaw keeps the first).
    node.signal(libc::SIGINT);
    assert_eq!(node.wait_exit(LONG).await, Some(0));
    gw.set_node_name(&id, "old-name");
    node.restart(&gw.url(), &["--token", TOKEN]);
    node.wait_stderr(
        "the gateway listed this node as \"old-name\"; renamed it to \"test-node\"",
        LONG,
    )
    .await;
    assert_eq!(gw.node_name(&id).as_deref(), Some("test-node"));
    assert_eq!(gw.renames()[0]["nodeId"], id.as_str());
}

/// A server on loopback that answers every connection with `answer`.
fn http_server(answer: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    format!("ws://127.0.0.1:{port}")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_is_not_a_gateway_is_named_and_given_up_on() {
    let url = http_server("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    let mut node = Node::start(&url, &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    let said = node.stderr();
    assert!(
        said.contains(&format!("{url} is not an OpenClaw gateway (it answered HTTP 200 OK to the WebSocket upgrade; 3 handshakes in a row): check --gateway")),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_whose_gateway_is_down_is_a_hiccup_not_proof() {
    // 502/503 from nginx while OpenClaw restarts: keep trying.
    let url = http_server(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    let mut node = Node::start(&url, &["--token", TOKEN]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.stderr().matches("reconnecting in").count() < 4 {
        assert!(Instant::now() < deadline, "{}", node.stderr());
        assert!(
            node.child.try_wait().unwrap().is_none(),
            "gave up: {}",
            node.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        node.stderr().contains("503 Service Unavailable"),
        "{}",
        node.stderr()
    );
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(LONG).await, Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_websocket_that_does_not_speak_openclaw_is_given_up_on() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                use futures_util::SinkExt;
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                let _ = ws
                    .send(tokio_tungstenite::tungstenite::Message::text(
                        "welcome to the echo server",
                    ))
                    .await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    let mut node = Node::start(&url, &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    let said = node.stderr();
    assert!(
        said.contains(
            "its first message was not OpenClaw's connect.challenge: \"welcome to the echo server\""
        ),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_stopped_while_it_waits_to_reconnect_says_so() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut node = Node::start(&format!("ws://127.0.0.1:{port}"), &["--token", TOKEN]);
    node.wait_stderr("reconnecting in", LONG).await;
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(LONG).await, Some(0));
    // The pipe's last bytes may still be on their way to the collector.
    node.wait_stderr("] stopped", LONG).await;
    assert!(
        node.stderr().trim_end().ends_with("stopped"),
        "{}",
        node.stderr()
    );
}

// ---- OpenClaw's desktop-host commands -------------------------------------------

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
async fn the_exec_approvals_document_is_managed_from_the_gateway_and_preapproves() {
    // Headless, --approval ask: nothing risky runs unless pre-approved.
    let (gw, node) = connected(Config::default(), &[]).await;
    let run_true = || gw.invoke("system.run", json!({"command": ["sh", "-lc", "true"]}));
    assert_eq!(error_code(&run_true().await), "SYSTEM_RUN_DENIED");
    let got = payload(&gw.invoke("system.execApprovals.get", json!({})).await);
    assert_eq!(got["exists"], true);
    assert_eq!(
        got["file"],
        json!({"version": 1, "defaults": {}, "agents": {}})
    );
    let hash = got["hash"].as_str().unwrap().to_owned();
    let truth = std::fs::canonicalize(which("true")).unwrap();
    let file = json!({"version": 1, "agents": {"*": {"allowlist": [{"pattern": truth}]}}});
    // A stale hash is refused, as OpenClaw's node host refuses it.
    let stale = gw
        .invoke(
            "system.execApprovals.set",
            json!({"file": file, "baseHash": "0000"}),
        )
        .await;
    assert_eq!(error_code(&stale), "INVALID_REQUEST");
    assert!(
        stale["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exec approvals changed; reload and retry")
    );
    let set = payload(
        &gw.invoke(
            "system.execApprovals.set",
            json!({"file": file, "baseHash": hash}),
        )
        .await,
    );
    assert_ne!(set["hash"], hash);
    assert_eq!(
        payload(&run_true().await)["exitCode"],
        0,
        "allowlisted through the shell wrapper"
    );
    // The log is written by a thread of its own: waited for.
    node.wait_stderr("(allowed:allowlist)", LONG).await;
    // Never stronger than the node's forbidden rules.
    allowlist(&gw, json!(["/**"])).await;
    let sudo = gw
        .invoke("system.run", json!({"command": ["sh", "-lc", "sudo true"]}))
        .await;
    assert_eq!(error_code(&sudo), "FORBIDDEN");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_approvals_documents_change_nothing_they_should_not() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let get = || async { payload(&gw.invoke("system.execApprovals.get", json!({})).await) };
    let hash = get().await["hash"].as_str().unwrap().to_owned();
    for bad in [
        json!({"file": "not a document", "baseHash": hash}),
        json!({"baseHash": hash}),
        json!({"file": {"agents": ["*"]}, "baseHash": hash}),
        json!({"file": {"version": 1}}),
    ] {
        let refused = gw.invoke("system.execApprovals.set", bad.clone()).await;
        assert_eq!(error_code(&refused), "INVALID_REQUEST", "{bad}: {refused}");
        assert_eq!(get().await["hash"], hash, "unchanged by {bad}");
    }
    // Settings this node does not honour and junk entries are dropped or
    // kept inert: `security: full` opens nothing here.
    let doc = json!({"version": 99, "defaults": {"security": "full", "ask": "off", "askFallback": "yolo"},
                     "agents": {"*": {"allowlist": [42, null, {"pattern": ""}, {"pattern": "relative/sh"},
                                                    {"pattern": "=node-command:x"}, {"argPattern": "x"}]}}});
    let set = payload(
        &gw.invoke(
            "system.execApprovals.set",
            json!({"file": doc, "baseHash": hash}),
        )
        .await,
    );
    assert_eq!(set["file"]["version"], 1);
    assert!(
        set["file"]["defaults"].get("askFallback").is_none(),
        "{set}"
    );
    assert_eq!(
        set["file"]["agents"]["*"]["allowlist"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "entries without a pattern are dropped; the inert two are kept, as OpenClaw keeps them: {set}"
    );
    let run = gw
        .invoke("system.run", json!({"command": ["sh", "-c", "true"]}))
        .await;
    assert_eq!(error_code(&run), "SYSTEM_RUN_DENIED", "{run}");
    // A document damaged on disk (by hand, by a crash) allows nothing,
    // shows the gateway that it reads as `security: deny`, and can be
    // replaced from there.
    let mut node = node;
    std::fs::write(node.state().join("exec-approvals.json"), "{ not json").unwrap();
    node.restart(&gw.url(), &[]);
    gw.wait_hellos(2, LONG).await;
    let damaged = get().await;
    assert_eq!(damaged["file"]["defaults"]["security"], "deny", "{damaged}");
    let run = gw
        .invoke("system.run", json!({"command": ["sh", "-c", "true"]}))
        .await;
    assert_eq!(error_code(&run), "FORBIDDEN", "{run}");
    assert!(run.to_string().contains("security=deny"), "{run}");
    let replaced = gw
        .invoke(
            "system.execApprovals.set",
            json!({"file": {"version": 1}, "baseHash": damaged["hash"]}),
        )
        .await;
    assert_eq!(
        payload(&replaced)["file"]["defaults"],
        json!({}),
        "{replaced}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gateway_approval_runs_the_prepared_plan_and_nothing_else() {
    let (gw, node) = connected(Config::default(), &[]).await;
    // What OpenClaw's exec tool sends first; this node asks through the gateway.
    let prepared = payload(&gw.invoke("system.run.prepare", json!({"command": ["sh", "-lc", "echo approved-run"], "security": "full", "ask": "off", "agentId": "main", "sessionKey": "agent:main:s"})).await);
    assert_eq!(
        prepared["execPolicy"],
        json!({"security": "allowlist", "ask": "on-miss"})
    );
    let plan = prepared["plan"].clone();
    let resend = |decision: &str, argv: Value| {
        json!({"command": argv, "systemRunPlan": plan, "cwd": plan["cwd"], "agentId": "main",
               "sessionKey": "agent:main:s", "runId": "approval-1", "approved": true, "approvalDecision": decision})
    };
    let argv = plan["argv"].clone();
    // A re-send whose argv is not the plan's: refused, nothing runs.
    let tampered = gw
        .invoke(
            "system.run",
            resend("allow-once", json!(["sh", "-lc", "touch pwned"])),
        )
        .await;
    assert_eq!(error_code(&tampered), "INVALID_REQUEST");
    assert!(
        tampered["error"]["message"]
            .as_str()
            .unwrap()
            .contains("explicit approval requires matching systemRunPlan")
    );
    assert!(!node.ws().join("pwned").exists());
    let once = gw
        .invoke("system.run", resend("allow-once", argv.clone()))
        .await;
    assert_eq!(payload(&once)["stdout"], "approved-run\n");
    // Once means once: the same approval sent again is refused...
    let replayed = gw
        .invoke("system.run", resend("allow-once", argv.clone()))
        .await;
    assert_eq!(error_code(&replayed), "SYSTEM_RUN_DENIED", "{replayed}");
    assert!(
        replayed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("used already"),
        "{replayed}"
    );
    // ... and the same call without an approval is asked again.
    let again = gw.invoke("system.run", json!({"command": argv, "cwd": plan["cwd"], "agentId": "main", "sessionKey": "agent:main:s", "runId": "r2"})).await;
    assert_eq!(error_code(&again), "SYSTEM_RUN_DENIED");
    // allow-always is remembered in the approvals document, in the
    // agent's own list, as OpenClaw's node host does (a new approval is a
    // new prepare: the gateway asks again).
    let prepared = payload(&gw.invoke("system.run.prepare", json!({"command": ["sh", "-lc", "echo approved-run"], "security": "full", "ask": "off", "agentId": "main", "sessionKey": "agent:main:s"})).await);
    let plan = prepared["plan"].clone();
    let always = gw
        .invoke(
            "system.run",
            json!({"command": argv, "systemRunPlan": plan, "cwd": plan["cwd"], "agentId": "main",
                   "sessionKey": "agent:main:s", "runId": "approval-2", "approved": true, "approvalDecision": "allow-always"}),
        )
        .await;
    assert_eq!(payload(&always)["exitCode"], 0);
    let doc = payload(&gw.invoke("system.execApprovals.get", json!({})).await);
    assert!(doc["file"]["agents"].get("*").is_none(), "{doc}");
    let entry = &doc["file"]["agents"]["main"]["allowlist"][0];
    assert_eq!(entry["source"], "allow-always");
    assert!(
        entry["argPattern"]
            .as_str()
            .unwrap()
            .starts_with("sha256:cwd-argv:v1:")
    );
    let remembered = gw.invoke("system.run", json!({"command": argv, "cwd": plan["cwd"], "agentId": "main", "sessionKey": "agent:main:s", "runId": "r3"})).await;
    assert_eq!(payload(&remembered)["stdout"], "approved-run\n");
    // A plan this node never prepared: refused, whatever it says.
    let made_up = json!({"argv": ["sh", "-lc", "touch pwned"], "cwd": plan["cwd"], "commandText": "sh -lc \"touch pwned\"", "agentId": "main", "sessionKey": "agent:main:s"});
    let forged = gw.invoke("system.run", json!({"command": ["sh", "-lc", "touch pwned"], "systemRunPlan": made_up, "cwd": plan["cwd"], "agentId": "main", "sessionKey": "agent:main:s", "runId": "f", "approved": true, "approvalDecision": "allow-once"})).await;
    assert_eq!(error_code(&forged), "INVALID_REQUEST");
    assert!(!node.ws().join("pwned").exists());
    // An approval never unforbids.
    let forbidden = payload(&gw.invoke("system.run.prepare", json!({"command": ["sh", "-lc", "sudo id"], "agentId": "main", "sessionKey": "agent:main:s"})).await);
    let p = forbidden["plan"].clone();
    let sudo = gw.invoke("system.run", json!({"command": p["argv"], "systemRunPlan": p, "cwd": p["cwd"], "agentId": "main", "sessionKey": "agent:main:s", "runId": "x", "approved": true, "approvalDecision": "allow-once"})).await;
    assert_eq!(error_code(&sudo), "FORBIDDEN");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gateway_cannot_open_a_node_that_denies_or_asks_its_terminal() {
    // --approval deny: an allowlist from the gateway changes nothing.
    let (gw, _node) = connected(Config::default(), &["--approval", "deny"]).await;
    allowlist(&gw, json!(["/**"])).await;
    let run = gw
        .invoke("system.run", json!({"command": ["sh", "-lc", "true"]}))
        .await;
    assert_eq!(error_code(&run), "USER_REJECTED");
    // Nor does a grant.
    let prepared = payload(
        &gw.invoke(
            "system.run.prepare",
            json!({"command": ["true"], "agentId": "main", "sessionKey": "k"}),
        )
        .await,
    );
    assert_eq!(prepared["execPolicy"]["security"], "deny");
    let p = prepared["plan"].clone();
    let granted = gw.invoke("system.run", json!({"command": p["argv"], "systemRunPlan": p, "cwd": p["cwd"], "agentId": "main", "sessionKey": "k", "runId": "g", "approved": true, "approvalDecision": "allow-once"})).await;
    assert_eq!(error_code(&granted), "USER_REJECTED");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowlisted_program_with_a_changed_environment_still_needs_a_human() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    let truth = std::fs::canonicalize(which("true")).unwrap();
    allowlist(&gw, json!([truth])).await;
    assert_eq!(
        payload(&gw.invoke("system.run", json!({"command": ["true"]})).await)["exitCode"],
        0
    );
    let with_env = gw
        .invoke(
            "system.run",
            json!({"command": ["true"], "env": {"GREETING": "hi"}}),
        )
        .await;
    assert_eq!(error_code(&with_env), "SYSTEM_RUN_DENIED");
    // One OpenClaw's node host blocks is refused outright.
    let home = gw
        .invoke(
            "system.run",
            json!({"command": ["true"], "env": {"HOME": "/tmp"}}),
        )
        .await;
    assert_eq!(error_code(&home), "INVALID_REQUEST");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agents_own_allowlist_allows_only_that_agents_runs() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    let truth = std::fs::canonicalize(which("true")).unwrap();
    allowlist_for(&gw, "main", json!([truth])).await;
    let run = |agent: Option<&str>| {
        let mut params = json!({"command": ["true"]});
        if let Some(agent) = agent {
            params["agentId"] = json!(agent);
        }
        gw.invoke("system.run", params)
    };
    assert_eq!(
        payload(&run(Some("main")).await)["exitCode"],
        0,
        "main's own entry"
    );
    assert_eq!(
        error_code(&run(Some("ops")).await),
        "SYSTEM_RUN_DENIED",
        "not ops'"
    );
    assert_eq!(
        error_code(&run(None).await),
        "SYSTEM_RUN_DENIED",
        "no agent named: only \"*\" counts"
    );
}

fn which(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap()
}

// ---- TLS ----------------------------------------------------------------------

async fn tls_gateway() -> (FakeGateway, common::gateway::TestCert) {
    let cert = common::gateway::TestCert::self_signed();
    let gw = FakeGateway::start(Config {
        tls: Some(cert.clone()),
        ..Config::default()
    })
    .await;
    (gw, cert)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pinned_wss_gateway_is_served_and_its_pin_remembered() {
    let (gw, cert) = tls_gateway().await;
    let pin = cert.fingerprint().to_lowercase().replace(':', "");
    let mut node = Node::start(&gw.url(), &["--token", TOKEN, "--tls-fingerprint", &pin]);
    gw.wait_hellos(1, LONG).await;
    let r = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    assert!(payload(&r)["bins"]["sh"].is_string());
    node.wait_stderr("remembered the gateway's certificate", LONG)
        .await;
    let pins = std::fs::read_to_string(node.state().join("gateway-pins.json")).unwrap();
    assert!(pins.contains(&cert.fingerprint()), "{pins}");
    // Later, without the flag: the remembered pin is enough.
    node.restart(&gw.url(), &["--token", TOKEN]);
    gw.wait_hellos(2, LONG).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_or_missing_pin_is_refused_before_any_frame() {
    let (gw, cert) = tls_gateway().await;
    let wrong = "AB:".repeat(31) + "AB";
    let mut node = Node::start(&gw.url(), &["--token", TOKEN, "--tls-fingerprint", &wrong]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    let said = node.stderr();
    assert!(
        said.contains(&format!(
            "presented a certificate with SHA-256 fingerprint {}, but {wrong} is pinned",
            cert.fingerprint()
        )),
        "{said}"
    );
    // Self-signed and nothing pinned: the system does not vouch for it.
    let mut node = Node::start(&gw.url(), &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    let said = node.stderr();
    assert!(
        said.contains("presented a certificate the system does not trust")
            && said.contains(&format!("--tls-fingerprint {}", cert.fingerprint())),
        "{said}"
    );
    assert!(gw.accepted() >= 2, "the node did reach the server");
    assert!(gw.connects().is_empty(), "no frame (and no token) was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_certificate_is_refused_with_how_to_reset() {
    let (gw, cert) = tls_gateway().await;
    let mut node = Node::start(
        &gw.url(),
        &["--token", TOKEN, "--tls-fingerprint", &cert.fingerprint()],
    );
    gw.wait_hellos(1, LONG).await;
    node.wait_stderr("remembered the gateway's certificate", LONG)
        .await;
    // The same address, another certificate.
    let url = gw.url();
    drop(gw);
    let other = common::gateway::TestCert::self_signed();
    let gw2 = FakeGateway::start_at(
        url.trim_start_matches("wss://").parse().unwrap(),
        Config {
            tls: Some(other.clone()),
            ..Config::default()
        },
    )
    .await;
    node.restart(&url, &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    let said = node.stderr();
    assert!(
        said.contains(&format!(
            "fingerprint {}, but {} is pinned",
            other.fingerprint(),
            cert.fingerprint()
        )),
        "{said}"
    );
    assert!(
        said.contains("gateway-pins.json") && said.contains("--tls-fingerprint"),
        "{said}"
    );
    assert!(gw2.connects().is_empty());
}

/// The scheme that does not match the server is a setting, not a hiccup:
/// said once, and the node stops (exit 1) instead of retrying for ever.
async fn wrong_scheme_is_said_once_and_ends_the_node(node: &mut Node, sentence: &str) {
    assert_eq!(node.wait_exit(LONG).await, Some(1), "{}", node.stderr());
    let said = node.stderr();
    assert_eq!(
        said.matches(sentence).count(),
        1,
        "{sentence:?} once in:\n{said}"
    );
    assert!(!said.contains("reconnecting"), "{said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_to_a_tls_gateway_says_use_wss_and_stops() {
    let (gw, _) = tls_gateway().await;
    let plain = gw.url().replace("wss://", "ws://");
    let mut node = Node::start(&plain, &["--token", TOKEN]);
    let sentence = format!("the gateway at {plain} speaks TLS: use {}", gw.url());
    wrong_scheme_is_said_once_and_ends_the_node(&mut node, &sentence).await;
    assert!(gw.connects().is_empty(), "no frame was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn wss_to_a_plaintext_gateway_says_use_ws_and_stops() {
    let gw = FakeGateway::start(Config::default()).await;
    let tls = gw.url().replace("ws://", "wss://");
    // Pinned, and unpinned (the system's trust store): the same answer.
    let pin = "AB:".repeat(31) + "AB";
    let sentence = format!("the gateway at {tls} does not speak TLS: use {}", gw.url());
    for args in [
        &["--token", TOKEN, "--tls-fingerprint", &pin][..],
        &["--token", TOKEN],
    ] {
        let mut node = Node::start(&tls, args);
        wrong_scheme_is_said_once_and_ends_the_node(&mut node, &sentence).await;
    }
    assert!(gw.connects().is_empty(), "no frame was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn plaintext_to_a_public_host_is_refused_before_connecting() {
    let mut node = Node::start("ws://gateway.example.invalid:18789", &["--token", TOKEN]);
    assert_eq!(node.wait_exit(LONG).await, Some(1));
    assert!(
        node.stderr()
            .contains("refusing plaintext ws:// to gateway.example.invalid"),
        "{}",
        node.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn openclaws_endpoint_flags_build_the_url_and_conflict_with_gateway() {
    let (gw, cert) = tls_gateway().await;
    let port = gw.addr.port().to_string();
    let node = Node::start_args(&[
        "node",
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--tls",
        "--tls-fingerprint",
        &cert.fingerprint(),
        "--token",
        TOKEN,
        "--display-name",
        "flags",
    ]);
    gw.wait_hellos(1, LONG).await;
    node.wait_stderr(&format!("connected to wss://127.0.0.1:{port}"), LONG)
        .await;
    let out = tokio::task::spawn_blocking(move || {
        common::run(common::router().args(["node", "--gateway", "ws://127.0.0.1:1", "--host", "h"]))
    })
    .await
    .unwrap();
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("--gateway ws://127.0.0.1:1 and --host/--port/--tls/--context-path both name the gateway"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_setup_code_enrols_the_node_and_the_device_token_carries_on() {
    let (gw, cert) = tls_gateway().await;
    let code = gw.setup_code(Some(&cert.fingerprint()));
    // No shared token, no URL, no pin: the code carries all three.
    let mut node = Node::start_args(&[
        "node",
        "--pair",
        &format!("oc-pair://{code}"),
        "--display-name",
        "paired",
    ]);
    node.wait_stderr("connected to", LONG).await;
    assert_eq!(gw.bootstrap_used(), 1);
    let connect = &gw.connects()[0];
    assert!(connect["auth"].get("token").is_none(), "{connect}");
    assert!(connect["auth"]["bootstrapToken"].is_string());
    let said = node.stderr();
    assert!(!said.contains(&code), "the code is never printed: {said}");
    // Restarted with nothing: the saved gateway, pin and device token.
    node.signal(libc::SIGINT);
    assert_eq!(node.wait_exit(LONG).await, Some(0));
    let state = node.state();
    let files = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect::<String>();
    assert!(
        !files.contains(&code)
            && !files.contains(connect["auth"]["bootstrapToken"].as_str().unwrap()),
        "the code is never written"
    );
    let restarted = common::router()
        .args(["node", "--display-name", "paired"])
        .arg("--state-dir")
        .arg(&state)
        .arg("--workspace")
        .arg(node.ws())
        .env_remove("OPENCLAW_GATEWAY_URL")
        .env_remove("OPENCLAW_GATEWAY_TOKEN")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = KillOnDrop(restarted);
    gw.wait_hellos(2, LONG).await;
    let again = &gw.connects()[1];
    assert!(
        again["auth"]["token"].is_string() && again["auth"].get("bootstrapToken").is_none(),
        "{again}"
    );
    // The same command line again: --pair-if-needed skips the used code.
    drop(_guard);
    let with_code = common::router()
        .args([
            "node",
            "--pair",
            &code,
            "--pair-if-needed",
            "--display-name",
            "paired",
        ])
        .arg("--state-dir")
        .arg(&state)
        .arg("--workspace")
        .arg(node.ws())
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = KillOnDrop(with_code);
    gw.wait_hellos(3, LONG).await;
    assert!(gw.connects()[2]["auth"]["token"].is_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_used_or_expired_setup_code_gets_openclaws_reason_and_a_hint() {
    let gw = FakeGateway::start(Config::default()).await;
    let code = gw.setup_code(None);
    let first = Node::start_args(&["node", "--pair", &code]);
    first.wait_stderr("connected to", LONG).await;
    drop(first);
    // Used already (another node, its own state).
    let mut second = Node::start_args(&["node", "--pair", &code]);
    assert_eq!(second.wait_exit(LONG).await, Some(1));
    let said = second.stderr();
    assert!(
        said.contains("the gateway refused the setup code: unauthorized: setup code invalid, expired, revoked, or already used")
            && said.contains("openclaw qr --setup-code-only"),
        "{said}"
    );
    // Expired: refused before connecting.
    use base64::Engine;
    let expired = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"url": gw.url(), "bootstrapToken": "x", "expiresAtMs": 1000}).to_string());
    let before = gw.accepted();
    let mut third = Node::start_args(&["node", "--pair", &expired]);
    assert_eq!(third.wait_exit(LONG).await, Some(2));
    assert!(
        third
            .stderr()
            .contains("the pairing setup code has expired"),
        "{}",
        third.stderr()
    );
    assert_eq!(gw.accepted(), before);
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---- Reconnects and shutdown ---------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn the_node_survives_a_gateway_restart() {
    let (mut gw, node) = connected(Config::default(), &[]).await;
    gw.stop();
    node.wait_stderr("connection lost", LONG).await;
    tokio::time::sleep(Duration::from_millis(1500)).await; // a few failed attempts
    gw.restart().await;
    gw.wait_hellos(2, Duration::from_secs(40)).await;
    let r = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    assert!(payload(&r)["bins"]["sh"].is_string());
    let connects = gw.connects();
    assert_eq!(
        connects[0]["device"]["id"],
        connects.last().unwrap()["device"]["id"]
    );
}

/// Starts `sleep 30` through `run_command`; its invocation id and pid.
async fn start_sleeper(gw: &FakeGateway, node: &Node) -> (String, i32) {
    let pid_file = node.ws().join("pid");
    let script = format!("echo $$ > {}; exec sleep 30", pid_file.display());
    let id = gw.request(
        "run_command",
        &json!({"command": ["/bin/sh", "-c", script]}).to_string(),
        60_000,
    );
    let deadline = Instant::now() + LONG;
    loop {
        if let Ok(pid) = std::fs::read_to_string(&pid_file)
            .unwrap_or_default()
            .trim()
            .parse()
        {
            return (id, pid);
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_stops_running_commands_and_exits_cleanly() {
    stops_cleanly_on(libc::SIGINT).await;
}

/// A closed terminal or a service manager's reload (SIGHUP) stops the node
/// as it stops the router, `mcp` and the links: one signal path for every
/// mode.
#[tokio::test(flavor = "multi_thread")]
async fn a_hangup_stops_the_node_as_it_stops_every_mode() {
    stops_cleanly_on(libc::SIGHUP).await;
}

async fn stops_cleanly_on(signal: i32) {
    let (gw, mut node) = connected(Config::default(), &["--approval", "allow"]).await;
    let (id, pid) = start_sleeper(&gw, &node).await;
    node.signal(signal);
    assert_eq!(node.wait_exit(LONG).await, Some(0));
    assert_eq!(error_code(&gw.result(&id, LONG).await), "CANCELLED");
    common::assert_all_gone(&[pid]);
}

/// A node killed outright (nothing of it runs) still takes what its
/// commands started with it: the command, a child in its group, and one
/// that left the group.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_killed_outright_takes_its_commands_trees_with_it() {
    let (gw, node) = connected(Config::default(), &["--approval", "allow"]).await;
    let script =
        "echo $$ > pids; sleep 60 & echo $! >> pids; setsid sleep 60 & echo $! >> pids; wait";
    let _ = gw.request(
        "system.run",
        &json!({"command": ["/bin/sh", "-c", script]}).to_string(),
        60_000,
    );
    let tree = common::wait_for_pids(&node.ws().join("pids"), 3);
    node.signal(libc::SIGKILL);
    common::assert_gone_in_time(&tree, "a command's tree");
}

// ---- Commands ------------------------------------------------------------------

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
async fn risky_commands_are_refused_without_a_terminal_to_ask() {
    let (gw, node) = connected(Config::default(), &[]).await;
    for (command, params, code) in [
        (
            "run_command",
            json!({"command": "touch pwned"}),
            "USER_REJECTED",
        ),
        // OpenClaw's answer: its gateway raises an exec approval for it.
        (
            "system.run",
            json!({"command": ["touch", "pwned"]}),
            "SYSTEM_RUN_DENIED",
        ),
        (
            "write_file",
            json!({"path": "pwned", "content": "x"}),
            "USER_REJECTED",
        ),
    ] {
        let r = gw.invoke(command, params).await;
        assert_eq!(error_code(&r), code, "{command}");
        if command == "system.run" {
            let message = r["error"]["message"].as_str().unwrap();
            assert!(
                message.starts_with("SYSTEM_RUN_DENIED: approval required"),
                "{message}"
            );
        }
    }
    assert!(!node.ws().join("pwned").exists());
    assert!(node.stderr().contains("not a terminal"));
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_command_forbids_and_allow_command_pre_approves() {
    let (gw, _node) = connected(
        Config::default(),
        &[
            "--approval",
            "allow",
            "--deny-command",
            "curl",
            "--allow-command",
            "echo",
        ],
    )
    .await;
    let r = gw
        .invoke(
            "run_command",
            json!({"command": "curl", "args": ["http://127.0.0.1:1"]}),
        )
        .await;
    assert_eq!(error_code(&r), "FORBIDDEN");
    let r = gw
        .invoke("run_command", json!({"command": ["sh", "-c", "sudo id"]}))
        .await;
    assert_eq!(error_code(&r), "FORBIDDEN", "a built-in rule inside sh -c");
    let (gw2, _node2) = connected(Config::default(), &["--allow-command", "echo"]).await;
    let r = gw2
        .invoke(
            "run_command",
            json!({"command": "echo", "args": ["pre-approved"]}),
        )
        .await;
    assert_eq!(payload(&r)["stdout"], "pre-approved\n");
    drop(gw);
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

#[tokio::test(flavor = "multi_thread")]
async fn log_file_takes_the_log_and_env_file_the_token() {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("node.env");
    std::fs::write(
        &env_file,
        format!("# secrets\nOPENCLAW_GATEWAY_TOKEN={TOKEN}\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let log = dir.path().join("node.log");
    let node = Node::start(
        &gw.url(),
        &[
            "--env-file",
            env_file.to_str().unwrap(),
            "--log-file",
            log.to_str().unwrap(),
        ],
    );
    gw.wait_hellos(1, LONG).await;
    let deadline = Instant::now() + LONG;
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("connected to")
    {
        assert!(
            Instant::now() < deadline,
            "no log in the file: {}",
            node.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(node.stderr(), "", "the log went to the file");
    assert_eq!(
        gw.connects()[0]["auth"]["token"],
        TOKEN,
        "the token from the file"
    );
    let mode = std::fs::metadata(&log).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the log is private");
    // A file others can read is refused before connecting.
    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut refused = Node::start(&gw.url(), &["--env-file", env_file.to_str().unwrap()]);
    assert_eq!(refused.wait_exit(LONG).await, Some(2));
    assert!(
        refused.stderr().contains("chmod 600"),
        "{}",
        refused.stderr()
    );
}

// ---- Published tools (node-mcp) --------------------------------------------------

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
async fn system_info_and_config_tools_answer() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let info = payload(&gw.invoke("system_info", json!({})).await);
    assert_eq!(info["os"], std::env::consts::OS);
    assert!(info["path"].is_string());
    assert_eq!(
        Path::new(info["workspace"].as_str().unwrap()),
        node.ws().canonicalize().unwrap()
    );
}

/// `read_config` through a node whose OPENCLAW_CONFIG_PATH is `config`.
async fn read_config_via(config: &Path) -> Value {
    let gw = FakeGateway::start(Config::default()).await;
    let _node = Node::start_with_env(
        &gw.url(),
        &["--token", TOKEN],
        &[("OPENCLAW_CONFIG_PATH", config)],
    );
    gw.wait_hellos(1, LONG).await;
    gw.invoke("read_config", json!({})).await
}

#[tokio::test(flavor = "multi_thread")]
async fn read_config_sends_the_users_config_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("openclaw.json");
    std::fs::write(
        &config,
        r#"{ // gateway
  "gateway": { "auth": { "mode": "token", "token": "s3cr3t-gateway-token" } },
  models: { providers: { fakellm: { baseUrl: "http://127.0.0.1:18555/v1", apiKey: 'sk-live-123' } } },
}"#,
    )
    .unwrap();
    let r = payload(&read_config_via(&config).await);
    let content = r["content"].as_str().unwrap();
    assert_eq!(Path::new(r["path"].as_str().unwrap()), config);
    assert!(
        content.contains("http://127.0.0.1:18555/v1") && content.contains("// gateway"),
        "{content}"
    );
    assert!(
        !content.contains("s3cr3t-gateway-token") && !content.contains("sk-live-123"),
        "{content}"
    );
    assert_eq!(content.matches("<redacted>").count(), 2, "{content}");

    let missing = read_config_via(&dir.path().join("absent.json")).await;
    assert_eq!(error_code(&missing), "NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_invocation_lands_in_the_audit_log() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let _ = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    let _ = gw.invoke("run_command", json!({"command": "id"})).await;
    let log = std::fs::read_to_string(node.state().join("audit.jsonl")).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert_eq!(lines[0]["command"], "system.which");
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(lines[1]["decision"], "refused:APPROVAL_REQUIRED");
    for l in &lines {
        assert!(
            l["ts"].is_u64()
                && l["durationMs"].is_u64()
                && l["paramsSha256"].as_str().unwrap().len() == 64
        );
    }
}

// ---- Approval on a terminal ------------------------------------------------------

/// Asks the node to run `echo WORD`; the invocation id.
fn echo_request(gw: &FakeGateway, word: &str) -> String {
    gw.request(
        "run_command",
        &json!({"command": ["echo", word]}).to_string(),
        30_000,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_terminal_the_user_allows_once_always_or_denies() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = TtyNode::start(&gw.url());
    gw.wait_hellos(1, LONG).await;

    // allow once: runs, and the next identical call asks again
    let id = echo_request(&gw, "once");
    node.wait_prompts(1).await;
    assert!(
        node.screen
            .lock()
            .unwrap()
            .contains("run_command: echo once")
    );
    node.answer("o\n");
    assert_eq!(payload(&gw.result(&id, LONG).await)["stdout"], "once\n");

    // allow always: remembered for this executable and argv
    let id = echo_request(&gw, "always");
    node.wait_prompts(2).await;
    node.answer("a\n");
    assert_eq!(payload(&gw.result(&id, LONG).await)["stdout"], "always\n");
    let again = gw
        .invoke("run_command", json!({"command": ["echo", "always"]}))
        .await;
    assert_eq!(payload(&again)["stdout"], "always\n");
    assert_eq!(node.prompts(), 2, "an 'always' call asked again");
    let saved = std::fs::read_to_string(node.state.join("approvals.json")).unwrap();
    assert!(
        saved.contains("\"always\"") && saved.contains("/echo"),
        "{saved}"
    );

    // other arguments are another question; deny
    let id = echo_request(&gw, "other");
    node.wait_prompts(3).await;
    node.answer("d\n");
    assert_eq!(error_code(&gw.result(&id, LONG).await), "USER_REJECTED");
}

#[tokio::test(flavor = "multi_thread")]
async fn prompts_never_overlap() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = TtyNode::start(&gw.url());
    gw.wait_hellos(1, LONG).await;
    let first = echo_request(&gw, "1");
    let second = echo_request(&gw, "2");
    node.wait_prompts(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        node.prompts(),
        1,
        "a second question was asked over the first"
    );
    node.answer("o\n");
    node.wait_prompts(2).await;
    node.answer("o\n");
    for id in [first, second] {
        assert_eq!(gw.result(&id, LONG).await["ok"], true);
    }
}

// ---- Found in review -------------------------------------------------------------

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

#[tokio::test(flavor = "multi_thread")]
async fn a_gateway_that_stops_reading_cannot_freeze_the_node() {
    let (gw, mut node) = connected(Config::default(), &[]).await;
    std::fs::write(node.ws().join("big.txt"), "x".repeat(3 * 1024 * 1024)).unwrap();
    gw.stop_reading();
    for _ in 0..20 {
        gw.request("read_file", r#"{"path":"big.txt"}"#, 60_000);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    node.signal(libc::SIGINT);
    assert_eq!(node.wait_exit(Duration::from_secs(10)).await, Some(0));
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
