//! `search_files`: files whose name, or whose lines, hold a query.
//!
//! Owns matching and clipping what is found. Must never read a file past
//! `SEARCH_MAX_FILE_BYTES`, match inside a binary file, or walk by itself
//! (every walk is [`super::walk::Walk`]).

use std::fs;
use std::ops::ControlFlow;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::tools::ToolError;
use crate::tools::sandbox::Workspace;

use super::read::{looks_binary, read_capped};
use super::walk::{Kind, Walk, resolve_dir};

/// Content search reads whole files; bigger ones are rarely what an agent means.
pub(super) const SEARCH_MAX_FILE_BYTES: usize = 1024 * 1024;
/// Enough of a matching line to judge it without flooding the agent's context.
pub(super) const SEARCH_MAX_LINE_CHARS: usize = 300;
/// Build output, vendored packages and VCS internals drown real matches.
const SEARCH_SKIPPED_DIRS: &[&str] = &[".git", "node_modules", "target"];

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchFiles {
    pub query: String,
    pub search_content: Option<bool>,
    pub path: Option<String>,
}

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

pub(super) struct Hits {
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
pub(super) fn matching_lines(path: &Path, needle: &str) -> Vec<(usize, String)> {
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

pub(super) fn clip(line: &str) -> String {
    line.chars().take(SEARCH_MAX_LINE_CHARS).collect()
}
