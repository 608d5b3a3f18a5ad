//! What the machine senses — its cameras and where it is — for OpenClaw's
//! `camera.list`/`camera.snap`/`camera.clip` and `location.get`, done the
//! way OpenClaw's own Linux node host does them (its `linux-node` plugin):
//! FFmpeg over V4L2, GeoClue's `where-am-i`. Same command lines, same
//! answers, same error texts (`Error: CODE: …`, as its node answers a
//! plugin command's throw), so the gateway's `nodes` tool reads ours as
//! theirs.
//!
//! Both are off unless the node's owner turns them on (`--camera`,
//! `--location`), and offered only on Linux with the program found.
//! What this module must never do: open a device an agent named that is not
//! a camera it listed, read a capture bigger than the gateway can carry,
//! or leave a capture file or a program behind (the one process runner
//! stops each tree; captures live in a private temporary directory that
//! goes with the call).

pub mod camera;
pub mod location;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::ToolError;
use crate::runner::{self, End, Outcome, Spec};

/// A failure as OpenClaw's node host answers one from a plugin command:
/// `INVALID_REQUEST`, the thrown error as JavaScript prints it.
pub fn failure(text: impl std::fmt::Display) -> ToolError {
    ToolError::new("INVALID_REQUEST", format!("Error: {text}"))
}

/// Whether these commands can be offered on this operating system at all
/// (OpenClaw's are Linux only: V4L2 and GeoClue).
pub const SUPPORTED: bool = cfg!(target_os = "linux");

/// `program` on PATH, else the first of `also` that is executable (a
/// mode bit set: the `which` crate takes any file as root's).
pub fn find(program: &str, also: &[&str]) -> Option<PathBuf> {
    if let Ok(found) = which::which(program) {
        return Some(found);
    }
    also.iter()
        .map(PathBuf::from)
        .find(|p| super::binding::is_executable(p))
}

/// A number field as OpenClaw's `asFiniteNumber` reads it: a finite JSON
/// number, nothing else (a numeric string is absent).
fn finite(params: &Value, key: &str) -> Option<f64> {
    params
        .get(key)
        .and_then(Value::as_f64)
        .filter(|n| n.is_finite())
}

/// One run of a sensing program through the one process runner: stdout
/// and stderr apart (OpenClaw words its errors from stderr first), `keep`
/// bytes kept of each, our secrets out of its environment.
pub(in crate::tools) struct Job<'a> {
    /// Whose failure a program that cannot start is.
    code: &'a str,
    program: &'a Path,
    args: Vec<OsString>,
    timeout: Duration,
    pub(in crate::tools) keep: usize,
    pub(in crate::tools) env: &'a [(&'a str, &'a str)],
    tap: Option<runner::Tap>,
}

impl<'a> Job<'a> {
    pub(in crate::tools) fn new(
        code: &'a str,
        program: &'a Path,
        args: Vec<OsString>,
        timeout: Duration,
    ) -> Self {
        Job {
            code,
            program,
            args,
            timeout,
            keep: 64 * 1024,
            env: &[],
            tap: None,
        }
    }

