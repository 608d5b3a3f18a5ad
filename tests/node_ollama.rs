//! `ollama.models` and `ollama.chat` driven through the fake gateway,
//! against the stand-in Ollama of tests/common/ollama.rs on
//! 127.0.0.1:11434 (no Ollama server is packaged here): what is declared,
//! what is listed and in which order, the exact `/api/chat` body, the
//! answers and OpenClaw's error texts. Tests that need port 11434 take its
//! lock, so they run one at a time.

#![cfg(unix)]

mod common;

use common::gateway::Config;
use common::node::{connected, payload};
use common::ollama::{Misbehave, PortLock, StandIn};
use serde_json::{Value, json};

/// An `INVALID_REQUEST` answer's message.
fn refused(result: &Value) -> String {
    assert_eq!(result["ok"], false, "{result}");
    assert_eq!(result["error"]["code"], "INVALID_REQUEST", "{result}");
    result["error"]["message"].as_str().unwrap().to_owned()
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn declared_by_default_under_local_inference_and_dropped_by_no_ollama() {
    // Declared whether Ollama runs or not: nothing listens here.
    let _port = PortLock::take();
    let (gw, _node) = connected(Config::default(), &[]).await;
    let connect = &gw.connects()[0];
    let commands = strs(&connect["commands"]);
    assert!(commands.contains(&"ollama.models") && commands.contains(&"ollama.chat"));
    assert!(
        strs(&connect["caps"]).contains(&"local-inference"),
        "{connect}"
    );

    let (gw, _node) = connected(Config::default(), &["--no-ollama"]).await;
    let connect = &gw.connects()[0];
    assert!(
        !strs(&connect["commands"])
            .iter()
            .any(|c| c.starts_with("ollama."))
    );
    assert!(!strs(&connect["caps"]).contains(&"local-inference"));
    let r = gw.invoke("ollama.models", json!({})).await;
    assert_eq!(r["error"]["code"], "UNAVAILABLE", "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn models_are_the_local_chat_models_loaded_first_then_by_size_then_name() {
    let ollama = StandIn::start();
    let (gw, _node) = connected(Config::default(), &["--approval", "deny"]).await;
    let r = gw.invoke("ollama.models", json!({"ignored": [1]})).await;
    let listed = payload(&r);
    assert_eq!(
        listed,
        json!({"provider": "ollama", "models": [
            {"name": "llama3.2:1b", "loaded": true, "size": 1_321_098_329u64, "modifiedAt": "2026-11-21T09:00:00Z",
             "family": "llama", "parameterSize": "1.2B", "quantization": "Q4_K_M", "contextWindow": 16384,
             "capabilities": ["completion", "tools"]},
            {"name": "evil/../../etc/passwd:latest", "loaded": false, "size": 10, "capabilities": ["completion"]},
            {"name": "qwen3:0.6b", "loaded": false, "size": 522_653_767u64, "modifiedAt": "2026-11-20T09:00:00.123456789Z",
             "family": "qwen3", "parameterSize": "751.63M", "quantization": "Q4_K_M", "contextWindow": 40960,
             "capabilities": ["completion", "tools", "thinking"]},
            {"name": "llama3:8b", "loaded": false, "size": 4_920_753_328u64, "family": "llama", "parameterSize": "8.0B",
             "quantization": "Q4_K_M", "contextWindow": 131072, "capabilities": ["completion"]},
            {"name": "llama3.1:8b", "loaded": false, "size": 4_920_753_328u64, "family": "llama", "parameterSize": "8.0B",
             "quantization": "Q4_K_M", "contextWindow": 131072, "capabilities": ["completion"]}
        ]})
    );
    // Remote models and cloud refs are never probed; the rest are, once,
    // the loaded one first.
    let probed: Vec<String> = ollama
        .seen_at("/api/show")
        .iter()
        .map(|s| {
            serde_json::from_str::<Value>(&s.body).unwrap()["model"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(probed[0], "llama3.2:1b");
    assert_eq!(probed.len(), 8, "{probed:?}");
    assert!(
        !probed
            .iter()
            .any(|p| p.contains("remote") || p.contains("cloud"))
    );
    assert_eq!(ollama.seen_at("/api/ps").len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_sends_openclaws_body_and_answers_its_shape_and_no_log_holds_the_prompt() {
    let ollama = StandIn::start();
    let (gw, node) = connected(Config::default(), &["--approval", "deny"]).await;
    let prompt = "the secret plan: Reply with exactly: pong";
    let r = gw
        .invoke(
            "ollama.chat",
            json!({"model": " qwen3:0.6b ", "prompt": prompt, "system": "be brief", "max_tokens": "32", "temperature": 0.2}),
        )
        .await;
    assert_eq!(
        payload(&r),
        json!({"provider": "ollama", "model": "qwen3:0.6b", "response": "pong",
               "usage": {"promptTokens": 12, "completionTokens": 2},
               "timings": {"loadMs": 1.5, "totalMs": 25}})
    );
    let chats = ollama.seen_at("/api/chat");
    assert_eq!(chats.len(), 1);
    assert_eq!(
        chats[0].body,
        r#"{"model":"qwen3:0.6b","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"the secret plan: Reply with exactly: pong"}],"stream":false,"think":false,"options":{"num_predict":32,"temperature":0.2}}"#
    );
    // The steps before it: the model listed, then probed.
    let paths: Vec<String> = ollama.seen().iter().map(|s| s.path.clone()).collect();
    assert_eq!(paths, ["/api/tags", "/api/show", "/api/chat"]);
    let audit = std::fs::read_to_string(node.state().join("audit.jsonl")).unwrap();
    assert!(
        audit.contains("\"ollama.chat\"") && !audit.contains("secret"),
        "{audit}"
    );
    assert!(node.stderr().contains("ollama.chat"), "{}", node.stderr());
    assert!(!node.stderr().contains("secret"));
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_refusals_and_failures_have_openclaws_texts() {
    let ollama = StandIn::start();
    let (gw, _node) = connected(Config::default(), &[]).await;
    let chat = |model: &str| json!({"model": model, "prompt": "hi"});
    for model in [
        "nomic-embed-text:latest",
        "nocomplete:1b",
        "broken:1b",
        "remote-llama:70b",
        "kimi-k2:1t-cloud",
        "absent:1b",
    ] {
        assert_eq!(
            refused(&gw.invoke("ollama.chat", chat(model)).await),
            format!(
                "Error: Ollama model \"{model}\" is not a local chat model; discover models first"
            )
        );
    }
    assert!(
        ollama.seen_at("/api/chat").is_empty(),
        "no chat without a chat model"
    );
    assert_eq!(
        refused(&gw.invoke("ollama.chat", json!({"prompt": "hi"})).await),
        "ToolInputError: model required"
    );
    assert_eq!(
        refused(
            &gw.invoke(
                "ollama.chat",
                json!({"model": "qwen3:0.6b", "prompt": "hi", "maxTokens": 0})
            )
            .await
        ),
        "ToolInputError: maxTokens must be an integer between 1 and 8192"
    );
    let id = gw.request("ollama.chat", "[1]", 15_000);
    assert_eq!(
        refused(&gw.result(&id, common::node::LONG).await),
        "Error: node inference params must be a JSON object"
    );

    ollama.misbehave(
        "/api/chat",
        Misbehave::Status(404, r#"{"error":"model 'qwen3:0.6b' not found"}"#.into()),
    );
    assert_eq!(
        refused(&gw.invoke("ollama.chat", chat("qwen3:0.6b")).await),
        "Error: Ollama /api/chat failed (HTTP 404): model 'qwen3:0.6b' not found"
    );
    ollama.misbehave("/api/chat", Misbehave::Status(503, String::new()));
    assert_eq!(
        refused(&gw.invoke("ollama.chat", chat("qwen3:0.6b")).await),
        "Error: Ollama /api/chat failed (HTTP 503)"
    );
    ollama.misbehave("/api/chat", Misbehave::Status(200, "<html>".into()));
    assert_eq!(
        refused(&gw.invoke("ollama.chat", chat("qwen3:0.6b")).await),
        "Error: ollama-node-inference/api/chat: malformed JSON response"
    );
    ollama.misbehave(
        "/api/chat",
        Misbehave::Status(
            200,
            r#"{"message":{"content":"po"},"done_reason":"length"}"#.into(),
        ),
    );
    assert_eq!(
        refused(
            &gw.invoke(
                "ollama.chat",
                json!({"model": "qwen3:0.6b", "prompt": "hi", "maxTokens": 2})
            )
            .await
        ),
        "Error: Ollama stopped after reaching maxTokens (2); retry with a larger maxTokens value"
    );
    ollama.misbehave(
        "/api/chat",
        Misbehave::Status(200, r#"{"message":{"content":null}}"#.into()),
    );
    assert_eq!(
        refused(&gw.invoke("ollama.chat", chat("qwen3:0.6b")).await),
        "Error: Ollama /api/chat response did not contain message.content"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_ollama_stopped_models_say_not_running_and_chat_says_no_chat_model() {
    let mut ollama = StandIn::start();
    let (gw, _node) = connected(Config::default(), &[]).await;
    assert!(payload(&gw.invoke("ollama.models", json!({})).await)["models"].is_array());
    ollama.stop();
    assert_eq!(
        refused(&gw.invoke("ollama.models", json!({})).await),
        "Error: Ollama is not running at http://127.0.0.1:11434"
    );
    assert_eq!(
        refused(
            &gw.invoke(
                "ollama.chat",
                json!({"model": "qwen3:0.6b", "prompt": "hi"})
            )
            .await
        ),
        "Error: Ollama model \"qwen3:0.6b\" is not a local chat model; discover models first"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_status_from_tags_is_an_ollama_with_no_models() {
    let ollama = StandIn::start();
    ollama.misbehave("/api/tags", Misbehave::Status(500, "{}".into()));
    let (gw, _node) = connected(Config::default(), &[]).await;
    assert_eq!(
        payload(&gw.invoke("ollama.models", json!({})).await),
        json!({"provider": "ollama", "models": []})
    );
    // A failed /api/ps is only "nothing loaded".
    ollama.misbehave(
        "/api/tags",
        Misbehave::Status(
            200,
            r#"{"models":[{"name":"llama3.2:1b","size":1}]}"#.into(),
        ),
    );
    ollama.misbehave("/api/ps", Misbehave::Status(500, "oops".into()));
    let listed = payload(&gw.invoke("ollama.models", json!({})).await);
    assert_eq!(listed["models"][0]["loaded"], false, "{listed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_command_forbids_it_as_any_other() {
    let _port = PortLock::take();
    let (gw, _node) = connected(Config::default(), &["--deny-command", "ollama.chat"]).await;
    let r = gw
        .invoke("ollama.chat", json!({"model": "m", "prompt": "hi"}))
        .await;
    assert_eq!(r["ok"], false);
    assert_ne!(r["error"]["code"], "INVALID_REQUEST", "{r}");
}
