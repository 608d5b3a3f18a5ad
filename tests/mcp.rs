//! `clawbot_router mcp` spoken to line by line (JSON-RPC over stdio): the
//! handshake, the declaration, calls through the fake openclaw, progress,
//! cancellation stopping the process tree, concurrency, prompts, and every
//! kind of malformed input. (A real MCP client drives it in
//! tests/mcp_client.rs.)

#![cfg(unix)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{FAKE, assert_all_gone, router, wait_for_pids};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(15);

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    /// Everything read so far that nobody asked for yet.
    seen: Vec<Value>,
}

impl Server {
    fn start(scenario: &[&str]) -> Server {
        let mut words = vec![FAKE.to_owned()];
        words.extend(scenario.iter().map(|s| s.to_string()));
        let mut child = router()
            .env("OPENCLAW_BIN", shell_words::join(&words))
            .args(["mcp", "--lang", "en", "--grace", "0.5"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carries only JSON ({e}): {line:?}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Server {
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
        }
    }

    fn initialized(scenario: &[&str]) -> Server {
        let mut server = Server::start(scenario);
        let hello = server.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw-test", "version": "1"}}),
        );
        assert_eq!(hello["result"]["serverInfo"]["name"], "clawbot_router");
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string());
    }

    /// The next message that matches, waiting up to WAIT.
    fn next(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.seen.iter().position(&matches) {
            return self.seen.remove(i);
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if matches(&v) => return v,
                Ok(v) => self.seen.push(v),
                Err(_) => panic!("no {what} within {WAIT:?}; seen {:?}", self.seen),
            }
        }
    }

    fn response(&mut self, id: i64) -> Value {
        self.next(&format!("response {id}"), |v| {
            v["id"] == id && v.get("method").is_none()
        })
    }

    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(id)
    }

    fn call(&mut self, id: i64, arguments: Value, meta: Option<Value>) -> Value {
        let mut params = json!({"name": "clawbot_router", "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        self.request(id, "tools/call", params)
    }

    fn exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server with call `id` running an openclaw that hangs with a child:
/// the server, the tree's pids, and the directory that holds their file.
fn hanging_call(id: i64) -> (Server, Vec<i32>, tempfile::TempDir) {
    let dir = common::tempdir();
    let pid_file = dir.path().join("pids");
    let mut server = Server::initialized(&[
        "--scenario",
        "grandchild",
        "--pid-file",
        pid_file.to_str().unwrap(),
    ]);
    server.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "clawbot_router", "arguments": {"message": "hang"}}}));
    let tree = wait_for_pids(&pid_file, 2);
    (server, tree, dir)
}

/// The call's JSON result, from the text block and structuredContent alike.
fn result_json(response: &Value) -> Value {
    let result = &response["result"];
    let text = result["content"][0]["text"].as_str().expect("a text block");
    let parsed: Value = serde_json::from_str(text).expect("the text is the JSON object");
    assert_eq!(parsed, result["structuredContent"]);
    assert_eq!(parsed["directTTS"], false);
    assert_eq!(parsed["interruptMode"], 2);
    parsed
}

#[test]
fn the_tool_listed_is_the_committed_declaration() {
    let mut server = Server::initialized(&["--scenario", "reply"]);
    let listed = server.request(1, "tools/list", json!({}));
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tool-schemas/mcp.json"
        ))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(listed["result"]["tools"], json!([committed]));
    let hello = server.request(2, "ping", json!({}));
    assert_eq!(hello["result"], json!({}));
}

