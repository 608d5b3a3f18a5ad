//! What an agent may learn about this machine and its OpenClaw setup:
//! `system_info`, `read_config` (the user's openclaw.json, secrets
//! redacted) and `validate_config` (OpenClaw's own `config validate`).
//!
//! OpenClaw is run through the one runner with short fixed deadlines; its
//! absence is an answer (`null`, or a clear error), never a failure.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::ToolError;
use crate::router::command;
use crate::runner;

const VERSION_TIMEOUT: Duration = Duration::from_secs(10);
const VALIDATE_TIMEOUT: Duration = Duration::from_secs(60);
/// Config files larger than this are not sent.
const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// The openclaw command (`OPENCLAW_BIN` or PATH), as the router finds it.
fn openclaw() -> Option<Vec<String>> {
    let bin = std::env::var("OPENCLAW_BIN")
        .ok()
        .filter(|s| !s.trim().is_empty());
    command::locate(bin.as_deref(), false, None)
        .ok()
        .filter(|l| l.wsl.is_none())
        .map(|l| l.openclaw)
}

/// Runs `openclaw ARGS` merged, within `timeout`.
async fn run_openclaw(
    words: &[String],
    args: &[&str],
    timeout: Duration,
) -> Option<runner::Outcome> {
    let spec = runner::Spec {
        env_remove: crate::tools::SECRET_VARS,
        env_filter: None,
        program: words.first()?.into(),
        args: words[1..]
            .iter()
            .map(OsString::from)
            .chain(args.iter().map(OsString::from))
            .collect(),
        cwd: None,
        env: vec![("NO_COLOR".into(), "1".into())],
        timeout,
        grace: Duration::from_secs(1),
        max_output: 256 * 1024,
        split_stderr: false,
        stop_after_json: None,
        tap: None,
    };
    runner::run(&spec, std::future::pending()).await.ok()
}

pub async fn system_info(workspace: &Path) -> Value {
    let openclaw = match openclaw() {
        Some(words) => {
            let version = run_openclaw(&words, &["--version"], VERSION_TIMEOUT)
                .await
                .filter(|o| o.exit_code() == Some(0))
                .map(|o| o.output.head.trim().to_owned());
            json!({ "command": shell_words::join(&words), "version": version })
        }
        None => Value::Null,
    };
    let env = |k: &str| std::env::var(k).ok();
    json!({
        "os": std::env::consts::OS,
        "family": std::env::consts::FAMILY,
        "arch": std::env::consts::ARCH,
        "hostname": hostname(),
        "release": kernel_release(),
        "shell": env("SHELL").or_else(|| env("COMSPEC")),
        "path": env("PATH"),
        "home": env("HOME").or_else(|| env("USERPROFILE")),
        "user": user(),
        "cpuCount": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "workspace": workspace,
        "openclaw": openclaw,
        "node": { "name": "clawbot_router", "version": env!("CARGO_PKG_VERSION") },
    })
}

/// OpenClaw's precedence: `OPENCLAW_CONFIG_PATH`, then
/// `$OPENCLAW_STATE_DIR/openclaw.json`, then `~/.openclaw/openclaw.json`.
pub fn config_path() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("OPENCLAW_CONFIG_PATH")
        .or_else(|| env("OPENCLAW_STATE_DIR").map(|d| d.join("openclaw.json")))
        .or_else(|| env("HOME").map(|h| h.join(".openclaw").join("openclaw.json")))
}

/// OpenClaw's state directory (credentials, device identity, sessions) and
/// its config file: readable only through `read_config`, redacted.
pub fn openclaw_private_paths() -> Vec<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let state = env("OPENCLAW_STATE_DIR").or_else(|| env("HOME").map(|h| h.join(".openclaw")));
    state.into_iter().chain(config_path()).collect()
}

pub fn read_config() -> Result<Value, ToolError> {
    let path = config_path().ok_or_else(|| {
        ToolError::new(
            "NOT_FOUND",
            "no home directory to look for openclaw.json in",
        )
    })?;
    let meta = std::fs::metadata(&path).map_err(|_| {
        ToolError::new(
            "NOT_FOUND",
            format!("no OpenClaw config at {}", path.display()),
        )
    })?;
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(ToolError::new(
            "TOO_LARGE",
            format!("{} is {} bytes", path.display(), meta.len()),
        ));
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ToolError::new("IO_ERROR", format!("{}: {e}", path.display())))?;
    Ok(json!({ "path": path, "content": super::redact::config(&text), "redacted": true }))
}

