//! An invocation's one answer, `node.invoke.result`, made to fit the
//! gateway's frame limit.

use serde_json::Value;

use super::invoke::short;
use crate::gateway::client::{Held, Outbox};
use crate::gateway::frames::{InvokeError, InvokeResult};
use crate::tools::ToolError;

/// Bytes of content one result may carry: JSON escaping can grow text up to
/// six-fold and a command has two streams.
pub fn content_budget(max_payload: usize) -> usize {
    (max_payload / 12).clamp(16 * 1024, 8 * 1024 * 1024)
}

/// Bytes of file one file transfer (`file.fetch`, `dir.fetch`) may carry:
/// what fits the gateway's frame as base64 (4/3 of it), with room for the
/// rest of the answer; at most OpenClaw's own 16 MiB.
pub fn transfer_budget(max_payload: usize) -> usize {
    (max_payload.saturating_sub(64 * 1024) / 4 * 3).min(16 * 1024 * 1024)
}

pub fn result_frame(
    id: String,
    node_id: String,
    outcome: Result<Value, ToolError>,
) -> InvokeResult {
    match outcome {
        Ok(payload) => InvokeResult {
            id,
            node_id,
            ok: true,
            payload_json: Some(payload.to_string()),
            error: None,
        },
        Err(e) => InvokeResult {
            id,
            node_id,
            ok: false,
            payload_json: None,
            error: Some(InvokeError {
                code: e.code.to_owned(),
                message: e.message,
            }),
        },
    }
}

/// Queues a result, made to fit the gateway's limit: the longest strings
/// of the payload are cut (and `truncated` set) until it fits; only a
/// payload that cannot shrink becomes a `PAYLOAD_TOO_LARGE` error. Never
/// dropped silently. A file transfer's payload (`whole`) is never cut: the
/// gateway checks its size and sha256, so a cut file would fail as an
/// integrity error; one that cannot fit becomes an in-payload
/// `FILE_TOO_LARGE` instead.
pub fn send_result(
    outbox: &Outbox,
    mut result: InvokeResult,
    max_payload: usize,
    whole: Whole,
    held: Option<Held>,
) {
    if let Some(text) = result.payload_json.take() {
        match shaped(text, max_payload, whole) {
            Ok(text) => result.payload_json = Some(text),
            Err(error) => {
                result.ok = false;
                result.error = Some(error);
            }
        }
    }
    let params = serde_json::to_value(&result).expect("plain data");
    if outbox
        .request_holding("node.invoke.result", params, held)
        .is_none()
    {
        crate::shared::log::warn(&format!(
            "could not queue the result of {}",
            short(&result.id)
        ));
    }
}

/// Whether an answer may be cut to fit the gateway's frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whole {
    /// Cut its longest strings (and say so) until it fits.
    No,
    /// A file transfer: never cut; refused in the payload, as the file
    /// commands answer their refusals.
    File,
    /// A picture or a clip: never cut (a cut JPEG is no picture); refused
    /// as an error.
    Media,
}

/// A payload as it may travel: fitted (cut, unless whole), or the
/// error that replaces it.
fn shaped(text: String, max_payload: usize, whole: Whole) -> Result<String, InvokeError> {
    const ENVELOPE: usize = 1024;
    let limit = max_payload.saturating_sub(ENVELOPE);
    if whole == Whole::Media && !fits(&text, limit) {
        return Err(InvokeError {
            code: "PAYLOAD_TOO_LARGE".into(),
            message: format!(
                "the capture does not fit the gateway's maxPayload of {max_payload} bytes; ask for a smaller one (maxWidth, quality, durationMs)"
            ),
        });
    }
    if whole != Whole::No {
        if fits(&text, limit) {
            return Ok(text);
        }
        let refusal = serde_json::json!({
            "ok": false,
            "code": "FILE_TOO_LARGE",
            "message": format!(
                "the answer would not fit the gateway's maxPayload of {max_payload} bytes; ask for less (maxBytes)"
            ),
        });
        return Ok(refusal.to_string());
    }
    fit(text, limit).map_err(|size| InvokeError {
        code: "PAYLOAD_TOO_LARGE".into(),
        message: format!("the result is {size} bytes, over the gateway's limit of {max_payload}"),
    })
}

/// Whether `text` travels within `limit` bytes once escaped inside the
/// frame, counted without a copy (a file's base64 is megabytes).
fn fits(text: &str, limit: usize) -> bool {
    let escaped: usize = text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum();
    escaped + 2 <= limit
}

