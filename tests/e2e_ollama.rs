//! `ollama.models` / `ollama.chat` through the real OpenClaw gateway,
//! against the stand-in Ollama of tests/common/ollama.rs on
//! 127.0.0.1:11434 (no Ollama server is packaged here): the operator's
//! `openclaw nodes invoke`, compared with OpenClaw's own `openclaw node
//! run` on the same stand-in, and an agent turn whose model calls the
//! gateway's `node_inference` tool (discover, then run). Ignored by a
//! plain `cargo test` (they need the sandbox); `scripts/e2e.sh` runs them.

#![cfg(target_os = "linux")]

mod common;

use common::e2e::{RealNode, TheirNode, nodes_invoke, turn_with_approvals};
use common::ollama::StandIn;
use serde_json::{Value, json};

/// `openclaw nodes invoke` as the docs give it: the payload, or the error
/// text the operator reads (the node's name taken out).
fn invoke(node: &str, command: &str, params: Value) -> Result<Value, String> {
    nodes_invoke(node, command, &params, Some(90_000))
        .payload()
        .map_err(|said| said.replace(node, "NODE"))
}

/// The `/api/chat` bodies the stand-in received since `from`.
fn chat_bodies(ollama: &StandIn, from: usize) -> Vec<String> {
    ollama.seen_at("/api/chat")[from..]
        .iter()
        .map(|s| s.body.clone())
        .collect()
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_ollama_answers_equal_openclaw_node_runs_on_the_same_stand_in() {
    let mut ollama = StandIn::start();
    let theirs = TheirNode::start("e2e-ollama-openclaw", &json!({}));
    let ours = RealNode::start("e2e-ollama-ours", &[]);
    theirs.approve();
    ours.approve_surface();
    let (t, o) = ("e2e-ollama-openclaw", "e2e-ollama-ours");

    let expected = invoke(t, "ollama.models", json!({})).expect("their ollama.models");
    let got = invoke(o, "ollama.models", json!({})).expect("our ollama.models");
    assert_eq!(got, expected);
    assert_eq!(
        expected["models"].as_array().unwrap().len(),
        5,
        "{expected}"
    );

    let chat = json!({"model": "qwen3:0.6b", "prompt": "Reply with exactly: pong",
                      "system": "be brief", "maxTokens": 32, "timeoutMs": 120000, "temperature": 0.2});
    let before = ollama.seen_at("/api/chat").len();
    let expected = invoke(t, "ollama.chat", chat.clone()).expect("their ollama.chat");
    let got = invoke(o, "ollama.chat", chat).expect("our ollama.chat");
    assert_eq!(got, expected);
    assert_eq!(got["timings"], json!({"loadMs": 1.5, "totalMs": 25}));
    let bodies = chat_bodies(&ollama, before);
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[1], bodies[0], "the /api/chat bodies, byte for byte");

    // Refusals: the same words from both.
    for (command, params) in [
        (
            "ollama.chat",
            json!({"model": "nomic-embed-text:latest", "prompt": "hi"}),
        ),
        (
            "ollama.chat",
            json!({"model": "qwen3:0.6b", "prompt": "hi", "maxTokens": "0"}),
        ),
        ("ollama.chat", json!({"prompt": "hi"})),
        (
            "ollama.chat",
            json!({"model": "m", "prompt": "x".repeat(128_001)}),
        ),
    ] {
        let expected = invoke(t, command, params.clone()).unwrap_err();
        let got = invoke(o, command, params).unwrap_err();
        assert_eq!(got, expected);
    }

    // Ollama gone: "not running" from both.
    ollama.stop();
    let expected = invoke(t, "ollama.models", json!({})).unwrap_err();
    let got = invoke(o, "ollama.models", json!({})).unwrap_err();
    assert!(
        expected.contains("Ollama is not running at http://127.0.0.1:11434"),
        "{expected}"
    );
    assert_eq!(got, expected);
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_an_agent_discovers_and_runs_a_model_on_the_node() {
    let ollama = StandIn::start();
    let node = RealNode::start("e2e-ollama-agent", &[]);
    node.approve_surface();
    let agent = |args: Value| {
        let (text, _) = turn_with_approvals(
            &format!("[[tool:openclaw:ollama:node_inference {args}]]"),
            &|_| "deny",
        );
        text
    };
    let found = agent(json!({"action": "discover"}));
    assert!(found.starts_with("RESULT: "), "{found}");
    assert!(
        found.contains("e2e-ollama-agent") && found.contains("qwen3:0.6b"),
        "{found}"
    );
    let ran = agent(json!({"action": "run", "node": "e2e-ollama-agent",
                           "model": "qwen3:0.6b", "prompt": "Reply with exactly: pong", "maxTokens": 16}));
    assert!(
        ran.contains("pong") && ran.contains("\"provider\""),
        "{ran}"
    );
    let sent: Value =
        serde_json::from_str(&ollama.seen_at("/api/chat").last().unwrap().body).unwrap();
    assert_eq!(sent["options"], json!({"num_predict": 16}));
    assert_eq!(sent["messages"][0]["content"], "Reply with exactly: pong");
}
