//! Secrets taken out of text an agent is shown: the user's `openclaw.json`
//! (`read_config`, the doctor's context) and OpenClaw's log lines.
//!
//! One normaliser and one matcher decide, for every name met — a key of the
//! config, a `name=` in a URL's query or an assignment — whether its value is
//! a secret:
//!
//! - **Normalise.** JSON and JSON5 escapes are decoded (`"to\u006ben"` is
//!   `token`), and the name is cut into lower-case words at separators
//!   (`_`, `-`, `.`, spaces), at camelCase and acronym boundaries and between
//!   letters and digits: `secretAccessKey` → `secret access key`,
//!   `OPENAI_API_KEY` → `openai api key`, `APIKey` → `api key`.
//! - **Match.** A word names a secret when it is one of [`SECRET_WORDS`] or
//!   ends with one of [`SECRET_ENDINGS`] (`apikey`, `authtoken`,
//!   `clientsecret` written as one word); its plural (`tokens`) names one
//!   too. A name with such a word is secret.
//! - **What is kept.** `true`, `false` and `null` are never redacted (they
//!   cannot hold a credential). A number is kept when the name counts: its
//!   secret words are all plural (`tokens: 1000`, `maxTokens`,
//!   `contextTokens`) — a model's limits, not credentials; under any other
//!   secret name it is redacted (`password: 123456`, `apiKey: 42`, and, on
//!   the safe side, `tokenLimit: 4096`).
//!   An object under a secret name is not hidden whole: its members are
//!   secret, at any depth, except plain settings ([`SETTINGS`]:
//!   `gateway.auth.mode` still shows, `apiKeys.openai` does not). Any other
//!   value — a string, a bare word, an array — is replaced by `"<redacted>"`.
//!
//! Beside names, text itself is searched wherever it is — string values,
//! comments, log lines: the credentials of a URL (`scheme://user:pass@host`),
//! `name=value` pairs whose name is secret (`?token=…&key=…`,
//! `OPENAI_API_KEY=…`), what follows `Bearer` or an `Authorization:` of
//! any scheme, and the argument after a secret's flag (`"--token", "…"`). Commented-out lines are
//! read as config too (JSON5 `//` and `/* */`), so a secret a user
//! commented out stays hidden.
//!
//! Over-redacting is the safe side (`sessionKey`, `keyBindings` go too).
//! Must never change the layout beyond the values it replaces, and never
//! take more than linear time, whatever the text.

use std::borrow::Cow;

const REDACTED: &str = "<redacted>";

/// Words that name a secret (after [`words`] cut the name).
const SECRET_WORDS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "pass",
    "pwd",
    "pw",
    "auth",
    "oauth",
    "authorization",
    "bearer",
    "cookie",
    "credential",
    "cred",
    "key",
    "dsn",
    "webhook",
    "signature",
    "sig",
    "jwt",
];

/// Endings that name a secret in a word written without separators
/// (`apikey`, `authtoken`, `clientsecret`, `adminpassword`).
const SECRET_ENDINGS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "key",
    "cookie",
    "credential",
];

/// Members of an object under a secret name that stay shown: settings,
/// never credentials.
const SETTINGS: &[&str] = &[
    "mode", "type", "kind", "provider", "source", "method", "strategy", "user", "username",
    "format", "version", "enabled",
];

/// A command-line flag whose value, the next argument, is a secret
/// (`"--token", "…"` in an MCP server's `args`).
fn secret_flag(text: &str) -> bool {
    text.starts_with('-')
        && !text.contains('=')
        && judge(text.trim_start_matches('-')) == Name::Secret
}

/// The user's config (JSON or JSON5) with its secrets replaced; the
/// layout the agent reads stays the user's own.
pub fn config(text: &str) -> String {
    let scanned = scan(text, true);
    free_text(&scanned).into_owned()
}

/// What a name tells of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    Plain,
    /// Secret, but a number under it is a count: its secret words are all
    /// plural (`maxTokens`).
    Counts,
    Secret,
}

/// The one matcher: `name` as written (escapes and all).
fn judge(name: &str) -> Name {
    let mut singular = false;
    let mut plural = false;
    for word in words(&unescape(name)) {
        if names_secret(&word) {
            singular = true;
        } else if word.strip_suffix('s').is_some_and(names_secret) {
            plural = true;
        }
    }
    match (singular, plural) {
        (true, _) => Name::Secret,
        (false, true) => Name::Counts,
        (false, false) => Name::Plain,
    }
}