    /// Runs it; the tree is stopped at the timeout or when `stop` resolves.
    pub(in crate::tools) async fn run(
        self,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<Outcome, ToolError> {
        let spec = Spec {
            program: self.program.into(),
            args: self.args,
            cwd: None,
            env: self.env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            env_remove: super::SECRET_VARS,
            env_filter: None,
            timeout: self.timeout,
            grace: Duration::from_millis(500),
            max_output: self.keep,
            split_stderr: true,
            stop_after_json: None,
            tap: self.tap,
        };
        // The program's name only: an error never carries a path of ours.
        let name = self
            .program
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        runner::run(&spec, stop).await.map_err(|e| {
            failure(format!(
                "{}: {name}: {}",
                self.code,
                std::io::Error::from(e.source.kind())
            ))
        })
    }
}

/// OpenClaw's `formatToolError`: stderr (else stdout) with its whitespace
/// collapsed, at most 300 UTF-16 units; `exit N` when both are empty.
fn tool_error(outcome: &Outcome) -> String {
    let text = |c: &runner::Captured| format!("{}{}", c.head, c.tail);
    let stderr = outcome.stderr.as_ref().map(text).unwrap_or_default();
    let stdout = text(&outcome.output);
    let detail = if stderr.trim().is_empty() {
        stdout.trim().to_owned()
    } else {
        stderr.trim().to_owned()
    };
    if detail.is_empty() {
        return format!(
            "exit {}",
            outcome
                .exit_code()
                .map(|c| c.to_string())
                .unwrap_or_else(|| "unknown".into())
        );
    }
    let collapsed = detail.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::tools::js::truncate_utf16(&collapsed, 300).to_owned()
}

/// OpenClaw's `assertToolResult`: a run that timed out or failed is
/// `CODE: command timed out` / `CODE: <what it said>`.
pub(in crate::tools) fn check(outcome: &Outcome, code: &str) -> Result<(), ToolError> {
    if outcome.end == End::TimedOut {
        return Err(failure(format!("{code}: command timed out")));
    }
    if outcome.exit_code() != Some(0) {
        return Err(failure(format!("{code}: {}", tool_error(outcome))));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reads_as_javascript_prints_a_thrown_error() {
        let e = failure("CAMERA_UNAVAILABLE: command timed out");
        assert_eq!(e.code, "INVALID_REQUEST");
        assert_eq!(e.message, "Error: CAMERA_UNAVAILABLE: command timed out");
    }

    #[cfg(unix)]
    #[test]
    fn a_program_not_on_path_is_found_where_its_package_puts_it() {
        let sh = find("sh", &[]).unwrap();
        let sh = sh.to_str().unwrap();
        assert_eq!(
            find("no-such-program-here", &["/nonexistent/x", sh]).as_deref(),
            Some(Path::new(sh))
        );
        // Not executable, or not there: not found.
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        let plain = plain.to_str().unwrap();
        assert_eq!(find("no-such-program-here", &[plain, "/nonexistent"]), None);
    }

    #[test]
    fn numbers_are_json_numbers_only() {
        let p = serde_json::json!({"a": 5, "b": "5", "c": null, "d": 1.5});
        assert_eq!(finite(&p, "a"), Some(5.0));
        assert_eq!(finite(&p, "b"), None);
        assert_eq!(finite(&p, "c"), None);
        assert_eq!(finite(&p, "d"), Some(1.5));
        assert_eq!(finite(&p, "e"), None);
    }

    #[tokio::test]
    async fn a_tool_error_is_stderr_first_collapsed_and_cut_at_300() {
        let sh = find("sh", &[]).unwrap();
        let long = "x ".repeat(400);
        let script = format!("echo out; printf '  bad\\n\\n  news {long}' >&2; exit 3");
        let o = Job::new(
            "X",
            &sh,
            vec!["-c".into(), script.into()],
            Duration::from_secs(5),
        )
        .run(std::future::pending())
        .await
        .unwrap();
        let e = check(&o, "CAMERA_UNAVAILABLE").unwrap_err().message;
        assert!(
            e.starts_with("Error: CAMERA_UNAVAILABLE: bad news x x"),
            "{e}"
        );
        assert_eq!(e.len(), "Error: CAMERA_UNAVAILABLE: ".len() + 300);
        let quiet = Job::new(
            "X",
            &sh,
            vec!["-c".into(), "exit 4".into()],
            Duration::from_secs(5),
        )
        .run(std::future::pending())
        .await
        .unwrap();
        assert_eq!(check(&quiet, "X").unwrap_err().message, "Error: X: exit 4");
        let slow = Job::new(
            "X",
            &sh,
            vec!["-c".into(), "sleep 5".into()],
            Duration::from_millis(200),
        )
        .run(std::future::pending())
        .await
        .unwrap();
        assert_eq!(
            check(&slow, "X").unwrap_err().message,
            "Error: X: command timed out"
        );
    }
}
