//! Shell text into tokens: words with their quoted and expanded pieces,
//! operators, redirections and here-documents (`$'…'`, `${X%p}`, `$(…)`,
//! `<<EOF` …). Nothing is expanded here; [`super`] expands.

use super::*;

/// A word before expansion: its pieces, each quoted or not.
#[derive(Debug, Clone, Default)]
pub(super) struct Raw {
    pub(super) parts: Vec<Part>,
}

#[derive(Debug, Clone)]
pub(super) enum Part {
    /// Text; `quoted` text is never split or globbed.
    Text { text: String, quoted: bool },
    /// `$NAME`, `${NAME}`, `${NAME:-default}`, `${NAME[i]}`, …
    Var {
        name: String,
        quoted: bool,
        /// `${NAME[…]}`: an element of an array (any of them).
        subscript: bool,
        /// What is done to the value (`${X:-d}`, `${X%.*}`, `${X/a/b}`, …).
        op: Option<VarOp>,
    },
    /// `$(…)` or `` `…` ``: read as commands of its own; expands to text
    /// only known when it runs.
    Sub(String),
    /// `~` or `~user` at the start of a word.
    Tilde(String),
}

/// An operation on a variable's value, as the shell performs it.
#[derive(Debug, Clone)]
pub(super) enum VarOp {
    /// `-`/`:-`/`=`/`:=` (used when unset), `+`/`:+` (used when set); the
    /// flag: with `:` (empty counts as unset).
    Default(char, bool, Raw),
    /// `#`, `##`, `%`, `%%`: the shortest or longest prefix or suffix
    /// matching a pattern taken off.
    Trim {
        suffix: bool,
        longest: bool,
        pattern: Raw,
    },
    /// `/pat/rep`, `//pat/rep`, `/#pat/rep`, `/%pat/rep`.
    Replace {
        all: bool,
        anchor: Option<char>,
        pattern: Raw,
        with: Raw,
    },
    /// `:offset` and `:offset:length`.
    Slice(String, Option<String>),
    /// `^`, `^^`, `,`, `,,`.
    Case { upper: bool, all: bool },
}

/// Tokens of one script.
#[derive(Debug, Clone)]
pub(super) enum Token {
    Word(Raw),
    /// The end of a command: what ends it.
    Break(Op),
    /// `>`, `<<`, `2>&1`, …: the next word is its target (or, for `<<`, the
    /// here-document's delimiter; the document follows as `Heredoc`).
    Redirect {
        heredoc: bool,
        herestring: bool,
        /// `<`, `3<`, `<>`: the target is read.
        input: bool,
    },
    Heredoc(String),
}

/// A simple command not yet read: its words, and its redirections'
/// targets (each with whether it is read).
pub(super) type Unread = (Vec<Raw>, Vec<(Raw, bool)>);

/// What ends a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// `;`, `&`, `&&`, `||`, a newline.
    End,
    /// `|`, `|&`: its output is the next command's input.
    Pipe,
    /// `(`.
    Open,
    /// `)`.
    Close,
}

impl Raw {
    /// `NAME=` with nothing after it: what an array's `(` follows.
    pub(super) fn array_name(&self) -> Option<String> {
        let text = self.literal()?;
        let name = text.strip_suffix("+=").or_else(|| text.strip_suffix('='))?;
        is_name(name).then(|| name.to_owned())
    }

    /// The word's text when it is all literal (reserved words, `cd`).
    pub(super) fn literal(&self) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text { text, .. } => out.push_str(text),
                _ => return None,
            }
        }
        Some(out)
    }

    /// `NAME=value` (unquoted name): the name and the value's pieces.
    pub(super) fn assignment(&self) -> Option<(String, Raw)> {
        let Some(Part::Text {
            text,
            quoted: false,
        }) = self.parts.first()
        else {
            return None;
        };
        let (name, first) = text.split_once('=')?;
        if !is_name(name) {
            return None;
        }
        let mut value = Raw::default();
        if !first.is_empty() {
            value.parts.push(Part::Text {
                text: first.to_owned(),
                quoted: false,
            });
        }
        value.parts.extend(self.parts[1..].iter().cloned());
        Some((name.to_owned(), value))
    }
}

