//! OpenClaw's file transfers (file.fetch, file.stat, dir.list, dir.fetch,
//! file.write) through the node against the fake gateway: declared by
//! default under cap `file`, the preflight and the real call sent with one
//! idempotency key as OpenClaw's gateway sends them, a 16 MiB file whole in
//! one frame, and our approval policy on writes.

#![cfg(unix)]

mod common;

use std::time::Duration;

use base64::Engine;
use common::gateway::{Config, FakeGateway};
use common::node::{connected, error_code, payload};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The gateway's two calls, both under `key`.
async fn preflight_then_call(
    gw: &FakeGateway,
    command: &str,
    params: Value,
    key: &str,
) -> (Value, Value) {
    let mut pre = params.clone();
    pre["preflightOnly"] = json!(true);
    let id = gw.request_keyed(command, &pre.to_string(), 15_000, key);
    let pre = payload(&gw.result(&id, Duration::from_secs(15)).await);
    let mut real = params;
    real["expectedCanonicalPath"] = pre["path"].clone();
    real["expectedBinding"] = pre["binding"].clone();
    // Generous: a debug build hashes, encodes and frames 16 MiB slowly.
    let id = gw.request_keyed(command, &real.to_string(), 120_000, key);
    (pre, gw.result(&id, Duration::from_secs(120)).await)
}

#[tokio::test(flavor = "multi_thread")]
async fn file_transfers_are_declared_under_the_file_cap() {
    let (gw, _node) = connected(Config::default(), &[]).await;
    let connect = &gw.connects()[0];
    let commands = connect["commands"].to_string();
    for c in [
        "file.fetch",
        "file.stat",
        "dir.list",
        "dir.fetch",
        "file.write",
    ] {
        assert!(commands.contains(&format!("\"{c}\"")), "{c}: {commands}");
    }
    assert!(connect["caps"].as_array().unwrap().contains(&json!("file")));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_idempotency_key_twice_gets_two_full_answers() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    std::fs::write(ws.join("a.txt"), "first").unwrap();
    let path = ws.join("a.txt");
    let (pre, got) =
        preflight_then_call(&gw, "file.fetch", json!({"path": path}), "same-key").await;
    assert_eq!(pre["preflightOnly"], true);
    let got = payload(&got);
    assert_eq!(got["sha256"], sha(b"first"), "{got}");
    // A third call with the key again is answered anew, never from memory.
    std::fs::write(ws.join("a.txt"), "second").unwrap();
    let id = gw.request_keyed(
        "file.fetch",
        &json!({"path": path}).to_string(),
        15_000,
        "same-key",
    );
    let again = payload(&gw.result(&id, Duration::from_secs(15)).await);
    assert_eq!(again["sha256"], sha(b"second"), "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_16_mib_file_travels_whole_in_one_frame() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    let data: Vec<u8> = (0..16u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(ws.join("big.bin"), &data).unwrap();
    let (_, got) = preflight_then_call(
        &gw,
        "file.fetch",
        json!({"path": ws.join("big.bin"), "maxBytes": 16 << 20}),
        "k",
    )
    .await;
    let got = payload(&got);
    assert_eq!(got["size"], 16 << 20);
    assert!(got.get("truncated").is_none());
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(got["base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(sha(&bytes), sha(&data));
    assert_eq!(got["sha256"], sha(&data));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gateway_with_a_small_frame_gets_a_clear_refusal_not_a_cut_file() {
    let config = Config {
        max_payload: 256 * 1024,
        ..Config::default()
    };
    let (gw, node) = connected(config, &[]).await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    std::fs::write(ws.join("mid.bin"), vec![1u8; 300 * 1024]).unwrap();
    let got = payload(
        &gw.invoke("file.fetch", json!({"path": ws.join("mid.bin")}))
            .await,
    );
    assert_eq!(got["ok"], false, "{got}");
    assert_eq!(got["code"], "FILE_TOO_LARGE");
    assert!(
        got["message"].as_str().unwrap().contains("maxPayload"),
        "{got}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn approval_deny_refuses_a_write_at_its_preflight_and_allow_command_lets_it_run() {
    let (gw, node) = connected(Config::default(), &["--approval", "deny"]).await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    let target = ws.join("w.txt");
    let params = json!({"path": target, "contentBase64": "aGk=", "preflightOnly": true});
    assert_eq!(
        error_code(&gw.invoke("file.write", params).await),
        "USER_REJECTED"
    );
    let real = json!({"path": target, "contentBase64": "aGk="});
    assert_eq!(
        error_code(&gw.invoke("file.write", real.clone()).await),
        "USER_REJECTED"
    );
    assert!(!target.exists());
    // Reads are safe: they run under deny.
    std::fs::write(ws.join("r.txt"), "r").unwrap();
    let read = payload(
        &gw.invoke("file.stat", json!({"path": ws.join("r.txt")}))
            .await,
    );
    assert_eq!(read["type"], "file");
    drop((gw, node));
    let (gw, node) = connected(
        Config::default(),
        &["--approval", "deny", "--allow-command", "file.write"],
    )
    .await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    let real = json!({"path": ws.join("w.txt"), "contentBase64": "aGk="});
    let (_, got) = preflight_then_call(&gw, "file.write", real, "k").await;
    assert_eq!(payload(&got)["ok"], true, "{got}");
    assert_eq!(std::fs::read(ws.join("w.txt")).unwrap(), b"hi");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_root_is_reachable_and_a_path_outside_every_root_names_the_flag() {
    let extra = tempfile::tempdir().unwrap();
    let extra_real = std::fs::canonicalize(extra.path()).unwrap();
    std::fs::write(extra_real.join("shared.txt"), "shared").unwrap();
    let (gw, _node) = connected(
        Config::default(),
        &["--file-root", extra_real.to_str().unwrap()],
    )
    .await;
    let got = payload(
        &gw.invoke("file.fetch", json!({"path": extra_real.join("shared.txt")}))
            .await,
    );
    assert_eq!(got["sha256"], sha(b"shared"), "{got}");
    let outside = payload(
        &gw.invoke("file.fetch", json!({"path": "/etc/hostname"}))
            .await,
    );
    assert_eq!(outside["code"], "PATH_OUTSIDE_WORKSPACE", "{outside}");
    assert!(outside["message"].as_str().unwrap().contains("--file-root"));
}
