//! What OpenClaw's node host does the JavaScript way, done the same way
//! here, because its results reach the gateway byte for byte: `trim`,
//! `String.length` (UTF-16 units), how `JSON.stringify` writes a number,
//! truthiness, and `localeCompare` (ICU's root collation) for the names
//! `ollama.models` sorts by.
//!
//! Never used for anything but reproducing those answers.

use std::cmp::Ordering;

use serde_json::{Number, Value};

/// `String.prototype.trim`: JavaScript's white space and line terminators
/// (Rust's `trim` also takes U+0085 and leaves U+FEFF).
pub fn trim(s: &str) -> &str {
    s.trim_matches(|c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}')
}

/// `String.prototype.length`: UTF-16 code units, so a character outside
/// the BMP counts twice.
pub fn length(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
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

/// A number as `JSON.stringify` writes it: integral values without a
/// fraction (`25`, not `25.0`). Past 2^53 the digits may differ from
/// JavaScript's (it rounds such integers; we keep what Ollama sent).
pub fn number(f: f64) -> Value {
    const SAFE: f64 = 9_007_199_254_740_991.0;
    if f.fract() == 0.0 && f.abs() <= SAFE {
        Value::Number(Number::from(f as i64))
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// A JSON number of Ollama's, rewritten as OpenClaw would write it back.
pub fn renumber(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => number(n.as_f64().unwrap_or(f64::NAN)),
        Value::Array(items) => Value::Array(items.iter().map(renumber).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), renumber(v))).collect())
        }
        other => other.clone(),
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

/// ICU's root collation (what `localeCompare` uses with no locale) for
/// ASCII: every printable character and TAB…CR count (the "non-ignorable"
/// default), other controls are ignored; letters compare without case
/// first, then lower before upper. Characters beyond ASCII come after all
/// of ASCII by code point (an approximation: ICU weighs them by script).
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    let keys = |s: &str| -> Vec<(u32, u8)> {
        s.chars()
            .filter_map(|c| primary(c).map(|p| (p, c.is_ascii_uppercase() as u8)))
            .collect()
    };
    let (ka, kb) = (keys(a), keys(b));
    let first = ka.iter().map(|k| k.0).cmp(kb.iter().map(|k| k.0));
    first.then_with(|| ka.iter().map(|k| k.1).cmp(kb.iter().map(|k| k.1)))
}

/// ICU root order of ASCII, letters in lower case (read from Node 24).
const ROOT_ORDER: &str =
    "\t\n\u{b}\u{c}\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz";

fn primary(c: char) -> Option<u32> {
    if !c.is_ascii() {
        return Some(0x100 + c as u32);
    }
    let lower = c.to_ascii_lowercase();
    ROOT_ORDER.find(lower).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_is_javascripts() {
        assert_eq!(trim("\u{feff} a \u{a0}\n"), "a");
        assert_eq!(trim("\u{85}a"), "\u{85}a");
    }

    #[test]
    fn length_counts_utf16_units() {
        assert_eq!(length("a😀"), 3);
        assert_eq!(length("é"), 1);
    }

    #[test]
    fn numbers_are_written_as_json_stringify_writes_them() {
        assert_eq!(number(25.0).to_string(), "25");
        assert_eq!(number(1.5).to_string(), "1.5");
        assert_eq!(
            renumber(&serde_json::json!({"a": [8192.0]})).to_string(),
            r#"{"a":[8192]}"#
        );
    }

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

    #[test]
    fn names_sort_as_localecompare_sorts_them() {
        // Each pair as Node 24's `a.localeCompare(b)` orders it.
        for (a, b) in [
            ("llama3:8b", "llama3.1:8b"),
            ("a", "B"),
            ("a", "A"),
            ("aB", "Ab"),
            ("a-b", "ab"),
            ("a_b", "a-b"),
            ("x10", "x9"),
            ("qwen", "qwen2"),
            ("z", "é"),
        ] {
            assert_eq!(locale_compare(a, b), Ordering::Less, "{a} < {b}");
            assert_eq!(locale_compare(b, a), Ordering::Greater, "{b} > {a}");
        }
        assert_eq!(locale_compare("a\u{1}", "a"), Ordering::Equal);
    }
}
