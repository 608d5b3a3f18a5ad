//! Where our state lives, and files only their owner may read.

use std::io::{self, Write};
use std::path::Path;

/// `$XDG_STATE_HOME/clawbot_router`, else `~/.local/state/clawbot_router`;
/// on Windows `%LOCALAPPDATA%\\clawbot_router` (never the temp directory,
/// which cleanup tools empty: the device identity lives here).
pub fn default_state_dir() -> std::path::PathBuf {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|d| !d.is_empty())
            .map(std::path::PathBuf::from)
    };
    let base = if cfg!(windows) {
        var("LOCALAPPDATA").or_else(|| var("USERPROFILE").map(|h| h.join("AppData").join("Local")))
    } else {
        var("XDG_STATE_HOME").or_else(|| var("HOME").map(|h| h.join(".local").join("state")))
    };
    base.unwrap_or_else(std::env::temp_dir)
        .join("clawbot_router")
}

/// Creates the directory (0700) if needed and writes `bytes` to `path`
/// (0600) atomically.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    private_file(path, bytes, true)
}

/// As [`write_private`], but never over an existing file (AlreadyExists).
pub fn write_new_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    private_file(path, bytes, false)
}

fn private_file(path: &Path, bytes: &[u8], overwrite: bool) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let mut file = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    if overwrite {
        file.persist(path).map_err(|e| e.error)?;
    } else {
        file.persist_noclobber(path).map_err(|e| e.error)?;
    }
    Ok(())
}

/// Creates `dir` and its missing parents, 0700 (an existing one is made
/// 0700 too).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    // A directory that already existed keeps whatever mode it had.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}
