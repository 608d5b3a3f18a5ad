//! THE PROTOCOL: the OpenClaw gateway, version 4, over WebSocket — typed
//! frames, the device identity, and the connection (challenge, connect,
//! hello-ok, liveness).

pub mod client;
pub mod frames;
pub mod identity;
pub mod operator;

/// `client.platform` as OpenClaw names it (Node.js's `process.platform`).
pub fn platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

/// `client.deviceFamily` as OpenClaw's own clients send it.
pub fn device_family() -> &'static str {
    match std::env::consts::OS {
        "macos" => "Mac",
        "windows" => "Windows",
        _ => "Linux",
    }
}
