//! The file tools the agent calls: read, list, search and write.
//!
//! Owns turning tool parameters into filesystem work and shaping the JSON
//! answers. Every path an agent sends goes through the [`Workspace`]
//! resolvers first; this module has no path check of its own and must never
//! grow one. Walks start from a resolved directory and descend only into real
//! directories, never through symlinks, so they cannot leave it. Must never
//! load more of a file than a cap allows, follow a symlinked directory,
//! create directories, or leave a half-written file behind.

use std::fs::{self, File, Permissions};
use std::io::{self, Read, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::ToolError;
use super::sandbox::Workspace;

/// Looking further than this for a NUL byte costs time and rarely changes the verdict.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;
/// Content search reads whole files; bigger ones are rarely what an agent means.
const SEARCH_MAX_FILE_BYTES: usize = 1024 * 1024;
/// Enough of a matching line to judge it without flooding the agent's context.
const SEARCH_MAX_LINE_CHARS: usize = 300;
/// Build output, vendored packages and VCS internals drown real matches.
const SEARCH_SKIPPED_DIRS: &[&str] = &[".git", "node_modules", "target"];

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadFile {
    pub path: String,
    pub max_lines: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListFiles {
    pub path: Option<String>,
    pub pattern: Option<String>,
    pub recursive: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchFiles {
    pub query: String,
    pub search_content: Option<bool>,
    pub path: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteFile {
    pub path: String,
    pub content: String,
}

// ---------------------------------------------------------------- read_file

pub fn read_file(ws: &Workspace, p: ReadFile, max_bytes: usize) -> Result<Value, ToolError> {
    if p.max_lines == Some(0) {
        let message = "maxLines must be at least 1; omit it to read the whole file";
        return Err(ToolError::new("INVALID_PARAMS", message));
    }
    let target = ws.resolve_existing(&p.path)?;
    let shown = ws.display(&target);
    let size = regular_file_size(&target, &shown)?;
    let (bytes, cut) =
        read_capped(&target, max_bytes).map_err(|e| ToolError::from_io(&shown, &e))?;
    let (content, truncated, binary) = if looks_binary(&bytes) {
        // Lossy text of a binary file is noise that only costs the agent context.
        (String::new(), false, true)
    } else {
        let (content, cut_lines) = first_lines(decode(&bytes, cut), p.max_lines);
        (content, cut || cut_lines, false)
    };
    Ok(json!({
        "path": shown, "content": content, "truncated": truncated, "bytes": size, "binary": binary,
    }))
}

/// Checked before opening because opening a FIFO for reading blocks forever.
fn regular_file_size(target: &Path, shown: &str) -> Result<u64, ToolError> {
    let meta = fs::metadata(target).map_err(|e| ToolError::from_io(shown, &e))?;
    if meta.is_dir() {
        let message = format!("{shown:?} is a directory, not a file; list it instead");
        return Err(ToolError::new("NOT_A_FILE", message));
    }
    if !meta.is_file() {
        let message = format!("{shown:?} is not a regular file (device, socket or pipe)");
        return Err(ToolError::new("NOT_A_FILE", message));
    }
    Ok(meta.len())
}

/// Reads at most `max` bytes, plus one to learn whether more exist; the
/// file's reported size can lie (it may be growing).
fn read_capped(path: &Path, max: usize) -> io::Result<(Vec<u8>, bool)> {
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut bytes = Vec::new();
    File::open(path)?.take(limit).read_to_end(&mut bytes)?;
    let cut = bytes.len() > max;
    bytes.truncate(max);
    Ok((bytes, cut))
}

fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(BINARY_SNIFF_BYTES).any(|&b| b == 0)
}

/// A byte cap can split a multi-byte character; dropping its stub beats
/// ending the text with a replacement character the file never had.
fn decode(bytes: &[u8], cut: bool) -> String {
    let whole = match std::str::from_utf8(bytes) {
        Err(e) if cut && e.error_len().is_none() => bytes.get(..e.valid_up_to()).unwrap_or(bytes),
        _ => bytes,
    };
    String::from_utf8_lossy(whole).into_owned()
}

fn first_lines(mut text: String, max_lines: Option<usize>) -> (String, bool) {
    let Some(nth) = max_lines.and_then(|n| n.checked_sub(1)) else {
        return (text, false);
    };
    match text.match_indices('\n').nth(nth) {
        Some((at, _)) if at + 1 < text.len() => {
            // Just past a '\n', so always a character boundary.
            text.truncate(at + 1);
            (text, true)
        }
        _ => (text, false),
    }
}

// --------------------------------------------------------------- list_files

pub fn list_files(ws: &Workspace, p: ListFiles, max_entries: usize) -> Result<Value, ToolError> {
    let sent = p.path.as_deref().unwrap_or(".");
    let dir = resolve_dir(ws, sent)?;
    let matcher = name_matcher(p.pattern.as_deref())?;
    let walk = Walk {
        ws,
        recursive: p.recursive.unwrap_or(false),
        skipped_dirs: &[],
    };
    let mut entries = Vec::new();
    let mut truncated = false;
    let cut = walk
        .run(&dir, &mut |found| {
            if !matcher.as_ref().is_none_or(|m| m.is_match(&found.name)) {
                return ControlFlow::Continue(());
            }
            if entries.len() >= max_entries {
                truncated = true;
                return ControlFlow::Break(());
            }
            entries.push(entry_json(found));
            ControlFlow::Continue(())
        })
        .map_err(|e| ToolError::from_io(sent, &e))?;
    let truncated = truncated || cut;
    Ok(json!({ "path": ws.display(&dir), "entries": entries, "truncated": truncated }))
}

fn name_matcher(pattern: Option<&str>) -> Result<Option<globset::GlobMatcher>, ToolError> {
    let Some(pattern) = pattern else {
        return Ok(None);
    };
    globset::Glob::new(pattern)
        .map(|glob| Some(glob.compile_matcher()))
        .map_err(|e| {
            let message = format!("pattern {pattern:?} is not a valid glob: {e}");
            ToolError::new("INVALID_PARAMS", message)
        })
}

fn entry_json(found: &Found) -> Value {
    let mut entry = Map::new();
    entry.insert("name".into(), found.rel.clone().into());
    entry.insert("type".into(), found.kind.as_str().into());
    if found.kind == Kind::File {
        // Vanished since listing: still worth reporting, just without a size.
        if let Ok(meta) = fs::symlink_metadata(&found.path) {
            entry.insert("size".into(), meta.len().into());
        }
    }
    Value::Object(entry)
}

// ------------------------------------------------------------- search_files

pub fn search_files(
    ws: &Workspace,
    p: SearchFiles,
    max_matches: usize,
) -> Result<Value, ToolError> {
    if p.query.trim().is_empty() {
        return Err(ToolError::new("INVALID_PARAMS", "query must not be blank"));
    }
    let sent = p.path.as_deref().unwrap_or(".");
    let dir = resolve_dir(ws, sent)?;
    let needle = p.query.to_lowercase();
    let in_content = p.search_content.unwrap_or(false);
    let walk = Walk {
        ws,
        recursive: true,
        skipped_dirs: SEARCH_SKIPPED_DIRS,
    };
    let mut hits = Hits::new(max_matches);
    let cut = walk
        .run(&dir, &mut |found| {
            let path = ws.display(&found.path);
            if found.name.to_lowercase().contains(&needle) {
                hits.push(json!({ "path": path, "kind": "name" }))?;
            }
            if in_content && found.kind == Kind::File {
                for (line, text) in matching_lines(&found.path, &needle) {
                    hits.push(
                        json!({ "path": path, "kind": "content", "line": line, "text": text }),
                    )?;
                }
            }
            ControlFlow::Continue(())
        })
        .map_err(|e| ToolError::from_io(sent, &e))?;
    let truncated = hits.truncated || cut;
    Ok(json!({ "query": p.query, "matches": hits.list, "truncated": truncated }))
}

struct Hits {
    list: Vec<Value>,
    max: usize,
    truncated: bool,
}

impl Hits {
    fn new(max: usize) -> Self {
        Self {
            list: Vec::new(),
            max,
            truncated: false,
        }
    }

    /// Breaks only when a match beyond the cap shows up, so `truncated` means
    /// something really was left out.
    fn push(&mut self, hit: Value) -> ControlFlow<()> {
        if self.list.len() >= self.max {
            self.truncated = true;
            return ControlFlow::Break(());
        }
        self.list.push(hit);
        ControlFlow::Continue(())
    }
}

/// 1-based line numbers and trimmed text of the lines containing `needle`.
/// Unreadable, large and binary files yield nothing: a search reports what
/// it found, and one odd file should not fail the whole walk.
fn matching_lines(path: &Path, needle: &str) -> Vec<(usize, String)> {
    // The size check spares reading a megabyte of every huge file just to
    // learn it is too big; the cap below still guards a file that grew.
    let too_big = |meta: fs::Metadata| meta.len() > SEARCH_MAX_FILE_BYTES as u64;
    if fs::symlink_metadata(path).map_or(true, too_big) {
        return Vec::new();
    }
    let Ok((bytes, cut)) = read_capped(path, SEARCH_MAX_FILE_BYTES) else {
        return Vec::new();
    };
    if cut || looks_binary(&bytes) {
        return Vec::new();
    }
    String::from_utf8_lossy(&bytes)
        .lines()
        .enumerate()
        .filter(|(_, line)| line.to_lowercase().contains(needle))
        .map(|(index, line)| (index + 1, clip(line.trim())))
        .collect()
}

fn clip(line: &str) -> String {
    line.chars().take(SEARCH_MAX_LINE_CHARS).collect()
}

// --------------------------------------------------------------- write_file

pub fn write_file(ws: &Workspace, p: WriteFile) -> Result<Value, ToolError> {
    let target = ws.resolve_for_write(&p.path)?;
    let shown = ws.display(&target);
    let existing = existing_permissions(&target, &shown)?;
    replace_atomically(&target, p.content.as_bytes(), existing.as_ref())
        .map_err(|e| ToolError::from_io(&shown, &e))?;
    Ok(json!({ "path": shown, "bytes": p.content.len(), "created": existing.is_none() }))
}

/// `None` for a new file. A read-only file is refused: the rename would
/// replace it anyway, silently overriding the protection its owner chose.
fn existing_permissions(target: &Path, shown: &str) -> Result<Option<Permissions>, ToolError> {
    match fs::metadata(target) {
        Ok(meta) if meta.is_dir() => {
            let message = format!("{shown:?} is a directory; give the path of a file to write");
            Err(ToolError::new("NOT_A_FILE", message))
        }
        Ok(meta) if !meta.is_file() => {
            let message = format!("{shown:?} is not a regular file (device, socket or pipe)");
            Err(ToolError::new("NOT_A_FILE", message))
        }
        Ok(meta) if meta.permissions().readonly() => {
            let message = format!("permission denied on {shown:?}: the file is read-only");
            Err(ToolError::new("IO_ERROR", message))
        }
        Ok(meta) => Ok(Some(meta.permissions())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ToolError::from_io(shown, &e)),
    }
}

/// Readers see the old content or the new, never a mix: the bytes go to a
/// temporary file beside the target, reach the disk, then a rename swaps it
/// in. On any error the temporary file is dropped, which deletes it.
fn replace_atomically(target: &Path, bytes: &[u8], keep: Option<&Permissions>) -> io::Result<()> {
    let dir = target.parent().ok_or(io::ErrorKind::InvalidInput)?;
    let mut builder = tempfile::Builder::new();
    builder.prefix(".clawbot-write-");
    if keep.is_none() {
        as_if_freshly_created(&mut builder);
    }
    let mut temp = builder.tempfile_in(dir)?;
    temp.write_all(bytes)?;
    if let Some(permissions) = keep {
        temp.as_file().set_permissions(permissions.clone())?;
    }
    temp.as_file().sync_all()?;
    temp.persist(target).map_err(|e| e.error)?;
    sync_dir(dir);
    Ok(())
}

/// Temporary files start owner-only (0600); a new file should get what any
/// editor would give it, i.e. 0666 minus the umask.
#[cfg(unix)]
fn as_if_freshly_created(builder: &mut tempfile::Builder) {
    use std::os::unix::fs::PermissionsExt;
    builder.permissions(Permissions::from_mode(0o666));
}

#[cfg(not(unix))]
fn as_if_freshly_created(_builder: &mut tempfile::Builder) {}

/// Makes the rename itself survive a crash. Best effort: not every platform
/// can open a directory, and the new content is already in place.
fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}

// ------------------------------------------------------------------ walking

fn resolve_dir(ws: &Workspace, sent: &str) -> Result<PathBuf, ToolError> {
    let dir = ws.resolve_existing(sent)?;
    if !dir.is_dir() {
        let message = format!("{sent:?} is not a directory");
        return Err(ToolError::new("NOT_A_DIRECTORY", message));
    }
    Ok(dir)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::Other => "other",
        }
    }

    /// Classifies without following links, so a symlinked directory is a
    /// "symlink" and is never walked into.
    fn of(file_type: io::Result<fs::FileType>) -> Self {
        match file_type {
            Ok(t) if t.is_symlink() => Kind::Symlink,
            Ok(t) if t.is_dir() => Kind::Dir,
            Ok(t) if t.is_file() => Kind::File,
            _ => Kind::Other,
        }
    }
}

