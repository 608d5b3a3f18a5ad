//! `clawbot_router bridge` (seed 004) against a reference client written
//! from the seed's wire protocol: every frame of its tables, the error
//! cases, and what a hostile client sends. The bridge and `bridge send`
//! are the real binary, as separate processes.
#![cfg(unix)]

mod common;

use std::time::{Duration, Instant};

use common::node::Node;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const TOKEN: &str = "bridge-test-token-0123456789";
const WAIT: Duration = Duration::from_secs(10);

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A bridge on a port of its own, with `args` after the defaults.
async fn bridge(args: &[&str]) -> (Node, String) {
    let mut all = vec![
        "bridge",
        "--listen",
        "127.0.0.1:0",
        "--session",
        "s1",
        "--session",
        "s2",
    ];
    all.extend(args);
    let node = Node::start_args_env(&all, &[("CLAWBOT_BRIDGE_TOKEN", TOKEN)]);
    node.wait_stderr("listening on ws://", WAIT).await;
    let log = node.stderr();
    let at = log
        .split("listening on ws://")
        .nth(1)
        .and_then(|rest| rest.split("/bridge").next())
        .unwrap()
        .to_owned();
    (node, at)
}

/// The seed's client: connects to /bridge.
async fn connect(at: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{at}/bridge"))
        .await
        .expect("connect");
    ws
}

async fn send(ws: &mut Ws, frame: Value) {
    ws.send(Message::text(frame.to_string())).await.unwrap();
}

/// The next JSON frame (answering the bridge's pings as the seed's client does not:
/// pings are returned as frames for the test to see).
async fn next(ws: &mut Ws) -> Value {
    loop {
        let message = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame in time")
            .expect("the connection is open")
            .expect("a good frame");
        match message {
            Message::Text(text) => return serde_json::from_str(&text).unwrap(),
            Message::Close(frame) => panic!("closed: {frame:?}"),
            _ => {}
        }
    }
}

/// The next frame of `kind`, skipping the bridge's pings.
async fn next_of(ws: &mut Ws, kind: &str) -> Value {
    loop {
        let frame = next(ws).await;
        if frame["type"] == kind {
            return frame;
        }
        assert_eq!(frame["type"], "ping", "expected {kind}, got {frame}");
    }
}

/// The close frame's code and reason.
async fn closed(ws: &mut Ws) -> (u16, String) {
    loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("closed in time")
        {
            Some(Ok(Message::Close(Some(frame)))) => {
                return (u16::from(frame.code), frame.reason.to_string());
            }
            Some(Ok(Message::Close(None))) | None | Some(Err(_)) => return (0, String::new()),
            Some(Ok(_)) => {}
        }
    }
}

fn hello(session: &str, token: &str) -> Value {
    json!({"type": "hello", "openclaw_session": session, "claude_session": "c-uuid", "pid": 4242, "token": token})
}

async fn bound(at: &str, session: &str) -> (Ws, Value) {
    let mut ws = connect(at).await;
    send(&mut ws, hello(session, TOKEN)).await;
    let ack = next_of(&mut ws, "hello_ack").await;
    (ws, ack)
}

async fn call(ws: &mut Ws, id: &str, tool: &str, args: Value) -> Value {
    send(
        ws,
        json!({"type": "tool_call", "call_id": id, "tool": tool, "args": args}),
    )
    .await;
    let result = next_of(ws, "tool_result").await;
    assert_eq!(result["call_id"], id);
    result
}

