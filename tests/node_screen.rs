//! `screen.snapshot` and `computer.act` on the node, against the fake
//! gateway, each test on an Xvfb of its own (tests/common/desktop.rs). What
//! an action did is read back from the X server: the pointer with
//! `xdotool getmouselocation`, keys and buttons with `xev` listening on the
//! root window.

#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use common::desktop::{Events, Xvfb};
use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, error_code, payload};
use serde_json::{Value, json};

const ID: &str = "0b5c3f0e-8d1a-4c2b-9e7f-1a2b3c4d5e6f";
const OTHER: &str = "7d1e2f3a-4b5c-4d6e-8f70-81a2b3c4d5e6";

fn desktop_tools() {
    let status =
        std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/desktop.sh"))
            .status()
            .unwrap();
    assert!(status.success(), "scripts/desktop.sh");
}

async fn node_on(x: &Xvfb, args: &[&str]) -> (FakeGateway, Node) {
    desktop_tools();
    let gw = FakeGateway::start(Config::default()).await;
    let display = x.display();
    let mut all = vec!["--token", TOKEN];
    all.extend(args);
    let node = Node::start_with_env(&gw.url(), &all, &[("DISPLAY", Path::new(&display))]);
    gw.wait_hellos(1, LONG).await;
    (gw, node)
}

/// A node driving `x`, every action pre-approved.
async fn computer(x: &Xvfb) -> (FakeGateway, Node) {
    node_on(x, &["--computer", "--allow-command", "computer.act"]).await
}

fn list(connect: &Value, key: &str) -> Vec<String> {
    connect[key]
        .as_array()
        .map(|a| a.iter().map(|c| c.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

pub fn message(result: &Value) -> String {
    assert_eq!(error_code(result), "INVALID_REQUEST", "{result}");
    result["error"]["message"].as_str().unwrap().to_owned()
}

fn image(shot: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(shot["base64"].as_str().unwrap())
        .unwrap()
}

/// The size an image's own header says (PNG IHDR, JPEG SOF0/2).
fn header_size(bytes: &[u8]) -> (u64, u64) {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap()) as u64;
        return (be(16), be(20));
    }
    assert!(bytes.starts_with(&[0xFF, 0xD8]), "neither PNG nor JPEG");
    let mut at = 2;
    loop {
        let marker = bytes[at + 1];
        let len = u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]) as usize;
        if matches!(marker, 0xC0 | 0xC2) {
            let be = |i: usize| u16::from_be_bytes([bytes[i], bytes[i + 1]]) as u64;
            return (be(at + 7), be(at + 5));
        }
        at += 2 + len;
    }
}

async fn shot(gw: &FakeGateway, params: Value) -> Value {
    payload(&gw.invoke("screen.snapshot", params).await)
}

async fn act(gw: &FakeGateway, params: Value) -> Value {
    gw.invoke("computer.act", params).await
}

