//! The session records, as OpenClaw's `session-catalog-discovery` builds
//! them: first every project's `sessions-index.json`, then the head and
//! tail of each `*.jsonl` (1 MiB each, read 16 KiB at a time, 64 MiB in
//! all), merged with the index winning, sorted by recency.
//!
//! Every row it returns passes the gateway's `parseCatalogPage`: a field
//! is either absent or a non-blank string within its bound, and every
//! number is finite. It never reads a file [`tree::Root`] did not vet.
//! Claude Desktop's overlay (`~/Library/Application Support/Claude/…`,
//! macOS) is not read.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::tree::{self, ProjectDir, Root, SafeFile};
use super::{Check, Failure, Stop, js, read_at};

/// What the head-and-tail scan reads of all files together.
const MAX_METADATA_SCAN_BYTES: u64 = 64 << 20;
/// Each window, and each read within it.
const WINDOW_BYTES: u64 = 1 << 20;
const READ_CHUNK_BYTES: u64 = 16 << 10;
/// An index bigger than this is not read (OpenClaw reads any size; a real
/// one is a few hundred KiB).
const MAX_INDEX_BYTES: u64 = 16 << 20;
/// OpenClaw's `MAX_STRING_LENGTH` for paths and colours.
const MAX_STRING: usize = 4096;

/// One row of `anthropic.claude.sessions.list.v1`, in OpenClaw's key order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub thread_id: String,
    /// Always present: `null` when nothing names the session.
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "js_number")]
    pub created_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "js_number")]
    pub updated_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "js_number")]
    pub recency_at: Option<f64>,
    pub source: &'static str,
    pub model_provider: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cli_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
    pub archived: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// Where it is read from; never sent.
    #[serde(skip)]
    pub file: SafeFile,
}

fn js_number<S: serde::Serializer>(value: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    js::number(value.unwrap_or(0.0)).serialize(s)
}

impl Session {
    fn new(thread_id: &str, file: SafeFile) -> Self {
        Session {
            thread_id: thread_id.to_owned(),
            name: None,
            cwd: None,
            status: "stored",
            created_at: None,
            updated_at: None,
            recency_at: None,
            source: "claude-cli",
            model_provider: "anthropic",
            cli_version: None,
            git_branch: None,
            archived: false,
            color: None,
            file,
        }
    }

    fn recency(&self) -> f64 {
        self.recency_at.or(self.updated_at).unwrap_or(0.0)
    }
}

/// Every session under `projects`, newest first.
pub fn sessions(projects: &Path, stop: Stop) -> Result<Vec<Session>, Failure> {
    let Some((root, dirs)) = tree::snapshot(projects, stop)? else {
        return Ok(Vec::new());
    };
    let mut found = Found::default();
    for dir in &dirs {
        stop.check()?;
        found.index(&root, dir, stop)?;
    }
    found.discover(&root, &dirs, stop)?;
    let mut sessions: Vec<Session> = found.records.into_values().collect();
    sessions.sort_by(|a, b| {
        b.recency()
            .partial_cmp(&a.recency())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| js::locale_compare(&a.thread_id, &b.thread_id))
    });
    Ok(sessions)
}

#[derive(Default)]
struct Found {
    records: HashMap<String, Session>,
    sidechains: HashSet<String>,
}

impl Found {
    /// `readIndexRecords` for one project.
    fn index(&mut self, root: &Root, dir: &ProjectDir, stop: Stop) -> Result<(), Failure> {
        if !dir.has_index {
            return Ok(());
        }
        let Some(raw) = read_index(root, &dir.path.join("sessions-index.json")) else {
            return Ok(());
        };
        let Some(entries) = raw.get("entries").and_then(Value::as_array) else {
            return Ok(());
        };
        for (n, entry) in entries.iter().enumerate() {
            if n % 256 == 0 {
                stop.check()?;
            }
            if !entry.is_object() {
                continue;
            }
            let Some(id) = js::bounded(&entry["sessionId"], 256) else {
                continue;
            };
            if entry["isSidechain"] == Value::Bool(true) {
                self.records.remove(&id);
                self.sidechains.insert(id);
                continue;
            }
            let candidate = match js::bounded(&entry["fullPath"], MAX_STRING) {
                Some(full) => full.into(),
                None => dir.path.join(format!("{id}.jsonl")),
            };
            let Some(file) = root.vet(&candidate, &id) else {
                continue;
            };
            let mut record = Session::new(&id, file);
            record.name = js::bounded(&entry["summary"], 500)
                .or_else(|| js::bounded(&entry["firstPrompt"], 500));
            record.cwd = js::bounded(&entry["projectPath"], MAX_STRING);
            record.created_at = js::timestamp_ms(&entry["created"]);
            record.updated_at = js::timestamp_ms(&entry["modified"])
                .or_else(|| js::timestamp_ms(&entry["fileMtime"]));
            record.recency_at = record.updated_at;
            record.git_branch = js::bounded(&entry["gitBranch"], 500);
            self.records.insert(id, record);
        }
        Ok(())
    }