#[test]
fn a_call_answers_the_same_json_as_the_command_line() {
    let mut server = Server::initialized(&["--scenario", "reply"]);
    let response = server.call(1, json!({"agent": "main", "message": "hi over mcp"}), None);
    assert_eq!(response["result"]["isError"], false);
    assert_eq!(result_json(&response)["content"], "ECHO: hi over mcp\n");
    // Invalid arguments: the router's own sentence, as an error result.
    let response = server.call(2, json!({"message": "   "}), None);
    assert_eq!(response["result"]["isError"], true);
    assert_eq!(
        result_json(&response)["content"],
        "[clawbot_router] No task description: the message argument must not be empty; OpenClaw was not called."
    );
    let response = server.call(3, json!({"message": 5}), None);
    assert_eq!(response["result"]["isError"], true);
    assert!(
        result_json(&response)["content"]
            .as_str()
            .unwrap()
            .contains("Invalid arguments")
    );
    // End of input ends the server.
    drop(server.stdin.take());
    assert_eq!(server.exit(), Some(0));
}

#[test]
fn progress_is_reported_while_a_call_runs() {
    let mut server = Server::initialized(&["--scenario", "sleep", "--sleep", "2.5"]);
    let response = server.call(
        1,
        json!({"message": "slow"}),
        Some(json!({"progressToken": "tok-1"})),
    );
    assert_eq!(
        result_json(&response)["content"],
        "thinking...\nECHO: slow\n"
    );
    let mut progress = Vec::new();
    while let Some(i) = server
        .seen
        .iter()
        .position(|v| v["method"] == "notifications/progress")
    {
        progress.push(server.seen.remove(i));
    }
    assert!(progress.len() >= 2, "{progress:?}");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "tok-1")
    );
    assert_eq!(progress[0]["params"]["total"], 60.0);
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "increasing: {values:?}"
    );
    assert!(
        progress[0]["params"]["message"]
            .as_str()
            .unwrap()
            .contains("of 60s")
    );
}

#[test]
fn a_cancelled_call_stops_its_process_tree() {
    let (mut server, tree, _dir) = hanging_call(7);
    server.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "user gave up"}}),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while tree.iter().any(|pid| common::alive(*pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_all_gone(&tree);
    // No answer for a cancelled request; the server carries on.
    let pong = server.request(8, "ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    assert!(
        !server.seen.iter().any(|v| v["id"] == 7),
        "{:?}",
        server.seen
    );
}

/// Killed outright (nothing of the server runs to stop it), the server
/// still takes its calls' trees with it.
#[test]
fn a_server_killed_outright_takes_its_calls_trees_with_it() {
    let (mut server, tree, _dir) = hanging_call(7);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    common::assert_gone_in_time(&tree, "a call's tree");
}

#[test]
fn calls_run_concurrently() {
    let mut server = Server::initialized(&["--scenario", "sleep", "--sleep", "1.5"]);
    let started = Instant::now();
    for id in 1..=3 {
        server.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "clawbot_router", "arguments": {"message": format!("call {id}")}}}));
    }
    for id in 1..=3 {
        let response = server.response(id);
        assert_eq!(
            result_json(&response)["content"],
            format!("thinking...\nECHO: call {id}\n")
        );
    }
    // Three 1.5 s calls one after the other would take 4.5 s.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_usage_guidance_is_a_prompt() {
    let mut server = Server::initialized(&["--scenario", "reply"]);
    let listed = server.request(1, "prompts/list", json!({}));
    assert_eq!(listed["result"]["prompts"][0]["name"], "clawbot_router");
    let en = server.request(
        2,
        "prompts/get",
        json!({"name": "clawbot_router", "arguments": {"lang": "en"}}),
    );
    let text = en["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert_eq!(text, include_str!("../prompts/clawbot_router.en.md"));
    let zh = server.request(3, "prompts/get", json!({"name": "clawbot_router"}));
    assert_eq!(
        zh["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap(),
        include_str!("../prompts/clawbot_router.zh.md")
    );
    let bad = server.request(
        4,
        "prompts/get",
        json!({"name": "clawbot_router", "arguments": {"lang": "fr"}}),
    );
    assert_eq!(bad["error"]["code"], -32602);
    let unknown = server.request(5, "prompts/get", json!({"name": "other"}));
    assert_eq!(unknown["error"]["code"], -32602);
}

#[test]
fn malformed_input_gets_json_rpc_errors_and_the_server_survives() {
    let mut server = Server::start(&["--scenario", "reply"]);
    // A notification before initialize would end an rmcp session: dropped.
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    server.send_raw("this is not json");
    let parse = server.next("a parse error", |v| v["error"]["code"] == -32700);
    assert_eq!(parse["id"], Value::Null);
    server.send_raw("");
    let hello = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw-test", "version": "1"}}),
    );
    assert!(hello.get("result").is_some(), "{hello}");
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    server.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/list\"");
    server.next("a parse error", |v| v["error"]["code"] == -32700);
    let unknown = server.request(3, "no/such/method", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    let no_params = server.request(4, "tools/call", Value::Null);
    assert_eq!(no_params["error"]["code"], -32602);
    let bad_args = server.request(
        5,
        "tools/call",
        json!({"name": "clawbot_router", "arguments": [1, 2]}),
    );
    assert_eq!(bad_args["error"]["code"], -32602);
    let other_tool = server.call(6, json!({"message": "x"}), None);
    assert_eq!(other_tool["result"]["isError"], false);
    let wrong_name = server.request(7, "tools/call", json!({"name": "rm_rf", "arguments": {}}));
    assert_eq!(wrong_name["error"]["code"], -32602);
    server.send(json!({"not": "json-rpc"}));
    let invalid = server.next("an invalid request", |v| v["error"]["code"] == -32600);
    assert_eq!(invalid["id"], Value::Null);
    // An invalid request that has an id gets it back.
    server.send(json!({"id": 77, "method": "tools/list"}));
    let invalid = server.next("an invalid request with its id", |v| {
        v["error"]["code"] == -32600
    });
    assert_eq!(invalid["id"], 77, "{invalid}");
    server.send(json!({"jsonrpc": "2.0", "id": "abc", "params": {}}));
    let invalid = server.next("a request without a method", |v| {
        v["error"]["code"] == -32600
    });
    assert_eq!(invalid["id"], "abc", "{invalid}");
    // Still serving.
    let response = server.call(8, json!({"message": "still here"}), None);
    assert_eq!(result_json(&response)["content"], "ECHO: still here\n");
}

