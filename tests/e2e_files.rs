//! OpenClaw's file transfers (file.fetch, file.stat, dir.list, dir.fetch,
//! file.write) through the real gateway: the operator's `openclaw nodes
//! invoke` (which goes through the same preflight and path policy as the
//! agent's tools), the agent's own `file_fetch`/`dir_list`/`dir_fetch`/
//! `file_write` called by the fake model, our confinement where the gateway
//! allows everything, our approval policy, and `openclaw node run`'s answers
//! on the same files. Ignored by a plain `cargo test` (they need the
//! sandbox); `scripts/e2e.sh` brings it up and runs them.

#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use common::e2e::{
    RealNode, TheirNode, nodes_invoke, openclaw, openclaw_json, turn_with_approvals,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const COMMANDS: [&str; 5] = [
    "file.fetch",
    "file.stat",
    "dir.list",
    "dir.fetch",
    "file.write",
];
/// The gateway configured for file transfers while it lives: the five
/// commands allowed, and `policy` as the file-transfer plugin's config;
/// the allow list it found is put back after (other suites rely on it).
struct Configured {
    allowed: Value,
}

impl Configured {
    fn new(policy: Value) -> Self {
        let allowed = openclaw_json(&["config", "get", "gateway.nodes.commands.allow", "--json"]);
        let mut allow: Vec<Value> = allowed.as_array().cloned().unwrap_or_default();
        allow.extend(COMMANDS.iter().map(|c| json!(c)));
        set("gateway.nodes.commands.allow", &Value::Array(allow));
        set("plugins.entries.file-transfer.config", &policy);
        Configured { allowed }
    }
}

impl Drop for Configured {
    fn drop(&mut self) {
        set("gateway.nodes.commands.allow", &self.allowed);
        let _ = openclaw(&["config", "unset", "plugins.entries.file-transfer.config"]);
    }
}

fn set(key: &str, value: &Value) {
    let (out, err, code) = openclaw(&["config", "set", key, &value.to_string(), "--strict-json"]);
    assert_eq!(code, Some(0), "config set {key}: {out}\n{err}");
}

/// policyVersion 2, one node's rules (by display name, or `*`).
fn policy(node: &str, rules: Value) -> Value {
    json!({ "policyVersion": 2, "nodes": { node: rules } })
}

/// Reads under the workspace, writes under its `out/`, nothing under
/// `secret/`; symlinks refused.
fn ws_rules(ws: &str) -> Value {
    json!({
        "ask": "off",
        "allowReadPaths": [ws, format!("{ws}/**")],
        "allowWritePaths": [format!("{ws}/out/**")],
        "denyPaths": [format!("{ws}/secret/**")],
        "followSymlinks": false,
    })
}

/// `openclaw nodes invoke` of a file command: the gateway's answer
/// (`{ok, payload}` or `{ok:false, error}`).
fn invoke(node: &str, command: &str, params: Value) -> Value {
    // Generous: the debug build hashes and encodes 16 MiB slowly.
    let invoked = nodes_invoke(node, command, &params, Some(120_000));
    let said = invoked.said;
    invoked
        .json
        .unwrap_or_else(|| json!({ "ok": false, "raw": said }))
}

/// The same, retried while the gateway has not taken the new policy yet.
fn invoke_when_ready(node: &str, command: &str, params: Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = invoke(node, command, params.clone());
        let text = got.to_string();
        let waiting = [
            "NO_POLICY",
            "not allowed",
            "unknown node",
            "not connected",
            "POLICY_MIGRATION",
        ]
        .iter()
        .any(|w| text.contains(w));
        if !waiting || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn payload(answer: &Value) -> &Value {
    assert_eq!(answer["ok"], true, "the invoke failed: {answer}");
    &answer["payload"]
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decoded(text: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text.as_str().unwrap())
        .unwrap()
}

/// The node's audit lines for `command` so far.
fn audited(node: &RealNode, command: &str) -> usize {
    let log =
        std::fs::read_to_string(node._dir.path().join("state/audit.jsonl")).unwrap_or_default();
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["command"] == command)
        .count()
}

