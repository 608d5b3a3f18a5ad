//! `browser.proxy` on a real Chromium (Debian's `chromium`, installed by
//! scripts/chromium.sh), driven through a fake gateway: the routes the
//! agent's `browser` tool uses, on a local test page
//! (tests/fixtures/browser), with the policy's classes, the SSRF guard,
//! files both ways, dialogs, a crashed browser and the tree's end.

#![cfg(target_os = "linux")]

mod common;

use base64::Engine;
use common::browser::{
    browser_node, chromium, get, ok, open_first_tab, ref_after, route, serve_fixtures, snapshot,
};
use common::gateway::Config;
use common::node::{connected, payload};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_whole_small_task_open_read_fill_submit_screenshot() {
    let site = serve_fixtures();
    let (gw, node) = browser_node(&["--browser-private-network"]).await;
    let connect = &gw.connects()[0];
    assert!(
        connect["caps"]
            .as_array()
            .unwrap()
            .contains(&json!("browser")),
        "{connect}"
    );
    let commands = connect["commands"].as_array().unwrap();
    assert!(
        commands.contains(&json!("browser.proxy"))
            && commands.contains(&json!("browser.proxy.upload.v1"))
    );

    let status = get(&gw, "/", json!({})).await;
    assert_eq!(status["running"], false);
    let tab = open_first_tab(&gw, &format!("{site}/index.html")).await;
    assert_eq!(tab["title"], "Clawbot test page");
    let status = get(&gw, "/", json!({})).await;
    let pid = status["pid"].as_u64().unwrap();
    // What the browser writes beyond its profile (its crash reports
    // database) stays in our state directory, not the user's ~/.config.
    assert!(
        node.state()
            .join("browser/openclaw/config/chromium/Crash Reports")
            .is_dir()
    );

    let text = snapshot(&gw).await;
    assert!(
        text.contains("- heading \"Order form\" [level=1] [ref=e1]"),
        "{text}"
    );
    let name = ref_after(&text, "textbox \"Your name\"");
    let size = ref_after(&text, "combobox \"Size\"");
    let gift = ref_after(&text, "checkbox \"Gift wrap\"");
    let change = ref_after(&text, "button \"Change text\"");

    // An element's screenshot is the element, not the page.
    let button = route(&gw, "POST", "/screenshot", json!({ "ref": change })).await;
    let png = base64::engine::general_purpose::STANDARD
        .decode(button["files"][0]["base64"].as_str().unwrap())
        .unwrap();
    let (w, h) = png_size(&png);
    assert!((20..300).contains(&w) && (10..80).contains(&h), "{w}x{h}");
    let by_css = route(&gw, "POST", "/screenshot", json!({ "element": "#change" })).await;
    let css = base64::engine::general_purpose::STANDARD
        .decode(by_css["files"][0]["base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(png_size(&css), (w, h));

    // A click the page answers, its tab named as the agent names it.
    let clicked = ok(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "click", "ref": change, "targetId": "t1" }),
    )
    .await;
    assert_eq!(clicked["ok"], true);
    assert_eq!(clicked["targetId"], tab["targetId"]);
    let page = get(&gw, "/text", json!({})).await;
    assert!(
        page["text"].as_str().unwrap().contains("Text changed."),
        "{page}"
    );
    let console = get(&gw, "/console", json!({})).await;
    assert_eq!(
        console["messages"][0]["text"], "changed the text",
        "{console}"
    );

    // Fill the form and submit it by typing Enter.
    ok(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "select", "ref": size, "values": ["Large"] }),
    )
    .await;
    ok(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "fill", "fields": [{ "ref": gift, "type": "checkbox", "value": true }] }),
    )
    .await;
    let typed = ok(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "type", "ref": name, "text": "Ada", "submit": true }),
    )
    .await;
    assert_eq!(typed["ok"], true);
    ok(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "wait", "text": "Thank you" }),
    )
    .await;
    let done = get(&gw, "/text", json!({})).await;
    assert_eq!(
        done["text"].as_str().unwrap().lines().last().unwrap(),
        "Thank you Ada, size l, gift wrapped.",
        "{done}"
    );
    // The old document's refs are gone with it.
    let stale = route(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "click", "ref": change }),
    )
    .await;
    assert_eq!(stale["error"]["status"], 500);
    assert_eq!(
        stale["error"]["body"]["error"],
        format!(
            "Element \"{change}\" not found or not visible. Run a new snapshot to see current page elements."
        )
    );

    // The screenshot travels as a file.
    let shot = route(&gw, "POST", "/screenshot", json!({})).await;
    let path = shot["result"]["path"].as_str().unwrap();
    let file = &shot["files"][0];
    assert_eq!(file["path"], path);
    assert_eq!(file["mimeType"], "image/png");
    let png = base64::engine::general_purpose::STANDARD
        .decode(file["base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        !std::path::Path::new(path).exists(),
        "sent files are not kept"
    );
    let pdf = route(&gw, "POST", "/pdf", json!({})).await;
    let pdf = base64::engine::general_purpose::STANDARD
        .decode(pdf["files"][0]["base64"].as_str().unwrap())
        .unwrap();
    assert!(pdf.starts_with(b"%PDF-"));

    // Every call was audited.
    let audit = std::fs::read_to_string(node.state().join("audit.jsonl")).unwrap();
    assert!(
        audit
            .lines()
            .filter(|l| l.contains("\"browser.proxy\""))
            .count()
            >= 10
    );

    // The browser's whole tree ends with the node, even a SIGKILLed one.
    let tree = common::descendants(pid as i32);
    assert!(tree.len() > 1, "{tree:?}");
    node.signal(libc::SIGKILL);
    common::assert_gone_in_time(&tree, "the browser of a SIGKILLed node");
}

