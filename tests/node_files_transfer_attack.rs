//! Hostile callers of the file transfers, through the node and the fake
//! gateway: floods of fetches and archives (every one answered, memory
//! bounded), files and trees swapped between the preflight and the call,
//! archives of trees the gateway would refuse, and a gzip bomb.

#![cfg(target_os = "linux")]

mod common;

use std::time::Duration;

use common::browser::peak_mib;
use common::gateway::Config;
use common::node::{connected, payload};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_big_fetches_is_answered_with_memory_bounded() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    std::fs::write(ws.join("eight.bin"), vec![0x5au8; 8 << 20]).unwrap();
    let ids: Vec<String> = (0..24)
        .map(|_| {
            gw.request(
                "file.fetch",
                &json!({"path": ws.join("eight.bin")}).to_string(),
                120_000,
            )
        })
        .collect();
    for id in &ids {
        let got = payload(&gw.result(id, Duration::from_secs(120)).await);
        assert_eq!(got["size"], 8 << 20, "{}", &got.to_string()[..200]);
    }
    // 24 answers of 11 MB each were sent; at most two were ever held —
    // read, queued or being written — as a transfer's slot lasts until its
    // answer is written (216 MiB measured under a parallel build's load;
    // 701 MiB when the slot ended with the read and answers piled up in
    // the outbox).
    let peak = peak_mib(node.child.id());
    eprintln!("peak resident memory: {peak} MiB");
    assert!(peak < 400, "peak resident memory {peak} MiB");
}

#[tokio::test(flavor = "multi_thread")]
async fn archives_run_one_at_a_time_and_every_one_is_answered() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    std::fs::create_dir_all(ws.join("tree/sub")).unwrap();
    for i in 0..50 {
        std::fs::write(ws.join(format!("tree/sub/f{i}.txt")), format!("{i}")).unwrap();
    }
    let ids: Vec<String> = (0..12)
        .map(|_| {
            gw.request(
                "dir.fetch",
                &json!({"path": ws.join("tree")}).to_string(),
                120_000,
            )
        })
        .collect();
    for id in &ids {
        let got = payload(&gw.result(id, Duration::from_secs(120)).await);
        assert_eq!(got["ok"], true, "{got}");
        assert_eq!(got["fileCount"], 51, "sub and its 50 files");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gzip_bomb_is_refused_before_any_archive_is_made() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    std::fs::create_dir_all(ws.join("bomb")).unwrap();
    // 5 × 15 MiB of zeros: 75 MiB unpacked, a few hundred KiB gzipped.
    for i in 0..5 {
        std::fs::write(ws.join(format!("bomb/z{i}")), vec![0u8; 15 << 20]).unwrap();
    }
    let got = payload(
        &gw.invoke(
            "dir.fetch",
            json!({"path": ws.join("bomb"), "preflightOnly": true}),
        )
        .await,
    );
    assert_eq!(got["code"], "TREE_TOO_LARGE", "{got}");
    let got = payload(
        &gw.invoke("dir.fetch", json!({"path": ws.join("bomb")}))
            .await,
    );
    assert_eq!(got["code"], "TREE_TOO_LARGE", "{got}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_swapped_between_preflight_and_archive_is_refused() {
    let (gw, node) = connected(Config::default(), &[]).await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    std::fs::create_dir_all(ws.join("tree")).unwrap();
    std::fs::write(ws.join("tree/a"), "a").unwrap();
    let pre = payload(
        &gw.invoke(
            "dir.fetch",
            json!({"path": ws.join("tree"), "preflightOnly": true}),
        )
        .await,
    );
    std::fs::rename(ws.join("tree"), ws.join("tree-old")).unwrap();
    std::fs::create_dir_all(ws.join("tree")).unwrap();
    std::fs::write(ws.join("tree/planted"), "p").unwrap();
    for command in ["dir.fetch", "dir.list"] {
        let got = payload(
            &gw.invoke(
                command,
                json!({"path": ws.join("tree"), "expectedCanonicalPath": pre["path"], "expectedBinding": pre["binding"]}),
            )
            .await,
        );
        assert_eq!(got["code"], "CANONICAL_PATH_CHANGED", "{command}: {got}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn non_utf8_and_newline_names_are_handled_without_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let (gw, node) = connected(Config::default(), &[]).await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    std::fs::create_dir_all(ws.join("odd")).unwrap();
    std::fs::write(
        ws.join("odd")
            .join(std::ffi::OsStr::from_bytes(b"bad\xffname")),
        "x",
    )
    .unwrap();
    std::fs::write(ws.join("odd/line\nbreak"), "y").unwrap();
    let listed = payload(&gw.invoke("dir.list", json!({"path": ws.join("odd")})).await);
    let names = listed["entries"].to_string();
    assert!(
        names.contains("bad\u{fffd}name") && names.contains("line\\nbreak"),
        "{names}"
    );
    let archived = payload(
        &gw.invoke(
            "dir.fetch",
            json!({"path": ws.join("odd"), "preflightOnly": true}),
        )
        .await,
    );
    assert_eq!(archived["code"], "INVALID_PATH", "{archived}");
    // Garbage parameters are answered, never a crash.
    for params in [
        json!({"path": 7}),
        json!({"path": ["/"]}),
        json!({"maxBytes": "x"}),
        json!({"path": "/\u{0}"}),
    ] {
        for command in [
            "file.fetch",
            "file.stat",
            "dir.list",
            "dir.fetch",
            "file.write",
        ] {
            let got = gw.invoke(command, params.clone()).await;
            assert!(
                got["ok"] == true || got["error"]["code"].is_string(),
                "{command} {params}: {got}"
            );
        }
    }
}