#[test]
fn a_request_before_initialize_is_told_to_send_initialize_first() {
    let mut server = Server::start(&["--scenario", "reply"]);
    let early = server.request(1, "tools/list", json!({}));
    assert_eq!(early["error"]["code"], -32600, "{early}");
    assert!(
        early["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("send initialize first")),
        "{early}"
    );
    // A ping is allowed before initialize.
    let pong = server.request(2, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "{pong}");
    // The session still begins, and serves.
    let hello = server.request(
        3,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw-test", "version": "1"}}),
    );
    assert!(hello.get("result").is_some(), "{hello}");
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let response = server.call(4, json!({"message": "after all"}), None);
    assert_eq!(result_json(&response)["content"], "ECHO: after all\n");
}

/// A client that writes requests before `initialize` and never reads its
/// answers: they wait in a bounded queue, and then the server stops
/// reading (the pipe pushes back) instead of holding every answer in
/// memory. 48 MiB of requests would be ~170 MiB of answers.
#[test]
#[cfg(target_os = "linux")]
fn answers_nobody_reads_do_not_pile_up_in_memory() {
    let mut child = router()
        .args(["mcp", "--lang", "en"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped()) // never read
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let pid = child.id();
    let writer = std::thread::spawn(move || {
        let line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}\n";
        let block: Vec<u8> = line
            .iter()
            .copied()
            .cycle()
            .take(line.len() * 1000)
            .collect();
        for _ in 0..(48 << 20) / block.len() {
            if stdin.write_all(&block).is_err() {
                break;
            }
        }
    });
    let rss_kib = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    let start = Instant::now();
    let mut most = 0;
    while start.elapsed() < Duration::from_secs(10) && !writer.is_finished() {
        most = most.max(rss_kib());
        std::thread::sleep(Duration::from_millis(100));
    }
    most = most.max(rss_kib());
    let _ = child.kill();
    let _ = child.wait();
    assert!(most < 48 * 1024, "the server grew to {most} KiB");
}

/// A response (or an error) from the client before `initialize` answers
/// nothing we asked: it is dropped, as a notification then is, and the
/// session still begins (rmcp would end the server on it).
#[test]
fn a_response_before_initialize_does_not_end_the_server() {
    let mut server = Server::start(&["--scenario", "reply"]);
    server.send(json!({"jsonrpc": "2.0", "id": 9, "result": {}}));
    server.send(json!({"jsonrpc": "2.0", "id": 10, "error": {"code": 1, "message": "x"}}));
    let hello = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw-test", "version": "1"}}),
    );
    assert!(hello.get("result").is_some(), "{hello}");
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let response = server.call(2, json!({"message": "still here"}), None);
    assert_eq!(result_json(&response)["content"], "ECHO: still here\n");
}