fn names_secret(word: &str) -> bool {
    SECRET_WORDS.contains(&word) || SECRET_ENDINGS.iter().any(|e| word.ends_with(e))
}

/// The normaliser: a decoded name cut into lower-case words.
fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        if let Some(&prev) = i.checked_sub(1).and_then(|p| chars.get(p))
            && !word.is_empty()
        {
            let next = chars.get(i + 1).copied();
            let camel = prev.is_lowercase() && c.is_uppercase();
            // The last capital of an acronym starts the next word: APIKey.
            let acronym_end =
                prev.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase);
            let digits = prev.is_numeric() != c.is_numeric();
            if camel || acronym_end || digits {
                words.push(std::mem::take(&mut word));
            }
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// A JSON or JSON5 string body (or identifier) with its escapes decoded;
/// an escape that does not decode stays as written.
fn unescape(raw: &str) -> Cow<'_, str> {
    if !raw.contains('\\') {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let escape = &rest[at + 1..];
        let Some(c) = escape.chars().next() else {
            out.push('\\');
            rest = escape;
            break;
        };
        let (decoded, used) = match c {
            'n' => (Some('\n'), 1),
            'r' => (Some('\r'), 1),
            't' => (Some('\t'), 1),
            'b' => (Some('\u{8}'), 1),
            'f' => (Some('\u{c}'), 1),
            'v' => (Some('\u{b}'), 1),
            '0' => (Some('\0'), 1),
            'x' => (hex(escape.get(1..3)), 3),
            'u' => match unicode(escape) {
                Some((c, used)) => (Some(c), used),
                None => (None, 1),
            },
            // A line continuation: nothing.
            '\n' => {
                rest = &escape[1..];
                continue;
            }
            other => (Some(other), other.len_utf8()),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &escape[used..];
            }
            None => {
                out.push('\\');
                rest = escape;
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn hex(digits: Option<&str>) -> Option<char> {
    let digits = digits?;
    u32::from_str_radix(digits, 16)
        .ok()
        .and_then(char::from_u32)
}

/// `u` + four hex digits (a surrogate pair when two follow each other);
/// the character and the bytes used after the backslash.
fn unicode(escape: &str) -> Option<(char, usize)> {
    let unit = |s: Option<&str>| {
        s.filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|d| u32::from_str_radix(d, 16).ok())
    };
    let first = unit(escape.get(1..5))?;
    if (0xd800..0xdc00).contains(&first)
        && escape.get(5..7) == Some("\\u")
        && let Some(second) = unit(escape.get(7..11))
        && (0xdc00..0xe000).contains(&second)
    {
        let c = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
        return char::from_u32(c).map(|c| (c, 11));
    }
    char::from_u32(first).map(|c| (c, 5))
}

// ------------------------------------------------------------- structure

/// Redacts the values of secret names in JSON5 text, which is scanned, not
/// parsed (comments, unquoted names, single quotes — and log lines). With
/// `comments`, a comment's own text is scanned the same way, once (a
/// comment inside it is text).
fn scan(text: &str, comments: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Per open object: whether a secret name holds it (or one around it).
    let mut secret_objects: Vec<bool> = Vec::new();
    let mut opens_secret = false;
    // The string before was a secret's flag (`"--token"`): this one is
    // its value.
    let mut after_flag = false;
    while let Some(c) = rest.chars().next() {
        if comments && let Some(len) = comment_len(rest) {
            out.push_str(&comment(&rest[..len]));
            rest = &rest[len..];
            continue;
        }
        let quoted = c == '"' || c == '\'';
        let len = if quoted {
            string_len(rest)
        } else if c.is_alphabetic() || c == '_' || c == '$' || c == '\\' {
            identifier_len(rest)
        } else {
            match c {
                '{' => {
                    let inside = secret_objects.last() == Some(&true);
                    secret_objects.push(std::mem::take(&mut opens_secret) || inside);
                }
                '}' => {
                    secret_objects.pop();
                }
                _ => {}
            }
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        };
        let (word, after) = rest.split_at(len);
        rest = after;
        // Blanks and comments may stand between a name and its colon.
        let mut gap = 0;
        loop {
            gap += rest[gap..].len() - rest[gap..].trim_start().len();
            match comments.then(|| comment_len(&rest[gap..])).flatten() {
                Some(len) => gap += len,
                None => break,
            }
        }
        if !rest[gap..].starts_with(':') {
            // A value, not a name: its text is searched.
            if quoted && std::mem::take(&mut after_flag) {
                out.push('"');
                out.push_str(REDACTED);
                out.push('"');
                continue;
            }
            after_flag = quoted && secret_flag(string_body(word));
            out.push_str(&if quoted {
                string_value(word)
            } else {
                Cow::Borrowed(word)
            });
            continue;
        }
        after_flag = false;
        out.push_str(word);
        let name = if quoted { string_body(word) } else { word };
        let between = &rest[..gap];
        if comments {
            out.push_str(&scan(between, true));
        } else {
            out.push_str(between);
        }
        out.push(':');
        rest = &rest[gap + 1..];
        // What stands between the name and its value stays as written.
        loop {
            let space = rest.len() - rest.trim_start().len();
            out.push_str(&rest[..space]);
            rest = &rest[space..];
            match comments.then(|| comment_len(rest)).flatten() {
                Some(len) => {
                    out.push_str(&comment(&rest[..len]));
                    rest = &rest[len..];
                }
                None => break,
            }
        }
        let mut judged = judge(name);
        // Under a secret name every member is secret but a plain setting
        // (`auth: {mode: "token"}` shows its mode; `apiKeys: {openai: …}`
        // shows nothing).
        if judged == Name::Plain
            && secret_objects.last() == Some(&true)
            && !SETTINGS.contains(&unescape(name).to_ascii_lowercase().as_str())
        {
            judged = Name::Secret;
        }
        if rest.starts_with('{') {
            opens_secret = judged != Name::Plain;
            continue;
        }
        if judged == Name::Plain || rest.is_empty() {
            continue;
        }
        let len = if rest.starts_with(['"', '\'']) {
            string_len(rest)
        } else if rest.starts_with('[') {
            nested_len(rest)
        } else {
            let end = rest.find([',', '}', ']', '\n', '\r']).unwrap_or(rest.len());
            rest[..end].trim_end().len()
        };
        let value = &rest[..len];
        if value.is_empty() || kept(judged, value) {
            out.push_str(value);
        } else {
            out.push('"');
            out.push_str(REDACTED);
            out.push('"');
        }
        rest = &rest[len..];
    }
    out
}

/// A comment, its text scanned as config (a commented-out line is one);
/// a comment inside it is text.
fn comment(comment: &str) -> String {
    let (open, body, close) = match comment.strip_prefix("/*") {
        Some(body) => match body.strip_suffix("*/") {
            Some(body) => ("/*", body, "*/"),
            None => ("/*", body, ""),
        },
        None => ("//", &comment[2..], ""),
    };
    format!("{open}{}{close}", scan(body, false))
}

/// Whether a bare value under a secret name stays: `true`, `false`, `null`
/// always; a number when the name counts.
fn kept(judged: Name, value: &str) -> bool {
    matches!(value, "true" | "false" | "null") || judged == Name::Counts && is_number(value)
}

/// A JSON5 number: decimal (sign, fraction, exponent), hexadecimal,
/// `Infinity`, `NaN`.
fn is_number(value: &str) -> bool {
    let unsigned = value.strip_prefix(['+', '-']).unwrap_or(value);
    if matches!(unsigned, "Infinity" | "NaN") {
        return true;
    }
    if let Some(hex) = unsigned
        .strip_prefix("0x")
        .or_else(|| unsigned.strip_prefix("0X"))
    {
        return !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    unsigned.bytes().any(|b| b.is_ascii_digit()) && unsigned.parse::<f64>().is_ok()
}

/// A string value, its text searched: as written when nothing was found,
/// otherwise re-encoded with what was found replaced.
fn string_value(literal: &str) -> Cow<'_, str> {
    let decoded = unescape(string_body(literal));
    match free_text(&decoded) {
        Cow::Borrowed(_) => Cow::Borrowed(literal),
        Cow::Owned(redacted) => {
            Cow::Owned(serde_json::to_string(&redacted).expect("a string always serialises"))
        }
    }
}

/// The body of a quoted string as written (escapes kept).
fn string_body(literal: &str) -> &str {
    let inner = &literal[1..];
    let quote = &literal[..1];
    inner.strip_suffix(quote).unwrap_or(inner)
}

/// Length of the identifier `text` starts with: letters, digits, `_`,
/// `$`, `-` and escapes (`to\u006ben`).
fn identifier_len(text: &str) -> usize {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if !(c.is_alphanumeric() || c == '_' || c == '$' || c == '-') {
            return i;
        }
    }
    text.len()
}

