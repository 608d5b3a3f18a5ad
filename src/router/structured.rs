//! `--format structured` (seed 002 §5's "output cleaning"): instead of
//! openclaw's raw text, a clean `content` — the final answer — and a
//! `details` object, still inside `{content, directTTS, interruptMode}`.
//!
//! OpenClaw's `--json` prints one of three shapes (shared/openclaw/samples):
//! through the gateway `{runId, status, summary, result: {payloads, meta}}`,
//! embedded (`--local`) `{payloads, meta}`, and on failure the envelope
//! `{ok: false, error: {type, message}}`. The gateway path's final answer
//! is the first shape. All three become:
//!
//! ```text
//! details: {status: "ok" | "timeout" | "error", runId, summary,
//!           payloads: [{text, mediaUrl, isError}], toolCalls, usage,
//!           durationMs, model, error: {type, message}, diagnostics}
//! ```
//! (`null` where OpenClaw did not say; `diagnostics` is what openclaw wrote
//! on stderr, kept apart from the JSON.)

use serde_json::{Map, Value, json};

/// The cleaned result.
#[derive(Debug, Clone, PartialEq)]
pub struct Cleaned {
    pub content: String,
    pub details: Value,
    pub ok: bool,
}

/// Reads OpenClaw's `--json` object, whichever shape.
pub fn from_openclaw(value: &Value) -> Cleaned {
    let get = |v: &Value, k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    if value.get("ok") == Some(&Value::Bool(false)) {
        let error = get(value, "error");
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("openclaw reported an error without a message")
            .to_owned();
        let mut details = base("error");
        details["runId"] = get(value, "runId");
        details["error"] = json!({
            "type": error.get("type").cloned().unwrap_or(Value::from("error")),
            "message": message,
        });
        return Cleaned {
            content: message,
            details,
            ok: false,
        };
    }
    // The gateway wraps the run's result; the embedded run is the result.
    let (result, status) = match value.get("result") {
        Some(result) if result.is_object() => (
            result,
            value
                .get("status")
                .and_then(Value::as_str)
                .map(str::to_owned),
        ),
        _ => (value, None),
    };
    let payloads: Vec<Value> = result
        .get("payloads")
        .and_then(Value::as_array)
        .map(|p| p.iter().map(payload).collect())
        .unwrap_or_default();
    let is_error = |p: &Value| p["isError"] == true;
    let status = match status.as_deref() {
        Some("ok" | "completed") => "ok",
        Some("timeout") => "timeout",
        Some(_) => "error",
        None if !payloads.is_empty() && payloads.iter().all(is_error) => "error",
        None => "ok",
    };
    let texts: Vec<&str> = payloads
        .iter()
        .filter(|p| status != "ok" || !is_error(p))
        .filter_map(|p| p["text"].as_str())
        .filter(|t| !t.trim().is_empty())
        .collect();
    let summary = get(value, "summary");
    let content = if texts.is_empty() && status != "ok" {
        summary
            .as_str()
            .unwrap_or("No reply from agent.")
            .to_owned()
    } else {
        texts.join("\n").trim_end().to_owned()
    };
    let meta = get(result, "meta");
    let agent = get(&meta, "agentMeta");
    let mut details = base(status);
    details["runId"] = get(value, "runId");
    details["summary"] = summary;
    details["payloads"] = Value::Array(payloads);
    details["toolCalls"] = get(&meta, "toolSummary");
    details["usage"] = get(&agent, "usage");
    details["durationMs"] = get(&meta, "durationMs");
    details["model"] = match (agent["provider"].as_str(), agent["model"].as_str()) {
        (Some(p), Some(m)) => Value::from(format!("{p}/{m}")),
        (None, Some(m)) => Value::from(m),
        _ => Value::Null,
    };
    if status != "ok" {
        let message = meta["error"]["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| content.clone());
        details["error"] = json!({"type": status, "message": message});
    }
    Cleaned {
        content,
        ok: status == "ok",
        details,
    }
}

/// A call that ended without OpenClaw's JSON (timeout, interruption,
/// unreadable output): `content` is the router's sentence.
pub fn without_answer(status: &str, kind: &str, content: String) -> Cleaned {
    let mut details = base(status);
    details["error"] = json!({"type": kind, "message": content});
    Cleaned {
        content,
        details,
        ok: false,
    }
}

/// The most of openclaw's `--json` answer kept (OpenClaw caps a message at
/// 4 MiB; an answer with its metadata fits with room to spare).
pub const MAX_ANSWER: usize = 64 << 20;

/// Whether a JSON object is one of OpenClaw's answers rather than, say, a
/// JSON log record: it has `result` or `payloads` or `runId`, or is the
/// error envelope.
fn answer_shaped(value: &Value) -> bool {
    let has = |k: &str| value.get(k).is_some();
    value.is_object()
        && (has("result")
            || has("payloads")
            || has("runId")
            || (value.get("ok") == Some(&Value::Bool(false)) && has("error")))
}

/// [`answer_shaped`] on raw bytes (the runner's early stop).
pub fn is_answer(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Value>(bytes).is_ok_and(|v| answer_shaped(&v))
}

/// The first of OpenClaw's answers in `text`, a JSON object that opens a
/// line (openclaw may print log lines, JSON ones too, before it).
pub fn find_json(text: &str) -> Option<Value> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('{') {
            let start = offset + (line.len() - trimmed.len());
            let parsed = serde_json::Deserializer::from_str(&text[start..])
                .into_iter::<Value>()
                .next();
            if let Some(Ok(value)) = parsed.filter(|p| p.as_ref().is_ok_and(answer_shaped)) {
                return Some(value);
            }
        }
        offset += line.len();
    }
    None
}

