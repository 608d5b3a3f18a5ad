//! `clawbot_router node --doctor` against the fake gateway: the diagnostic
//! context as the first message, the reply streamed to stdout, stdin lines
//! as follow-ups in the same session, tool calls on this node shown with
//! their approval, a dropped link resumed, Ctrl-C aborting the run.

#![cfg(unix)]

mod common;

use std::io::Write;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::gateway::{Config, FakeGateway, TOKEN};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(15);

struct Doctor {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl Doctor {
    fn start(url: &str, args: &[&str], env: &[(&str, &str)]) -> Doctor {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        let mut cmd = common::router();
        cmd.envs(env.iter().copied())
            .args([
                "node",
                "--gateway",
                url,
                "--token",
                TOKEN,
                "--display-name",
                "doc-node",
            ])
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--workspace")
            .arg(dir.path().join("ws"))
            .arg("--doctor")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = common::collect(child.stdout.take().unwrap());
        let stderr = common::collect(child.stderr.take().unwrap());
        Doctor {
            child,
            stdin,
            stdout,
            stderr,
            _dir: dir,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    async fn wait_output(&self, of: &Arc<Mutex<String>>, needle: &str) {
        let deadline = Instant::now() + LONG;
        while !of.lock().unwrap().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "never printed {needle:?}\nstdout: {}\nstderr: {}",
                self.stdout.lock().unwrap(),
                self.stderr.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stdout_has(&self, needle: &str) {
        self.wait_output(&self.stdout, needle).await
    }

    async fn stderr_has(&self, needle: &str) {
        self.wait_output(&self.stderr, needle).await
    }

    /// Waits for the exit code (the doctor must end by itself).
    async fn exit(&mut self) -> i32 {
        let deadline = Instant::now() + LONG;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "the doctor did not exit\n{}",
                self.stderr.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Doctor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_requests(gw: &FakeGateway, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + LONG;
    loop {
        let requests = gw.agent_requests();
        if requests.len() >= n {
            return requests;
        }
        assert!(
            Instant::now() < deadline,
            "only {} agent requests",
            requests.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_context_goes_first_replies_stream_and_stdin_follows_up_until_eof() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut doctor = Doctor::start(&gw.url(), &["--message", "why is it slow?"], &[]);
    let first = wait_requests(&gw, 1).await.remove(0);
    assert_eq!(first["agentId"], "doctor");
    let session = first["sessionKey"].as_str().unwrap().to_owned();
    assert!(
        session.starts_with("agent:doctor:clawbot-doctor-"),
        "{session}"
    );
    let context: Value = serde_json::from_str(first["message"].as_str().unwrap()).unwrap();
    assert_eq!(context["type"], "doctor_diagnosis_request");
    assert_eq!(context["question"], "why is it slow?");
    assert_eq!(context["target"]["instanceType"], "local");
    assert_eq!(context["context"]["openclawVersion"], "not_installed");
    for key in ["configContent", "doctorReport", "errorLog"] {
        assert!(context["context"].get(key).is_some(), "{key} missing");
    }
    assert!(context["context"]["systemInfo"]["arch"].is_string());
    doctor.stdout_has("ECHO: {\"context\"").await;

    doctor.send("and the logs?");
    let second = wait_requests(&gw, 2).await.remove(1);
    assert_eq!(second["message"], "and the logs?");
    assert_eq!(second["sessionKey"], session.as_str(), "same session");
    doctor.stdout_has("ECHO: and the logs?\n").await;

    drop(doctor.stdin.take()); // end of input
    assert_eq!(doctor.exit().await, 0);
    doctor.stderr_has("session over").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agents_tool_calls_on_this_node_are_shown_with_their_approval() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut doctor = Doctor::start(&gw.url(), &["--message", "look around"], &[]);
    wait_requests(&gw, 1).await;
    gw.wait_hellos(1, LONG).await; // the node half is connected
    doctor.stdout_has("look around").await;
    doctor.send(r#"[[invoke:system.which {"bins":["sh"]}]]"#);
    doctor.stdout_has("node said: {\"bins\":{\"sh\":").await;
    doctor
        .stderr_has("the agent runs Invoke system.which on node")
        .await;
    doctor.stderr_has("system.which → ok (allowed:").await;
    drop(doctor.stdin.take());
    assert_eq!(doctor.exit().await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_link_dropped_mid_turn_is_resumed_without_running_the_turn_twice() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut doctor = Doctor::start(
        &gw.url(),
        &["--message", "[[drop]] [[delay:1]] hold on"],
        &[],
    );
    doctor.stdout_has("hold on\"").await;
    doctor.stderr_has("connection lost").await;
    let requests = gw.agent_requests();
    let key = &requests[0]["idempotencyKey"];
    assert!(
        requests.iter().all(|r| &r["idempotencyKey"] == key),
        "one run"
    );
    assert!(gw.operator_connects().len() >= 2);
    drop(doctor.stdin.take());
    assert_eq!(doctor.exit().await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn silence_is_said_and_ctrl_c_aborts_the_run() {
    let gw = FakeGateway::start(Config::default()).await;
    let doctor = Doctor::start(
        &gw.url(),
        &["--message", "[[delay:30]] think hard"],
        &[("CLAWBOT_ROUTER_DOCTOR_QUIET_MS", "300")],
    );
    wait_requests(&gw, 1).await;
    doctor.stderr_has("no reply from the agent for 0.3s").await;
    let mut doctor = doctor;
    unsafe { libc::kill(doctor.child.id() as i32, libc::SIGINT) };
    assert_eq!(doctor.exit().await, 0);
    let aborts = gw.aborts();
    assert_eq!(aborts.len(), 1, "the run was aborted on the gateway");
    assert_eq!(aborts[0]["method"], "chat.abort");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_doctor_agent_ends_the_session_with_a_hint() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut doctor = Doctor::start(&gw.url(), &["--agent", "nobody"], &[]);
    assert_eq!(doctor.exit().await, 1);
    doctor.stderr_has("unknown agent id \"nobody\"").await;
    doctor.stderr_has("--agent").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_gateway_is_said_and_retried() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut doctor = Doctor::start(&format!("ws://127.0.0.1:{port}"), &[], &[]);
    doctor
        .stderr_has("doctor: cannot reach the gateway at")
        .await;
    doctor.stderr_has("retrying in").await;
    unsafe { libc::kill(doctor.child.id() as i32, libc::SIGTERM) };
    assert_eq!(doctor.exit().await, 0);
}

/// The doctor under `script`: stdin and stderr are a terminal, so approval
/// questions are asked there — and the same stdin carries follow-ups.
#[tokio::test(flavor = "multi_thread")]
async fn on_a_terminal_answers_go_to_the_question_and_other_lines_to_the_agent() {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let (mut child, screen) = common::under_terminal(&[
        common::ROUTER,
        "node",
        "--gateway",
        &gw.url(),
        "--token",
        TOKEN,
        "--state-dir",
        dir.path().join("state").to_str().unwrap(),
        "--workspace",
        dir.path().join("ws").to_str().unwrap(),
        "--doctor",
        "--message",
        "hello-tty",
    ]);
    let mut stdin = child.stdin.take().unwrap();
    // What the screen shows with the node's log lines taken out: another
    // task's line may land inside a streamed reply on a shared terminal.
    let replies = |screen: &str| {
        let mut out = String::new();
        let mut rest = screen;
        while let Some(at) = rest.find("[clawbot_router node] ") {
            out.push_str(&rest[..at]);
            rest = rest[at..].split_once('\n').map_or("", |(_, after)| after);
        }
        out.push_str(rest);
        out
    };
    let wait_screen = |needle: &str| {
        let screen = screen.clone();
        let needle = needle.to_owned();
        async move {
            let deadline = Instant::now() + LONG;
            while !screen.lock().unwrap().contains(&needle)
                && !replies(&screen.lock().unwrap()).contains(&needle)
            {
                assert!(
                    Instant::now() < deadline,
                    "never shown {needle:?}; screen:\n{}",
                    screen.lock().unwrap()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_screen("hello-tty").await;
    wait_requests(&gw, 1).await;
    gw.wait_hellos(1, LONG).await;
    wait_screen("type a follow-up").await;
    // A follow-up that makes the agent run a risky command here.
    writeln!(
        stdin,
        r#"[[invoke:run_command {{"command":["echo","tty-ok"]}}]]"#
    )
    .unwrap();
    stdin.flush().unwrap();
    wait_screen("Allow [o]nce").await;
    writeln!(stdin, "o").unwrap(); // the answer, not a message
    stdin.flush().unwrap();
    wait_screen("tty-ok\\n").await; // in the node's result, JSON-escaped
    wait_screen("run_command → ok (allowed:user-once)").await;
    writeln!(stdin, "and now a question").unwrap();
    stdin.flush().unwrap();
    wait_screen("ECHO: and now a question").await;
    // The third turn is over once its follow-up hint is shown.
    let deadline = Instant::now() + LONG;
    while screen.lock().unwrap().matches("type a follow-up").count() < 3 {
        assert!(Instant::now() < deadline, "{}", screen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let shown = replies(&screen.lock().unwrap())
        .matches("ECHO: and now a question")
        .count();
    assert_eq!(shown, 1, "the streamed reply is not printed again");
    let messages: Vec<String> = gw
        .agent_requests()
        .iter()
        .map(|r| r["message"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(messages[1].starts_with("[[invoke:run_command"));
    assert_eq!(messages[2], "and now a question");
    let _ = child.kill();
    let _ = child.wait();
}
