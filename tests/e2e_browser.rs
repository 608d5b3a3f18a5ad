//! The node's browser through the real OpenClaw gateway: the operator's
//! `browser.request … target:"node"` and an agent turn whose model calls
//! OpenClaw's `browser` tool, on Debian's Chromium and the test page
//! (tests/fixtures/browser). Ignored by a plain `cargo test` (they need the
//! sandbox); `scripts/e2e.sh` brings it up and runs them.

#![cfg(target_os = "linux")]

mod common;

use common::browser::{chromium, ref_after, serve_fixtures};
use common::e2e::{RealNode, TheirNode, openclaw, turn_with_approvals};
use common::user_browser::UserBrowser;
use serde_json::{Value, json};

/// `openclaw gateway call browser.request` to the node; the route's body.
fn request(node: &str, method: &str, path: &str, body: Value, query: Value) -> Value {
    call(node, method, path, body, query)
        .unwrap_or_else(|e| panic!("browser.request {method} {path}: {e}"))
}

/// The same; the route's body, or the gateway's `error` object.
fn call(node: &str, method: &str, path: &str, body: Value, query: Value) -> Result<Value, Value> {
    let params = json!({ "method": method, "path": path, "body": body, "query": query, "target": "node", "node": node });
    let (stdout, stderr, code) = openclaw(&[
        "gateway",
        "call",
        "browser.request",
        "--params",
        &params.to_string(),
        "--timeout",
        "60000",
        "--json",
    ]);
    let answer: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!("no JSON from browser.request {method} {path}:\n{stdout}\n{stderr}")
    });
    match code {
        Some(0) => Ok(answer),
        _ if answer["ok"] == false => Err(answer["error"].clone()),
        _ => panic!("browser.request {method} {path}:\n{stdout}\n{stderr}"),
    }
}

/// A node named `name` whose browser is Debian's Chromium, or (`attach`)
/// the one at that DevTools address; local pages and risky acts allowed.
fn browser_node(name: &str, attach: Option<&str>) -> RealNode {
    let browser = chromium();
    let (flag, value) = match attach {
        Some(url) => ("--browser-cdp-url", url),
        None => ("--browser", browser.as_str()),
    };
    let node = RealNode::start(
        name,
        &[
            flag,
            value,
            "--browser-private-network",
            "--approval",
            "allow",
        ],
    );
    node.approve_surface();
    node
}

