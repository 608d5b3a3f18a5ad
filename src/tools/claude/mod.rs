//! `anthropic.claude.sessions.list.v1` and `.read.v1` (cap
//! `claude-sessions`): the Claude Code sessions on this machine, listed
//! and read page by page, with the contract of OpenClaw's node host
//! (`extensions/anthropic/session-catalog-*`): the same rows, items,
//! cursors and error texts, so the gateway's `sessions.catalog.list` /
//! `.read` see no difference.
//!
//! Transcripts are private (prompts, code): the owner turns these on
//! (`--claude-sessions`); OpenClaw declares them whenever the directory
//! exists. Everything read lies inside `<CLAUDE_CONFIG_DIR or
//! ~/.claude>/projects` after canonicalisation ([`tree`]); nothing is
//! written. Must never read more than OpenClaw's bounds (64 MiB of
//! metadata per list, 64 MiB backwards per page), never block on a FIFO,
//! and never emit a row or page the gateway's validator rejects.

mod js;
mod params;
mod read;
mod scan;
mod tree;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::ToolError;

/// One of OpenClaw's error texts for these commands.
#[derive(Debug)]
pub struct Failure(pub String);

/// Whether the caller gave up: long scans look between files and chunks.
pub type Stop<'a> = &'a dyn Fn() -> bool;

trait Check {
    fn check(&self) -> Result<(), Failure>;
}

impl<F: Fn() -> bool + ?Sized> Check for F {
    fn check(&self) -> Result<(), Failure> {
        if self() {
            Err(Failure("the invocation was cancelled".into()))
        } else {
            Ok(())
        }
    }
}

/// As OpenClaw's node answers a thrown error: `INVALID_REQUEST`,
/// `Error: <text>` (node-commands.md §0.1).
impl From<Failure> for ToolError {
    fn from(f: Failure) -> Self {
        ToolError::new("INVALID_REQUEST", format!("Error: {}", f.0))
    }
}

/// Where Claude Code keeps its sessions, as OpenClaw finds it:
/// `$CLAUDE_CONFIG_DIR/projects` (trimmed, made absolute), else
/// `<$HOME or $USERPROFILE or the home directory>/.claude/projects`.
/// What no file tool may reach, whether or not the owner shares the
/// sessions: Claude Code's own directory (transcripts, and its sign-in
/// token in `.credentials.json`) and its `~/.claude.json`.
pub fn private_paths() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let mut paths: Vec<PathBuf> = home
        .iter()
        .flat_map(|h| [h.join(".claude"), h.join(".claude.json")])
        .collect();
    if let Some(dir) = projects_dir().as_deref().and_then(Path::parent) {
        paths.push(dir.to_owned());
    }
    paths
}

pub fn projects_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .and_then(|v| v.into_string().ok())
            .map(|v| js::trim(&v).to_owned())
            .filter(|v| !v.is_empty())
    };
    let config = match var("CLAUDE_CONFIG_DIR") {
        Some(dir) => std::path::absolute(dir).ok()?,
        None => {
            let home = var("HOME")
                .or_else(|| var("USERPROFILE"))
                .map(PathBuf::from)
                .or_else(std::env::home_dir)?;
            home.join(".claude")
        }
    };
    crate::tools::js::resolve(&config.join("projects"))
}

/// The sessions under one projects root.
#[derive(Debug, Clone)]
pub struct Sessions {
    projects: PathBuf,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListPage<'a> {
    sessions: &'a [scan::Session],
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

impl Sessions {
    pub fn new(projects: PathBuf) -> Self {
        Sessions { projects }
    }

    /// `anthropic.claude.sessions.list.v1`.
    pub fn list(&self, raw: Option<&str>, stop: Stop) -> Result<Value, ToolError> {
        let p = params::list(raw)?;
        let offset = match &p.cursor {
            Some(c) => params::decode_offset(c, "catalog")?,
            None => 0,
        };
        let search = p.search.as_deref().map(str::to_lowercase);
        let matches = |s: &scan::Session| {
            let Some(search) = &search else {
                return true;
            };
            [
                s.name.as_deref(),
                s.cwd.as_deref(),
                s.git_branch.as_deref(),
                Some(s.thread_id.as_str()),
            ]
            .into_iter()
            .flatten()
            .any(|field| field.to_lowercase().contains(search.as_str()))
        };
        let all: Vec<scan::Session> = scan::sessions(&self.projects, stop)?
            .into_iter()
            .filter(matches)
            .collect();
        let from = usize::try_from(offset).unwrap_or(usize::MAX).min(all.len());
        let to = from.saturating_add(p.limit).min(all.len());
        let page = ListPage {
            sessions: &all[from..to],
            next_cursor: (to < all.len()).then(|| params::encode_offset(to as u64)),
        };
        Ok(serde_json::to_value(page).expect("plain data"))
    }

    /// `anthropic.claude.sessions.read.v1`.
    pub fn read(&self, raw: Option<&str>, stop: Stop) -> Result<Value, ToolError> {
        let p = params::read(raw)?;
        let unavailable = || Failure("Claude session is unavailable".into());
        let sessions = scan::sessions(&self.projects, stop)?;
        let session = sessions
            .iter()
            .find(|s| s.thread_id == p.thread_id)
            .ok_or_else(unavailable)?;
        // Opened as it was vetted: still inside the root, still the same
        // regular file (OpenClaw would answer the open's error, path and
        // all).
        let root = tree::Root::at(&self.projects).ok_or_else(unavailable)?;
        let file = root.open(&session.file).ok_or_else(unavailable)?;
        let size = file.metadata().map_err(|_| unavailable())?.len();
        let end = match &p.cursor {
            Some(c) => params::decode_offset(c, "transcript")?,
            None => size,
        };
        if end > size {
            return Err(Failure("transcript cursor is invalid".into()).into());
        }
        let page = read::page(&file, end, p.limit, p.thread_id, stop)?;
        Ok(serde_json::to_value(page).expect("plain data"))
    }
}

/// One positioned read (`pread`), as Node's `handle.read(buf, 0, n, pos)`.
pub(crate) fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
}
