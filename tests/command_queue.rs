//! `clawbot_router poll` (seed 003) against a reference command queue
//! written from the seed (tests/fixtures/command-queue/cloud.py): the
//! node's registration, heartbeats, each command's start/progress/complete,
//! the airlock levels, re-registration, and hostile commands — the real
//! binary and the reference cloud as separate processes.
#![cfg(unix)]

mod common;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::node::Node;
use serde_json::{Value, json};

const KEY: &str = "platform-key-for-tests-0123456789";
const WAIT: Duration = Duration::from_secs(20);

struct Cloud {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Cloud {
    fn start(extra: &[&str]) -> Self {
        let dir = common::tempdir();
        let port_file = dir.path().join("port");
        let child = Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/command-queue/cloud.py"
            ))
            .arg(&port_file)
            .arg(KEY)
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + WAIT;
        while !port_file.exists() {
            assert!(
                Instant::now() < deadline,
                "the reference cloud did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let port = std::fs::read_to_string(&port_file)
            .unwrap()
            .parse()
            .unwrap();
        Cloud {
            child,
            port,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// One plain HTTP request to the test API.
    fn test(&self, path: &str, body: Value) -> Value {
        let mut tcp = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let data = body.to_string();
        let method = if path == "/test/state" { "GET" } else { "POST" };
        write!(
            tcp,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{data}",
            data.len()
        )
        .unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).unwrap();
        serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap()
    }

    fn enqueue(&self, command: Value) {
        self.test("/test/enqueue", command);
    }

    fn state(&self) -> Value {
        self.test("/test/state", json!({}))
    }

    /// Waits until `done` holds for the state, and returns it.
    async fn until(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let state = self.state();
            if done(&state) {
                return state;
            }
            assert!(Instant::now() < deadline, "never {what}: {state:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn completion(&self, id: &str) -> Value {
        let state = self
            .until(&format!("completed {id}"), |s| {
                s["completed"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["id"] == id)
            })
            .await;
        state["completed"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()
            .clone()
    }
}

impl Drop for Cloud {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // No body the node sent may have broken the contract.
    }
}

fn poll(cloud: &Cloud, args: &[&str]) -> Node {
    let url = cloud.url();
    let mut all = vec![
        "poll",
        "--api",
        url.as_str(),
        "--active-ms",
        "100",
        "--idle-ms",
        "200",
    ];
    all.extend(args);
    Node::start_args_env(&all, &[("CLAWBOT_ROUTER_POLL_KEY", KEY)])
}

fn fs_command(id: &str, method: &str, params: Value, level: u64) -> Value {
    json!({"id": id, "intent": format!("filesystem.{method}"), "payload": {"skill": "filesystem", "method": method, "params": params},
           "airlockLevel": level, "priority": "normal", "status": "pending", "createdAt": 1743000000000u64, "schemaVersion": "1"})
}

fn no_contract_errors(cloud: &Cloud) {
    let errors = cloud.state()["errors"].clone();
    assert_eq!(errors, json!([]), "bodies that broke the contract");
}

#[tokio::test]
async fn registers_heartbeats_and_runs_each_command_once_start_to_complete() {
    let cloud = Cloud::start(&[]);
    let node = poll(&cloud, &["--approval", "deny"]);
    std::fs::write(node.ws().join("notes.md"), "my notes\n").unwrap();
    let state = cloud
        .until("registered and beating", |s| {
            s["heartbeats"].as_u64() >= Some(2)
        })
        .await;
    let reg = &state["registrations"][0];
    assert_eq!(reg["workspaceId"], "ws_1");
    assert_eq!(reg["platform"], std::env::consts::OS);
    assert_eq!(
        reg["allowedPaths"][0],
        node.ws().canonicalize().unwrap().display().to_string()
    );
    let methods: Vec<&str> = reg["skills"][0]["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        ["read_file", "list_files", "search_files", "write_file"]
    );
    let first_beat = state["log"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"].as_str().unwrap().ends_with("/heartbeat"))
        .unwrap();
    assert!(
        first_beat["body"]["skills"].is_array(),
        "the first heartbeat carries the skills"
    );

    // Offered on every heartbeat until completed — and after: run once.
    let mut read = fs_command("cmd_read", "read_file", json!({"path": "notes.md"}), 0);
    read["redeliver"] = json!(true);
    cloud.enqueue(read);
    let done = cloud.completion("cmd_read").await;
    assert_eq!(
        done,
        json!({"id": "cmd_read", "success": true, "output": "my notes\n", "error": null, "exitCode": 0})
    );
    cloud
        .until("several more heartbeats", |s| {
            s["heartbeats"].as_u64() >= Some(8)
        })
        .await;
    let state = cloud.state();
    let runs = state["completed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"] == "cmd_read")
        .count();
    assert_eq!(runs, 1, "never the same command twice");
    assert_eq!(state["started"], json!(["cmd_read"]));
    assert_eq!(
        state["progress"][0]["message"],
        "Started filesystem.read_file"
    );

    // The seed's other methods and its errors.
    cloud.enqueue(fs_command(
        "cmd_list",
        "list_files",
        json!({"path": "."}),
        0,
    ));
    assert_eq!(cloud.completion("cmd_list").await["success"], true);
    cloud.enqueue(fs_command(
        "cmd_search",
        "search_files",
        json!({"query": "notes", "search_content": false}),
        0,
    ));
    assert!(
        cloud.completion("cmd_search").await["output"]
            .as_str()
            .unwrap()
            .contains("notes.md")
    );
    cloud.enqueue(fs_command(
        "cmd_escape",
        "read_file",
        json!({"path": "../../../etc/passwd"}),
        0,
    ));
    let escape = cloud.completion("cmd_escape").await;
    assert_eq!(escape["success"], false);
    assert!(
        escape["error"].as_str().unwrap().contains("workspace"),
        "{escape}"
    );
    cloud.enqueue(json!({"id": "cmd_shell", "intent": "shell.execute_command", "payload": {"skill": "shell", "method": "execute_command", "params": {"command": "id"}}, "airlockLevel": 2}));
    assert_eq!(
        cloud.completion("cmd_shell").await["error"],
        "Unknown skill: shell"
    );
    cloud.enqueue(fs_command(
        "cmd_delete",
        "delete_file",
        json!({"path": "notes.md"}),
        2,
    ));
    assert!(
        cloud.completion("cmd_delete").await["error"]
            .as_str()
            .unwrap()
            .starts_with("Unknown filesystem method: delete_file")
    );
    assert!(node.ws().join("notes.md").exists());

    // SIGTERM: disconnect, exit 0.
    let mut node = node;
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(WAIT).await, Some(0));
    assert_eq!(cloud.state()["disconnects"], json!(["node_1"]));
    let audit = std::fs::read_to_string(node.state().join("audit.jsonl")).unwrap();
    assert!(
        audit.contains("cmd_read") && audit.contains("cmd_escape"),
        "{audit}"
    );
    no_contract_errors(&cloud);
}

#[tokio::test]
async fn the_airlock_levels_and_our_own_class_decide_together() {
    let cloud = Cloud::start(&[]);
    let deny = poll(&cloud, &["--approval", "deny"]);
    // Level 1 asks (deny here); level 0 for a write is made stricter by our class.
    cloud.enqueue(fs_command(
        "l1",
        "write_file",
        json!({"path": "a.txt", "content": "a"}),
        1,
    ));
    cloud.enqueue(fs_command(
        "l0w",
        "write_file",
        json!({"path": "b.txt", "content": "b"}),
        0,
    ));
    for id in ["l1", "l0w"] {
        assert_eq!(
            cloud.completion(id).await,
            json!({"id": id, "success": false, "output": null, "error": "Rejected by Airlock/User", "exitCode": 1})
        );
    }
    assert!(!deny.ws().join("a.txt").exists() && !deny.ws().join("b.txt").exists());
    // Started (the cloud sees them waiting for the airlock), then rejected.
    let mut started: Vec<String> =
        serde_json::from_value(cloud.state()["started"].clone()).unwrap();
    started.sort();
    assert_eq!(started, ["l0w", "l1"]);
    drop(deny);

    // Headless stands in for the human, never for --approval deny.
    let cloud = Cloud::start(&[]);
    let strict = poll(&cloud, &["--headless", "--approval", "deny"]);
    cloud.enqueue(fs_command(
        "hd",
        "write_file",
        json!({"path": "d.txt", "content": "d"}),
        1,
    ));
    assert_eq!(
        cloud.completion("hd").await["error"],
        "Rejected by Airlock/User"
    );
    assert!(!strict.ws().join("d.txt").exists());
    drop(strict);

    // Headless: levels 0 and 1 run unasked; level 2 never does — not even
    // with --approval allow, and not without a human.
    let cloud = Cloud::start(&[]);
    let headless = poll(&cloud, &["--headless", "--approval", "allow"]);
    cloud.enqueue(fs_command(
        "h1",
        "write_file",
        json!({"path": "a.txt", "content": "written"}),
        1,
    ));
    assert_eq!(cloud.completion("h1").await["success"], true);
    assert_eq!(
        std::fs::read_to_string(headless.ws().join("a.txt")).unwrap(),
        "written"
    );
    cloud.enqueue(fs_command(
        "h2",
        "write_file",
        json!({"path": "c.txt", "content": "c"}),
        2,
    ));
    assert_eq!(
        cloud.completion("h2").await["error"],
        "Rejected by Airlock/User"
    );
    assert!(!headless.ws().join("c.txt").exists());
    // Bad levels are refused, not guessed.
    for (id, level) in [
        ("bad3", json!(3)),
        ("badstr", json!("2")),
        ("badneg", json!(-1)),
    ] {
        let mut c = fs_command(id, "read_file", json!({"path": "a.txt"}), 0);
        c["airlockLevel"] = level;
        cloud.enqueue(c);
        assert!(
            cloud.completion(id).await["error"]
                .as_str()
                .unwrap()
                .starts_with("airlockLevel must be 0, 1 or 2")
        );
    }
    no_contract_errors(&cloud);
}

#[tokio::test]
async fn level_two_asks_the_terminal_and_an_unanswered_approval_is_a_rejection() {
    let cloud = Cloud::start(&[]);
    let dir = common::tempdir();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let state = dir.path().join("state");
    let url = cloud.url();
    let argv = [
        "env",
        &format!("CLAWBOT_ROUTER_POLL_KEY={KEY}"),
        common::ROUTER,
        "poll",
        "--api",
        &url,
        "--active-ms",
        "100",
        "--idle-ms",
        "200",
        "--headless",
        "--state-dir",
        state.to_str().unwrap(),
        "--workspace",
        ws.to_str().unwrap(),
    ];
    let (mut child, screen) = common::under_terminal(&argv);
    let mut c = fs_command(
        "ask2",
        "write_file",
        json!({"path": "yes.txt", "content": "approved"}),
        2,
    );
    c["approvalTimeoutSecs"] = json!(20);
    cloud.enqueue(c);
    let deadline = Instant::now() + WAIT;
    while !screen.lock().unwrap().contains("Allow [o]nce") {
        assert!(Instant::now() < deadline, "{}", screen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        screen
            .lock()
            .unwrap()
            .contains("The cloud command queue wants to run on this machine")
    );
    child.stdin.as_mut().unwrap().write_all(b"o\n").unwrap();
    assert_eq!(cloud.completion("ask2").await["success"], true);
    assert_eq!(
        std::fs::read_to_string(ws.join("yes.txt")).unwrap(),
        "approved"
    );

    let mut c = fs_command(
        "late",
        "write_file",
        json!({"path": "no.txt", "content": "x"}),
        2,
    );
    c["approvalTimeoutSecs"] = json!(1);
    cloud.enqueue(c);
    assert_eq!(
        cloud.completion("late").await["error"],
        "Rejected by Airlock/User"
    );
    assert!(!ws.join("no.txt").exists());
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn a_forgotten_node_registers_again_and_a_taken_command_is_not_run() {
    let cloud = Cloud::start(&[]);
    let node = poll(&cloud, &[]);
    cloud
        .until("registered", |s| s["heartbeats"].as_u64() >= Some(1))
        .await;
    cloud.test("/test/forget", json!({}));
    cloud
        .until("registered again", |s| {
            s["registrations"].as_array().unwrap().len() >= 2
        })
        .await;
    node.wait_stderr("no longer knows this node", WAIT).await;

    let mut taken = fs_command("taken", "read_file", json!({"path": "."}), 0);
    taken["conflict"] = json!(true);
    cloud.enqueue(taken);
    cloud.enqueue(fs_command("after", "list_files", json!({}), 0));
    cloud.completion("after").await;
    node.wait_stderr("command taken cannot be started", WAIT)
        .await;
    assert!(
        cloud.state()["completed"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["id"] != "taken")
    );

    // A failing service: backoff, told once, then back.
    cloud.test(
        "/test/fail",
        json!({"path": "/heartbeat", "status": 503, "times": 2}),
    );
    let beats = cloud.state()["heartbeats"].as_u64().unwrap();
    cloud
        .until("beating again", |s| {
            s["heartbeats"].as_u64().unwrap() > beats + 1
        })
        .await;
    assert_eq!(
        node.stderr().matches("HTTP 503").count(),
        1,
        "{}",
        node.stderr()
    );
    // The wrong key: 401 (re-registering, refused again, backing off).
    drop(node);
    let out = common::router()
        .env("CLAWBOT_ROUTER_POLL_KEY", KEY)
        .args(["poll", "--api", &cloud.url(), "--key", KEY])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("visible to every user"));
    no_contract_errors(&cloud);
}

#[tokio::test]
async fn a_server_without_pending_commands_in_its_heartbeat_is_polled() {
    let cloud = Cloud::start(&["--poll-only"]);
    let _node = poll(&cloud, &[]);
    cloud.enqueue(fs_command("polled", "list_files", json!({}), 0));
    assert_eq!(cloud.completion("polled").await["success"], true);
    let log = cloud.state()["log"].clone();
    assert!(
        log.as_array()
            .unwrap()
            .iter()
            .any(|e| e["method"] == "GET" && e["path"].as_str().unwrap().ends_with("/commands"))
    );
    no_contract_errors(&cloud);
}

#[tokio::test]
async fn hostile_commands_and_answers_are_reported_and_the_node_keeps_polling() {
    let cloud = Cloud::start(&[]);
    let node = poll(&cloud, &[]);
    cloud
        .until("registered", |s| s["heartbeats"].as_u64() >= Some(1))
        .await;
    cloud.enqueue(json!({"intent": "filesystem.read_file"})); // no id: skipped
    cloud.enqueue(json!({"id": "a/../b", "intent": "filesystem.read_file"})); // not a path segment
    cloud.enqueue(
        json!({"id": "badpayload", "intent": "filesystem.read_file", "payload": "read everything"}),
    );
    assert!(
        cloud.completion("badpayload").await["error"]
            .as_str()
            .unwrap()
            .starts_with("malformed command")
    );
    cloud.enqueue(json!({"id": "badparams", "payload": {"skill": "filesystem", "method": "read_file", "params": [1]}}));
    assert!(
        cloud.completion("badparams").await["error"]
            .as_str()
            .unwrap()
            .starts_with("Missing parameters")
    );
    cloud.enqueue(json!({"id": "", "intent": "filesystem.read_file"}));
    node.wait_stderr("without a usable id is skipped: \"\"", WAIT)
        .await;
    // Offered on every heartbeat, told once each (three such commands).
    cloud
        .until("more heartbeats", |s| s["heartbeats"].as_u64() >= Some(10))
        .await;
    assert_eq!(
        node.stderr().matches("without a usable id").count(),
        3,
        "{}",
        node.stderr()
    );
    let log = cloud.state()["log"].clone();
    assert!(
        log.as_array()
            .unwrap()
            .iter()
            .all(|e| !e["path"].as_str().unwrap().contains("commands//"))
    );

    // Answers that are not JSON, or far too large: backoff, then on.
    cloud.test(
        "/test/fail",
        json!({"path": "/heartbeat", "status": 200, "times": 1, "body": "<html>oops</html>"}),
    );
    cloud.test(
        "/test/fail",
        json!({"path": "/heartbeat", "status": 200, "times": 1, "body": "x".repeat(5 << 20)}),
    );
    // A flood: 60 commands, each once, never more than three at a time.
    for i in 0..60 {
        cloud.enqueue(fs_command(&format!("flood{i}"), "list_files", json!({}), 0));
    }
    let state = cloud
        .until("all 60 completed", |s| {
            s["completed"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["id"].as_str().unwrap().starts_with("flood"))
                .count()
                == 60
        })
        .await;
    assert!(
        state["max_running"].as_u64().unwrap() <= 3,
        "{}",
        state["max_running"]
    );
    let stderr = node.stderr();
    assert!(stderr.contains("not JSON"), "{stderr}");
    assert!(stderr.contains("larger than"), "{stderr}");
    no_contract_errors(&cloud);
}

/// The resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// The same node (its state and workspace) started again, once it stopped.
fn poll_again(cloud: &Cloud, node: &mut Node) {
    let mut child = common::router()
        .env("CLAWBOT_ROUTER_POLL_KEY", KEY)
        .args([
            "poll",
            "--api",
            &cloud.url(),
            "--active-ms",
            "100",
            "--idle-ms",
            "200",
        ])
        .arg("--state-dir")
        .arg(node.state())
        .arg("--workspace")
        .arg(node.ws())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    node.stderr = common::collect(child.stderr.take().unwrap());
    node.child = child;
}

fn runs_of(state: &Value, id: &str) -> (usize, usize) {
    let count = |list: &str| {
        state[list]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c == &id || c["id"] == id)
            .count()
    };
    (count("started"), count("completed"))
}

#[tokio::test]
async fn a_queue_flooding_commands_while_start_is_slow_keeps_the_node_small() {
    let cloud = Cloud::start(&[]);
    let node = poll(&cloud, &[]);
    cloud
        .until("registered", |s| s["heartbeats"].as_u64() >= Some(1))
        .await;
    // Every answer: 100 new commands of 32 KiB; every start: a minute.
    cloud.test(
        "/test/flood",
        json!({"per_beat": 100, "pad": 32 << 10, "slow_start": 60}),
    );
    let state = cloud
        .until("5000 commands (160 MiB) offered", |s| {
            s["flood"]["offered"].as_u64() >= Some(5000)
        })
        .await;
    let rss = rss_kib(node.child.id());
    assert!(
        state["flood"]["started"].as_u64() <= Some(3),
        "only what the slots can run is taken: {}",
        state["flood"]
    );
    assert!(
        rss < 96 << 10,
        "the node holds {rss} KiB after 160 MiB of commands were offered"
    );
}

#[tokio::test]
async fn a_completion_that_fails_on_the_way_is_tried_again_until_the_queue_learns_it() {
    let cloud = Cloud::start(&[]);
    let node = poll(&cloud, &[]);
    cloud
        .until("registered", |s| s["heartbeats"].as_u64() >= Some(1))
        .await;
    cloud.test(
        "/test/fail",
        json!({"path": "/flaky/complete", "status": 503, "times": 2}),
    );
    cloud.enqueue(fs_command("flaky", "list_files", json!({}), 0));
    assert_eq!(cloud.completion("flaky").await["success"], true);
    let tries = cloud.state()["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["path"]
                .as_str()
                .unwrap()
                .ends_with("/commands/flaky/complete")
        })
        .count();
    assert_eq!(tries, 3, "two 503s, then taken");
    let stderr = node.stderr();
    assert!(stderr.contains("HTTP 503"), "{stderr}");
    assert!(stderr.contains("completed at try 3"), "{stderr}");
    assert_eq!(runs_of(&cloud.state(), "flaky"), (1, 1));

    // A queue that never takes it: tried a bounded number of times, and
    // the node goes on.
    cloud.test(
        "/test/fail",
        json!({"path": "/lost/complete", "status": 502, "times": 1000}),
    );
    cloud.enqueue(fs_command("lost", "list_files", json!({}), 0));
    node.wait_stderr("its result is given up", Duration::from_secs(90))
        .await;
    let tries = cloud.state()["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["path"]
                .as_str()
                .unwrap()
                .ends_with("/commands/lost/complete")
        })
        .count();
    assert_eq!(tries, 6, "{}", node.stderr());
    cloud.enqueue(fs_command("next", "list_files", json!({}), 0));
    assert_eq!(cloud.completion("next").await["success"], true);
    no_contract_errors(&cloud);
}