/// `payload_json` as it will travel (escaped inside the frame) within
/// `limit` bytes; the size it had when it cannot be made to fit.
fn fit(payload_json: String, limit: usize) -> Result<String, usize> {
    // Escaping grows text at most six-fold (a control byte becomes \u00XX):
    // most results are known to fit without serialising them again.
    if payload_json.len().saturating_mul(6).saturating_add(2) <= limit || fits(&payload_json, limit)
    {
        return Ok(payload_json);
    }
    let framed = |text: &str| {
        serde_json::to_string(text)
            .map(|s| s.len())
            .unwrap_or(usize::MAX)
    };
    if framed(&payload_json) <= limit {
        return Ok(payload_json);
    }
    let original = framed(&payload_json);
    let Ok(mut value) = serde_json::from_str::<Value>(&payload_json) else {
        return Err(original);
    };
    for _ in 0..64 {
        if !halve_longest_string(&mut value) {
            break;
        }
        if let Value::Object(map) = &mut value {
            map.insert("truncated".into(), Value::Bool(true));
        }
        let text = value.to_string();
        if framed(&text) <= limit {
            return Ok(text);
        }
    }
    Err(original)
}

/// Cuts the longest string in `value` to half its length (at a character
/// boundary) and marks the cut; false when there is nothing left to cut.
fn halve_longest_string(value: &mut Value) -> bool {
    fn longest(value: &mut Value) -> Option<&mut String> {
        match value {
            Value::String(s) => Some(s),
            Value::Array(items) => items.iter_mut().filter_map(longest).max_by_key(|s| s.len()),
            Value::Object(map) => map.values_mut().filter_map(longest).max_by_key(|s| s.len()),
            _ => None,
        }
    }
    const MARK: &str = "\n[clawbot_router] ... cut to fit the gateway's maxPayload ...";
    let Some(s) = longest(value).filter(|s| s.len() > MARK.len() * 2) else {
        return false;
    };
    let mut cut = s.len() / 2;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s.push_str(MARK);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_file_is_never_cut_to_fit_it_is_refused_whole() {
        let file = json!({"ok": true, "base64": "QUJD".repeat(1000), "sha256": "x"}).to_string();
        assert_eq!(shaped(file.clone(), 1 << 20, Whole::File).unwrap(), file);
        let refused: Value =
            serde_json::from_str(&shaped(file.clone(), 2048, Whole::File).unwrap()).unwrap();
        assert_eq!(refused["ok"], false);
        assert_eq!(refused["code"], "FILE_TOO_LARGE");
        // Anything else is cut, and says so.
        let photo = shaped(file.clone(), 2048, Whole::Media).unwrap_err();
        assert_eq!(photo.code, "PAYLOAD_TOO_LARGE");
        assert_eq!(shaped(file.clone(), 1 << 20, Whole::Media).unwrap(), file);
        let cut: Value = serde_json::from_str(&shaped(file, 2048, Whole::No).unwrap()).unwrap();
        assert_eq!(cut["truncated"], true);
    }

    #[test]
    fn a_16_mib_file_fits_openclaws_frame_and_its_budget() {
        assert_eq!(transfer_budget(26_214_400), 16 * 1024 * 1024);
        let base64_len = (16usize << 20).div_ceil(3) * 4;
        assert!(fits(&"A".repeat(base64_len + 400), 26_214_400 - 1024));
        assert_eq!(transfer_budget(1 << 20), ((1 << 20) - 65536) / 4 * 3);
    }

    #[test]
    fn escaping_is_counted_as_json_writes_it() {
        assert!(fits("ab", 4));
        assert!(!fits("a\"", 4));
        assert!(fits("\u{1}", 8) && !fits("\u{1}", 7));
    }

    #[test]
    fn oversized_results_become_an_error() {
        let r = result_frame(
            "i".into(),
            "n".into(),
            Ok(json!({"content": "x".repeat(100)})),
        );
        assert!(r.ok);
        let e = result_frame(
            "i".into(),
            "n".into(),
            Err(ToolError::new("NOT_FOUND", "gone")),
        );
        assert_eq!(e.error.unwrap().code, "NOT_FOUND");
        assert_eq!(content_budget(26_214_400), 26_214_400 / 12);
        assert_eq!(content_budget(1000), 16 * 1024);
    }
}
