//! The router end to end: the real binary against the fake openclaw, one
//! test per row of issue 2's behaviour list (seed 002 §3).

#![cfg(unix)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const TIMEOUT_LINE_1S: &str =
    "[clawbot_router] 远程 clawBot 处理超时（超过 1 秒未完成），本次结果已中止。";

// ---- 1. Validation (§3.1) -------------------------------------------------

#[test]
fn missing_message_is_refused_and_openclaw_is_not_started() {
    let dir = tempdir();
    let record = dir.path().join("record.jsonl");
    let run =
        run(router_with("reply", &["--record", record.to_str().unwrap()]).args(["-a", "ops"]));
    assert_eq!(
        run.stdout,
        expected_line("[clawbot_router] 没有任务描述：参数 message 不能为空，未调用 OpenClaw。")
    );
    assert!(records(&record).is_empty(), "openclaw was started");
}

#[test]
fn blank_message_is_refused_and_openclaw_is_not_started() {
    let dir = tempdir();
    let record = dir.path().join("record.jsonl");
    let run =
        run(router_with("reply", &["--record", record.to_str().unwrap()]).args(["-m", " \n\t "]));
    assert!(run.content().contains("没有任务描述"));
    assert!(records(&record).is_empty(), "openclaw was started");
}

#[test]
fn missing_message_in_english() {
    let run = run(router_with("reply", &[]).args(["--lang", "en", "--args-json", "{}"]));
    assert_eq!(
        run.stdout,
        expected_line(
            "[clawbot_router] No task description: the message argument must not be empty; OpenClaw was not called."
        )
    );
}

