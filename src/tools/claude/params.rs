//! The two commands' parameters and cursors, checked in OpenClaw's order
//! and refused with its words (`session-catalog-parsing`): a caller
//! switching nodes sees the same errors.

use base64::Engine;
use serde_json::Value;

use super::{Failure, js};

/// A cursor is at most this long (`CLAUDE_SESSION_CURSOR_MAX_LENGTH`).
const CURSOR_MAX: usize = 256;

#[derive(Debug, PartialEq)]
pub struct ListParams {
    pub limit: usize,
    pub cursor: Option<String>,
    pub search: Option<String>,
}

#[derive(Debug, PartialEq)]
pub struct ReadParams {
    pub thread_id: String,
    pub limit: usize,
    pub cursor: Option<String>,
}

/// `paramsJSON` as OpenClaw's node reads it: absent or empty is no value
/// at all; anything else must be JSON.
fn parse_json(raw: Option<&str>) -> Result<Option<Value>, Failure> {
    match raw {
        None | Some("") => Ok(None),
        Some(text) => serde_json::from_str(text)
            .map(Some)
            .map_err(|_| Failure("Claude session parameters must be valid JSON".into())),
    }
}

pub fn list(raw: Option<&str>) -> Result<ListParams, Failure> {
    let value = match parse_json(raw)? {
        None | Some(Value::Null) => {
            return Ok(ListParams {
                limit: 50,
                cursor: None,
                search: None,
            });
        }
        Some(value) => value,
    };
    let Value::Object(map) = &value else {
        return Err(Failure(
            "Claude session catalog parameters must be an object".into(),
        ));
    };
    if let Some(key) = map
        .keys()
        .find(|k| !["cursor", "limit", "searchTerm"].contains(&k.as_str()))
    {
        return Err(Failure(format!(
            "unknown Claude session catalog parameter: {key}"
        )));
    }
    let cursor = optional_cursor(map.get("cursor"), "catalog")?;
    let search = map.get("searchTerm").and_then(|v| js::bounded(v, 500));
    Ok(ListParams {
        limit: limit(map.get("limit"), 50, 100)?,
        cursor,
        search,
    })
}

pub fn read(raw: Option<&str>) -> Result<ReadParams, Failure> {
    let value = parse_json(raw)?;
    let Some(Value::Object(map)) = &value else {
        return Err(Failure(
            "Claude session read parameters must be an object".into(),
        ));
    };
    if let Some(key) = map
        .keys()
        .find(|k| !["threadId", "cursor", "limit"].contains(&k.as_str()))
    {
        return Err(Failure(format!(
            "unknown Claude session read parameter: {key}"
        )));
    }
    let thread_id = map
        .get("threadId")
        .and_then(|v| js::bounded(v, 256))
        .filter(|id| {
            id.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
        })
        .ok_or_else(|| Failure("threadId is invalid".into()))?;
    let cursor = optional_cursor(map.get("cursor"), "transcript")?;
    Ok(ReadParams {
        thread_id,
        limit: limit(map.get("limit"), 20, 50)?,
        cursor,
    })
}

/// `readLimit`: absent is the default; else an integer (`5.0` is one)
/// within 1..=max.
fn limit(value: Option<&Value>, default: usize, max: usize) -> Result<usize, Failure> {
    let Some(value) = value else {
        return Ok(default);
    };
    value
        .as_f64()
        .filter(|f| f.fract() == 0.0 && *f >= 1.0 && *f <= max as f64)
        .map(|f| f as usize)
        .ok_or_else(|| Failure(format!("limit must be an integer from 1 to {max}")))
}

/// `isExactClaudeSessionCursor`: a string of 1..=256 UTF-16 units with no
/// white space around it.
pub fn is_exact_cursor(value: &Value) -> bool {
    value.as_str().is_some_and(|s| {
        !s.is_empty() && js::utf16_len(s) <= CURSOR_MAX && js::trim(s).len() == s.len()
    })
}

fn optional_cursor(value: Option<&Value>, label: &str) -> Result<Option<String>, Failure> {
    match value {
        None => Ok(None),
        Some(v) if is_exact_cursor(v) => Ok(v.as_str().map(str::to_owned)),
        Some(_) => Err(Failure(format!("{label} cursor is invalid"))),
    }
}

/// The offset a cursor carries: base64url of `{"offset":N}`, N a safe
/// integer ≥ 0, decoded as leniently as Node decodes it.
pub fn decode_offset(cursor: &str, label: &str) -> Result<u64, Failure> {
    let invalid = || Failure(format!("{label} cursor is invalid"));
    if !is_exact_cursor(&Value::from(cursor)) {
        return Err(invalid());
    }
    let bytes = js::base64url_decode_lenient(cursor);
    let text = String::from_utf8_lossy(&bytes);
    let parsed: Value = serde_json::from_str(&text).map_err(|_| invalid())?;
    parsed
        .get("offset")
        .filter(|_| parsed.is_object())
        .and_then(Value::as_f64)
        .filter(|f| f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_991.0 && *f >= 0.0)
        .map(|f| f as u64)
        .ok_or_else(invalid)
}

