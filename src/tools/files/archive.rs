//! `dir.fetch`: a directory tree as a gzipped tar (OpenClaw's
//! `handleDirFetch`), made by the system's `tar -czf - .` as OpenClaw makes
//! it, run through our one process runner (byte cap, deadline, tree kill)
//! inside the bound directory itself (entered through its open descriptor
//! on Linux, so a directory swapped in since the check is never archived).
//!
//! Before any archive is made the tree is walked: a tree the gateway would
//! refuse (a symlink, FIFO, socket or device in it, a file linked twice,
//! more than 5000 entries, more than it unpacks) or one holding a
//! protected place is refused here with a clear code, at the preflight
//! already; the walk's paths are the preflight's `entries` the gateway
//! checks against its path policy.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::list::{bound_directory, by_name, open_bound, through};
use super::{Existing, Failure, Files, MAX_TREE_ENTRIES, Request, reply};
use crate::runner;
use crate::shared::hex::hex;

/// What the gateway unpacks at most (`DIR_FETCH_ARCHIVE_LIMITS`): past
/// these it refuses the archive, so we refuse the tree first.
const MAX_EXTRACTED: u64 = 64 * 1024 * 1024;
const MAX_ENTRY: u64 = 16 * 1024 * 1024;
/// OpenClaw's wall-clock limit on `tar`.
const TAR_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Archived {
    ok: bool,
    path: String,
    tar_base64: String,
    tar_bytes: usize,
    sha256: String,
    file_count: usize,
    entries: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    preflight_only: bool,
    binding: Existing,
}

pub async fn dir_fetch(
    files: Arc<Files>,
    request: Request,
    budget: Duration,
    cancel: CancellationToken,
) -> Result<Value, Failure> {
    let max = request.max_bytes().min(request.transfer_budget);
    let walked = tokio::task::spawn_blocking(move || {
        let (path, real, id) = bound_directory(&files, &request, "directory not found")?;
        let dir = open_bound(&path, &real, &id)?;
        let entries = walk(&files, &path, &real, &through(&dir, &real), max)?;
        Ok::<_, Failure>((request, path, id, dir, entries))
    })
    .await
    .unwrap_or_else(|e| {
        Err(Failure::new(
            "READ_ERROR",
            format!("preflight readdir failed: {e}"),
        ))
    });
    let (request, path, id, dir, entries) = walked?;
    if request.preflight() {
        return reply(Archived {
            ok: true,
            path,
            tar_base64: String::new(),
            tar_bytes: 0,
            sha256: String::new(),
            file_count: entries.len(),
            entries,
            preflight_only: true,
            binding: Existing::new(id),
        });
    }
    let limit = TAR_TIMEOUT.min(budget);
    // tar archives the names the walk checked, not whatever the directory
    // holds by now (a name added since is not in the list).
    let scratch = tempfile::Builder::new()
        .prefix("clawbot-dir-fetch-")
        .tempdir()
        .map_err(|e| Failure::new("READ_ERROR", format!("tar command failed: {e}")).at(&path))?;
    let list = scratch.path().join("names");
    let mut names = b"./\0".to_vec();
    for entry in &entries {
        names.extend_from_slice(format!("./{entry}\0").as_bytes());
    }
    std::fs::write(&list, names)
        .map_err(|e| Failure::new("READ_ERROR", format!("tar command failed: {e}")).at(&path))?;
    let mut args: Vec<std::ffi::OsString> = ["-czf", "-", "--no-recursion", "--null", "-T"]
        .map(Into::into)
        .to_vec();
    args.push(list.into());
    let spec = runner::Spec {
        program: tar_program(),
        args,
        cwd: Some(through(&dir, Path::new(&path))),
        env: vec![],
        env_remove: crate::tools::SECRET_VARS,
        // GNU tar reads options from TAR_OPTIONS (`-h` would follow
        // symlinks): the owner's shell settings do not reach it.
        env_filter: Some(|key| matches!(key, "TAR_OPTIONS" | "GZIP" | "POSIXLY_CORRECT")),
        timeout: limit,
        grace: Duration::from_millis(500),
        max_output: max as usize,
        split_stderr: true,
        stop_after_json: None,
        tap: None,
    };
    let ran = runner::run_bytes(&spec, cancel.cancelled()).await;
    drop(dir);
    let failed = |why: String| Failure::new("READ_ERROR", why).at(&path);
    let ran = ran.map_err(|e| failed(format!("tar command failed: {e}")))?;
    if ran.overflowed {
        return Err(Failure::new(
            "TREE_TOO_LARGE",
            format!("tarball exceeded {max} byte limit mid-stream"),
        )
        .at(&path));
    }
    if ran.end == runner::End::TimedOut {
        return Err(failed(format!(
            "tar command exceeded {}s wall-clock timeout (slow filesystem or symlink loop?)",
            limit.as_secs()
        )));
    }
    if ran.end != runner::End::Exited || ran.status.and_then(|s| s.code()) != Some(0) {
        let said = ran.stderr.head.lines().next().unwrap_or("").to_owned();
        return Err(failed(if said.is_empty() {
            "tar command failed".into()
        } else {
            format!("tar command failed: {said}")
        }));
    }
    let sha256 = hex(&Sha256::digest(&ran.stdout));
    let tar_bytes = ran.stdout.len();
    let tar_base64 = base64::engine::general_purpose::STANDARD.encode(&ran.stdout);
    drop(ran);
    let mut entries = entries;
    entries.sort_by(|a, b| by_name(a, b));
    reply(Archived {
        ok: true,
        path,
        tar_base64,
        tar_bytes,
        sha256,
        file_count: entries.len(),
        entries,
        preflight_only: false,
        binding: Existing::new(id),
    })
}

