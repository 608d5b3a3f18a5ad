//! THE PROTOCOL: the OpenClaw gateway, version 4, over WebSocket — typed
//! frames, the device identity, and the connection (challenge, connect,
//! hello-ok, liveness).

pub mod client;
pub mod frames;
pub mod identity;
pub mod operator;
pub mod setup_code;
pub mod transport;

pub use transport::{Fingerprint, Trust};

/// A gateway: where it is and how its certificate is trusted.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub url: String,
    pub trust: Trust,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

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