/// Splits shell text into words and operators, with quotes, escapes,
/// expansions, comments and here-documents understood.
pub(super) fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut word = Raw::default();
    let mut in_word = false;
    // Delimiter, `<<-`, and where its body goes: right after its `<<`, so
    // that the body reaches the command it belongs to, not the line's last.
    let mut pending_heredocs: Vec<(String, bool, usize)> = Vec::new();
    let mut i = 0;
    let finish = |tokens: &mut Vec<Token>, word: &mut Raw, in_word: &mut bool| {
        if *in_word {
            tokens.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\r' => {
                finish(&mut tokens, &mut word, &mut in_word);
                i += 1;
            }
            '\n' => {
                finish(&mut tokens, &mut word, &mut in_word);
                i += 1;
                // Here-documents start on the next line, in the order of
                // their `<<`s; each goes where its `<<` stands.
                for (inserted, (delimiter, strip_tabs, at)) in std::mem::take(&mut pending_heredocs)
                    .into_iter()
                    .enumerate()
                {
                    let (body, next) = heredoc(&chars, i, &delimiter, strip_tabs);
                    tokens.insert(at + inserted, Token::Heredoc(body));
                    i = next;
                }
                tokens.push(Token::Break(Op::End));
            }
            '#' if !in_word => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ';' | '&' | '|' | '(' | ')' => {
                // `&>` and `&>>` redirect; `>&`/`<&` are handled with `>`.
                if c == '&' && chars.get(i + 1) == Some(&'>') {
                    finish(&mut tokens, &mut word, &mut in_word);
                    i += if chars.get(i + 2) == Some(&'>') { 3 } else { 2 };
                    tokens.push(Token::Redirect {
                        heredoc: false,
                        herestring: false,
                        input: false,
                    });
                    continue;
                }
                finish(&mut tokens, &mut word, &mut in_word);
                let op = match c {
                    '(' => Op::Open,
                    ')' => Op::Close,
                    '|' if chars.get(i + 1) != Some(&'|') => Op::Pipe,
                    _ => Op::End,
                };
                tokens.push(Token::Break(op));
                i += 1;
                // `()` stay two tokens (a function's definition).
                while op != Op::Open
                    && op != Op::Close
                    && i < chars.len()
                    && matches!(chars[i], ';' | '&' | '|')
                {
                    i += 1;
                }
            }
            '<' | '>' if chars.get(i + 1) == Some(&'(') => {
                // `<(…)`, `>(…)`: a process substitution, a word whose
                // commands are read as a command substitution's are.
                let end = matching(&chars, i + 2, '(', ')');
                word.parts
                    .push(Part::Sub(chars[(i + 2).min(end)..end].iter().collect()));
                in_word = true;
                i = (end + 1).min(chars.len());
            }
            '<' | '>' => {
                // A redirection; digits just before it name a descriptor.
                if in_word && word.parts.iter().all(|p| matches!(p, Part::Text { text, quoted: false } if text.chars().all(|c| c.is_ascii_digit()))) {
                    word = Raw::default();
                    in_word = false;
                } else {
                    finish(&mut tokens, &mut word, &mut in_word);
                }
                let mut op = String::from(c);
                i += 1;
                while i < chars.len()
                    && matches!(chars[i], '<' | '>' | '&' | '|' | '-')
                    && op.len() < 3
                {
                    op.push(chars[i]);
                    i += 1;
                }
                // `>&2`, `2>&1`, `<&-`: a descriptor, not a file.
                if op.ends_with('&') || op.ends_with("&-") {
                    while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '-') {
                        i += 1;
                    }
                    continue;
                }
                let heredoc = op.starts_with("<<") && !op.starts_with("<<<");
                let herestring = op.starts_with("<<<");
                if heredoc {
                    // The delimiter is the next word, quotes removed.
                    while i < chars.len() && matches!(chars[i], ' ' | '\t') {
                        i += 1;
                    }
                    let start = i;
                    while i < chars.len()
                        && !matches!(
                            chars[i],
                            ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
                        )
                    {
                        i += 1;
                    }
                    let delimiter: String = chars[start..i]
                        .iter()
                        .filter(|c| !matches!(c, '\'' | '"' | '\\'))
                        .collect();
                    tokens.push(Token::Redirect {
                        heredoc: true,
                        herestring: false,
                        input: false,
                    });
                    pending_heredocs.push((delimiter, op.ends_with('-'), tokens.len()));
                    continue;
                }
                tokens.push(Token::Redirect {
                    heredoc: false,
                    herestring,
                    input: op.starts_with('<'),
                });
            }
            '\'' => {
                let end = find(&chars, i + 1, '\'');
                push_text(&mut word, chars[i + 1..end].iter().collect(), true);
                in_word = true;
                i = (end + 1).min(chars.len());
            }
            '"' => {
                i = double_quoted(&chars, i + 1, &mut word);
                in_word = true;
            }
            '\\' => {
                if let Some(&next) = chars.get(i + 1)
                    && next != '\n'
                {
                    push_text(&mut word, next.to_string(), true);
                    in_word = true;
                }
                i += 2;
            }
            '$' if chars.get(i + 1) == Some(&'"') => {
                // $"…": a string the locale may translate; read as written.
                i = double_quoted(&chars, i + 2, &mut word);
                in_word = true;
            }
            '$' if chars.get(i + 1) == Some(&'\'') => {
                // $'…': ANSI-C quoting.
                let (text, next) = ansi_c(&chars, i + 2);
                push_text(&mut word, text, true);
                in_word = true;
                i = next;
            }
            '$' => {
                i = dollar(&chars, i, false, &mut word);
                in_word = true;
            }
            '`' => {
                let end = find(&chars, i + 1, '`');
                let inner: String = chars[i + 1..end].iter().collect();
                word.parts.push(Part::Sub(inner.replace("\\`", "`")));
                in_word = true;
                i = (end + 1).min(chars.len());
            }
            '~' if !in_word => {
                let mut j = i + 1;
                while j < chars.len()
                    && (chars[j].is_ascii_alphanumeric()
                        || matches!(chars[j], '_' | '-' | '.' | '+'))
                {
                    j += 1;
                }
                let ends = j >= chars.len()
                    || matches!(
                        chars[j],
                        '/' | ' ' | '\t' | '\n' | ';' | '&' | '|' | ')' | ':'
                    );
                if ends {
                    word.parts
                        .push(Part::Tilde(chars[i + 1..j].iter().collect()));
                    i = j;
                } else {
                    push_text(&mut word, "~".into(), false);
                    i += 1;
                }
                in_word = true;
            }
            _ => {
                push_text(&mut word, c.to_string(), false);
                in_word = true;
                i += 1;
            }
        }
    }
    finish(&mut tokens, &mut word, &mut in_word);
    tokens
}

