//! `clawbot_router chat` (seed 001) against a reference General Agent
//! Service written from the contract (tests/fixtures/agent-service): every
//! body either side sends is validated against the contract's schema, and
//! the stream's events, the tool loop, the resilience rules and hostile
//! streams are driven end to end with real processes.
#![cfg(unix)]

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A python with `jsonschema` (the venv scripts/mcp-client.sh installs:
/// the `mcp` package depends on it), found once.
fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        if let Ok(p) = std::env::var("CLAWBOT_MCP_PYTHON") {
            return p;
        }
        let out = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/mcp-client.sh"
        ))
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/mcp-client.sh");
        assert!(out.status.success(), "scripts/mcp-client.sh failed");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
}

struct FakeService {
    child: Child,
    dir: tempfile::TempDir,
    url: String,
}

impl FakeService {
    fn start() -> Self {
        let dir = common::tempdir();
        let port_file = dir.path().join("port");
        let child = Command::new(python())
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/agent-service/service.py"
            ))
            .arg(&port_file)
            .arg(dir.path().join("log.jsonl"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !port_file.exists() {
            assert!(Instant::now() < deadline, "the fake service did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let port = std::fs::read_to_string(&port_file).unwrap();
        FakeService {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    /// Every request it took, in order.
    fn log(&self) -> Vec<Value> {
        common::records(&self.dir.path().join("log.jsonl"))
    }

    fn posts(&self, path: &str) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|e| e["path"] == path)
            .collect()
    }
}

impl Drop for FakeService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Chat {
    state: PathBuf,
    ws: PathBuf,
    _dir: tempfile::TempDir,
}

impl Chat {
    fn new() -> Self {
        let dir = common::tempdir();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        Chat {
            state: dir.path().join("state"),
            ws,
            _dir: dir,
        }
    }

    /// `chat` with `lines` on stdin; its output when it ends.
    fn run(&self, service: &FakeService, args: &[&str], lines: &str) -> common::Run {
        let mut cmd = common::router();
        cmd.args(["chat", "--service", &service.url, "--dead-after", "2"])
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--workspace")
            .arg(&self.ws)
            .args(args);
        common::run_with_stdin(&mut cmd, lines.as_bytes())
    }
}

/// Every body both sides sent passed the schema.
fn all_valid(service: &FakeService) {
    for entry in service.log() {
        if let Some(errors) = entry["errors"].as_array() {
            assert!(errors.is_empty(), "invalid body: {entry}");
        }
    }
}

fn tool_results(service: &FakeService) -> Vec<Value> {
    service
        .posts("/v1/tools/result")
        .into_iter()
        .map(|e| e["body"]["tool_result"].clone())
        .collect()
}

#[test]
fn a_turn_streams_deltas_and_the_session_is_resumed_by_the_next_run() {
    let service = FakeService::start();
    let chat = Chat::new();
    let run = chat.run(&service, &["hello"], "");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout, "Hello, world\n",
        "the final text repeats the deltas: said once"
    );
    let health = service
        .log()
        .into_iter()
        .filter(|e| e["path"] == "/health")
        .count();
    assert_eq!(health, 1);
    let chats = service.posts("/v1/chat");
    assert_eq!(chats[0]["body"]["message"]["parts"][0]["text"], "hello");
    assert_eq!(chats[0]["body"]["stream"], true);
    let first = service.posts("/v1/sessions")[0]["body"].clone();
    assert_eq!(first["jarvis_session_id"], "clawbot_router");
    assert!(first.get("preferred_session_id").is_none());

    // Lines of stdin are follow-up turns; the saved session is resumed.
    let run = chat.run(&service, &[], "hello\n\nsomething else\n");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "Hello, world\nreplayed something else (attempt 1)\n"
    );
    let sessions = service.posts("/v1/sessions");
    assert_eq!(sessions[1]["body"]["preferred_session_id"], "g_1");
    let chats = service.posts("/v1/chat");
    assert!(
        chats
            .iter()
            .all(|c| c["body"]["general_session_id"] == "g_1")
    );
    all_valid(&service);
}