pub async fn validate_config() -> Result<Value, ToolError> {
    let words = openclaw().ok_or_else(|| {
        ToolError::new(
            "NOT_FOUND",
            "openclaw is not installed on this node (nothing to validate with)",
        )
    })?;
    let outcome = run_openclaw(&words, &["config", "validate", "--json"], VALIDATE_TIMEOUT)
        .await
        .ok_or_else(|| ToolError::new("SPAWN_FAILED", "openclaw could not be started"))?;
    let text = outcome
        .output
        .join(|n| format!("[clawbot_router] ... {n} bytes omitted ..."));
    Ok(json!({
        "valid": outcome.exit_code() == Some(0),
        "exitCode": outcome.exit_code(),
        "timedOut": outcome.end == runner::End::TimedOut,
        "configPath": config_path(),
        "report": serde_json::from_str::<Value>(text.trim()).unwrap_or(Value::String(text)),
    }))
}

/// The diagnostic context of a doctor session (seed 000 §4,
/// `doctor_diagnosis_request`): what OpenClaw is installed, its config
/// (secrets redacted), its static checks, its recent errors, and this
/// machine. Every part that cannot be had says why instead.
pub async fn doctor_context(instance_id: &str, question: &str) -> Value {
    let words = openclaw();
    let (version, path) = match &words {
        None => ("not_installed".to_owned(), Value::Null),
        Some(words) => {
            let version = run_openclaw(words, &["--version"], VERSION_TIMEOUT)
                .await
                .filter(|o| o.exit_code() == Some(0))
                .map(|o| o.output.join(|_| String::new()))
                .and_then(|text| {
                    text.lines()
                        .find(|l| !l.trim().is_empty())
                        .map(|l| l.trim().to_owned())
                })
                .unwrap_or_else(|| "unknown".to_owned());
            let path = which::which(&words[0])
                .map(|p| Value::from(p.display().to_string()))
                .unwrap_or(Value::Null);
            (version, path)
        }
    };
    let config = match read_config() {
        Ok(v) => v["content"].clone(),
        Err(e) => Value::from(format!("{}: {}", e.code, e.message)),
    };
    let report = match validate_config().await {
        Ok(v) => v,
        Err(e) => json!({"error": format!("{}: {}", e.code, e.message)}),
    };
    let env = |k: &str| std::env::var(k).ok();
    json!({
        "type": "doctor_diagnosis_request",
        "question": question,
        "target": {
            "instanceType": "local",
            "instanceId": instance_id,
            "hostname": hostname(),
        },
        "context": {
            "openclawVersion": version,
            "openclawPath": path,
            "configContent": config,
            "doctorReport": report,
            "errorLog": error_log(words.as_deref()).await,
            "systemInfo": {
                "os": os_name(),
                "arch": std::env::consts::ARCH,
                "shell": env("SHELL").map(|s| s.rsplit('/').next().unwrap_or(&s).to_owned()),
                "path": env("PATH"),
                "homeDir": env("HOME"),
            },
        },
    })
}

/// Lines of the gateway's log a doctor gets.
const ERROR_LOG_LINES: usize = 50;
/// Only this much of the log's end is read.
const ERROR_LOG_TAIL_BYTES: u64 = 1024 * 1024;

/// The last warning and error lines of OpenClaw's log (the file the config
/// names under `logging.file`, else today's `/tmp/openclaw/openclaw-*.log`),
/// or the last lines if none look like errors.
async fn error_log(words: Option<&[String]>) -> String {
    let configured = match words {
        Some(words) => run_openclaw(words, &["config", "get", "logging.file"], VERSION_TIMEOUT)
            .await
            .filter(|o| o.exit_code() == Some(0))
            .map(|o| {
                o.output
                    .join(|_| String::new())
                    .trim()
                    .trim_matches('"')
                    .to_owned()
            })
            .filter(|p| !p.is_empty() && !p.contains('\n'))
            .map(PathBuf::from),
        None => None,
    };
    let path = configured.or_else(newest_default_log);
    let Some(path) = path else {
        return "no OpenClaw log file found".into();
    };
    match tail(&path, ERROR_LOG_TAIL_BYTES) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let errors: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| {
                    let l = l.to_ascii_lowercase();
                    l.contains("error") || l.contains("warn") || l.contains("fatal")
                })
                .collect();
            let pick = if errors.is_empty() { &lines } else { &errors };
            let start = pick.len().saturating_sub(ERROR_LOG_LINES);
            super::redact::config(&pick[start..].join("\n"))
        }
        Err(e) => format!("{}: {e}", path.display()),
    }
}

