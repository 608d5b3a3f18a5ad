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
        "user": env("USER").or_else(|| env("USERNAME")),
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
    Ok(json!({ "path": path, "content": redact(&text), "redacted": true }))
}

/// Key names whose values never leave the machine (over-redacting is the
/// safe side: `sessionKey` goes too).
fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "token",
        "secret",
        "password",
        "passwd",
        "authorization",
        "bearer",
        "credential",
        "cookie",
        "webhook",
        "dsn",
    ]
    .iter()
    .any(|s| k.contains(s))
        || k.ends_with("key")
        || k.ends_with("keys")
}

/// Replaces the values of secret keys in JSON or JSON5 text. The config is
/// JSON5 (comments, unquoted keys, single quotes), so it is scanned rather
/// than parsed, and the layout the agent reads stays the user's own.
fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(comment) = comment_len(rest) {
            out.push_str(&rest[..comment]);
            rest = &rest[comment..];
            continue;
        }
        let token = if c == '"' || c == '\'' {
            string_len(rest)
        } else if c.is_alphabetic() || c == '_' || c == '$' {
            rest.find(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == '$'))
                .unwrap_or(rest.len())
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        };
        let (word, after) = rest.split_at(token);
        out.push_str(word);
        rest = after;
        let gap = rest.len() - rest.trim_start().len();
        if !rest[gap..].starts_with(':') {
            continue;
        }
        let key = word.trim_matches(|q| q == '"' || q == '\'');
        out.push_str(&rest[..=gap]);
        rest = &rest[gap + 1..];
        let space = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..space]);
        rest = &rest[space..];
        if !is_secret_key(key) || rest.is_empty() {
            continue;
        }
        let value = if rest.starts_with(['"', '\'']) {
            string_len(rest)
        } else if rest.starts_with(['{', '[']) {
            nested_len(rest)
        } else {
            rest.find([',', '}', ']', '\n', '\r']).unwrap_or(rest.len())
        };
        out.push_str("\"<redacted>\"");
        rest = rest[value..].trim_start_matches([' ', '\t']);
    }
    out
}

/// Length of the `//` or `/* */` comment `text` starts with.
fn comment_len(text: &str) -> Option<usize> {
    if text.starts_with("//") {
        return Some(text.find('\n').unwrap_or(text.len()));
    }
    text.strip_prefix("/*")
        .map(|body| body.find("*/").map(|i| i + 4).unwrap_or(text.len()))
}

/// Length of the object or array `text` starts with (strings and comments
/// inside skipped whole; to the end if unbalanced).
fn nested_len(text: &str) -> usize {
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if let Some(comment) = comment_len(rest) {
            i += comment;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        match c {
            '"' | '\'' => {
                i += string_len(rest);
                continue;
            }
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += c.len_utf8();
    }
    text.len()
}

/// Length of the quoted string `text` starts with (to the end if unclosed).
fn string_len(text: &str) -> usize {
    let quote = text.as_bytes()[0];
    let mut escaped = false;
    for (i, b) in text.bytes().enumerate().skip(1) {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            _ if b == quote => return i + 1,
            _ => {}
        }
    }
    text.len()
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
            redact(&pick[start..].join("\n"))
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
    fn secrets_are_redacted_and_layout_kept() {
        let config = r#"{
  // my gateway
  "gateway": { "auth": { "mode": "token", "token": "s3cr3t" } },
  models: {
    apiKey: 'sk-live-123',
    "baseUrl": "http://127.0.0.1:18555/v1",
  },
}"#;
        let out = redact(config);
        assert!(!out.contains("sk-live-123"));
        assert!(out.contains("apiKey: \"<redacted>\","), "{out}");
        assert!(out.contains("\"baseUrl\": \"http://127.0.0.1:18555/v1\","));
        assert!(out.contains("// my gateway"));
        assert_eq!(out.lines().count(), config.lines().count());
    }

    #[test]
    fn secrets_on_one_line_objects_are_not_missed() {
        // Values inside inline objects sit after the first colon: the whole
        // line must be treated, not only its first key.
        let out = redact(r#"  "gateway": { "auth": { "mode": "token", "token": "s3cr3t" } },"#);
        assert!(!out.contains("s3cr3t"), "{out}");
        assert!(out.contains(r#""mode": "token""#), "{out}");
    }

    #[test]
    fn whole_arrays_objects_and_auth_headers_are_redacted() {
        let out = redact(
            r#"{ "apiKeys": ["sk-1", "sk-2"], headers: { Authorization: "Bearer sk-3" }, "credentials": { "user": "u", "pass": "p" }, "webhookUrl": "https://x/hook?token=t", "port": 18789 }"#,
        );
        for secret in ["sk-1", "sk-2", "sk-3", "\"pass\"", "hook?token"] {
            assert!(!out.contains(secret), "{secret} leaked: {out}");
        }
        assert!(out.contains("\"port\": 18789"), "{out}");
    }

    #[test]
    fn bare_values_and_comments() {
        let out = redact("{ password: hunter2, // token: \"kept in a comment\"\n port: 1 }");
        assert!(!out.contains("hunter2"), "{out}");
        assert!(out.contains("port: 1"), "{out}");
        assert!(out.contains("kept in a comment"), "{out}");
    }
}
