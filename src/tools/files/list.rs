//! `dir.list`: one page of a directory's entries, sorted by name, each
//! lstat'ed (a symlink is listed, never followed), bound to the
//! directory's identity (OpenClaw's `handleDirList`).

use std::cmp::Ordering;
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::{
    Existing, Failure, Files, Identity, Request, binding_differs, canonical_for_read,
    classify_read, identity, mime, mtime_ms, open, os_message, reply,
};

const DEFAULT_ENTRIES: u64 = 200;
const HARD_ENTRIES: u64 = 5_000;
/// Names read at most from one directory (each page sorts them all, as
/// OpenClaw does): past this the listing is refused, not cut unsorted.
const MAX_NAMES: usize = 200_000;

#[derive(Serialize)]
struct Entry {
    name: String,
    path: String,
    size: u64,
    #[serde(rename = "mimeType")]
    mime_type: &'static str,
    #[serde(rename = "isDir")]
    is_dir: bool,
    mtime: f64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Listing {
    ok: bool,
    path: String,
    entries: Vec<Entry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_page_token: Option<String>,
    truncated: bool,
    /// The preflight's key is `preflight`, not `preflightOnly`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    preflight: bool,
    binding: Existing,
}

/// A directory as OpenClaw's `resolveBoundReadDirectory` finds it: its
/// canonical path (inside our roots), its real path and identity.
pub(super) fn bound_directory(
    files: &Files,
    request: &Request,
    not_found: &str,
) -> Result<(String, PathBuf, Identity), Failure> {
    let (path, real) = canonical_for_read(files, request, not_found, classify_read)?;
    if let Some(changed) = request.canonical_changed(&path) {
        return Err(changed);
    }
    let meta = std::fs::metadata(&real).map_err(|e| {
        Failure::new(
            classify_read(&e),
            format!("stat failed: {}", os_message(&e)),
        )
        .at(&path)
    })?;
    if !meta.is_dir() {
        return Err(Failure::new("IS_FILE", "path is not a directory").at(&path));
    }
    let id = identity(&meta);
    if let Some(changed) = binding_differs(request, &id, &path) {
        return Err(changed);
    }
    Ok((path, real, id))
}

/// The directory open, checked to be the one bound (OpenClaw's worker
/// exits 78 for this): what is read next is read through it.
pub(super) fn open_bound(path: &str, real: &Path, id: &Identity) -> Result<File, Failure> {
    let changed = || {
        Failure::new(
            "CANONICAL_PATH_CHANGED",
            "canonical path differs from the authorized target",
        )
        .at(path)
    };
    let dir = open::for_reading(real, true).map_err(|_| changed())?;
    let same = dir.metadata().is_ok_and(|m| &identity(&m) == id);
    if !same || !open::is_at(&dir, real) {
        return Err(changed());
    }
    Ok(dir)
}

/// The path through which the open directory's entries are reached.
pub(super) fn through(dir: &File, real: &Path) -> PathBuf {
    #[cfg(target_os = "linux")]
    {
        let _ = real;
        open::entry_of(dir)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        real.to_path_buf()
    }
}

/// OpenClaw sorts names with `localeCompare`: the shared approximation of
/// ICU's order (exact for ASCII), ties broken by bytes so pages are
/// stable.
pub(super) fn by_name(a: &str, b: &str) -> Ordering {
    crate::tools::js::locale_compare(a, b).then_with(|| a.cmp(b))
}

pub fn dir_list(files: &Files, request: &Request) -> Result<Value, Failure> {
    let (path, real, id) = bound_directory(files, request, "path not found")?;
    if request.preflight() {
        return reply(Listing {
            ok: true,
            path,
            entries: Vec::new(),
            next_page_token: None,
            truncated: false,
            preflight: true,
            binding: Existing::new(id),
        });
    }
    let max = request.clamped("maxEntries", DEFAULT_ENTRIES, HARD_ENTRIES) as usize;
    let offset = match request.params["pageToken"].as_str() {
        Some(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
            t.parse::<usize>().unwrap_or(usize::MAX)
        }
        _ => 0,
    };
    let dir = open_bound(&path, &real, &id)?;
    let base = through(&dir, &real);
    let failed = || Failure::new("READ_ERROR", "list failed").at(&path);
    let root = files.root_of(&real).ok_or_else(failed)?;
    let screen = root.screen();
    let mut names: Vec<(String, OsString)> = Vec::new();
    for entry in std::fs::read_dir(&base).map_err(|_| failed())? {
        let entry = entry.map_err(|_| failed())?;
        if names.len() == MAX_NAMES {
            return Err(Failure::new(
                "READ_ERROR",
                format!("list failed: the directory holds more than {MAX_NAMES} entries"),
            )
            .at(&path));
        }
        let name = entry.file_name();
        // Our state and OpenClaw's are not shown, as no tool shows them.
        if screen.hides(&real.join(&name)) {
            continue;
        }
        // A name that is not UTF-8 is shown with U+FFFD, as Node's
        // readdir shows it.
        names.push((name.to_string_lossy().into_owned(), name));
    }
    names.sort_by(|a, b| by_name(&a.0, &b.0));
    let total = names.len();
    let mut entries = Vec::new();
    for (shown, name) in names.into_iter().skip(offset).take(max) {
        // Gone since it was read: left out.
        let Ok(meta) = std::fs::symlink_metadata(base.join(&name)) else {
            continue;
        };
        let is_dir = meta.is_dir();
        entries.push(Entry {
            path: format!("{}/{shown}", path.trim_end_matches('/')),
            size: if is_dir { 0 } else { meta.len() },
            mime_type: if is_dir {
                "inode/directory"
            } else {
                mime::of_name(&shown)
            },
            is_dir,
            mtime: mtime_ms(&meta),
            name: shown,
        });
    }
    let truncated = offset.saturating_add(max) < total;
    reply(Listing {
        ok: true,
        path,
        entries,
        next_page_token: truncated.then(|| (offset + max).to_string()),
        truncated,
        preflight: false,
        binding: Existing::new(id),
    })
}
