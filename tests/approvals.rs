//! An approval covers exactly what runs (issue 23 §1): the variables its
//! plan showed, the script and the program as they were when it was shown,
//! once — and the forbidden rules hold for every spelling, whoever
//! approved. Against the fake gateway, as OpenClaw's exec tool drives a
//! node: `system.run.prepare`, an operator's answer, `system.run` re-sent
//! with the plan.

#![cfg(unix)]

mod common;

use std::path::Path;

use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, TtyNode, allowlist, connected, error_code, payload};
use serde_json::{Value, json};

/// Prepares `argv` (with `env`) for agent `main` as OpenClaw's exec tool
/// does; the plan.
async fn prepare(gw: &FakeGateway, argv: Value, env: Value) -> Value {
    let mut params = json!({"command": argv, "security": "full", "ask": "off", "agentId": "main", "sessionKey": "agent:main:s"});
    if !env.is_null() {
        params["env"] = env;
    }
    payload(&gw.invoke("system.run.prepare", params).await)["plan"].clone()
}

/// `system.run` re-sent with an operator's `allow-once` for `plan`, with
/// the variables `env`.
async fn approved(gw: &FakeGateway, plan: &Value, env: Value) -> Value {
    decided(gw, plan, env, "allow-once").await
}

/// `system.run` re-sent with an operator's `decision` for `plan`.
async fn decided(gw: &FakeGateway, plan: &Value, env: Value, decision: &str) -> Value {
    let mut params = json!({"command": plan["argv"], "systemRunPlan": plan, "cwd": plan["cwd"], "agentId": "main",
        "sessionKey": "agent:main:s", "runId": "approval", "approved": true, "approvalDecision": decision});
    if !env.is_null() {
        params["env"] = env;
    }
    gw.invoke("system.run", params).await
}

