//! What OpenClaw's inference commands do the JavaScript way, beyond what
//! every family shares (`crate::tools::js`): truthiness, and
//! `parseStrictFiniteNumber` for numbers given as strings.
//!
//! Never used for anything but reproducing those answers.

use serde_json::Value;

pub use crate::tools::js::{locale_compare, number, trim, utf16_len};

/// A JSON number of Ollama's, rewritten as OpenClaw would write it back.
pub fn renumber(v: &Value) -> Value {
    let mut v = v.clone();
    crate::tools::js::js_numbers(&mut v);
    v
}

/// Whether a value is truthy (`if (x)`).
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// OpenClaw's `parseStrictFiniteNumber` on a string: trimmed, then
/// `^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$` (case-insensitive), finite.
pub fn strict_number(s: &str) -> Option<f64> {
    let t = trim(s);
    let b = t.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    if int_digits > 0 {
        if i < b.len() && b[i] == b'.' {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        }
    } else {
        if i >= b.len() || b[i] != b'.' {
            return None;
        }
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == frac_start {
            return None;
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let exp_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp_start {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    // Rust's float grammar is wider than the pattern (it takes `inf`,
    // `nan`): the pattern decided, Rust only reads.
    t.parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_numbers_follow_openclaws_pattern() {
        for (text, want) in [
            ("512", Some(512.0)),
            (" 12 ", Some(12.0)),
            ("+3", Some(3.0)),
            ("5.", Some(5.0)),
            (".5", Some(0.5)),
            ("1e3", Some(1000.0)),
            ("5.e1", Some(50.0)),
            ("1E-2", Some(0.01)),
            ("0x10", None),
            ("", None),
            ("1e", None),
            ("Infinity", None),
            ("1e999", None),
            ("1_0", None),
            (".", None),
        ] {
            assert_eq!(strict_number(text), want, "{text:?}");
        }
    }
}
