//! `clawbot_router mcp` driven by a real MCP client nobody here wrote: the
//! official Python SDK (`mcp` on PyPI), through tests/mcp_client/check.py —
//! initialize, list tools, call, progress, cancel (the tree must be gone),
//! concurrency, prompts, malformed calls. scripts/e2e.sh installs the client
//! (scripts/mcp-client.sh) and runs this with CLAWBOT_MCP_PYTHON set.

#![cfg(unix)]

mod common;

use std::time::Duration;

#[test]
#[ignore = "needs the Python MCP client: scripts/e2e.sh (or CLAWBOT_MCP_PYTHON=$(scripts/mcp-client.sh))"]
fn the_official_python_client_drives_the_server() {
    let python = std::env::var("CLAWBOT_MCP_PYTHON")
        .expect("CLAWBOT_MCP_PYTHON names a python with the `mcp` package (scripts/mcp-client.sh)");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client/check.py");
    let mut cmd = std::process::Command::new(python);
    cmd.args([
        script,
        common::ROUTER,
        common::FAKE,
        env!("CARGO_MANIFEST_DIR"),
    ]);
    let run = common::run(&mut cmd);
    println!("{}", run.stdout);
    assert!(
        run.code == Some(0) && run.stdout.contains("all checks passed"),
        "the MCP client's checks failed:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(run.elapsed < Duration::from_secs(60));
}
