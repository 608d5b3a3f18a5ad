//! Typed frames of the OpenClaw gateway protocol (version 4), as observed
//! on the wire (shared/openclaw/README.md §3).
//!
//! Every frame is `{"type": "req"|"res"|"event", ...}`. A frame of a type we
//! do not know is [`Frame::Unknown`], and an event whose payload does not
//! parse is answered or ignored by the caller: nothing here panics on what
//! the peer sends.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Protocol versions this client speaks.
pub const MIN_PROTOCOL: u32 = 3;
pub const MAX_PROTOCOL: u32 = 4;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Frame {
    Req(Request),
    Res(Response),
    Event(Event),
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: String,
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorShape>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub event: String,
    #[serde(default)]
    pub payload: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

/// `res.error`: a code, a message, and sometimes structured details.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorShape {
    pub code: String,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<ErrorDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

/// The parts of `error.details` a client acts on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorDetails {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_retry_with_device_token: Option<bool>,
}

impl ErrorShape {
    /// The most specific code: `details.code` when present, else `code`.
    pub fn detail_code(&self) -> &str {
        self.details
            .as_ref()
            .and_then(|d| d.code.as_deref())
            .unwrap_or(&self.code)
    }
}

/// `event connect.challenge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Challenge {
    pub nonce: String,
    pub ts: u64,
}

/// `req connect` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectParams {
    pub min_protocol: u32,
    pub max_protocol: u32,
    pub client: ClientInfo,
    #[serde(default)]
    pub caps: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// Sent (empty) by nodes, absent from operator connects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_env: Option<String>,
    #[serde(default)]
    pub auth: Auth,
    pub role: String,
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceProof>,
    /// A node's computer-use descriptor (OpenClaw's
    /// `ComputerUseCapabilityDescriptor`), when it declares the pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computer_use: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    /// A closed set on the gateway: nodes must say `node-host`.
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub platform: String,
    #[serde(default)]
    pub device_family: String,
    pub mode: String,
    #[serde(default)]
    pub instance_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Auth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A setup code's one-time token (enrolment without the shared token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_token: Option<String>,
    /// A device token an operator was issued (OpenClaw's CLI sends it here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_token: Option<String>,
}

/// `connect.device`: who we are, proven by a signature over the challenge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceProof {
    pub id: String,
    pub public_key: String,
    pub signature: String,
    pub signed_at: u64,
    pub nonce: String,
}

/// `res connect` payload on success.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloOk {
    #[serde(rename = "type")]
    pub kind: String,
    pub protocol: u32,
    #[serde(default)]
    pub auth: Option<HelloAuth>,
    #[serde(default)]
    pub policy: Option<Policy>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloAuth {
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub device_token: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    #[serde(default)]
    pub max_payload: Option<u64>,
    #[serde(default)]
    pub tick_interval_ms: Option<u64>,
}

/// `event node.invoke.request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvokeRequest {
    pub id: String,
    #[serde(default)]
    pub node_id: String,
    pub command: String,
    #[serde(default, rename = "paramsJSON")]
    pub params_json: Option<String>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// The agent session that asked (`agent:<agentId>:…`), when an agent did.
    #[serde(default)]
    pub session_key: Option<String>,
}

/// `event node.invoke.cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvokeCancel {
    pub invoke_id: String,
    #[serde(default)]
    pub node_id: String,
}

/// `req node.invoke.result` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvokeResult {
    pub id: String,
    pub node_id: String,
    pub ok: bool,
    #[serde(
        default,
        rename = "payloadJSON",
        skip_serializing_if = "Option::is_none"
    )]
    pub payload_json: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<InvokeError>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvokeError {
    pub code: String,
    pub message: String,
}

/// `event node.pair.resolved`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairResolved {
    #[serde(default)]
    pub request_id: String,
    #[serde(default)]
    pub node_id: String,
    #[serde(default)]
    pub decision: String,
}

/// An event the node acts on, parsed from a raw [`Event`].
#[derive(Debug, Clone, PartialEq)]
pub enum NodeEvent {
    Challenge(Challenge),
    Tick,
    Invoke(InvokeRequest),
    /// An invoke request that did not parse; answered when it has an id.
    BadInvoke {
        id: Option<String>,
        node_id: Option<String>,
        problem: String,
    },
    Cancel(InvokeCancel),
    PairResolved(PairResolved),
    /// Anything else (health, presence, voicewake, ...), or a known event
    /// whose payload did not parse (the reason is kept for logs).
    Other {
        event: String,
        problem: Option<String>,
    },
}

