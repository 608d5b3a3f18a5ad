//! OpenClaw's file transfers (cap `file`): `file.fetch`, `file.stat`,
//! `dir.list`, `dir.fetch` and `file.write`, as its node host answers them
//! (`extensions/file-transfer/src/node-host/*` in its bundle), behind our
//! own confinement.
//!
//! The gateway runs every one of them twice with the same idempotency key:
//! a preflight (`preflightOnly:true`) that names the canonical path and its
//! device/inode (`binding`), which it checks against the owner's path
//! policy, then the real call carrying `expectedCanonicalPath` and
//! `expectedBinding`. So nothing here caches or deduplicates, and the real
//! call verifies what it opened (an open descriptor, never a path looked at
//! earlier) against that binding.
//!
//! Owns: the lenient parameter reading OpenClaw does (a flag counts only
//! when it is `true`), the in-payload answers (`{ok:false, code, message,
//! canonicalPath?}` inside a successful invoke), and the file roots: the
//! workspace and the owner's `--file-root` directories.
//!
//! Must never: read, list, archive or write outside the roots or inside a
//! protected place (our state, OpenClaw's private files), under any name;
//! block on a FIFO; follow a symlink unless asked (`followSymlinks`), and
//! then only to a place inside the roots; name in a message an outside path
//! the caller did not send; hold more than a few files in memory at once.

#[cfg(unix)]
mod archive;
#[cfg(unix)]
mod fetch;
#[cfg(unix)]
mod list;
mod mime;
#[cfg(unix)]
mod open;
#[cfg(unix)]
mod stat;
#[cfg(unix)]
mod write;

use crate::tools::js::{mtime_ms, normalize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::ToolError;
use super::policy::Risk;
use super::sandbox::Workspace;

/// The five commands, by their wire names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Fetch,
    Stat,
    List,
    Archive,
    Write,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Fetch => "file.fetch",
            Op::Stat => "file.stat",
            Op::List => "dir.list",
            Op::Archive => "dir.fetch",
            Op::Write => "file.write",
        }
    }
}

/// OpenClaw's limits (`file-fetch-protocol`, `dir-fetch-limits`,
/// `file-write`, `dir-list`).
pub const DEFAULT_MAX_BYTES: u64 = 8 * 1024 * 1024;
pub const HARD_MAX_BYTES: u64 = 16 * 1024 * 1024;
pub const MAX_TREE_ENTRIES: usize = 5_000;

/// Transfers whose answer may be megabytes (fetches, archives, writes)
/// run this many at a time: each holds its file, its base64 and its JSON.
const TRANSFERS_AT_ONCE: usize = 2;

/// The code of our own refusal of a path outside every root.
pub const OUTSIDE: &str = "PATH_OUTSIDE_WORKSPACE";

/// Where the file commands may reach, and how many run at once.
pub struct Files {
    /// The workspace first, then each `--file-root`; all canonical, each
    /// protecting what the workspace protects.
    roots: Vec<Workspace>,
    transfers: Arc<Semaphore>,
    /// `dir.fetch`: one archive at a time (a tar process and 16 MiB).
    archives: Arc<Semaphore>,
}

impl Files {
    /// `extra`: the owner's `--file-root` directories; each must exist.
    pub fn new(workspace: &Workspace, extra: &[PathBuf]) -> Result<Self, String> {
        let mut roots = vec![workspace.clone()];
        for dir in extra {
            let root = workspace
                .rooted_at(dir)
                .map_err(|e| format!("--file-root {}: {e}", dir.display()))?;
            roots.push(root);
        }
        Ok(Self {
            roots,
            transfers: Arc::new(Semaphore::new(TRANSFERS_AT_ONCE)),
            archives: Arc::new(Semaphore::new(1)),
        })
    }