/// One entry met on a walk.
struct Found {
    /// The entry's own name.
    name: String,
    /// Relative to where the walk started, `/`-separated.
    rel: String,
    path: PathBuf,
    kind: Kind,
}

/// Entries a walk visits at most, and for how long: a walk on the
/// blocking pool cannot be interrupted, so it must end on its own.
const WALK_BUDGET: usize = 200_000;
const WALK_TIME: std::time::Duration = std::time::Duration::from_secs(10);

struct Walk<'a> {
    ws: &'a Workspace,
    recursive: bool,
    skipped_dirs: &'a [&'a str],
}

impl Walk<'_> {
    /// Depth-first, siblings in name order. Iterative rather than recursive
    /// so a deeply nested tree cannot exhaust a blocking thread's stack.
    /// Protected places are passed over, under any name. True when the walk stopped at its
    /// budget rather than at the end of the tree.
    fn run(
        &self,
        start: &Path,
        visit: &mut dyn FnMut(&Found) -> ControlFlow<()>,
    ) -> io::Result<bool> {
        let deadline = std::time::Instant::now() + WALK_TIME;
        let screen = self.ws.screen();
        let mut visited = 0usize;
        let mut pending = vec![children(start, "")?.into_iter()];
        while let Some(level) = pending.last_mut() {
            let Some(found) = level.next() else {
                pending.pop();
                continue;
            };
            if found.kind == Kind::Dir && self.skipped_dirs.contains(&found.name.as_str()) {
                continue;
            }
            if screen.hides(&found.path) {
                continue;
            }
            visited += 1;
            if visited > WALK_BUDGET
                || (visited.is_multiple_of(1024) && std::time::Instant::now() > deadline)
            {
                return Ok(true);
            }
            if visit(&found).is_break() {
                break;
            }
            if self.recursive && found.kind == Kind::Dir {
                // An unreadable subdirectory should not hide the rest of the tree.
                if let Ok(next) = children(&found.path, &found.rel) {
                    pending.push(next.into_iter());
                }
            }
        }
        Ok(false)
    }
}