fn push_text(word: &mut Raw, text: String, quoted: bool) {
    if let Some(Part::Text {
        text: last,
        quoted: q,
    }) = word.parts.last_mut()
        && *q == quoted
    {
        last.push_str(&text);
        return;
    }
    word.parts.push(Part::Text { text, quoted });
}

/// The index of `close` from `from` on (or the end).
fn find(chars: &[char], from: usize, close: char) -> usize {
    let mut i = from;
    while i < chars.len() && chars[i] != close {
        if close == '`' && chars[i] == '\\' {
            i += 1;
        }
        i += 1;
    }
    i.min(chars.len())
}

/// `"…"` from just after the quote; returns the index after the closing one.
fn double_quoted(chars: &[char], mut i: usize, word: &mut Raw) -> usize {
    // An empty "" still makes a word.
    push_text(word, String::new(), true);
    while i < chars.len() {
        match chars[i] {
            '"' => return i + 1,
            '\\' if matches!(chars.get(i + 1), Some('$' | '`' | '"' | '\\' | '\n')) => {
                if chars[i + 1] != '\n' {
                    push_text(word, chars[i + 1].to_string(), true);
                }
                i += 2;
            }
            '$' => i = dollar(chars, i, true, word),
            '`' => {
                let end = find(chars, i + 1, '`');
                word.parts
                    .push(Part::Sub(chars[i + 1..end].iter().collect()));
                i = (end + 1).min(chars.len());
            }
            c => {
                push_text(word, c.to_string(), true);
                i += 1;
            }
        }
    }
    i
}

