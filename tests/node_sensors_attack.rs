//! Hostile runs of the node's camera and location (stand-ins on PATH, as
//! in tests/node_sensors.rs): a node killed outright mid-capture, and a
//! flood of captures at once.

#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::node::{LONG, payload};
use common::sensors::World;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_node_killed_outright_mid_capture_leaves_no_ffmpeg_behind() {
    let world = World::new();
    let (gw, node) = world
        .node(
            &["--camera", "--allow-command", "camera.snap"],
            &[("STANDIN_FFMPEG", "hang")],
        )
        .await;
    let _ = gw.request("camera.snap", "{}", 60_000);
    let pid = Path::new(&format!("{}.pid", world.log().display())).to_path_buf();
    let deadline = Instant::now() + LONG;
    while !pid.exists() {
        assert!(Instant::now() < deadline, "the capture never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.signal(libc::SIGKILL);
    world.wait_gone();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_captures_is_served_one_at_a_time() {
    let world = World::new();
    let (gw, _node) = world
        .node(
            &["--camera", "--allow-command", "camera.snap"],
            &[("STANDIN_FFMPEG", "slow")],
        )
        .await;
    let ids: Vec<String> = (0..6)
        .map(|_| gw.request("camera.snap", r#"{"delayMs":0}"#, 30_000))
        .collect();
    for id in ids {
        let photo = payload(&gw.result(&id, Duration::from_secs(30)).await);
        assert_eq!(photo["width"], 640);
    }
    let marks: Vec<String> = world
        .logged()
        .into_iter()
        .filter(|l| l.starts_with("start ") || l.starts_with("end "))
        .collect();
    assert_eq!(marks.len(), 12, "{marks:?}");
    for pair in marks.chunks(2) {
        assert_eq!(
            pair[0].strip_prefix("start "),
            pair[1].strip_prefix("end "),
            "captures overlapped: {marks:?}"
        );
    }
    // Still answering.
    let listed = payload(&gw.invoke("camera.list", json!({})).await);
    assert_eq!(listed["devices"].as_array().unwrap().len(), 2);
}
