//! Seed 004's frames (SynthesisAgent's `docs/wire-protocol.md`), one JSON
//! object per WebSocket text frame, typed both ways. `send` is ours: how
//! `clawbot_router bridge send` hands the running bridge a message.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a client sends.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum In {
    Hello {
        openclaw_session: String,
        #[serde(default)]
        claude_session: Option<String>,
        #[serde(default)]
        pid: Option<u64>,
        token: String,
    },
    ToolCall {
        call_id: String,
        tool: String,
        #[serde(default)]
        args: Value,
    },
    PermissionRequest {
        request_id: String,
        tool: String,
        #[serde(default)]
        args: Value,
        #[serde(default)]
        rationale: String,
    },
    Ping {
        #[serde(default)]
        ts: Value,
    },
    Pong {},
    /// From `bridge send`: a message for a session's client.
    Send {
        token: String,
        session: String,
        content: String,
        #[serde(default)]
        meta: Value,
    },
}

/// The frame types a client may send, for the error an unknown one gets.
pub const KNOWN: &[&str] = &[
    "hello",
    "tool_call",
    "permission_request",
    "ping",
    "pong",
    "send",
];

/// What the bridge sends.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Out {
    HelloAck {
        tools: Vec<Value>,
        session_meta: Value,
    },
    ToolResult {
        call_id: String,
        ok: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    PermissionReply {
        request_id: String,
        behavior: &'static str,
    },
    InboundMessage {
        request_id: String,
        content: String,
        meta: Value,
    },
    Ping {
        ts: u64,
    },
    Pong {
        ts: Value,
    },
    /// A frame the bridge could not take, and why; the connection stays.
    Error {
        error: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// The answer to `send`.
    SendAck {
        request_id: String,
        delivered: bool,
        buffered: usize,
    },
}

impl Out {
    pub fn text(&self) -> String {
        serde_json::to_string(self).expect("frames are plain data")
    }
}

/// A frame, or the sentence the client is told about it.
pub fn parse(text: &str) -> Result<In, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not a JSON frame: {e}"))?;
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return Err("a frame must be a JSON object with a string \"type\"".into());
    };
    if !KNOWN.contains(&kind) {
        return Err(format!(
            "unknown frame type {kind:?}; this bridge takes {}",
            KNOWN.join(", ")
        ));
    }
    let kind = kind.to_owned();
    serde_json::from_value(value).map_err(|e| format!("bad {kind} frame: {e}"))
}

/// The id of the frame a bad frame answered, when it had one.
pub fn call_id_of(text: &str) -> Option<String> {
    let value: Value = serde_json::from_str(text).ok()?;
    value
        .get("call_id")
        .and_then(Value::as_str)
        .map(|s| s.chars().take(128).collect())
}

/// Seed 004's permission ids: five lowercase letters, never `l`.
pub fn is_request_id(id: &str) -> bool {
    id.len() == 5 && id.bytes().all(|b| b.is_ascii_lowercase() && b != b'l')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_parse_or_say_why() {
        assert!(matches!(
            parse(
                r#"{"type":"tool_call","call_id":"tc_001","tool":"read_file","args":{"path":"a"}}"#
            ),
            Ok(In::ToolCall { .. })
        ));
        assert!(parse("{").unwrap_err().starts_with("not a JSON frame"));
        assert!(parse("[1]").unwrap_err().contains("\"type\""));
        assert!(
            parse(r#"{"type":"launch"}"#)
                .unwrap_err()
                .contains("unknown frame type \"launch\"")
        );
        assert!(
            parse(r#"{"type":"tool_call","tool":"x"}"#)
                .unwrap_err()
                .contains("call_id")
        );
        assert_eq!(
            call_id_of(r#"{"type":"tool_call","call_id":"c9"}"#).as_deref(),
            Some("c9")
        );
    }

    #[test]
    fn outbound_frames_are_the_seed_shapes() {
        let ok = Out::ToolResult {
            call_id: "tc_001".into(),
            ok: true,
            result: Some(serde_json::json!({"a": 1})),
            error: None,
        };
        assert_eq!(
            ok.text(),
            r#"{"type":"tool_result","call_id":"tc_001","ok":true,"result":{"a":1}}"#
        );
        let reply = Out::PermissionReply {
            request_id: "abxyz".into(),
            behavior: "allow",
        };
        assert_eq!(
            reply.text(),
            r#"{"type":"permission_reply","request_id":"abxyz","behavior":"allow"}"#
        );
    }

    #[test]
    fn request_ids_are_five_letters_without_l() {
        assert!(is_request_id("abxyz"));
        for bad in ["abxyl", "ABXYZ", "abxy", "abxyzz", "ab1yz"] {
            assert!(!is_request_id(bad), "{bad}");
        }
    }
}
