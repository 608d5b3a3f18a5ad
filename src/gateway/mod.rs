//! THE PROTOCOL: the OpenClaw gateway, version 4, over WebSocket — typed
//! frames, the device identity, and the connection (challenge, connect,
//! hello-ok, liveness).

pub mod client;
pub mod frames;
pub mod identity;