    /// Runs one call, prepared by [`Request::parse`]; every refusal of
    /// OpenClaw's contract (and of our confinement) is an `ok:false`
    /// payload, as its node host answers them.
    pub async fn run(
        self: &Arc<Self>,
        request: Request,
        budget: Duration,
        cancel: CancellationToken,
        keep: Option<&crate::tools::Keep>,
    ) -> Result<Value, ToolError> {
        // The archive's turn first, then a transfer's: a dir.fetch waiting
        // for the one archive slot holds no transfer slot meanwhile. Both
        // waits count against the caller's time. A write holds a slot even
        // at its preflight, which decodes the whole content too.
        let started = std::time::Instant::now();
        let wait = |sem: &Arc<Semaphore>| {
            let sem = Arc::clone(sem);
            async move {
                match tokio::time::timeout(
                    budget.saturating_sub(started.elapsed()),
                    sem.acquire_owned(),
                )
                .await
                {
                    Ok(Ok(permit)) => Ok(permit),
                    Ok(Err(_)) => Err(closed()),
                    Err(_) => Err(ToolError::new(
                        "TIMEOUT",
                        "no transfer slot came free within the call's time (at most 2 transfers and 1 dir.fetch run at once)",
                    )),
                }
            }
        };
        let _archive = match request.op {
            Op::Archive => Some(wait(&self.archives).await?),
            _ => None,
        };
        let transfer = match request.op {
            Op::Fetch | Op::Archive if !request.preflight() => Some(wait(&self.transfers).await?),
            Op::Write => Some(wait(&self.transfers).await?),
            _ => None,
        };
        let budget = budget.saturating_sub(started.elapsed());
        let answer = self.answer(request, budget, cancel).await;
        // The answer holds the file's bytes until it is sent: so does the
        // slot, where the caller can keep it (a 24-fetch flood against a
        // slow reader queued them all: 700 MiB).
        if let (Some(keep), Some(transfer)) = (keep, transfer)
            && let Ok(mut keep) = keep.lock()
        {
            *keep = Some(transfer);
        }
        answer
    }

    #[cfg(unix)]
    async fn answer(
        self: &Arc<Self>,
        request: Request,
        budget: Duration,
        cancel: CancellationToken,
    ) -> Result<Value, ToolError> {
        let files = Arc::clone(self);
        let outcome = match request.op {
            Op::Archive => archive::dir_fetch(files, request, budget, cancel).await,
            op => tokio::task::spawn_blocking(move || match op {
                Op::Fetch => fetch::file_fetch(&files, &request),
                Op::Stat => stat::file_stat(&files, &request),
                Op::List => list::dir_list(&files, &request),
                Op::Write => write::file_write(&files, &request),
                Op::Archive => unreachable!("run above"),
            })
            .await
            .unwrap_or_else(|e| Err(Failure::new("READ_ERROR", format!("the call failed: {e}")))),
        };
        Ok(outcome.unwrap_or_else(Failure::into_value))
    }

    #[cfg(not(unix))]
    async fn answer(
        self: &Arc<Self>,
        _request: Request,
        _budget: Duration,
        _cancel: CancellationToken,
    ) -> Result<Value, ToolError> {
        Err(ToolError::new(
            "UNAVAILABLE",
            "file transfers need a Unix node (device and inode bindings)",
        ))
    }

    /// The root `path` (as sent, normalised) lies in, judged on the text:
    /// nothing on disk is consulted, so whether an outside path exists is
    /// never revealed.
    fn spelled_inside(&self, path: &Path) -> bool {
        self.roots.iter().any(|r| r.contains_spelling(path))
    }

    /// The root a canonical path lies in.
    fn root_of(&self, real: &Path) -> Option<&Workspace> {
        self.roots.iter().find(|r| real.starts_with(r.root()))
    }

    /// Our refusal of a path outside every root: in the payload, naming
    /// the flag that widens them.
    fn outside(&self, path: &str, why: &str) -> Failure {
        let roots: Vec<String> = self
            .roots
            .iter()
            .map(|r| r.root().display().to_string())
            .collect();
        Failure::new(
            OUTSIDE,
            format!(
                "path {path:?} is outside this node's file roots ({}){why}; the node's owner can add one with --file-root DIR",
                roots.join(", ")
            ),
        )
    }

    /// A canonical path inside a root and not protected, or our refusal.
    fn confine(&self, sent: &str, real: &Path) -> Result<(), Failure> {
        let Some(root) = self.root_of(real) else {
            return Err(self.outside(sent, ": it leads through a symlink to a place outside them"));
        };
        if root.is_protected(real) {
            return Err(protected(sent));
        }
        Ok(())
    }
}

fn closed() -> ToolError {
    ToolError::new("UNAVAILABLE", "the node is shutting down")
}

fn protected(sent: &str) -> Failure {
    Failure::new(
        "PROTECTED_PATH",
        format!(
            "{sent:?} belongs to the node's or OpenClaw's own state (keys, tokens, approvals, credentials), which agents may not touch"
        ),
    )
}

/// One call's parameters, read as OpenClaw's node host reads them: the
/// raw object (each command takes what it needs), and the answer budget.
#[derive(Debug)]
pub struct Request {
    pub op: Op,
    params: Value,
    /// Bytes of file (or archive) the answer may carry: what fits the
    /// gateway's frame as base64.
    transfer_budget: u64,
}