fn base(status: &str) -> Value {
    let mut details = Map::new();
    for key in [
        "runId",
        "summary",
        "toolCalls",
        "usage",
        "durationMs",
        "model",
        "error",
    ] {
        details.insert(key.into(), Value::Null);
    }
    details.insert("status".into(), Value::from(status));
    details.insert("payloads".into(), Value::Array(Vec::new()));
    Value::Object(details)
}

fn payload(p: &Value) -> Value {
    json!({
        "text": p.get("text").cloned().unwrap_or(Value::Null),
        "mediaUrl": p.get("mediaUrl").cloned().unwrap_or(Value::Null),
        "isError": p.get("isError").and_then(Value::as_bool).unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> Value {
        let path = format!(
            "{}/tests/fixtures/openclaw-samples/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_gateway_shape() {
        let c = from_openclaw(&sample("agent-gateway-json.stdout.json"));
        assert!(c.ok);
        assert_eq!(c.content, "ECHO: hello gw json");
        let d = &c.details;
        assert_eq!(d["status"], "ok");
        assert_eq!(d["runId"], "410a2d58-4ab5-442d-9fb8-0d3beac73aaf");
        assert_eq!(d["summary"], "completed");
        assert_eq!(d["durationMs"], 193);
        assert_eq!(d["model"], "fakellm/fake-model");
        assert_eq!(d["usage"]["total"], 15);
        assert_eq!(
            d["payloads"],
            json!([{"text": "ECHO: hello gw json", "mediaUrl": null, "isError": false}])
        );
        assert_eq!(d["toolCalls"], Value::Null);
        assert_eq!(d["error"], Value::Null);
    }

    #[test]
    fn the_local_shape() {
        let c = from_openclaw(&sample("agent-local-json.stdout.json"));
        assert!(c.ok);
        assert_eq!(c.content, "ECHO: hello json");
        assert_eq!(c.details["runId"], Value::Null);
        assert_eq!(c.details["durationMs"], 5421);
    }

    #[test]
    fn a_gateway_timeout() {
        let c = from_openclaw(&sample("agent-gateway-timeout-json.stdout.json"));
        assert!(!c.ok);
        assert_eq!(c.details["status"], "timeout");
        assert!(
            c.content
                .starts_with("Request timed out before a response was generated.")
        );
        assert_eq!(c.details["payloads"][0]["isError"], true);
        assert_eq!(c.details["error"]["type"], "timeout");
    }

    #[test]
    fn tool_calls_are_reported_when_openclaw_lists_them() {
        let c = from_openclaw(&sample("agent-gateway-tool-json.stdout.json"));
        assert_eq!(c.details["toolCalls"]["tools"], json!(["exec"]));
        assert_eq!(c.details["toolCalls"]["calls"], 1);
    }

    #[test]
    fn the_error_envelope() {
        let c = from_openclaw(&json!({"ok": false, "error": {"type": "cli_error",
            "message": "Unknown agent id \"x\". Use \"openclaw agents list\" to see configured agents."}}));
        assert!(!c.ok);
        assert_eq!(c.details["status"], "error");
        assert_eq!(c.details["error"]["type"], "cli_error");
        assert!(c.content.starts_with("Unknown agent id"));
    }

    #[test]
    fn json_is_found_after_noise() {
        assert_eq!(
            find_json(
                "log line {x}\n{broken\n{\"level\": \"info\"}\n{\"runId\": {\"b\": \"}\"}}\ntrailing"
            ),
            Some(json!({"runId": {"b": "}"}}))
        );
        assert_eq!(find_json("no json here"), None);
        assert_eq!(find_json("{\"unterminated\": "), None);
    }
}
