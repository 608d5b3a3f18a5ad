//! `anthropic.claude.sessions.read.v1`'s page: the transcript read
//! backwards from a byte offset (the end, or a cursor) in 128 KiB chunks,
//! at most 64 MiB scanned, newest item first, as OpenClaw's
//! `readLocalClaudeTranscriptPage` and `parseTranscriptLine` do.
//!
//! Memory is bounded by the scan limit: one line is held at most (as the
//! chunks it spans), and one page read runs at a time. Must never emit an
//! item the gateway would reject (every item has a string `type`; the page
//! stays under its 20 MiB limit).

use std::collections::HashSet;
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

use super::params::encode_offset;
use super::{Check, Failure, Stop, js};

const CHUNK_BYTES: u64 = 128 << 10;
const MAX_SCAN_BYTES: u64 = 64 << 20;
/// An item whose JSON is bigger is cut to its text's first 1e6 units.
const MAX_ITEM_BYTES: usize = 4 << 20;
const MAX_TEXT_UNITS: usize = 1_000_000;
/// The items of one page together (the gateway allows 20 MiB for all).
const MAX_PAGE_ITEM_BYTES: usize = 20_905_984;

/// One page read at a time: each may hold a 64 MiB line.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Where the bytes come from: a file, or a test's changing one.
pub trait Source {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
}

impl Source for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        super::read_at(self, buf, offset)
    }
}

/// One transcript item, in OpenClaw's key order.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_cursor: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    pub thread_id: String,
    pub items: Vec<Item>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The page ending at `end` (a byte offset no greater than the file's
/// size), at most `limit` items.
pub fn page(
    file: &dyn Source,
    end: u64,
    limit: usize,
    thread_id: String,
    stop: Stop,
) -> Result<Page, Failure> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut position = end;
    let mut scanned = 0u64;
    // The line being gathered, as the chunks it spans (rightmost first).
    let mut fragments: Vec<Vec<u8>> = Vec::new();
    let mut found: Vec<(Item, u64)> = Vec::new();
    let take = |line: Vec<u8>, start: u64, found: &mut Vec<(Item, u64)>| {
        if let Some(mut item) = parse_line(&line) {
            item.resume_cursor = Some(encode_offset(start + line.len() as u64));
            found.push((item, start));
        }
    };
    while position > 0 && scanned < MAX_SCAN_BYTES && found.len() <= limit {
        stop.check()?;
        let size = CHUNK_BYTES.min(position).min(MAX_SCAN_BYTES - scanned);
        position -= size;
        let mut chunk = vec![0u8; size as usize];
        if read_fully(file, &mut chunk, position) != chunk.len() {
            return Err(Failure(
                "Claude transcript changed while it was being read".into(),
            ));
        }
        scanned += size;
        let mut right = chunk.len();
        for index in (0..chunk.len()).rev() {
            if chunk[index] != b'\n' {
                continue;
            }
            let segment = &chunk[index + 1..right];
            if !segment.is_empty() || !fragments.is_empty() {
                let line = joined(segment, &mut fragments);
                take(line, position + index as u64 + 1, &mut found);
                if found.len() > limit {
                    break;
                }
            }
            right = index;
        }
        if found.len() > limit {
            break;
        }
        let prefix = &chunk[..right];
        if position == 0 {
            if !prefix.is_empty() || !fragments.is_empty() {
                let line = joined(prefix, &mut fragments);
                take(line, 0, &mut found);
            }
            fragments.clear();
        } else if !prefix.is_empty() {
            fragments.push(prefix.to_vec());
        }
    }
    if position > 0 && found.len() < limit {
        return Err(Failure(
            "Claude transcript page exceeded the safe scan limit".into(),
        ));
    }
    let seen = found.len();
    found.truncate(limit);
    let mut items = Vec::new();
    let mut bytes = 0;
    let mut earliest = None;
    for (item, start) in found {
        let size = json_len(&item);
        if !items.is_empty() && bytes + size > MAX_PAGE_ITEM_BYTES {
            break;
        }
        bytes += size;
        items.push(item);
        earliest = Some(start);
    }
    let earlier = items.len() < seen || position > 0;
    Ok(Page {
        thread_id,
        items,
        next_cursor: earliest
            .filter(|start| earlier && *start > 0)
            .map(encode_offset),
    })
}