/// Length of the `//` or `/* */` comment `text` starts with.
fn comment_len(text: &str) -> Option<usize> {
    if text.starts_with("//") {
        return Some(text.find('\n').unwrap_or(text.len()));
    }
    text.strip_prefix("/*")
        .map(|body| body.find("*/").map(|i| i + 4).unwrap_or(text.len()))
}

/// Length of the object or array `text` starts with (strings and comments
/// inside skipped whole; to the end if unbalanced).
fn nested_len(text: &str) -> usize {
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if let Some(comment) = comment_len(rest) {
            i += comment;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        match c {
            '"' | '\'' => {
                i += string_len(rest);
                continue;
            }
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += c.len_utf8();
    }
    text.len()
}

/// Length of the quoted string `text` starts with (to the end if unclosed).
fn string_len(text: &str) -> usize {
    let quote = text.as_bytes()[0];
    let mut escaped = false;
    for (i, b) in text.bytes().enumerate().skip(1) {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            _ if b == quote => return i + 1,
            _ => {}
        }
    }
    text.len()
}

// ------------------------------------------------------------- free text

/// `text` with the credentials of URLs, secret `name=value` pairs and
/// bearer tokens replaced (borrowed when there were none).
fn free_text(text: &str) -> Cow<'_, str> {
    let mut owned: Option<String> = None;
    for pass in [url_credentials, authorizations, assignments, bearer_tokens] {
        let changed = match pass(owned.as_deref().unwrap_or(text)) {
            Cow::Owned(changed) => Some(changed),
            Cow::Borrowed(_) => None,
        };
        if changed.is_some() {
            owned = changed;
        }
    }
    owned.map_or(Cow::Borrowed(text), Cow::Owned)
}