#[test]
fn tool_requests_run_under_the_stricter_of_the_two_risk_classes() {
    let service = FakeService::start();
    let chat = Chat::new();
    std::fs::write(chat.ws.join("notes.md"), "from the desktop\n").unwrap();
    let lines = [
        r#"tool read_file safe {"path":"notes.md"}"#,
        // The service says risky: a read then needs approval, which --approval deny refuses.
        r#"tool read_file risky {"path":"notes.md"}"#,
        r#"tool write_file safe {"path":"w.txt","content":"x"}"#,
        r#"tool run_command forbidden {"command":["true"]}"#,
        r#"tool open_app safe {"app_id":"notion"}"#,
        r#"tool read_file safe {"path":"../../etc/passwd"}"#,
        r#"tool read_file sometimes {"path":"notes.md"}"#,
    ]
    .join("\n");
    let run = chat.run(&service, &["--approval", "deny"], &(lines + "\n"));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let results = tool_results(&service);
    assert_eq!(results.len(), 7, "{results:?}");
    assert_eq!(results[0]["ok"], true);
    assert_eq!(results[0]["result"]["content"], "from the desktop\n");
    assert!(
        results[1]["error"]
            .as_str()
            .unwrap()
            .starts_with("USER_REJECTED"),
        "{}",
        results[1]
    );
    assert!(
        results[2]["error"]
            .as_str()
            .unwrap()
            .starts_with("USER_REJECTED"),
        "our class is stricter: {}",
        results[2]
    );
    assert!(!chat.ws.join("w.txt").exists());
    assert!(
        results[3]["error"]
            .as_str()
            .unwrap()
            .starts_with("FORBIDDEN")
    );
    assert!(
        results[4]["error"]
            .as_str()
            .unwrap()
            .starts_with("UNKNOWN_COMMAND")
    );
    assert!(
        results[5]["error"].as_str().unwrap().contains("workspace"),
        "{}",
        results[5]
    );
    assert!(
        results[6]["error"]
            .as_str()
            .unwrap()
            .starts_with("BAD_REQUEST")
    );
    // Each turn ended with the service's answer to the result.
    assert!(
        run.stdout
            .contains("RESULT {\"error\": null, \"id\": \"toolcall_1\", \"ok\": true"),
        "{}",
        run.stdout
    );
    let audit = std::fs::read_to_string(chat.state.join("audit.jsonl")).unwrap();
    assert!(
        audit.contains("toolcall_1") && audit.contains("toolcall_3"),
        "{audit}"
    );
    all_valid(&service);

    // Pre-approved, the same write runs.
    let run = chat.run(
        &service,
        &["--approval", "deny", "--allow-command", "write_file"],
        "tool write_file safe {\"path\":\"w.txt\",\"content\":\"x\"}\n",
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(chat.ws.join("w.txt")).unwrap(), "x");
}

#[test]
fn a_repeated_tool_request_runs_once_and_both_get_its_result() {
    let service = FakeService::start();
    let chat = Chat::new();
    let count = chat.ws.join("count");
    let line = format!(
        "twice run_command safe {{\"command\":[\"sh\",\"-c\",\"sleep 0.5; echo ran >> {}\"]}}\n",
        count.display()
    );
    let run = chat.run(&service, &["--approval", "allow"], &line);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout, "2 results, equal: True\n", "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(&count).unwrap(),
        "ran\n",
        "run once"
    );
    assert!(
        run.stderr
            .contains("was asked for before; it is not run again"),
        "{}",
        run.stderr
    );
    all_valid(&service);
}

/// The results posted for tool call `id`, in order.
fn results_for(service: &FakeService, id: &str) -> Vec<Value> {
    tool_results(service)
        .into_iter()
        .filter(|r| r["id"] == id)
        .collect()
}

