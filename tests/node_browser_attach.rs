//! `browser.proxy` on a browser the node did not launch
//! (`--browser-cdp-url`, OpenClaw's `attachOnly` profile): a real Chromium
//! started by the test as a user would start theirs, with a DevTools port
//! and a tab of the user's own. The node drives only the tabs it opens,
//! guards them as its own, leaves the user's tabs and downloads alone, and
//! never stops the browser; an endpoint that is wrong, silent or hostile
//! gets a clear answer in time.

#![cfg(target_os = "linux")]

mod common;

use std::time::{Duration, Instant};

use common::browser::{get, ok, open_first_tab, ref_after, route, serve_fixtures, snapshot};
use common::gateway::Config;
use common::node::connected;
use common::user_browser::{UserBrowser, http, wait_until};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn an_attached_browser_is_driven_only_through_the_tabs_we_open() {
    let site = serve_fixtures();
    let mut user = UserBrowser::start(&format!("{site}/second.html"));
    let endpoint = format!("http://127.0.0.1:{}", user.port);
    wait_until("the user's page loaded", || {
        user.pages().iter().any(|(_, title)| title == "Second page")
    });

    // Without the owner's opt-in, our tabs in it are guarded as in ours.
    {
        let (gw, _node) = connected(
            Config::default(),
            &["--browser-cdp-url", &endpoint, "--approval", "allow"],
        )
        .await;
        let blocked = route(
            &gw,
            "POST",
            "/tabs/open",
            json!({ "url": format!("{site}/index.html") }),
        )
        .await;
        assert!(
            blocked["error"]["body"]["error"]
                .as_str()
                .unwrap_or_default()
                .contains("Navigation blocked"),
            "{blocked}"
        );
    }

    let (gw, mut node) = connected(
        Config::default(),
        &[
            "--browser-cdp-url",
            &endpoint,
            "--browser-private-network",
            "--approval",
            "allow",
        ],
    )
    .await;
    let connect = &gw.connects()[0];
    assert!(
        connect["commands"]
            .as_array()
            .unwrap()
            .contains(&json!("browser.proxy"))
    );
    let status = get(&gw, "/", json!({})).await;
    assert_eq!(status["attachOnly"], true, "{status}");
    assert_eq!(status["cdpUrl"], endpoint);
    assert_eq!(status["pid"], Value::Null);

    // The user's tab is not ours: not listed, not touched.
    open_first_tab(&gw, &format!("{site}/index.html")).await;

    // The whole act: read, click a ref, read what the page did.
    let text = snapshot(&gw).await;
    let change = ref_after(&text, "button \"Change text\"");
    ok(
        &gw,
        "POST",
        "/act",
        json!({ "kind": "click", "ref": change }),
    )
    .await;
    let page = get(&gw, "/text", json!({})).await;
    assert!(
        page["text"].as_str().unwrap().contains("Text changed."),
        "{page}"
    );

    // A tab the user opens meanwhile loads (it is not held for us) and
    // stays theirs.
    http(
        user.port,
        "PUT",
        &format!("/json/new?{site}/second.html?mine"),
    );
    wait_until("the user's new tab loaded", || {
        user.pages()
            .iter()
            .any(|(url, title)| url.ends_with("?mine") && title == "Second page")
    });
    let tabs = get(&gw, "/tabs", json!({})).await;
    assert_eq!(tabs["tabs"].as_array().unwrap().len(), 1, "{tabs}");

    // Its downloads are its user's.
    let refused = route(&gw, "POST", "/wait/download", json!({ "timeoutMs": 1000 })).await;
    assert_eq!(refused["error"]["status"], 501, "{refused}");

    // Stop: our tab goes, the user's stay, the browser runs on.
    ok(&gw, "POST", "/stop", json!({})).await;
    wait_until("our tab closed", || {
        !user
            .pages()
            .iter()
            .any(|(url, _)| url.contains("index.html"))
    });
    assert_eq!(user.pages().len(), 2, "{:?}", user.pages());
    assert!(user.alive());

    // Killed outright, the node takes nothing of the user's with it.
    ok(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/index.html") }),
    )
    .await;
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(user.alive());
    assert!(user.pages().iter().any(|(url, _)| url.ends_with("?mine")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_silent_or_hostile_endpoint_gets_a_clear_answer_in_time() {
    // Nobody there.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = gone.local_addr().unwrap().port();
    drop(gone);
    // Accepts, then says nothing.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in silent.incoming() {
            held.push(s);
        }
    });
    // A "browser" whose WebSocket floods one endless frame.
    let hostile = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hostile_port = hostile.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = hostile.accept().await {
            tokio::spawn(async move {
                use futures_util::SinkExt;
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                let huge = "x".repeat(64 << 20);
                let _ = ws
                    .send(tokio_tungstenite::tungstenite::Message::text(huge))
                    .await;
            });
        }
    });
    for (url, words) in [
        (format!("http://127.0.0.1:{port}"), "is not reachable"),
        (format!("http://127.0.0.1:{silent_port}"), "did not answer"),
        (
            format!("ws://user:s3cret@127.0.0.1:{hostile_port}/devtools/browser/x?token=s3cret"),
            "the browser at ws://127.0.0.1",
        ),
    ] {
        let (gw, node) = connected(Config::default(), &["--browser-cdp-url", &url]).await;
        let started = Instant::now();
        let params = json!({ "method": "POST", "path": "/tabs/open", "body": { "url": "about:blank" },
                             "timeoutMs": 15000, "errorEnvelope": "browser-v1" });
        let answer = common::node::payload(&gw.invoke("browser.proxy", params).await);
        let error = answer["error"]["body"]["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(error.contains(words), "{url}: {answer}");
        assert!(
            started.elapsed() < Duration::from_secs(14),
            "{url}: {:?}",
            started.elapsed()
        );
        // The endpoint's secrets are in no answer, status or log line.
        let status = get(&gw, "/", json!({})).await;
        for seen in [
            answer.to_string(),
            status.to_string(),
            node.stderr.lock().unwrap().clone(),
        ] {
            assert!(!seen.contains("s3cret"), "{seen}");
        }
    }
}