/// Replaces `ranges` (sorted, disjoint byte ranges) of `text`.
fn replaced(text: &str, ranges: &[(usize, usize)]) -> Cow<'static, str> {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(start, end) in ranges {
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        at = end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

fn unchanged_or(text: &str, ranges: Vec<(usize, usize)>) -> Cow<'_, str> {
    if ranges.is_empty() {
        Cow::Borrowed(text)
    } else {
        replaced(text, &ranges)
    }
}

/// Where a URL's authority, a value or a token ends.
fn ends_a_value(b: u8) -> bool {
    b.is_ascii_whitespace() || b"\"'`<>()[]{}\\,;&#".contains(&b)
}

/// `scheme://user:password@host`: everything before the last `@` of the
/// authority.
fn url_credentials(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let start = from + found + 3;
        let end = bytes[start..]
            .iter()
            .position(|&b| ends_a_value(b) || b == b'/' || b == b'?')
            .map_or(text.len(), |n| start + n);
        if let Some(at) = text[start..end].rfind('@')
            && at > 0
            && !text[start..start + at].contains(REDACTED)
        {
            ranges.push((start, start + at));
        }
        from = end.max(start);
    }
    unchanged_or(text, ranges)
}

/// The longest name an assignment may have (longer runs are not names).
const MAX_NAME: usize = 256;

/// `name=value` where the name is secret: a URL's query (`?token=…`),
/// an environment line (`OPENAI_API_KEY=…`), a log line.
fn assignments(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find('=') {
        let eq = from + found;
        from = eq + 1;
        let name_start = (eq.saturating_sub(MAX_NAME)..eq)
            .rev()
            .take_while(|&i| {
                let b = bytes[i];
                b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.'
            })
            .last();
        let Some(name_start) = name_start else {
            continue;
        };
        let judged = judge(&text[name_start..eq]);
        if judged == Name::Plain {
            continue;
        }
        let (start, end) = match bytes.get(eq + 1) {
            Some(&q @ (b'"' | b'\'')) => {
                let close = bytes[eq + 2..].iter().position(|&b| b == q);
                (eq + 2, close.map_or(text.len(), |n| eq + 2 + n))
            }
            _ => {
                let end = bytes[eq + 1..]
                    .iter()
                    .position(|&b| ends_a_value(b))
                    .map_or(text.len(), |n| eq + 1 + n);
                (eq + 1, end)
            }
        };
        let value = &text[start..end];
        if !value.is_empty() && value != REDACTED && !kept(judged, value) {
            ranges.push((start, end));
        }
        from = end.max(from);
    }
    unchanged_or(text, ranges)
}

