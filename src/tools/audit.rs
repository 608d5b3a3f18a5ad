//! The audit log: one JSON line per invocation (time, command, a digest of
//! the arguments, the decision, the outcome, the duration), appended to
//! `audit.jsonl` in the state directory (0600).
//!
//! Arguments are digested, not stored: they may hold file contents or
//! secrets. A log that cannot be written is reported once and never stops
//! an invocation.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use sha2::{Digest, Sha256};

pub struct Audit {
    file: Mutex<Option<std::fs::File>>,
    warned: AtomicBool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry<'a> {
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    pub invoke_id: &'a str,
    pub command: &'a str,
    /// SHA-256 of `paramsJSON`, hex.
    pub params_sha256: String,
    pub decision: String,
    /// `ok`, or `error:<CODE>`.
    pub outcome: String,
    pub duration_ms: u64,
}

impl Audit {
    pub fn open(state_dir: &Path) -> Self {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(state_dir.join("audit.jsonl"));
        if let Err(e) = &file {
            eprintln!("[clawbot_router] audit log unavailable: {e}");
        }
        Self {
            file: Mutex::new(file.ok()),
            warned: AtomicBool::new(false),
        }
    }

    pub fn record(&self, entry: &Entry<'_>) {
        let Ok(mut line) = serde_json::to_vec(entry) else {
            return;
        };
        line.push(b'\n');
        let Ok(mut guard) = self.file.lock() else {
            return;
        };
        let Some(file) = guard.as_mut() else {
            return;
        };
        if let Err(e) = file.write_all(&line)
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            eprintln!("[clawbot_router] cannot write the audit log: {e}");
        }
    }
}

pub fn digest(text: &str) -> String {
    crate::shared::hex::hex(&Sha256::digest(text.as_bytes()))
}
