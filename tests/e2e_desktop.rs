//! `desktop.stream` through the real OpenClaw gateway: Debian's Xvfb and
//! x11vnc are the desktop, the node relays it, and a viewer (an operator
//! with operator.admin calling `desktop.observe`, then speaking RFB on the
//! socket it is given: scripts/desktop-viewer.mjs) reads its ServerInit
//! and a whole 1024×768 frame — 3 MiB that reach the gateway only in
//! frames of at most 64 KiB, its attach socket's limit. Side by side with
//! `openclaw node run` on the same server.

#![cfg(target_os = "linux")]

mod common;

use common::e2e::{RealNode, TheirNode};
use common::vnc::{PASSWORD, VncDesktop, view};
use serde_json::json;

fn desktop_node(name: &str, desktop: &VncDesktop, with_password: bool) -> RealNode {
    let port = desktop.port.to_string();
    let file = desktop.password_file.to_string_lossy().into_owned();
    let mut args = vec!["--desktop-vnc-port", port.as_str()];
    if with_password {
        args.extend(["--desktop-password-file", file.as_str()]);
    }
    let node = RealNode::start(name, &args);
    node.approve_surface();
    node
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_the_gateways_viewer_sees_the_nodes_desktop_as_through_openclaw_node_run() {
    let desktop = VncDesktop::start(81, true);
    let ours = desktop_node("e2e-desktop-ours", &desktop, true);
    let seen = view("e2e-desktop-ours", None);
    assert_eq!(
        (
            seen["width"].clone(),
            seen["height"].clone(),
            seen["pixels"].clone()
        ),
        (json!(1024), json!(768), json!(1024 * 768)),
        "{seen}\nour node's log:\n{}",
        ours.log()
    );
    // The relay ends with the viewer, with OpenClaw's answer.
    ours.wait_log("desktop.stream → ok", std::time::Duration::from_secs(20));
    assert!(
        ours.log().contains("desktop stream ended: "),
        "{}",
        ours.log()
    );
    let theirs = TheirNode::start(
        "e2e-desktop-openclaw",
        &json!({ "desktop": { "host": { "enabled": true,
            "port": desktop.port, "passwordFile": desktop.password_file } } }),
    );
    theirs.approve();
    let expected = view("e2e-desktop-openclaw", None);
    for key in ["width", "height", "name", "pixels"] {
        assert_eq!(
            seen[key], expected[key],
            "{key}: ours {seen}, theirs {expected}"
        );
    }
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_without_a_password_file_the_operator_gives_the_password() {
    let desktop = VncDesktop::start(82, true);
    let node = desktop_node("e2e-desktop-nofile", &desktop, false);
    let seen = view("e2e-desktop-nofile", Some(PASSWORD));
    assert_eq!(seen["width"], 1024, "{seen}\n{}", node.log());
    let wrong = view("e2e-desktop-nofile", Some("not-it"));
    assert!(wrong.get("error").is_some(), "{wrong}");
}

#[test]
#[ignore = "needs the OpenClaw sandbox: scripts/e2e.sh"]
fn e2e_a_vnc_server_that_asks_no_password_is_never_relayed() {
    let desktop = VncDesktop::start(83, false);
    let node = desktop_node("e2e-desktop-open", &desktop, true);
    let seen = view("e2e-desktop-open", None);
    let error = seen["error"].to_string();
    assert!(
        error.contains("refusing unauthenticated loopback RFB server"),
        "{seen}\n{}",
        node.log()
    );
}