#[tokio::test]
async fn command_ids_are_one_url_path_segment_or_skipped_with_one_line() {
    let cloud = Cloud::start(&[]);
    let node = poll(&cloud, &[]);
    cloud
        .until("registered", |s| s["heartbeats"].as_u64() >= Some(1))
        .await;
    let long = "x".repeat(300);
    let bad = [
        ".",
        "..",
        "a%2F..",
        "x?y",
        "x#y",
        "x\u{1}y",
        "x y",
        long.as_str(),
    ];
    for id in bad {
        cloud.enqueue(json!({"id": id, "intent": "filesystem.list_files"}));
    }
    // Dots inside an id are plain characters.
    cloud.enqueue(fs_command("a..b", "list_files", json!({}), 0));
    assert_eq!(cloud.completion("a..b").await["success"], true);
    let beats = cloud.state()["heartbeats"].as_u64().unwrap();
    let state = cloud
        .until("five more heartbeats", |s| {
            s["heartbeats"].as_u64().unwrap() >= beats + 5
        })
        .await;
    assert_eq!(state["started"], json!(["a..b"]), "{:#}", state["log"]);
    for entry in state["log"].as_array().unwrap() {
        let path = entry["path"].as_str().unwrap();
        assert!(
            !path.contains("/./") && !path.contains("/../") && !path.contains('%'),
            "{path}"
        );
    }
    let stderr = node.stderr();
    assert_eq!(
        stderr.matches("without a usable id").count(),
        bad.len(),
        "one line each, however often offered: {stderr}"
    );
    assert!(stderr.contains("not '.' or '..'"), "{stderr}");
}

