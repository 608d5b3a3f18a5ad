//! `clawbot_router node` against a fake gateway speaking protocol v4
//! (tests/common/gateway.rs). Stopping the node: Ctrl-C and SIGHUP stop
//! running commands and exit cleanly, and a node killed outright takes its
//! commands' process trees with it.

#![cfg(unix)]

mod common;

use common::gateway::Config;
use common::node::{LONG, connected, error_code, start_sleeper};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_stops_running_commands_and_exits_cleanly() {
    stops_cleanly_on(libc::SIGINT).await;
}

/// A closed terminal or a service manager's reload (SIGHUP) stops the node
/// as it stops the router, `mcp` and the links: one signal path for every
/// mode.
#[tokio::test(flavor = "multi_thread")]
async fn a_hangup_stops_the_node_as_it_stops_every_mode() {
    stops_cleanly_on(libc::SIGHUP).await;
}

async fn stops_cleanly_on(signal: i32) {
    let (gw, mut node) = connected(Config::default(), &["--approval", "allow"]).await;
    let (id, pid) = start_sleeper(&gw, &node).await;
    node.signal(signal);
    assert_eq!(node.wait_exit(LONG).await, Some(0));
    assert_eq!(error_code(&gw.result(&id, LONG).await), "CANCELLED");
    common::assert_all_gone(&[pid]);
}

/// A node killed outright (nothing of it runs) still takes what its
/// commands started with it: the command, a child in its group, and one
/// that left the group.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_killed_outright_takes_its_commands_trees_with_it() {
    let (gw, node) = connected(Config::default(), &["--approval", "allow"]).await;
    let script =
        "echo $$ > pids; sleep 60 & echo $! >> pids; setsid sleep 60 & echo $! >> pids; wait";
    let _ = gw.request(
        "system.run",
        &json!({"command": ["/bin/sh", "-c", script]}).to_string(),
        60_000,
    );
    let tree = common::wait_for_pids(&node.ws().join("pids"), 3);
    node.signal(libc::SIGKILL);
    common::assert_gone_in_time(&tree, "a command's tree");
}