/// Files both nodes are asked about: a text, a PNG, a tree, a link.
fn fixture(ws: &Path) {
    std::fs::write(ws.join("a.txt"), "hello from the node\n").unwrap();
    std::fs::write(ws.join("pic.png"), b"\x89PNG\r\n\x1a\n0000").unwrap();
    std::fs::create_dir_all(ws.join("tree/sub")).unwrap();
    std::fs::write(ws.join("tree/one.txt"), "1").unwrap();
    std::fs::write(ws.join("tree/sub/two.json"), "{}").unwrap();
    std::fs::create_dir_all(ws.join("out")).unwrap();
    std::fs::create_dir_all(ws.join("secret")).unwrap();
    std::fs::write(ws.join("secret/key"), "k").unwrap();
    std::os::unix::fs::symlink(ws.join("a.txt"), ws.join("link-to-a")).unwrap();
}

fn node(name: &str, args: &[&str]) -> (RealNode, String) {
    let node = RealNode::start(name, args);
    let ws = std::fs::canonicalize(&node.ws).unwrap();
    fixture(&ws);
    node.approve_surface();
    (node, ws.to_str().unwrap().to_owned())
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_the_operator_fetches_lists_and_writes_through_the_path_policy() {
    let name = "e2e-files";
    // The policy names the workspace, which exists once the node does.
    let _base = Configured::new(policy("nobody", json!({})));
    let (node, ws) = node(name, &["--approval", "allow"]);
    let _configured = Configured::new(policy(name, ws_rules(&ws)));

    let got = invoke_when_ready(name, "file.fetch", json!({ "path": format!("{ws}/a.txt") }));
    let fetched = payload(&got);
    assert_eq!(fetched["ok"], true, "{got}");
    assert_eq!(fetched["path"], format!("{ws}/a.txt"));
    assert_eq!(fetched["mimeType"], "text/plain");
    let bytes = decoded(&fetched["base64"]);
    assert_eq!(bytes, b"hello from the node\n");
    assert_eq!(fetched["sha256"], sha(&bytes));
    assert_eq!(fetched["binding"]["kind"], "existing");

    // A symlink: the preflight refuses, the gateway hands that back.
    let link = invoke(
        name,
        "file.fetch",
        json!({ "path": format!("{ws}/link-to-a") }),
    );
    assert_eq!(payload(&link)["code"], "SYMLINK_REDIRECT", "{link}");

    // Outside the policy: refused by the gateway, our node never asked.
    let before = audited(&node, "file.fetch");
    let denied = invoke(name, "file.fetch", json!({ "path": "/etc/passwd" }));
    assert!(denied.to_string().contains("POLICY_DENIED"), "{denied}");
    let secret = invoke(
        name,
        "file.fetch",
        json!({ "path": format!("{ws}/secret/key") }),
    );
    assert!(secret.to_string().contains("POLICY_DENIED"), "{secret}");
    assert_eq!(audited(&node, "file.fetch"), before);

    let stat = invoke(name, "file.stat", json!({ "path": format!("{ws}/a.txt") }));
    assert_eq!(payload(&stat)["type"], "file", "{stat}");
    assert_eq!(payload(&stat)["size"], 20);

    let page = invoke(name, "dir.list", json!({ "path": ws, "maxEntries": 2 }));
    let page = payload(&page);
    assert_eq!(page["truncated"], true, "{page}");
    assert_eq!(page["nextPageToken"], "2");
    assert_eq!(page["entries"].as_array().unwrap().len(), 2);
    let next = invoke(name, "dir.list", json!({ "path": ws, "pageToken": "2" }));
    assert!(
        payload(&next)["entries"].as_array().unwrap().len() >= 4,
        "{next}"
    );

    let tree = invoke(name, "dir.fetch", json!({ "path": format!("{ws}/tree") }));
    let tree = payload(&tree);
    assert_eq!(tree["ok"], true, "{tree}");
    let tar = decoded(&tree["tarBase64"]);
    assert_eq!(tree["sha256"], sha(&tar));
    let saved = node._dir.path().join("tree.tgz");
    std::fs::write(&saved, &tar).unwrap();
    let listed = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(&saved)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("./sub/two.json"), "{listed}");

    let write = |path: &str, extra: Value| {
        let mut params =
            json!({ "path": path, "contentBase64": "aGk=", "expectedSha256": sha(b"hi") });
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        invoke(name, "file.write", params)
    };
    let out = format!("{ws}/out/n.txt");
    let wrote = write(&out, json!({}));
    assert_eq!(payload(&wrote)["ok"], true, "{wrote}");
    assert_eq!(payload(&wrote)["overwritten"], false);
    assert_eq!(std::fs::read(&out).unwrap(), b"hi");
    let again = write(&out, json!({}));
    assert_eq!(payload(&again)["code"], "EXISTS_NO_OVERWRITE", "{again}");
    let over = write(&out, json!({ "overwrite": true }));
    assert_eq!(payload(&over)["overwritten"], true, "{over}");
    let not_allowed = write(&format!("{ws}/x.txt"), json!({}));
    assert!(
        not_allowed.to_string().contains("POLICY_DENIED"),
        "{not_allowed}"
    );
    let deep = format!("{ws}/out/new/dir/f.txt");
    let missing = write(&deep, json!({}));
    assert_eq!(payload(&missing)["code"], "PARENT_NOT_FOUND", "{missing}");
    let made = write(&deep, json!({ "createParents": true }));
    assert_eq!(payload(&made)["ok"], true, "{made}");
    assert_eq!(std::fs::read(&deep).unwrap(), b"hi");
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_a_16_mib_file_arrives_whole() {
    let name = "e2e-files-big";
    let _base = Configured::new(policy("nobody", json!({})));
    let (node, ws) = node(name, &[]);
    let _configured = Configured::new(policy(name, ws_rules(&ws)));
    let mut data = Vec::with_capacity(16 << 20);
    let mut x: u32 = 12345;
    while data.len() < 16 << 20 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(16 << 20);
    std::fs::write(format!("{ws}/big.bin"), &data).unwrap();
    invoke_when_ready(
        name,
        "file.stat",
        json!({ "path": format!("{ws}/big.bin") }),
    );
    // Through the agent's `file_fetch`, which takes the answer in the
    // gateway itself (checks its size and sha256, saves it): the operator
    // CLI's own connection drops a 22 MB answer (1006) after the gateway
    // took it whole from the node.
    // The debug build needs more than the tool's default wait.
    let args = json!({ "node": name, "path": format!("{ws}/big.bin"), "maxBytes": 16 << 20, "timeoutMs": 120_000 });
    let (text, _) = turn_with_approvals(&format!("[[tool:file_fetch {args}]]"), &|_| "deny");
    assert!(text.contains(&format!("Fetched {ws}/big.bin")), "{text}");
    assert!(text.contains(&sha(&data)[..12]), "{text}");
    let saved = text
        .split("saved at ")
        .nth(1)
        // The tool's text comes back JSON-escaped inside the model's echo.
        .and_then(|rest| {
            rest.split(|c: char| c.is_whitespace() || c == '\\' || c == '"')
                .next()
        })
        .unwrap_or_else(|| panic!("no saved path in {text}"));
    assert_eq!(sha(&std::fs::read(saved).unwrap()), sha(&data));
    drop(node);
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_our_confinement_holds_where_the_gateway_allows_everything() {
    let name = "e2e-files-open";
    let _configured = Configured::new(policy(
        "*",
        json!({ "ask": "off", "allowReadPaths": ["/**"], "allowWritePaths": ["/**"], "followSymlinks": true }),
    ));
    let (node, ws) = node(name, &["--approval", "allow"]);
    let outside = node._dir.path().join("outside.txt");
    std::fs::write(&outside, "not yours").unwrap();
    let outside = std::fs::canonicalize(outside).unwrap();
    let got = invoke_when_ready(name, "file.fetch", json!({ "path": outside }));
    assert_eq!(payload(&got)["code"], "PATH_OUTSIDE_WORKSPACE", "{got}");
    assert!(
        payload(&got)["message"]
            .as_str()
            .unwrap()
            .contains("--file-root")
    );
    let state = invoke(
        name,
        "dir.list",
        json!({ "path": node._dir.path().join("state") }),
    );
    assert_eq!(payload(&state)["code"], "PATH_OUTSIDE_WORKSPACE", "{state}");
    let write = invoke(
        name,
        "file.write",
        json!({ "path": node._dir.path().join("planted.txt"), "contentBase64": "aGk=" }),
    );
    assert_eq!(payload(&write)["code"], "PATH_OUTSIDE_WORKSPACE", "{write}");
    assert!(!node._dir.path().join("planted.txt").exists());
    // A symlink followed (the policy allows it) still stays inside.
    std::os::unix::fs::symlink(&outside, format!("{ws}/escape")).unwrap();
    let escape = invoke(
        name,
        "file.fetch",
        json!({ "path": format!("{ws}/escape") }),
    );
    assert_eq!(
        payload(&escape)["code"],
        "PATH_OUTSIDE_WORKSPACE",
        "{escape}"
    );
    assert!(!escape.to_string().contains("not yours"));
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_approval_deny_refuses_a_write_with_nothing_written() {
    let name = "e2e-files-deny";
    let _base = Configured::new(policy("nobody", json!({})));
    let (node, ws) = node(name, &["--approval", "deny"]);
    let _configured = Configured::new(policy(name, ws_rules(&ws)));
    let target = format!("{ws}/out/refused.txt");
    let got = invoke_when_ready(
        name,
        "file.write",
        json!({ "path": target, "contentBase64": "aGk=" }),
    );
    // Our refusal of the preflight, handed on by the gateway.
    let text = got.to_string();
    assert!(
        text.contains("preflight failed") && text.contains("deny"),
        "{got}"
    );
    assert!(!Path::new(&target).exists());
    // Reads stay safe under deny.
    let read = invoke(name, "file.fetch", json!({ "path": format!("{ws}/a.txt") }));
    assert_eq!(payload(&read)["ok"], true, "{read}");
    drop(node);
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_the_agents_file_tools_reach_the_node() {
    let name = "e2e-files-agent";
    let _base = Configured::new(policy("nobody", json!({})));
    let (node, ws) = node(name, &["--approval", "allow"]);
    let _configured = Configured::new(policy(name, ws_rules(&ws)));
    invoke_when_ready(name, "file.stat", json!({ "path": format!("{ws}/a.txt") }));
    let turn = |tool: &str, args: Value| {
        let (text, _) = turn_with_approvals(&format!("[[tool:{tool} {args}]]"), &|_| "deny");
        text
    };
    let fetched = turn(
        "file_fetch",
        json!({ "node": name, "path": format!("{ws}/a.txt") }),
    );
    assert!(
        fetched.contains(&format!("Fetched {ws}/a.txt")),
        "{fetched}"
    );
    assert!(
        fetched.contains(&sha(b"hello from the node\n")[..12]),
        "{fetched}"
    );
    let listed = turn("dir_list", json!({ "node": name, "path": ws }));
    assert!(
        listed.contains("returnedCount") && listed.contains("a.txt"),
        "{listed}"
    );
    let tree = turn(
        "dir_fetch",
        json!({ "node": name, "path": format!("{ws}/tree") }),
    );
    assert!(
        tree.contains("rootDir") && tree.contains("fileCount"),
        "{tree}"
    );
    let wrote = turn(
        "file_write",
        json!({ "node": name, "path": format!("{ws}/out/agent.txt"), "contentBase64": "aGk=", "overwrite": false }),
    );
    assert!(
        wrote.contains(&format!("Wrote {ws}/out/agent.txt")),
        "{wrote}"
    );
    assert_eq!(std::fs::read(format!("{ws}/out/agent.txt")).unwrap(), b"hi");
    let refused = turn(
        "file_write",
        json!({ "node": name, "path": format!("{ws}/x.txt"), "contentBase64": "aGk=" }),
    );
    assert!(refused.contains("POLICY_DENIED"), "{refused}");
    drop(node);
}

/// What both nodes answer on the same files, with what may differ by node
/// (mtimes aside) left out.
fn session(name: &str, ws: &str, out: &str) -> Value {
    let fetch = |path: &str| {
        let got = invoke(
            name,
            "file.fetch",
            json!({ "path": format!("{ws}/{path}") }),
        );
        let mut p = payload(&got).clone();
        p.as_object_mut().unwrap().remove("binding");
        p
    };
    let stat = invoke(name, "file.stat", json!({ "path": format!("{ws}/a.txt") }));
    let mut stat = payload(&stat).clone();
    let keys: Vec<String> = stat.as_object().unwrap().keys().cloned().collect();
    stat.as_object_mut()
        .unwrap()
        .retain(|k, _| k == "type" || k == "size" || k == "path");
    let names = |path: &str| {
        let got = invoke(name, "dir.list", json!({ "path": path }));
        let mut names: Vec<Value> = payload(&got)["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| json!([e["name"], e["isDir"], e["mimeType"], e["size"]]))
            .collect();
        names.sort_by_key(|n| n.to_string());
        names
    };
    let tree = invoke(name, "dir.fetch", json!({ "path": format!("{ws}/tree") }));
    let tree = payload(&tree);
    let write = invoke(
        name,
        "file.write",
        json!({ "path": format!("{ws}/out/{out}"), "contentBase64": "aGk=" }),
    );
    let write = payload(&write);
    json!({
        "text": fetch("a.txt"),
        "png": fetch("pic.png"),
        "link": fetch("link-to-a")["code"],
        "missing": fetch("nope.txt"),
        "stat": stat,
        "stat keys": keys,
        "list": names(ws),
        "tree entries": tree["entries"],
        "tree fileCount": tree["fileCount"],
        "write keys": write.as_object().unwrap().keys().collect::<Vec<_>>(),
        "write": [write["ok"], write["size"], write["sha256"], write["overwritten"]],
    })
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_our_answers_are_openclaw_node_runs_on_the_same_files() {
    let ours = "e2e-files-ours";
    let theirs = "e2e-files-theirs";
    let _base = Configured::new(policy("nobody", json!({})));
    let (node, ws) = node(ours, &["--approval", "allow"]);
    let rules = ws_rules(&ws);
    let _configured =
        Configured::new(json!({ "policyVersion": 2, "nodes": { ours: rules, theirs: rules } }));
    let them = TheirNode::start(theirs, &json!({}));
    them.approve();
    invoke_when_ready(
        theirs,
        "file.stat",
        json!({ "path": format!("{ws}/a.txt") }),
    );
    invoke_when_ready(ours, "file.stat", json!({ "path": format!("{ws}/a.txt") }));
    let expected = session(theirs, &ws, "theirs.txt");
    let got = session(ours, &ws, "ours.txt");
    assert_eq!(
        got,
        expected,
        "ours:\n{got:#}\nopenclaw node run:\n{expected:#}\nour node's log:\n{}",
        node.log()
    );
    let _ = openclaw_json(&["nodes", "status", "--json"]);
}
