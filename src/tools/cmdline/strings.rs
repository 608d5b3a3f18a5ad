//! The shell's own computations on known text: pattern trims and
//! replacements (`${X#p}`, `${X/p/r}`), brace expansion (`{a,b}`,
//! `{1..9}`), and `printf`'s format — each bounded in the work it does.

use super::*;

/// Values longer than this come out of a pattern operation unknown (it
/// tries every prefix or suffix): the work one expansion does is bounded.
const PATTERN_VALUE_AT_MOST: usize = 4096;
/// The same for `${X/p/r}`, which tries every start with every end.
const REPLACE_VALUE_AT_MOST: usize = 256;

fn pattern_matcher(pattern: &str) -> Option<globset::GlobMatcher> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

/// Where `value` may be cut: every character's start, and its end.
fn cuts(value: &str) -> Vec<usize> {
    value
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(value.len()))
        .collect()
}

/// `${X#p}`, `${X##p}`, `${X%p}`, `${X%%p}`.
pub(super) fn trim(value: &str, pattern: &str, suffix: bool, longest: bool) -> String {
    if value.len() > PATTERN_VALUE_AT_MOST {
        return UNKNOWN.to_string();
    }
    let Some(matcher) = pattern_matcher(pattern) else {
        return value.to_owned();
    };
    let cuts = cuts(value);
    let matching = |piece: &str| matcher.is_match(piece);
    let found = if suffix {
        let mut order: Vec<usize> = cuts.clone();
        if !longest {
            order.reverse();
        }
        order
            .into_iter()
            .find(|&i| matching(&value[i..]))
            .map(|i| value[..i].to_owned())
    } else {
        let mut order: Vec<usize> = cuts.clone();
        if longest {
            order.reverse();
        }
        order
            .into_iter()
            .find(|&i| matching(&value[..i]))
            .map(|i| value[i..].to_owned())
    };
    found.unwrap_or_else(|| value.to_owned())
}

/// `${X/p/r}` and its kinds: the longest match at the first place one
/// starts (every place, with `//`).
pub(super) fn replace(
    value: &str,
    pattern: &str,
    with: &str,
    all: bool,
    anchor: Option<char>,
) -> String {
    // Every start tried with every end: cubic in the value's length.
    if value.len() > REPLACE_VALUE_AT_MOST {
        return UNKNOWN.to_string();
    }
    let Some(matcher) = pattern_matcher(pattern).filter(|_| !pattern.is_empty()) else {
        return value.to_owned();
    };
    let cuts = cuts(value);
    match anchor {
        Some('#') => {
            return match cuts.iter().rev().find(|&&e| matcher.is_match(&value[..e])) {
                Some(&e) => format!("{with}{}", &value[e..]),
                None => value.to_owned(),
            };
        }
        Some(_) => {
            return match cuts.iter().find(|&&s| matcher.is_match(&value[s..])) {
                Some(&s) => format!("{}{with}", &value[..s]),
                None => value.to_owned(),
            };
        }
        None => {}
    }
    let mut out = String::new();
    let mut at = 0;
    while at < cuts.len() - 1 {
        let start = cuts[at];
        let end = cuts[at + 1..]
            .iter()
            .rev()
            .position(|&e| matcher.is_match(&value[start..e]))
            .map(|p| cuts.len() - 1 - p);
        match end {
            Some(end_at) => {
                out.push_str(with);
                at = end_at;
                if !all {
                    out.push_str(&value[cuts[at]..]);
                    return out;
                }
            }
            None => {
                out.push_str(&value[start..cuts[at + 1]]);
                at += 1;
            }
        }
    }
    out
}

/// The first brace group of unquoted text (`{a,b}`, `{1..3}`, `{a..c}`):
/// where it opens and closes, and the texts it stands for.
pub(super) fn brace_group(text: &str) -> Option<(usize, usize, Vec<String>)> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(offset) = text[from..].find('{') {
        let open = from + offset;
        let mut depth = 0usize;
        let mut commas = Vec::new();
        let mut close = None;
        for (i, b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(i);
                        break;
                    }
                }
                b',' if depth == 1 => commas.push(i),
                _ => {}
            }
        }
        let close = close?;
        let inside = &text[open + 1..close];
        if !commas.is_empty() {
            let mut alternatives = Vec::new();
            let mut start = open + 1;
            for comma in commas.into_iter().chain(std::iter::once(close)) {
                alternatives.push(text[start..comma].to_owned());
                start = comma + 1;
            }
            return Some((open, close, alternatives));
        }
        if let Some(sequence) = brace_sequence(inside) {
            return Some((open, close, sequence));
        }
        from = open + 1;
    }
    None
}

/// `a..e`, `1..10`, `1..10..2`: the texts it counts through (at most
/// [`MAX_BRACES`]).
fn brace_sequence(inside: &str) -> Option<Vec<String>> {
    let mut ends = inside.split("..");
    let (first, last) = (ends.next()?, ends.next()?);
    let step = ends
        .next()
        .map_or(Some(1), |s| s.parse::<i64>().ok())?
        .unsigned_abs()
        .clamp(1, i64::MAX as u64) as i64;
    if ends.next().is_some() {
        return None;
    }
    let count = |from: i64, to: i64| {
        let up = from <= to;
        let mut out = Vec::new();
        let mut at = from;
        while out.len() <= MAX_BRACES && (if up { at <= to } else { at >= to }) {
            out.push(at);
            let next = if up {
                at.checked_add(step)
            } else {
                at.checked_sub(step)
            };
            match next {
                Some(next) => at = next,
                None => break,
            }
        }
        out
    };
    if let (Ok(from), Ok(to)) = (first.parse::<i64>(), last.parse::<i64>()) {
        return Some(count(from, to).into_iter().map(|n| n.to_string()).collect());
    }
    let (mut a, mut b) = (first.chars(), last.chars());
    let (Some(from), None, Some(to), None) = (a.next(), a.next(), b.next(), b.next()) else {
        return None;
    };
    if !(from.is_ascii_alphabetic() && to.is_ascii_alphabetic()) {
        return None;
    }
    Some(
        count(from as i64, to as i64)
            .into_iter()
            .filter_map(|n| char::from_u32(n as u32).map(String::from))
            .collect(),
    )
}

/// What `printf FORMAT ARGS…` prints, as far as a path goes: each
/// conversion takes the next argument, `%%` is `%`.
pub(super) fn printf(format: &str, args: &[&str]) -> String {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        // Flags, width and precision, then the conversion.
        while chars
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | ' ' | '#' | '.'))
        {
            chars.next();
        }
        chars.next();
        out.push_str(args.next().copied().unwrap_or_default());
    }
    out
}