#[test]
fn a_flood_of_new_tool_ids_cannot_push_an_old_one_out_and_a_restart_forgets_none() {
    let service = FakeService::start();
    let chat = Chat::new();
    let count = chat.ws.join("count");
    let first = format!(
        "call first run_command safe {{\"command\":[\"sh\",\"-c\",\"echo ran >> {}\"]}}\n",
        count.display()
    );
    // More new ids than the 64 the chat used to remember, then the first again.
    let mut lines = first.clone();
    for i in 0..70 {
        lines.push_str(&format!("call flood{i} list_files safe {{}}\n"));
    }
    lines.push_str(&first);
    let run = chat.run(&service, &["--approval", "allow"], &lines);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(&count).unwrap(),
        "ran\n",
        "run once"
    );
    let results = results_for(&service, "first");
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["ok"], true, "{}", results[0]);
    assert!(
        results[1]["error"]
            .as_str()
            .unwrap()
            .starts_with("DUPLICATE"),
        "{}",
        results[1]
    );

    // A restarted chat remembers it too.
    let run = chat.run(&service, &["--approval", "allow"], &first);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(&count).unwrap(),
        "ran\n",
        "run once"
    );
    let results = results_for(&service, "first");
    assert!(
        results[2]["error"]
            .as_str()
            .unwrap()
            .starts_with("DUPLICATE"),
        "{}",
        results[2]
    );

    // A damaged memory: the chat does not start.
    let memory = std::fs::read_dir(chat.state.join("replay"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_none())
        .unwrap();
    std::fs::write(&memory, "garbage\n").unwrap();
    let run = chat.run(&service, &["--approval", "allow"], &first);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("is damaged"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "ran\n");
    assert_eq!(results_for(&service, "first").len(), 3);
    all_valid(&service);
}

