//! JavaScript's ways where OpenClaw's node host leans on them and its
//! answers reach the gateway (or an operator comparing the two nodes) as
//! they are: `String.prototype.trim`, lengths and cuts in UTF-16 units,
//! how `JSON.stringify` writes a number, and `localeCompare`'s order. One
//! copy for every family of commands that reproduces OpenClaw's answers.
//!
//! Must never panic on any input: callers feed it what files, servers and
//! strangers wrote.

use std::cmp::Ordering;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

/// JavaScript's white space and line terminators (what `trim` removes;
/// Rust's `trim` also takes U+0085 and leaves U+FEFF).
fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | ' '
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

/// `String.prototype.trim`.
pub fn trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// `s.length`: UTF-16 code units, so a character outside the BMP counts
/// twice.
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// OpenClaw's `truncateUtf16Safe`: at most `max` UTF-16 units, never half
/// a pair.
pub fn truncate_utf16(s: &str, max: usize) -> &str {
    let mut units = 0;
    for (at, c) in s.char_indices() {
        units += c.len_utf16();
        if units > max {
            return &s[..at];
        }
    }
    s
}

/// A number as `JSON.stringify` writes it: an integral value without a
/// fraction (`25`, not `25.0`), NaN and the infinities as `null`.
pub fn number(f: f64) -> Value {
    let mut v = serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number);
    js_numbers(&mut v);
    v
}

/// Every integral float in `value` as `JSON.stringify` writes it (`1.0`
/// is `1`), so the same value reads back the same from both nodes.
/// JavaScript writes integers in full up to 1e21; past i64's range (9e18)
/// they stay floats here.
pub fn js_numbers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e18
            {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(js_numbers),
        Value::Object(map) => map.values_mut().for_each(js_numbers),
        _ => {}
    }
}

/// Node's `path.normalize` of an absolute POSIX path: `.`, `..` and
/// doubled separators taken lexically (`..` stops at the root), a trailing
/// separator kept — so `/ws/a.txt/` is not `/ws/a.txt`, as OpenClaw sees it.
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    let mut out = format!("/{}", parts.join("/"));
    if path.ends_with('/') && !parts.is_empty() {
        out.push('/');
    }
    out
}

/// Node's `path.resolve`: absolute against our working directory, `.` and
/// `..` taken lexically, no trailing separator.
pub fn resolve(path: &Path) -> Option<PathBuf> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// Node's `stats.mtimeMs`: seconds × 1000 + nanoseconds / 1e6, a double.
pub fn mtime_ms(meta: &std::fs::Metadata) -> f64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.mtime() as f64 * 1000.0 + meta.mtime_nsec() as f64 / 1e6
    }
    #[cfg(not(unix))]
    {
        meta.modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }
}

/// ICU's root collation (what `localeCompare` uses with no locale) for
/// ASCII: every printable character and TAB…CR count (the "non-ignorable"
/// default), other controls are ignored; letters compare without case
/// first, then lower before upper. Characters beyond ASCII come after all
/// of ASCII by code point (an approximation: ICU weighs them by script).
/// Equal means equal to ICU: callers that need a total order break the tie.
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    let keys = |s: &str| -> Vec<(u32, u8)> {
        s.chars()
            .filter_map(|c| primary(c).map(|p| (p, c.is_uppercase() as u8)))
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
        let lower = c.to_lowercase().next().unwrap_or(c);
        return Some(0x100 + lower as u32);
    }
    let lower = c.to_ascii_lowercase();
    ROOT_ORDER.find(lower).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn trim_is_javascripts() {
        assert_eq!(trim("\u{feff} a\u{a0}\n"), "a");
        // NEL is white space to Rust but not to JavaScript.
        assert_eq!(trim("\u{85}a"), "\u{85}a");
    }

    #[test]
    fn lengths_and_cuts_count_utf16_units_and_never_split_a_pair() {
        assert_eq!(utf16_len("a😀"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(truncate_utf16("a😀b", 2), "a");
        assert_eq!(truncate_utf16("a😀b", 3), "a😀");
        assert_eq!(truncate_utf16("ab", 5), "ab");
        assert_eq!(truncate_utf16("", 3), "");
    }

    #[test]
    fn numbers_are_written_as_json_stringify_writes_them() {
        assert_eq!(number(25.0).to_string(), "25");
        assert_eq!(number(1.5).to_string(), "1.5");
        assert_eq!(number(f64::NAN), Value::Null);
        // JSON.stringify(1e16) is "10000000000000000".
        assert_eq!(number(1e16).to_string(), "10000000000000000");
        let mut v = json!({"a": [8192.0, {"b": -0.0}], "c": "1.0"});
        js_numbers(&mut v);
        assert_eq!(v.to_string(), r#"{"a":[8192,{"b":0}],"c":"1.0"}"#);
    }

    #[test]
    fn paths_normalize_and_resolve_as_nodes() {
        assert_eq!(normalize("/a//b/./c"), "/a/b/c");
        assert_eq!(normalize("/a/b/../c"), "/a/c");
        assert_eq!(normalize("/../.."), "/");
        assert_eq!(normalize("/a/b/"), "/a/b/");
        assert_eq!(normalize("/"), "/");
        assert_eq!(
            resolve(Path::new("/a/./b/../c")),
            Some(PathBuf::from("/a/c"))
        );
        assert_eq!(resolve(Path::new("/../x")), Some(PathBuf::from("/x")));
        let here = std::env::current_dir().unwrap();
        assert_eq!(resolve(Path::new("x/..")), Some(here));
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
        // Claude Code's project names, as Node sorts them.
        let mut names = vec![
            "ab", "a-b", "A", "1", "-y", "-tmp-b", "-tmp-A", "-tmp-a", "_x",
        ];
        names.sort_by(|a, b| locale_compare(a, b));
        assert_eq!(
            names,
            [
                "_x", "-tmp-a", "-tmp-A", "-tmp-b", "-y", "1", "A", "a-b", "ab"
            ]
        );
    }
}