/// Opens the test page on `node`, clicks its "Change text" button by the
/// ref an ai snapshot gave, and reads the page's changed text: the tab
/// opened and that snapshot's text.
fn open_and_click(node: &str, site: &str) -> (Value, String) {
    let tab = request(
        node,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/index.html") }),
        json!({}),
    );
    let shot = request(
        node,
        "GET",
        "/snapshot",
        json!(null),
        json!({ "format": "ai" }),
    );
    let text = shot["snapshot"].as_str().unwrap().to_owned();
    let change = ref_after(&text, "button \"Change text\"");
    let clicked = request(
        node,
        "POST",
        "/act",
        json!({ "kind": "click", "ref": change }),
        json!({}),
    );
    assert_eq!(clicked["ok"], true, "{clicked}");
    assert_eq!(clicked["targetId"], tab["targetId"], "{clicked}");
    let page = request(node, "GET", "/text", json!(null), json!({}));
    assert!(
        page["text"].as_str().unwrap().contains("Text changed."),
        "{page}"
    );
    (tab, text)
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_the_operator_drives_the_nodes_browser_through_the_gateway() {
    let site = serve_fixtures();
    let node = browser_node("e2e-browser", None);
    let n = "e2e-browser";
    let (tab, text) = open_and_click(n, &site);
    assert_eq!(tab["title"], "Clawbot test page", "{tab}");
    let text = text.as_str();
    // The screenshot and the PDF arrive in the gateway's own media store.
    let shot = request(n, "POST", "/screenshot", json!({}), json!({}));
    let path = shot["path"].as_str().unwrap();
    assert!(path.contains("/media/browser/"), "{shot}");
    let png = std::fs::read(path).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let pdf = request(n, "POST", "/pdf", json!({}), json!({}));
    assert!(
        std::fs::read(pdf["path"].as_str().unwrap())
            .unwrap()
            .starts_with(b"%PDF-")
    );
    // An upload: the gateway stages its own file and sends it over
    // browser.proxy.upload.v1; the page gets it through the chooser.
    // (OpenClaw sends only files of its own inbound media.)
    let state = std::env::var("OPENCLAW_STATE_DIR").expect("the sandbox's state directory");
    let uploads = std::path::Path::new(&state).join("media/inbound");
    std::fs::create_dir_all(&uploads).unwrap();
    let file = uploads.join("e2e-notes.txt");
    std::fs::write(&file, "sent by the operator\n").unwrap();
    let attachment = ref_after(text, "button \"Attachment\"");
    let up = request(
        n,
        "POST",
        "/hooks/file-chooser",
        json!({ "paths": [file], "ref": attachment }),
        json!({}),
    );
    assert_eq!(up["ok"], true, "{up}");
    request(
        n,
        "POST",
        "/act",
        json!({ "kind": "wait", "text": "Picked e2e-notes.txt" }),
        json!({}),
    );
    let log = node.log();
    assert!(log.contains("browser.proxy.upload.v1 → ok"), "{log}");
    // A bad ref: OpenClaw's words reach the operator.
    let (stdout, stderr, _) = openclaw(&[
        "gateway",
        "call",
        "browser.request",
        "--params",
        &json!({ "method": "POST", "path": "/act", "body": { "kind": "click", "ref": "e999" }, "target": "node", "node": n }).to_string(),
        "--timeout",
        "60000",
        "--json",
    ]);
    assert!(
        format!("{stdout}{stderr}").contains("Element \\\"e999\\\" not found or not visible")
            || format!("{stdout}{stderr}").contains("Element \"e999\" not found or not visible"),
        "{stdout}\n{stderr}"
    );
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_agent_uses_the_browser_on_the_node_for_a_small_task() {
    let site = serve_fixtures();
    let node = browser_node("e2e-agent-browser", None);
    // The turn's caller holds operator.admin (a Control UI user), which
    // OpenClaw requires of a browser call routed to a node.
    let agent = |args: Value| {
        let (text, approvals) =
            turn_with_approvals(&format!("[[tool:browser {args}]]"), &|_| "deny");
        assert_eq!(approvals, 0);
        text
    };
    let on = |mut args: Value| {
        args["target"] = json!("node");
        args["node"] = json!("e2e-agent-browser");
        args
    };
    // Open, read, fill and submit the form, take a screenshot: each a turn
    // whose model calls `browser`, the refs taken from the turn before.
    let opened = agent(on(
        json!({ "action": "open", "targetUrl": format!("{site}/index.html") }),
    ));
    assert!(
        opened.contains("Clawbot test page"),
        "{opened}\n{}",
        node.log()
    );
    let read = agent(on(json!({ "action": "snapshot", "snapshotFormat": "ai" })));
    let name = ref_after(&read, "textbox \\\"Your name\\\"");
    let size = ref_after(&read, "combobox \\\"Size\\\"");
    let gift = ref_after(&read, "checkbox \\\"Gift wrap\\\"");
    let place = ref_after(&read, "button \\\"Place order\\\"");
    let ok = |answer: &str| answer.contains("\"ok\": true") || answer.contains("\"ok\":true");
    // Fill the form (a text field and a checkbox), choose a size, then
    // submit it by clicking its button's ref.
    let filled = agent(on(json!({ "action": "act", "kind": "fill", "fields": [
        { "ref": name, "type": "text", "value": "Grace" },
        { "ref": gift, "type": "checkbox", "value": true },
    ] })));
    assert!(ok(&filled), "{filled}");
    let chosen = agent(on(
        json!({ "action": "act", "kind": "select", "ref": size, "values": ["Medium"] }),
    ));
    assert!(ok(&chosen), "{chosen}");
    let clicked = agent(on(
        json!({ "action": "act", "kind": "click", "ref": place }),
    ));
    assert!(ok(&clicked), "{clicked}");
    let waited = agent(on(
        json!({ "action": "act", "kind": "wait", "text": "Thank you Grace" }),
    ));
    assert!(!waited.contains("TimeoutError"), "{waited}");
    let text = agent(on(json!({ "action": "text" })));
    assert!(
        text.contains("Thank you Grace, size m, gift wrapped."),
        "{text}"
    );
    // The screenshot is saved in the gateway's media store, whole.
    let shot = agent(on(json!({ "action": "screenshot" })));
    let at = shot
        .find("/media/browser/")
        .unwrap_or_else(|| panic!("no saved screenshot in {shot}"));
    let start = shot[..at].rfind(['"', ' ']).map_or(0, |i| i + 1);
    let end = at + shot[at..].find(".png").expect("a .png path") + 4;
    let png = std::fs::read(&shot[start..end]).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let log = node.log();
    assert!(log.matches("browser.proxy → ok").count() >= 8, "{log}");
}

/// What one node host answers on the test page, reduced to what must be
/// the same whichever host answers: names, shapes, OpenClaw's words.
fn session_on(node: &str, site: &str) -> Value {
    // The first call may reach a node whose commands were approved a
    // moment ago.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let url = format!("{site}/index.html");
    let opened = loop {
        match call(node, "POST", "/tabs/open", json!({ "url": url }), json!({})) {
            Ok(tab) => break tab,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("{node}: {e}; again");
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            Err(e) => panic!("{node} never opened the page: {e}"),
        }
    };
    let snapshot = |node| {
        request(
            node,
            "GET",
            "/snapshot",
            json!(null),
            json!({ "format": "ai" }),
        )
    };
    let first = snapshot(node);
    let text = first["snapshot"].as_str().unwrap().to_owned();
    // Every named element a model can act on, with its role.
    let mut named: Vec<String> = first["refs"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| {
            r["name"].is_string()
                && [
                    "button", "link", "textbox", "combobox", "checkbox", "heading",
                ]
                .contains(&r["role"].as_str().unwrap())
        })
        .map(|r| format!("{} {}", r["role"], r["name"]))
        .collect();
    named.sort();
    let change = ref_after(&text, "button \"Change text\"");
    let clicked = request(
        node,
        "POST",
        "/act",
        json!({ "kind": "click", "ref": change }),
        json!({}),
    );
    let page = request(node, "GET", "/text", json!(null), json!({}));
    let name = ref_after(&text, "textbox \"Your name\"");
    let typed = request(
        node,
        "POST",
        "/act",
        json!({ "kind": "type", "ref": name, "text": "Ada", "submit": true }),
        json!({}),
    );
    request(
        node,
        "POST",
        "/act",
        json!({ "kind": "wait", "text": "Thank you Ada" }),
        json!({}),
    );
    let after = snapshot(node);
    let stale = call(
        node,
        "POST",
        "/act",
        json!({ "kind": "click", "ref": "e999" }),
        json!({}),
    );
    let nowhere = call(node, "GET", "/nosuch", json!(null), json!({}));
    let tabs = request(node, "GET", "/tabs", json!(null), json!({}));
    json!({
        "opened": { "tabId": opened["tabId"], "suggestedTargetId": opened["suggestedTargetId"],
                    "type": opened["type"], "url": opened["url"] },
        "first ref": text.split("[ref=").nth(1).map(|r| &r[..1]),
        "named": named,
        "clicked": { "ok": clicked["ok"], "same tab": clicked["targetId"] == opened["targetId"],
                     "url": clicked["url"] },
        "text changed": page["text"].as_str().unwrap().contains("Text changed."),
        "typed": { "ok": typed["ok"], "same tab": typed["targetId"] == opened["targetId"] },
        "next page": after["url"].as_str().unwrap().split('?').next(),
        "next page's refs": after["snapshot"].as_str().unwrap().split("[ref=").nth(1).map(|r| &r[..1]),
        "unknown ref": stale.expect_err("e999 is no ref"),
        "unknown route": nowhere.expect_err("no such route"),
        "tabs": tabs["tabs"].as_array().unwrap().iter()
            .map(|t| json!({ "tabId": t["tabId"], "type": t["type"] }))
            .collect::<Vec<_>>(),
    })
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_our_answers_are_openclaw_node_runs_on_the_same_page() {
    let site = serve_fixtures();
    let cdp_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // node-commands.md §1.7: the config OpenClaw's node host runs Debian's
    // Chromium with, as root, headless, local pages allowed.
    let theirs = TheirNode::start(
        "e2e-cmp-openclaw",
        &json!({ "browser": {
            "enabled": true, "headless": true, "noSandbox": true,
            "executablePath": chromium(),
            "ssrfPolicy": { "dangerouslyAllowPrivateNetwork": true },
            "profiles": { "openclaw": { "cdpPort": cdp_port } },
        } }),
    );
    let ours = browser_node("e2e-cmp-ours", None);
    theirs.approve();
    let expected = session_on("e2e-cmp-openclaw", &site);
    let got = session_on("e2e-cmp-ours", &site);
    assert_eq!(
        got,
        expected,
        "ours:\n{got:#}\nopenclaw node run:\n{expected:#}\nour node's log:\n{}",
        ours.log()
    );
    // The comparison means something only if the page was driven.
    assert_eq!(got["text changed"], true);
    assert_eq!(got["next page"], format!("{site}/submitted.html"));
    assert_eq!(got["first ref"], "e");
    assert_eq!(got["next page's refs"], "f");
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_the_operator_drives_a_browser_the_node_attached_to() {
    let site = serve_fixtures();
    let user = UserBrowser::start(&format!("{site}/second.html"));
    let endpoint = format!("http://127.0.0.1:{}", user.port);
    let _node = browser_node("e2e-attached", Some(&endpoint));
    let n = "e2e-attached";
    let (tab, _) = open_and_click(n, &site);
    assert_eq!(tab["tabId"], "t1", "{tab}");
    // The user's own tab is not the agent's.
    let tabs = request(n, "GET", "/tabs", json!(null), json!({}));
    assert_eq!(tabs["tabs"].as_array().unwrap().len(), 1, "{tabs}");
    let status = request(n, "GET", "/", json!(null), json!({}));
    assert_eq!(status["attachOnly"], true, "{status}");
    assert!(user.pages().iter().any(|(_, title)| title == "Second page"));
}
