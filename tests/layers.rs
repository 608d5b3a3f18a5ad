//! The rooms of `src/` and the one rule between them: a `crate::` path
//! points down. Every top-level room has a level (README, "Layout"); code
//! in a room may name a room on a lower level only — never its own level's
//! neighbours, never one above. So no two rooms can import each other, and
//! a helper several rooms share has to live below all of them.
//!
//! How it reads: every `.rs` file under `src/` (but `src/bin/`), comments
//! and string literals dropped, each `crate::NAME` and each name of a
//! `use crate::{A, B::…}` group is a use of room `NAME`. `#[cfg(test)]`
//! code counts too: a test that needs a room above its own is a sign the
//! code is in the wrong room.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Top to bottom. Rooms on one line share a level and may not use each
/// other.
const LEVELS: &[&[&str]] = &[
    // start-up: the two executables' entry points, and the fuzz targets' way in
    &["front", "fuzzing"],
    // the top: parse once, dispatch each mode, print once, exit codes
    &["app"],
    // the modes that serve other programs
    &["mcp_server", "links", "node"],
    // the one tool declaration, and the command line's flags
    &["schema"],
    &["cli"],
    // the hands and their rules
    &["tools"],
    // the tool: {agent?, message} → one JSON result
    &["router"],
    // the terminal: the spinner (fed by the gateway's progress) and the prompt
    &["ui"],
    // the protocol and the processes
    &["gateway", "runner"],
    // what several rooms share
    &["shared"],
];