/// An `Authorization` header's credentials, whatever the scheme
/// (`Authorization: Basic …`, `authorization=token …`): the scheme stays.
fn authorizations(text: &str) -> Cow<'_, str> {
    credentials_after(text, "authorization", true)
}

/// What follows `Bearer ` (any case), as an `Authorization` header has it.
fn bearer_tokens(text: &str) -> Cow<'_, str> {
    credentials_after(text, "bearer", false)
}

/// The value after each `marker` (any case): after a header's `:` or `=`
/// and its scheme word, or after a word and a blank (`Bearer …`).
fn credentials_after<'a>(text: &'a str, marker: &str, header: bool) -> Cow<'a, str> {
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(found) = lower[from..].find(marker) {
        let word = from + found;
        from = word + marker.len();
        let separators: &[u8] = if header { b":= \t\"'" } else { b" \t" };
        let sep = bytes[from..]
            .iter()
            .take_while(|b| separators.contains(b))
            .count();
        let separated = if header {
            bytes[from..from + sep]
                .iter()
                .any(|&b| b == b':' || b == b'=')
        } else {
            sep > 0 && (word == 0 || !bytes[word - 1].is_ascii_alphanumeric())
        };
        if !separated {
            continue;
        }
        let mut start = from + sep;
        if header {
            // A scheme word and a blank, then the credentials.
            let scheme = bytes[start..]
                .iter()
                .take_while(|b| b.is_ascii_alphabetic())
                .count();
            let blank = bytes[start + scheme..]
                .iter()
                .take_while(|&&b| b == b' ' || b == b'\t')
                .count();
            if scheme > 0 && blank > 0 {
                start += scheme + blank;
            }
        }
        let end = bytes[start..]
            .iter()
            .position(|&b| ends_a_value(b))
            .map_or(text.len(), |n| start + n);
        if end > start && &text[start..end] != REDACTED {
            ranges.push((start, end));
        }
        from = end.max(from);
    }
    unchanged_or(text, ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cut_into_words_however_they_are_spelled() {
        for (name, expected) in [
            ("secretAccessKey", &["secret", "access", "key"][..]),
            ("accessKeyId", &["access", "key", "id"]),
            ("OPENAI_API_KEY", &["openai", "api", "key"]),
            ("APIKey", &["api", "key"]),
            ("x-api-key", &["x", "api", "key"]),
            ("oauth2Token", &["oauth", "2", "token"]),
            ("maxTokens", &["max", "tokens"]),
        ] {
            assert_eq!(words(name), expected, "{name}");
        }
        assert_eq!(unescape(r"to\u006ben"), "token");
        assert_eq!(unescape(r"pa\x73s"), "pass");
        assert_eq!(unescape(r"\ud83e\udd80"), "🦀");
        assert_eq!(unescape(r"bad\u12"), r"bad\u12");
    }

    #[test]
    fn the_matcher_tells_secrets_counts_and_plain_names_apart() {
        for name in [
            "token",
            "pass",
            "passwd",
            "apikey",
            "api_key",
            "API-KEY",
            "auth",
            "NPM_AUTH",
            "bearer",
            "Cookie",
            "credential",
            "private_key",
            "to\\u006ben",
            "PASSWORD",
            "accessKeyId",
            "gatewayToken",
            "tokenLimit",
        ] {
            assert_eq!(judge(name), Name::Secret, "{name}");
        }
        for name in [
            "tokens",
            "maxTokens",
            "contextTokens",
            "credentials",
            "apiKeys",
        ] {
            assert_eq!(judge(name), Name::Counts, "{name}");
        }
        for name in [
            "tokenizer",
            "keyboard",
            "author",
            "mode",
            "port",
            "passive",
            "bypass",
        ] {
            assert_eq!(judge(name), Name::Plain, "{name}");
        }
    }

    /// A config written to slip secrets past the redaction: other
    /// spellings, escapes in key names, credentials in URLs, commented-out
    /// lines — and, beside them, the values it must keep.
    const HOSTILE_CONFIG: &str = r#"{
  // "apiKey": "sk-commented-1",
  /* gateway: { password: "commented-2" } */
  // OPENAI_API_KEY=sk-commented-3 and Bearer commented-4
  "to\u006ben": "escaped-1",
  "pa\x73sword": 'escaped-2',
  to\u006Ben2: escaped-3,
  'pass': 'plain-1',
  passwd: "plain-2",
  "accessKeyId": "AKIAPLAIN3",
  "secretAccessKey": "plain-4",
  "NPM_AUTH": "plain-5",
  "auth": "plain-6",
  "API-KEY": "plain-7",
  "api_key": "plain-8",
  "private_key": "-----BEGIN plain-9",
  "bearer": "plain-10",
  "Cookie": "plain-11",
  "credentials": "plain-12",
  "Credential": "plain-13",
  "PASSWORD": 123456,
  "x-api-key": ["plain-14"],
  "baseUrl": "https://alice:url-pass-1@api.example.com/v1?token=url-2&lang=en&key=url-3&access_token=url-4&api_key=url-5#top",
  "proxy": 'socks5://bob:url-pass-6@10.0.0.1:1080',
  "hooks": { "url": "https://h.example/x?sig=url-7&ok=yes" },
  "headers": { "X-Note": "Bearer header-1" },
  "models": { "tokens": 1000, "maxTokens": 8192, "contextTokens": 200000, "to\u006Bens": 2000 },
  "gateway": { "auth": { "mode": "token", "enabled": true } },
  "tokenizer": "cl100k",
  "keyboard": "us",
  "author": "Ada",
  "port": 18789,
}"#;

    #[test]
    fn a_hostile_config_leaks_nothing_and_keeps_what_it_must() {
        let out = config(HOSTILE_CONFIG);
        for secret in [
            "sk-commented-1",
            "commented-2",
            "sk-commented-3",
            "commented-4",
            "escaped-1",
            "escaped-2",
            "escaped-3",
            "AKIAPLAIN3",
            "123456",
            "url-pass-1",
            "url-2",
            "url-3",
            "url-4",
            "url-5",
            "url-pass-6",
            "url-7",
            "header-1",
        ] {
            assert!(!out.contains(secret), "{secret} leaked:\n{out}");
        }
        for n in 1..=14 {
            let secret = format!("plain-{n}\"");
            assert!(!out.contains(&secret), "{secret} leaked:\n{out}");
        }
        for kept in [
            "\"tokens\": 1000",
            "\"maxTokens\": 8192",
            "\"contextTokens\": 200000",
            "\"to\\u006Bens\": 2000",
            "\"mode\": \"token\"",
            "\"enabled\": true",
            "\"tokenizer\": \"cl100k\"",
            "\"keyboard\": \"us\"",
            "\"author\": \"Ada\"",
            "\"port\": 18789",
            "https://<redacted>@api.example.com/v1?token=<redacted>&lang=en&key=<redacted>&access_token=<redacted>&api_key=<redacted>#top",
            "socks5://<redacted>@10.0.0.1:1080",
            "?sig=<redacted>&ok=yes",
            "Bearer <redacted>",
            "// \"apiKey\": \"<redacted>\",",
        ] {
            assert!(out.contains(kept), "{kept} was not kept:\n{out}");
        }
        assert_eq!(out.lines().count(), HOSTILE_CONFIG.lines().count(), "{out}");
    }

    #[test]
    fn secrets_are_redacted_and_layout_kept() {
        let text = r#"{
  // my gateway
  "gateway": { "auth": { "mode": "token", "token": "s3cr3t" } },
  models: {
    apiKey: 'sk-live-123',
    "baseUrl": "http://127.0.0.1:18555/v1",
  },
}"#;
        let out = config(text);
        assert!(!out.contains("sk-live-123"));
        assert!(!out.contains("s3cr3t"));
        assert!(out.contains("apiKey: \"<redacted>\","), "{out}");
        assert!(out.contains(r#""mode": "token""#), "{out}");
        assert!(out.contains("\"baseUrl\": \"http://127.0.0.1:18555/v1\","));
        assert!(out.contains("// my gateway"));
        assert_eq!(out.lines().count(), text.lines().count());
    }

    #[test]
    fn whole_arrays_members_of_secret_objects_and_auth_headers_are_redacted() {
        let out = config(
            r#"{ "apiKeys": ["sk-1", "sk-2"], headers: { Authorization: "Bearer sk-3" }, "credentials": { "user": "u", "pass": "p-4" }, "webhookUrl": "https://x/hook?token=t", "port": 18789 }"#,
        );
        for secret in ["sk-1", "sk-2", "sk-3", "p-4", "hook?token"] {
            assert!(!out.contains(secret), "{secret} leaked: {out}");
        }
        assert!(out.contains("\"user\": \"u\""), "{out}");
        assert!(out.contains("\"port\": 18789"), "{out}");
    }

    /// Shapes a reviewer saw leak: members with plain names under a
    /// secret one, a comment before the colon, a flag's value in `args`,
    /// an `Authorization` header of another scheme.
    #[test]
    fn secrets_in_other_shapes_are_redacted() {
        let out = config(
            r#"{ "apiKeys": { "openai": "sk-proj-AAAA" }, "secrets": { "github": "ghp_BBBB", "nested": { "x": "DDDD" } },
                "credentials": { "default": "CCCC", "type": "oauth" }, "apiKey"/*c*/: "TTTT",
                "mcp": { "args": ["--port", "80", "--token", "OOOO", "--api-key", "PPPP"] },
                "headers": { "X": "Authorization: Basic QUJD", "Y": "authorization=token ZZZZ" },
                "auth": { "mode": "token", "token": "EEEE" } }"#,
        );
        for secret in [
            "AAAA", "BBBB", "CCCC", "DDDD", "TTTT", "OOOO", "PPPP", "QUJD", "ZZZZ", "EEEE",
        ] {
            assert!(!out.contains(secret), "{secret} leaked: {out}");
        }
        for kept in [
            "\"type\": \"oauth\"",
            "\"mode\": \"token\"",
            "\"--port\", \"80\"",
            "/*c*/",
            "Basic ",
        ] {
            assert!(out.contains(kept), "{kept} lost: {out}");
        }
    }

    /// Inside a comment's body a word no longer searches the rest of the
    /// text for a comment's end (`"a /*"` × 40,000 took 19.5 s; 1 MB about
    /// 12 minutes): the body is redacted as config all the same.
    #[test]
    fn words_in_a_comment_body_do_not_rescan_the_text() {
        let text = format!("// {}token: hunter2", "a /*".repeat(50_000));
        let out = config(&text);
        assert!(!out.contains("hunter2"));
        assert_eq!(
            out.len(),
            text.len() - "hunter2".len() + "\"<redacted>\"".len()
        );
    }

    #[test]
    fn bare_values_and_commented_out_secrets() {
        let out = config("{ password: hunter2, // token: \"kept out of a comment\"\n port: 1 }");
        assert!(!out.contains("hunter2"), "{out}");
        assert!(!out.contains("kept out of a comment"), "{out}");
        assert!(out.contains("// token: \"<redacted>\""), "{out}");
        assert!(out.contains("port: 1"), "{out}");
    }

    #[test]
    fn log_lines_lose_their_credentials() {
        let line = "2026-01-02 error: connect failed token=abc123 url=wss://u:p@gw:1/x Authorization: Bearer eyJhbGci";
        let out = config(line);
        for secret in ["abc123", "u:p@", "eyJhbGci"] {
            assert!(!out.contains(secret), "{secret} leaked: {out}");
        }
        assert!(out.starts_with("2026-01-02 error: connect failed"), "{out}");
    }

    #[test]
    fn pathological_text_is_handled_whole_without_a_panic() {
        let many = "/*".repeat(100_000) + &"a=".repeat(100_000) + "\"\\u" + &"://@".repeat(50_000);
        let out = config(&many);
        assert!(out.len() >= many.len() / 2);
        for text in [
            "\"",
            "'",
            "\\",
            "a:",
            "\"k\":",
            "/*",
            "bearer",
            "x=\"",
            "\"\\ud800\"",
        ] {
            let _ = config(text);
        }
    }
}
