//! The gateway this node last connected to, kept in `gateway.json` in its
//! state directory so that `clawbot_router node` with no `--gateway` finds
//! it again. Best effort: a file that cannot be written is said, never fatal.

use serde_json::{Value, json};

const SAVED_GATEWAY: &str = "gateway.json";

/// The gateway this node last connected to (`gateway.json` in its state
/// directory), used when nothing names one.
pub fn saved_gateway(state_dir: &std::path::Path) -> Option<String> {
    let text = std::fs::read(state_dir.join(SAVED_GATEWAY)).ok()?;
    let value: Value = serde_json::from_slice(&text).ok()?;
    value["url"].as_str().map(str::to_owned)
}

pub(super) fn save_gateway(state_dir: &std::path::Path, url: &str) {
    if saved_gateway(state_dir).as_deref() == Some(url) {
        return;
    }
    let body = serde_json::to_vec_pretty(&json!({ "url": url })).expect("plain data");
    if let Err(e) = crate::shared::paths::write_private(&state_dir.join(SAVED_GATEWAY), &body) {
        crate::shared::log::warn(&format!("cannot save the gateway's address: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_gateway_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(saved_gateway(dir.path()), None);
        save_gateway(dir.path(), "wss://gw.example:18789");
        assert_eq!(
            saved_gateway(dir.path()).as_deref(),
            Some("wss://gw.example:18789")
        );
        save_gateway(dir.path(), "ws://127.0.0.1:18789");
        assert_eq!(
            saved_gateway(dir.path()).as_deref(),
            Some("ws://127.0.0.1:18789")
        );
    }

    #[test]
    fn a_file_that_is_not_ours_names_no_gateway() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SAVED_GATEWAY), b"{\"url\": 7}").unwrap();
        assert_eq!(saved_gateway(dir.path()), None);
        std::fs::write(dir.path().join(SAVED_GATEWAY), b"not json").unwrap();
        assert_eq!(saved_gateway(dir.path()), None);
    }
}
