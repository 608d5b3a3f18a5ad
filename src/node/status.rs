//! What the running node says about itself, for `clawbot_router node
//! status`: `node.status.json` in its state directory, rewritten (whole,
//! atomically) when it connects, when its commands are approved, when the
//! link drops and when it stops. A service manager knows whether the
//! process runs; only the node knows whether it is connected.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

const FILE: &str = "node.status.json";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub pid: u32,
    pub gateway: String,
    pub connected: bool,
    /// The gateway let this node's commands run.
    pub approved: bool,
    /// When `connected` last changed (ms since the epoch).
    pub since_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub stopped: bool,
}

/// The node's side: keeps the file current.
pub struct Beacon {
    path: PathBuf,
    status: Status,
}

impl Beacon {
    pub fn new(state_dir: &Path, gateway: &str) -> Self {
        let beacon = Self {
            path: state_dir.join(FILE),
            status: Status {
                pid: std::process::id(),
                gateway: gateway.to_owned(),
                since_ms: crate::shared::clock::now_ms(),
                ..Status::default()
            },
        };
        beacon.write();
        beacon
    }

    pub fn connected(&mut self) {
        self.status.connected = true;
        self.status.approved = false;
        self.status.last_error = None;
        self.status.since_ms = crate::shared::clock::now_ms();
        self.write();
    }

    pub fn approved(&mut self) {
        if !self.status.approved {
            self.status.approved = true;
            self.write();
        }
    }

    pub fn lost(&mut self, why: &str) {
        self.status.connected = false;
        self.status.approved = false;
        self.status.last_error = Some(why.to_owned());
        self.status.since_ms = crate::shared::clock::now_ms();
        self.write();
    }

    fn stopped(&mut self) {
        self.status.connected = false;
        self.status.approved = false;
        self.status.stopped = true;
        self.status.since_ms = crate::shared::clock::now_ms();
        self.write();
    }

    /// Best effort: a status file that cannot be written never stops the
    /// node.
    fn write(&self) {
        if let Ok(bytes) = serde_json::to_vec_pretty(&self.status) {
            let _ = crate::shared::paths::write_private(&self.path, &bytes);
        }
    }
}

/// The last status the node in `state_dir` wrote, if its process is still
/// the one that wrote it (a node killed outright leaves a stale file).
pub fn read(state_dir: &Path) -> Option<Status> {
    let text = std::fs::read_to_string(state_dir.join(FILE)).ok()?;
    let status: Status = serde_json::from_str(&text).ok()?;
    Some(status)
}

/// However the node ends, the file says it stopped.
impl Drop for Beacon {
    fn drop(&mut self) {
        self.stopped();
    }
}

/// Whether a process with this pid exists.
pub fn alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        // Signal 0 checks existence; EPERM means it exists as another user.
        let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(windows)]
    {
        use std::ffi::c_void;
        #[link(name = "kernel32")]
        unsafe extern "system" {
            fn OpenProcess(access: u32, inherit: i32, pid: u32) -> *mut c_void;
            fn GetExitCodeProcess(process: *mut c_void, code: *mut u32) -> i32;
            fn CloseHandle(handle: *mut c_void) -> i32;
            fn GetLastError() -> u32;
        }
        const ERROR_ACCESS_DENIED: u32 = 5;
        const PROCESS_QUERY_LIMITED_INFORMATION: u32 = 0x1000;
        const STILL_ACTIVE: u32 = 259;
        // SAFETY: plain Win32 calls on a handle this block opens and closes.
        unsafe {
            let process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
            if process.is_null() {
                // Access denied: it exists (as unix's EPERM).
                return GetLastError() == ERROR_ACCESS_DENIED;
            }
            let mut code = 0u32;
            let ok = GetExitCodeProcess(process, &mut code);
            CloseHandle(process);
            ok != 0 && code == STILL_ACTIVE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_follows_the_node() {
        let dir = tempfile::tempdir().unwrap();
        let mut beacon = Beacon::new(dir.path(), "ws://127.0.0.1:18789");
        let first = read(dir.path()).unwrap();
        assert_eq!(first.pid, std::process::id());
        assert!(!first.connected);
        beacon.connected();
        beacon.approved();
        let now = read(dir.path()).unwrap();
        assert!(now.connected && now.approved);
        beacon.lost("the gateway closed the connection");
        let lost = read(dir.path()).unwrap();
        assert!(!lost.connected);
        assert_eq!(
            lost.last_error.as_deref(),
            Some("the gateway closed the connection")
        );
        drop(beacon);
        assert!(read(dir.path()).unwrap().stopped);
        assert!(alive(std::process::id()));
    }
}
