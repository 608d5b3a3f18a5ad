//! A hostile or broken Ollama (the stand-in of tests/common/ollama.rs on
//! 127.0.0.1:11434) and hostile parameters, through the fake gateway: the
//! node answers within the invocation's time, reads no more than its caps,
//! probes no more than OpenClaw does, follows no redirect, and keeps its
//! memory. One test at a time holds the port (its lock).

#![cfg(target_os = "linux")]

mod common;

use std::time::{Duration, Instant};

use common::gateway::Config;
use common::node::{connected, payload};
use common::ollama::{Misbehave, StandIn};
use serde_json::{Value, json};

fn refused(result: &Value) -> String {
    assert_eq!(result["ok"], false, "{result}");
    assert_eq!(result["error"]["code"], "INVALID_REQUEST", "{result}");
    result["error"]["message"].as_str().unwrap().to_owned()
}

/// The node's peak resident memory, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_thousand_models_get_at_most_800_probes_and_200_rows() {
    let ollama = StandIn::start();
    let (gw, _node) = connected(Config::default(), &[]).await;
    // None can chat: OpenClaw's probe cap ends the search.
    ollama.many(10_000, vec!["embedding"]);
    let id = gw.request("ollama.models", "{}", 90_000);
    let listed = payload(&gw.result(&id, Duration::from_secs(90)).await);
    assert_eq!(listed["models"], json!([]));
    assert_eq!(ollama.seen_at("/api/show").len(), 800);
    // All can: 200 kept, after 25 batches of 8.
    ollama.many(10_000, vec!["completion"]);
    let before = ollama.seen_at("/api/show").len();
    let id = gw.request("ollama.models", "{}", 90_000);
    let listed = payload(&gw.result(&id, Duration::from_secs(90)).await);
    let rows = listed["models"].as_array().unwrap();
    assert_eq!(rows.len(), 200);
    assert_eq!(rows[0]["name"], "m00000");
    assert_eq!(ollama.seen_at("/api/show").len() - before, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_show_drops_its_models_after_three_seconds() {
    let ollama = StandIn::start();
    ollama.misbehave("/api/show", Misbehave::Hang);
    let (gw, _node) = connected(Config::default(), &[]).await;
    let started = Instant::now();
    let listed = payload(&gw.invoke("ollama.models", json!({})).await);
    assert_eq!(listed["models"], json!([]));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(6),
        "{took:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_tags_is_not_running_after_five_seconds() {
    let ollama = StandIn::start();
    ollama.misbehave("/api/tags", Misbehave::Hang);
    let (gw, _node) = connected(Config::default(), &[]).await;
    let started = Instant::now();
    assert_eq!(
        refused(&gw.invoke("ollama.models", json!({})).await),
        "Error: Ollama is not running at http://127.0.0.1:11434"
    );
    assert!(started.elapsed() < Duration::from_secs(8));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_chat_ends_at_its_own_timeout_or_the_invocations_whichever_is_first() {
    let ollama = StandIn::start();
    ollama.misbehave("/api/chat", Misbehave::Hang);
    let (gw, _node) = connected(Config::default(), &[]).await;
    let started = Instant::now();
    let r = gw
        .invoke(
            "ollama.chat",
            json!({"model": "qwen3:0.6b", "prompt": "hi", "timeoutMs": 1500}),
        )
        .await;
    assert_eq!(
        refused(&r),
        "Error: Ollama node inference timed out after 1500ms"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(4),
        "{took:?}"
    );
    // The gateway gives 3 s; the chat's own 120 s do not outlive them:
    // the answer comes before the gateway gives up.
    let started = Instant::now();
    let id = gw.request(
        "ollama.chat",
        r#"{"model":"qwen3:0.6b","prompt":"hi"}"#,
        3_000,
    );
    let r = gw.result(&id, Duration::from_secs(10)).await;
    assert_eq!(
        refused(&r),
        "Error: Ollama node inference timed out after 2250ms"
    );
    assert!(
        started.elapsed() < Duration::from_millis(3_000),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_chat_body_is_cut_at_16_mib_and_the_node_keeps_its_memory() {
    let ollama = StandIn::start();
    ollama.misbehave("/api/chat", Misbehave::Endless);
    let (gw, node) = connected(Config::default(), &[]).await;
    let r = gw
        .invoke(
            "ollama.chat",
            json!({"model": "qwen3:0.6b", "prompt": "hi"}),
        )
        .await;
    assert_eq!(
        refused(&r),
        "Error: ollama-node-inference/api/chat: JSON response exceeds 16777216 bytes"
    );
    let peak = peak_kib(node.child.id());
    assert!(peak < 200 * 1024, "peak resident memory {peak} KiB");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_body_is_quoted_to_its_first_500_bytes() {
    let ollama = StandIn::start();
    let (gw, _node) = connected(Config::default(), &[]).await;
    ollama.misbehave("/api/chat", Misbehave::Status(500, "é".repeat(1024)));
    let message = refused(
        &gw.invoke(
            "ollama.chat",
            json!({"model": "qwen3:0.6b", "prompt": "hi"}),
        )
        .await,
    );
    let quoted = message
        .strip_prefix("Error: Ollama /api/chat failed (HTTP 500): ")
        .unwrap();
    assert_eq!(quoted, "é".repeat(250));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_is_never_followed() {
    let ollama = StandIn::start();
    let (gw, _node) = connected(Config::default(), &[]).await;
    ollama.misbehave(
        "/api/chat",
        Misbehave::Redirect("http://192.0.2.1:11434/api/chat".into()),
    );
    assert_eq!(
        refused(
            &gw.invoke(
                "ollama.chat",
                json!({"model": "qwen3:0.6b", "prompt": "hi"})
            )
            .await
        ),
        "Error: Ollama is unavailable at http://127.0.0.1:11434: redirect (HTTP 302) not followed"
    );
    assert_eq!(ollama.seen_at("/api/chat").len(), 1);
    ollama.misbehave("/api/tags", Misbehave::Redirect("/api/chat".into()));
    assert_eq!(
        refused(&gw.invoke("ollama.models", json!({})).await),
        "Error: Ollama is not running at http://127.0.0.1:11434"
    );
    assert_eq!(ollama.seen_at("/api/chat").len(), 1, "not even on loopback");
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_parameters_get_openclaws_answers() {
    let ollama = StandIn::start();
    let (gw, _node) = connected(Config::default(), &[]).await;
    let chat = |extra: Value| {
        let mut p = json!({"model": "qwen3:0.6b", "prompt": "hi"});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };
    // 128,000 UTF-16 units pass, one more does not (astral characters
    // count twice).
    let at_limit = "😀".repeat(64_000);
    assert!(
        gw.invoke("ollama.chat", chat(json!({"prompt": at_limit})))
            .await["ok"]
            == true
    );
    assert_eq!(
        refused(
            &gw.invoke(
                "ollama.chat",
                chat(json!({"prompt": format!("{at_limit}x")}))
            )
            .await
        ),
        "Error: prompt exceeds 128000 characters"
    );
    for bad in [json!(1.5), json!(0), json!(true), json!("1e999"), json!(-3)] {
        assert_eq!(
            refused(
                &gw.invoke("ollama.chat", chat(json!({"maxTokens": bad})))
                    .await
            ),
            "ToolInputError: maxTokens must be an integer between 1 and 8192",
            "{bad}"
        );
    }
    let before = ollama.seen_at("/api/chat").len();
    assert!(
        gw.invoke("ollama.chat", chat(json!({"maxTokens": " 512 "})))
            .await["ok"]
            == true
    );
    assert!(
        gw.invoke("ollama.chat", chat(json!({"max_tokens": 7})))
            .await["ok"]
            == true
    );
    let bodies: Vec<Value> = ollama.seen_at("/api/chat")[before..]
        .iter()
        .map(|s| serde_json::from_str(&s.body).unwrap())
        .collect();
    assert_eq!(bodies[0]["options"], json!({"num_predict": 512}));
    assert_eq!(bodies[1]["options"], json!({"num_predict": 7}));
    // A prompt of quotes and control characters reaches Ollama as sent.
    let tricky = "\"}],\"model\":\"evil\"\u{0}\u{1b}[2J\r\n";
    assert!(
        gw.invoke("ollama.chat", chat(json!({"prompt": tricky})))
            .await["ok"]
            == true
    );
    let last: Value =
        serde_json::from_str(&ollama.seen_at("/api/chat").last().unwrap().body).unwrap();
    assert_eq!(last["messages"][0]["content"], tricky);
    assert_eq!(last["model"], "qwen3:0.6b");
    // A flood of calls at once: every one answered.
    let ids: Vec<String> = (0..40)
        .map(|_| gw.request("ollama.models", "{}", 30_000))
        .collect();
    for id in ids {
        assert_eq!(gw.result(&id, Duration::from_secs(30)).await["ok"], true);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_chat_stops_waiting_at_once() {
    let ollama = StandIn::start();
    ollama.misbehave("/api/chat", Misbehave::Hang);
    let (gw, _node) = connected(Config::default(), &[]).await;
    let id = gw.request(
        "ollama.chat",
        r#"{"model":"qwen3:0.6b","prompt":"hi"}"#,
        60_000,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while ollama.seen_at("/api/chat").is_empty() {
        assert!(Instant::now() < deadline, "the chat never reached Ollama");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    gw.cancel(&id);
    let r = gw.result(&id, Duration::from_secs(10)).await;
    assert_eq!(r["error"]["code"], "CANCELLED", "{r}");
    assert!(started.elapsed() < Duration::from_secs(2));
}
