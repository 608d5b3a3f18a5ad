//! One node per state directory. Two nodes sharing one would connect with
//! the same device identity: the gateway keeps only the newer session, so
//! the older node would say "connected" while every invocation went to the
//! other — whose policy, approvals and audit log are not the ones its user
//! is watching. An advisory lock on `node.lock`, held for the node's
//! lifetime (the operating system drops it when the process ends, however
//! it ends), refuses the second node and names the first.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

const FILE: &str = "node.lock";
/// The holder's pid, apart from the locked file: Windows' locks are
/// mandatory, so the locked file itself could not be read by the second.
const PID_FILE: &str = "node.pid";

/// The held lock; dropping it (or exiting) releases it.
pub struct StateLock {
    _file: Option<File>,
}

impl StateLock {
    /// Takes the directory's lock, or says who holds it. A filesystem that
    /// cannot lock at all (NFS without lockd) gets a warning, not a refusal.
    pub fn acquire(dir: &Path) -> Result<Self, String> {
        let path = dir.join(FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(dir.join(PID_FILE))
                    .ok()
                    .and_then(|t| t.trim().parse::<u32>().ok())
                    .map(|pid| format!("pid {pid}"))
                    .unwrap_or_else(|| "another process".to_owned());
                return Err(format!(
                    "another clawbot_router node ({holder}) is already using the state directory {}: stop it, or give this node a state directory of its own with --state-dir DIR (each directory is one device on the gateway)",
                    dir.display()
                ));
            }
            Err(TryLockError::Error(e)) => {
                crate::shared::log::warn(&format!(
                    "cannot lock {} ({e}): nothing stops a second node from sharing this state directory",
                    path.display()
                ));
                return Ok(Self { _file: None });
            }
        }
        let _ = std::fs::write(dir.join(PID_FILE), format!("{}\n", std::process::id()));
        Ok(Self { _file: Some(file) })
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
