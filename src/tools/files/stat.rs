//! `file.stat`: a regular file's or a directory's type, size and mtime,
//! bound to its identity (OpenClaw's `handleFileStat`).

use serde::Serialize;
use serde_json::Value;

use super::{
    Existing, Failure, Files, Request, binding_differs, canonical_for_read, identity, mtime_ms,
    open, reply,
};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Stat {
    ok: bool,
    path: String,
    #[serde(rename = "type")]
    kind: &'static str,
    size: u64,
    mtime_ms: f64,
    binding: Existing,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    preflight_only: bool,
}

/// ENOENT and ENOTDIR are NOT_FOUND here (OpenClaw's `classifyError`).
fn classify(err: &std::io::Error) -> &'static str {
    match err.raw_os_error() {
        Some(libc::ENOTDIR) => "NOT_FOUND",
        _ => super::classify_read(err),
    }
}

pub fn file_stat(files: &Files, request: &Request) -> Result<Value, Failure> {
    let (path, real) = canonical_for_read(files, request, "path not found", classify)?;
    if let Some(changed) = request.canonical_changed(&path) {
        return Err(changed);
    }
    let unreadable =
        |e: std::io::Error| Failure::new(classify(&e), "could not read file metadata").at(&path);
    let named = std::fs::symlink_metadata(&real).map_err(unreadable)?;
    if !named.is_file() && !named.is_dir() {
        return Err(Failure::new(
            "UNSUPPORTED_FILE_TYPE",
            "only regular files and directories are supported",
        )
        .at(&path));
    }
    let file = open::for_reading(&real, named.is_dir())
        .map_err(|e| Failure::new(classify(&e), "could not open the metadata target").at(&path))?;
    let meta = file.metadata().map_err(unreadable)?;
    if !open::is_at(&file, &real) || meta.is_dir() != named.is_dir() {
        return Err(Failure::new(
            "CANONICAL_PATH_CHANGED",
            "canonical path differs from the authorized target",
        )
        .at(&path));
    }
    let id = identity(&meta);
    if let Some(changed) = binding_differs(request, &id, &path) {
        return Err(changed);
    }
    reply(Stat {
        ok: true,
        path,
        kind: if meta.is_dir() { "directory" } else { "file" },
        size: meta.len(),
        mtime_ms: mtime_ms(&meta),
        binding: Existing::new(id),
        preflight_only: request.preflight(),
    })
}