fn newest_default_log() -> Option<PathBuf> {
    std::fs::read_dir("/tmp/openclaw")
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("openclaw-") && name.ends_with(".log")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
}

/// The last `limit` bytes of a file, as text.
fn tail(path: &std::path::Path, limit: u64) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(limit)))?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn os_name() -> String {
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_owned())
        });
    pretty.unwrap_or_else(|| std::env::consts::OS.to_owned())
}

pub fn hostname() -> Option<String> {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most buf.len() bytes into buf.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc != 0 {
            return None;
        }
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        Some(String::from_utf8_lossy(&buf[..end]).into_owned())
    }
    #[cfg(not(unix))]
    {
        std::env::var("COMPUTERNAME").ok()
    }
}

/// The user this process runs as. A service (systemd, launchd, a
/// container) often has no `USER` in its environment — that is why this
/// asks the system for the effective uid's name first. Falls back to the
/// environment's `USER`, `LOGNAME` or `USERNAME`, then to `uid N` (a user
/// the password database does not know); `None` only where none exists.
pub fn user() -> Option<String> {
    #[cfg(unix)]
    let (name, uid) = {
        // SAFETY: geteuid cannot fail and touches no memory of ours.
        let uid = unsafe { libc::geteuid() };
        (passwd_name(uid), Some(u64::from(uid)))
    };
    #[cfg(not(unix))]
    let (name, uid) = (None, None);
    pick_user(name, |k| std::env::var(k).ok(), uid)
}

fn pick_user(
    name: Option<String>,
    env: impl Fn(&str) -> Option<String>,
    uid: Option<u64>,
) -> Option<String> {
    let named = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    named(name)
        .or_else(|| named(env("USER")))
        .or_else(|| named(env("LOGNAME")))
        .or_else(|| named(env("USERNAME")))
        .or_else(|| uid.map(|u| format!("uid {u}")))
}

#[cfg(unix)]
fn passwd_name(uid: libc::uid_t) -> Option<String> {
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value for getpwuid_r to fill.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to memory we own, sized as passed; on
    // success `found` points at `entry`, whose strings live in `buf`.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut entry,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() || entry.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name is a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(entry.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

fn kernel_release() -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_owned())
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_s_name_wins_over_the_environment() {
        let env = |_: &str| Some("stale".to_owned());
        assert_eq!(
            pick_user(Some("alice".into()), env, Some(1000)).as_deref(),
            Some("alice")
        );
    }

    #[test]
    fn without_a_passwd_entry_the_environment_answers_in_order() {
        let env = |k: &str| (k == "LOGNAME").then(|| "bob".to_owned());
        assert_eq!(pick_user(None, env, Some(1000)).as_deref(), Some("bob"));
        let empty_user = |k: &str| Some(if k == "USER" { " " } else { "carol" }.to_owned());
        assert_eq!(pick_user(None, empty_user, None).as_deref(), Some("carol"));
    }

    #[test]
    fn a_user_nobody_names_is_its_uid() {
        assert_eq!(
            pick_user(None, |_| None, Some(4242)).as_deref(),
            Some("uid 4242")
        );
        assert_eq!(pick_user(None, |_| None, None), None);
    }

    #[cfg(unix)]
    #[test]
    fn the_user_is_who_this_process_runs_as_even_without_user_set() {
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", "id -un"])
            .env_remove("USER")
            .env_remove("LOGNAME")
            .output()
            .unwrap();
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(passwd_name(uid).as_deref(), Some(id.as_str()));
        assert_eq!(user().as_deref(), Some(id.as_str()));
    }
}