/// An `initialize` that fails (bad params) has not begun the session:
/// what follows is still held to the pre-initialize rules (a request told
/// to send initialize first, a notification dropped) instead of reaching
/// rmcp, which would end the server and lose the answers.
#[test]
fn a_failed_initialize_does_not_begin_the_session() {
    let mut server = Server::start(&["--scenario", "reply"]);
    let failed = server.request(1, "initialize", json!({}));
    assert!(failed.get("error").is_some(), "{failed}");
    let early = server.request(2, "tools/list", json!({}));
    assert!(
        early["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("send initialize first")),
        "{early}"
    );
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/foo"}));
    let hello = server.request(
        3,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw-test", "version": "1"}}),
    );
    assert!(hello.get("result").is_some(), "{hello}");
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let response = server.call(4, json!({"message": "begun"}), None);
    assert_eq!(result_json(&response)["content"], "ECHO: begun\n");
}

#[test]
fn a_signal_stops_running_calls_and_the_server() {
    let (mut server, tree, _dir) = hanging_call(1);
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    assert_eq!(server.exit(), Some(0));
    assert_all_gone(&tree);
}

/// A host that stops a server whose client never got as far as
/// `initialize` (stuck, or gone without closing the pipe): SIGTERM ends it.
#[test]
#[cfg(target_os = "linux")]
fn a_signal_stops_a_server_before_any_session() {
    let mut server = Server::start(&[]);
    let pid = server.child.id();
    // Its handler is in place once /proc says it catches SIGTERM.
    let deadline = Instant::now() + WAIT;
    while !catches(pid, libc::SIGTERM) {
        assert!(
            Instant::now() < deadline,
            "the server never set up its signal handlers"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    assert_eq!(server.exit(), Some(0));
}

/// `pid` has a handler for `signal` (the SigCgt mask of /proc/PID/status).
#[cfg(target_os = "linux")]
fn catches(pid: u32, signal: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        })
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

#[test]
fn end_of_input_still_delivers_the_answers_of_running_calls() {
    let mut server = Server::initialized(&["--scenario", "sleep", "--sleep", "1"]);
    server.send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "clawbot_router", "arguments": {"message": "last one"}}}));
    drop(server.stdin.take()); // the host hangs up at once
    let response = server.response(9);
    assert_eq!(
        result_json(&response)["content"],
        "thinking...\nECHO: last one\n"
    );
    assert_eq!(server.exit(), Some(0));
}

#[test]
fn end_of_input_stops_a_call_that_would_outlast_it_and_answers_it() {
    let (mut server, tree, _dir) = hanging_call(12);
    let began = Instant::now();
    drop(server.stdin.take());
    let response = server.response(12);
    assert_eq!(response["result"]["isError"], true, "{response}");
    let content = result_json(&response)["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        content.ends_with("\n[clawbot_router] Interrupted (end of input): the remote clawBot was stopped and this result was aborted."),
        "what it printed, then the sentence: {content}"
    );
    assert_eq!(server.exit(), Some(0));
    assert!(
        began.elapsed() < Duration::from_secs(12),
        "a bounded drain: {:?}",
        began.elapsed()
    );
    assert_all_gone(&tree);
}