/// `$…` at `i`; returns the index after it.
fn dollar(chars: &[char], i: usize, quoted: bool, word: &mut Raw) -> usize {
    match chars.get(i + 1) {
        Some('(') => {
            let arithmetic = chars.get(i + 2) == Some(&'(');
            let end = matching(chars, i + 2, '(', ')');
            let inner: String = chars[(i + 2).min(end)..end].iter().collect();
            if !arithmetic {
                word.parts.push(Part::Sub(inner));
            }
            (end + 1).min(chars.len())
        }
        Some('{') => {
            let end = matching(chars, i + 2, '{', '}');
            let inner: String = chars[(i + 2).min(end)..end].iter().collect();
            word.parts.push(braced(&inner, quoted));
            (end + 1).min(chars.len())
        }
        Some(c) if c.is_ascii_alphabetic() || *c == '_' => {
            let mut j = i + 1;
            while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            word.parts.push(Part::Var {
                name: chars[i + 1..j].iter().collect(),
                quoted,
                subscript: false,
                op: None,
            });
            j
        }
        Some(c) if c.is_ascii_digit() || matches!(c, '@' | '*' | '#' | '?' | '$' | '!' | '-') => {
            // Positional and special parameters: unknown here.
            word.parts.push(Part::Var {
                name: c.to_string(),
                quoted,
                subscript: false,
                op: None,
            });
            i + 2
        }
        _ => {
            push_text(word, "$".into(), quoted);
            i + 1
        }
    }
}

/// `${…}`'s inside: a name (`!NAME`: the one NAME names), perhaps a
/// subscript, and perhaps an operation on the value.
fn braced(inner: &str, quoted: bool) -> Part {
    // `${#NAME}` is a length; read as the value (the stricter reading).
    let inner = match inner.strip_prefix('#') {
        Some(rest) if !rest.is_empty() => rest,
        _ => inner,
    };
    let (bang, inner) = match inner.strip_prefix('!') {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') => {
            ("!", rest)
        }
        _ => ("", inner),
    };
    let end = if inner.starts_with(['@', '*', '#', '?', '$', '!', '-']) {
        1
    } else if inner.starts_with(|c: char| c.is_ascii_digit()) {
        inner
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(inner.len())
    } else {
        inner
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(inner.len())
    };
    let (name, mut rest) = inner.split_at(end);
    let mut subscript = false;
    if let Some(after) = rest.strip_prefix('[') {
        subscript = true;
        rest = after.split_once(']').map_or("", |(_, r)| r);
    }
    Part::Var {
        name: format!("{bang}{name}"),
        quoted,
        subscript,
        op: var_op(rest),
    }
}