fn message(result: &Value) -> String {
    result["error"]["message"].as_str().unwrap_or("").to_owned()
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_covers_only_the_variables_its_plan_showed() {
    let (gw, _node) = connected(Config::default(), &["--approval", "gateway"]).await;
    // Approved with none; sent with one.
    let plan = prepare(&gw, json!(["printenv", "GREETING"]), Value::Null).await;
    let run = approved(&gw, &plan, json!({"GREETING": "added"})).await;
    assert_eq!(error_code(&run), "SYSTEM_RUN_DENIED", "{run}");
    assert!(
        message(&run).contains("APPROVAL_ENV_BINDING_MISSING"),
        "{run}"
    );
    // Approved with one value; sent with another, or with none.
    let plan = prepare(
        &gw,
        json!(["printenv", "GREETING"]),
        json!({"GREETING": "shown"}),
    )
    .await;
    let run = approved(&gw, &plan, json!({"GREETING": "other"})).await;
    assert!(message(&run).contains("APPROVAL_ENV_MISMATCH"), "{run}");
    let plan = prepare(
        &gw,
        json!(["printenv", "GREETING"]),
        json!({"GREETING": "shown"}),
    )
    .await;
    let run = approved(&gw, &plan, Value::Null).await;
    assert!(message(&run).contains("APPROVAL_ENV_MISMATCH"), "{run}");
    // What was shown runs.
    let plan = prepare(
        &gw,
        json!(["printenv", "GREETING"]),
        json!({"GREETING": "shown"}),
    )
    .await;
    let run = approved(&gw, &plan, json!({"GREETING": "shown"})).await;
    assert_eq!(payload(&run)["stdout"], "shown\n");
    // A PATH added to an approved `sh -c ls` is refused outright, at the
    // prepare and at the run: another `ls` would run.
    let plan = prepare(&gw, json!(["/bin/sh", "-lc", "ls"]), Value::Null).await;
    let run = approved(&gw, &plan, json!({"PATH": "/tmp/evil:/usr/bin:/bin"})).await;
    assert_eq!(error_code(&run), "INVALID_REQUEST", "{run}");
    let refused = gw
        .invoke(
            "system.run.prepare",
            json!({"command": ["ls"], "env": {"PATH": "/tmp"}}),
        )
        .await;
    assert_eq!(error_code(&refused), "INVALID_REQUEST");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_script_rewritten_or_a_program_swapped_after_approval_does_not_run() {
    let (gw, node) = connected(Config::default(), &["--approval", "gateway"]).await;
    let ws = node.ws();
    // `sh job.sh`: the script is bound, and the plan shows it as OpenClaw's do.
    std::fs::write(ws.join("job.sh"), "echo approved\n").unwrap();
    let plan = prepare(&gw, json!(["sh", "job.sh"]), Value::Null).await;
    assert_eq!(plan["mutableFileOperand"]["argvIndex"], 1, "{plan}");
    assert!(
        plan["mutableFileOperand"]["path"]
            .as_str()
            .unwrap()
            .ends_with("/job.sh")
    );
    std::fs::write(ws.join("job.sh"), "touch pwned\n").unwrap();
    let run = approved(&gw, &plan, Value::Null).await;
    assert_eq!(error_code(&run), "SYSTEM_RUN_DENIED", "{run}");
    assert!(
        message(&run).contains("approval script operand changed before execution"),
        "{run}"
    );
    // ... and through a shell, an interpreter's options, a wrapper.
    for argv in [
        json!(["/bin/sh", "-lc", "sh job.sh"]),
        json!(["bash", "-e", "job.sh"]),
        json!(["nice", "-n", "1", "sh", "./job.sh"]),
    ] {
        std::fs::write(ws.join("job.sh"), "echo approved\n").unwrap();
        let plan = prepare(&gw, argv.clone(), Value::Null).await;
        std::fs::write(ws.join("job.sh"), "touch pwned\n").unwrap();
        let run = approved(&gw, &plan, Value::Null).await;
        assert_eq!(error_code(&run), "SYSTEM_RUN_DENIED", "{argv}: {run}");
    }
    // `./tool`: the program is bound by the file, not its name.
    executable(&ws.join("tool"), "#!/bin/sh\necho approved\n");
    let plan = prepare(&gw, json!(["./tool"]), Value::Null).await;
    executable(&ws.join("tool.new"), "#!/bin/sh\ntouch pwned\n");
    std::fs::rename(ws.join("tool.new"), ws.join("tool")).unwrap();
    let run = approved(&gw, &plan, Value::Null).await;
    assert_eq!(error_code(&run), "SYSTEM_RUN_DENIED", "{run}");
    assert!(!ws.join("pwned").exists(), "a changed file ran");
    // Unchanged, it runs.
    std::fs::write(ws.join("job.sh"), "echo approved\n").unwrap();
    let plan = prepare(&gw, json!(["sh", "job.sh"]), Value::Null).await;
    assert_eq!(
        payload(&approved(&gw, &plan, Value::Null).await)["stdout"],
        "approved\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_runs_its_plan_once() {
    let (gw, node) = connected(Config::default(), &["--approval", "gateway"]).await;
    let plan = prepare(
        &gw,
        json!(["/bin/sh", "-lc", "echo x >> count"]),
        Value::Null,
    )
    .await;
    assert_eq!(
        payload(&approved(&gw, &plan, Value::Null).await)["exitCode"],
        0
    );
    for _ in 0..3 {
        let replay = approved(&gw, &plan, Value::Null).await;
        assert_eq!(error_code(&replay), "SYSTEM_RUN_DENIED", "{replay}");
    }
    let count = std::fs::read_to_string(node.ws().join("count")).unwrap();
    assert_eq!(count, "x\n", "the approved plan ran more than once");
    // Prepared twice with different variables: which one the operator saw
    // cannot be told, so neither runs.
    let shown = prepare(
        &gw,
        json!(["printenv", "GREETING"]),
        json!({"GREETING": "a"}),
    )
    .await;
    let _other = prepare(
        &gw,
        json!(["printenv", "GREETING"]),
        json!({"GREETING": "b"}),
    )
    .await;
    let run = approved(&gw, &shown, json!({"GREETING": "b"})).await;
    assert_eq!(error_code(&run), "SYSTEM_RUN_DENIED", "{run}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_answer_covers_the_script_as_it_was_shown() {
    let gw = FakeGateway::start(Config::default()).await;
    let mut node = TtyNode::start(&gw.url());
    gw.wait_hellos(1, LONG).await;
    std::fs::write(node.ws.join("job.sh"), "echo shown\n").unwrap();
    let run = |gw: &FakeGateway| {
        gw.request(
            "run_command",
            &json!({"command": ["sh", "job.sh"]}).to_string(),
            30_000,
        )
    };
    // Rewritten while the question waits: the answer does not cover it.
    let id = run(&gw);
    node.wait_prompts(1).await;
    std::fs::write(node.ws.join("job.sh"), "touch pwned\n").unwrap();
    node.answer("o\n");
    let result = gw.result(&id, LONG).await;
    assert_eq!(error_code(&result), "SYSTEM_RUN_DENIED", "{result}");
    assert!(!node.ws.join("pwned").exists());
    // "Always" covers the script as it was: changed, it is asked again.
    std::fs::write(node.ws.join("job.sh"), "echo shown\n").unwrap();
    let id = run(&gw);
    node.wait_prompts(2).await;
    node.answer("a\n");
    assert_eq!(payload(&gw.result(&id, LONG).await)["stdout"], "shown\n");
    assert_eq!(
        payload(
            &gw.invoke("run_command", json!({"command": ["sh", "job.sh"]}))
                .await
        )["stdout"],
        "shown\n"
    );
    assert_eq!(node.prompts(), 2, "an unchanged script was asked again");
    std::fs::write(node.ws.join("job.sh"), "echo changed\n").unwrap();
    let id = run(&gw);
    node.wait_prompts(3).await;
    node.answer("d\n");
    assert_eq!(error_code(&gw.result(&id, LONG).await), "USER_REJECTED");
}

#[tokio::test(flavor = "multi_thread")]
async fn forbidden_rules_hold_for_every_spelling_whoever_approved() {
    // Should a rule ever fail, what it let through must not wipe the
    // machine running the tests: `rm`, `find`, `mv`, `chmod`, `chown` and
    // `xargs` on the node's PATH only say they ran.
    let bin = tempfile::tempdir().unwrap();
    for name in ["rm", "find", "mv", "chmod", "chown", "xargs"] {
        executable(&bin.path().join(name), "#!/bin/sh\necho \"ran $0 $*\"\n");
    }
    let path = std::env::join_paths(
        std::iter::once(bin.path().to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let gw = FakeGateway::start(Config::default()).await;
    let _node = Node::start_with_env(
        &gw.url(),
        &["--token", TOKEN, "--approval", "allow"],
        &[("PATH", Path::new(&path))],
    );
    gw.wait_hellos(1, LONG).await;
    // Even an allowlist entry for everything opens none of them.
    allowlist(&gw, json!(["/**"])).await;
    let home = std::env::var("HOME").unwrap();
    for argv in [
        json!(["rm", "-f", "-r", "/"]),
        json!(["rm", "/", "-rf"]),
        json!(["rm", "-rf", "//"]),
        json!(["rm", "-rf", "/./"]),
        json!(["rm", "-rf", "/usr/"]),
        json!(["rm", "-rf", "/var"]),
        json!(["rm", "-rf", "/boot"]),
        json!(["rm", "-rf", "/home"]),
        json!(["rm", "-rf", "/root"]),
        json!(["rm", "-rf", home]),
        json!(["/bin/sh", "-c", "rm -rf $HOME"]),
        json!(["/bin/sh", "-c", "rm -rf ${HOME}"]),
        json!(["/bin/sh", "-c", "cd / && rm -rf *"]),
        json!(["/bin/sh", "-c", "r\\m -r''f /u*"]),
        json!(["find", "/", "-delete"]),
        json!(["env", "nice", "rm", "-rf", "/etc"]),
        json!(["mv", "/usr", "/tmp/x"]),
        json!(["chmod", "-R", "000", "/"]),
        json!(["chown", "-R", "nobody", "/etc"]),
        json!(["/bin/sh", "-c", "rm -rf \"$(pwd)\""]),
        json!(["/bin/sh", "-c", "echo / | xargs rm -rf"]),
        json!(["/bin/sh", "-c", "echo 'rm -rf /' | sh"]),
    ] {
        let run = gw.invoke("system.run", json!({"command": argv})).await;
        assert_eq!(error_code(&run), "FORBIDDEN", "{argv}: {run}");
    }
    // In `/` itself, `.` is `/`.
    let run = gw
        .invoke(
            "system.run",
            json!({"command": ["rm", "-rf", "."], "cwd": "/"}),
        )
        .await;
    assert_eq!(error_code(&run), "FORBIDDEN", "{run}");
    // What is not the system runs.
    let run = gw
        .invoke("system.run", json!({"command": ["rm", "-rf", "build"]}))
        .await;
    assert_eq!(
        payload(&run)["stdout"].as_str().unwrap(),
        format!("ran {}/rm -rf build\n", bin.path().display())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_always_of_a_command_that_runs_a_script_covers_one_run() {
    // OpenClaw offers no allow-always for a plan with a mutable script
    // operand (it would cover whatever the file holds later): an
    // allow-always that comes anyway is spent as allow-once.
    let (gw, node) = connected(Config::default(), &["--approval", "gateway"]).await;
    let ws = node.ws();
    std::fs::write(ws.join("job.sh"), "echo approved\n").unwrap();
    let plan = prepare(&gw, json!(["sh", "job.sh"]), Value::Null).await;
    let run = decided(&gw, &plan, Value::Null, "allow-always").await;
    assert_eq!(payload(&run)["stdout"], "approved\n", "{run}");
    std::fs::write(ws.join("job.sh"), "touch pwned\n").unwrap();
    let again = gw
        .invoke(
            "system.run",
            json!({"command": ["sh", "job.sh"], "agentId": "main", "sessionKey": "agent:main:s"}),
        )
        .await;
    assert_eq!(error_code(&again), "SYSTEM_RUN_DENIED", "{again}");
    assert!(!ws.join("pwned").exists(), "the rewritten script ran");
    // A program that runs no script file is remembered as before.
    let plan = prepare(&gw, json!(["uname", "-s"]), Value::Null).await;
    let run = decided(&gw, &plan, Value::Null, "allow-always").await;
    assert_eq!(payload(&run)["exitCode"], 0, "{run}");
    let again = gw
        .invoke(
            "system.run",
            json!({"command": ["uname", "-s"], "agentId": "main", "sessionKey": "agent:main:s"}),
        )
        .await;
    assert_eq!(payload(&again)["exitCode"], 0, "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_is_honoured_only_for_the_plan_as_prepared_for_its_agent() {
    let (gw, node) = connected(Config::default(), &["--approval", "gateway"]).await;
    let argv = json!(["/bin/sh", "-lc", "echo x >> count"]);
    let plan = prepare(&gw, argv.clone(), Value::Null).await;
    let refused = |run: &Value| {
        assert_eq!(run["ok"], false, "{run}");
    };
    // A plan this node never prepared, however well formed.
    let mut forged = plan.clone();
    forged["argv"] = json!(["/bin/sh", "-lc", "echo y >> count"]);
    forged["commandText"] = json!("/bin/sh -lc \"echo y >> count\"");
    refused(&approved(&gw, &forged, Value::Null).await);
    // Another agent's run of it, or the same plan named for another agent.
    let mut other = json!({"command": plan["argv"], "systemRunPlan": plan, "cwd": plan["cwd"], "agentId": "ops",
        "sessionKey": "agent:main:s", "approved": true, "approvalDecision": "allow-once"});
    refused(&gw.invoke("system.run", other.clone()).await);
    other["systemRunPlan"]["agentId"] = json!("ops");
    refused(&gw.invoke("system.run", other).await);
    // Spellings that would be the same elsewhere: a trailing slash, a blank.
    let mut slashed = json!({"command": plan["argv"], "systemRunPlan": plan, "agentId": "main",
        "sessionKey": "agent:main:s", "approved": true, "approvalDecision": "allow-once"});
    slashed["cwd"] = json!(format!("{}/", plan["cwd"].as_str().unwrap()));
    slashed["systemRunPlan"]["cwd"] = slashed["cwd"].clone();
    refused(&gw.invoke("system.run", slashed).await);
    let mut blank = plan.clone();
    blank["argv"][2] = json!("echo x >> count ");
    refused(&approved(&gw, &blank, Value::Null).await);
    // Prepared twice alike: the approval runs once, for both.
    let _again = prepare(&gw, argv.clone(), Value::Null).await;
    assert_eq!(
        payload(&approved(&gw, &plan, Value::Null).await)["exitCode"],
        0
    );
    refused(&approved(&gw, &plan, Value::Null).await);
    // A flood of other plans pushes this one out of memory: its approval
    // does not come back to life.
    for batch in 0..22 {
        let ids: Vec<String> = (0..50)
            .map(|i| {
                let params = json!({"command": ["echo", format!("{batch}-{i}")]}).to_string();
                gw.request("system.run.prepare", &params, 60_000)
            })
            .collect();
        for id in ids {
            gw.result(&id, LONG).await;
        }
    }
    refused(&approved(&gw, &plan, Value::Null).await);
    let count = std::fs::read_to_string(node.ws().join("count")).unwrap();
    assert_eq!(count, "x\n");
}

/// BENCHMARKS.md item 12, figures and no assertion: how long hostile
/// command lines hold the node — each sent as `system.run.prepare` (no
/// approval needed) and as `run_command` (refused: `--approval deny`; and,
/// for the libraries, run: `--approval allow`), while `system.which` is
/// asked every 10 ms beside it: the longest `system.which` round trip is
/// how long the node's one thread was held.
///
/// `CLAWBOT_BENCH_ROUTER=target/release/clawbot_router cargo test --test
/// approvals -- --ignored --nocapture bench_` (an older build the same
/// way, for before).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "benchmark: prints figures"]
async fn bench_hostile_command_lines_hold_the_node() {
    let globs: Vec<String> = (0..2_000)
        .map(|i| format!("/tmp/clawbot-bench-none/x{i}*"))
        .collect();
    let homes = vec!["~root"; 20_000].join(" ");
    // The largest libraries here (each under the hashing bound), named as
    // scripts: what a binding reads. `sh` fails on them at once.
    let mut libraries: Vec<(u64, String)> = std::fs::read_dir("/usr/lib/x86_64-linux-gnu")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            (m.is_file() && m.len() < 60 << 20).then(|| (m.len(), e.path().display().to_string()))
        })
        .collect();
    libraries.sort();
    let largest: Vec<String> = libraries
        .iter()
        .rev()
        .take(20)
        .map(|(_, p)| format!("sh {p}"))
        .collect();
    let total: u64 = libraries.iter().rev().take(20).map(|(n, _)| n).sum();
    let one = libraries.last().map(|(_, p)| p.clone()).unwrap_or_default();
    let ways: Vec<String> = (0..200)
        .map(|i| format!("sh {}{}", "./".repeat(i), one.trim_start_matches('/')))
        .collect();
    let big = format!("the 20 largest libraries as scripts ({} MiB)", total >> 20);
    let cases: Vec<(String, Value)> = vec![
        (
            "2,000 globs for rm -rf".into(),
            json!(["/bin/sh", "-c", format!("rm -rf {}", globs.join(" "))]),
        ),
        (
            "20,000 ~root words".into(),
            json!(["/bin/sh", "-c", format!("ls {homes}")]),
        ),
        (big.clone(), json!(["/bin/sh", "-c", largest.join("; ")])),
        (
            "one library named 200 ways".into(),
            json!(["/bin/sh", "-c", format!("cd / && {}", ways.join("; "))]),
        ),
        // Last: a build that reads it spins a thread from then on.
        ("sh /dev/zero".into(), json!(["sh", "/dev/zero"])),
    ];
    println!("| case | call | answered in | longest system.which meanwhile |");
    let (gw, _node) = connected(Config::default(), &["--approval", "deny"]).await;
    let gw = std::sync::Arc::new(gw);
    for (name, argv) in &cases {
        for command in ["system.run.prepare", "run_command (refused)"] {
            let (took, longest) = held(&gw, command, argv).await;
            println!("| {name} | {command} | {took} | {longest} |");
        }
    }
    let (gw, _node) = connected(Config::default(), &["--approval", "allow"]).await;
    let gw = std::sync::Arc::new(gw);
    for (name, argv) in cases
        .iter()
        .filter(|(n, _)| *n == big || n.contains("200 ways"))
    {
        let (took, longest) = held(&gw, "run_command (run)", argv).await;
        println!("| {name} | run_command (run) | {took} | {longest} |");
    }
}

/// Sends `command` for `argv`: how long its answer took, and the longest
/// `system.which` round trip meanwhile.
async fn held(gw: &std::sync::Arc<FakeGateway>, command: &str, argv: &Value) -> (String, String) {
    use std::time::{Duration, Instant};
    let command = command.split(' ').next().unwrap_or(command);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pinger = {
        let (gw, stop) = (gw.clone(), stop.clone());
        tokio::spawn(async move {
            let mut longest = Duration::ZERO;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                let id = gw.request("system.which", r#"{"bins":["sh"]}"#, 60_000);
                // The outer bound ends the wait first: `result` panics at its own.
                let _ = tokio::time::timeout(
                    Duration::from_secs(30),
                    gw.result(&id, Duration::from_secs(40)),
                )
                .await;
                longest = longest.max(t.elapsed());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            longest
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let id = gw.request(command, &json!({"command": argv}).to_string(), 60_000);
    let answer = tokio::time::timeout(
        Duration::from_secs(20),
        gw.result(&id, Duration::from_secs(30)),
    )
    .await;
    let took = match answer {
        Ok(_) => format!("{:.1} ms", started.elapsed().as_secs_f64() * 1e3),
        Err(_) => "no answer in 20 s".into(),
    };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let longest = match tokio::time::timeout(Duration::from_secs(35), pinger).await {
        Ok(Ok(d)) => format!("{:.1} ms", d.as_secs_f64() * 1e3),
        _ => "no answer".into(),
    };
    (took, longest)
}

/// What no binding can pin down is never offered for approval: the
/// gateway's prepare is refused, as OpenClaw's own node host refuses it.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_whose_code_cannot_be_bound_is_never_prepared() {
    let (gw, _node) = connected(Config::default(), &["--approval", "gateway"]).await;
    for argv in [
        json!(["python3", "-m", "json.tool"]),
        json!(["perl", "-MFoo", "-e", "1"]),
        json!(["/bin/sh", "-c", "cd \"$(mktemp -d)\" && ./x.sh"]),
    ] {
        let params = json!({"command": argv, "agentId": "main", "sessionKey": "agent:main:s"});
        let prepared = gw.invoke("system.run.prepare", params).await;
        assert_eq!(
            error_code(&prepared),
            "SYSTEM_RUN_DENIED",
            "{argv}: {prepared}"
        );
        assert!(
            message(&prepared).contains("cannot safely bind"),
            "{argv}: {prepared}"
        );
    }
    // What can be bound still is (`env -C` and a `cd` to a known place
    // are followed).
    for argv in [
        json!(["/bin/sh", "-c", "cd /tmp && ./x.sh"]),
        json!(["env", "-C", "/tmp", "sh", "x.sh"]),
    ] {
        let plan = prepare(&gw, argv.clone(), Value::Null).await;
        assert!(plan["cwd"].is_string(), "{argv}: {plan}");
    }
}
