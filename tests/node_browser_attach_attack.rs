//! Attacks on `--browser-cdp-url` (attach mode): the user's browser is a
//! real Chromium started by the test; the node must drive only its own
//! tabs, guard them, and leave the user's targets alone.

#![cfg(target_os = "linux")]

mod common;

use std::time::{Duration, Instant};

use common::browser::{get, html, ok, peak_mib, route, route_in, serve};
use common::gateway::Config;
use common::node::{connected, payload};
use common::user_browser::{UserBrowser, http, wait_until};
use serde_json::{Value, json};

/// A `/tabs/open` whose time runs out while the browser creates the page
/// (the agent names the time) leaves no page behind in the user's
/// browser. (Found by the attack: such pages appeared after the route
/// gave up, were taken for the user's, and nobody ever closed them.)
#[tokio::test(flavor = "multi_thread")]
async fn a_timed_out_open_leaves_no_orphan_tab() {
    let user = UserBrowser::start("data:text/html,<title>user</title>user");
    let endpoint = format!("http://127.0.0.1:{}", user.port);
    let (gw, _node) = connected(
        Config::default(),
        &["--browser-cdp-url", &endpoint, "--approval", "allow"],
    )
    .await;
    ok(&gw, "POST", "/tabs/open", json!({ "url": "about:blank" })).await;
    for ms in [2u64, 4, 6, 8, 10] {
        let _ = route_in(
            &gw,
            "POST",
            "/tabs/open",
            json!({ "url": "about:blank" }),
            ms,
        )
        .await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    ok(&gw, "POST", "/stop", json!({})).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pages = user.pages();
    assert_eq!(
        pages.len(),
        1,
        "tabs the node opened stay in the user's browser after /stop: {pages:?}"
    );
}

/// The user's tab showing `about:blank` is not taken by the node's first
/// `/tabs/open`. (Found by the attack: the existing pages' attach events
/// arrive while the route creates its page, and any blank page was taken
/// for it; the user's became `t1`, listed, navigable, closable.)
#[tokio::test(flavor = "multi_thread")]
async fn the_users_blank_tab_is_not_adopted_by_our_first_open() {
    let user = UserBrowser::start("about:blank");
    let endpoint = format!("http://127.0.0.1:{}", user.port);
    let list: Value = serde_json::from_str(&http(user.port, "GET", "/json/list")).unwrap();
    let users: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "page")
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(users.len(), 1, "{list}");
    let (gw, _node) = connected(
        Config::default(),
        &["--browser-cdp-url", &endpoint, "--approval", "allow"],
    )
    .await;
    let opened = ok(&gw, "POST", "/tabs/open", json!({ "url": "about:blank" })).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let tabs = get(&gw, "/tabs", json!({})).await;
    let ids: Vec<&str> = tabs["tabs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["targetId"].as_str())
        .collect();
    assert!(
        !ids.contains(&users[0].as_str()),
        "the user's own tab {} is a tab of the node (we opened {}): {tabs}",
        users[0],
        opened["targetId"]
    );
    // Closing "t1" closes the user's tab.
    let _ = route(&gw, "DELETE", "/tabs/t1", json!({})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let list = http(user.port, "GET", "/json/list");
    assert!(
        list.contains(users[0].as_str()),
        "the user's tab was closed by the agent: {list}"
    );
}

/// The user's service workers are neither kept nor guarded: their own
/// site on a private address keeps working once the node attaches.
/// (Found by the attack: browser-level auto-attach took their workers and
/// put the SSRF guard on them.)
#[tokio::test(flavor = "multi_thread")]
async fn the_users_service_worker_is_neither_kept_nor_guarded() {
    let (site, hits) = serve("127.0.0.1", |target| {
        if target.starts_with("/sw.js") {
            return (
                "200 OK",
                "Content-Type: text/javascript\r\n".into(),
                b"self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
self.addEventListener('fetch', (e) => e.respondWith(fetch(e.request)));"
                    .to_vec(),
            );
        }
        html(format!(
            "<title>{}</title><script>navigator.serviceWorker.register('/sw.js')</script>mine",
            if target.contains("again") {
                "Again"
            } else {
                "Mine"
            }
        ))
    });
    let mut user = UserBrowser::start(&format!("{site}/app.html"));
    let endpoint = format!("http://127.0.0.1:{}", user.port);
    wait_until("the user's page loaded", || {
        user.pages().iter().any(|(_, t)| t == "Mine")
    });
    // The service worker is installed and running.
    wait_until("the user's service worker ran", || {
        http(user.port, "GET", "/json/list").contains("service_worker")
    });
    // Control: with nobody attached, another page of theirs loads
    // through their service worker.
    http(
        user.port,
        "PUT",
        &format!("/json/new?{site}/app.html?control"),
    );
    wait_until("the control page loaded through the service worker", || {
        user.pages()
            .iter()
            .any(|(u, t)| u.ends_with("?control") && t == "Mine")
    });
    let (gw, _node) = connected(
        Config::default(),
        &["--browser-cdp-url", &endpoint, "--approval", "allow"],
    )
    .await;
    // Attach (any route that starts the browser).
    ok(&gw, "POST", "/tabs/open", json!({ "url": "about:blank" })).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The user opens another page of their own site (through their SW).
    let before = hits.lock().unwrap().len();
    http(
        user.port,
        "PUT",
        &format!("/json/new?{site}/app.html?again"),
    );
    let deadline = Instant::now() + Duration::from_secs(8);
    while Instant::now() < deadline && !user.pages().iter().any(|(_, t)| t == "Again") {
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = hits.lock().unwrap()[before..].to_vec();
    assert!(
        user.pages().iter().any(|(_, t)| t == "Again"),
        "the user's own page no longer loads once the node attached (their service worker's fetches are guarded by the node): pages {:?}, server saw {after:?}",
        user.pages()
    );
    assert!(user.alive());
}

/// A hostile "browser" answers the first exchange, then floods
/// `Target.attachedToTarget` events and never answers what the node sends
/// back: the node prepares 256 at most, leaves the rest paused, and its
/// memory stays bounded. (Found by the
/// attack: each event's preparing task waited on, 750–920 MiB in 16 s.)
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_attach_events_leaves_memory_bounded() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let hostile = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = hostile.local_addr().unwrap().port();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = std::sync::Arc::clone(&sent);
    tokio::spawn(async move {
        let Ok((stream, _)) = hostile.accept().await else {
            return;
        };
        let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
            return;
        };
        let (mut sink, mut stream) = ws.split();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let flood = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let start = std::sync::Arc::clone(&flood);
        tokio::spawn(async move {
            while let Some(Ok(m)) = stream.next().await {
                let Ok(text) = m.into_text() else { continue };
                let v: Value = serde_json::from_str(&text).unwrap_or_default();
                let method = v["method"].as_str().unwrap_or_default();
                if matches!(
                    method,
                    "Browser.getVersion" | "Target.setDiscoverTargets" | "Target.setAutoAttach"
                ) && v.get("sessionId").is_none()
                {
                    let _ = tx.send(
                        json!({ "id": v["id"], "result": { "product": "Hostile/1" } }).to_string(),
                    );
                    if method == "Target.setAutoAttach" {
                        start.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                // Everything else: never answered.
            }
        });
        let until = Instant::now() + Duration::from_secs(16);
        let mut n = 0u64;
        while Instant::now() < until {
            while let Ok(answer) = rx.try_recv() {
                if sink.send(Message::text(answer)).await.is_err() {
                    return;
                }
            }
            if !flood.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            n += 1;
            let event = json!({ "method": "Target.attachedToTarget", "params": {
                "sessionId": format!("S{n}"),
                "targetInfo": { "targetId": format!("T{n}"), "type": "page", "url": "https://users.example/", "title": "", "attached": true },
                "waitingForDebugger": true,
            }});
            if sink.feed(Message::text(event.to_string())).await.is_err() {
                return;
            }
            if n.is_multiple_of(256) {
                if sink.flush().await.is_err() {
                    return;
                }
                counter.store(n, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    let url = format!("ws://127.0.0.1:{port}/devtools/browser/x");
    let (gw, node) = connected(Config::default(), &["--browser-cdp-url", &url]).await;
    let pid = node.child.id();
    let before = peak_mib(pid);
    let params = json!({ "method": "POST", "path": "/tabs/open", "body": { "url": "about:blank" }, "timeoutMs": 8000, "errorEnvelope": "browser-v1" });
    let answer = payload(&gw.invoke("browser.proxy", params).await);
    // Let the flood go on a few seconds more while the node holds it.
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut peak = 0;
    while Instant::now() < deadline {
        peak = peak.max(peak_mib(pid));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "events sent {}, node peak {before} -> {peak} MiB; /tabs: {answer}",
        sent.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert!(
        peak < 200,
        "the node grew to {peak} MiB under an event flood"
    );
}

/// A page the agent opens in an attached browser writes nothing into the
/// user's Downloads folder (our pages' downloads are denied; the user's
/// own are left alone). (Found by the attack: nothing watched our tabs'
/// downloads there, so a page dropped files into the user's folder.)
#[tokio::test(flavor = "multi_thread")]
async fn a_page_we_open_writes_nothing_into_the_users_downloads() {
    let page = r#"<!doctype html><title>drop</title><body>
<a id="a" href="/payload.bin" download="dropped-by-agent-page.sh">x</a>
<script>document.getElementById('a').click()</script>drop</body>"#;
    let (site, _) = serve("127.0.0.2", move |target| {
        if target.starts_with("/payload.bin") {
            return (
                "200 OK",
                "Content-Type: application/octet-stream\r\n".into(),
                b"#!/bin/sh\necho pwned\n".to_vec(),
            );
        }
        html(page.into())
    });
    let user = UserBrowser::start("data:text/html,<title>user</title>user");
    let home = user.home.clone();
    let endpoint = format!("http://127.0.0.1:{}", user.port);
    let (gw, _node) = connected(
        Config::default(),
        &[
            "--browser-cdp-url",
            &endpoint,
            "--browser-allow-host",
            "127.0.0.2",
            "--approval",
            "allow",
        ],
    )
    .await;
    ok(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/drop.html") }),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut found = Vec::new();
    for d in [home.join("Downloads"), home.clone()] {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_file()) {
                found.push(e.path());
            }
        }
    }
    drop(user);
    assert!(
        found.is_empty(),
        "a page the agent opened wrote into the user's home: {found:?}"
    );
}

/// An endpoint whose Content-Length is absurd (`18446744073709551615`)
/// gets the usual clear answer and the node no panic. (Found by the
/// attack: the length was added unchecked, an overflow panic in builds
/// with overflow checks.)
#[tokio::test(flavor = "multi_thread")]
async fn a_lying_content_length_does_not_panic_discovery() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let hostile = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = hostile.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = hostile.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n{")
                    .await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    let url = format!("http://127.0.0.1:{port}");
    let (gw, mut node) = connected(Config::default(), &["--browser-cdp-url", &url]).await;
    let gw = std::sync::Arc::new(gw);
    let started = Instant::now();
    let call = {
        let gw = std::sync::Arc::clone(&gw);
        tokio::spawn(async move {
            route_in(
                &gw,
                "POST",
                "/tabs/open",
                json!({ "url": "about:blank" }),
                12000,
            )
            .await
        })
    };
    let answer = call.await.unwrap_or_else(|_| json!("no answer at all"));
    let stderr = node.stderr.lock().unwrap().clone();
    eprintln!("{:?}: {answer}\n{stderr}", started.elapsed());
    let exited = node.child.try_wait().unwrap();
    assert!(
        !stderr.contains("panicked") && exited.is_none(),
        "the node panicked (exit {exited:?}): {stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(14),
        "{:?}",
        started.elapsed()
    );
    let error = answer["error"]["body"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("the browser at"), "{answer}");
}
