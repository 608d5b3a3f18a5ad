//! One node per state directory. Two nodes sharing one would connect with
//! the same device identity: the gateway keeps only the newer session, so
//! the older node would say "connected" while every invocation went to the
//! other — whose policy, approvals and audit log are not the ones its user
//! is watching. An advisory lock on `node.lock`, held for the node's
//! lifetime (the operating system drops it when the process ends, however
//! it ends), refuses the second node and names the first.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

const FILE: &str = "node.lock";

/// The held lock; dropping it (or exiting) releases it.
pub struct StateLock {
    _file: File,
}

impl StateLock {
    /// Takes the directory's lock, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<Self, String> {
        let path = dir.join(FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = match holder.trim().parse::<u32>() {
                    Ok(pid) => format!("pid {pid}"),
                    Err(_) => "another process".to_owned(),
                };
                return Err(format!(
                    "another clawbot_router node ({holder}) is already using the state directory {}: stop it, or give this node a state directory of its own with --state-dir DIR (each directory is one device on the gateway)",
                    dir.display()
                ));
            }
            Err(TryLockError::Error(e)) => {
                return Err(format!("cannot lock {}: {e}", path.display()));
            }
        }
        // The holder's pid, for the message above.
        let _ = file.set_len(0);
        let _ = file.seek(SeekFrom::Start(0));
        let _ = writeln!(file, "{}", std::process::id());
        let _ = file.flush();
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_first_holder_and_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let first = StateLock::acquire(dir.path()).unwrap();
        let refused = StateLock::acquire(dir.path()).err().unwrap();
        assert!(
            refused.contains(&format!("(pid {})", std::process::id())),
            "{refused}"
        );
        assert!(refused.contains("--state-dir"), "{refused}");
        drop(first);
        StateLock::acquire(dir.path()).expect("free again once the holder is gone");
    }
}
