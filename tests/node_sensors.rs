//! `camera.*` and `location.get` on the node, against the fake gateway.
//! No camera or GeoClue exists here: the real command lines run against
//! stand-ins on PATH (tests/fixtures/sensors), which record them, and the
//! camera devices are plain files under a test root
//! (`CLAWBOT_TEST_V4L2_ROOT`, read by debug builds only).

#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, error_code, payload};
use common::sensors::{JPEG, World};
use serde_json::{Value, json};

fn declared(gw: &FakeGateway) -> (Vec<String>, Vec<String>) {
    let connect = &gw.connects()[0];
    let list = |key: &str| -> Vec<String> {
        connect[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect()
    };
    (list("commands"), list("caps"))
}

fn message(result: &Value) -> String {
    assert_eq!(error_code(result), "INVALID_REQUEST", "{result}");
    result["error"]["message"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_sensed_unless_the_owner_turns_it_on() {
    let world = World::new();
    let (gw, node) = world.node(&[], &[]).await;
    let (commands, caps) = declared(&gw);
    assert!(
        !commands
            .iter()
            .any(|c| c.starts_with("camera.") || c == "location.get"),
        "{commands:?}"
    );
    assert!(!caps.contains(&"camera".to_owned()) && !caps.contains(&"location".to_owned()));
    for command in ["camera.snap", "camera.list", "location.get"] {
        let r = gw.invoke(command, json!({})).await;
        assert_eq!(error_code(&r), "UNAVAILABLE", "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("not advertised")
        );
    }
    assert!(
        world.logged().is_empty(),
        "nothing ran: {:?}",
        world.logged()
    );
    drop(node);
}

#[tokio::test(flavor = "multi_thread")]
async fn turned_on_without_the_program_it_is_said_and_not_offered() {
    let world = World::new();
    // PATH without the stand-ins (and this machine has no ffmpeg or GeoClue
    // on the test PATH given here).
    let gw = FakeGateway::start(Config::default()).await;
    let node = Node::start_with_env(
        &gw.url(),
        &["--token", TOKEN, "--camera", "--location"],
        &[("PATH", Path::new("/nonexistent"))],
    );
    gw.wait_hellos(1, LONG).await;
    let (commands, _) = declared(&gw);
    assert!(!commands.iter().any(|c| c.starts_with("camera.")));
    node.wait_stderr("--camera: ffmpeg was not found; not offered", LONG)
        .await;
    drop(world);
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_naming_a_sensor_that_is_off_says_how_to_turn_it_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::router()
        .args([
            "node",
            "--gateway",
            "ws://127.0.0.1:9",
            "--commands",
            "camera.snap",
        ])
        .arg("--state-dir")
        .arg(dir.path())
        .arg("--workspace")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--commands: camera.snap needs --camera, and ffmpeg on PATH (Linux)"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn location_runs_where_am_i_as_openclaw_does_and_stops_at_the_first_fix() {
    let world = World::new();
    let (gw, _node) = world.node(&["--location"], &[("STANDIN_GEO", "fix")]).await;
    let (commands, caps) = declared(&gw);
    assert!(commands.contains(&"location.get".to_owned()));
    assert!(caps.contains(&"location".to_owned()), "{caps:?}");
    let started = Instant::now();
    let fix = payload(&gw.invoke("location.get", json!({})).await);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the demo keeps watching for its whole timeout; the fix must end it: {:?}",
        started.elapsed()
    );
    assert_eq!(
        fix,
        json!({"lat": 48.8584, "lon": 2.2945, "accuracyMeters": 25, "altitudeMeters": 35,
               "speedMps": 0.5, "headingDeg": 90, "timestamp": "2026-11-18T11:06:40.000Z",
               "isPrecise": true, "source": "unknown"})
    );
    assert_eq!(world.logged(), ["-t 10 -a 6 LC_ALL=C"]);
    wait_gone(&world).await;
    world.forget();
    payload(
        &gw.invoke(
            "location.get",
            json!({"desiredAccuracy": "precise", "timeoutMs": 5000}),
        )
        .await,
    );
    payload(
        &gw.invoke(
            "location.get",
            json!({"desiredAccuracy": "coarse", "timeoutMs": 1e12, "maxAgeMs": -5}),
        )
        .await,
    );
    assert_eq!(
        world.logged(),
        ["-t 5 -a 8 LC_ALL=C", "-t 60 -a 4 LC_ALL=C"]
    );
}

async fn wait_gone(world: &World) {
    world.wait_gone();
}

#[tokio::test(flavor = "multi_thread")]
async fn location_failures_have_openclaws_words() {
    let world = World::new();
    for (mode, params, expected) in [
        (
            "nofix",
            json!({}),
            "Error: LOCATION_TIMEOUT: no fix in time",
        ),
        (
            "disabled",
            json!({}),
            "Error: LOCATION_DISABLED: GeoClue location services are disabled",
        ),
        (
            "broken",
            json!({}),
            "Error: LOCATION_UNAVAILABLE: Failed to connect to the system bus",
        ),
        // An older fix than asked for is no fix.
        (
            "fix",
            json!({"maxAgeMs": 1000, "timeoutMs": 1000}),
            "Error: LOCATION_TIMEOUT: no fix in time",
        ),
        // Megabytes of noise: kept to 64 KiB, and still no fix.
        (
            "flood",
            json!({}),
            "Error: LOCATION_TIMEOUT: no fix in time",
        ),
    ] {
        let (gw, _node) = world.node(&["--location"], &[("STANDIN_GEO", mode)]).await;
        let r = gw.invoke("location.get", params).await;
        assert_eq!(message(&r), expected, "{mode}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_newest_fix_wins_and_one_within_max_age_is_taken() {
    let world = World::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let (gw, _node) = world
        .node(
            &["--location"],
            &[("STANDIN_GEO", "two"), ("STANDIN_EPOCH", &now)],
        )
        .await;
    let fix = payload(&gw.invoke("location.get", json!({"maxAgeMs": 60000})).await);
    assert_eq!(
        (fix["lat"].clone(), fix["isPrecise"].clone()),
        (json!(48.8584), json!(true))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cameras_are_the_devices_ffmpeg_lists_formats_for_in_number_order() {
    let world = World::new();
    let (gw, _node) = world.node(&["--camera"], &[]).await;
    let (commands, caps) = declared(&gw);
    for c in ["camera.list", "camera.snap", "camera.clip"] {
        assert!(commands.contains(&c.to_owned()), "{commands:?}");
    }
    assert!(caps.contains(&"camera".to_owned()));
    let listed = payload(&gw.invoke("camera.list", json!({})).await);
    assert_eq!(
        listed,
        json!({"devices": [
            {"id": world.device("video0"), "name": "Integrated Camera: Integrated C", "position": "unknown", "deviceType": "v4l2"},
            {"id": world.device("video10"), "name": "video10", "position": "unknown", "deviceType": "v4l2"},
        ]})
    );
    let probes: Vec<String> = ["video0", "video1", "video2", "video10"]
        .iter()
        .map(|d| {
            format!(
                "-hide_banner -f v4l2 -list_formats all -i {}",
                world.device(d)
            )
        })
        .collect();
    assert_eq!(world.logged(), probes);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_photo_is_openclaws_ffmpeg_command_and_a_risky_call() {
    let world = World::new();
    // Not pre-approved, nobody to ask: refused, and nothing captured.
    let (gw, node_) = world.node(&["--camera", "--approval", "deny"], &[]).await;
    let r = gw.invoke("camera.snap", json!({})).await;
    assert_eq!(error_code(&r), "USER_REJECTED", "{r}");
    assert!(world.logged().is_empty(), "{:?}", world.logged());
    drop((gw, node_));

    let (gw, _node) = world
        .node(&["--camera", "--allow-command", "camera.snap"], &[])
        .await;
    let photo = payload(&gw.invoke("camera.snap", json!({})).await);
    assert_eq!(photo["format"], "jpg");
    assert_eq!(
        (photo["width"].clone(), photo["height"].clone()),
        (json!(640), json!(480))
    );
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(photo["base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(bytes, JPEG);
    let captures: Vec<String> = world
        .logged()
        .into_iter()
        .filter(|l| !l.contains("-list_formats"))
        .collect();
    assert_eq!(captures.len(), 1);
    let expected = format!(
        "-hide_banner -loglevel error -y -f v4l2 -i {} -ss 2.000 -frames:v 1 -vf scale=min(iw\\,1600):-2 -q:v 5 ",
        world.device("video0")
    );
    assert!(
        captures[0].starts_with(&expected),
        "{}\n{expected}",
        captures[0]
    );
    assert!(captures[0].ends_with("/capture.jpg"), "{}", captures[0]);
    // The capture's directory went with the call.
    let out = captures[0].rsplit(' ').next().unwrap();
    assert!(!Path::new(out).exists(), "{out} outlived the call");

    world.forget();
    let photo = payload(
        &gw.invoke(
            "camera.snap",
            json!({"format": "JPEG", "deviceId": format!(" {} ", world.device("video10")),
                   "maxWidth": 640.9, "quality": 1, "delayMs": 0, "facing": "back"}),
        )
        .await,
    );
    assert_eq!(photo["format"], "jpeg");
    let capture = world
        .logged()
        .into_iter()
        .find(|l| !l.contains("-list_formats"))
        .unwrap();
    assert!(
        capture.contains(&format!(
            "-i {} -ss 0.000 -frames:v 1 -vf scale=min(iw\\,640):-2 -q:v 2 ",
            world.device("video10")
        )),
        "{capture}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_photo_requests_get_openclaws_errors_and_open_nothing_unlisted() {
    let world = World::new();
    let (gw, _node) = world
        .node(&["--camera", "--allow-command", "camera.snap"], &[])
        .await;
    for (params, expected) in [
        (
            json!({"format": "png"}),
            "Error: INVALID_REQUEST: unsupported camera image format: png".to_owned(),
        ),
        (
            json!({"deviceId": "/dev/../etc/passwd"}),
            "Error: INVALID_REQUEST: camera device not found: /dev/../etc/passwd".to_owned(),
        ),
        (
            json!({"deviceId": world.device("video1")}),
            format!(
                "Error: INVALID_REQUEST: camera device not found: {}",
                world.device("video1")
            ),
        ),
    ] {
        assert_eq!(message(&gw.invoke("camera.snap", params).await), expected);
    }
    assert!(
        world.logged().iter().all(|l| l.contains("-list_formats")),
        "only probes ran: {:?}",
        world.logged()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_capture_that_fails_is_too_big_or_is_no_jpeg_is_said_so() {
    let world = World::new();
    for (mode, expected) in [
        (
            "fail",
            "Error: CAMERA_UNAVAILABLE: [video4linux2,v4l2 @ 0x5581] Device or resource busy",
        ),
        (
            "huge",
            "Error: PAYLOAD_TOO_LARGE: camera payload exceeds the 25 MB base64 limit",
        ),
        (
            "notjpeg",
            "Error: CAMERA_UNAVAILABLE: FFmpeg returned an invalid JPEG",
        ),
    ] {
        let (gw, _node) = world
            .node(
                &["--camera", "--allow-command", "camera.snap"],
                &[("STANDIN_FFMPEG", mode)],
            )
            .await;
        let r = gw.invoke("camera.snap", json!({"delayMs": 0})).await;
        assert_eq!(message(&r), expected, "{mode}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_capture_ends_with_the_callers_time_and_leaves_nothing() {
    let world = World::new();
    let (gw, _node) = world
        .node(
            &["--camera", "--allow-command", "camera.snap"],
            &[("STANDIN_FFMPEG", "hang")],
        )
        .await;
    let started = Instant::now();
    let id = gw.request("camera.snap", "{}", 3000);
    let r = gw.result(&id, Duration::from_secs(10)).await;
    assert_eq!(message(&r), "Error: CAMERA_UNAVAILABLE: command timed out");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    wait_gone(&world).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clip_records_the_microphone_only_where_the_owner_allowed_it() {
    let world = World::new();
    let (gw, node_) = world
        .node(&["--camera", "--allow-command", "camera.clip"], &[])
        .await;
    let clip = payload(&gw.invoke("camera.clip", json!({"durationMs": 10})).await);
    assert_eq!(
        (
            clip["format"].clone(),
            clip["durationMs"].clone(),
            clip["hasAudio"].clone()
        ),
        (json!("mp4"), json!(250), json!(false))
    );
    let capture = world
        .logged()
        .into_iter()
        .find(|l| !l.contains("-list_formats"))
        .unwrap();
    let expected = format!(
        "-hide_banner -loglevel error -y -f v4l2 -i {} -t 0.250 -c:v libx264 -preset veryfast -pix_fmt yuv420p -an -movflags +faststart ",
        world.device("video0")
    );
    assert!(capture.starts_with(&expected), "{capture}");
    assert_eq!(
        message(&gw.invoke("camera.clip", json!({"format": "webm"})).await),
        "Error: INVALID_REQUEST: unsupported camera clip format: webm"
    );
    drop((gw, node_));

    world.forget();
    let (gw, _node) = world
        .node(
            &[
                "--camera",
                "--camera-audio",
                "--allow-command",
                "camera.clip",
            ],
            &[],
        )
        .await;
    let clip = payload(
        &gw.invoke("camera.clip", json!({"durationMs": 1234.9}))
            .await,
    );
    assert_eq!(
        (clip["durationMs"].clone(), clip["hasAudio"].clone()),
        (json!(1234), json!(true))
    );
    let capture = world
        .logged()
        .into_iter()
        .find(|l| !l.contains("-list_formats"))
        .unwrap();
    assert!(
        capture.contains(&format!(
            "-f v4l2 -i {} -f pulse -i default -t 1.234 -c:v libx264 -preset veryfast -pix_fmt yuv420p -map 0:v:0 -map 1:a:0 -c:a aac -b:a 128k -shortest -movflags +faststart ",
            world.device("video0")
        )),
        "{capture}"
    );
    world.forget();
    let clip = payload(
        &gw.invoke("camera.clip", json!({"includeAudio": false}))
            .await,
    );
    assert_eq!(clip["hasAudio"], false);
    assert!(world.logged().iter().any(|l| l.contains(" -an ")));
}
