//! `write_file`: a file's whole content, replaced atomically.
//!
//! Owns the write: a temporary file beside the target, renamed over it,
//! keeping an existing file's permissions. Must never create a directory,
//! write through a read-only file, or leave a half-written file behind.

use std::fs::{self, File, Permissions};
use std::io::{self, Write};
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::tools::ToolError;
use crate::tools::sandbox::Workspace;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteFile {
    pub path: String,
    pub content: String,
}

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
pub(super) fn existing_permissions(
    target: &Path,
    shown: &str,
) -> Result<Option<Permissions>, ToolError> {
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
pub(super) fn replace_atomically(
    target: &Path,
    bytes: &[u8],
    keep: Option<&Permissions>,
) -> io::Result<()> {
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
pub(super) fn as_if_freshly_created(builder: &mut tempfile::Builder) {
    use std::os::unix::fs::PermissionsExt;
    builder.permissions(Permissions::from_mode(0o666));
}

#[cfg(not(unix))]
pub(super) fn as_if_freshly_created(_builder: &mut tempfile::Builder) {}

/// Makes the rename itself survive a crash. Best effort: not every platform
/// can open a directory, and the new content is already in place.
pub(super) fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}
