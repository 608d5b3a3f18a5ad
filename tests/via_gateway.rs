//! The router's `--via gateway|auto` against the fake gateway (operator
//! side): the same JSON as the CLI path, the wire params `openclaw agent`
//! sends, aborts on timeout and signals, the link dropping mid-turn, and
//! `auto` falling back to the CLI only when nothing reached the gateway.

#![cfg(unix)]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::gateway::{Config, FakeGateway, TOKEN};
use common::{Run, router, router_with};
use serde_json::Value;

fn via(gw_url: &str, mode: &str, cmd: &mut Command) {
    cmd.args([
        "--via",
        mode,
        "--gateway",
        gw_url,
        "--token",
        TOKEN,
        "--lang",
        "en",
    ])
    .args(["--meta", "--exit-code"]);
}

/// Runs the router off the runtime thread (the fake gateway lives on it).
async fn call(mut cmd: Command) -> Run {
    tokio::task::spawn_blocking(move || common::run(&mut cmd))
        .await
        .unwrap()
}

fn gateway_call(gw: &FakeGateway, args: &[&str]) -> Command {
    let mut cmd = router();
    via(&gw.url(), "gateway", &mut cmd);
    cmd.args(args);
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_is_the_same_json_as_the_cli_path_and_the_wire_matches_openclaw_agent() {
    let gw = FakeGateway::start(Config::default()).await;
    let run = call(gateway_call(&gw, &["-m", "hello there"])).await;
    assert_eq!(
        run.content(),
        "ECHO: hello there\n",
        "as openclaw agent prints it"
    );
    assert_eq!(run.code, Some(0));
    let meta = run.meta();
    assert_eq!(meta["via"], "gateway");
    assert_eq!(meta["timedOut"], false);
    assert!(run.stderr.is_empty(), "{}", run.stderr);

    let connect = &gw.operator_connects()[0];
    assert_eq!(connect["client"]["id"], "cli");
    assert_eq!(connect["client"]["mode"], "cli");
    assert_eq!(connect["role"], "operator");
    assert_eq!(connect["scopes"], serde_json::json!(["operator.write"]));
    assert_eq!(connect["auth"]["token"], TOKEN);
    assert!(connect.get("device").is_none() && connect.get("commands").is_none());

    let params = &gw.agent_requests()[0];
    assert_eq!(params["message"], "hello there");
    assert_eq!(params["agentId"], "main");
    assert_eq!(params["deliver"], false);
    assert_eq!(params["timeout"], 62, "our 60 s plus the backstop margin");
    assert_eq!(params["idempotencyKey"], meta["runId"]);
    assert!(params.get("sessionKey").is_none() && params.get("to").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_session_choice_reaches_the_gateway_as_session_key() {
    let gw = FakeGateway::start(Config::default()).await;
    call(gateway_call(&gw, &["-m", "x", "--session", "support-42"])).await;
    call(gateway_call(&gw, &["-m", "x", "--session", "new"])).await;
    call(gateway_call(&gw, &["-m", "x", "--session", "new"])).await;
    let sent: Vec<Value> = gw
        .agent_requests()
        .iter()
        .map(|p| p["sessionKey"].clone())
        .collect();
    assert_eq!(sent[0], "support-42");
    let (a, b) = (sent[1].as_str().unwrap(), sent[2].as_str().unwrap());
    assert!(a.starts_with("clawbot-") && a != b, "{sent:?}");
    // A destination with a whole key: the key's agent, as the CLI path.
    call(gateway_call(
        &gw,
        &["-m", "x", "--to", "+1555", "--session", "agent:ops:s"],
    ))
    .await;
    let last = gw.agent_requests().last().unwrap().clone();
    assert_eq!(
        (last["agentId"].as_str(), last["sessionKey"].as_str()),
        (Some("ops"), Some("agent:ops:s"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn routes_agent_and_to_become_agent_id_and_to() {
    let gw = FakeGateway::start(Config::default()).await;
    let run = call(gateway_call(&gw, &["-a", "doctor", "-m", "x"])).await;
    assert_eq!(run.content(), "ECHO: x\n");
    let run = call(gateway_call(&gw, &["--to", "+15555550123", "-m", "y"])).await;
    assert_eq!(run.content(), "ECHO: y\n");
    let requests = gw.agent_requests();
    assert_eq!(requests[0]["agentId"], "doctor");
    assert_eq!(requests[1]["to"], "+15555550123");
    assert_eq!(
        requests[1]["agentId"], "main",
        "the gateway's default agent (agents.list)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_and_failed_runs_read_as_openclaw_prints_them() {
    let gw = FakeGateway::start(Config::default()).await;
    let run = call(gateway_call(&gw, &["-a", "nosuchagent", "-m", "hi"])).await;
    assert_eq!(
        run.content(),
        "invalid agent params: unknown agent id \"nosuchagent\"\n"
    );
    assert_eq!(run.code, Some(1));
    let run = call(gateway_call(&gw, &["-m", "[[fail]] please"])).await;
    assert_eq!(
        run.content(),
        "LLM request failed: provider rejected the request schema or tool payload.\n"
    );
    assert_eq!(run.code, Some(1));
    // A blank message never leaves the router (as with the CLI path).
    let run = call(gateway_call(&gw, &["-m", "   "])).await;
    assert_eq!(run.code, Some(2));
    assert_eq!(gw.agent_requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_timeout_aborts_the_run_on_the_gateway_and_keeps_the_partial_text() {
    let gw = FakeGateway::start(Config::default()).await;
    let run = call(gateway_call(
        &gw,
        &["--timeout", "1", "-m", "[[delay:30]] slow"],
    ))
    .await;
    assert_eq!(
        run.content(),
        "ECHO:\n[clawbot_router] The remote clawBot timed out (not finished after 1 seconds); this result was aborted."
    );
    assert_eq!(run.code, Some(124));
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
    let run_id = run.meta()["runId"].as_str().unwrap().to_owned();
    assert!(
        gw.wait_run_over(&run_id, Duration::from_secs(5)).await,
        "the run was aborted"
    );
    let aborts = gw.aborts();
    assert_eq!(aborts.len(), 1);
    assert_eq!(aborts[0]["method"], "chat.abort");
    assert_eq!(aborts[0]["params"]["runId"], run_id.as_str());
    assert_eq!(aborts[0]["params"]["sessionKey"], "agent:main:main");
}

#[tokio::test(flavor = "multi_thread")]
async fn items_without_text_add_nothing_so_a_timeout_reads_as_on_the_cli_path() {
    let gw = FakeGateway::start(Config::default()).await;
    let message = "[[empty-items:8]] [[delay:30]] failing model";
    let run = call(gateway_call(&gw, &["--timeout", "1", "-m", message])).await;
    let sentence = "[clawbot_router] The remote clawBot timed out (not finished after 1 seconds); this result was aborted.";
    assert_eq!(
        run.content(),
        sentence,
        "no empty lines before the sentence"
    );
    assert_eq!(run.code, Some(124));
    // The CLI path, for the same silent run, says exactly the same.
    let mut cli = router();
    // openclaw agent prints nothing while it waits.
    cli.env("OPENCLAW_BIN", "sh -c 'exec sleep 30'");
    cli.args([
        "--timeout",
        "1",
        "--lang",
        "en",
        "--exit-code",
        "-m",
        message,
    ]);
    let cli = call(cli).await;
    assert_eq!(cli.content(), run.content());
    assert_eq!(cli.code, run.code);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signal_aborts_the_run_and_still_prints_the_json() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut cmd = gateway_call(&gw, &["-m", "[[delay:30]] slow"]);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let waiting = tokio::task::spawn_blocking(move || common::wait(child));
    gw.wait_operator_hellos(1, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let run = waiting.await.unwrap();
    assert!(
        run.content().ends_with(
            "[clawbot_router] Interrupted (SIGTERM): the remote clawBot was stopped and this result was aborted."
        ),
        "{}",
        run.content()
    );
    assert_eq!(run.code, Some(143));
    assert_eq!(gw.aborts().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_link_dropped_mid_turn_is_followed_to_the_answer_without_a_second_run() {
    let gw = FakeGateway::start(Config::default()).await;
    let run = call(gateway_call(
        &gw,
        &["-m", "[[drop]] [[delay:1]] keep going"],
    ))
    .await;
    assert_eq!(run.content(), "ECHO: [[drop]] [[delay:1]] keep going\n");
    assert_eq!(run.code, Some(0));
    let requests = gw.agent_requests();
    assert!(requests.len() >= 2, "the answer is fetched by resending");
    let keys: Vec<&Value> = requests.iter().map(|r| &r["idempotencyKey"]).collect();
    assert!(
        keys.iter().all(|k| *k == keys[0]),
        "one run, one key: {keys:?}"
    );
    assert!(gw.operator_connects().len() >= 2, "reconnected");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rewritten_reply_is_taken_from_the_final_answer() {
    let gw = FakeGateway::start(Config::default()).await;
    let run = call(gateway_call(&gw, &["-m", "[[rewrite]] tidy"])).await;
    assert_eq!(run.content(), "ECHO: [[rewrite]] tidy\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_gateway_is_a_clear_error_under_via_gateway() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("ws://127.0.0.1:{port}");
    let mut cmd = router();
    via(&url, "gateway", &mut cmd);
    cmd.args(["-m", "hi"]);
    let run = call(cmd).await;
    let content = run.content();
    assert!(
        content.starts_with(&format!(
            "[clawbot_router] Could not reach the OpenClaw gateway at {url} ("
        )) && content.ends_with("; the remote agent was not called."),
        "{content}"
    );
    // What `openclaw agent` exits with for an unreachable gateway.
    assert_eq!(run.code, Some(1));
    assert_eq!(run.meta()["via"], "gateway");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_token_is_reported_with_the_gateways_reason() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut cmd = router();
    cmd.args([
        "--via",
        "gateway",
        "--gateway",
        &gw.url(),
        "--token",
        "wrong",
    ])
    .args(["--lang", "en", "-m", "hi", "--exit-code"]);
    let run = call(cmd).await;
    let url = gw.url();
    assert_eq!(
        run.content(),
        format!(
            "[clawbot_router] The OpenClaw gateway at {url} refused the connection (AUTH_TOKEN_MISMATCH: unauthorized: gateway token mismatch (use this gateway's gateway.auth.token or pair the device); the gateway does not accept this token: check --token / OPENCLAW_GATEWAY_TOKEN against the gateway's gateway.auth.token); the remote agent was not called."
        )
    );
    // A gateway that refuses us is a failure of the call (as `openclaw
    // agent` exits 1 for it), not "could not start" (127).
    assert_eq!(run.code, Some(1));
    assert!(gw.agent_requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_token_is_named_with_the_flag_and_the_variable_in_both_languages() {
    let gw = FakeGateway::start(Config::default()).await;
    let url = gw.url();
    for (lang, expected) in [
        (
            "en",
            format!(
                "[clawbot_router] The OpenClaw gateway at {url} refused the connection (DEVICE_IDENTITY_REQUIRED: device identity required; no gateway token was given: pass the gateway's gateway.auth.token with --token or OPENCLAW_GATEWAY_TOKEN); the remote agent was not called."
            ),
        ),
        (
            "zh",
            format!(
                "[clawbot_router] OpenClaw 网关 {url} 拒绝了连接（网关原文：“DEVICE_IDENTITY_REQUIRED: device identity required”；没有提供网关令牌：请用 --token 或环境变量 OPENCLAW_GATEWAY_TOKEN 给出网关的 gateway.auth.token），未调用远程 Agent。"
            ),
        ),
    ] {
        let mut cmd = router();
        cmd.env_remove("OPENCLAW_GATEWAY_TOKEN")
            .args(["--via", "gateway", "--gateway", &url, "--lang", lang])
            .args(["-m", "hi", "--exit-code", "--meta"]);
        let run = call(cmd).await;
        assert_eq!(run.content(), expected);
        assert_eq!(run.code, Some(1));
        assert_eq!(run.meta()["via"], "gateway");
    }
    assert!(gw.agent_requests().is_empty());
}

/// `--via auto` with the fake openclaw as the CLI, recording its runs.
fn auto_call(record: &std::path::Path, url: &str, token: &str, args: &[&str]) -> Command {
    let mut cmd = router_with("reply", &["--record", record.to_str().unwrap()]);
    cmd.args(["--via", "auto", "--gateway", url, "--token", token])
        .args(["--lang", "en", "--meta"])
        .args(args);
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_uses_the_gateway_when_it_answers() {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = common::tempdir();
    let record = dir.path().join("record");
    let run = call(auto_call(&record, &gw.url(), TOKEN, &["-m", "hi"])).await;
    assert_eq!(run.content(), "ECHO: hi\n");
    assert_eq!(run.meta()["via"], "gateway");
    assert!(common::records(&record).is_empty(), "the CLI never ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_falls_back_to_the_cli_when_nothing_reached_the_gateway() {
    // Nobody listening.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = common::tempdir();
    let record = dir.path().join("record");
    let url = format!("ws://127.0.0.1:{port}");
    let run = call(auto_call(&record, &url, TOKEN, &["-m", "hi"])).await;
    assert_eq!(run.meta()["via"], "cli");
    assert_eq!(run.content(), "ECHO: hi\n");
    assert_eq!(common::records(&record).len(), 1);
    // A gateway that refuses our credentials.
    let gw = FakeGateway::start(Config::default()).await;
    let run = call(auto_call(&record, &gw.url(), "wrong", &["-m", "hi"])).await;
    assert_eq!(run.meta()["via"], "cli");
    assert_eq!(common::records(&record).len(), 2);
    assert!(gw.agent_requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_without_openclaw_and_without_a_gateway_names_both_reasons() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("ws://127.0.0.1:{port}");
    let mut cmd = router();
    cmd.env("OPENCLAW_BIN", "/nonexistent/openclaw")
        .args(["--via", "auto", "--gateway", &url, "--lang", "en"])
        .args(["-m", "hi", "--exit-code"]);
    let run = call(cmd).await;
    let content = run.content();
    let (cli, gateway) = content.split_once('\n').expect("two sentences");
    assert!(
        cli.starts_with("[clawbot_router] Could not start the remote agent")
            && cli.contains("/nonexistent/openclaw"),
        "{content}"
    );
    assert!(
        gateway.starts_with(&format!(
            "[clawbot_router] Could not reach the OpenClaw gateway at {url} ("
        )),
        "{content}"
    );
    assert_eq!(run.code, Some(127));
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_never_runs_a_turn_twice() {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = common::tempdir();
    let record = dir.path().join("record");
    // Refused for the message's sake: the CLI would fail the same way.
    let run = call(auto_call(
        &record,
        &gw.url(),
        TOKEN,
        &["-a", "nosuchagent", "-m", "hi"],
    ))
    .await;
    assert_eq!(run.meta()["via"], "gateway");
    assert!(run.content().contains("unknown agent id"));
    // Accepted, then timed out: aborted, not retried through the CLI.
    let run = call(auto_call(
        &record,
        &gw.url(),
        TOKEN,
        &["--timeout", "1", "-m", "[[delay:30]] slow"],
    ))
    .await;
    assert_eq!(run.meta()["via"], "gateway");
    assert_eq!(gw.aborts().len(), 1);
    assert!(common::records(&record).is_empty(), "the CLI never ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn structured_results_come_from_the_gateways_answer() {
    let gw = FakeGateway::start(Config::default()).await;
    let run = call(gateway_call(
        &gw,
        &["--format", "structured", "-m", "clean me"],
    ))
    .await;
    assert_eq!(run.content(), "ECHO: clean me", "the answer alone");
    let json = run.json();
    assert_eq!(json["details"]["status"], "ok");
    assert_eq!(json["details"]["runId"], json["meta"]["runId"]);
    assert_eq!(json["details"]["payloads"][0]["text"], "ECHO: clean me");
    let run = call(gateway_call(
        &gw,
        &["--format", "structured", "-a", "nosuchagent", "-m", "x"],
    ))
    .await;
    assert_eq!(run.json()["details"]["status"], "error");
    assert_eq!(run.json()["details"]["error"]["type"], "INVALID_REQUEST");
    let run = call(gateway_call(
        &gw,
        &[
            "--format",
            "structured",
            "--timeout",
            "1",
            "-m",
            "[[delay:30]] slow",
        ],
    ))
    .await;
    assert_eq!(run.json()["details"]["status"], "timeout");
    assert_eq!(run.code, Some(124));
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_terminal_the_spinner_shows_the_streamed_reply() {
    let gw = FakeGateway::start(Config::default()).await;
    let dir = common::tempdir();
    let out = dir.path().join("out.json");
    let inner = format!(
        "{} --via gateway --gateway {} --token {} -m '[[delay:1.2]] streamed words' > {}",
        shell_words::quote(common::ROUTER),
        gw.url(),
        TOKEN,
        shell_words::quote(out.to_str().unwrap())
    );
    // `script` gives the router a terminal on stderr.
    let mut cmd = Command::new("script");
    cmd.args(["-qefc", &inner, "/dev/null"]);
    let run = call(cmd).await;
    assert!(
        run.stdout.contains("\u{2026}ECHO:"),
        "the spinner line shows the reply's first words: {:?}",
        run.stdout
    );
    let line = std::fs::read_to_string(out).unwrap();
    assert_eq!(
        line,
        common::expected_line("ECHO: [[delay:1.2]] streamed words\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_link_dropped_before_the_acceptance_finds_the_run_by_its_key() {
    let gw = FakeGateway::start(Config::default()).await;
    let run = call(gateway_call(
        &gw,
        &["-m", "[[drop-early]] [[delay:1]] who took it"],
    ))
    .await;
    assert_eq!(
        run.content(),
        "ECHO: [[drop-early]] [[delay:1]] who took it\n"
    );
    assert_eq!(run.code, Some(0));
    let requests = gw.agent_requests();
    let key = &requests[0]["idempotencyKey"];
    assert!(requests.len() >= 2 && requests.iter().all(|r| &r["idempotencyKey"] == key));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_after_a_reconnect_still_aborts_the_run() {
    let gw = FakeGateway::start(Config::default()).await;
    let run = call(gateway_call(
        &gw,
        &["--timeout", "2", "-m", "[[drop]] [[delay:30]] long"],
    ))
    .await;
    assert_eq!(run.code, Some(124));
    assert!(
        !run.content().contains("did not confirm"),
        "the resuming connection (operator.admin) may abort: {}",
        run.content()
    );
    let run_id = run.meta()["runId"].as_str().unwrap().to_owned();
    assert!(gw.wait_run_over(&run_id, Duration::from_secs(5)).await);
    let scopes: Vec<Value> = gw
        .operator_connects()
        .iter()
        .map(|c| c["scopes"].clone())
        .collect();
    assert_eq!(scopes[0], serde_json::json!(["operator.write"]));
    assert_eq!(scopes[1], serde_json::json!(["operator.admin"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wss_gateway_pinned_by_fingerprint_answers_and_a_wrong_pin_sends_nothing() {
    let cert = common::gateway::TestCert::self_signed();
    let gw = FakeGateway::start(Config {
        tls: Some(cert.clone()),
        ..Config::default()
    })
    .await;
    let mut cmd = gateway_call(&gw, &["-m", "over tls"]);
    cmd.env("OPENCLAW_GATEWAY_TLS_FINGERPRINT", cert.fingerprint());
    let run = call(cmd).await;
    assert_eq!(run.content(), "ECHO: over tls\n", "{}", run.stdout);
    let wrong = "00".repeat(32);
    let run = call(gateway_call(&gw, &["-m", "x", "--tls-fingerprint", &wrong])).await;
    let content = run.content();
    assert!(
        content.starts_with(&format!(
            "[clawbot_router] Could not reach the OpenClaw gateway at {} (TLS: 127.0.0.1:",
            gw.url()
        )) && content.contains(&format!(
            "presented a certificate with SHA-256 fingerprint {}",
            cert.fingerprint()
        )),
        "{content}"
    );
    assert_eq!(run.code, Some(1));
    assert_eq!(
        gw.operator_connects().len(),
        1,
        "only the pinned call sent frames"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_to_a_tls_gateway_answers_use_wss() {
    let gw = FakeGateway::start(Config {
        tls: Some(common::gateway::TestCert::self_signed()),
        ..Config::default()
    })
    .await;
    let plain = gw.url().replace("wss://", "ws://");
    let mut cmd = router();
    via(&plain, "gateway", &mut cmd);
    cmd.args(["-m", "hi"]);
    let run = call(cmd).await;
    assert_eq!(
        run.content(),
        format!(
            "[clawbot_router] Could not reach the OpenClaw gateway at {plain} (the gateway at {plain} speaks TLS: use {}); the remote agent was not called.",
            gw.url()
        )
    );
    assert_eq!(run.code, Some(1));
    // In Chinese: a setting to change (it did connect: not "before connecting").
    let mut cmd = router();
    cmd.args(["--via", "gateway", "--gateway", &plain, "--token", TOKEN])
        .args(["--lang", "zh", "--exit-code", "-m", "hi"]);
    let run = call(cmd).await;
    assert_eq!(
        run.content(),
        format!(
            "[clawbot_router] 无法连接 OpenClaw 网关 {plain}（已拒绝连接，需更改设置（详情：“the gateway at {plain} speaks TLS: use {}”）），未调用远程 Agent。",
            gw.url()
        )
    );
    assert!(gw.operator_connects().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn wss_to_a_plaintext_gateway_answers_use_ws() {
    let gw = FakeGateway::start(Config::default()).await;
    let tls = gw.url().replace("ws://", "wss://");
    let mut cmd = router();
    via(&tls, "gateway", &mut cmd);
    cmd.args(["-m", "hi"]);
    let run = call(cmd).await;
    assert_eq!(
        run.content(),
        format!(
            "[clawbot_router] Could not reach the OpenClaw gateway at {tls} (the gateway at {tls} does not speak TLS: use {}); the remote agent was not called.",
            gw.url()
        )
    );
    assert_eq!(run.code, Some(1));
    assert!(gw.operator_connects().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn plaintext_to_a_public_host_is_refused_with_the_flag_to_change() {
    let mut cmd = router();
    via("ws://gateway.example.invalid:18789", "gateway", &mut cmd);
    cmd.args(["-m", "hi"]);
    let run = call(cmd).await;
    assert!(
        run.content()
            .contains("refusing plaintext ws:// to gateway.example.invalid")
            && run.content().contains("use wss://"),
        "{}",
        run.content()
    );
    assert_eq!(run.code, Some(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_operator_pairs_its_device_and_reuses_the_token_it_is_issued() {
    let gw = FakeGateway::start(Config {
        manual_pairing: true,
        ..Config::default()
    })
    .await;
    let state = tempfile::tempdir().unwrap();
    let remote_call = |args: &[&str], token: bool| {
        let mut cmd = router();
        cmd.args([
            "--via",
            "gateway",
            "--gateway",
            &gw.url(),
            "--lang",
            "en",
            "--exit-code",
        ])
        .args(args)
        // What a gateway away from loopback gets (loopback is all a test has).
        .env("CLAWBOT_ROUTER_OPERATOR_DEVICE", "always")
        .env("CLAWBOT_ROUTER_STATE_DIR", state.path());
        if token {
            cmd.args(["--token", TOKEN]);
        }
        cmd
    };
    let first = call(remote_call(&["-m", "hello"], true)).await;
    let connect = gw.operator_connects()[0].clone();
    let device = connect["device"]["id"]
        .as_str()
        .expect("a signed device identity")
        .to_owned();
    assert_eq!(connect["scopes"], serde_json::json!(["operator.write"]));
    let request = gw.pair_request(&device).expect("a pairing request");
    assert_eq!(
        first.content(),
        format!(
            "[clawbot_router] The OpenClaw gateway at {} refused the connection (PAIRING_REQUIRED: pairing required: device is not approved yet; this device awaits the gateway operator's approval: run openclaw devices approve {request} on the gateway, then try again); the remote agent was not called.",
            gw.url()
        )
    );
    assert_eq!(first.code, Some(1));
    gw.approve_device(&device);
    let second = call(remote_call(&["-m", "hello"], true)).await;
    assert_eq!(second.content(), "ECHO: hello\n");
    let tokens = std::fs::read_to_string(state.path().join("operator/device-tokens.json")).unwrap();
    let issued = gw.device_token(&device).unwrap();
    assert!(tokens.contains(&issued), "{tokens}");
    // Without the shared token: the device token it was issued.
    let third = call(remote_call(&["-m", "again"], false)).await;
    assert_eq!(third.content(), "ECHO: again\n", "{}", third.stdout);
    let last = gw.operator_connects().last().unwrap().clone();
    assert_eq!(
        last["auth"]["deviceToken"],
        issued.as_str(),
        "as OpenClaw's CLI sends it"
    );
    assert!(last["auth"].get("token").is_none());
    // Revoked on the gateway: forgotten here, and the connect tried again
    // without it (the gateway then wants a token or a pairing).
    gw.revoke_device_tokens();
    let fourth = call(remote_call(&["-m", "revoked"], false)).await;
    assert!(
        fourth.content().contains("refused the connection"),
        "{}",
        fourth.stdout
    );
    let tokens = std::fs::read_to_string(state.path().join("operator/device-tokens.json")).unwrap();
    assert!(
        !tokens.contains(&issued),
        "the dead token is forgotten: {tokens}"
    );
}
