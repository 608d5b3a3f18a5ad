//! The name the gateway shows for this node.
//!
//! OpenClaw 2026.9.6 keeps the name a node had when its commands were first
//! approved (`nodeSurface.displayName`) and ranks it above the live
//! session's in `node.list`; a later `client.displayName` changes neither.
//! So a `--display-name` given after pairing would be silently ignored, and
//! `openclaw nodes invoke --node <that name>` would answer "unknown node".
//! A node connection may not rename itself (OpenClaw's role policy keeps
//! `node.*` management for operators), but an operator may: with the shared
//! token on loopback, where OpenClaw grants a device-less `cli` client the
//! scopes it asks for, the node reads `node.list` and, when the names
//! differ, sends `node.rename` — what `openclaw nodes rename` does. Where
//! that is refused, it says which name the gateway knows and the command
//! that changes it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::gateway::operator::{self, Scope};

const LIMIT: Duration = Duration::from_secs(10);

/// What became of the name, for the node's log.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The gateway already shows `wanted`.
    Same,
    /// It shows `shown`, and no name was asked for: an operator's
    /// `openclaw nodes rename` stands.
    Kept { shown: String },
    /// It showed `old`; now it shows `wanted`.
    Renamed { old: String },
    /// It shows `old` and we could not change it (`why`).
    Differs { old: String, why: String },
    /// Its commands are not approved yet: the pending request carries the
    /// name of the latest connect, which approval will keep.
    NotApproved,
    /// We could not ask (`why`).
    Unknown { why: String },
}

/// Makes the gateway show `wanted` for node `node_id`, if it can and
/// `rename` (the user gave `--display-name`); otherwise only asks.
pub async fn reconcile(
    endpoint: &crate::gateway::Endpoint,
    token: Option<&str>,
    node_id: &str,
    wanted: &str,
    rename: bool,
) -> Outcome {
    // Device-less: a device would be one more pairing request for the
    // operator to wonder about; away from loopback this is refused, and
    // the user gets the rename command instead.
    let credentials = operator::Credentials {
        token: token.map(str::to_owned),
        device_dir: None,
    };
    let mut conn = match operator::connect(endpoint, &credentials, LIMIT, Scope::Pairing).await {
        Ok(conn) => conn,
        Err(e) => return Outcome::Unknown { why: e.to_string() },
    };
    let listed = match conn.call("node.list", json!({}), LIMIT).await {
        Ok(listed) => listed,
        Err(e) => return Outcome::Unknown { why: e.to_string() },
    };
    let Some(entry) = listed["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["nodeId"] == node_id))
    else {
        return Outcome::Unknown {
            why: "node.list does not list this node".into(),
        };
    };
    if entry["approvalState"].as_str() != Some("approved") {
        return Outcome::NotApproved;
    }
    let shown = entry["displayName"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_owned();
    if shown == wanted.trim() {
        return Outcome::Same;
    }
    if !rename {
        return Outcome::Kept { shown };
    }
    let params = json!({"nodeId": node_id, "displayName": wanted});
    match conn.call("node.rename", params, LIMIT).await {
        Ok(answer) if answer["displayName"].as_str().map(str::trim) == Some(wanted.trim()) => {
            Outcome::Renamed { old: shown }
        }
        Ok(answer) => Outcome::Differs {
            old: shown,
            why: format!("node.rename answered {}", short(&answer)),
        },
        Err(e) => Outcome::Differs {
            old: shown,
            why: e.to_string(),
        },
    }
}

impl Outcome {
    /// The log line, if one is worth printing. `explicit`: the user gave
    /// `--display-name` (a hostname default is not worth a warning).
    pub fn describe(&self, node_id: &str, wanted: &str, explicit: bool) -> Option<String> {
        let fix = || {
            format!(
                "openclaw nodes rename --node {} --name {}",
                node_id,
                shell_words::quote(wanted)
            )
        };
        match self {
            Outcome::Same => Some(format!("the gateway lists this node as {wanted:?}")),
            Outcome::Kept { shown } => Some(format!(
                "the gateway lists this node as {shown:?} (--display-name renames it)"
            )),
            Outcome::Renamed { old } => Some(format!(
                "the gateway listed this node as {old:?}; renamed it to {wanted:?} (node.rename)"
            )),
            Outcome::Differs { old, why } => Some(format!(
                "the gateway lists this node as {old:?}, not {wanted:?}, and would not rename it ({why}); `--node {}` finds it, or an operator runs\n    {}",
                if old.is_empty() {
                    node_id.to_owned()
                } else {
                    shell_words::quote(old).into_owned()
                },
                fix()
            )),
            Outcome::NotApproved => None,
            Outcome::Unknown { why } if explicit => Some(format!(
                "could not ask the gateway which name it lists this node under ({why}); OpenClaw keeps the name of the first approval, so if it is not {wanted:?}, an operator runs\n    {}",
                fix()
            )),
            Outcome::Unknown { .. } => None,
        }
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fix_is_a_command_that_survives_a_shell() {
        let line = Outcome::Unknown { why: "x".into() }
            .describe("abc123", "my laptop's node", true)
            .unwrap();
        assert!(
            line.ends_with(r#"openclaw nodes rename --node abc123 --name 'my laptop'\''s node'"#),
            "{line}"
        );
        assert_eq!(
            Outcome::Unknown { why: "x".into() }.describe("abc123", "host", false),
            None,
            "a default name is not worth a warning"
        );
    }
}
