//! Walking a resolved directory, for `list_files` and `search_files`.
//!
//! Owns the one walk: depth-first, siblings in name order, within a budget
//! of entries and time. Must never follow a symlinked directory (so it
//! cannot leave where it started) or visit a protected place under any
//! name.

use std::fs;
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use crate::tools::ToolError;
use crate::tools::sandbox::Workspace;

pub(super) fn resolve_dir(ws: &Workspace, sent: &str) -> Result<PathBuf, ToolError> {
    let dir = ws.resolve_existing(sent)?;
    if !dir.is_dir() {
        let message = format!("{sent:?} is not a directory");
        return Err(ToolError::new("NOT_A_DIRECTORY", message));
    }
    Ok(dir)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::Other => "other",
        }
    }

    /// Classifies without following links, so a symlinked directory is a
    /// "symlink" and is never walked into.
    pub(super) fn of(file_type: io::Result<fs::FileType>) -> Self {
        match file_type {
            Ok(t) if t.is_symlink() => Kind::Symlink,
            Ok(t) if t.is_dir() => Kind::Dir,
            Ok(t) if t.is_file() => Kind::File,
            _ => Kind::Other,
        }
    }
}

/// One entry met on a walk.
pub(super) struct Found {
    /// The entry's own name.
    pub(super) name: String,
    /// Relative to where the walk started, `/`-separated.
    pub(super) rel: String,
    pub(super) path: PathBuf,
    pub(super) kind: Kind,
}

/// Entries a walk visits at most, and for how long: a walk on the
/// blocking pool cannot be interrupted, so it must end on its own.
pub(super) const WALK_BUDGET: usize = 200_000;
pub(super) const WALK_TIME: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) struct Walk<'a> {
    pub(super) ws: &'a Workspace,
    pub(super) recursive: bool,
    pub(super) skipped_dirs: &'a [&'a str],
}

impl Walk<'_> {
    /// Depth-first, siblings in name order. Iterative rather than recursive
    /// so a deeply nested tree cannot exhaust a blocking thread's stack.
    /// Protected places are passed over, under any name. True when the walk stopped at its
    /// budget rather than at the end of the tree.
    pub(super) fn run(
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

pub(super) fn children(dir: &Path, rel: &str) -> io::Result<Vec<Found>> {
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