#[test]
fn args_json_that_is_not_an_object_is_refused() {
    let run = run(router_with("reply", &[]).args(["--args-json", r#"["hi"]"#]));
    assert_eq!(
        run.content(),
        "[clawbot_router] 参数无效：参数必须是 JSON 对象，收到的是数组。未调用 OpenClaw。"
    );
}

#[test]
fn args_json_with_a_non_string_message_names_the_field() {
    let run =
        run(router_with("reply", &[]).args(["--lang", "en", "--args-json", r#"{"message":42}"#]));
    assert_eq!(
        run.content(),
        "[clawbot_router] Invalid arguments: field message must be a string, got a number. OpenClaw was not called."
    );
}

#[test]
fn args_json_that_does_not_parse_is_refused() {
    let run =
        run(router_with("reply", &[]).args(["--lang", "en", "--args-json", r#"{"message": "#]));
    let content = run.content();
    assert!(
        content
            .starts_with("[clawbot_router] Invalid arguments: the arguments are not valid JSON ("),
        "{content}"
    );
}

#[test]
fn args_json_from_stdin() {
    let run = run_with_stdin(
        router_with("echo", &[]).args(["--args-json", "-"]),
        br#"{"agent":"ops","message":"from stdin \u263a"}"#,
    );
    assert_eq!(run.content(), "from stdin ☺");
}

#[test]
fn blank_agent_counts_as_absent() {
    let dir = tempdir();
    let record = dir.path().join("record.jsonl");
    let run = run(
        router_with("reply", &["--record", record.to_str().unwrap()])
            .args(["--args-json", r#"{"agent":"   ","message":"hi"}"#]),
    );
    assert_eq!(run.content(), "ECHO: hi\n");
    assert_eq!(
        argv(&records(&record)[0]),
        ["agent", "--agent", "main", "--message", "hi"]
    );
}

#[test]
fn bad_flags_still_answer_with_the_json_object() {
    let run = run(router().args(["--timeout", "soon", "-m", "hi", "--exit-code"]));
    assert_eq!(run.code, Some(2));
    let content = run.content();
    assert!(
        content.starts_with("[clawbot_router] 参数无效：--timeout 的值无效："),
        "{content}"
    );
    assert!(content.contains("--timeout"), "{content}");
}

#[test]
fn negative_numbers_are_refused_as_values_in_the_callers_language() {
    let out = run(router().args(["--grace", "-1", "-m", "hi", "--exit-code"]));
    assert_eq!(out.code, Some(2));
    assert_eq!(
        out.content(),
        "[clawbot_router] 参数无效：--grace 的值无效：“-1”必须不小于 0 且不超过 300 秒。未调用 OpenClaw。"
    );
    let out = run(router().args(["--timeout", "-5", "-m", "hi", "--lang", "en"]));
    assert_eq!(
        out.content(),
        "[clawbot_router] Invalid arguments: invalid value for --timeout: `-5` must be above 0 and at most 604800 seconds. OpenClaw was not called."
    );
    let out = run(router().args(["--max-output", "-1", "-m", "hi", "--lang", "en"]));
    assert!(
        out.content()
            .contains("invalid value for --max-output: `-1` is not a byte count"),
        "{}",
        out.content()
    );
}

#[test]
fn clap_s_own_english_is_quoted_as_such_in_chinese() {
    let out = run(router().args(["--bogus", "-m", "hi"]));
    assert_eq!(
        out.content(),
        "[clawbot_router] 参数无效：命令行参数有误（命令行解析器原文：“unexpected argument '--bogus' found”）。未调用 OpenClaw。"
    );
    let out = run(router().args(["--args-json", r#"{"message": 5}"#]));
    assert_eq!(
        out.content(),
        "[clawbot_router] 参数无效：字段 message 必须是字符串，收到的是数字。未调用 OpenClaw。"
    );
}

/// A subcommand's bad flag is a usage error, as for any command-line tool:
/// clap's message on stderr, nothing on stdout, status 2 (only the router
/// call itself answers with its JSON).
fn assert_usage_error(args: &[&str]) {
    let out = run(router().args(args).arg("--bogus-flag"));
    assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
    assert_eq!(out.stdout, "", "{args:?}");
    assert!(
        out.stderr
            .contains("error: unexpected argument '--bogus-flag' found"),
        "{args:?}: {}",
        out.stderr
    );
}

#[test]
fn node_usage_error() {
    assert_usage_error(&["node"]);
}

#[test]
fn node_install_usage_error() {
    assert_usage_error(&["node", "install"]);
}

#[test]
fn node_status_usage_error() {
    assert_usage_error(&["node", "status"]);
}

#[test]
fn mcp_usage_error() {
    assert_usage_error(&["mcp"]);
}

#[test]
fn bridge_usage_error() {
    assert_usage_error(&["bridge"]);
}

#[test]
fn bridge_send_usage_error() {
    assert_usage_error(&["bridge", "send", "--session", "s", "hi"]);
}

#[test]
fn chat_usage_error() {
    assert_usage_error(&["chat"]);
}

#[test]
fn poll_usage_error() {
    assert_usage_error(&["poll", "--api", "http://127.0.0.1:1"]);
}

#[test]
fn schema_usage_error() {
    assert_usage_error(&["schema"]);
}

#[test]
fn prompt_usage_error() {
    assert_usage_error(&["prompt"]);
}

/// A first word that is neither an option nor a subcommand is no router
/// call either (the small executable hands it over as such).
#[test]
fn an_unknown_first_word_is_a_usage_error() {
    let out = run(router().args(["summarise", "the", "logs"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.contains("unrecognized subcommand 'summarise'"),
        "{}",
        out.stderr
    );
}

/// A secret typed without its `=` (`--tokenVALUE`) is an unknown argument
/// that clap echoes whole: neither a subcommand's usage error (stderr, a
/// service's log) nor the router's JSON answer (read by the host LLM) may
/// carry it.
#[test]
fn a_secret_glued_to_its_flag_is_not_echoed() {
    let secret = "S3kretGlued9";
    for args in [
        vec!["node".to_owned(), format!("--token{secret}")],
        vec!["mcp".to_owned(), format!("--http-token{secret}")],
        vec!["chat".to_owned(), format!("--key{secret}")],
        vec!["-m".to_owned(), "hi".to_owned(), format!("--token{secret}")],
        vec![
            "-m".to_owned(),
            "hi".to_owned(),
            "--".to_owned(),
            format!("--token={secret}"),
        ],
    ] {
        let out = run(router().args(&args));
        assert!(
            !out.stdout.contains(secret) && !out.stderr.contains(secret),
            "{args:?}: {}{}",
            out.stdout,
            out.stderr
        );
        assert!(
            out.stdout.contains("<redacted>") || out.stderr.contains("<redacted>"),
            "{args:?}: {}{}",
            out.stdout,
            out.stderr
        );
    }
}

// ---- 2. The command (§3.3) ------------------------------------------------

fn recorded_argv(extra: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let dir = tempdir();
    let record = dir.path().join("record.jsonl");
    let mut cmd = router_with("reply", &["--record", record.to_str().unwrap()]);
    cmd.args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run = run(&mut cmd);
    assert!(run.content().starts_with("ECHO: "), "{}", run.stdout);
    let records = records(&record);
    assert_eq!(records.len(), 1);
    argv(&records[0])
}

#[test]
fn agent_route_passes_agent_and_message() {
    assert_eq!(
        recorded_argv(&["-a", "ops", "-m", "summarise logs"], &[]),
        ["agent", "--agent", "ops", "--message", "summarise logs"]
    );
}

#[test]
fn the_session_choice_reaches_openclaw_as_a_session_key() {
    // main: OpenClaw's default, nothing sent.
    assert_eq!(
        recorded_argv(&["-a", "ops", "-m", "hi"], &[]),
        ["agent", "--agent", "ops", "--message", "hi"]
    );
    // A key the host keeps, from the flag or the environment.
    assert_eq!(
        recorded_argv(&["-m", "hi", "--session", "support-42"], &[]),
        [
            "agent",
            "--agent",
            "main",
            "--session-key",
            "support-42",
            "--message",
            "hi"
        ]
    );
    assert_eq!(
        recorded_argv(&["-m", "hi"], &[("CLAWBOT_ROUTER_SESSION", "agent:main:x")]),
        [
            "agent",
            "--agent",
            "main",
            "--session-key",
            "agent:main:x",
            "--message",
            "hi"
        ]
    );
    // new: a key of its own for every call.
    let fresh = || recorded_argv(&["-m", "hi", "--session", "new"], &[])[4].clone();
    let (a, b) = (fresh(), fresh());
    assert!(a.starts_with("clawbot-") && a.len() == 40, "{a}");
    assert_ne!(a, b);
    // A key with a space is refused before openclaw starts.
    let refused =
        run(router_with("reply", &[]).args(["-m", "hi", "--session", "a b", "--exit-code"]));
    assert_eq!(refused.code, Some(2), "{}", refused.stdout);
    assert!(
        refused
            .content()
            .contains("--session 的值无效：会话键只能由字母、数字和 ._:@+- 组成"),
        "{}",
        refused.stdout
    );
    // Keys as OpenClaw keeps them (lower case); NEW is new, not a key.
    assert_eq!(
        recorded_argv(&["-m", "hi", "--session", "Support-42"], &[])[4],
        "support-42"
    );
    assert!(recorded_argv(&["-m", "hi", "--session", "NEW"], &[])[4].starts_with("clawbot-"));
    // A whole key names its agent: a call for another is refused at once.
    let other = run(router_with("reply", &[]).args([
        "-a",
        "ops",
        "-m",
        "hi",
        "--session",
        "agent:main:x",
        "--lang",
        "en",
    ]));
    assert_eq!(
        other.content(),
        "[clawbot_router] Invalid arguments: the session key names agent \"main\", but this call is for agent \"ops\". OpenClaw was not called."
    );
}

#[test]
fn a_session_key_for_another_agent_is_refused_in_the_documented_sentence() {
    let other = run(router_with("reply", &[]).args([
        "-a",
        "ops",
        "-m",
        "hi",
        "--session",
        "agent:main:x",
        "--exit-code",
    ]));
    assert_eq!(
        other.content(),
        "[clawbot_router] 参数无效：会话键属于 agent “main”，但本次调用的是 agent “ops”。未调用 OpenClaw。"
    );
    assert_eq!(other.code, Some(2));
}

#[test]
fn without_agent_the_default_destination_is_used() {
    assert_eq!(
        recorded_argv(&["-m", "hi", "--to", "+15555550123"], &[]),
        ["agent", "--to", "+15555550123", "--message", "hi"]
    );
    assert_eq!(
        recorded_argv(&["-m", "hi"], &[("CLAWBOT_ROUTER_DEFAULT_TO", "+1999")]),
        ["agent", "--to", "+1999", "--message", "hi"]
    );
    // Flags win over the environment.
    assert_eq!(
        recorded_argv(
            &["-m", "hi", "--to", "+1000"],
            &[("CLAWBOT_ROUTER_DEFAULT_TO", "+1999")]
        ),
        ["agent", "--to", "+1000", "--message", "hi"]
    );
}

#[test]
fn without_agent_or_destination_the_main_agent_is_used() {
    assert_eq!(
        recorded_argv(&["-m", "hi"], &[]),
        ["agent", "--agent", "main", "--message", "hi"]
    );
}

const HOSTILE: &[&str] = &[
    r#"say "hi" and 'bye'"#,
    "line one\nline two\r\nline three\n",
    "$(touch /tmp/clawbot_router_pwned) `id` ${HOME} $HOME",
    "-",
    "--",
    "--help",
    "-m --agent evil",
    "; rm -rf / ; echo",
    "emoji 🦀🔥 and 中文 and \u{200b}zero width",
    "trailing backslash \\",
    "  leading and trailing spaces  ",
    "%PATH% ^& | < > !",
];

#[test]
fn hostile_messages_reach_openclaw_byte_for_byte() {
    for message in HOSTILE {
        let by_flag = run(router_with("echo", &[]).args(["-m", message]));
        assert_eq!(&by_flag.content(), message);
        let by_json = run_args_json(message);
        assert_eq!(&by_json.content(), message);
    }
    assert!(!std::path::Path::new("/tmp/clawbot_router_pwned").exists());
}

fn run_args_json(message: &str) -> Run {
    let args = json!({ "message": message }).to_string();
    run(router_with("echo", &[]).args(["--args-json", &args]))
}

#[test]
fn a_message_over_the_argument_limit_goes_through_a_private_file() {
    let dir = tempdir();
    let record = dir.path().join("record.jsonl");
    let message: String = "长消息 long message with \"quotes\"\n".repeat(6000); // ~230 KB
    // Too long for the router's own argv as well: hosts pipe such calls in.
    let args = json!({ "message": message }).to_string();
    let run = run_with_stdin(
        router_with("echo", &["--record", record.to_str().unwrap()]).args(["--args-json", "-"]),
        args.as_bytes(),
    );
    assert_eq!(run.content(), message);
    let record = &records(&record)[0];
    let argv = argv(record);
    assert_eq!(&argv[..4], ["agent", "--agent", "main", "--message-file"]);
    assert_eq!(record["message"], Value::from(message));
    assert!(
        !std::path::Path::new(&argv[4]).exists(),
        "the message file was left behind"
    );
}

#[test]
fn a_message_with_nul_bytes_goes_through_a_file() {
    let run = run_args_json("before\0after");
    assert_eq!(run.content(), "before\0after");
}

#[test]
fn a_message_over_four_mib_is_refused_without_starting_openclaw() {
    let dir = tempdir();
    let record = dir.path().join("record.jsonl");
    let args = json!({ "message": "x".repeat(4 * 1024 * 1024 + 1) }).to_string();
    let run = run_with_stdin(
        router_with("echo", &["--record", record.to_str().unwrap()]).args([
            "--args-json",
            "-",
            "--exit-code",
        ]),
        args.as_bytes(),
    );
    assert_eq!(run.code, Some(2));
    assert_eq!(
        run.content(),
        "[clawbot_router] 参数无效：message 长度为 4194305 字节，超过 OpenClaw 的上限 4194304 字节（4 MiB）。未调用 OpenClaw。"
    );
    assert!(records(&record).is_empty());
}

// ---- 3. WSL (§1) ----------------------------------------------------------

#[test]
fn fake_wsl_without_exec_reparses_like_the_real_one() {
    // The hazard the router avoids: without --exec, wsl.exe hands the joined
    // arguments to a shell.
    let (dir, _log) = fake_wsl_dir();
    // A script written a moment ago can be "busy" while another test's
    // fork still holds its write descriptor (ETXTBSY): try again.
    let out = (0..50)
        .find_map(|_| {
            match std::process::Command::new(dir.path().join("wsl.exe"))
                .args(["echo", "$((6*7))"])
                .output()
            {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    None
                }
                other => Some(other.unwrap()),
            }
        })
        .expect("the script stayed busy");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "42\n");
}

#[test]
fn wsl_launch_keeps_hostile_messages_intact() {
    let (dir, log) = fake_wsl_dir();
    for message in HOSTILE {
        let run = run(router()
            .env("PATH", path_with(dir.path()))
            .env(
                "OPENCLAW_BIN",
                shell_words::join([FAKE, "--scenario", "echo"]),
            )
            .args(["--wsl", "-m", message]));
        assert_eq!(&run.content(), message);
    }
    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.starts_with("---\n--exec\n"), "{log}");
}

#[test]
fn wsl_login_shell_path_keeps_hostile_messages_intact() {
    // openclaw named without a path is found by a login shell inside WSL,
    // through the PATH the user's profile sets up (as nvm or an npm prefix
    // does); the shell must still not parse the message.
    let (dir, log) = fake_wsl_dir();
    let home = tempdir();
    let bin = home.path().join("npm-global/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(FAKE, bin.join("openclaw")).unwrap();
    std::fs::write(
        home.path().join(".profile"),
        format!(
            "export PATH={}:\"$PATH\"\n",
            shell_words::quote(bin.to_str().unwrap())
        ),
    )
    .unwrap();
    for message in HOSTILE {
        let run = run(router()
            .env("PATH", path_with(dir.path()))
            .env("HOME", home.path())
            .env("FAKE_OPENCLAW_SCENARIO", "echo")
            .args(["--wsl-distro", "Ubuntu-24.04", "-m", message]));
        assert_eq!(&run.content(), message);
    }
    let log = std::fs::read_to_string(log).unwrap();
    let first: Vec<&str> = log.split("---\n").nth(1).unwrap().lines().collect();
    assert_eq!(
        &first[..8],
        [
            "--distribution",
            "Ubuntu-24.04",
            "--exec",
            "bash",
            "-lc",
            "exec \"$@\"",
            "clawbot_router",
            "openclaw"
        ]
    );
}

#[test]
fn wsl_moves_long_messages_to_a_file() {
    let (dir, _log) = fake_wsl_dir();
    let message = "w".repeat(10_000);
    let run = run(router()
        .env("PATH", path_with(dir.path()))
        .env(
            "OPENCLAW_BIN",
            shell_words::join([FAKE, "--scenario", "echo"]),
        )
        .args(["--wsl", "-m", &message]));
    assert_eq!(run.content(), message);
}

#[test]
fn missing_wsl_is_a_spawn_failure() {
    let dir = tempdir();
    let run = run(router().env("PATH", dir.path()).args([
        "--wsl",
        "-m",
        "hi",
        "--lang",
        "en",
        "--exit-code",
        "--meta",
    ]));
    assert_eq!(run.code, Some(127));
    assert_eq!(
        run.content(),
        "[clawbot_router] Could not start the remote agent (the openclaw CLI failed to start: wsl.exe not found; WSL does not seem to be installed)."
    );
    assert_eq!(run.meta()["via"], "cli", "meta says which path failed");
}

// ---- 4. Output (§3.4) -----------------------------------------------------

#[test]
fn stdout_and_stderr_keep_their_write_order() {
    for _ in 0..5 {
        let run = run(router_with("interleave", &["--lines", "400"]).args(["-m", "hi"]));
        assert_eq!(run.content(), interleaved(400));
    }
}

#[test]
fn stdout_and_stderr_keep_their_write_order_with_pauses() {
    let run =
        run(router_with("interleave", &["--lines", "10", "--pause-ms", "20"]).args(["-m", "hi"]));
    assert_eq!(run.content(), interleaved(10));
}

#[test]
fn invalid_utf8_is_replaced_not_fatal() {
    let run = run(router_with("invalid-utf8", &[]).args(["-m", "hi"]));
    assert_eq!(
        run.content(),
        "before \u{fffd}\u{fffd} after \u{fffd}\nstderr \u{fffd}( end\n"
    );
}

#[test]
fn long_output_is_cut_in_the_middle_with_one_marker_line() {
    let total: u64 = 1024 * 1024;
    let run = run(router_with("flood", &["--bytes", "1M"]).args([
        "-m",
        "hi",
        "--max-output",
        "1K",
        "--meta",
    ]));
    assert_cut_in_the_middle(&run.content(), total, 1024);
    assert_eq!(run.meta()["truncated"], Value::Bool(true));
}

#[test]
fn max_output_below_one_kib_is_refused_naming_the_flag() {
    let out = run(router().args([
        "--max-output",
        "0",
        "-m",
        "hi",
        "--lang",
        "en",
        "--exit-code",
    ]));
    assert_eq!(
        out.content(),
        "[clawbot_router] Invalid arguments: invalid value for --max-output: `0` is less than 1K, the least output kept. OpenClaw was not called."
    );
    assert_eq!(out.code, Some(2));
    let out = run(router().args(["--max-output", "1023", "-m", "hi"]));
    assert!(out.content().contains("--max-output"), "{}", out.content());
}

#[test]
fn output_at_the_limit_is_not_cut() {
    let run = run(router_with("flood", &["--bytes", "4096"]).args([
        "-m",
        "hi",
        "--max-output",
        "4K",
        "--meta",
    ]));
    assert_eq!(run.content().len(), 4096);
    assert_eq!(run.meta()["truncated"], Value::Bool(false));
}

// ---- 5. The result (§3.4) -------------------------------------------------

#[test]
fn result_is_exactly_one_json_object() {
    let run = run(router_with("reply", &[]).args(["-m", "hello gw"]));
    assert_eq!(run.stdout, expected_line("ECHO: hello gw\n"));
    assert_eq!(
        run.stderr, "",
        "nothing on stderr when it is not a terminal"
    );
    assert_eq!(run.code, Some(0));
}

#[test]
fn meta_reports_how_the_run_went() {
    let run = run(router_with("exit", &["--exit-code", "3"]).args(["-m", "hi", "--meta"]));
    let meta = run.meta();
    assert_eq!(meta["exitCode"], Value::from(3));
    assert_eq!(meta["signal"], Value::Null);
    assert_eq!(meta["timedOut"], Value::Bool(false));
    assert_eq!(meta["truncated"], Value::Bool(false));
    assert!(meta["durationMs"].as_u64().is_some());
    assert_eq!(run.content(), "fake-openclaw exiting with 3\n");
}

#[test]
fn exit_status_is_zero_unless_asked() {
    let run = run(router_with("exit", &["--exit-code", "3"]).args(["-m", "hi"]));
    assert_eq!(run.code, Some(0));
}

#[test]
fn exit_code_flag_tells_the_outcome() {
    let code = |cmd: &mut std::process::Command| run(cmd.arg("--exit-code")).code;
    assert_eq!(code(router_with("reply", &[]).args(["-m", "hi"])), Some(0));
    assert_eq!(
        code(router_with("exit", &["--exit-code", "3"]).args(["-m", "hi"])),
        Some(3)
    );
    assert_eq!(
        code(router_with("sleep", &["--sleep", "30"]).args([
            "-m",
            "hi",
            "--timeout",
            "0.3",
            "--grace",
            "0.2"
        ])),
        Some(124)
    );
    assert_eq!(
        code(
            router()
                .env("OPENCLAW_BIN", "/nonexistent/openclaw")
                .args(["-m", "hi"])
        ),
        Some(127)
    );
    assert_eq!(code(router_with("reply", &[]).args(["-m", ""])), Some(2));
}

#[test]
fn a_silent_failure_still_says_something() {
    let run = run(router()
        .env("OPENCLAW_BIN", "false")
        .args(["-m", "hi", "--lang", "en"]));
    assert_eq!(
        run.content(),
        "[clawbot_router] openclaw exited with code 1 without any output."
    );
}

// ---- 6. Timeout (§3.5.2) --------------------------------------------------

#[test]
fn timeout_appends_the_seed_line_after_what_was_captured() {
    let run = run(router_with("sleep", &["--sleep", "30"]).args([
        "-m",
        "hi",
        "--timeout",
        "1",
        "--meta",
    ]));
    assert_eq!(run.content(), format!("thinking...\n{TIMEOUT_LINE_1S}"));
    assert_eq!(run.meta()["timedOut"], Value::Bool(true));
    assert!(
        run.elapsed < Duration::from_secs(1 + 2 + 1),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn timeout_from_the_environment() {
    let run = run(router_with("sleep", &["--sleep", "30"])
        .env("CLAWBOT_ROUTER_TIMEOUT", "1")
        .args(["-m", "hi"]));
    assert!(run.content().ends_with(TIMEOUT_LINE_1S));
}

#[test]
fn a_child_ignoring_sigterm_is_killed_after_the_grace_period() {
    let dir = tempdir();
    let pid_file = dir.path().join("pids");
    let run = run(
        router_with("ignore-term", &["--pid-file", pid_file.to_str().unwrap()]).args([
            "-m",
            "hi",
            "--timeout",
            "1",
            "--grace",
            "1",
            "--meta",
        ]),
    );
    assert_eq!(
        run.content(),
        format!("ignoring SIGTERM\n{TIMEOUT_LINE_1S}")
    );
    assert_eq!(run.meta()["signal"], Value::from(9));
    assert!(run.elapsed >= Duration::from_secs(2), "{:?}", run.elapsed);
    assert!(
        run.elapsed < Duration::from_secs(1 + 1 + 1),
        "{:?}",
        run.elapsed
    );
    assert_all_gone(&pids(&pid_file));
}

#[test]
fn a_grandchild_holding_the_pipe_is_killed_with_the_tree() {
    let dir = tempdir();
    let pid_file = dir.path().join("pids");
    let run = run(
        router_with("grandchild", &["--pid-file", pid_file.to_str().unwrap()])
            .env("FAKE_OPENCLAW_HOLD_IGNORE_TERM", "1")
            .args(["-m", "hi", "--timeout", "1", "--grace", "0.5"]),
    );
    assert!(run.content().ends_with(TIMEOUT_LINE_1S), "{}", run.stdout);
    assert!(
        run.elapsed < Duration::from_millis(1000 + 500 + 1000),
        "{:?}",
        run.elapsed
    );
    let pids = pids(&pid_file);
    assert_eq!(pids.len(), 2);
    assert_all_gone(&pids);
}

/// openclaw replies and exits, but leaves a descendant holding the pipe:
/// the reply arrives promptly, the exit code is openclaw's, nothing remains.
fn exits_leaving(scenario: &str) {
    let dir = tempdir();
    let pid_file = dir.path().join("pids");
    let run = run(
        router_with(scenario, &["--pid-file", pid_file.to_str().unwrap()]).args([
            "-m",
            "hi",
            "--timeout",
            "30",
            "--grace",
            "0.5",
            "--meta",
        ]),
    );
    assert!(run.content().contains("ECHO: hi\n"), "{}", run.stdout);
    assert_eq!(run.meta()["exitCode"], Value::from(0));
    assert_eq!(run.meta()["timedOut"], Value::Bool(false));
    assert!(run.elapsed < Duration::from_secs(2), "{:?}", run.elapsed);
    let pids = pids(&pid_file);
    assert!(!pids.is_empty());
    assert_all_gone(&pids);
}

#[test]
fn a_descendant_left_in_the_group_after_openclaw_exits_is_stopped() {
    exits_leaving("orphan");
}

#[test]
fn a_setsid_daemon_holding_the_pipe_does_not_hold_the_router() {
    exits_leaving("daemon");
}

#[test]
fn a_true_daemon_with_no_pipe_and_no_environment_is_stopped_too() {
    exits_leaving("detached");
}

/// The router killed outright (SIGKILL, the OOM killer: nothing of ours
/// runs) still takes what it started with it: openclaw, a three-level tree
/// in its group, and a descendant that left the group with `setsid`.
#[test]
fn a_router_killed_outright_takes_its_whole_tree_with_it() {
    for (scenario, depth, n) in [("grandchild", "2", 3), ("escaped", "1", 2)] {
        let dir = tempdir();
        let pid_file = dir.path().join("pids");
        let router = router_with(scenario, &["--pid-file", pid_file.to_str().unwrap()])
            .env("FAKE_OPENCLAW_HOLD_DEPTH", depth)
            .env("FAKE_OPENCLAW_HOLD_IGNORE_TERM", "1")
            .args(["-m", "hi", "--timeout", "60"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut router = KillOnDrop(router);
        let tree = wait_for_pids(&pid_file, n);
        router.0.kill().unwrap();
        router.0.wait().unwrap();
        assert_gone_in_time(&tree, scenario);
    }
}

/// A router call holding a two-level tree (`grandchild`), to be killed
/// outright by a test: whatever of the tree a failing test leaves is
/// killed when this goes.
struct Held {
    router: KillOnDrop,
    /// The grandchild, then openclaw.
    tree: Vec<i32>,
    _dir: tempfile::TempDir,
}

impl Held {
    fn start() -> Self {
        let dir = tempdir();
        let pid_file = dir.path().join("pids");
        let router = router_with("grandchild", &["--pid-file", pid_file.to_str().unwrap()])
            .args(["-m", "hi", "--timeout", "60"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let router = KillOnDrop(router);
        let tree = wait_for_pids(&pid_file, 2);
        Held {
            router,
            tree,
            _dir: dir,
        }
    }

    fn leader(&self) -> i32 {
        self.tree[1]
    }

    /// The router's children other than openclaw and those in `but`: its
    /// sentinel (forked as openclaw starts: waited for).
    fn sentinels(&self, but: &[i32]) -> Vec<i32> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let found: Vec<i32> = children_of(self.router.0.id() as i32)
                .into_iter()
                .filter(|p| *p != self.leader() && !but.contains(p))
                .collect();
            if !found.is_empty() || std::time::Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill_router(&mut self) {
        self.router.0.kill().unwrap();
        self.router.0.wait().unwrap();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        for pid in &self.tree {
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
    }
}

/// The kernel's half of it: with the sentinel gone too (someone killed it
/// first), the leader still gets its parent-death signal.
#[test]
fn openclaw_dies_with_the_router_even_when_the_sentinel_was_killed_first() {
    let mut held = Held::start();
    let sentinel = held.sentinels(&[]);
    assert_eq!(
        sentinel.len(),
        1,
        "the router's one other child: {sentinel:?}"
    );
    unsafe {
        libc::kill(sentinel[0], libc::SIGKILL);
    }
    held.kill_router();
    assert_gone_in_time(&[held.leader()], "openclaw");
    // Its own child left its group's leader behind: nobody may be left to
    // stop it (unless a new sentinel came first): dropping `held` does.
}

/// A sentinel someone killed, or stopped, mid-call is replaced, and the
/// new one is given the running call's group: the whole tree still goes
/// with us.
#[test]
fn a_sentinel_killed_or_stopped_mid_call_is_replaced_and_still_covers_the_call() {
    for signal in [libc::SIGKILL, libc::SIGSTOP] {
        let mut held = Held::start();
        let first = held.sentinels(&[]);
        assert_eq!(first.len(), 1, "the sentinel: {first:?}");
        unsafe {
            libc::kill(first[0], signal);
        }
        let second = held.sentinels(&first);
        // A stopped one is ours to end, whatever follows.
        unsafe {
            libc::kill(first[0], libc::SIGKILL);
        }
        assert_eq!(
            second.len(),
            1,
            "a new sentinel after signal {signal}: {second:?}"
        );
        held.kill_router();
        assert_gone_in_time(&held.tree, "the tree");
    }
}

// ---- 7. Spawn failure (§3.5.1) --------------------------------------------

#[test]
fn openclaw_not_found() {
    let run = run(router()
        .env("OPENCLAW_BIN", "/nonexistent/openclaw")
        .args(["-m", "hi"]));
    assert_eq!(
        run.stdout,
        expected_line(
            "[clawbot_router] 无法启动远程 Agent（openclaw CLI 启动失败：找不到程序 /nonexistent/openclaw）。"
        )
    );
}

#[test]
fn openclaw_not_on_path() {
    let dir = tempdir();
    let run = run(router()
        .env("PATH", dir.path())
        .args(["-m", "hi", "--lang", "en"]));
    assert_eq!(
        run.content(),
        "[clawbot_router] Could not start the remote agent (the openclaw CLI failed to start: openclaw was not found on PATH (install it, or name it with --openclaw or OPENCLAW_BIN))."
    );
}

#[test]
fn openclaw_not_executable() {
    let dir = tempdir();
    let file = dir.path().join("openclaw");
    std::fs::write(&file, "#!/bin/sh\necho hi\n").unwrap();
    let run = run(router()
        .arg("--openclaw")
        .arg(&file)
        .args(["-m", "hi", "--lang", "en"]));
    assert_eq!(
        run.content(),
        format!(
            "[clawbot_router] Could not start the remote agent (the openclaw CLI failed to start: permission denied: {} is not executable).",
            file.display()
        )
    );
}

#[test]
fn unparsable_openclaw_bin_is_a_usage_error() {
    let run = run(router().env("OPENCLAW_BIN", "npx 'openclaw").args([
        "-m",
        "hi",
        "--lang",
        "en",
        "--exit-code",
    ]));
    assert_eq!(
        run.content(),
        "[clawbot_router] Invalid arguments: OPENCLAW_BIN / --openclaw cannot be split into words: missing closing quote. OpenClaw was not called."
    );
    assert_eq!(run.code, Some(2), "invalid input, not 127");
}

#[test]
fn an_unbalanced_quote_in_openclaw_is_a_usage_error() {
    let run = run(router().args(["--openclaw", "\"oops", "-m", "hi", "--exit-code"]));
    assert_eq!(
        run.content(),
        "[clawbot_router] 参数无效：OPENCLAW_BIN / --openclaw cannot be split into words: missing closing quote。未调用 OpenClaw。"
    );
    assert_eq!(run.code, Some(2), "invalid input, not 127");
}

#[test]
fn openclaw_flag_wins_over_the_environment() {
    let run = run(router_with("reply", &[])
        .env("OPENCLAW_BIN", "/nonexistent/openclaw")
        .arg("--openclaw")
        .arg(shell_words::join([FAKE, "--scenario", "echo"]))
        .args(["-m", "flag wins"]));
    assert_eq!(run.content(), "flag wins");
}

// ---- 8. OpenClaw's own errors (§3.5.3) ------------------------------------

#[test]
fn unknown_agent_error_arrives_verbatim_with_its_exit_code() {
    let run = run(router_with("reply", &[]).args(["-a", "nosuchagent", "-m", "hi", "--meta"]));
    assert_eq!(
        run.content(),
        "Unknown agent id \"nosuchagent\". Use \"openclaw agents list\" to see configured agents.\n"
    );
    assert_eq!(run.meta()["exitCode"], Value::from(1));
}

#[test]
fn gateway_errors_arrive_verbatim() {
    let down = run(router_with("gateway-down", &[]).args(["-m", "hi"]));
    assert_eq!(
        down.content(),
        "Gateway agent call connection closed; see openclaw logs.\nGateway not reachable at ws://127.0.0.1:18789 (ECONNREFUSED).\n"
    );
    let timeout = run(router_with("gateway-timeout", &[]).args(["-m", "hi"]));
    assert!(
        timeout
            .content()
            .starts_with("Request timed out before a response was generated.")
    );
}

// ---- 9. Interruption --------------------------------------------------------

fn interrupted_by(signal: i32, name: &str) {
    let dir = tempdir();
    let pid_file = dir.path().join("pids");
    let child = router_with("grandchild", &["--pid-file", pid_file.to_str().unwrap()])
        .args(["-m", "hi", "--exit-code", "--grace", "0.5"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let tree = wait_for_pids(&pid_file, 2);
    std::thread::sleep(Duration::from_millis(100));
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let run = wait(child);
    assert_eq!(run.code, Some(128 + signal));
    let content = run.content();
    // What the tree printed before the signal is kept (in either order: the
    // two processes race).
    assert!(content.contains("spawned grandchild"), "{content}");
    assert!(content.contains("holding pipe\n"), "{content}");
    assert!(
        content.ends_with(&format!(
            "[clawbot_router] 调用被中断（收到 {name}），远程 clawBot 已终止，本次结果已中止。"
        )),
        "{content}"
    );
    assert_all_gone(&tree);
}

#[test]
fn sigint_stops_the_tree_and_still_prints_the_result() {
    interrupted_by(libc::SIGINT, "SIGINT");
}

#[test]
fn sigterm_stops_the_tree_and_still_prints_the_result() {
    interrupted_by(libc::SIGTERM, "SIGTERM");
}

// ---- 10. Progress (§3.2) --------------------------------------------------

#[test]
fn spinner_shows_on_a_terminal_and_stdout_keeps_only_the_json() {
    let dir = tempdir();
    let out = dir.path().join("out.json");
    let inner = format!(
        "{} -m hi > {}",
        shell_words::quote(ROUTER),
        shell_words::quote(out.to_str().unwrap())
    );
    // `script` gives the router a terminal on stderr (and stdin).
    let run = run(std::process::Command::new("script")
        .env(
            "OPENCLAW_BIN",
            shell_words::join([FAKE, "--scenario", "sleep", "--sleep", "0.5"]),
        )
        .args(["-qefc", &inner, "/dev/null"]));
    assert!(
        run.stdout
            .contains("我正在通过 clawBot 处理复杂任务，可能需要几秒钟。"),
        "terminal showed: {:?}",
        run.stdout
    );
    assert_eq!(
        std::fs::read_to_string(out).unwrap(),
        expected_line("thinking...\nECHO: hi\n")
    );
}

// ---- 11, 12. Tool declaration and prompt (§2, §4) -------------------------

#[test]
fn tool_schema_files_match_the_binary() {
    for format in ["openai", "anthropic", "mcp"] {
        let run = run(router().args(["schema", "--format", format]));
        assert_eq!(run.code, Some(0));
        let path = format!("{}/tool-schemas/{format}.json", env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os("UPDATE_TOOL_SCHEMAS").is_some() {
            std::fs::write(&path, &run.stdout).unwrap();
        }
        let file = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            file, run.stdout,
            "{path} is stale: run `UPDATE_TOOL_SCHEMAS=1 cargo test --test router tool_schema`"
        );
    }
}

#[test]
fn tool_schemas_have_each_hosts_shape() {
    let schema = |format: &str| -> Value {
        serde_json::from_str(&run(router().args(["schema", "--format", format])).stdout).unwrap()
    };
    let openai = schema("openai");
    assert_eq!(openai["type"], "function");
    assert_eq!(openai["function"]["name"], "clawbot_router");
    let params = &openai["function"]["parameters"];
    assert_eq!(params["required"], json!(["message"]));
    assert_eq!(params["properties"]["agent"]["type"], "string");
    assert!(
        params["properties"]["message"]["description"]
            .as_str()
            .unwrap()
            .contains("要转交给 clawBot")
    );
    let anthropic = schema("anthropic");
    assert_eq!(&anthropic["input_schema"], params);
    let mcp = schema("mcp");
    assert_eq!(&mcp["inputSchema"], params);
    let description = mcp["description"].as_str().unwrap();
    assert!(description.contains("本工具只在远端环境工作，不会直接操作当前用户电脑。"));
    assert!(description.contains("never touches the user's computer"));
}

#[test]
fn prompt_prints_the_guidance_in_both_languages() {
    for (lang, file, announce) in [
        (
            "zh",
            "clawbot_router.zh.md",
            "我正在通过 clawBot 处理复杂任务，可能需要几秒钟。",
        ),
        (
            "en",
            "clawbot_router.en.md",
            "I'm handing this to clawBot for a complex task; it may take a few seconds.",
        ),
    ] {
        let run = run(router().args(["prompt", "--lang", lang]));
        let path = format!("{}/prompts/{file}", env!("CARGO_MANIFEST_DIR"));
        assert_eq!(run.stdout, std::fs::read_to_string(path).unwrap());
        assert!(
            run.stdout.contains(announce),
            "{lang} prompt lacks the announcement"
        );
    }
}

// ---- Found in review: the edges of the edges -------------------------------

#[test]
fn e2big_moves_the_message_to_a_file_and_retries() {
    // A small stack limit brings ARG_MAX (argv + environment together) down
    // to its 128 KiB floor; the message alone is under the per-argument
    // limit, the message and a 20 KB variable are not.
    let message = "y".repeat(120_000);
    let args = json!({ "message": message }).to_string();
    let script = format!(
        "ulimit -s 256; exec {} --args-json - --meta",
        shell_words::quote(ROUTER)
    );
    let cmd = router_with("echo", &[]);
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", &script])
        .env("BIG_VARIABLE", "z".repeat(20_000));
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    let run = run_with_stdin(&mut sh, args.as_bytes());
    assert_eq!(run.content(), message);
}

#[test]
fn stdin_that_never_closes_still_gets_an_answer() {
    let mut child = router_with("echo", &[])
        .args(["--args-json", "-", "--timeout", "1", "--lang", "en"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _keep_open = child.stdin.take();
    let run = wait(child);
    assert_eq!(
        run.content(),
        "[clawbot_router] Invalid arguments: the arguments did not arrive on stdin within 1 seconds. OpenClaw was not called."
    );
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
}

#[test]
fn sighup_stops_the_tree_and_still_prints_the_result() {
    interrupted_by(libc::SIGHUP, "SIGHUP");
}

#[test]
fn a_stopped_child_is_continued_so_it_can_honour_sigterm() {
    let script = "trap 'echo got TERM; exit 7' TERM; kill -STOP $$; sleep 30";
    let run = run(router()
        .env(
            "OPENCLAW_BIN",
            shell_words::join(["sh", "-c", script, "sh"]),
        )
        .args(["-m", "hi", "--timeout", "0.5", "--grace", "5", "--meta"]));
    let content = run.content();
    assert!(content.starts_with("got TERM\n"), "{content}");
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
}

#[test]
fn bad_flags_keep_meta_when_asked() {
    let run = run(router().args(["-m", "hi", "--bogus", "--meta"]));
    assert_eq!(run.meta()["exitCode"], Value::Null);
    assert_eq!(run.meta()["timedOut"], Value::Bool(false));
}