#[tokio::test(flavor = "multi_thread")]
async fn uploads_dialogs_and_downloads() {
    let site = serve_fixtures();
    let (gw, node) = browser_node(&["--browser-allow-host", "127.0.0.1"]).await;
    ok(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/index.html") }),
    )
    .await;
    let text = snapshot(&gw).await;
    let attachment = ref_after(&text, "button \"Attachment\"");
    let ask = ref_after(&text, "button \"Ask me\"");
    let report = ref_after(&text, "link \"Download the report\"");

    // Upload: staged from the gateway's envelope, handed to the chooser.
    let upload = json!({
        "method": "POST", "path": "/hooks/file-chooser", "errorEnvelope": "browser-v1", "timeoutMs": 20000,
        "body": { "ref": attachment },
        "upload": { "envelope": "browser-upload-v1", "files": [{ "name": "../notes.txt",
            "contentBase64": base64::engine::general_purpose::STANDARD.encode("hello from the gateway\n") }] },
    });
    let answer = payload(&gw.invoke("browser.proxy.upload.v1", upload).await);
    assert_eq!(answer["result"]["ok"], true, "{answer}");
    ok(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "wait", "text": "Picked notes.txt" }),
    )
    .await;
    let page = get(&gw, "/text", json!({})).await;
    assert!(
        page["text"]
            .as_str()
            .unwrap()
            .contains("Picked notes.txt: hello from the gateway"),
        "{page}"
    );
    let staged = node.state().join("browser/uploads/.proxy-uploads");
    assert!(std::fs::read_dir(&staged).unwrap().count() == 1);
    // A path of this machine is never handed to a page.
    let hostile = route(
        &gw,
        "POST",
        "/hooks/file-chooser",
        json!({ "ref": attachment, "paths": ["/etc/passwd"] }),
    )
    .await;
    assert_eq!(hostile["error"]["status"], 400, "{hostile}");

    // A prompt: the click reports the dialog, the agent answers it.
    let clicked = ok(&gw, "POST", "/act", json!({ "kind": "click", "ref": ask })).await;
    assert_eq!(clicked["blockedByDialog"], true, "{clicked}");
    let pending = &clicked["browserState"]["dialogs"]["pending"][0];
    assert_eq!(pending["type"], "prompt");
    assert_eq!(pending["message"], "Your favourite colour?");
    let blocked = get(&gw, "/snapshot", json!({})).await;
    assert_eq!(blocked["blockedByDialog"], true);
    ok(
        &gw,
        "POST",
        "/hooks/dialog",
        json!({ "accept": true, "promptText": "teal" }),
    )
    .await;
    ok(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "wait", "text": "Answer: teal" }),
    )
    .await;
    // Armed before: answered as armed, the click finishes.
    ok(&gw, "POST", "/hooks/dialog", json!({ "accept": false })).await;
    let clicked = ok(&gw, "POST", "/act", json!({ "kind": "click", "ref": ask })).await;
    assert!(clicked.get("blockedByDialog").is_none(), "{clicked}");
    ok(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "wait", "text": "Dismissed." }),
    )
    .await;

    // A download travels back as a file.
    let got = route(
        &gw,
        "POST",
        "/download",
        json!({ "ref": report, "path": "report.txt" }),
    )
    .await;
    assert_eq!(
        got["result"]["download"]["suggestedFilename"], "report.txt",
        "{got}"
    );
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(got["files"][0]["base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(bytes, b"quarterly report: 42 widgets\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_policy_guards_what_a_page_may_reach_and_what_an_agent_may_do() {
    let site = serve_fixtures();
    // No opt-in: this machine's pages are out of reach; acting needs approval.
    let (gw, node) = browser_node(&[]).await;
    // A route nobody knows is refused before any browser starts.
    let unknown = route(&gw, "POST", "/nonsense", json!({})).await;
    assert_eq!(unknown["error"]["status"], 404, "{unknown}");
    assert!(!node.state().join("browser/openclaw").exists());
    assert_eq!(get(&gw, "/", json!({})).await["running"], false);
    let blocked = route(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/index.html") }),
    )
    .await;
    assert_eq!(blocked["error"]["status"], 400, "{blocked}");
    assert_eq!(blocked["error"]["body"]["reason"], "navigation_blocked");
    for url in [
        "file:///etc/passwd",
        "http://169.254.169.254/",
        "http://user:pw@example.com/",
    ] {
        let b = route(&gw, "POST", "/navigate", json!({ "url": url })).await;
        assert_eq!(
            b["error"]["body"]["reason"], "navigation_blocked",
            "{url}: {b}"
        );
    }
    // Evaluate is the owner's choice, and OpenClaw's refusal says so.
    let e = route(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "evaluate", "fn": "() => document.cookie" }),
    )
    .await;
    assert_eq!(e["error"]["status"], 403);
    assert_eq!(e["error"]["body"]["code"], "ACT_EVALUATE_DISABLED");

    // Under --approval deny a click is refused, a read is not.
    let (gw, _node) = connected(
        Config::default(),
        &[
            "--browser",
            &chromium(),
            "--approval",
            "deny",
            "--browser-private-network",
        ],
    )
    .await;
    ok(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/index.html") }),
    )
    .await;
    let text = snapshot(&gw).await;
    let change = ref_after(&text, "button \"Change text\"");
    let refused = gw
        .invoke(
            "browser.proxy",
            json!({ "method": "POST", "path": "/act", "body": { "kind": "click", "ref": change } }),
        )
        .await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "USER_REJECTED");
    let page = get(&gw, "/text", json!({})).await;
    assert!(
        page["text"]
            .as_str()
            .unwrap()
            .contains("Nothing submitted yet.")
    );
    // Accepting a dialog is acting, however "accept" is spelled.
    for accept in [json!(true), json!("1"), json!("true")] {
        let refused = gw
            .invoke(
                "browser.proxy",
                json!({ "method": "POST", "path": "/hooks/dialog", "body": { "accept": accept } }),
            )
            .await;
        assert_eq!(
            refused["error"]["code"], "USER_REJECTED",
            "{accept}: {refused}"
        );
    }
    // A download no route asked for is cancelled: no page fills the disk.
    ok(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/autodownload.html") }),
    )
    .await;
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let downloads = _node.state().join("browser/downloads");
    let left: Vec<_> = std::fs::read_dir(&downloads)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_browser_is_started_again_with_a_clear_status() {
    let site = serve_fixtures();
    let (gw, _node) = browser_node(&["--browser-private-network"]).await;
    ok(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/index.html") }),
    )
    .await;
    let pid = get(&gw, "/", json!({})).await["pid"].as_u64().unwrap();
    let tree = common::descendants(pid as i32);
    for p in &tree {
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    common::assert_gone_in_time(&tree, "a browser SIGKILLed by the test");
    let tab = route(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/second.html") }),
    )
    .await;
    assert!(tab.get("error").is_none(), "{tab}\n{}", _node.stderr());
    let tab = &tab["result"];
    assert_eq!(tab["title"], "Second page");
    let status = get(&gw, "/", json!({})).await;
    assert_eq!(status["running"], true);
    assert_ne!(status["pid"].as_u64().unwrap(), pid);
    assert!(
        status["lastExit"]
            .as_str()
            .unwrap()
            .starts_with("the browser stopped"),
        "{status}"
    );
    let errors = get(&gw, "/errors", json!({})).await;
    assert!(
        errors["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("second page error"),
        "{errors}"
    );
}

/// Width and height of a PNG (its IHDR).
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let be = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}
