//! The log's flags as people running a service use them (issue 24):
//! `--log-format json` writes one JSON object a line with its fields, and
//! `--quiet` keeps warnings and errors but not info lines. Driven through
//! the bridge, the quickest mode to start, stop and make complain; the
//! flags and the log are the same for node, chat, poll and mcp.
#![cfg(unix)]

mod common;

use std::io::Write;
use std::time::Duration;

use common::node::Node;
use serde_json::Value;

const TOKEN: &str = "logging-test-token-0123456789";
const WAIT: Duration = Duration::from_secs(10);

/// A bridge on `listen` with `flags` after the defaults.
fn bridge(listen: &str, flags: &[&str]) -> Node {
    let mut args = vec![
        "bridge",
        "--listen",
        listen,
        "--session",
        "s1",
        "--approval",
        "allow",
    ];
    args.extend(flags);
    Node::start_args_env(&args, &[("CLAWBOT_BRIDGE_TOKEN", TOKEN)])
}

/// Every line of `log`, read as JSON: a line that is not is a failure.
fn records(log: &str) -> Vec<Value> {
    log.lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not JSON: {line:?}"))
        })
        .collect()
}

/// A plain HTTP request where a WebSocket upgrade is expected: the bridge
/// refuses it and logs a warning.
fn refused_upgrade(port: u16) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .write_all(b"GET /bridge HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

#[tokio::test]
async fn json_lines_parse_and_carry_ts_level_who_and_msg() {
    let port = common::free_port();
    let mut node = bridge(&format!("127.0.0.1:{port}"), &["--log-format", "json"]);
    node.wait_stderr("listening on ws://", WAIT).await;
    refused_upgrade(port);
    node.wait_stderr("refused the upgrade", WAIT).await;
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(WAIT).await, Some(0));
    let records = records(&node.stderr());
    for record in &records {
        assert!(
            record["ts"].as_u64().unwrap() > 1_600_000_000_000,
            "{record}"
        );
        assert_eq!(record["who"], "bridge", "{record}");
        assert!(record["msg"].is_string(), "{record}");
    }
    let level = |needle: &str| {
        records
            .iter()
            .find(|r| r["msg"].as_str().unwrap().contains(needle))
            .map(|r| r["level"].clone())
    };
    assert_eq!(level("listening on ws://"), Some("info".into()));
    assert_eq!(level("refused the upgrade"), Some("warn".into()));
    assert_eq!(level("stopping"), Some("info".into()));
}

#[tokio::test]
async fn quiet_hides_info_lines_but_not_warnings() {
    let port = common::free_port();
    let mut node = bridge(
        &format!("127.0.0.1:{port}"),
        &["--quiet", "--log-format", "json"],
    );
    // Nothing says the bridge listens: try until it answers.
    let deadline = std::time::Instant::now() + WAIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "never listened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    refused_upgrade(port);
    node.wait_stderr("refused the upgrade", WAIT).await;
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(WAIT).await, Some(0));
    let log = node.stderr();
    let records = records(&log);
    assert!(!records.is_empty(), "{log}");
    assert!(
        records.iter().all(|r| r["level"] != "info"),
        "an info line under --quiet:\n{log}"
    );
}

#[tokio::test]
async fn quiet_keeps_errors() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = held.local_addr().unwrap().to_string();
    let mut node = bridge(&listen, &["--quiet"]);
    assert_eq!(node.wait_exit(WAIT).await, Some(1));
    let log = node.stderr();
    assert!(
        log.contains("[clawbot_router bridge] cannot listen on"),
        "{log}"
    );
}

#[test]
fn quiet_and_a_log_level_are_one_choice() {
    let out = common::router()
        .args(["node", "--quiet", "--log-level", "info"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--log-level"));
}

/// The node under `--quiet`: what a person must act on (the pairing to
/// approve) and why it stops are still said; its info lines are not.
#[tokio::test(flavor = "multi_thread")]
async fn a_quiet_node_still_says_what_to_approve_and_why_it_stops() {
    use common::gateway::{Config, FakeGateway, TOKEN as GATEWAY_TOKEN};
    let gw = FakeGateway::start(Config {
        manual_pairing: true,
        ..Config::default()
    })
    .await;
    let mut node = Node::start(
        &gw.url(),
        &["--token", GATEWAY_TOKEN, "--quiet", "--log-format", "json"],
    );
    node.wait_stderr("openclaw devices approve ", WAIT).await;
    node.signal(libc::SIGTERM);
    assert_eq!(node.wait_exit(WAIT).await, Some(0));
    let log = node.stderr();
    let records = records(&log);
    assert!(
        records.iter().any(
            |r| r["level"] == "warn" && r["msg"].as_str().unwrap().contains("pairing required")
        ),
        "{log}"
    );
    assert!(
        records.iter().all(|r| r["level"] != "info"),
        "an info line under --quiet:\n{log}"
    );

    // A refusal that stops the node is an error, kept under --quiet.
    let mut refused = Node::start(
        "ws://203.0.113.7:18789",
        &["--token", GATEWAY_TOKEN, "--quiet"],
    );
    assert_eq!(refused.wait_exit(WAIT).await, Some(1));
    let log = refused.stderr();
    assert!(log.contains("203.0.113.7"), "{log}");
}

/// `mcp` takes the same flags: its lines are the log's (levels, JSON),
/// not last words written at once as errors.
#[test]
fn mcp_logs_at_its_levels_and_quiet_hides_its_info() {
    let json = mcp_log(&["--log-format", "json"]);
    let records = records(&json);
    assert!(
        records.iter().any(|r| r["level"] == "info"
            && r["who"] == "mcp"
            && r["msg"].as_str().unwrap().starts_with("serving MCP")),
        "{json}"
    );
    let quiet = mcp_log(&["--quiet"]);
    assert!(!quiet.contains("serving MCP"), "{quiet}");
}

/// What `mcp --http` with `flags` logs from its start to a SIGTERM.
fn mcp_log(flags: &[&str]) -> String {
    let listen = format!("127.0.0.1:{}", common::free_port());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stderr");
    let child = common::router()
        .args(["mcp", "--http", &listen])
        .args(flags)
        .stderr(std::fs::File::create(&path).unwrap())
        .spawn()
        .unwrap();
    let mut child = common::KillOnDrop(child);
    let deadline = std::time::Instant::now() + WAIT;
    // Ours listening, not another test's server on a port free_port gave
    // both (a SIGTERM before our handler killed the server outright, code
    // None, once under load): its SIGTERM handler is in place, and, unless
    // quiet, it said it serves.
    let pid = child.0.id();
    let catches_term = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                let mask = s
                    .lines()
                    .find_map(|l| l.strip_prefix("SigCgt:"))?
                    .trim()
                    .to_owned();
                u64::from_str_radix(&mask, 16).ok()
            })
            .is_some_and(|mask| mask & (1 << (libc::SIGTERM - 1)) != 0)
    };
    let serving = || {
        std::fs::read_to_string(&path)
            .unwrap_or_default()
            .contains("serving MCP")
    };
    while !catches_term()
        || std::net::TcpStream::connect(&listen).is_err()
        || (!flags.contains(&"--quiet") && !serving())
    {
        assert!(std::time::Instant::now() < deadline, "never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a plain kill(2) of our own child.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    assert_eq!(child.0.wait().unwrap().code(), Some(0));
    std::fs::read_to_string(&path).unwrap()
}