/// A snapshot inside execution `ID` at `refWidth`: its frame id.
async fn frame(gw: &FakeGateway, ref_width: u64) -> String {
    let s = shot(gw, json!({"executionId": ID, "maxWidth": ref_width})).await;
    s["displayFrameId"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_seen_or_driven_unless_the_owner_turns_it_on() {
    let x = Xvfb::start(640, 480);
    let (gw, _node) = node_on(&x, &[]).await;
    let connect = &gw.connects()[0];
    let commands = list(connect, "commands");
    assert!(
        !commands
            .iter()
            .any(|c| c == "screen.snapshot" || c == "computer.act")
    );
    let caps = list(connect, "caps");
    assert!(!caps.iter().any(|c| c == "screen" || c == "computer"));
    assert!(connect.get("computerUse").is_none(), "{connect}");
    for command in ["screen.snapshot", "computer.act"] {
        let r = gw.invoke(command, json!({"executionId": ID})).await;
        assert_eq!(error_code(&r), "UNAVAILABLE", "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_screen_alone_declares_the_snapshot_without_the_descriptor() {
    let x = Xvfb::start(640, 480);
    let (gw, _node) = node_on(&x, &["--screen"]).await;
    let connect = &gw.connects()[0];
    let commands = list(connect, "commands");
    assert!(commands.contains(&"screen.snapshot".to_owned()));
    assert!(!commands.contains(&"computer.act".to_owned()));
    assert!(list(connect, "caps").contains(&"screen".to_owned()));
    assert!(connect.get("computerUse").is_none(), "{connect}");
    let s = shot(&gw, json!({})).await;
    assert_eq!(
        (s["width"].clone(), s["height"].clone()),
        (json!(640), json!(480))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_computer_declares_both_caps_and_the_contracts_descriptor() {
    let x = Xvfb::start(640, 480);
    let (gw, _node) = computer(&x).await;
    let connect = &gw.connects()[0];
    let commands = list(connect, "commands");
    assert!(commands.contains(&"screen.snapshot".to_owned()));
    assert!(commands.contains(&"computer.act".to_owned()));
    let caps = list(connect, "caps");
    let at = caps.iter().position(|c| c == "screen").unwrap();
    assert_eq!(caps[at + 1], "computer", "{caps:?}");
    // OpenClaw's ComputerUseCapabilityDescriptorSchema: contractVersion 2,
    // provider {id ≤128, label ≤256, generation ≤256}, actions among its
    // v2 names (unique), targets/deliveryModes/observations among theirs,
    // features {recording, agentCursor, multiDisplay}, nothing else.
    let d = &connect["computerUse"];
    let keys: Vec<&String> = d.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "actions",
            "contractVersion",
            "deliveryModes",
            "features",
            "observations",
            "provider",
            "targets"
        ]
    );
    assert_eq!(d["contractVersion"], 2);
    assert_eq!(d["provider"]["id"], "clawbot-x11");
    let generation = d["provider"]["generation"].as_str().unwrap();
    assert!(!generation.is_empty() && generation.len() <= 256);
    assert_eq!(
        d["actions"],
        json!([
            "screenshot",
            "left_click",
            "right_click",
            "middle_click",
            "double_click",
            "triple_click",
            "mouse_move",
            "left_click_drag",
            "left_mouse_down",
            "left_mouse_up",
            "scroll",
            "type",
            "key",
            "hold_key",
            "wait"
        ])
    );
    assert_eq!(d["targets"], json!(["screen"]));
    assert_eq!(d["deliveryModes"], json!(["foreground"]));
    assert_eq!(d["observations"], json!(["image"]));
    assert_eq!(
        d["features"],
        json!({"recording": false, "agentCursor": false, "multiDisplay": false})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_display_or_xdotool_it_is_said_and_not_offered() {
    desktop_tools();
    let gw = FakeGateway::start(Config::default()).await;
    let node = Node::start_with_env(
        &gw.url(),
        &["--token", TOKEN, "--screen"],
        &[("DISPLAY", Path::new(""))],
    );
    gw.wait_hellos(1, LONG).await;
    assert!(!list(&gw.connects()[0], "commands").contains(&"screen.snapshot".to_owned()));
    node.wait_stderr(
        "--screen: no X display (DISPLAY is not set); not offered",
        LONG,
    )
    .await;
    // ffmpeg but no xdotool on PATH.
    let dir = tempfile::tempdir().unwrap();
    for program in ["ffmpeg", "ffprobe"] {
        std::os::unix::fs::symlink(which(program), dir.path().join(program)).unwrap();
    }
    let gw = FakeGateway::start(Config::default()).await;
    let node = Node::start_with_env(
        &gw.url(),
        &["--token", TOKEN, "--computer"],
        &[("DISPLAY", Path::new(":79")), ("PATH", dir.path())],
    );
    gw.wait_hellos(1, LONG).await;
    assert!(!list(&gw.connects()[0], "commands").contains(&"computer.act".to_owned()));
    node.wait_stderr("--computer: xdotool was not found; not offered", LONG)
        .await;
}

fn which(program: &str) -> std::path::PathBuf {
    common::node::which(program)
}

#[tokio::test(flavor = "multi_thread")]
async fn snapshots_come_in_openclaws_sizes_and_formats() {
    let x = Xvfb::start(1024, 768);
    let (gw, _node) = node_on(&x, &["--screen"]).await;
    // (params, format, width, height): maxWidth bounds the longest side,
    // 1600 for JPEG and 900 for PNG by default, never enlarging.
    let rows = [
        (json!({}), "jpeg", 1024, 768),
        (json!({"format": "png"}), "png", 900, 675),
        (json!({"maxWidth": 640}), "jpeg", 640, 480),
        (json!({"maxWidth": 4000, "format": "png"}), "png", 1024, 768),
        (json!({"maxWidth": 1, "quality": 0.01}), "jpeg", 1, 1),
        (json!({"quality": 1, "screenIndex": 0}), "jpeg", 1024, 768),
    ];
    for (params, format, width, height) in rows {
        let s = shot(&gw, params.clone()).await;
        assert_eq!(s["format"], format, "{params}");
        assert_eq!(
            (s["width"].as_u64(), s["height"].as_u64()),
            (Some(width), Some(height)),
            "{params}"
        );
        assert_eq!(header_size(&image(&s)), (width, height), "{params}");
        assert_eq!(s["screenIndex"], 0);
        assert!(s["displayFrameId"].as_str().unwrap().starts_with("x11:v1:"));
        let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "base64",
                "displayFrameId",
                "format",
                "height",
                "screenIndex",
                "width"
            ]
        );
    }
    // A better quality is a bigger picture.
    let low = image(&shot(&gw, json!({"quality": 0.05})).await).len();
    let high = image(&shot(&gw, json!({"quality": 1})).await).len();
    assert!(low < high, "{low} vs {high}");
    // Two pictures, two frames.
    let a = shot(&gw, json!({})).await["displayFrameId"].clone();
    let b = shot(&gw, json!({})).await["displayFrameId"].clone();
    assert_ne!(a, b);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frame_places_points_on_the_screen_it_was_taken_from() {
    let x = Xvfb::start(1024, 768);
    let (gw, _node) = computer(&x).await;
    let f = frame(&gw, 640).await;
    // Bar 20's row: (320, 240) of a 640-wide frame of 1024×768.
    let r = act(
        &gw,
        json!({"action": "mouse_move", "executionId": ID, "x": 320, "y": 240,
                           "displayFrameId": f, "refWidth": 640}),
    )
    .await;
    assert_eq!(
        payload(&r),
        json!({"ok": true, "effect": "unverifiable", "details": {"scope": "desktop"}})
    );
    assert_eq!(x.pointer(), (512, 384));
    // The same frame again, with fractions: rounded, never off the screen.
    let r = act(
        &gw,
        json!({"action": "mouse_move", "executionId": ID, "x": 639.9, "y": 0.2,
                           "displayFrameId": f, "refWidth": 640, "deliveryMode": "foreground"}),
    )
    .await;
    assert_eq!(payload(&r)["details"]["deliveryModeApplicable"], false);
    assert_eq!(x.pointer(), (1023, 0));
    assert_eq!(
        message(
            &act(
                &gw,
                json!({"action": "mouse_move", "executionId": ID, "x": 640, "y": 0,
                                 "displayFrameId": f, "refWidth": 640})
            )
            .await
        ),
        "Error: COMPUTER_INVALID_REQUEST: mouse_move coordinates are outside the captured primary-display frame"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stale_frames_are_refused_and_forgotten() {
    let x = Xvfb::start(800, 600);
    let (gw, _node) = computer(&x).await;
    let stale = |what: &str| format!("Error: COMPUTER_STALE_FRAME: {what}; take a new screenshot");
    let missing = stale("the coordinate frame is missing or no longer current");
    let mv = |f: &str, ref_width: Value| {
        json!({"action": "mouse_move", "executionId": ID, "x": 1, "y": 1,
               "displayFrameId": f, "refWidth": ref_width})
    };
    // No picture yet in this execution.
    assert_eq!(
        message(&act(&gw, mv("x11:v1:forged", json!(800))).await),
        missing
    );
    // A picture taken outside the execution places nothing in it.
    let outside = shot(&gw, json!({})).await["displayFrameId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(message(&act(&gw, mv(&outside, json!(800))).await), missing);
    // Only the last frame counts.
    let first = frame(&gw, 800).await;
    let second = frame(&gw, 800).await;
    assert_eq!(message(&act(&gw, mv(&first, json!(800))).await), missing);
    // ... and a refusal forgets even the current one.
    assert_eq!(message(&act(&gw, mv(&second, json!(800))).await), missing);
    // Another reference width.
    let f = frame(&gw, 400).await;
    assert_eq!(
        message(&act(&gw, mv(&f, json!(500))).await),
        stale("the coordinate reference width changed")
    );
    // Without refWidth, as OpenClaw's provider: the width changed.
    let f = frame(&gw, 400).await;
    let mut no_width = mv(&f, json!(1));
    no_width.as_object_mut().unwrap().remove("refWidth");
    assert_eq!(
        message(&act(&gw, no_width).await),
        stale("the coordinate reference width changed")
    );
    // The delivered width is as good as the reference width.
    let f = frame(&gw, 4000).await;
    payload(&act(&gw, mv(&f, json!(800))).await);
    payload(&act(&gw, mv(&f, json!(4000))).await);
    // A closed execution's frames are gone with it.
    let f = frame(&gw, 800).await;
    payload(
        &act(
            &gw,
            json!({"action": "__close_execution", "executionId": ID}),
        )
        .await,
    );
    assert_eq!(message(&act(&gw, mv(&f, json!(800))).await), missing);
    // Coordinates without a frame at all.
    assert_eq!(
        message(&act(&gw, json!({"action": "left_click", "executionId": ID})).await),
        missing
    );
    let f = frame(&gw, 800).await;
    assert_eq!(
        message(
            &act(
                &gw,
                json!({"action": "left_click", "executionId": ID,
                                 "displayFrameId": f, "refWidth": 800})
            )
            .await
        ),
        "Error: COMPUTER_INVALID_REQUEST: left_click coordinates are required"
    );
}

/// Each row: an action (with a fresh frame of the 1024×768 screen taken at
/// 512 wide, so its points double), and the presses it made.
#[tokio::test(flavor = "multi_thread")]
async fn every_v1_action_does_what_it_says_on_the_x_server() {
    let x = Xvfb::start(1024, 768);
    let (gw, _node) = computer(&x).await;
    let events: Events = x.listen();
    let rows: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"action": "left_click", "x": 10, "y": 20}),
            vec!["ButtonPress 1 @ (20, 40)", "ButtonRelease 1 @ (20, 40)"],
        ),
        (
            json!({"action": "right_click", "x": 11, "y": 20}),
            vec!["ButtonPress 3 @ (22, 40)", "ButtonRelease 3 @ (22, 40)"],
        ),
        (
            json!({"action": "middle_click", "x": 12, "y": 20}),
            vec!["ButtonPress 2 @ (24, 40)", "ButtonRelease 2 @ (24, 40)"],
        ),
        (
            json!({"action": "double_click", "x": 13, "y": 20}),
            vec![
                "ButtonPress 1 @ (26, 40)",
                "ButtonRelease 1 @ (26, 40)",
                "ButtonPress 1 @ (26, 40)",
                "ButtonRelease 1 @ (26, 40)",
            ],
        ),
        (
            json!({"action": "triple_click", "x": 14, "y": 20}),
            vec![
                "ButtonPress 1 @ (28, 40)",
                "ButtonRelease 1 @ (28, 40)",
                "ButtonPress 1 @ (28, 40)",
                "ButtonRelease 1 @ (28, 40)",
                "ButtonPress 1 @ (28, 40)",
                "ButtonRelease 1 @ (28, 40)",
            ],
        ),
        (
            json!({"action": "left_click", "x": 15, "y": 20, "modifiers": "ctrl"}),
            vec![
                "KeyPress Control_L",
                "ButtonPress 1 @ (30, 40)",
                "ButtonRelease 1 @ (30, 40)",
                "KeyRelease Control_L",
            ],
        ),
        (
            json!({"action": "left_click_drag", "fromX": 1, "fromY": 2, "x": 100, "y": 50, "durationMs": 50}),
            vec!["ButtonPress 1 @ (2, 4)", "ButtonRelease 1 @ (200, 100)"],
        ),
        (
            json!({"action": "left_mouse_down", "x": 3, "y": 3}),
            vec!["ButtonPress 1 @ (6, 6)"],
        ),
        (
            json!({"action": "left_mouse_up", "x": 4, "y": 4}),
            vec!["ButtonRelease 1 @ (8, 8)"],
        ),
        (
            json!({"action": "left_mouse_down"}),
            vec!["ButtonPress 1 @ (8, 8)"],
        ),
        (
            json!({"action": "left_mouse_up"}),
            vec!["ButtonRelease 1 @ (8, 8)"],
        ),
        (
            json!({"action": "scroll", "scrollDirection": "down", "scrollAmount": 2, "x": 50, "y": 50}),
            vec![
                "ButtonPress 5 @ (100, 100)",
                "ButtonRelease 5 @ (100, 100)",
                "ButtonPress 5 @ (100, 100)",
                "ButtonRelease 5 @ (100, 100)",
            ],
        ),
        (
            json!({"action": "scroll", "scrollDirection": "up", "scrollAmount": 1}),
            vec!["ButtonPress 4 @ (100, 100)", "ButtonRelease 4 @ (100, 100)"],
        ),
        (
            json!({"action": "scroll", "scrollDirection": "left", "scrollAmount": 1}),
            vec!["ButtonPress 6 @ (100, 100)", "ButtonRelease 6 @ (100, 100)"],
        ),
        (
            json!({"action": "scroll", "scrollDirection": "right", "scrollAmount": 1}),
            vec!["ButtonPress 7 @ (100, 100)", "ButtonRelease 7 @ (100, 100)"],
        ),
        (
            json!({"action": "type", "text": "a-B"}),
            vec![
                "KeyPress a",
                "KeyRelease a",
                "KeyPress minus",
                "KeyRelease minus",
                "KeyPress B",
                "KeyRelease B",
            ],
        ),
        (
            json!({"action": "key", "keys": "ctrl+shift+t"}),
            vec![
                "KeyPress Control_L",
                "KeyPress Shift_L",
                "KeyPress T",
                "KeyRelease T",
                "KeyRelease Shift_L",
                "KeyRelease Control_L",
            ],
        ),
        (
            json!({"action": "key", "keys": "Return"}),
            vec!["KeyPress Return", "KeyRelease Return"],
        ),
        (
            json!({"action": "hold_key", "keys": "alt", "durationMs": 300}),
            vec!["KeyPress Alt_L", "KeyRelease Alt_L"],
        ),
    ];
    for (mut params, expected) in rows {
        events.clear();
        let f = frame(&gw, 512).await;
        let p = params.as_object_mut().unwrap();
        p.insert("executionId".into(), ID.into());
        if p.contains_key("x") {
            p.insert("displayFrameId".into(), f.into());
            p.insert("refWidth".into(), 512.into());
        }
        let started = Instant::now();
        let r = act(&gw, params.clone()).await;
        assert_eq!(payload(&r)["ok"], true, "{params}: {r}");
        let seen: Vec<String> = events
            .wait(expected.len())
            .iter()
            .map(|e| e.short())
            .collect();
        // xdotool types a shifted letter its own way (Shift then the key,
        // or the key remapped): the letters are what counts.
        if params["action"] == "type" {
            let keys: Vec<&String> = seen
                .iter()
                .filter(|s| s.starts_with("KeyPress") && !s.contains("Shift"))
                .collect();
            assert_eq!(
                keys,
                ["KeyPress a", "KeyPress minus", "KeyPress B"],
                "{params}: {seen:?}"
            );
            continue;
        }
        if seen.iter().any(|s| s.starts_with("Key")) {
            // Keys: pressed in order, each released (the keysym a release
            // reports depends on the modifiers still down).
            let presses = |v: Vec<&str>| {
                v.into_iter()
                    .filter(|s| s.starts_with("KeyPress"))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                presses(seen.iter().map(String::as_str).collect()),
                presses(expected.clone()),
                "{params}"
            );
            assert_eq!(seen.len(), expected.len(), "{params}: {seen:?}");
        } else {
            assert_eq!(seen, expected, "{params}");
        }
        if params["action"] == "hold_key" {
            let all = events.all();
            let held = all[1].when - all[0].when;
            assert!(held >= Duration::from_millis(250), "held {held:?}");
            assert!(started.elapsed() >= Duration::from_millis(300));
        }
    }
    // A drag or move ends where it said.
    assert_eq!(x.pointer(), (100, 100));
}

#[tokio::test(flavor = "multi_thread")]
async fn one_execution_at_a_time_and_closing_is_always_ok() {
    let x = Xvfb::start(640, 480);
    let (gw, _node) = computer(&x).await;
    let f = frame(&gw, 640).await;
    let busy = "Error: COMPUTER_HOST_BUSY: another provider execution owns this computer";
    assert_eq!(
        message(
            &act(
                &gw,
                json!({"action": "key", "keys": "a", "executionId": OTHER})
            )
            .await
        ),
        busy
    );
    assert_eq!(
        message(
            &gw.invoke("screen.snapshot", json!({"executionId": OTHER}))
                .await
        ),
        busy
    );
    // A picture outside any execution is not refused (OpenClaw's node takes
    // one with an execution of its own), and takes nothing from the owner.
    shot(&gw, json!({})).await;
    // Closing another's, or an unknown one, is ok and closes nothing.
    let close = |id: &str| json!({"action": "__close_execution", "executionId": id, "reason": "x".repeat(500)});
    assert_eq!(payload(&act(&gw, close(OTHER)).await), json!({"ok": true}));
    payload(
        &act(
            &gw,
            json!({"action": "mouse_move", "executionId": ID, "x": 1, "y": 1,
                             "displayFrameId": f, "refWidth": 640}),
        )
        .await,
    );
    assert_eq!(payload(&act(&gw, close(ID)).await), json!({"ok": true}));
    assert_eq!(payload(&act(&gw, close(ID)).await), json!({"ok": true}));
    // Free again: the other may take it.
    payload(
        &act(
            &gw,
            json!({"action": "key", "keys": "a", "executionId": OTHER}),
        )
        .await,
    );
    // Closing needs an execution id like everything else.
    assert_eq!(
        message(&act(&gw, json!({"action": "__close_execution"})).await),
        "Error: COMPUTER_INVALID_REQUEST: executionId is required"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_params_get_the_contracts_words() {
    let x = Xvfb::start(640, 480);
    let (gw, _node) = computer(&x).await;
    let invalid = "Error: COMPUTER_INVALID_REQUEST: invalid params";
    let required = "Error: COMPUTER_INVALID_REQUEST: executionId is required";
    for (command, params, said) in [
        (
            "screen.snapshot",
            "{not json",
            "Error: COMPUTER_INVALID_REQUEST: params must be valid JSON",
        ),
        (
            "computer.act",
            "{not json",
            "Error: COMPUTER_INVALID_REQUEST: params must be valid JSON",
        ),
        ("screen.snapshot", "null", invalid),
        ("screen.snapshot", "[1]", invalid),
        ("screen.snapshot", r#"{"format":"gif"}"#, invalid),
        ("screen.snapshot", r#"{"maxWidth":0}"#, invalid),
        ("screen.snapshot", r#"{"maxWidth":1.5}"#, invalid),
        ("screen.snapshot", r#"{"extra":true}"#, invalid),
        (
            "screen.snapshot",
            r#"{"executionId":"NOT-A-UUID"}"#,
            required,
        ),
        ("computer.act", "{}", required),
        ("computer.act", "[]", required),
        ("computer.act", r#"{"action":"left_click"}"#, required),
        (
            "computer.act",
            &format!(
                r#"{{"action":"left_click","executionId":"{}"}}"#,
                ID.to_uppercase()
            ),
            required,
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"screenshot","executionId":"{ID}"}}"#),
            invalid,
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"left_click","executionId":"{ID}","bogus":1}}"#),
            invalid,
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"left_click","executionId":"{ID}","x":-1,"y":0}}"#),
            invalid,
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"left_click","executionId":"{ID}","refWidth":0}}"#),
            invalid,
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"list_apps","executionId":"{ID}"}}"#),
            "Error: COMPUTER_UNSUPPORTED_ACTION: list_apps",
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"key","executionId":"{ID}","screenIndex":1,"keys":"a"}}"#),
            "Error: COMPUTER_UNSUPPORTED_DISPLAY: this node controls only the primary display (screenIndex 0)",
        ),
        (
            "screen.snapshot",
            r#"{"screenIndex":2}"#,
            "Error: COMPUTER_UNSUPPORTED_DISPLAY: this node controls only the primary display (screenIndex 0)",
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"key","executionId":"{ID}","keys":"hyper+a"}}"#),
            "Error: COMPUTER_UNSUPPORTED_KEY: unknown modifier \"hyper\"",
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"key","executionId":"{ID}"}}"#),
            "Error: COMPUTER_UNSUPPORTED_KEY: key chord is empty",
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"type","executionId":"{ID}","text":""}}"#),
            "Error: COMPUTER_INVALID_REQUEST: text is required for type",
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"scroll","executionId":"{ID}"}}"#),
            "Error: COMPUTER_INVALID_REQUEST: scrollDirection is required for scroll",
        ),
        (
            "computer.act",
            &format!(r#"{{"action":"left_mouse_up","executionId":"{ID}"}}"#),
            "Error: COMPUTER_INVALID_REQUEST: left button is not held by computer control",
        ),
    ] {
        let id = gw.request(command, params, 10_000);
        let r = gw.result(&id, LONG).await;
        assert_eq!(message(&r), said, "{command} {params}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_action_is_risky_and_closing_or_looking_is_not() {
    let x = Xvfb::start(640, 480);
    let (gw, node) = node_on(&x, &["--computer", "--approval", "deny"]).await;
    let events = x.listen();
    let r = act(
        &gw,
        json!({"action": "key", "keys": "a", "executionId": ID}),
    )
    .await;
    assert_eq!(error_code(&r), "USER_REJECTED", "{r}");
    shot(&gw, json!({"executionId": ID})).await;
    payload(
        &act(
            &gw,
            json!({"action": "__close_execution", "executionId": ID}),
        )
        .await,
    );
    // Bad params are refused before anyone would be asked.
    let r = act(&gw, json!({"action": "key", "executionId": ID, "bogus": 1})).await;
    assert_eq!(
        message(&r),
        "Error: COMPUTER_INVALID_REQUEST: invalid params"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(events.all().is_empty(), "{:?}", events.presses());
    let audit = std::fs::read_to_string(node.state().join("audit.jsonl")).unwrap();
    assert!(audit.contains(r#""command":"computer.act""#), "{audit}");
    assert!(audit.contains("refused:USER_REJECTED"), "{audit}");
}