/// `segment` followed by the fragments gathered to its right, in file order.
fn joined(segment: &[u8], fragments: &mut Vec<Vec<u8>>) -> Vec<u8> {
    let total = segment.len() + fragments.iter().map(Vec::len).sum::<usize>();
    let mut line = Vec::with_capacity(total);
    line.extend_from_slice(segment);
    for part in fragments.drain(..).rev() {
        line.extend_from_slice(&part);
    }
    line
}

/// `readFileWindowFully`: reads until the buffer is full or the file ends.
fn read_fully(file: &dyn Source, buf: &mut [u8], offset: u64) -> usize {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    filled
}

/// Bytes of `value` as JSON, counted without building the text.
fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// `collectTranscriptText`: every non-blank string under the text-bearing
/// keys, in order.
pub fn collect_text<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) if !js::trim(s).is_empty() => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_text(v, out)),
        Value::Object(map) => {
            for key in ["text", "thinking", "content", "input"] {
                if let Some(v) = map.get(key) {
                    collect_text(v, out);
                }
            }
        }
        _ => {}
    }
}

/// `transcriptItemType`.
fn kind(role: &str, content: &Value) -> &'static str {
    let fallback = if role == "user" {
        "userMessage"
    } else {
        "agentMessage"
    };
    let Value::Array(blocks) = content else {
        return fallback;
    };
    let types: Vec<&str> = blocks.iter().filter_map(|b| b["type"].as_str()).collect();
    let all = |t: &str| !types.is_empty() && types.iter().all(|x| *x == t);
    if all("tool_result") {
        "toolResult"
    } else if all("tool_use") {
        "toolCall"
    } else if all("thinking") {
        "reasoning"
    } else {
        fallback
    }
}

