//! `list_files`: a directory's entries, optionally recursive and filtered
//! by a glob on their names.
//!
//! Owns shaping a walk's entries into the answer. Must never walk by
//! itself: every walk is [`super::walk::Walk`], which cannot leave the
//! directory it starts from.

use std::fs;
use std::ops::ControlFlow;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::tools::ToolError;
use crate::tools::sandbox::Workspace;

use super::walk::{Found, Kind, Walk, resolve_dir};

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListFiles {
    pub path: Option<String>,
    pub pattern: Option<String>,
    pub recursive: Option<bool>,
}

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

pub(super) fn name_matcher(
    pattern: Option<&str>,
) -> Result<Option<globset::GlobMatcher>, ToolError> {
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

pub(super) fn entry_json(found: &Found) -> Value {
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
