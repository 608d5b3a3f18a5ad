//! A hostile page the agent opens in the node's own browser,
//! against the node itself (its session, memory, call times).

#![cfg(target_os = "linux")]

mod common;

use std::time::{Duration, Instant};

use common::browser::{browser_node, html, peak_mib, route_in, serve};
use common::gateway::FakeGateway;
use serde_json::{Value, json};

async fn route(gw: &FakeGateway, method: &str, path: &str, body: Value) -> Value {
    route_in(gw, method, path, body, 12_000).await
}

/// The tabs' URLs the node lists.
async fn tab_urls(gw: &FakeGateway) -> Vec<String> {
    let t = route(gw, "GET", "/tabs", json!({})).await;
    t["result"]["tabs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["url"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A page that starts hundreds of dedicated workers at once does not end
/// the agent's browser session (its tabs stay).
#[tokio::test(flavor = "multi_thread")]
async fn a_page_starting_many_workers_cannot_end_the_session() {
    let (site, _) = serve("127.0.0.1", |target| {
        if target.starts_with("/bomb") {
            return html(
                r#"<!doctype html><title>bomb</title><body>workers<script>
const src = URL.createObjectURL(new Blob(["setInterval(()=>{},1000)"]));
window.ws = [];
setTimeout(() => { for (let i = 0; i < 400; i++) window.ws.push(new Worker(src)); }, 200);
</script></body>"#
                    .into(),
            );
        }
        html("<!doctype html><title>keep</title><p>precious</p>".into())
    });
    let (gw, node) = browser_node(&["--browser-private-network"]).await;
    let keep = route(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/keep.html") }),
    )
    .await;
    assert!(keep.get("error").is_none(), "{keep}");
    let bomb = route(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/bomb.html") }),
    )
    .await;
    assert!(bomb.get("error").is_none(), "{bomb}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let start = Instant::now();
    let urls = tab_urls(&gw).await;
    let status = route(&gw, "GET", "/", json!({})).await;
    eprintln!(
        "tabs {urls:?} in {:?}; node peak {} MiB; status {}; stderr tail: {}",
        start.elapsed(),
        peak_mib(node.child.id()),
        status["result"],
        node.stderr()
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    assert!(
        urls.iter().any(|u| u.ends_with("/keep.html")),
        "the agent's tab is gone after a page started 400 workers: {urls:?}\n{}",
        node.stderr()
    );
}

/// Frames of one busy site: their renderer answers no command, so each
/// new frame's preparation hangs (10 s a command), and a page adds 300 of
/// them, past the node's 256 targets in preparation. The session goes on:
/// the ones over the cap stay paused. (Found by the attack: past the cap
/// the node closed its connection, and the agent's tabs were gone.)
#[tokio::test(flavor = "multi_thread")]
async fn a_page_adding_frames_of_a_busy_site_cannot_end_the_session() {
    let (other, _) = serve("127.0.0.2", |_| {
        html("<!doctype html><title>busy</title><script>setTimeout(() => { for (;;) {} }, 300)</script>busy".into())
    });
    let bomb = format!(
        r#"<!doctype html><title>bomb</title><body>frames<script>
let i = 0;
const add = () => {{ const f = document.createElement('iframe'); f.src = '{other}/f' + i; document.body.appendChild(f); }};
add();
setTimeout(() => {{ const t = setInterval(() => {{ for (let k = 0; k < 10; k++) {{ i++; add(); }} if (i > 320) clearInterval(t); }}, 50); }}, 1500);
</script></body>"#
    );
    let (site, _) = serve("127.0.0.1", move |target| {
        if target.starts_with("/bomb") {
            return html(bomb.clone());
        }
        html("<!doctype html><title>keep</title><p>precious</p>".into())
    });
    let (gw, node) = browser_node(&["--browser-private-network"]).await;
    let keep = route(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/keep.html") }),
    )
    .await;
    assert!(keep.get("error").is_none(), "{keep}");
    let start = Instant::now();
    let bomb = route_in(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/bomb.html") }),
        5000,
    )
    .await;
    eprintln!("open bomb: {:?} {}", start.elapsed(), bomb["error"]);
    let mut urls = Vec::new();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let start = Instant::now();
        urls = tab_urls(&gw).await;
        eprintln!(
            "{:?}: tabs {urls:?}; node peak {} MiB",
            start.elapsed(),
            peak_mib(node.child.id())
        );
        if !urls.iter().any(|u| u.ends_with("/keep.html")) {
            break;
        }
    }
    let status = route(&gw, "GET", "/", json!({})).await;
    eprintln!(
        "status lastExit {}; stderr:\n{}",
        status["result"]["lastExit"],
        node.stderr()
            .lines()
            .filter(|l| l.contains("browser"))
            .rev()
            .take(6)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        urls.iter().any(|u| u.ends_with("/keep.html")),
        "the agent's tab is gone after a page added 320 frames of a busy site: {urls:?}"
    );
}

/// Popups a page opens would count among the 8 tabs a profile keeps (the
/// oldest pruned on the agent's next open): held, Chromium's blocker lets
/// one popup through per user activation (a click), none for timers or
/// for the agent's typing.
#[tokio::test(flavor = "multi_thread")]
async fn a_page_opening_popups_cannot_make_the_node_close_the_agents_tabs() {
    let (site, _) = serve("127.0.0.1", |target| {
        if target.starts_with("/bomb") {
            return html(
                r#"<!doctype html><title>bomb</title><body>popups
<button onclick="for (let i = 0; i < 40; i++) window.open('/pop' + i, '_blank')">Go</button>
<input aria-label="Search" onkeydown="window.open('/key' + Math.random(), '_blank')">
<script>
let n = 0;
const t = setInterval(() => { window.open('/pop' + n, '_blank'); if (++n >= 40) clearInterval(t); }, 30);
</script></body>"#
                    .into(),
            );
        }
        html("<!doctype html><title>page</title><p>page</p>".into())
    });
    let (gw, node) = browser_node(&["--browser-private-network"]).await;
    let keep = route(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/keep.html"), "label": "keep" }),
    )
    .await;
    assert!(keep.get("error").is_none(), "{keep}");
    let bomb = route(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/bomb.html") }),
    )
    .await;
    assert!(bomb.get("error").is_none(), "{bomb}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let snap = common::browser::snapshot(&gw).await;
    eprintln!("tabs {:?}\n{snap}", tab_urls(&gw).await);
    let go = common::browser::ref_after(&snap, "Go");
    let clicked = route(&gw, "POST", "/act", json!({ "kind": "click", "ref": go })).await;
    eprintln!("click: {}", clicked["error"]);
    let search = common::browser::ref_after(&snap, "Search");
    let typed = route(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "type", "ref": search, "text": "weather in paris" }),
    )
    .await;
    eprintln!("type: {}", typed["error"]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = tab_urls(&gw).await;
    let start = Instant::now();
    let mine = route(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/mine.html") }),
    )
    .await;
    eprintln!("open after popups: {:?} {}", start.elapsed(), mine["error"]);
    let after = tab_urls(&gw).await;
    eprintln!(
        "{} tabs before the agent's open, {} after: {after:?}; node peak {} MiB",
        before.len(),
        after.len(),
        peak_mib(node.child.id())
    );
    assert!(
        after.iter().any(|u| u.ends_with("/keep.html")),
        "the node closed the agent's own tab to make room for the page's popups: {after:?}"
    );
}

/// One element with a long accessible name (50k chars, over the default
/// maxChars of 40k) does not hide the page: names are cut to 500 chars.
/// (Found by the attack: the snapshot said "(empty page)".)
#[tokio::test(flavor = "multi_thread")]
async fn one_long_name_cannot_hide_the_rest_of_the_page() {
    let (site, _) = serve("127.0.0.1", |_| {
        html(format!(
            r#"<!doctype html><title>hide</title><body><button aria-label="{}">x</button><button>Continue</button><p>Terms: you agree to pay</p></body>"#,
            "a".repeat(50_000)
        ))
    });
    let (gw, _node) = browser_node(&["--browser-private-network"]).await;
    let opened = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/") }),
    )
    .await;
    assert!(opened.get("error").is_none(), "{opened}");
    let start = Instant::now();
    let snap = common::browser::snapshot(&gw).await;
    eprintln!(
        "{:?}: {} chars: {}",
        start.elapsed(),
        snap.len(),
        snap.chars().take(300).collect::<String>()
    );
    assert!(
        snap.contains("Continue") && snap.contains("Terms"),
        "a 50k-char name hid the page from the agent:\n{snap}"
    );
}

/// Names are the page's words, but a bidi override in one must not reverse
/// what the agent (or a human reading its transcript) sees after it: it
/// is written out as `\u202e`.
#[tokio::test(flavor = "multi_thread")]
async fn names_carry_no_raw_bidi_overrides() {
    let (site, _) = serve("127.0.0.1", |_| {
        html("<!doctype html><title>bidi</title><body><button>Cancel \u{202e}yaP\u{202c}</button><a href=\"/x\">\u{2066}link\u{2069}</a></body>".into())
    });
    let (gw, _node) = browser_node(&["--browser-private-network"]).await;
    let opened = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/") }),
    )
    .await;
    assert!(opened.get("error").is_none(), "{opened}");
    let snap = common::browser::snapshot(&gw).await;
    eprintln!("{snap:?}");
    assert!(
        !snap.contains(['\u{202e}', '\u{202c}', '\u{2066}', '\u{2069}']),
        "raw bidi controls in the snapshot: {snap:?}"
    );
}

/// A page whose accessibility tree is huge: the call keeps its time and
/// maxChars (figures in the report; the node's peak is printed).
#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_bomb_stays_within_its_chars_and_time() {
    let (site, _) = serve("127.0.0.1", |_| {
        html(
            r#"<!doctype html><title>snap</title><body><script>
const N = +location.search.slice(1);
const frag = document.createDocumentFragment();
for (let i = 0; i < N; i++) { const d = document.createElement('span'); d.textContent = 'item ' + i; frag.appendChild(d); }
document.body.appendChild(frag);
</script></body>"#
                .into(),
        )
    });
    let (gw, node) = browser_node(&["--browser-private-network"]).await;
    let pid = node.child.id();
    for n in [20_000, 200_000] {
        let opened = route_in(
            &gw,
            "POST",
            "/navigate",
            json!({ "url": format!("{site}/?{n}") }),
            20_000,
        )
        .await;
        assert!(opened.get("error").is_none(), "{opened}");
        let start = Instant::now();
        let params = json!({ "method": "GET", "path": "/snapshot", "query": { "format": "ai", "maxChars": 2000 }, "timeoutMs": 10_000, "errorEnvelope": "browser-v1" });
        let p = common::node::payload(&gw.invoke("browser.proxy", params).await);
        let took = start.elapsed();
        let snap = p["result"]["snapshot"].as_str().unwrap_or_default();
        eprintln!(
            "{n} spans: {took:?}, {} chars, error {}; node peak {} MiB",
            snap.len(),
            p["error"],
            peak_mib(pid)
        );
        assert!(took < Duration::from_millis(11_500), "took {took:?}");
        assert!(snap.len() <= 2000 + 64, "{} chars", snap.len());
    }
}