/// `parseTranscriptLine`: a user or assistant message of the main thread,
/// or nothing.
pub fn parse_line(line: &[u8]) -> Option<Item> {
    let mut raw: Value = serde_json::from_str(&String::from_utf8_lossy(line)).ok()?;
    if !raw.is_object()
        || raw["isSidechain"] == Value::Bool(true)
        || raw["isMeta"] == Value::Bool(true)
        || !raw["message"].is_object()
    {
        return None;
    }
    let role = raw["message"]["role"].as_str()?.to_owned();
    if (role != "user" && role != "assistant") || raw["type"].as_str() != Some(&role) {
        return None;
    }
    let mut content = raw["message"]["content"].take();
    if !content.is_string() && !content.is_array() {
        return None;
    }
    js::js_numbers(&mut content);
    let text = {
        let mut fragments = Vec::new();
        collect_text(&content, &mut fragments);
        let mut unique = HashSet::new();
        fragments.retain(|f| unique.insert(*f));
        fragments.join("\n\n")
    };
    let mut item = Item {
        kind: kind(&role, &content),
        text: (!text.is_empty()).then_some(text),
        content: Some(content),
        timestamp: js::bounded(&raw["timestamp"], 128),
        model: js::bounded(&raw["message"]["model"], 256),
        uuid: js::bounded(&raw["uuid"], 256),
        truncated: false,
        resume_cursor: None,
    };
    if json_len(&item) > MAX_ITEM_BYTES {
        let text = item.text.take().unwrap_or_default();
        let cut = js::truncate_utf16(&text, MAX_TEXT_UNITS);
        item.text = Some(format!("{cut}\n\n[oversized Claude item truncated]"));
        item.content = None;
        item.truncated = true;
    }
    Some(item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::cell::RefCell;

    fn never() -> bool {
        false
    }

    type Change = Box<dyn FnOnce(&mut Vec<u8>)>;

    /// A file in memory that a test can change between reads.
    struct Changing {
        bytes: RefCell<Vec<u8>>,
        after_first_read: RefCell<Option<Change>>,
    }

    impl Changing {
        fn new(bytes: &[u8]) -> Self {
            Changing {
                bytes: RefCell::new(bytes.to_vec()),
                after_first_read: RefCell::new(None),
            }
        }
    }

    impl Source for Changing {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            let n = {
                let bytes = self.bytes.borrow();
                let from = (offset as usize).min(bytes.len());
                let n = buf.len().min(bytes.len() - from);
                buf[..n].copy_from_slice(&bytes[from..from + n]);
                n
            };
            if let Some(change) = self.after_first_read.borrow_mut().take() {
                change(&mut self.bytes.borrow_mut());
            }
            Ok(n)
        }
    }

    fn line(kind: &str, text: &str, uuid: &str) -> String {
        json!({"type": kind, "uuid": uuid, "timestamp": "2025-01-01T00:00:00Z",
               "message": {"role": kind, "content": text}})
        .to_string()
    }

    fn read(bytes: &[u8], end: u64, limit: usize) -> Result<Page, Failure> {
        page(&Changing::new(bytes), end, limit, "t".into(), &never)
    }

    #[test]
    fn items_come_newest_first_with_cursors_at_line_ends() {
        let text = format!(
            "{}\n{}\n{}\n",
            line("user", "one", "u1"),
            line("assistant", "two", "u2"),
            line("user", "three", "u3")
        );
        let page = read(text.as_bytes(), text.len() as u64, 2).unwrap();
        let uuids: Vec<_> = page.items.iter().map(|i| i.uuid.clone().unwrap()).collect();
        assert_eq!(uuids, ["u3", "u2"]);
        let second_start = text.find("\n").unwrap() + 1;
        assert_eq!(page.next_cursor, Some(encode_offset(second_start as u64)));
        let third_end = text.len() - 1;
        assert_eq!(
            page.items[0].resume_cursor,
            Some(encode_offset(third_end as u64))
        );
        // Following the cursor reaches the first line, and no further.
        let rest = read(text.as_bytes(), second_start as u64, 2).unwrap();
        assert_eq!(rest.items.len(), 1);
        assert_eq!(rest.items[0].uuid.as_deref(), Some("u1"));
        assert_eq!(rest.next_cursor, None);
    }

    #[test]
    fn hostile_lines_are_skipped_not_fatal() {
        let lines = [
            String::new(),
            "garbage {".into(),
            "\u{1}\u{2}".into(),
            json!({"type":"user","message":{"role":"assistant","content":"x"}}).to_string(),
            json!({"type":"user","isMeta":true,"message":{"role":"user","content":"x"}})
                .to_string(),
            json!({"type":"user","isSidechain":true,"message":{"role":"user","content":"x"}})
                .to_string(),
            json!({"type":"user","message":{"role":"user","content":5}}).to_string(),
            json!({"type":"user","message":"x"}).to_string(),
            "[1,2]".into(),
            format!("{}\r", line("user", "crlf", "ok")),
        ];
        let mut text = lines.join("\n").into_bytes();
        text.extend(b"\n\xff\xfe not utf-8\n");
        let page = read(&text, text.len() as u64, 50).unwrap();
        assert_eq!(page.items.len(), 1, "{page:?}");
        assert_eq!(page.items[0].uuid.as_deref(), Some("ok"));
    }

    #[test]
    fn invalid_utf8_inside_a_string_is_replaced_as_node_does() {
        let mut text = br#"{"type":"user","message":{"role":"user","content":"a"#.to_vec();
        text.extend(b"\xff");
        text.extend(br#"b"}}"#);
        let item = parse_line(&text).unwrap();
        assert_eq!(item.text.as_deref(), Some("a\u{fffd}b"));
    }

    #[test]
    fn types_follow_the_blocks() {
        let kinds = |content: Value, role: &str| kind(role, &content);
        assert_eq!(kinds(json!([{"type":"tool_use"}]), "assistant"), "toolCall");
        assert_eq!(kinds(json!([{"type":"tool_result"}]), "user"), "toolResult");
        assert_eq!(
            kinds(json!([{"type":"thinking"}]), "assistant"),
            "reasoning"
        );
        assert_eq!(
            kinds(json!([{"type":"thinking"},{"type":"text"}]), "assistant"),
            "agentMessage"
        );
        assert_eq!(kinds(json!([]), "user"), "userMessage");
        assert_eq!(kinds(json!([1, "x"]), "user"), "userMessage");
    }

    #[test]
    fn text_is_the_unique_fragments_in_order() {
        let l = json!({"type":"assistant","message":{"role":"assistant","model":" m ","content":[
            {"type":"thinking","thinking":"hmm"},
            {"type":"text","text":"hello"},
            {"type":"tool_use","input":{"cmd":"ls","content":"hello"}},
            {"type":"text","text":"  "}
        ]}})
        .to_string();
        let item = parse_line(l.as_bytes()).unwrap();
        assert_eq!(item.text.as_deref(), Some("hmm\n\nhello"));
        assert_eq!(item.model.as_deref(), Some("m"));
        assert_eq!(item.kind, "agentMessage");
    }

    #[test]
    fn an_oversized_item_keeps_a_million_units_of_text() {
        let big = "é".repeat(3 << 20);
        let l = line("user", &big, "big");
        let item = parse_line(l.as_bytes()).unwrap();
        assert!(item.truncated && item.content.is_none());
        let text = item.text.unwrap();
        assert!(text.ends_with("\n\n[oversized Claude item truncated]"));
        assert_eq!(js::utf16_len(&text), MAX_TEXT_UNITS + 35);
    }

    #[test]
    fn a_file_without_a_trailing_newline_and_an_empty_one() {
        let text = format!("{}\n{}", line("user", "a", "1"), line("user", "b", "2"));
        let page = read(text.as_bytes(), text.len() as u64, 5).unwrap();
        assert_eq!(page.items.len(), 2);
        assert_eq!(
            page.items[0].resume_cursor,
            Some(encode_offset(text.len() as u64))
        );
        let empty = read(b"", 0, 5).unwrap();
        assert!(empty.items.is_empty() && empty.next_cursor.is_none());
    }

    #[test]
    fn a_cursor_mid_line_parses_from_there_as_openclaw_does() {
        let text = format!("{}\n{}\n", line("user", "a", "1"), line("user", "b", "2"));
        let mid = text.len() as u64 - 5;
        let page = read(text.as_bytes(), mid, 5).unwrap();
        // The cut second line is not JSON: only the first is an item.
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.items[0].uuid.as_deref(), Some("1"));
    }

    #[test]
    fn a_line_longer_than_the_scan_limit_fails_the_page() {
        let mut text = vec![b'x'; (MAX_SCAN_BYTES + 10) as usize];
        text.push(b'\n');
        let err = read(&text, text.len() as u64, 1).unwrap_err();
        assert_eq!(err.0, "Claude transcript page exceeded the safe scan limit");
    }

    #[test]
    fn a_file_that_shrinks_while_read_is_refused() {
        // Fifty 10 KB items span several chunks: the second read finds
        // the file cut.
        let body = format!("{}\n", line("user", &"a".repeat(10_000), "1")).repeat(60);
        let file = Changing::new(body.as_bytes());
        *file.after_first_read.borrow_mut() = Some(Box::new(|b: &mut Vec<u8>| b.truncate(10)));
        let err = page(&file, body.len() as u64, 50, "t".into(), &never).unwrap_err();
        assert_eq!(err.0, "Claude transcript changed while it was being read");
    }

    #[test]
    fn the_page_stays_under_the_gateways_limit() {
        // Six items of ~3.8 MB each (text and content): five fit in
        // 20,905,984 bytes.
        let big = "x".repeat(1_900_000);
        let one = format!("{}\n", line("user", &big, "u"));
        let body = one.repeat(6);
        let page = read(body.as_bytes(), body.len() as u64, 6).unwrap();
        assert_eq!(page.items.len(), 5);
        assert_eq!(page.next_cursor, Some(encode_offset(one.len() as u64)));
    }
}