impl Request {
    /// Reads nothing from disk. `transfer_budget`: see
    /// [`crate::node`]'s result budget for transfers.
    pub fn parse(op: Op, params: Value, transfer_budget: usize) -> Self {
        Self {
            op,
            params,
            transfer_budget: transfer_budget as u64,
        }
    }

    /// `file.write` is risky, preflight or not: a write our policy refuses
    /// is refused at the preflight, before the gateway reports anything.
    pub fn risk(&self) -> Risk {
        match self.op {
            Op::Write => Risk::Risky,
            _ => Risk::Safe,
        }
    }

    /// What an approval prompt and the audit show.
    pub fn summary(&self) -> String {
        let path = self.string("path").unwrap_or("");
        match self.op {
            Op::Write => {
                let bytes = self.string("contentBase64").map_or(0, |b| b.len() / 4 * 3);
                let what = if self.preflight() { " (preflight)" } else { "" };
                format!(
                    "file.write{what}: {path} (about {bytes} bytes, overwrite={})",
                    self.flag("overwrite")
                )
            }
            op => format!("{}: {path}", op.name()),
        }
    }

    /// A flag counts only when it is exactly `true`.
    fn flag(&self, key: &str) -> bool {
        self.params[key] == Value::Bool(true)
    }

    fn string(&self, key: &str) -> Option<&str> {
        self.params[key].as_str()
    }

    fn preflight(&self) -> bool {
        self.flag("preflightOnly")
    }

    fn follow(&self) -> bool {
        self.flag("followSymlinks")
    }

    /// A positive finite number, floored and capped at `hard`; anything
    /// else is `default` (OpenClaw's `clampMaxBytes`).
    fn clamped(&self, key: &str, default: u64, hard: u64) -> u64 {
        match self.params[key].as_f64() {
            Some(n) if n.is_finite() && n > 0.0 => (n.floor() as u64).clamp(1, hard),
            _ => default,
        }
    }

    /// `maxBytes` for a file or an archive, within what the gateway's frame
    /// can carry.
    fn max_bytes(&self) -> u64 {
        self.clamped("maxBytes", DEFAULT_MAX_BYTES, HARD_MAX_BYTES)
    }

    /// `expectedCanonicalPath` differs from `real`: OpenClaw's
    /// `rejectCanonicalPathChange`.
    fn canonical_changed(&self, real: &str) -> Option<Failure> {
        let expected = self.string("expectedCanonicalPath")?;
        (expected != real).then(|| {
            Failure::new(
                "CANONICAL_PATH_CHANGED",
                "canonical path differs from the authorized target",
            )
            .at(real)
        })
    }
}

/// A failure answered in the payload: `{ok:false, code, message,
/// canonicalPath?}` inside a successful invoke.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Failure {
    ok: bool,
    pub code: &'static str,
    pub message: String,
    #[serde(rename = "canonicalPath", skip_serializing_if = "Option::is_none")]
    canonical_path: Option<String>,
}

impl Failure {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            ok: false,
            code,
            message: message.into(),
            canonical_path: None,
        }
    }

    /// With the canonical path it concerns (inside a root: never an
    /// outside one).
    fn at(mut self, canonical: &str) -> Self {
        self.canonical_path = Some(canonical.to_owned());
        self
    }

    fn into_value(self) -> Value {
        serde_json::to_value(self).expect("plain data")
    }
}

/// A file's identity as OpenClaw binds it: device and inode as decimal
/// strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    pub device: String,
    pub inode: String,
}

/// `binding: {kind:"existing", device, inode}`.
#[derive(Debug, Clone, Serialize)]
pub struct Existing {
    kind: &'static str,
    #[serde(flatten)]
    identity: Identity,
}

impl Existing {
    fn new(identity: Identity) -> Self {
        Self {
            kind: "existing",
            identity,
        }
    }
}

/// What `expectedBinding` may say: OpenClaw's `readPathBinding` (target
/// device and inode come as a pair or not at all).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Binding {
    Existing(Identity),
    Write {
        anchor_path: String,
        anchor: Identity,
        target: Option<Identity>,
    },
}

