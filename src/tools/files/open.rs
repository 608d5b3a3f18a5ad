//! Opening what a path resolved to, and making sure what is open is that:
//! every check after a resolution is made on the descriptor (fstat), never
//! on the path again, so a file swapped in between is seen.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `real` to read it or its metadata: never through a final symlink,
/// never waiting on a FIFO's writer (O_NONBLOCK; a FIFO is refused by type
/// afterwards), a directory only when `dir`.
pub fn for_reading(real: &Path, dir: bool) -> io::Result<File> {
    let mut flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    if dir {
        flags |= libc::O_DIRECTORY;
    }
    OpenOptions::new().read(true).custom_flags(flags).open(real)
}

/// Opens an existing file to overwrite it in place (its inode kept: the
/// binding the gateway authorised stays true): never through a symlink,
/// never waiting on a FIFO.
pub fn for_overwrite(real: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(real)
}

/// Whether the open `file` is the one at `real` now: on Linux by the path
/// the kernel holds for the descriptor (a parent swapped for a symlink
/// between resolution and open shows as another path); elsewhere by
/// comparing its identity with what `real` names.
pub fn is_at(file: &File, real: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let held = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()));
        held.is_ok_and(|held| held == real)
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), std::fs::symlink_metadata(real)) {
            (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
            _ => false,
        }
    }
}

/// The path through which a child process can enter the open directory
/// `dir` itself (not whatever its name leads to by then): on Linux its
/// descriptor's entry, which the child inherits until it executes.
#[cfg(target_os = "linux")]
pub fn entry_of(dir: &File) -> std::path::PathBuf {
    use std::os::fd::AsRawFd;
    format!("/proc/self/fd/{}", dir.as_raw_fd()).into()
}