/// The operation after a `${NAME`.
fn var_op(rest: &str) -> Option<VarOp> {
    let word = |text: &str| -> Raw {
        tokenize(text)
            .into_iter()
            .find_map(|t| match t {
                Token::Word(w) => Some(w),
                _ => None,
            })
            .unwrap_or_default()
    };
    // A pattern keeps its text as written (quotes only taken off).
    let pattern = |text: &str| -> Raw {
        let mut raw = word(text);
        for part in &mut raw.parts {
            if let Part::Text { quoted, .. } = part {
                *quoted = true;
            }
        }
        raw
    };
    if let Some(op) = [":-", ":=", ":+", ":?", "-", "=", "+", "?"]
        .iter()
        .find(|op| rest.starts_with(**op))
    {
        let kind = op.chars().last().unwrap_or('-');
        // `?` fails when unset: what follows is only a message.
        let kind = if kind == '?' { '+' } else { kind };
        return Some(VarOp::Default(
            kind,
            op.starts_with(':'),
            word(&rest[op.len()..]),
        ));
    }
    let mut chars = rest.chars();
    match chars.next()? {
        c @ ('#' | '%') => {
            let longest = rest[1..].starts_with(c);
            let text = if longest { &rest[2..] } else { &rest[1..] };
            Some(VarOp::Trim {
                suffix: c == '%',
                longest,
                pattern: pattern(text),
            })
        }
        '/' => {
            let mut text = &rest[1..];
            let all = text.starts_with('/');
            if all {
                text = &text[1..];
            }
            let anchor = text.chars().next().filter(|c| matches!(c, '#' | '%'));
            if anchor.is_some() {
                text = &text[1..];
            }
            let (find, with) = text.split_once('/').unwrap_or((text, ""));
            Some(VarOp::Replace {
                all,
                anchor,
                pattern: pattern(find),
                with: word(with),
            })
        }
        ':' => {
            let (offset, length) = match rest[1..].split_once(':') {
                Some((o, l)) => (o.to_owned(), Some(l.to_owned())),
                None => (rest[1..].to_owned(), None),
            };
            Some(VarOp::Slice(offset, length))
        }
        c @ ('^' | ',') => Some(VarOp::Case {
            upper: c == '^',
            all: rest[1..].starts_with(c),
        }),
        _ => None,
    }
}

/// The index of the `close` that ends a group opened just before `from`
/// (nested groups and single quotes skipped), or the end.
fn matching(chars: &[char], from: usize, open: char, close: char) -> usize {
    let mut depth = 1usize;
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '\'' if open == '(' => i = find(chars, i + 1, '\''),
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

/// `$'…'` from just after the quote: the text and the index after it.
fn ansi_c(chars: &[char], mut i: usize) -> (String, usize) {
    let mut out = String::new();
    while i < chars.len() {
        match chars[i] {
            '\'' => return (out, i + 1),
            '\\' if i + 1 < chars.len() => {
                let e = chars[i + 1];
                i += 2;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'a' => out.push('\x07'),
                    'b' => out.push('\x08'),
                    'e' | 'E' => out.push('\x1b'),
                    'f' => out.push('\x0c'),
                    'v' => out.push('\x0b'),
                    'x' | 'u' | 'U' => {
                        let digits = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = chars[i..]
                            .iter()
                            .take(digits)
                            .take_while(|c| c.is_ascii_hexdigit())
                            .collect();
                        i += hex.len();
                        if let Some(ch) =
                            u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                        {
                            out.push(ch);
                        }
                    }
                    '0'..='7' => {
                        let oct: String = std::iter::once(e)
                            .chain(
                                chars[i..]
                                    .iter()
                                    .copied()
                                    .take(2)
                                    .take_while(|c| ('0'..='7').contains(c)),
                            )
                            .collect();
                        i += oct.len() - 1;
                        if let Some(ch) = u32::from_str_radix(&oct, 8).ok().and_then(char::from_u32)
                        {
                            out.push(ch);
                        }
                    }
                    other => out.push(other),
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    (out, i)
}

/// A here-document's body from line `i`: the text and the index after its
/// delimiter line.
fn heredoc(chars: &[char], mut i: usize, delimiter: &str, strip_tabs: bool) -> (String, usize) {
    let mut body = String::new();
    while i < chars.len() {
        let end = find(chars, i, '\n');
        let line: String = chars[i..end].iter().collect();
        let line = if strip_tabs {
            line.trim_start_matches('\t').to_owned()
        } else {
            line
        };
        i = (end + 1).min(chars.len());
        if line == delimiter {
            break;
        }
        body.push_str(&line);
        body.push('\n');
    }
    (body, i)
}