#[tokio::test]
async fn a_flood_of_new_ids_cannot_push_an_old_one_out_of_the_replay_memory() {
    let cloud = Cloud::start(&[]);
    let _node = poll(&cloud, &[]);
    // Offered on every heartbeat, from first to last.
    let mut first = fs_command("first", "list_files", json!({}), 0);
    first["redeliver"] = json!(true);
    cloud.enqueue(first);
    cloud.completion("first").await;
    // More new ids than the 4096 the node used to remember, each
    // completed at once (an unknown skill).
    cloud.test("/test/flood", json!({"per_beat": 100, "kind": "unknown"}));
    let deadline = Instant::now() + Duration::from_secs(120);
    while cloud.state()["flood"]["completed"].as_u64() < Some(4200) {
        assert!(Instant::now() < deadline, "{}", cloud.state()["flood"]);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cloud.test("/test/flood", json!({"per_beat": 0}));
    let beats = cloud.state()["heartbeats"].as_u64().unwrap();
    let state = cloud
        .until("five more heartbeats", |s| {
            s["heartbeats"].as_u64().unwrap() >= beats + 5
        })
        .await;
    assert_eq!(runs_of(&state, "first"), (1, 1), "run once, never again");
    no_contract_errors(&cloud);
}

#[tokio::test]
async fn a_restarted_node_does_not_run_a_command_again_and_a_damaged_memory_stops_it() {
    let cloud = Cloud::start(&[]);
    let mut node = poll(&cloud, &[]);
    let mut once = fs_command("once", "list_files", json!({}), 0);
    once["redeliver"] = json!(true);
    cloud.enqueue(once);
    cloud.completion("once").await;
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(WAIT).await, Some(0));

    poll_again(&cloud, &mut node);
    let beats = cloud.state()["heartbeats"].as_u64().unwrap();
    let state = cloud
        .until("registered again and five heartbeats", |s| {
            s["registrations"].as_array().unwrap().len() == 2
                && s["heartbeats"].as_u64().unwrap() >= beats + 5
        })
        .await;
    assert_eq!(
        runs_of(&state, "once"),
        (1, 1),
        "not run again after a restart"
    );
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(WAIT).await, Some(0));

    // A damaged memory: the node stops before it takes anything.
    let memories: Vec<_> = std::fs::read_dir(node.state().join("replay"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_none())
        .collect();
    assert_eq!(memories.len(), 1, "{memories:?}");
    let mut text = std::fs::read_to_string(&memories[0]).unwrap();
    text.push_str("this is not an id\n");
    std::fs::write(&memories[0], text).unwrap();
    cloud.enqueue(fs_command("after-damage", "list_files", json!({}), 0));
    poll_again(&cloud, &mut node);
    assert_eq!(node.wait_exit(WAIT).await, Some(1));
    node.wait_stderr("is damaged (line 3 is not an id and a time)", WAIT)
        .await;
    assert_eq!(runs_of(&cloud.state(), "after-damage"), (0, 0));
    no_contract_errors(&cloud);
}

#[test]
fn bad_flags_are_refused_before_polling() {
    let cases: &[(&[&str], &str)] = &[
        (&["poll", "--api", "http://example.com"], "plaintext"),
        (&["poll", "--api", "ftp://x"], "http://"),
        (
            &[
                "poll",
                "--api",
                "http://127.0.0.1:9",
                "--approval",
                "gateway",
            ],
            "needs an OpenClaw gateway",
        ),
    ];
    common::assert_usage_errors(("CLAWBOT_ROUTER_POLL_KEY", KEY), cases);
    let out = common::router()
        .args(["poll", "--api", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CLAWBOT_ROUTER_POLL_KEY"));
}