    /// `discoverCliRecords`: the head and tail of each candidate file, in
    /// order, until the 64 MiB budget is spent.
    fn discover(&mut self, root: &Root, dirs: &[ProjectDir], stop: Stop) -> Result<(), Failure> {
        let mut pending: HashSet<std::path::PathBuf> =
            self.records.values().map(|r| r.file.path.clone()).collect();
        let mut scanned = 0u64;
        let candidates = dirs
            .iter()
            .flat_map(|d| d.jsonl.iter().flatten().map(move |name| (d, name.as_str())));
        for (dir, name) in candidates {
            stop.check()?;
            let id = &name[..name.len() - ".jsonl".len()];
            if id.is_empty() || self.sidechains.contains(id) {
                continue;
            }
            let Some(file) = root.vet(&dir.path.join(name), id) else {
                continue;
            };
            if self.records.contains_key(id) && !pending.remove(&file.path) {
                continue;
            }
            let Some(handle) = root.open(&file) else {
                continue;
            };
            let Ok(meta) = handle.metadata() else {
                continue;
            };
            let mut head = Head::new(id, crate::tools::js::mtime_ms(&meta), file);
            let budget = MAX_METADATA_SCAN_BYTES - scanned;
            scanned += scan_metadata(&handle, meta.len(), budget, &mut |line, only| {
                head.inspect(line, only)
            });
            if head.sidechain {
                self.sidechains.insert(id.to_owned());
            }
            self.apply(id, head);
            if scanned >= MAX_METADATA_SCAN_BYTES {
                break;
            }
        }
        Ok(())
    }

    /// `applyCatalogDiscovery`: the index's record wins; titles rename it.
    fn apply(&mut self, id: &str, head: Head) {
        let Head {
            record,
            ai_title,
            custom_title,
            color,
            ..
        } = head;
        let found_name = record.as_ref().and_then(|r| r.name.clone());
        let Some(mut merged) = self.records.remove(id).or(record) else {
            return;
        };
        merged.name = custom_title.or(ai_title).or(merged.name).or(found_name);
        merged.color = color;
        self.records.insert(id.to_owned(), merged);
    }
}

/// A project's index as JSON, read from inside the root only (bounded).
/// OpenClaw follows a linked index anywhere; here its real path must be
/// inside the root.
fn read_index(root: &Root, path: &Path) -> Option<Value> {
    let file = root.open_real(&std::fs::canonicalize(path).ok()?)?;
    let mut text = Vec::new();
    file.take(MAX_INDEX_BYTES + 1).read_to_end(&mut text).ok()?;
    if text.len() as u64 > MAX_INDEX_BYTES {
        return None;
    }
    serde_json::from_str(&String::from_utf8_lossy(&text)).ok()
}

/// What one file's lines said (`inspectLine`'s state).
struct Head {
    id: String,
    mtime_ms: f64,
    file: Option<SafeFile>,
    record: Option<Session>,
    ai_title: Option<String>,
    custom_title: Option<String>,
    color: Option<String>,
    sidechain: bool,
}

fn is_cli(entrypoint: &Value) -> bool {
    matches!(entrypoint.as_str(), Some("cli" | "sdk-cli"))
}

impl Head {
    fn new(id: &str, mtime_ms: f64, file: SafeFile) -> Self {
        Head {
            id: id.to_owned(),
            mtime_ms,
            file: Some(file),
            record: None,
            ai_title: None,
            custom_title: None,
            color: None,
            sidechain: false,
        }
    }