fn children(dir: &Path, rel: &str) -> io::Result<Vec<Found>> {
    let mut found: Vec<Found> = fs::read_dir(dir)?
        // An entry that fails to read has usually just been deleted.
        .filter_map(Result::ok)
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            Found {
                rel: if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                },
                path: entry.path(),
                kind: Kind::of(entry.file_type()),
                name,
            }
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    fn setup() -> (TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::new(dir.path()).expect("workspace");
        (dir, ws)
    }

    fn put(ws: &Workspace, rel: &str, content: &[u8]) {
        let path = ws.root().join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(path, content).expect("write");
    }

    fn read(ws: &Workspace, path: &str, max_lines: Option<usize>, max_bytes: usize) -> Value {
        let p = ReadFile {
            path: path.into(),
            max_lines,
        };
        read_file(ws, p, max_bytes).expect("read_file")
    }

    fn list(ws: &Workspace, path: Option<&str>, pattern: Option<&str>, recursive: bool) -> Value {
        let p = ListFiles {
            path: path.map(Into::into),
            pattern: pattern.map(Into::into),
            recursive: Some(recursive),
        };
        list_files(ws, p, 100).expect("list_files")
    }

    fn names(listing: &Value) -> Vec<String> {
        let entries = listing["entries"].as_array().cloned().unwrap_or_default();
        entries
            .iter()
            .filter_map(|e| e["name"].as_str().map(String::from))
            .collect()
    }

    fn search(ws: &Workspace, query: &str, content: bool, max: usize) -> Value {
        let p = SearchFiles {
            query: query.into(),
            search_content: Some(content),
            path: None,
        };
        search_files(ws, p, max).expect("search_files")
    }

    fn write(ws: &Workspace, path: &str, content: &str) -> Result<Value, ToolError> {
        let p = WriteFile {
            path: path.into(),
            content: content.into(),
        };
        write_file(ws, p)
    }

    #[test]
    fn params_deserialize_from_camel_case() {
        let r: ReadFile =
            serde_json::from_value(json!({"path": "a", "maxLines": 3, "extra": 1})).expect("read");
        assert_eq!(r.max_lines, Some(3));
        let s: SearchFiles =
            serde_json::from_value(json!({"query": "q", "searchContent": true})).expect("search");
        assert_eq!(s.search_content, Some(true));
        assert_eq!(s.path, None);
        let l: ListFiles = serde_json::from_value(json!({})).expect("list");
        assert_eq!((l.path, l.pattern, l.recursive), (None, None, None));
    }

    #[test]
    fn read_returns_whole_small_file() {
        let (_dir, ws) = setup();
        put(&ws, "docs/a.txt", b"one\ntwo\n");
        let got = read(&ws, "docs/a.txt", None, 1000);
        let want = json!({
            "path": "docs/a.txt", "content": "one\ntwo\n", "truncated": false, "bytes": 8,
            "binary": false,
        });
        assert_eq!(got, want);
    }

    #[test]
    fn read_respects_max_lines_and_max_bytes() {
        let (_dir, ws) = setup();
        put(&ws, "a.txt", b"one\ntwo\nthree\n");
        let by_lines = read(&ws, "a.txt", Some(2), 1000);
        assert_eq!(by_lines["content"], "one\ntwo\n");
        assert_eq!(by_lines["truncated"], true);
        assert_eq!(by_lines["bytes"], 14);
        let by_bytes = read(&ws, "a.txt", None, 5);
        assert_eq!(by_bytes["content"], "one\nt");
        assert_eq!(by_bytes["truncated"], true);
        let exact = read(&ws, "a.txt", Some(3), 14);
        assert_eq!(exact["truncated"], false);
    }

    #[test]
    fn read_cut_does_not_split_a_character() {
        let (_dir, ws) = setup();
        put(&ws, "u.txt", "aé".as_bytes());
        let got = read(&ws, "u.txt", None, 2);
        assert_eq!(got["content"], "a");
        assert_eq!(got["truncated"], true);
    }

    #[test]
    fn invalid_utf8_is_replaced_lossily() {
        let (_dir, ws) = setup();
        put(&ws, "l.txt", b"ok\xffok");
        assert_eq!(read(&ws, "l.txt", None, 100)["content"], "ok\u{fffd}ok");
    }

    #[test]
    fn binary_file_is_flagged() {
        let (_dir, ws) = setup();
        put(&ws, "b.bin", b"\x89PNG\0\0garbage");
        let got = read(&ws, "b.bin", None, 1000);
        assert_eq!(got["binary"], true);
        assert_eq!(got["content"], "");
        assert_eq!(got["bytes"], 13);
    }

    #[test]
    fn read_refusals_have_codes() {
        let (_dir, ws) = setup();
        put(&ws, "d/a.txt", b"x");
        let code = |path: &str, max_lines| {
            let p = ReadFile {
                path: path.into(),
                max_lines,
            };
            read_file(&ws, p, 10).expect_err("refused").code
        };
        assert_eq!(code("d", None), "NOT_A_FILE");
        assert_eq!(code("d/missing.txt", None), "NOT_FOUND");
        assert_eq!(code("d/a.txt", Some(0)), "INVALID_PARAMS");
        assert_eq!(code("../x", None), "PATH_OUTSIDE_WORKSPACE");
    }

    #[test]
    fn list_is_sorted_with_types_and_sizes() {
        let (_dir, ws) = setup();
        put(&ws, "b.txt", b"12345");
        put(&ws, ".hidden", b"");
        put(&ws, "a/inner.txt", b"x");
        let got = list(&ws, None, None, false);
        let want = json!({
            "path": ".",
            "entries": [
                {"name": ".hidden", "type": "file", "size": 0},
                {"name": "a", "type": "dir"},
                {"name": "b.txt", "type": "file", "size": 5},
            ],
            "truncated": false,
        });
        assert_eq!(got, want);
        let nested = list(&ws, Some("a"), None, false);
        assert_eq!(nested["path"], "a");
        assert_eq!(names(&nested), ["inner.txt"]);
    }

    #[test]
    fn list_recursive_walks_depth_first() {
        let (_dir, ws) = setup();
        put(&ws, "a/x/deep.txt", b"");
        put(&ws, "a/y.txt", b"");
        put(&ws, "b.txt", b"");
        let got = list(&ws, None, None, true);
        assert_eq!(
            names(&got),
            ["a", "a/x", "a/x/deep.txt", "a/y.txt", "b.txt"]
        );
    }

    #[cfg(unix)]
    #[test]
    fn list_recursive_does_not_follow_symlinked_dirs() {
        let (_dir, ws) = setup();
        put(&ws, "real/file.txt", b"");
        std::os::unix::fs::symlink("real", ws.root().join("link")).expect("link");
        let got = list(&ws, None, None, true);
        assert_eq!(names(&got), ["link", "real", "real/file.txt"]);
        assert_eq!(got["entries"][0]["type"], "symlink");
    }

    #[cfg(unix)]
    #[test]
    fn walks_pass_over_a_protected_file_under_every_name() {
        let (_dir, mut ws) = setup();
        put(&ws, "keys/token", b"needle-secret");
        put(&ws, "notes.txt", b"needle-free");
        ws.protect(&ws.root().join("keys/token"));
        fs::hard_link(ws.root().join("keys/token"), ws.root().join("alias")).expect("link");
        std::os::unix::fs::symlink("keys/token", ws.root().join("pointer")).expect("link");
        let listed = list(&ws, None, None, true);
        assert_eq!(names(&listed), ["keys", "notes.txt"], "{listed}");
        let by_content = search(&ws, "needle", true, 100);
        let paths: Vec<&str> = by_content["matches"]
            .as_array()
            .expect("matches")
            .iter()
            .filter_map(|m| m["path"].as_str())
            .collect();
        assert_eq!(paths, ["notes.txt"], "{by_content}");
        let by_name = search(&ws, "o", false, 100);
        assert!(!by_name.to_string().contains("token"), "{by_name}");
        assert!(!by_name.to_string().contains("pointer"), "{by_name}");
        assert!(!by_name.to_string().contains("alias"), "{by_name}");
    }

    #[test]
    fn list_pattern_filters_names() {
        let (_dir, ws) = setup();
        put(&ws, "README.md", b"");
        put(&ws, "main.rs", b"");
        put(&ws, "docs/guide.md", b"");
        assert_eq!(names(&list(&ws, None, Some("*.md"), false)), ["README.md"]);
        assert_eq!(
            names(&list(&ws, None, Some("*.md"), true)),
            ["README.md", "docs/guide.md"]
        );
    }

    #[test]
    fn list_respects_max_entries() {
        let (_dir, ws) = setup();
        for name in ["a", "b", "c"] {
            put(&ws, name, b"");
        }
        let everything = || ListFiles {
            path: None,
            pattern: None,
            recursive: None,
        };
        let cut = list_files(&ws, everything(), 2).expect("list");
        assert_eq!(names(&cut), ["a", "b"]);
        assert_eq!(cut["truncated"], true);
        assert_eq!(
            list_files(&ws, everything(), 3).expect("list")["truncated"],
            false
        );
    }

    #[test]
    fn bad_glob_is_invalid_params() {
        let (_dir, ws) = setup();
        let p = ListFiles {
            path: None,
            pattern: Some("[".into()),
            recursive: None,
        };
        let err = list_files(&ws, p, 10).expect_err("bad glob");
        assert_eq!(err.code, "INVALID_PARAMS");
        assert!(err.message.contains("\"[\""), "{}", err.message);
    }

    #[test]
    fn list_on_a_file_is_not_a_directory() {
        let (_dir, ws) = setup();
        put(&ws, "f.txt", b"");
        let p = ListFiles {
            path: Some("f.txt".into()),
            pattern: None,
            recursive: None,
        };
        assert_eq!(
            list_files(&ws, p, 10).expect_err("file").code,
            "NOT_A_DIRECTORY"
        );
    }

    #[test]
    fn search_by_name_and_content() {
        let (_dir, ws) = setup();
        put(&ws, "notes/Todo.md", b"nothing here\n");
        put(&ws, "src/lib.rs", b"fn main() {}\n    // TODO: fix   \n");
        let names_only = search(&ws, "todo", false, 10);
        assert_eq!(
            names_only["matches"],
            json!([{"path": "notes/Todo.md", "kind": "name"}])
        );
        let both = search(&ws, "todo", true, 10);
        let want = json!({
            "query": "todo",
            "matches": [
                {"path": "notes/Todo.md", "kind": "name"},
                {"path": "src/lib.rs", "kind": "content", "line": 2, "text": "// TODO: fix"},
            ],
            "truncated": false,
        });
        assert_eq!(both, want);
    }

    #[test]
    fn search_skips_git_and_node_modules() {
        let (_dir, ws) = setup();
        for skipped in [".git", "node_modules", "target"] {
            put(&ws, &format!("{skipped}/needle.txt"), b"needle");
        }
        put(&ws, "keep/needle.txt", b"needle");
        let got = search(&ws, "needle", true, 10);
        let paths: Vec<_> = got["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| m["path"].clone())
            .collect();
        assert_eq!(paths, [json!("keep/needle.txt"), json!("keep/needle.txt")]);
    }

    #[test]
    fn search_skips_binary_and_large_files() {
        let (_dir, ws) = setup();
        put(&ws, "bin", b"needle\0");
        let mut big = b"needle\n".to_vec();
        big.resize(SEARCH_MAX_FILE_BYTES + 1, b'x');
        put(&ws, "big", &big);
        assert_eq!(search(&ws, "needle", true, 10)["matches"], json!([]));
    }

    #[test]
    fn search_clips_long_lines_and_caps_matches() {
        let (_dir, ws) = setup();
        let long = format!("needle {}\nneedle\nneedle\n", "é".repeat(400));
        put(&ws, "f.txt", long.as_bytes());
        let got = search(&ws, "NEEDLE", true, 2);
        assert_eq!(got["truncated"], true);
        let first = got["matches"][0]["text"].as_str().unwrap_or_default();
        assert_eq!(first.chars().count(), SEARCH_MAX_LINE_CHARS);
        assert_eq!(got["matches"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn search_blank_query_is_invalid_params() {
        let (_dir, ws) = setup();
        let p = SearchFiles {
            query: "  ".into(),
            search_content: None,
            path: None,
        };
        assert_eq!(
            search_files(&ws, p, 10).expect_err("blank").code,
            "INVALID_PARAMS"
        );
    }

    #[test]
    fn write_creates_and_replaces() {
        let (_dir, ws) = setup();
        let created = write(&ws, "new.txt", "héllo").expect("write");
        assert_eq!(
            created,
            json!({"path": "new.txt", "bytes": 6, "created": true})
        );
        let replaced = write(&ws, "new.txt", "bye").expect("write");
        assert_eq!(replaced["created"], false);
        assert_eq!(
            fs::read_to_string(ws.root().join("new.txt")).expect("read"),
            "bye"
        );
    }

    #[cfg(unix)]
    #[test]
    fn write_is_atomic_and_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, ws) = setup();
        put(&ws, "script.sh", b"old");
        let path = ws.root().join("script.sh");
        fs::set_permissions(&path, Permissions::from_mode(0o750)).expect("chmod");
        write(&ws, "script.sh", "new").expect("write");
        assert_eq!(fs::read_to_string(&path).expect("read"), "new");
        let mode = fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o7777, 0o750);
        let left: Vec<_> = fs::read_dir(ws.root())
            .expect("ls")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, ["script.sh"], "no temporary file may remain");
    }

    #[cfg(unix)]
    #[test]
    fn new_file_gets_ordinary_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, ws) = setup();
        write(&ws, "fresh.txt", "x").expect("write");
        let mode = fs::metadata(ws.root().join("fresh.txt"))
            .expect("stat")
            .permissions()
            .mode();
        // Readable by the group as well unless the umask says otherwise; not tempfile's 0600.
        assert_ne!(mode & 0o777, 0o600);
    }

    #[cfg(unix)]
    #[test]
    fn write_through_symlink_inside_replaces_target() {
        let (_dir, ws) = setup();
        put(&ws, "real.txt", b"old");
        std::os::unix::fs::symlink("real.txt", ws.root().join("link.txt")).expect("link");
        let got = write(&ws, "link.txt", "new").expect("write");
        assert_eq!(got["path"], "real.txt");
        assert!(
            fs::symlink_metadata(ws.root().join("link.txt"))
                .expect("stat")
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(ws.root().join("real.txt")).expect("read"),
            "new"
        );
    }

    #[test]
    fn write_refuses_read_only_file() {
        let (_dir, ws) = setup();
        put(&ws, "locked.txt", b"keep");
        let path = ws.root().join("locked.txt");
        let mut perms = fs::metadata(&path).expect("stat").permissions();
        perms.set_readonly(true);
        fs::set_permissions(&path, perms).expect("chmod");
        let err = write(&ws, "locked.txt", "x").expect_err("read-only");
        assert_eq!(err.code, "IO_ERROR");
        assert!(err.message.contains("permission denied"), "{}", err.message);
        assert_eq!(fs::read_to_string(&path).expect("read"), "keep");
    }

    #[test]
    fn write_does_not_create_directories() {
        let (_dir, ws) = setup();
        let err = write(&ws, "missing/dir/f.txt", "x").expect_err("no parent");
        assert_eq!(err.code, "NOT_FOUND");
        assert!(!ws.root().join("missing").exists());
    }

    #[test]
    fn write_into_dir_path_is_not_a_file() {
        let (_dir, ws) = setup();
        fs::create_dir(ws.root().join("d")).expect("mkdir");
        assert_eq!(write(&ws, "d", "x").expect_err("dir").code, "NOT_A_FILE");
        assert!(ws.root().join("d").is_dir());
    }
}