/// `bridge send`, as a process; its exit code and stdout.
fn bridge_send(
    at: &str,
    session: &str,
    text: &str,
    extra: &[&str],
) -> (Option<i32>, String, String) {
    let out = common::router()
        .env("CLAWBOT_BRIDGE_TOKEN", TOKEN)
        .args(["bridge", "send", "--listen", at, "--session", session])
        .args(extra)
        .arg(text)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn hello_ack_lists_our_tools_and_tool_calls_run_through_the_one_policy() {
    let (node, at) = bridge(&["--approval", "deny"]).await;
    std::fs::write(node.ws().join("notes.md"), "hello from the node\n").unwrap();
    let (mut ws, ack) = bound(&at, "s1").await;
    let names: Vec<&str> = ack["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in [
        "read_file",
        "list_files",
        "search_files",
        "write_file",
        "run_command",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    assert!(ack["tools"][0]["input_schema"]["type"] == "object");
    assert_eq!(ack["session_meta"]["openclaw_session"], "s1");
    assert_eq!(ack["session_meta"]["claude_session"], "c-uuid");

    let read = call(&mut ws, "tc_001", "read_file", json!({"path": "notes.md"})).await;
    assert_eq!(read["ok"], true, "{read}");
    assert_eq!(read["result"]["content"], "hello from the node\n");

    let outside = call(
        &mut ws,
        "tc_002",
        "read_file",
        json!({"path": "../../etc/passwd"}),
    )
    .await;
    assert_eq!(outside["ok"], false);
    assert!(
        outside["error"].as_str().unwrap().contains("workspace"),
        "{outside}"
    );

    let write = call(
        &mut ws,
        "tc_003",
        "write_file",
        json!({"path": "x.txt", "content": "x"}),
    )
    .await;
    assert_eq!(write["ok"], false);
    assert!(
        write["error"]
            .as_str()
            .unwrap()
            .starts_with("USER_REJECTED"),
        "{write}"
    );
    assert!(!node.ws().join("x.txt").exists());

    let unknown = call(&mut ws, "tc_004", "pcexec", json!({})).await;
    assert!(
        unknown["error"]
            .as_str()
            .unwrap()
            .starts_with("UNKNOWN_COMMAND"),
        "{unknown}"
    );

    let bad_args = call(&mut ws, "tc_005", "read_file", json!([1, 2])).await;
    assert_eq!(bad_args["ok"], false, "{bad_args}");

    // Every call is in the one audit log.
    let audit = std::fs::read_to_string(node.state().join("audit.jsonl")).unwrap();
    assert!(
        audit.contains("\"tc_001\"") && audit.contains("\"tc_003\""),
        "{audit}"
    );
}

#[tokio::test]
async fn pre_approved_writes_run_and_a_disconnect_stops_a_running_command() {
    let (node, at) = bridge(&[
        "--allow-command",
        "write_file",
        "--allow-command",
        "run_command",
    ])
    .await;
    let (mut ws, _) = bound(&at, "s1").await;
    // Our secrets are not a command's business.
    let env = call(&mut ws, "env", "run_command", json!({"command": ["env"]})).await;
    assert_eq!(env["ok"], true, "{env}");
    let seen = env["result"]["stdout"].as_str().unwrap();
    assert!(
        seen.contains("PATH=") && !seen.contains("CLAWBOT_BRIDGE_TOKEN"),
        "{seen}"
    );
    let write = call(
        &mut ws,
        "w1",
        "write_file",
        json!({"path": "x.txt", "content": "written"}),
    )
    .await;
    assert_eq!(write["ok"], true, "{write}");
    assert_eq!(
        std::fs::read_to_string(node.ws().join("x.txt")).unwrap(),
        "written"
    );

    let pidfile = node.ws().join("pids");
    let script = format!(
        "echo $$ >> {0}; (sleep 60 & echo $! >> {0}; wait) ; sleep 60",
        pidfile.display()
    );
    send(&mut ws, json!({"type": "tool_call", "call_id": "long", "tool": "run_command", "args": {"command": ["sh", "-c", script]}})).await;
    let pids = common::wait_for_pids(&pidfile, 2);
    drop(ws);
    let deadline = Instant::now() + WAIT;
    while pids.iter().any(|p| common::alive(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    common::assert_all_gone(&pids);
}

#[tokio::test]
async fn wrong_tokens_unknown_sessions_and_frames_before_hello_are_closed() {
    let (_node, at) = bridge(&[]).await;
    let mut ws = connect(&at).await;
    send(&mut ws, hello("s1", "not-the-token")).await;
    assert_eq!(closed(&mut ws).await, (1008, "wrong token".into()));

    let mut ws = connect(&at).await;
    send(&mut ws, hello("s9", TOKEN)).await;
    assert_eq!(closed(&mut ws).await, (1008, "unknown session".into()));

    let mut ws = connect(&at).await;
    send(
        &mut ws,
        json!({"type": "tool_call", "call_id": "a", "tool": "read_file", "args": {}}),
    )
    .await;
    assert_eq!(closed(&mut ws).await, (1008, "say hello first".into()));

    // Not the seed's path, and not from a web page.
    let wrong = tokio_tungstenite::connect_async(format!("ws://{at}/other")).await;
    assert!(wrong.is_err());
    let mut request = format!("ws://{at}/bridge").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", "http://evil.example".parse().unwrap());
    assert!(tokio_tungstenite::connect_async(request).await.is_err());

    // The bridge still serves.
    let (_ws, ack) = bound(&at, "s1").await;
    assert_eq!(ack["type"], "hello_ack");
}

#[tokio::test]
async fn strangers_get_a_small_frame_limit_and_bound_clients_keep_sixteen_mib() {
    let (node, at) = bridge(&[]).await;
    // Before hello, 64 KiB is too much: a hello takes a few hundred bytes.
    let mut stranger = connect(&at).await;
    let _ = stranger.send(Message::text("x".repeat(64 << 10))).await;
    let (code, reason) = closed(&mut stranger).await;
    assert_eq!(code, 1009, "{reason}");
    assert!(reason.contains("before hello"), "{reason}");

    // After hello, a 2 MiB frame is an ordinary one.
    let (mut ws, _) = bound(&at, "s1").await;
    let ts = "t".repeat(2 << 20);
    send(&mut ws, json!({"type": "ping", "ts": ts})).await;
    assert_eq!(next_of(&mut ws, "pong").await["ts"], ts);

    // `bridge send` proves the token as it connects: a message larger than
    // a stranger may send goes through.
    let text = "m".repeat(100 << 10);
    let (code, out, err) = bridge_send(&at, "s1", &text, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["delivered"],
        true
    );
    assert_eq!(next_of(&mut ws, "inbound_message").await["content"], text);
    // A wrong token there is refused before anything is read.
    let mut request = format!("ws://{at}/bridge").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", "Bearer wrong".parse().unwrap());
    assert!(tokio_tungstenite::connect_async(request).await.is_err());
    assert!(node.stderr().contains("before hello"), "{}", node.stderr());
}

#[tokio::test]
async fn a_flood_of_strangers_closes_the_oldest_and_bound_clients_keep_working() {
    let (_node, at) = bridge(&["--approval", "allow"]).await;
    let (mut client, _) = bound(&at, "s1").await;
    let mut strangers = Vec::new();
    for _ in 0..64 {
        strangers.push(connect(&at).await);
    }
    // One more than the bridge lets wait for a hello: the oldest goes.
    strangers.push(connect(&at).await);
    let (code, reason) = closed(&mut strangers[0]).await;
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("waiting to say hello"), "{reason}");
    // The others may still say hello.
    send(&mut strangers[1], hello("s2", TOKEN)).await;
    next_of(&mut strangers[1], "hello_ack").await;
    // The bound client never noticed.
    assert_eq!(
        call(&mut client, "c1", "list_files", json!({})).await["ok"],
        true
    );
}

#[tokio::test]
async fn permission_requests_are_decided_by_the_local_policy() {
    let (_node, at) = bridge(&["--approval", "deny", "--allow-command", "claude.Read"]).await;
    let (mut ws, _) = bound(&at, "s1").await;
    send(&mut ws, json!({"type": "permission_request", "request_id": "abxyz", "tool": "Bash", "args": {"command": "rm -rf build"}, "rationale": "clean"})).await;
    let reply = next_of(&mut ws, "permission_reply").await;
    assert_eq!(
        reply,
        json!({"type": "permission_reply", "request_id": "abxyz", "behavior": "deny"})
    );
    send(&mut ws, json!({"type": "permission_request", "request_id": "qwert", "tool": "Read", "args": {"path": "a"}, "rationale": ""})).await;
    let reply = next_of(&mut ws, "permission_reply").await;
    assert_eq!(reply["behavior"], "allow");
    assert_eq!(reply["request_id"], "qwert");
    // Not the seed's id shape: an error answer, the connection stays.
    send(
        &mut ws,
        json!({"type": "permission_request", "request_id": "hello", "tool": "Read", "args": {}}),
    )
    .await;
    let error = next_of(&mut ws, "error").await;
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("five lowercase letters"),
        "{error}"
    );
}

#[tokio::test]
async fn permission_requests_reach_the_terminal_when_there_is_one() {
    let dir = common::tempdir();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let state = dir.path().join("state");
    let ws_dir = dir.path().join("ws");
    let port = common::free_port();
    let listen = format!("127.0.0.1:{port}");
    let argv = [
        "env",
        &format!("CLAWBOT_BRIDGE_TOKEN={TOKEN}"),
        common::ROUTER,
        "bridge",
        "--listen",
        &listen,
        "--session",
        "s1",
        "--state-dir",
        state.to_str().unwrap(),
        "--workspace",
        ws_dir.to_str().unwrap(),
    ];
    let (mut child, screen) = common::under_terminal(&argv);
    let deadline = Instant::now() + WAIT;
    while !screen.lock().unwrap().contains("listening on") {
        assert!(Instant::now() < deadline, "{}", screen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (mut ws, _) = bound(&listen, "s1").await;
    send(&mut ws, json!({"type": "permission_request", "request_id": "abcde", "tool": "Bash", "args": {"command": "make"}, "rationale": "build it"})).await;
    while !screen.lock().unwrap().contains("Allow [o]nce") {
        assert!(Instant::now() < deadline, "{}", screen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let shown = screen.lock().unwrap().clone();
    assert!(
        shown.contains("The bridged agent wants to run on this machine"),
        "{shown}"
    );
    assert!(
        shown.contains("claude.Bash") && shown.contains("build it"),
        "{shown}"
    );
    use std::io::Write;
    child.stdin.as_mut().unwrap().write_all(b"o\n").unwrap();
    let reply = next_of(&mut ws, "permission_reply").await;
    assert_eq!(reply["behavior"], "allow");
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn pings_every_interval_and_two_unanswered_pings_end_the_connection() {
    let (node, at) = bridge(&["--ping-interval", "1"]).await;
    // A client that answers stays.
    let (mut live, _) = bound(&at, "s1").await;
    for _ in 0..3 {
        let ping = next(&mut live).await;
        assert_eq!(ping["type"], "ping");
        assert!(ping["ts"].as_u64().unwrap() > 0);
        send(&mut live, json!({"type": "pong", "ts": ping["ts"]})).await;
    }
    // The client's own ping is answered with its ts.
    send(&mut live, json!({"type": "ping", "ts": 77})).await;
    assert_eq!(
        next_of(&mut live, "pong").await,
        json!({"type": "pong", "ts": 77})
    );

    // One that never answers is dead after the second missed pong.
    let (mut silent, _) = bound(&at, "s2").await;
    let started = Instant::now();
    let (code, reason) = closed(&mut silent).await;
    assert_eq!((code, reason.as_str()), (1001, "two pings unanswered"));
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
    node.wait_stderr("two pings unanswered", WAIT).await;
}

#[tokio::test]
async fn messages_for_a_session_reach_its_client_or_wait_for_it() {
    let (node, at) = bridge(&["--buffer", "2"]).await;
    // Nobody bound: kept, at most two, the oldest dropped with a warning.
    for text in ["first", "second", "third"] {
        let (code, out, err) = bridge_send(&at, "s1", text, &["--meta", r#"{"user":"alice"}"#]);
        assert_eq!(code, Some(0), "{err}");
        let answer: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(answer["delivered"], false);
        assert!(answer["request_id"].as_str().unwrap().starts_with("msg_"));
    }
    node.wait_stderr("buffer full (2 messages); the oldest is dropped", WAIT)
        .await;
    let (mut ws, ack) = bound(&at, "s1").await;
    assert_eq!(ack["session_meta"]["buffered"], 2);
    let a = next_of(&mut ws, "inbound_message").await;
    let b = next_of(&mut ws, "inbound_message").await;
    assert_eq!(
        (a["content"].as_str(), b["content"].as_str()),
        (Some("second"), Some("third"))
    );
    assert_eq!(a["meta"]["user"], "alice");
    assert_eq!(a["meta"]["chat_id"], "s1");

    // Bound: delivered at once, to this session only.
    let (mut other, _) = bound(&at, "s2").await;
    let (code, out, _) = bridge_send(&at, "s1", "now", &[]);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["delivered"],
        true
    );
    assert_eq!(next_of(&mut ws, "inbound_message").await["content"], "now");
    send(&mut other, json!({"type": "ping", "ts": 1})).await;
    assert_eq!(
        next(&mut other).await["type"],
        "pong",
        "s2 got nothing meant for s1"
    );

    // Unknown session, wrong token: refused, exit 1.
    let (code, _, err) = bridge_send(&at, "s9", "x", &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("unknown session \"s9\""), "{err}");
    let out = common::router()
        .env("CLAWBOT_BRIDGE_TOKEN", "wrong")
        .args(["bridge", "send", "--listen", &at, "--session", "s1", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrong token"));
}

#[tokio::test]
async fn a_new_connection_for_a_session_replaces_the_old_one() {
    let (_node, at) = bridge(&[]).await;
    let (mut old, _) = bound(&at, "s1").await;
    let (mut new, _) = bound(&at, "s1").await;
    assert_eq!(closed(&mut old).await.0, 1001);
    let (_, out, _) = bridge_send(&at, "s1", "to the new one", &[]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["delivered"],
        true
    );
    assert_eq!(
        next_of(&mut new, "inbound_message").await["content"],
        "to the new one"
    );
}

#[tokio::test]
async fn hostile_frames_get_error_answers_and_the_bridge_keeps_serving() {
    let (node, at) = bridge(&["--approval", "allow"]).await;
    let (mut ws, _) = bound(&at, "s1").await;
    ws.send(Message::text("{not json")).await.unwrap();
    assert!(
        next_of(&mut ws, "error").await["error"]
            .as_str()
            .unwrap()
            .starts_with("not a JSON frame")
    );
    send(&mut ws, json!({"type": "launch_missiles"})).await;
    assert!(
        next_of(&mut ws, "error").await["error"]
            .as_str()
            .unwrap()
            .contains("unknown frame type")
    );
    send(&mut ws, json!({"type": "tool_call", "call_id": "c1"})).await;
    let bad = next_of(&mut ws, "error").await;
    assert_eq!(bad["call_id"], "c1");
    assert!(bad["error"].as_str().unwrap().contains("tool"), "{bad}");
    ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    assert!(
        next_of(&mut ws, "error").await["error"]
            .as_str()
            .unwrap()
            .contains("binary")
    );
    send(&mut ws, hello("s1", TOKEN)).await;
    assert!(
        next_of(&mut ws, "error").await["error"]
            .as_str()
            .unwrap()
            .contains("already")
    );

    // A flood of garbage: answered or dropped, never a stall.
    for _ in 0..5000 {
        ws.send(Message::text("garbage")).await.unwrap();
    }
    send(
        &mut ws,
        json!({"type": "tool_call", "call_id": "after-flood", "tool": "list_files", "args": {}}),
    )
    .await;
    let read = loop {
        let frame = next(&mut ws).await;
        if frame["type"] == "tool_result" {
            break frame;
        }
        assert!(
            frame["type"] == "error" || frame["type"] == "ping",
            "{frame}"
        );
    };
    assert_eq!(read["ok"], true, "{read}");

    // More calls at once than a connection may run: the rest are BUSY.
    for i in 0..12 {
        send(&mut ws, json!({"type": "tool_call", "call_id": format!("slow{i}"), "tool": "run_command", "args": {"command": ["sleep", "5"]}})).await;
    }
    let mut busy = 0;
    let mut ok = 0;
    for _ in 0..12 {
        let r = next_of(&mut ws, "tool_result").await;
        if r["error"].as_str().is_some_and(|e| e.starts_with("BUSY")) {
            busy += 1;
        } else {
            assert_eq!(r["ok"], true, "{r}");
            ok += 1;
        }
    }
    assert_eq!((ok, busy), (8, 4));

    // A frame over the limit closes that connection (1009), not the bridge.
    let huge = "x".repeat(17 << 20);
    let _ = ws.send(Message::text(huge)).await;
    assert_eq!(closed(&mut ws).await.0, 1009);
    let (mut again, _) = bound(&at, "s1").await;
    assert_eq!(
        call(&mut again, "c2", "list_files", json!({})).await["ok"],
        true
    );
    assert!(node.stderr().contains("frame too large"));
}

#[tokio::test]
async fn sigterm_stops_the_bridge_and_what_it_runs() {
    let (mut node, at) = bridge(&["--approval", "allow"]).await;
    let (mut ws, _) = bound(&at, "s1").await;
    let pidfile = node.ws().join("pids");
    let script = format!("echo $$ >> {}; sleep 60", pidfile.display());
    send(&mut ws, json!({"type": "tool_call", "call_id": "long", "tool": "run_command", "args": {"command": ["sh", "-c", script]}})).await;
    let pids = common::wait_for_pids(&pidfile, 1);
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(WAIT).await, Some(0));
    common::assert_all_gone(&pids);
}

#[test]
fn bad_flags_are_refused_before_listening() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["bridge", "--session", "s1", "--token", "secret"],
            "visible to every user",
        ),
        (&["bridge"], "--session ID"),
        (
            &["bridge", "--session", "s1", "--listen", "0.0.0.0:18801"],
            "every interface",
        ),
        (
            &[
                "bridge",
                "--session",
                "s1",
                "--listen",
                "192.168.1.10:18801",
            ],
            "--allow-remote",
        ),
        (
            &[
                "bridge",
                "--session",
                "s1",
                "--listen",
                "8.8.8.8:18801",
                "--allow-remote",
            ],
            "public address",
        ),
        (
            &["bridge", "--session", "s1", "--listen", "nowhere"],
            "not an address",
        ),
        (
            &["bridge", "--session", "s1", "--approval", "gateway"],
            "needs an OpenClaw gateway",
        ),
    ];
    common::assert_usage_errors(("CLAWBOT_BRIDGE_TOKEN", TOKEN), cases);
    let out = common::router()
        .args(["bridge", "--session", "s1"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("CLAWBOT_BRIDGE_TOKEN"));
}