    /// One line; true when the discovery is over for this file (the
    /// record was found, or the file is not a CLI session's).
    fn inspect(&mut self, line: &[u8], metadata_only: bool) -> bool {
        let Ok(raw) = serde_json::from_str::<Value>(&String::from_utf8_lossy(line)) else {
            return false;
        };
        if !raw.is_object() || raw["sessionId"].as_str() != Some(self.id.as_str()) {
            return false;
        }
        match raw["type"].as_str() {
            Some("ai-title") => {
                self.ai_title = js::bounded(&raw["aiTitle"], 500);
                return false;
            }
            Some("custom-title") => {
                self.custom_title = js::bounded(&raw["customTitle"], 500);
                return false;
            }
            Some("agent-color") => {
                self.color = js::bounded(&raw["agentColor"], MAX_STRING);
                return false;
            }
            _ => {}
        }
        if metadata_only {
            return false;
        }
        let entrypoint = &raw["entrypoint"];
        if entrypoint.is_string() && !is_cli(entrypoint) {
            return true;
        }
        if is_cli(entrypoint) && raw["isSidechain"] == Value::Bool(true) {
            self.sidechain = true;
            return true;
        }
        let message = &raw["message"];
        if !is_cli(entrypoint)
            || raw["type"] != "user"
            || raw["isMeta"] == Value::Bool(true)
            || !message.is_object()
            || message["role"] != "user"
        {
            return false;
        }
        let Some(file) = self.file.take() else {
            return true;
        };
        let mut fragments = Vec::new();
        super::read::collect_text(&message["content"], &mut fragments);
        let mut record = Session::new(&self.id, file);
        record.name = fragments
            .first()
            .and_then(|f| js::bounded(&Value::from(*f), 500));
        record.cwd = js::bounded(&raw["cwd"], MAX_STRING);
        record.created_at = js::timestamp_ms(&raw["timestamp"]);
        record.updated_at = Some(self.mtime_ms);
        record.recency_at = Some(self.mtime_ms);
        record.cli_version = js::bounded(&raw["version"], 256);
        record.git_branch = js::bounded(&raw["gitBranch"], 500);
        self.record = Some(record);
        true
    }
}

/// `readClaudeCatalogMetadata`: the first window with discovery, the last
/// one for titles only (its first, partial line skipped); the bytes read.
fn scan_metadata(
    file: &File,
    size: u64,
    budget: u64,
    inspect: &mut dyn FnMut(&[u8], bool) -> bool,
) -> u64 {
    let mut scan = Scan {
        file,
        budget,
        pending: Vec::new(),
        offset: 0,
        scanned: 0,
        stop_discovery: false,
        skip_partial: false,
    };
    scan.window(size.min(WINDOW_BYTES), false, inspect);
    let prefix_read_to_end = scan.offset >= size;
    let tail = scan.offset.max(size.saturating_sub(WINDOW_BYTES));
    scan.skip_partial = tail > scan.offset;
    if scan.skip_partial {
        scan.offset = tail - 1;
        scan.pending.clear();
    }
    scan.window(size, true, inspect);
    if scan.offset >= size && !scan.skip_partial && !scan.pending.is_empty() {
        let only = scan.stop_discovery || !prefix_read_to_end;
        inspect(&scan.pending, only);
    }
    scan.scanned
}

struct Scan<'a> {
    file: &'a File,
    budget: u64,
    pending: Vec<u8>,
    offset: u64,
    scanned: u64,
    stop_discovery: bool,
    skip_partial: bool,
}

impl Scan<'_> {
    fn window(
        &mut self,
        end: u64,
        metadata_only: bool,
        inspect: &mut dyn FnMut(&[u8], bool) -> bool,
    ) {
        while self.offset < end && self.scanned < self.budget {
            let size = READ_CHUNK_BYTES
                .min(end - self.offset)
                .min(self.budget - self.scanned);
            let mut chunk = vec![0; size as usize];
            let got = match read_at(self.file, &mut chunk, self.offset) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            self.offset += got as u64;
            self.scanned += got as u64;
            self.pending.extend_from_slice(&chunk[..got]);
            let mut start = 0;
            while let Some(nl) = self.pending[start..].iter().position(|&b| b == b'\n') {
                let line = &self.pending[start..start + nl];
                if !self.skip_partial {
                    let only = metadata_only || self.stop_discovery;
                    self.stop_discovery = inspect(line, only) || self.stop_discovery;
                }
                self.skip_partial = false;
                start += nl + 1;
            }
            self.pending.drain(..start);
            if self.stop_discovery && !metadata_only {
                return;
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_tail_window_skips_its_first_partial_line() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        // Three lines: one in the head, a long middle one the tail window
        // starts inside, and the last.
        let mut body = b"head\n".to_vec();
        body.extend(std::iter::repeat_n(b'm', 3 << 20));
        body.extend(b"\ntail\nend");
        std::fs::write(&path, &body).unwrap();
        let file = File::open(&path).unwrap();
        let mut seen = Vec::new();
        let scanned = scan_metadata(&file, body.len() as u64, u64::MAX, &mut |l, only| {
            seen.push((
                String::from_utf8_lossy(&l[..l.len().min(8)]).into_owned(),
                only,
            ));
            false
        });
        assert_eq!(
            seen,
            [
                ("head".to_owned(), false),
                ("tail".to_owned(), true),
                ("end".to_owned(), true)
            ]
        );
        assert!(scanned <= 2 * WINDOW_BYTES + 1);
    }

    #[test]
    fn the_budget_bounds_what_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        std::fs::write(&path, "a\n".repeat(100_000)).unwrap();
        let file = File::open(&path).unwrap();
        let scanned = scan_metadata(&file, 200_000, 1000, &mut |_, _| false);
        assert_eq!(scanned, 1000);
    }
}
