//! "Allow always": the answers a human gave once for good, kept in the
//! state directory (`approvals.json`, private) and read back at start.
//!
//! Owns that file and what a remembered answer is bound to (who was
//! answered, the command, for a program its executable, argv, directory
//! and environment). Must never decide a call, nor let one asker's answer
//! stand for another's.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::Exec;
use crate::shared::paths::write_private;

const APPROVALS_FILE: &str = "approvals.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Remembered {
    pub(super) command: String,
    /// Who was answered "always" (none: OpenClaw, as before links
    /// existed): one service's standing approval is not another's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) asker: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) exec: Option<Exec>,
}

/// The remembered answers, as read from the state directory.
pub(super) struct Always {
    path: PathBuf,
    remembered: Mutex<Vec<Remembered>>,
}

impl Always {
    /// Reads `approvals.json` in `state_dir`; a missing or unreadable file
    /// remembers nothing.
    pub(super) fn open(state_dir: &Path) -> Self {
        let path = state_dir.join(APPROVALS_FILE);
        let remembered = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Self {
            path,
            remembered: Mutex::new(remembered),
        }
    }

    pub(super) fn contains(&self, key: &Remembered) -> bool {
        self.remembered
            .lock()
            .map(|r| r.contains(key))
            .unwrap_or(false)
    }

    pub(super) fn add(&self, key: Remembered) {
        let Ok(mut remembered) = self.remembered.lock() else {
            return;
        };
        remembered.push(key);
        if let Err(e) = save(&self.path, &remembered) {
            eprintln!("[clawbot_router] cannot save the approval: {e}");
        }
    }
}

fn save(path: &Path, remembered: &[Remembered]) -> io::Result<()> {
    write_private(path, &serde_json::to_vec_pretty(remembered)?)
}