/// `encodeOffset`.
pub fn encode_offset(offset: u64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{{\"offset\":{offset}}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err<T: std::fmt::Debug>(r: Result<T, Failure>) -> String {
        r.unwrap_err().0
    }

    #[test]
    fn list_defaults_and_bounds() {
        for raw in [None, Some(""), Some("null")] {
            assert_eq!(list(raw).unwrap().limit, 50);
        }
        assert_eq!(
            err(list(Some("{"))),
            "Claude session parameters must be valid JSON"
        );
        assert_eq!(
            err(list(Some("[]"))),
            "Claude session catalog parameters must be an object"
        );
        assert_eq!(
            err(list(Some(r#"{"x":1}"#))),
            "unknown Claude session catalog parameter: x"
        );
        for bad in ["0", "101", "1.5", "\"5\"", "null", "true"] {
            assert_eq!(
                err(list(Some(&format!(r#"{{"limit":{bad}}}"#)))),
                "limit must be an integer from 1 to 100",
                "{bad}"
            );
        }
        assert_eq!(list(Some(r#"{"limit":5.0}"#)).unwrap().limit, 5);
        assert_eq!(list(Some(r#"{"limit":1e2}"#)).unwrap().limit, 100);
    }

    #[test]
    fn a_long_or_blank_search_is_ignored_not_refused() {
        let long = "x".repeat(501);
        let p = list(Some(&format!(r#"{{"searchTerm":"{long}"}}"#))).unwrap();
        assert_eq!(p.search, None);
        let p = list(Some(r#"{"searchTerm":"  Main "}"#)).unwrap();
        assert_eq!(p.search.as_deref(), Some("Main"));
        assert_eq!(list(Some(r#"{"searchTerm":"  "}"#)).unwrap().search, None);
    }

    #[test]
    fn the_cursor_shape_is_checked_before_the_limit() {
        assert_eq!(
            err(list(Some(r#"{"cursor":" x","limit":0}"#))),
            "catalog cursor is invalid"
        );
        assert_eq!(
            err(list(Some(r#"{"cursor":"x","limit":0}"#))),
            "limit must be an integer from 1 to 100"
        );
        for bad in ["\"\"", "null", "5", &format!("\"{}\"", "a".repeat(257))] {
            assert_eq!(
                err(list(Some(&format!(r#"{{"cursor":{bad}}}"#)))),
                "catalog cursor is invalid",
                "{bad}"
            );
        }
    }

    #[test]
    fn read_wants_an_object_and_a_plain_thread_id() {
        for raw in [None, Some(""), Some("null"), Some("[1]")] {
            assert_eq!(
                err(read(raw)),
                "Claude session read parameters must be an object"
            );
        }
        for bad in [
            r#"{}"#,
            r#"{"threadId":"a/b"}"#,
            r#"{"threadId":"../x"}"#,
            r#"{"threadId":"a b"}"#,
            r#"{"threadId":"   "}"#,
            r#"{"threadId":5}"#,
        ] {
            assert_eq!(err(read(Some(bad))), "threadId is invalid", "{bad}");
        }
        let long = format!(r#"{{"threadId":"{}"}}"#, "a".repeat(257));
        assert_eq!(err(read(Some(&long))), "threadId is invalid");
        assert_eq!(
            err(read(Some(r#"{"threadId":"a","hostId":"x"}"#))),
            "unknown Claude session read parameter: hostId"
        );
        let p = read(Some(r#"{"threadId":" a.b:c-d_e "}"#)).unwrap();
        assert_eq!((p.thread_id.as_str(), p.limit), ("a.b:c-d_e", 20));
        assert_eq!(
            err(read(Some(r#"{"threadId":"a","limit":51}"#))),
            "limit must be an integer from 1 to 50"
        );
    }

    #[test]
    fn cursors_round_trip_and_hostile_ones_are_invalid() {
        assert_eq!(encode_offset(2), "eyJvZmZzZXQiOjJ9");
        assert_eq!(
            decode_offset(&encode_offset(12345), "catalog").unwrap(),
            12345
        );
        // Node skips what is not base64 and stops at padding.
        assert_eq!(decode_offset("eyJvZmZz ZXQiOjJ9", "catalog").unwrap(), 2);
        assert_eq!(decode_offset("eyJvZmZzZXQiOjJ9==", "catalog").unwrap(), 2);
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        assert_eq!(decode_offset(&b64(r#"{"offset":2.0}"#), "x").unwrap(), 2);
        for bad in [
            "not base64!".to_owned(),
            b64(r#"{"offset":-1}"#),
            b64(r#"{"offset":1.5}"#),
            b64(r#"{"offset":"1"}"#),
            b64(r#"{"offset":9007199254740992}"#),
            b64("[1]"),
            b64("{}"),
            " eyJvZmZzZXQiOjJ9".into(),
            "a".repeat(257),
        ] {
            assert_eq!(
                err(decode_offset(&bad, "transcript")),
                "transcript cursor is invalid",
                "{bad}"
            );
        }
    }
}