/// OpenClaw runs `/usr/bin/tar`; elsewhere the one on PATH.
fn tar_program() -> OsString {
    let usual = Path::new("/usr/bin/tar");
    if usual.exists() {
        usual.into()
    } else {
        "tar".into()
    }
}

/// The tree's relative paths, depth first, each level sorted by name (the
/// preflight's `entries`), or why it cannot be archived.
fn walk(
    files: &Files,
    path: &str,
    real: &Path,
    base: &Path,
    max_bytes: u64,
) -> Result<Vec<String>, Failure> {
    let refuse = |code: &'static str, message: String| Failure::new(code, message).at(path);
    let root = files
        .root_of(real)
        .ok_or_else(|| refuse("READ_ERROR", "preflight readdir failed".into()))?;
    let screen = root.screen();
    let mut entries = Vec::new();
    let (mut extracted, mut on_disk) = (0u64, 0u64);
    // Relative paths still to visit, the next one last.
    let mut pending: Vec<PathBuf> = children(base, Path::new(""), path)?;
    pending.reverse();
    while let Some(rel) = pending.pop() {
        let Some(shown) = rel.to_str().map(str::to_owned) else {
            return Err(refuse(
                "INVALID_PATH",
                format!(
                    "{:?} in the tree is not a UTF-8 name; dir.fetch cannot name it to the gateway",
                    rel.to_string_lossy()
                ),
            ));
        };
        entries.push(shown.clone());
        if entries.len() > MAX_TREE_ENTRIES {
            return Err(refuse(
                "TREE_TOO_LARGE",
                format!("directory tree exceeds {MAX_TREE_ENTRIES} entries during preflight"),
            ));
        }
        if screen.hides(&real.join(&rel)) {
            return Err(refuse(
                "PROTECTED_PATH",
                format!(
                    "{shown:?} in the tree belongs to the node's or OpenClaw's own state (keys, tokens, approvals, credentials), which agents may not touch"
                ),
            ));
        }
        let meta = std::fs::symlink_metadata(base.join(&rel)).map_err(|e| {
            refuse(
                super::classify_read(&e),
                format!("preflight readdir failed: {}", super::os_message(&e)),
            )
        })?;
        let kind = meta.file_type();
        if kind.is_dir() {
            let mut inner = children(base, &rel, path)?;
            inner.reverse();
            pending.extend(inner);
            continue;
        }
        if !kind.is_file() {
            let what = if kind.is_symlink() {
                "a symlink"
            } else {
                "a FIFO, socket or device"
            };
            return Err(refuse(
                "UNSUPPORTED_FILE_TYPE",
                format!(
                    "{shown:?} in the tree is {what}; dir.fetch archives only regular files and directories (the gateway refuses an archive holding anything else)"
                ),
            ));
        }
        // Any file with another name: the other may be outside every root
        // (as file.fetch refuses it), or inside the tree, which tar stores
        // as a link member (the gateway refuses the archive).
        if meta.nlink() > 1 {
            return Err(refuse(
                "UNSUPPORTED_FILE_TYPE",
                format!("{shown:?} has more than one name (a hard link); dir.fetch archives none"),
            ));
        }
        if meta.len() > MAX_ENTRY {
            return Err(refuse(
                "TREE_TOO_LARGE",
                format!(
                    "{shown:?} is {} bytes; the gateway unpacks at most {MAX_ENTRY} bytes per file",
                    meta.len()
                ),
            ));
        }
        extracted += meta.len();
        on_disk += meta.blocks() * 512;
        if extracted > MAX_EXTRACTED {
            return Err(refuse(
                "TREE_TOO_LARGE",
                format!(
                    "directory tree holds more than {MAX_EXTRACTED} bytes; the gateway unpacks at most that"
                ),
            ));
        }
    }
    // OpenClaw's `du -sk` estimate: more than four times the archive limit
    // on disk will not compress into it.
    if on_disk.div_ceil(1024) > (max_bytes * 4).div_ceil(1024) {
        return Err(refuse(
            "TREE_TOO_LARGE",
            format!("directory tree exceeds estimated size limit ({max_bytes} bytes raw)"),
        ));
    }
    Ok(entries)
}

/// The names in the directory `rel` (under `base`), sorted, as relative
/// paths.
fn children(base: &Path, rel: &Path, path: &str) -> Result<Vec<PathBuf>, Failure> {
    let read = std::fs::read_dir(base.join(rel)).map_err(|e| {
        Failure::new(
            super::classify_read(&e),
            format!("preflight readdir failed: {}", super::os_message(&e)),
        )
        .at(path)
    })?;
    let mut names: Vec<OsString> = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| {
            Failure::new(
                "READ_ERROR",
                format!("preflight readdir failed: {}", super::os_message(&e)),
            )
            .at(path)
        })?;
        names.push(entry.file_name());
        // Bounded before sorting: the whole tree may hold no more.
        if names.len() > MAX_TREE_ENTRIES {
            return Err(Failure::new(
                "TREE_TOO_LARGE",
                format!("directory tree exceeds {MAX_TREE_ENTRIES} entries during preflight"),
            )
            .at(path));
        }
    }
    names.sort_by(|a, b| {
        by_name(&a.to_string_lossy(), &b.to_string_lossy())
            .then_with(|| a.as_bytes().cmp(b.as_bytes()))
    });
    Ok(names.into_iter().map(|n| rel.join(n)).collect())
}