impl Binding {
    fn read(value: &Value) -> Option<Self> {
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        match value.get("kind").and_then(Value::as_str)? {
            "existing" => Some(Binding::Existing(Identity {
                device: text("device")?,
                inode: text("inode")?,
            })),
            "write" => {
                let target = match (text("targetDevice"), text("targetInode")) {
                    (Some(device), Some(inode)) => Some(Identity { device, inode }),
                    (None, None) => None,
                    _ => return None,
                };
                Some(Binding::Write {
                    anchor_path: text("anchorPath")?,
                    anchor: Identity {
                        device: text("anchorDevice")?,
                        inode: text("anchorInode")?,
                    },
                    target,
                })
            }
            _ => None,
        }
    }
}

/// The check every read does on an existing-kind binding: present, it
/// must be of that kind and name `actual`.
fn binding_differs(request: &Request, actual: &Identity, real: &str) -> Option<Failure> {
    let sent = request.params.get("expectedBinding")?;
    match Binding::read(sent) {
        Some(Binding::Existing(expected)) if &expected == actual => None,
        _ => Some(identity_changed(real)),
    }
}

fn identity_changed(real: &str) -> Failure {
    Failure::new(
        "CANONICAL_PATH_CHANGED",
        "filesystem identity differs from the authorized target",
    )
    .at(real)
}

/// OpenClaw's `readAbsolutePath` (reads): a non-empty absolute path
/// without NUL.
fn absolute(request: &Request) -> Result<&str, Failure> {
    let path = match request.params.get("path").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => p,
        _ => return Err(Failure::new("INVALID_PATH", "path required")),
    };
    if path.contains('\0') {
        return Err(Failure::new("INVALID_PATH", "path contains NUL byte"));
    }
    if !path.starts_with('/') {
        return Err(Failure::new("INVALID_PATH", "path must be absolute"));
    }
    Ok(path)
}

/// The message OpenClaw's node answers a path through a symlink with
/// (`SYMLINK_REJECTED_MESSAGE`), its read or write variant.
fn symlink_rejected(write: bool) -> String {
    format!(
        "path traverses a symlink; refusing because followSymlinks=false (set plugins.entries.file-transfer.config.nodes.<node>.followSymlinks=true to allow, or update {} to the canonical path)",
        if write {
            "allowWritePaths"
        } else {
            "allowReadPaths"
        }
    )
}

/// A read's path resolved as OpenClaw's `resolveCanonicalReadPath` does,
/// inside our roots: refused as outside on its text first, then its real
/// path (a symlink refused unless `followSymlinks`), then our confinement
/// of that real path.
fn canonical_for_read(
    files: &Files,
    request: &Request,
    not_found: &str,
    classify: fn(&std::io::Error) -> &'static str,
) -> Result<(String, PathBuf), Failure> {
    let sent = absolute(request)?;
    let normalized = normalize(sent);
    if !files.spelled_inside(Path::new(&normalized)) {
        return Err(files.outside(sent, ""));
    }
    let real = match std::fs::canonicalize(&normalized) {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Failure::new("NOT_FOUND", not_found));
        }
        Err(e) => {
            return Err(Failure::new(
                classify(&e),
                format!("realpath failed: {}", os_message(&e)),
            ));
        }
    };
    let Some(text) = real.to_str().map(str::to_owned) else {
        return Err(Failure::new(
            "INVALID_PATH",
            "the real path is not valid UTF-8",
        ));
    };
    if !request.follow() && text != normalized {
        let failure = Failure::new("SYMLINK_REDIRECT", symlink_rejected(false));
        // Where the link leads is said only when that is inside.
        return Err(match files.root_of(&real) {
            Some(_) => failure.at(&text),
            None => failure,
        });
    }
    files.confine(sent, &real)?;
    Ok((text, real))
}

/// An OS error's wording without any path.
fn os_message(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(errno) => std::io::Error::from_raw_os_error(errno).to_string(),
        None => err.kind().to_string(),
    }
}

/// EACCES/EPERM are PERMISSION_DENIED; ENOENT NOT_FOUND; the rest `other`.
fn classify_io(err: &std::io::Error, other: &'static str) -> &'static str {
    match err.kind() {
        std::io::ErrorKind::NotFound => "NOT_FOUND",
        std::io::ErrorKind::PermissionDenied => "PERMISSION_DENIED",
        _ => other,
    }
}

fn classify_read(err: &std::io::Error) -> &'static str {
    classify_io(err, "READ_ERROR")
}

/// The answer of a command, serialised once.
fn reply(value: impl Serialize) -> Result<Value, Failure> {
    Ok(serde_json::to_value(value).expect("plain data"))
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt;
    Identity {
        device: meta.dev().to_string(),
        inode: meta.ino().to_string(),
    }
}

#[cfg(test)]
mod tests;
