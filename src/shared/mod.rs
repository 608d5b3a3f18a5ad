//! What several rooms share, below all of them: this room names no other
//! room of the crate (tests/layers.rs). Each helper lives here once.

pub mod backoff;
pub mod clock;
pub mod escape;
pub mod hex;
pub mod log;
pub mod net;
pub mod paths;
pub mod secrets;
pub mod signals;
