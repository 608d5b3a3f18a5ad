//! `clawbot_router mcp` driven by real MCP clients nobody here wrote: the
//! official Python SDK (`mcp` on PyPI) through tests/mcp_client/check.py —
//! initialize, list tools, call, progress, cancel (the tree must be gone),
//! concurrency, prompts, malformed calls — over stdio and over Streamable
//! HTTP (`mcp --http`, with the HTTP rules: token, Origin, Host, body limit,
//! DELETE); and the official TypeScript SDK's Streamable HTTP client through
//! tests/mcp_client/check_http.mjs (call, progress over SSE, a cancel that
//! stops the tree); and the official conformance suite
//! (`@modelcontextprotocol/conformance`), every server scenario that applies
//! to this server passing over Streamable HTTP (those that do not are listed
//! with why in tests/mcp_client/conformance-expected-failures.yml).
//! scripts/e2e.sh installs them (scripts/mcp-client.sh, scripts/sandbox.sh
//! install) and runs these with CLAWBOT_MCP_PYTHON, CLAWBOT_SANDBOX_MCP_SDK
//! and CLAWBOT_SANDBOX_CONFORMANCE set.

#![cfg(unix)]

mod common;

use std::time::Duration;

/// Runs a client's checks; they print OK/FAIL lines and "all checks passed".
fn checks(program: &str, args: &[&str]) {
    let out = run(program, args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "the MCP client's checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a client to its end: what it printed and how it exited.
fn run(program: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the client starts");
    // A client that hangs must fail the test, not hang the suite.
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(180)) {
        Ok(out) => out.expect("the client's output"),
        Err(_) => {
            // SAFETY: a plain kill(2) on our own child's pid.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            panic!("{program} did not finish within 180 s");
        }
    }
}

fn python() -> String {
    std::env::var("CLAWBOT_MCP_PYTHON")
        .expect("CLAWBOT_MCP_PYTHON names a python with the `mcp` package (scripts/mcp-client.sh)")
}

const CHECK_PY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client/check.py");

/// The Python client's checks, with `extra` after its usual arguments.
fn python_checks(extra: &[&str]) {
    let python = python();
    let mut args = vec![
        CHECK_PY,
        common::ROUTER,
        common::FAKE,
        env!("CARGO_MANIFEST_DIR"),
    ];
    args.extend(extra);
    checks(&python, &args);
}

#[test]
#[ignore = "needs the Python MCP client: scripts/e2e.sh (or CLAWBOT_MCP_PYTHON=$(scripts/mcp-client.sh))"]
fn the_official_python_client_drives_the_server() {
    python_checks(&[]);
}

#[test]
#[ignore = "needs the Python MCP client: scripts/e2e.sh (or CLAWBOT_MCP_PYTHON=$(scripts/mcp-client.sh))"]
fn the_official_python_client_drives_the_server_over_streamable_http() {
    python_checks(&["--http"]);
}

#[test]
#[ignore = "needs the TypeScript MCP SDK and Node.js: scripts/e2e.sh (scripts/sandbox.sh install)"]
fn the_official_typescript_client_drives_the_server_over_streamable_http() {
    let sdk = std::env::var("CLAWBOT_SANDBOX_MCP_SDK")
        .expect("CLAWBOT_SANDBOX_MCP_SDK names @modelcontextprotocol/sdk (eval \"$(scripts/sandbox.sh env)\")");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/mcp_client/check_http.mjs"
    );
    checks("node", &[script, &sdk, common::ROUTER, common::FAKE]);
}

/// The scenarios of the suite that apply to this server (a handshake, ping,
/// the tool and prompt lists, concurrent SSE streams, DNS-rebinding
/// protection, and the empty completion and resource lists): each must
/// show as passed, so a renamed or skipped one cannot pass unnoticed.
const CONFORMANCE_APPLIES: &[&str] = &[
    "server-initialize",
    "ping",
    "completion-complete",
    "tools-list",
    "server-sse-multiple-streams",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
];

#[test]
#[ignore = "needs the MCP conformance suite and Node.js: scripts/e2e.sh (scripts/sandbox.sh install)"]
fn the_official_conformance_suite_passes_over_streamable_http() {
    let suite = std::env::var("CLAWBOT_SANDBOX_CONFORMANCE").expect(
        "CLAWBOT_SANDBOX_CONFORMANCE names the conformance suite (eval \"$(scripts/sandbox.sh env)\")",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = common::router_with("reply", &[])
        .args(["mcp", "--http", &format!("127.0.0.1:{port}")])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "mcp --http did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let expected = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/mcp_client/conformance-expected-failures.yml"
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    let out = run(
        &suite,
        &["server", "--url", &url, "--expected-failures", expected],
    );
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "the conformance suite failed (a scenario that applies failed, or one listed as expected to fail passed):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for scenario in CONFORMANCE_APPLIES {
        assert!(
            stdout.contains(&format!("✓ {scenario}:")),
            "{scenario} did not pass:\n{stdout}"
        );
    }
}