#[test]
fn tool_results_are_posted_over_a_bounded_number_of_connections() {
    let service = FakeService::start();
    let chat = Chat::new();
    // 24 requests at once: 8 run, the rest are answered BUSY, and the
    // service takes each result slowly.
    let run = chat.run(
        &service,
        &["--approval", "allow"],
        "burst 24 list_files safe {}\n",
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (came, most) = run
        .stdout
        .trim()
        .strip_suffix(" at once")
        .and_then(|s| s.split_once(" results, at most "))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert_eq!(came, "24", "every request answered");
    let most: usize = most.parse().unwrap();
    assert!(most <= 4, "{most} results were posted at once");
    all_valid(&service);
}

#[test]
fn a_stream_that_drops_or_falls_silent_mid_turn_is_reopened_and_the_message_resent() {
    let service = FakeService::start();
    let chat = Chat::new();
    let started = Instant::now();
    let run = chat.run(&service, &[], "drop\nsilent\nheartbeat\nhuge\n");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "partial\nreplayed drop (attempt 2)\npartial\nreplayed silent (attempt 2)\nstill here\nreplayed huge (attempt 2)\n",
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("the stream broke"), "{}", run.stderr);
    assert!(
        run.stderr.contains("no data for 2 s, not even a heartbeat"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("larger than") || run.stderr.contains("longer than"),
        "{}",
        run.stderr
    );
    // Heartbeats alone keep a stream alive: that turn was sent once.
    let texts: Vec<String> = service
        .posts("/v1/chat")
        .iter()
        .map(|c| {
            c["body"]["message"]["parts"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        texts,
        [
            "drop",
            "drop",
            "silent",
            "silent",
            "heartbeat",
            "huge",
            "huge"
        ]
    );
    // Each reconnect waited its second.
    assert!(
        started.elapsed() >= Duration::from_secs(3 + 2),
        "{:?}",
        started.elapsed()
    );
    all_valid(&service);
}

#[test]
fn errors_unknown_events_and_a_forgotten_session_are_told_and_survived() {
    let service = FakeService::start();
    let chat = Chat::new();
    let run = chat.run(&service, &[], "error\ngarbage\nforget\nhello\n");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("the service reported an error: MODEL_DOWN: The model is unavailable."),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("assistant.delta: its data is not JSON"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("unknown event \"surprise.event\""),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("did not know the session"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("survived\n"));
    assert!(run.stdout.ends_with("Hello, world\n"), "{}", run.stdout);
    let sessions = service.posts("/v1/sessions");
    assert_eq!(sessions.len(), 2, "a new session after the 404");
    all_valid(&service);
}

#[test]
fn bad_services_are_refused_with_a_reason() {
    let chat = Chat::new();
    let mut cases: Vec<(Vec<String>, &str, i32)> = vec![
        (
            vec!["--service".into(), "http://10.1.2.3:8765".into()],
            "--allow-remote",
            2,
        ),
        (
            vec![
                "--service".into(),
                "http://example.com".into(),
                "--allow-remote".into(),
            ],
            "plaintext",
            2,
        ),
        (vec!["--service".into(), "gopher://x".into()], "http://", 2),
        (
            vec!["--conversation".into(), " ".into()],
            "--conversation",
            2,
        ),
    ];
    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    cases.push((
        vec!["--service".into(), format!("http://127.0.0.1:{port}")],
        "not reachable",
        1,
    ));
    for (args, needle, code) in cases {
        let mut cmd = common::router();
        cmd.arg("chat")
            .args(&args)
            .arg("--state-dir")
            .arg(&chat.state)
            .arg("--workspace")
            .arg(&chat.ws);
        let run = common::run(&mut cmd);
        assert_eq!(run.code, Some(code), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    }
}

impl Chat {
    /// `chat memory ARGS` with `stdin`; its output and the JSON it printed.
    fn memory(&self, service: &FakeService, args: &[&str], stdin: &[u8]) -> (common::Run, Value) {
        let mut cmd = common::router();
        cmd.args(["chat", "memory"])
            .args(args)
            .args(["--service", &service.url]);
        // A write keeps its session in the state directory; a search has none.
        if args.first() == Some(&"write") {
            cmd.arg("--state-dir").arg(&self.state);
        }
        let run = common::run_with_stdin(&mut cmd, stdin);
        let value = if run.stdout.is_empty() {
            Value::Null
        } else {
            run.json()
        };
        (run, value)
    }
}

fn today() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn memory_is_written_and_searched_from_a_script_in_the_conversations_session() {
    let service = FakeService::start();
    let chat = Chat::new();
    // A conversation first: its session is the one the notes go to.
    let run = chat.run(&service, &["hello"], "");
    assert_eq!(run.code, Some(0), "{}", run.stderr);

    let note = "I prefer two deep-work blocks in the morning.";
    let (run, written) = chat.memory(&service, &["write", "--target", "long_term", note], b"");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        written,
        serde_json::json!({"ok": true, "path": "memory/MEMORY.md", "target": "long_term", "general_session_id": "g_1"})
    );
    // From stdin (`-`), several lines, to today's memory.
    let daily = "Stand-up moved to 10:00.\nDeep-work block cancelled today.\n";
    let (run, written) = chat.memory(
        &service,
        &["write", "--target", "daily", "-"],
        daily.as_bytes(),
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let day_path = format!("memory/{}.md", today());
    assert_eq!(written["path"], day_path.as_str());
    let writes = service.posts("/v1/memory/write");
    assert_eq!(writes.len(), 2);
    assert_eq!(
        writes[0]["body"],
        serde_json::json!({"general_session_id": "g_1", "target": "long_term", "content": note})
    );
    assert_eq!(
        writes[1]["body"]["content"], daily,
        "the note whole, as read"
    );
    // Each write resumed the conversation's session, never a new one.
    let sessions = service.posts("/v1/sessions");
    assert_eq!(sessions.len(), 3, "the chat's, then one per write");
    assert!(
        sessions[1..]
            .iter()
            .all(|s| s["body"]["preferred_session_id"] == "g_1"),
        "{sessions:?}"
    );

    let (run, found) = chat.memory(&service, &["search", "deep-work"], b"");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        found,
        serde_json::json!({"ok": true, "query": "deep-work", "results": [
            {"path": "memory/MEMORY.md", "excerpt": note, "line_start": 1, "line_end": 1, "score": 1.0},
            {"path": day_path, "excerpt": daily.trim_end(), "line_start": 1, "line_end": 2, "score": 1.0},
        ]})
    );
    let (_, found) = chat.memory(&service, &["search", "--kind", "daily", "deep-work"], b"");
    assert_eq!(found["results"].as_array().unwrap().len(), 1);
    assert_eq!(found["results"][0]["path"], day_path.as_str());
    let (_, found) = chat.memory(&service, &["search", "--limit", "1", "deep-work"], b"");
    assert_eq!(found["results"].as_array().unwrap().len(), 1);
    let (run, found) = chat.memory(&service, &["search", "nothing like it"], b"");
    assert_eq!(run.code, Some(0));
    assert_eq!(found["results"], serde_json::json!([]));
    // The query reaches the service as one value, whatever it holds.
    let tricky = "a&kind=long_term&limit=1 #/é%20+";
    let (run, _) = chat.memory(&service, &["search", tricky], b"");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let searches: Vec<Value> = service
        .log()
        .into_iter()
        .filter(|e| e["path"] == "/v1/memory/search")
        .collect();
    let last = &searches.last().unwrap()["query"];
    assert_eq!(last, &serde_json::json!({"q": [tricky]}));
    assert_eq!(
        searches[1]["query"],
        serde_json::json!({"q": ["deep-work"], "kind": ["daily"]})
    );
    assert_eq!(
        searches[2]["query"],
        serde_json::json!({"q": ["deep-work"], "limit": ["1"]})
    );
    all_valid(&service);
}

#[test]
fn memory_errors_keep_the_services_words_and_bad_input_never_reaches_it() {
    let service = FakeService::start();
    let chat = Chat::new();
    // The service's error model, kept whole.
    let (run, v) = chat.memory(&service, &["search", "--kind", "weekly", "x"], b"");
    assert_eq!(run.code, Some(1));
    assert_eq!(
        v,
        serde_json::json!({"ok": false, "error": {"code": "INVALID_KIND", "message": "kind must be long_term or daily", "status": 400, "details": {"kind": "weekly"}}})
    );
    assert!(
        run.stderr
            .contains("INVALID_KIND: kind must be long_term or daily (HTTP 400)"),
        "{}",
        run.stderr
    );
    for args in [&["search", "broken"][..], &["write", "broken"][..]] {
        let (run, v) = chat.memory(&service, args, b"");
        assert_eq!(run.code, Some(1), "{args:?}");
        assert_eq!(v["error"]["code"], "INDEX_BROKEN", "{args:?}");
        assert_eq!(v["error"]["status"], 500);
        assert_eq!(v["error"]["details"]["retry_after_ms"], 1000);
    }
    // Answers of another shape, or too large, are refused, not half-shown.
    for (query, says) in [
        ("malformed", "results[0].line_start"),
        ("huge", "larger than"),
    ] {
        let (run, v) = chat.memory(&service, &["search", query], b"");
        assert_eq!(run.code, Some(1));
        assert_eq!(v["error"]["code"], "BAD_ANSWER");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(says),
            "{v}"
        );
    }
    // What the service wrote reaches stdout inert, the same JSON value.
    let (run, v) = chat.memory(&service, &["search", "escape"], b"");
    assert_eq!(run.code, Some(0));
    assert!(
        !run.stdout.contains(['\u{1b}', '\r', '\u{202e}', '\u{7}']),
        "{}",
        run.stdout
    );
    assert_eq!(v["results"][0]["path"], "memory/\u{1b}[2Jx\u{202e}.md");
    // One deadline for the whole command.
    let (run, v) = chat.memory(&service, &["search", "--timeout", "1", "slow"], b"");
    assert_eq!(run.code, Some(1));
    assert_eq!(v["error"]["code"], "TIMEOUT");
    assert!(
        run.elapsed < Duration::from_millis(2900),
        "{:?}",
        run.elapsed
    );

    // A 404: the session is resumed (the service hands back the one to
    // use) and the note tried once more there; a second 404 is told.
    let (run, v) = chat.memory(&service, &["write", "nomemory"], b"");
    assert_eq!(run.code, Some(1));
    assert_eq!(v["error"]["code"], "NOT_FOUND");
    assert_eq!(v["error"]["message"], "this service keeps no memory");
    assert_eq!(
        service.posts("/v1/memory/write").len(),
        3,
        "broken once, nomemory twice"
    );
    let (run, v) = chat.memory(&service, &["write", "forget"], b"");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(v["general_session_id"], "g_2", "{v}");
    let writes = service.posts("/v1/memory/write");
    assert_eq!(writes.len(), 5);
    assert_eq!(writes[3]["body"]["general_session_id"], "g_1");
    assert_eq!(writes[4]["body"]["general_session_id"], "g_2");
    // The service's own words, whatever they are: its INVALID_INPUT is a
    // failure of the service (exit 1), and a plain-text error keeps its text.
    let (run, v) = chat.memory(&service, &["write", "theirs"], b"");
    assert_eq!(run.code, Some(1), "{v}");
    assert_eq!(v["error"]["code"], "INVALID_INPUT");
    assert_eq!(v["error"]["status"], 400);
    let (run, v) = chat.memory(&service, &["search", "plaintext"], b"");
    assert_eq!(run.code, Some(1));
    assert_eq!(
        v["error"],
        serde_json::json!({"code": "HTTP_503", "message": "upstream down", "status": 503})
    );

    // Bad input: a clear message in the JSON, exit 2, nothing sent.
    let before = service.log().len();
    let big = vec![b'x'; (1 << 20) + 1];
    for (args, stdin, says) in [
        (&["write", "  "][..], &b""[..], "empty"),
        (&["write", "-"][..], &big[..], "larger than"),
        (&["write", "-"][..], &b"\xff\xfe"[..], "not UTF-8"),
        (&["search", " "][..], &b""[..], "empty"),
        (&["search", "--kind", "a b", "x"][..], &b""[..], "kind"),
        (
            &["write", "--conversation", " ", "x"][..],
            &b""[..],
            "--conversation",
        ),
    ] {
        let (run, v) = chat.memory(&service, args, stdin);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert_eq!(v["ok"], false, "{args:?}");
        assert_eq!(v["error"]["code"], "INVALID_INPUT", "{args:?}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(says),
            "{args:?}: {v}"
        );
    }
    let mut cmd = common::router();
    cmd.args([
        "chat",
        "memory",
        "search",
        "x",
        "--service",
        "http://10.1.2.3:8765",
    ]);
    let run = common::run(&mut cmd);
    assert_eq!(run.code, Some(2));
    assert!(
        run.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--allow-remote")
    );
    assert_eq!(service.log().len(), before, "nothing reached the service");
    // Usage errors are clap's: stderr, exit 2, nothing on stdout.
    for args in [
        &["search", "--limit", "0", "x"][..],
        &["write", "--target", "weekly", "x"][..],
        &["write"][..],
        &["forget", "x"][..],
        // A search names no session.
        &["search", "--conversation", "c", "x"][..],
    ] {
        let (run, v) = chat.memory(&service, args, b"");
        assert_eq!(run.code, Some(2), "{args:?}");
        assert_eq!(v, Value::Null, "{args:?}");
        assert!(run.stderr.starts_with("error:"), "{args:?}: {}", run.stderr);
    }
    // A conversation's flag before `memory` is refused, not ignored; the
    // service's flags go either side.
    for (args, code) in [
        (&["--dead-after", "5", "memory", "search", "x"][..], 2),
        (&["--state-dir", "/tmp", "memory", "search", "x"][..], 2),
        (&["--service", &service.url, "memory", "search", "x"][..], 0),
    ] {
        let mut cmd = common::router();
        cmd.arg("chat").args(args);
        let run = common::run(&mut cmd);
        assert_eq!(run.code, Some(code), "{args:?}: {}", run.stderr);
        if code == 2 {
            assert!(
                run.stderr.contains("is a conversation's flag"),
                "{}",
                run.stderr
            );
            assert!(run.stdout.is_empty());
        }
    }
    // Nothing listens: told as such.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = common::router();
    cmd.args(["chat", "memory", "search", "x", "--service"])
        .arg(format!("http://127.0.0.1:{port}"));
    let run = common::run(&mut cmd);
    assert_eq!(run.code, Some(1));
    assert_eq!(run.json()["error"]["code"], "UNAVAILABLE");
    all_valid(&service);
}

#[test]
fn memory_commands_inside_a_conversation() {
    let service = FakeService::start();
    let chat = Chat::new();
    let lines = [
        "/remember I like green tea",
        "/daily Stand-up at 10",
        "/search tea",
        "/search --kind daily --limit 5 stand-up",
        "/search escape",
        "/search --kind weekly x",
        "/remember",
        "/help",
        "//remember this is a message",
        "hello",
    ]
    .join("\n");
    let run = chat.run(&service, &[], &(lines + "\n"));
    assert_eq!(run.code, Some(1), "two lines failed: {}", run.stderr);
    let day = today();
    let expected = format!(
        "saved to long-term memory: memory/MEMORY.md\n\
         saved to today's memory: memory/{day}.md\n\
         1 result for \"tea\":\n\
         memory/MEMORY.md:1 (score 1)\n    I like green tea\n\
         1 result for \"stand-up\":\n\
         memory/{day}.md:1 (score 1)\n    Stand-up at 10\n\
         1 result for \"escape\":\n\
         memory/\\u{{1b}}[2Jx\\u{{202e}}.md:2-3\n    line\\r\\u{{1b}}]0;title\\u{{7}}\n    next\n\
         {help}\
         replayed /remember this is a message (attempt 1)\n\
         Hello, world\n",
        help = HELP
    );
    assert_eq!(run.stdout, expected, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "the search failed: INVALID_KIND: kind must be long_term or daily (HTTP 400)"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("/remember needs the text"),
        "{}",
        run.stderr
    );
    // The notes went to the conversation's session.
    let writes = service.posts("/v1/memory/write");
    assert_eq!(writes.len(), 2);
    assert!(
        writes
            .iter()
            .all(|w| w["body"]["general_session_id"] == "g_1")
    );
    all_valid(&service);
}

const HELP: &str = "\
/remember TEXT      save TEXT to the agent's long-term memory
/daily TEXT         save TEXT to today's memory
/search [--kind K] [--limit N] QUERY
                    search the agent's memory (paths and lines to cite)
/help               this list
//TEXT              send /TEXT to the agent as it is
Any other line is a message for the agent.
";

#[test]
fn a_stream_with_event_ids_is_resumed_with_last_event_id_not_resent() {
    let service = FakeService::start();
    let chat = Chat::new();
    // A tool still running when the stream drops (the service's turn
    // waits for it): it runs on, and its result is posted once.
    let tool = r#"resume-tool run_command safe {"command": ["sh", "-c", "sleep 1; echo kept across the drop"]}"#;
    let lines = [
        "resume",
        tool,
        "resume-refused",
        "longid",
        "resume-ignored",
        "resume-empty",
        "resume-404",
    ]
    .join("\n");
    let run = chat.run(
        &service,
        &["--allow-command", "run_command"],
        &(lines + "\n"),
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let mut out = run.stdout.lines();
    // Resumed: the text continues where it stopped, said once.
    assert_eq!(out.next(), Some("Hello, world"), "{}", run.stdout);
    let result: Value =
        serde_json::from_str(out.next().unwrap().strip_prefix("RESULT ").unwrap()).unwrap();
    assert_eq!(
        result["ok"], true,
        "the tool ran on across the resume: {result}"
    );
    assert_eq!(
        result["result"]["stdout"], "kept across the drop\n",
        "{result}"
    );
    // A service that will not resume, or an id that cannot be sent back:
    // the message is re-sent. A service that ignores Last-Event-ID runs
    // the turn again: seen by its first id, followed from the start. A
    // resume answered with an empty stream, or a 404 (the session
    // forgotten), re-sends too.
    assert_eq!(
        out.collect::<Vec<_>>(),
        [
            "partial",
            "replayed resume-refused (attempt 2)",
            "partial",
            "replayed longid (attempt 2)",
            "Hello, ",
            "Hello, world",
            "partial",
            "replayed resume-empty (attempt 2)",
            "partial",
            "replayed resume-404 (attempt 2)",
        ]
    );
    let chats: Vec<(String, Value)> = service
        .posts("/v1/chat")
        .iter()
        .map(|c| {
            (
                c["body"]["message"]["parts"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                c.get("last_event_id").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    let expected: Vec<(String, Value)> = [
        ("resume", Value::Null),
        ("resume", "2".into()),
        (tool, Value::Null),
        (tool, "1".into()),
        ("resume-refused", Value::Null),
        ("resume-refused", "1".into()),
        ("resume-refused", Value::Null),
        ("longid", Value::Null),
        ("longid", Value::Null),
        ("resume-ignored", Value::Null),
        ("resume-ignored", "1".into()),
        ("resume-empty", Value::Null),
        ("resume-empty", "1".into()),
        ("resume-empty", Value::Null),
        ("resume-404", Value::Null),
        ("resume-404", "1".into()),
        ("resume-404", Value::Null),
    ]
    .into_iter()
    .map(|(t, id)| (t.to_owned(), id))
    .collect();
    assert_eq!(chats, expected);
    assert_eq!(
        tool_results(&service).len(),
        1,
        "the tool ran once, its result posted once"
    );
    for said in [
        "resuming after event \"2\"",
        "would not resume the stream (HTTP 409",
        "cannot be sent back; re-sending",
        "it started the turn over rather than resuming",
        "the resumed stream ended without an event",
        "did not know the session",
    ] {
        assert!(run.stderr.contains(said), "{said}: {}", run.stderr);
    }
    all_valid(&service);
}