fn level(room: &str) -> Option<usize> {
    LEVELS.iter().position(|rooms| rooms.contains(&room))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its comments, string and char literals
/// (a doc comment may name any room; a string is not an import).
fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |end| end + 2);
        } else if let Some(len) = raw_string_len(rest) {
            i += len;
            out.push_str("\"\"");
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() && rest.as_bytes()[j] != b'"' {
                j += if rest.as_bytes()[j] == b'\\' { 2 } else { 1 };
            }
            i += (j + 1).min(rest.len());
            out.push_str("\"\"");
        } else if rest.starts_with("'\\") {
            // an escaped char literal: '\n', '\'', '\u{1F600}'
            i += rest[3..].find('\'').map_or(rest.len(), |end| end + 4);
            out.push_str("' '");
        } else if let Some(len) = char_literal_len(rest) {
            i += len;
            out.push_str("' '");
        } else if rest.starts_with('\'') {
            out.push('\''); // a lifetime
            i += 1;
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `'x'` (not a lifetime such as `'a`): its length.
fn char_literal_len(text: &str) -> Option<usize> {
    let mut chars = text.strip_prefix('\'')?.chars();
    let c = chars.next()?;
    (chars.next() == Some('\'')).then(|| 2 + c.len_utf8())
}

/// `r"…"`, `r#"…"#`, `br"…"`: its length, if `text` starts with one.
fn raw_string_len(text: &str) -> Option<usize> {
    let after_b = text.strip_prefix('b').unwrap_or(text);
    let body = after_b.strip_prefix('r')?;
    let hashes = body.len() - body.trim_start_matches('#').len();
    let body = body[hashes..].strip_prefix('"')?;
    let close = format!("\"{}", "#".repeat(hashes));
    let end = body.find(&close)?;
    Some(text.len() - body.len() + end + close.len())
}

/// The rooms a file's code names through `crate::`.
fn rooms_named(code: &str) -> Vec<String> {
    let mut rooms = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `$crate::`, `my_crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group);
            // the first name of each top-level entry of the group
            let mut depth = 0;
            let mut start = true;
            for (i, c) in group[..end].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && (c.is_alphabetic() || c == '_') => {
                        let name: String = group[i..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        rooms.push(name);
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            rooms.push(name);
        }
    }
    rooms
}

fn matching_brace(text: &str) -> usize {
    let mut depth = 1;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// How deep a file's module is: `room.rs` and `room/mod.rs` 1,
/// `room/x.rs` 2, …
fn module_depth(rel: &Path) -> usize {
    let parts = rel.components().count();
    if rel.file_name().is_some_and(|f| f == "mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// A `super::…` path that climbs out of the crate's rooms to its root
/// (where `crate::` would be read): what it wrote, if any. Inline `mod`
/// blocks deepen what follows them.
fn super_to_the_root(code: &str, file_depth: usize) -> Option<String> {
    let mut blocks: Vec<bool> = Vec::new(); // does each open `{` start a `mod`?
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => {
                let before = code[..i].trim_end();
                let word_start = before
                    .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map_or(0, |p| p + 1);
                let is_mod = before[..word_start].trim_end().ends_with("mod")
                    && !before[word_start..].is_empty();
                blocks.push(is_mod);
            }
            b'}' => {
                blocks.pop();
            }
            b's' if code[i..].starts_with("super::")
                && (i == 0
                    || !(bytes[i - 1].is_ascii_alphanumeric()
                        || bytes[i - 1] == b'_'
                        || bytes[i - 1] == b':')) =>
            {
                let mut climbs = 0;
                while code[i + climbs * 7..].starts_with("super::") {
                    climbs += 1;
                }
                let depth = file_depth + blocks.iter().filter(|m| **m).count();
                if climbs >= depth {
                    return Some("super::".repeat(climbs));
                }
                i += climbs * 7;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The top-level room a file under `src/` belongs to.
fn room_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_str()
        .unwrap();
    first.trim_end_matches(".rs").to_string()
}

/// Items `lib.rs` defines itself, which only the start-up (`front`) may
/// name: nothing below it uses the crate root.
const ROOT_ITEMS: &[&str] = &["run_full", "on_runtime"];

#[test]
fn every_crate_path_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let room = room_of(&src, file);
        if room == "bin" || room == "lib" || room == "main" {
            continue; // the executables and the crate root sit above every room
        }
        let Some(own) = level(&room) else {
            wrong
                .entry(room.clone())
                .or_default()
                .push("a room with no level: add it to LEVELS and to README's Layout".into());
            continue;
        };
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        let rel = file.strip_prefix(&src).unwrap();
        if let Some(how) = super_to_the_root(&code, module_depth(rel)) {
            wrong
                .entry(room.clone())
                .or_default()
                .push(format!("{} names {how}, the crate root", rel.display()));
        }
        for named in rooms_named(&code) {
            if named == room || room == "front" && ROOT_ITEMS.contains(&named.as_str()) {
                continue;
            }
            let rel = file.strip_prefix(&src).unwrap().display();
            match level(&named) {
                Some(theirs) if theirs > own => {}
                Some(theirs) if theirs == own => wrong
                    .entry(room.clone())
                    .or_default()
                    .push(format!("{rel} names {named}, a room on its own level")),
                Some(_) => wrong
                    .entry(room.clone())
                    .or_default()
                    .push(format!("{rel} names {named}, a room above it")),
                None => wrong
                    .entry(room.clone())
                    .or_default()
                    .push(format!("{rel} names crate::{named}, not a room")),
            }
        }
    }
    for list in wrong.values_mut() {
        list.dedup();
    }
    assert!(
        wrong.is_empty(),
        "imports that do not point down (tests/layers.rs, README \"Layout\"):\n{}",
        wrong
            .iter()
            .flat_map(|(room, why)| why.iter().map(move |w| format!("  {room}: {w}")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Every room in LEVELS exists, and README's Layout section names each.
#[test]
fn the_levels_match_the_tree_and_the_readme() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let layout = readme
        .split("\n### Layout\n")
        .nth(1)
        .expect("README has a Layout section");
    let layout = &layout[..layout.find("\n### ").unwrap_or(layout.len())];
    for room in LEVELS.iter().flat_map(|rooms| rooms.iter()) {
        let dir = root.join("src").join(room);
        let file = root.join("src").join(format!("{room}.rs"));
        assert!(
            dir.is_dir() || file.is_file(),
            "LEVELS names {room}, which is not in src/"
        );
        let named = if dir.is_dir() {
            format!("src/{room}/")
        } else {
            format!("src/{room}.rs")
        };
        assert!(
            layout.contains(&named),
            "README's Layout does not name {named}"
        );
    }
    // The level column says what LEVELS says, room by room.
    let mut level = 0;
    let mut compared = 0;
    for line in layout.lines().filter(|l| l.len() > 7) {
        if let Ok(n) = line[..6].trim().parse::<usize>() {
            level = n;
        }
        let column = &line[7..line.len().min(33)];
        let Some(at) = column.find("src/") else {
            continue;
        };
        let name: String = column[at + 4..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if let Some(ours) = self::level(&name) {
            assert_eq!(
                level,
                ours + 1,
                "README's Layout puts src/{name} on level {level}, tests/layers.rs on {}",
                ours + 1
            );
            compared += 1;
        }
    }
    assert!(
        compared >= 12,
        "the Layout's table was not read ({compared} rooms)"
    );
}

#[test]
fn the_reader_finds_what_it_should() {
    let code = code_only(
        "use crate::{a, b::{c, d}, e::f as g};\n\
         // crate::comment\n\
         let s = \"crate::string\"; let c = '\"'; let q = '\\''; let e = 'é'; let l: &'static str = crate::h::I;\n\
         let r = r#\"crate::raw\"#; x(crate::k)",
    );
    assert_eq!(rooms_named(&code), ["a", "b", "e", "h", "k"], "{code}");
}

#[test]
fn a_super_path_to_the_crate_root_is_seen() {
    // src/room/x.rs: `super::` is the room, `super::super::` the root.
    assert_eq!(super_to_the_root("use super::y;", 2), None);
    assert_eq!(
        super_to_the_root("use super::super::other;", 2).as_deref(),
        Some("super::super::")
    );
    // Inside `mod tests { … }` one more climb is needed.
    assert_eq!(
        super_to_the_root("mod tests { use super::super::y; }", 2),
        None
    );
    assert_eq!(
        super_to_the_root("fn f() { if x { super::super::z(); } }", 2).as_deref(),
        Some("super::super::")
    );
    // src/room/mod.rs: `super::` already is the root.
    assert_eq!(
        super_to_the_root(
            "use super::other::Thing;",
            module_depth(Path::new("room/mod.rs"))
        )
        .as_deref(),
        Some("super::")
    );
    assert_eq!(module_depth(Path::new("room.rs")), 1);
    assert_eq!(module_depth(Path::new("room/x/y.rs")), 3);
}
