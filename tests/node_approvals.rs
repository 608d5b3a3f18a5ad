//! `clawbot_router node` against a fake gateway speaking protocol v4
//! (tests/common/gateway.rs). Who may run what: risky commands without a
//! terminal, `--deny-command`/`--allow-command`, the exec approvals document
//! managed from the gateway, gateway approvals of a prepared plan, allowlists
//! (per agent, changed environment), and asking on a terminal.

#![cfg(unix)]

mod common;

use std::time::Duration;

use common::gateway::{Config, FakeGateway};
use common::node::{
    LONG, TtyNode, allowlist, allowlist_for, connected, error_code, payload, which,
};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn the_exec_approvals_document_is_managed_from_the_gateway_and_preapproves() {
    // Headless, --approval ask: nothing risky runs unless pre-approved.
    let (gw, node) = connected(Config::default(), &[]).await;
    let run_true = || gw.invoke("system.run", json!({"command": ["sh", "-lc", "true"]}));
    assert_eq!(error_code(&run_true().await), "SYSTEM_RUN_DENIED");
    let got = payload(&gw.invoke("system.execApprovals.get", json!({})).await);
    assert_eq!(got["exists"], true);
    assert_eq!(
        got["file"],
        json!({"version": 1, "defaults": {}, "agents": {}})
    );
    let hash = got["hash"].as_str().unwrap().to_owned();
    let truth = std::fs::canonicalize(which("true")).unwrap();
    let file = json!({"version": 1, "agents": {"*": {"allowlist": [{"pattern": truth}]}}});
    // A stale hash is refused, as OpenClaw's node host refuses it.
    let stale = gw
        .invoke(
            "system.execApprovals.set",
            json!({"file": file, "baseHash": "0000"}),
        )
        .await;
    assert_eq!(error_code(&stale), "INVALID_REQUEST");
    assert!(
        stale["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exec approvals changed; reload and retry")
    );
    let set = payload(
        &gw.invoke(
            "system.execApprovals.set",
            json!({"file": file, "baseHash": hash}),
        )
        .await,
    );
    assert_ne!(set["hash"], hash);
    assert_eq!(
        payload(&run_true().await)["exitCode"],
        0,
        "allowlisted through the shell wrapper"
    );
    // The log is written by a thread of its own: waited for.
    node.wait_stderr("(allowed:allowlist)", LONG).await;
    // Never stronger than the node's forbidden rules.
    allowlist(&gw, json!(["/**"])).await;
    let sudo = gw
        .invoke("system.run", json!({"command": ["sh", "-lc", "sudo true"]}))
        .await;
    assert_eq!(error_code(&sudo), "FORBIDDEN");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_approvals_documents_change_nothing_they_should_not() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let get = || async { payload(&gw.invoke("system.execApprovals.get", json!({})).await) };
    let hash = get().await["hash"].as_str().unwrap().to_owned();
    for bad in [
        json!({"file": "not a document", "baseHash": hash}),
        json!({"baseHash": hash}),
        json!({"file": {"agents": ["*"]}, "baseHash": hash}),
        json!({"file": {"version": 1}}),
    ] {
        let refused = gw.invoke("system.execApprovals.set", bad.clone()).await;
        assert_eq!(error_code(&refused), "INVALID_REQUEST", "{bad}: {refused}");
        assert_eq!(get().await["hash"], hash, "unchanged by {bad}");
    }
    // Settings this node does not honour and junk entries are dropped or
    // kept inert: `security: full` opens nothing here.
    let doc = json!({"version": 99, "defaults": {"security": "full", "ask": "off", "askFallback": "yolo"},
                     "agents": {"*": {"allowlist": [42, null, {"pattern": ""}, {"pattern": "relative/sh"},
                                                    {"pattern": "=node-command:x"}, {"argPattern": "x"}]}}});
    let set = payload(
        &gw.invoke(
            "system.execApprovals.set",
            json!({"file": doc, "baseHash": hash}),
        )
        .await,
    );
    assert_eq!(set["file"]["version"], 1);
    assert!(
        set["file"]["defaults"].get("askFallback").is_none(),
        "{set}"
    );
    assert_eq!(
        set["file"]["agents"]["*"]["allowlist"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "entries without a pattern are dropped; the inert two are kept, as OpenClaw keeps them: {set}"
    );
    let run = gw
        .invoke("system.run", json!({"command": ["sh", "-c", "true"]}))
        .await;
    assert_eq!(error_code(&run), "SYSTEM_RUN_DENIED", "{run}");
    // A document damaged on disk (by hand, by a crash) allows nothing,
    // shows the gateway that it reads as `security: deny`, and can be
    // replaced from there.
    let mut node = node;
    std::fs::write(node.state().join("exec-approvals.json"), "{ not json").unwrap();
    node.restart(&gw.url(), &[]);
    gw.wait_hellos(2, LONG).await;
    let damaged = get().await;
    assert_eq!(damaged["file"]["defaults"]["security"], "deny", "{damaged}");
    let run = gw
        .invoke("system.run", json!({"command": ["sh", "-c", "true"]}))
        .await;
    assert_eq!(error_code(&run), "FORBIDDEN", "{run}");
    assert!(run.to_string().contains("security=deny"), "{run}");
    let replaced = gw
        .invoke(
            "system.execApprovals.set",
            json!({"file": {"version": 1}, "baseHash": damaged["hash"]}),
        )
        .await;
    assert_eq!(
        payload(&replaced)["file"]["defaults"],
        json!({}),
        "{replaced}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gateway_approval_runs_the_prepared_plan_and_nothing_else() {
    let (gw, node) = connected(Config::default(), &[]).await;
    // What OpenClaw's exec tool sends first; this node asks through the gateway.
    let prepared = payload(&gw.invoke("system.run.prepare", json!({"command": ["sh", "-lc", "echo approved-run"], "security": "full", "ask": "off", "agentId": "main", "sessionKey": "agent:main:s"})).await);
    assert_eq!(
        prepared["execPolicy"],
        json!({"security": "allowlist", "ask": "on-miss"})
    );
    let plan = prepared["plan"].clone();
    let resend = |decision: &str, argv: Value| {
        json!({"command": argv, "systemRunPlan": plan, "cwd": plan["cwd"], "agentId": "main",
               "sessionKey": "agent:main:s", "runId": "approval-1", "approved": true, "approvalDecision": decision})
    };
    let argv = plan["argv"].clone();
    // A re-send whose argv is not the plan's: refused, nothing runs.
    let tampered = gw
        .invoke(
            "system.run",
            resend("allow-once", json!(["sh", "-lc", "touch pwned"])),
        )
        .await;
    assert_eq!(error_code(&tampered), "INVALID_REQUEST");
    assert!(
        tampered["error"]["message"]
            .as_str()
            .unwrap()
            .contains("explicit approval requires matching systemRunPlan")
    );
    assert!(!node.ws().join("pwned").exists());
    let once = gw
        .invoke("system.run", resend("allow-once", argv.clone()))
        .await;
    assert_eq!(payload(&once)["stdout"], "approved-run\n");
    // Once means once: the same approval sent again is refused...
    let replayed = gw
        .invoke("system.run", resend("allow-once", argv.clone()))
        .await;
    assert_eq!(error_code(&replayed), "SYSTEM_RUN_DENIED", "{replayed}");
    assert!(
        replayed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("used already"),
        "{replayed}"
    );
    // ... and the same call without an approval is asked again.
    let again = gw.invoke("system.run", json!({"command": argv, "cwd": plan["cwd"], "agentId": "main", "sessionKey": "agent:main:s", "runId": "r2"})).await;
    assert_eq!(error_code(&again), "SYSTEM_RUN_DENIED");
    // allow-always is remembered in the approvals document, in the
    // agent's own list, as OpenClaw's node host does (a new approval is a
    // new prepare: the gateway asks again).
    let prepared = payload(&gw.invoke("system.run.prepare", json!({"command": ["sh", "-lc", "echo approved-run"], "security": "full", "ask": "off", "agentId": "main", "sessionKey": "agent:main:s"})).await);
    let plan = prepared["plan"].clone();
    let always = gw
        .invoke(
            "system.run",
            json!({"command": argv, "systemRunPlan": plan, "cwd": plan["cwd"], "agentId": "main",
                   "sessionKey": "agent:main:s", "runId": "approval-2", "approved": true, "approvalDecision": "allow-always"}),
        )
        .await;
    assert_eq!(payload(&always)["exitCode"], 0);
    let doc = payload(&gw.invoke("system.execApprovals.get", json!({})).await);
    assert!(doc["file"]["agents"].get("*").is_none(), "{doc}");
    let entry = &doc["file"]["agents"]["main"]["allowlist"][0];
    assert_eq!(entry["source"], "allow-always");
    assert!(
        entry["argPattern"]
            .as_str()
            .unwrap()
            .starts_with("sha256:cwd-argv:v1:")
    );
    let remembered = gw.invoke("system.run", json!({"command": argv, "cwd": plan["cwd"], "agentId": "main", "sessionKey": "agent:main:s", "runId": "r3"})).await;
    assert_eq!(payload(&remembered)["stdout"], "approved-run\n");
    // A plan this node never prepared: refused, whatever it says.
    let made_up = json!({"argv": ["sh", "-lc", "touch pwned"], "cwd": plan["cwd"], "commandText": "sh -lc \"touch pwned\"", "agentId": "main", "sessionKey": "agent:main:s"});
    let forged = gw.invoke("system.run", json!({"command": ["sh", "-lc", "touch pwned"], "systemRunPlan": made_up, "cwd": plan["cwd"], "agentId": "main", "sessionKey": "agent:main:s", "runId": "f", "approved": true, "approvalDecision": "allow-once"})).await;
    assert_eq!(error_code(&forged), "INVALID_REQUEST");
    assert!(!node.ws().join("pwned").exists());
    // An approval never unforbids.
    let forbidden = payload(&gw.invoke("system.run.prepare", json!({"command": ["sh", "-lc", "sudo id"], "agentId": "main", "sessionKey": "agent:main:s"})).await);
    let p = forbidden["plan"].clone();
    let sudo = gw.invoke("system.run", json!({"command": p["argv"], "systemRunPlan": p, "cwd": p["cwd"], "agentId": "main", "sessionKey": "agent:main:s", "runId": "x", "approved": true, "approvalDecision": "allow-once"})).await;
    assert_eq!(error_code(&sudo), "FORBIDDEN");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gateway_cannot_open_a_node_that_denies_or_asks_its_terminal() {
    // --approval deny: an allowlist from the gateway changes nothing.
    let (gw, _node) = connected(Config::default(), &["--approval", "deny"]).await;
    allowlist(&gw, json!(["/**"])).await;
    let run = gw
        .invoke("system.run", json!({"command": ["sh", "-lc", "true"]}))
        .await;
    assert_eq!(error_code(&run), "USER_REJECTED");
    // Nor does a grant.
    let prepared = payload(
        &gw.invoke(
            "system.run.prepare",
            json!({"command": ["true"], "agentId": "main", "sessionKey": "k"}),
        )
        .await,
    );
    assert_eq!(prepared["execPolicy"]["security"], "deny");
    let p = prepared["plan"].clone();
    let granted = gw.invoke("system.run", json!({"command": p["argv"], "systemRunPlan": p, "cwd": p["cwd"], "agentId": "main", "sessionKey": "k", "runId": "g", "approved": true, "approvalDecision": "allow-once"})).await;
    assert_eq!(error_code(&granted), "USER_REJECTED");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowlisted_program_with_a_changed_environment_still_needs_a_human() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    let truth = std::fs::canonicalize(which("true")).unwrap();
    allowlist(&gw, json!([truth])).await;
    assert_eq!(
        payload(&gw.invoke("system.run", json!({"command": ["true"]})).await)["exitCode"],
        0
    );
    let with_env = gw
        .invoke(
            "system.run",
            json!({"command": ["true"], "env": {"GREETING": "hi"}}),
        )
        .await;
    assert_eq!(error_code(&with_env), "SYSTEM_RUN_DENIED");
    // One OpenClaw's node host blocks is refused outright.
    let home = gw
        .invoke(
            "system.run",
            json!({"command": ["true"], "env": {"HOME": "/tmp"}}),
        )
        .await;
    assert_eq!(error_code(&home), "INVALID_REQUEST");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agents_own_allowlist_allows_only_that_agents_runs() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    let truth = std::fs::canonicalize(which("true")).unwrap();
    allowlist_for(&gw, "main", json!([truth])).await;
    let run = |agent: Option<&str>| {
        let mut params = json!({"command": ["true"]});
        if let Some(agent) = agent {
            params["agentId"] = json!(agent);
        }
        gw.invoke("system.run", params)
    };
    assert_eq!(
        payload(&run(Some("main")).await)["exitCode"],
        0,
        "main's own entry"
    );
    assert_eq!(
        error_code(&run(Some("ops")).await),
        "SYSTEM_RUN_DENIED",
        "not ops'"
    );
    assert_eq!(
        error_code(&run(None).await),
        "SYSTEM_RUN_DENIED",
        "no agent named: only \"*\" counts"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn risky_commands_are_refused_without_a_terminal_to_ask() {
    let (gw, node) = connected(Config::default(), &[]).await;
    for (command, params, code) in [
        (
            "run_command",
            json!({"command": "touch pwned"}),
            "USER_REJECTED",
        ),
        // OpenClaw's answer: its gateway raises an exec approval for it.
        (
            "system.run",
            json!({"command": ["touch", "pwned"]}),
            "SYSTEM_RUN_DENIED",
        ),
        (
            "write_file",
            json!({"path": "pwned", "content": "x"}),
            "USER_REJECTED",
        ),
    ] {
        let r = gw.invoke(command, params).await;
        assert_eq!(error_code(&r), code, "{command}");
        if command == "system.run" {
            let message = r["error"]["message"].as_str().unwrap();
            assert!(
                message.starts_with("SYSTEM_RUN_DENIED: approval required"),
                "{message}"
            );
        }
    }
    assert!(!node.ws().join("pwned").exists());
    assert!(node.stderr().contains("not a terminal"));
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_command_forbids_and_allow_command_pre_approves() {
    let (gw, _node) = connected(
        Config::default(),
        &[
            "--approval",
            "allow",
            "--deny-command",
            "curl",
            "--allow-command",
            "echo",
        ],
    )
    .await;
    let r = gw
        .invoke(
            "run_command",
            json!({"command": "curl", "args": ["http://127.0.0.1:1"]}),
        )
        .await;
    assert_eq!(error_code(&r), "FORBIDDEN");
    let r = gw
        .invoke("run_command", json!({"command": ["sh", "-c", "sudo id"]}))
        .await;
    assert_eq!(error_code(&r), "FORBIDDEN", "a built-in rule inside sh -c");
    let (gw2, _node2) = connected(Config::default(), &["--allow-command", "echo"]).await;
    let r = gw2
        .invoke(
            "run_command",
            json!({"command": "echo", "args": ["pre-approved"]}),
        )
        .await;
    assert_eq!(payload(&r)["stdout"], "pre-approved\n");
    drop(gw);
}

/// Asks the node to run `echo WORD`; the invocation id.
fn echo_request(gw: &FakeGateway, word: &str) -> String {
    gw.request(
        "run_command",
        &json!({"command": ["echo", word]}).to_string(),
        30_000,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_terminal_the_user_allows_once_always_or_denies() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = TtyNode::start(&gw.url());
    gw.wait_hellos(1, LONG).await;

    // allow once: runs, and the next identical call asks again
    let id = echo_request(&gw, "once");
    node.wait_prompts(1).await;
    assert!(
        node.screen
            .lock()
            .unwrap()
            .contains("run_command: echo once")
    );
    node.answer("o\n");
    assert_eq!(payload(&gw.result(&id, LONG).await)["stdout"], "once\n");

    // allow always: remembered for this executable and argv
    let id = echo_request(&gw, "always");
    node.wait_prompts(2).await;
    node.answer("a\n");
    assert_eq!(payload(&gw.result(&id, LONG).await)["stdout"], "always\n");
    let again = gw
        .invoke("run_command", json!({"command": ["echo", "always"]}))
        .await;
    assert_eq!(payload(&again)["stdout"], "always\n");
    assert_eq!(node.prompts(), 2, "an 'always' call asked again");
    let saved = std::fs::read_to_string(node.state.join("approvals.json")).unwrap();
    assert!(
        saved.contains("\"always\"") && saved.contains("/echo"),
        "{saved}"
    );

    // other arguments are another question; deny
    let id = echo_request(&gw, "other");
    node.wait_prompts(3).await;
    node.answer("d\n");
    assert_eq!(error_code(&gw.result(&id, LONG).await), "USER_REJECTED");
}

#[tokio::test(flavor = "multi_thread")]
async fn prompts_never_overlap() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = TtyNode::start(&gw.url());
    gw.wait_hellos(1, LONG).await;
    let first = echo_request(&gw, "1");
    let second = echo_request(&gw, "2");
    node.wait_prompts(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        node.prompts(),
        1,
        "a second question was asked over the first"
    );
    node.answer("o\n");
    node.wait_prompts(2).await;
    node.answer("o\n");
    for id in [first, second] {
        assert_eq!(gw.result(&id, LONG).await["ok"], true);
    }
}
