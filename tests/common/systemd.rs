//! A machine with a fake systemd (tests/fixtures/fake-systemd): its
//! manager runs for the test's lifetime; `clawbot_router node …` finds the
//! fake `systemctl` and `loginctl` first on PATH.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use super::gateway::TOKEN;

pub const UNIT: &str = "clawbot-router-node.service";

/// A home with a fake systemd (its manager running), a state directory
/// and a workspace.
pub struct FakeSystemd {
    pub dir: tempfile::TempDir,
    manager: std::process::Child,
}

pub fn fakes() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-systemd")
}

impl FakeSystemd {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let manager = Command::new(fakes().join("systemctl"))
            .arg("--manager")
            .env("FAKE_SYSTEMD_DIR", dir.path().join("systemd"))
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("the fake systemd manager (python3)");
        Self { dir, manager }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn unit(&self) -> PathBuf {
        self.path("home/.config/systemd/user").join(UNIT)
    }

    pub fn env_file(&self) -> PathBuf {
        self.path("state/node.env")
    }

    pub fn systemd_down(&self) {
        std::fs::create_dir_all(self.path("systemd")).unwrap();
        std::fs::write(self.path("systemd/down"), "").unwrap();
    }

    pub fn calls(&self) -> String {
        std::fs::read_to_string(self.path("systemd/calls")).unwrap_or_default()
    }

    pub fn journal(&self) -> String {
        std::fs::read_to_string(self.path("systemd/journal")).unwrap_or_default()
    }

    /// `clawbot_router node ARGS` as the user of this machine runs it.
    pub fn node(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let path = format!(
            "{}:{}",
            fakes().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = super::router();
        cmd.arg("node")
            .args(args)
            .env_remove("OPENCLAW_GATEWAY_TOKEN")
            .env_remove("OPENCLAW_GATEWAY_URL")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("CLAWBOT_ROUTER_SETUP_CODE")
            .env("PATH", path)
            .env("HOME", self.path("home"))
            .env("FAKE_SYSTEMD_DIR", self.path("systemd"))
            .current_dir(self.path("ws"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// `node install` for `url` with the test token in the environment.
    pub fn install(&self, url: &str, extra: &[&str]) -> Output {
        let state = self.path("state");
        let mut args = vec![
            "install",
            "--gateway",
            url,
            "--state-dir",
            state.to_str().unwrap(),
            "--display-name",
            "svc \"node\" $HOME",
            "--approval",
            "allow",
        ];
        args.extend_from_slice(extra);
        self.node(&args, &[("OPENCLAW_GATEWAY_TOKEN", TOKEN)])
    }

    pub fn status(&self) -> (Value, i32) {
        let out = self.node(&["status", "--json"], &[]);
        let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "status --json: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (json, out.status.code().unwrap())
    }

    pub fn service_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.path("systemd/pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for FakeSystemd {
    fn drop(&mut self) {
        if let Some(pid) = self.service_pid() {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        let _ = self.manager.kill();
        let _ = self.manager.wait();
    }
}
