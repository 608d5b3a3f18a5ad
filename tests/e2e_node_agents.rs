//! A real OpenClaw agent using the node: its published tools with no
//! allowlist edit, a real MCP server behind the node, the agent's exec
//! running here, and exec approvals (`openclaw approvals`, asked through the
//! gateway, a script rewritten while asked). Ignored by a plain `cargo test`
//! (they need the sandbox); `scripts/e2e.sh` brings the sandbox up, runs them
//! with `--ignored --test-threads=1`, and takes it down.

#![cfg(unix)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::e2e::{RealNode, gateway_log_count, openclaw, real_router, turn_with_approvals};
use common::*;
use serde_json::json;

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_agent_calls_the_nodes_published_tools_with_no_allowlist_edit() {
    // The sandbox's gateway.nodes.commands.allow names the seed's tools
    // for the `nodes invoke` tests; the published tools need none of it:
    // they travel as mcp.tools.call.v1, in OpenClaw's Linux defaults.
    let node = RealNode::start("e2e-published", &[]);
    node.approve_surface();
    node.wait_log("published 8 tools", Duration::from_secs(30));
    let agent = |message: &str| {
        run(real_router().args(["-a", "main", "-m", message, "--timeout", "120"])).content()
    };
    // Safe: runs at once; the model reads the file's content.
    let read = agent(r#"[[tool:clawbot_read_file {"path": "peer.txt"}]]"#);
    assert!(read.contains("peer-file-content-42"), "{read}");
    // Risky, on a node without a terminal: the node's approval policy
    // answers, with how to allow it; nothing is written.
    let write = agent(r#"[[tool:clawbot_write_file {"path": "made.txt", "content": "x"}]]"#);
    assert!(write.contains("USER_REJECTED"), "{write}");
    assert!(!node.ws.join("made.txt").exists());
    // Forbidden, whatever approvals say.
    let sudo = agent(r#"[[tool:clawbot_run_command {"command": "sudo true"}]]"#);
    assert!(sudo.contains("FORBIDDEN"), "{sudo}");
    let log = node.log();
    for call in [
        "read_file (mcp.tools.call.v1) → ok (allowed:safe)",
        "write_file (mcp.tools.call.v1) → USER_REJECTED (refused:APPROVAL_REQUIRED)",
        "run_command (mcp.tools.call.v1) → FORBIDDEN (refused:FORBIDDEN)",
    ] {
        assert!(log.contains(call), "{call}: {log}");
    }
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_agent_calls_a_real_mcp_server_through_the_node() {
    // Two MCP servers nobody here wrote, from the npm registry
    // (scripts/sandbox.sh install): the filesystem server on a directory
    // of its own, and the "everything" server, which announces a tool
    // list change right after it starts.
    let bin = PathBuf::from(std::env::var("CLAWBOT_SANDBOX_MCP_BIN").expect("scripts/e2e.sh"));
    let docs = tempfile::tempdir().unwrap();
    let docs_dir = docs.path().canonicalize().unwrap();
    std::fs::write(docs_dir.join("note.txt"), "mcp-proxied-content-77\n").unwrap();
    let fs = format!(
        "fs={} {}",
        bin.join("mcp-server-filesystem").display(),
        docs_dir.display()
    );
    let everything = format!("everything={}", bin.join("mcp-server-everything").display());
    let node = RealNode::start(
        "e2e-mcp",
        &[
            "--mcp-server",
            &fs,
            "--mcp-server",
            &everything,
            "--deny-command",
            "fs.move_file",
        ],
    );
    node.approve_surface();
    node.wait_log("MCP server fs (pid", Duration::from_secs(60));
    node.wait_log(
        "MCP server everything announced a tool list change; listing again",
        Duration::from_secs(60),
    );
    let published = |log: &str| log.matches("published ").count();
    node.wait_log(
        "fs.move_file is not offered to agents",
        Duration::from_secs(30),
    );
    // All of it, taken by the gateway once the node is approved: ours (8),
    // fs (13 of 14) and everything (13).
    let log = node.wait_log(
        "published 34 tools to the gateway's agents",
        Duration::from_secs(30),
    );
    assert!(!log.contains("MCP server fs cannot start"), "{log}");
    let agent = |message: &str| {
        run(real_router().args(["-a", "main", "-m", message, "--timeout", "120"])).content()
    };
    let note = docs_dir.join("note.txt").display().to_string();
    let read = format!(r#"[[tool:fs_read_text_file {{"path": "{note}"}}]]"#);
    // Read-only (readOnlyHint): runs at once.
    let answer = agent(&read);
    assert!(
        answer.contains("mcp-proxied-content-77"),
        "{answer}\n{}",
        node.log()
    );
    let sum = agent(r#"[[tool:everything_get-sum {"a": 2, "b": 40}]]"#);
    assert!(sum.contains("42"), "{sum}");
    // Destructive, no terminal, no pre-approval: the node's policy refuses.
    let made = docs_dir.join("made.txt").display().to_string();
    let write = agent(&format!(
        r#"[[tool:fs_write_file {{"path": "{made}", "content": "x"}}]]"#
    ));
    assert!(write.contains("USER_REJECTED"), "{write}");
    assert!(!docs_dir.join("made.txt").exists());
    // Forbidden: not offered, and refused when called anyway.
    let moved = node.invoke(
        "mcp.tools.call.v1",
        json!({"server": "fs", "tool": "move_file", "arguments": {"source": note, "destination": made}}),
    );
    assert!(moved.to_string().contains("FORBIDDEN"), "{moved}");
    assert!(docs_dir.join("note.txt").exists());
    // Killed mid-session: withdrawn, started again, published again.
    let log = node.log();
    let pid: i32 = log
        .split("MCP server fs (pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|p| p.parse().ok())
        .expect("the server's pid in the log");
    let before = published(&log);
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    node.wait_log("MCP server fs exited (signal: 9", Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(node.log().matches("MCP server fs (pid").count() == 2
        && published(&node.log()) >= before + 2)
    {
        assert!(Instant::now() < deadline, "not back: {}", node.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    let again = agent(&read);
    assert!(
        again.contains("mcp-proxied-content-77"),
        "{again}\n{}",
        node.log()
    );
    let log = node.log();
    for call in [
        "fs.read_text_file (mcp.tools.call.v1) → ok (allowed:safe)",
        "everything.get-sum (mcp.tools.call.v1) → ok (allowed:safe)",
        "fs.write_file (mcp.tools.call.v1) → USER_REJECTED (refused:APPROVAL_REQUIRED)",
        "fs.move_file (mcp.tools.call.v1) → FORBIDDEN (refused:FORBIDDEN)",
    ] {
        assert!(log.contains(call), "{call}: {log}");
    }
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_agents_exec_on_the_node_runs_here() {
    let node = RealNode::start("e2e-exec", &["--allow-command", "system.run"]);
    node.approve_surface();
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let run = run(real_router().args([
        "-a",
        "main",
        "-m",
        &format!("[[exec:echo from-node-{marker}; uname -s]]"),
        "--timeout",
        "120",
    ]));
    assert!(
        run.content()
            .contains(&format!("from-node-{marker}\nLinux")),
        "{}",
        run.stdout
    );
    let log = node.log();
    assert!(
        log.contains("system.run.prepare → ok") && log.contains("system.run → ok"),
        "{log}"
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_openclaw_approvals_manage_the_nodes_allowlist() {
    // Headless and nothing pre-approved: a command refused here...
    let node = RealNode::start("e2e-approvals", &[]);
    node.approve_surface();
    let uname_run = || node.invoke("run_command", json!({"command": ["uname", "-s"]}));
    let refused = uname_run();
    assert!(refused.to_string().contains("USER_REJECTED"), "{refused}");
    assert!(
        refused
            .to_string()
            .contains("openclaw approvals allowlist add --node"),
        "says how: {refused}"
    );
    // ... until an operator allowlists the program from the gateway.
    let (got, err, code) = openclaw(&["approvals", "get", "--node", "e2e-approvals", "--json"]);
    assert_eq!(code, Some(0), "{got}\n{err}");
    let uname = std::fs::canonicalize(
        std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join("uname"))
            .find(|p| p.is_file())
            .unwrap(),
    )
    .unwrap();
    let uname = uname.to_str().unwrap();
    let (out, err, code) = openclaw(&[
        "approvals",
        "allowlist",
        "add",
        "--node",
        "e2e-approvals",
        uname,
    ]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let (got, _, _) = openclaw(&["approvals", "get", "--node", "e2e-approvals", "--json"]);
    assert!(got.contains(uname), "the round trip shows the entry: {got}");
    let ran = uname_run();
    assert_eq!(ran["payload"]["stdout"], "Linux\n", "{ran}");
    assert!(
        node.log().contains("run_command → ok (allowed:allowlist)"),
        "{}",
        node.log()
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_a_headless_node_asks_through_the_gateway_and_honours_its_approvals() {
    // No terminal, nothing pre-approved: the gateway's operators decide.
    let refused_events = refused_node_events();
    let node = RealNode::start("e2e-gateway-approvals", &[]);
    node.approve_surface();
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let command = format!("echo approved-{marker}");
    let message = format!("[[exec:{command}]] {marker}");
    let (text, asked) = turn_with_approvals(&message, &|_| "allow-once");
    assert_eq!(asked, 1, "one approval raised");
    assert!(text.contains(&format!("approved-{marker}")), "{text}");
    assert!(
        node.log()
            .contains("system.run → ok (allowed:gateway-once)"),
        "{}",
        node.log()
    );
    // Once means once: the same command is asked again...
    let (_, asked) = turn_with_approvals(&message, &|_| "allow-always");
    assert_eq!(asked, 1);
    // ... and after allow-always, not any more (the node's document says so).
    let (text, asked) = turn_with_approvals(&message, &|_| panic!("asked again"));
    assert_eq!(asked, 0);
    assert!(text.contains(&format!("approved-{marker}")), "{text}");
    let (doc, _, _) = openclaw(&[
        "approvals",
        "get",
        "--node",
        "e2e-gateway-approvals",
        "--json",
    ]);
    assert!(doc.contains("allow-always"), "{doc}");
    // A denial is the node's last word too: nothing runs.
    let runs = |log: &str| log.matches(" system.run → ").count();
    let before = runs(&node.log());
    let other = format!("[[exec:echo denied-{marker}]] {marker}");
    let (_, asked) = turn_with_approvals(&other, &|_| "deny");
    assert_eq!(asked, 1);
    assert_eq!(
        runs(&node.log()),
        before,
        "no system.run reached the node: {}",
        node.log()
    );
    // Every exec.finished / exec.denied and host stats the node sent was
    // taken by the real gateway (it logs `res ✗ node.event` for refusals).
    assert_eq!(
        refused_node_events(),
        refused_events,
        "the gateway refused node events"
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_approval_does_not_cover_a_script_rewritten_while_it_was_asked() {
    // OpenClaw's exec sends `/bin/sh -lc "sh job.sh"`: the node binds
    // job.sh to the plan the operator is shown.
    let node = RealNode::start("e2e-approval-binding", &[]);
    node.approve_surface();
    let marker = uuid::Uuid::new_v4().simple().to_string();
    std::fs::write(node.ws.join("job.sh"), format!("echo shown-{marker}\n")).unwrap();
    let message = format!("[[exec:sh job.sh]] {marker}");
    let ws = node.ws.clone();
    let (text, asked) = turn_with_approvals(&message, &|_| {
        // Rewritten while the operator looks at it.
        std::fs::write(ws.join("job.sh"), "touch pwned\n").unwrap();
        "allow-once"
    });
    assert_eq!(asked, 1, "one approval raised");
    assert!(!node.ws.join("pwned").exists(), "the rewritten script ran");
    assert!(!text.contains(&format!("shown-{marker}")), "{text}");
    assert!(
        node.log().contains("system.run → SYSTEM_RUN_DENIED"),
        "{}",
        node.log()
    );
    // Left alone, the same approval runs it.
    std::fs::write(node.ws.join("job.sh"), format!("echo shown-{marker}\n")).unwrap();
    let (text, asked) = turn_with_approvals(&message, &|_| "allow-once");
    assert_eq!(asked, 1);
    assert!(text.contains(&format!("shown-{marker}")), "{text}");
}

/// How many `node.event` requests the sandbox gateway has refused so far.
fn refused_node_events() -> usize {
    gateway_log_count("res ✗ node.event")
}
