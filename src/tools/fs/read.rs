//! `read_file`: one file's text, capped in bytes and lines.
//!
//! Owns reading a resolved file into the answer: never more than the cap,
//! a cut that never splits a character, a binary file flagged rather than
//! sent. Must never resolve a path itself (the [`Workspace`] does) or read
//! anything but a regular file.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::tools::ToolError;
use crate::tools::sandbox::Workspace;

/// Looking further than this for a NUL byte costs time and rarely changes the verdict.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadFile {
    pub path: String,
    pub max_lines: Option<usize>,
}

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
pub(super) fn regular_file_size(target: &Path, shown: &str) -> Result<u64, ToolError> {
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
pub(super) fn read_capped(path: &Path, max: usize) -> io::Result<(Vec<u8>, bool)> {
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut bytes = Vec::new();
    File::open(path)?.take(limit).read_to_end(&mut bytes)?;
    let cut = bytes.len() > max;
    bytes.truncate(max);
    Ok((bytes, cut))
}

pub(super) fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(BINARY_SNIFF_BYTES).any(|&b| b == 0)
}

/// A byte cap can split a multi-byte character; dropping its stub beats
/// ending the text with a replacement character the file never had.
pub(super) fn decode(bytes: &[u8], cut: bool) -> String {
    let whole = match std::str::from_utf8(bytes) {
        Err(e) if cut && e.error_len().is_none() => bytes.get(..e.valid_up_to()).unwrap_or(bytes),
        _ => bytes,
    };
    String::from_utf8_lossy(whole).into_owned()
}

pub(super) fn first_lines(mut text: String, max_lines: Option<usize>) -> (String, bool) {
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
