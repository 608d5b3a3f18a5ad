//! Whether the gateway lets this node's commands run yet.

use serde_json::json;

use crate::gateway::client::Outbox;
use crate::gateway::frames::ErrorShape;
use crate::shared::log::{say, warn};

/// The gateway reports its command-surface approval through the answers to
/// node requests; this asks (`node.runnerInventory.update`, as OpenClaw's
/// node host does) until the surface is approved, and prints the operator's
/// command while it waits.
#[derive(Default)]
pub struct Surface {
    request_id: Option<String>,
    /// Done asking (approved, or an answer that is no surface question).
    pub approved: bool,
    /// The gateway said yes: what `node status` may call approved.
    pub confirmed: bool,
    announced: Option<String>,
}

impl Surface {
    pub fn pending(&self) -> bool {
        !self.approved
    }

    pub fn ask(&mut self, outbox: &Outbox) {
        // What OpenClaw's own node host sends; the gateway refuses an empty list.
        let params = json!({ "protocolFeatures": ["node-worker-supervisor-v6"], "workerHost": { "enabled": false } });
        self.request_id = outbox.request("node.runnerInventory.update", params);
    }

    pub fn answered(&mut self, id: &str, ok: bool, error: Option<&ErrorShape>) {
        if self.request_id.as_deref() != Some(id) {
            return;
        }
        self.request_id = None;
        let Some(error) = error.filter(|_| !ok) else {
            if !self.approved && self.announced.is_some() {
                say("command surface approved: invocations can run");
            }
            self.approved = true;
            self.confirmed = true;
            return;
        };
        if error.retryable == Some(true) {
            return; // e.g. PAIRING_CHANGED right after connect: ask again later
        }
        if !error.message.contains("awaiting operator approval") {
            // Not a surface question: say what it was, and stop asking.
            warn(&format!(
                "the gateway answered the surface check with {}: {}",
                error.code, error.message
            ));
            self.approved = true;
            return;
        }
        let request = error
            .message
            .split("nodes approve ")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| c == '`' || c.is_whitespace()).next())
            .unwrap_or("<requestId>")
            .to_owned();
        if self.announced.as_deref() != Some(request.as_str()) {
            warn("this node's commands await the operator's approval: run");
            warn(&format!("    openclaw nodes approve {request}"));
            warn("  (see `openclaw nodes pending`)");
            self.announced = Some(request);
        }
    }

    /// A pairing request was resolved (`approved` when it was granted).
    pub fn resolved(&mut self, approved: bool) {
        self.approved = true;
        self.confirmed |= approved;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surface_hint_names_the_request() {
        let mut s = Surface {
            request_id: Some("1".into()),
            ..Default::default()
        };
        let error = ErrorShape {
            code: "UNAVAILABLE".into(),
            message: "node capability surface is awaiting operator approval; run `openclaw nodes approve 08c50ca7-f3f0` (see `openclaw nodes pending`), then this node retries automatically".into(),
            details: None,
            retryable: None,
        };
        s.answered("1", false, Some(&error));
        assert_eq!(s.announced.as_deref(), Some("08c50ca7-f3f0"));
        assert!(s.pending());
        s.request_id = Some("2".into());
        assert!(!s.confirmed);
        s.answered("2", true, None);
        assert!(!s.pending());
        assert!(s.confirmed);
        // An answer that is no surface question stops the asking, and
        // confirms nothing.
        let mut other = Surface {
            request_id: Some("3".into()),
            ..Default::default()
        };
        let refusal = ErrorShape {
            code: "INVALID_REQUEST".into(),
            message: "unknown method".into(),
            details: None,
            retryable: None,
        };
        other.answered("3", false, Some(&refusal));
        assert!(!other.pending() && !other.confirmed);
        other.resolved(false);
        assert!(!other.confirmed);
    }
}