impl From<Event> for NodeEvent {
    fn from(event: Event) -> Self {
        fn parse<T: serde::de::DeserializeOwned>(
            event: &Event,
            wrap: impl FnOnce(T) -> NodeEvent,
        ) -> NodeEvent {
            match serde_json::from_value(event.payload.clone()) {
                Ok(value) => wrap(value),
                Err(e) => NodeEvent::Other {
                    event: event.event.clone(),
                    problem: Some(e.to_string()),
                },
            }
        }
        match event.event.as_str() {
            "connect.challenge" => parse(&event, NodeEvent::Challenge),
            "tick" => NodeEvent::Tick,
            "node.invoke.request" => match serde_json::from_value(event.payload.clone()) {
                Ok(request) => NodeEvent::Invoke(request),
                Err(e) => {
                    let text = |k: &str| {
                        event
                            .payload
                            .get(k)
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    };
                    NodeEvent::BadInvoke {
                        id: text("id"),
                        node_id: text("nodeId"),
                        problem: e.to_string(),
                    }
                }
            },
            "node.invoke.cancel" => parse(&event, NodeEvent::Cancel),
            "node.pair.resolved" => parse(&event, NodeEvent::PairResolved),
            _ => NodeEvent::Other {
                event: event.event,
                problem: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_frame_types_are_a_value_not_an_error() {
        let frame: Frame = serde_json::from_str(r#"{"type":"hello","x":1}"#).unwrap();
        assert_eq!(frame, Frame::Unknown);
    }

    #[test]
    fn invoke_request_parses_as_on_the_wire() {
        let frame: Frame = serde_json::from_str(
            r#"{"type":"event","event":"node.invoke.request","payload":{"id":"i1","nodeId":"n","command":"system.which","paramsJSON":"{\"bins\":[\"sh\"]}","timeoutMs":14983,"idempotencyKey":"k"}}"#,
        )
        .unwrap();
        let Frame::Event(event) = frame else { panic!() };
        let NodeEvent::Invoke(req) = NodeEvent::from(event) else {
            panic!()
        };
        assert_eq!(req.command, "system.which");
        assert_eq!(req.params_json.as_deref(), Some(r#"{"bins":["sh"]}"#));
        assert_eq!(req.timeout_ms, Some(14983));
    }

    #[test]
    fn a_malformed_known_event_is_other_with_a_reason() {
        let event = Event {
            event: "node.invoke.cancel".into(),
            payload: serde_json::json!({"invokeId": 5}),
            seq: None,
        };
        assert!(matches!(
            NodeEvent::from(event),
            NodeEvent::Other {
                problem: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn a_malformed_invoke_keeps_its_id_for_the_answer() {
        let event = Event {
            event: "node.invoke.request".into(),
            payload: serde_json::json!({"id": "i9", "nodeId": "n", "command": 5}),
            seq: None,
        };
        assert!(matches!(
            NodeEvent::from(event),
            NodeEvent::BadInvoke { id: Some(id), .. } if id == "i9"
        ));
    }

    #[test]
    fn invoke_result_serialises_with_the_wire_names() {
        let result = InvokeResult {
            id: "i".into(),
            node_id: "n".into(),
            ok: true,
            payload_json: Some("{}".into()),
            error: None,
        };
        assert_eq!(
            serde_json::to_string(&result).unwrap(),
            r#"{"id":"i","nodeId":"n","ok":true,"payloadJSON":"{}"}"#
        );
    }

    #[test]
    fn every_recorded_frame_parses() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/frames");
        let mut count = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in text.lines() {
                let record: Value = serde_json::from_str(line).unwrap();
                let Some(frame) = record.get("frame") else {
                    continue;
                };
                if frame.get("type").is_none() {
                    continue; // open/close records
                }
                let parsed: Frame = serde_json::from_value(frame.clone()).unwrap();
                assert_ne!(parsed, Frame::Unknown, "{frame}");
                if let Frame::Event(event) = parsed
                    && let NodeEvent::Other {
                        problem: Some(p), ..
                    } = NodeEvent::from(event)
                {
                    panic!("{p}: {frame}");
                }
                count += 1;
            }
        }
        assert!(count > 200, "only {count} frames");
    }
}
