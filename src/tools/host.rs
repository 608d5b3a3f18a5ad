//! The desktop-host commands OpenClaw's own node host declares on Linux,
//! with its shapes, kept inside this node's rules: `fs.listDir` lists
//! directories in the workspace (never the protected state), `terminal.upload`
//! writes a file into the workspace's `uploads/` (size-capped, atomic, never
//! over another file), and `system.notify` shows a desktop notification
//! through `notify-send` (declared only where it exists).

use std::io::Write;
use std::time::Duration;

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ToolError;
use super::sandbox::Workspace;

/// `terminal.upload`'s cap, as OpenClaw's node host has it.
pub const MAX_UPLOAD: usize = 16 * 1024 * 1024;
/// Where uploads land, inside the workspace.
pub const UPLOAD_DIR: &str = "uploads";
const MAX_DIR_ENTRIES: usize = 5_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListDir {
    #[serde(default)]
    path: Option<String>,
}

/// `fs.listDir {path?}` → `{path, parent?, home, entries: [{name, path,
/// hidden?}]}`: directories (and links to directories) only, visible ones
/// first, each group by name. The workspace stands where OpenClaw has the
/// home directory: the default, and the top (`parent` is left out there).
pub fn list_dir(ws: &Workspace, p: ListDir) -> Result<Value, ToolError> {
    let sent = p
        .path
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(".");
    let dir = ws.resolve_existing(sent)?;
    if !dir.is_dir() {
        return Err(ToolError::new(
            "NOT_A_DIRECTORY",
            format!("{sent:?} is not a directory"),
        ));
    }
    let mut entries = Vec::new();
    let mut truncated = false;
    for entry in std::fs::read_dir(&dir).map_err(|e| ToolError::from_io(sent, &e))? {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        // Following a link: it counts when it leads to a directory the
        // workspace holds (and is not the node's own state).
        let Ok(real) = std::fs::canonicalize(&path) else {
            continue;
        };
        if !real.is_dir() || !real.starts_with(ws.root()) || ws.is_protected(&real) {
            continue;
        }
        if entries.len() >= MAX_DIR_ENTRIES {
            truncated = true;
            break;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.push((name.starts_with('.'), name, path));
    }
    entries.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let entries: Vec<Value> = entries
        .into_iter()
        .map(|(hidden, name, path)| {
            let mut e = json!({"name": name, "path": path});
            if hidden {
                e["hidden"] = json!(true);
            }
            e
        })
        .collect();
    let mut result = json!({"path": dir, "home": ws.root(), "entries": entries});
    if dir != ws.root()
        && let Some(parent) = dir.parent()
    {
        result["parent"] = json!(parent);
    }
    if truncated {
        result["truncated"] = json!(true);
    }
    Ok(result)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Upload {
    pub name: String,
    pub content_base64: String,
}

impl Upload {
    /// The name as it will be written: its last component, nothing that
    /// could climb out or hide.
    pub fn file_name(&self) -> Result<String, ToolError> {
        let last = self.name.rsplit(['/', '\\']).next().unwrap_or("");
        let clean: String = last
            .chars()
            .map(|c| if c.is_control() { '_' } else { c })
            .collect();
        let clean = clean.trim().trim_start_matches('.').to_owned();
        if clean.is_empty() || clean.len() > 255 {
            return Err(ToolError::new(
                "INVALID_PARAMS",
                "name must be a file name (1 to 255 bytes, not only dots)",
            ));
        }
        Ok(clean)
    }

    /// The decoded bytes: canonical, padded base64 within the cap.
    pub fn bytes(&self) -> Result<Vec<u8>, ToolError> {
        if self.content_base64.len() > MAX_UPLOAD / 3 * 4 + 4 {
            return Err(too_large());
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.content_base64.as_bytes())
            .map_err(|e| {
                ToolError::new(
                    "INVALID_PARAMS",
                    format!("contentBase64 is not base64: {e}"),
                )
            })?;
        if bytes.len() > MAX_UPLOAD {
            return Err(too_large());
        }
        Ok(bytes)
    }
}

fn too_large() -> ToolError {
    ToolError::new(
        "PAYLOAD_TOO_LARGE",
        format!("an upload is at most {} MiB", MAX_UPLOAD >> 20),
    )
}

/// `terminal.upload {name, contentBase64}` → `{path, size}`: the file is
/// written whole under a temporary name and then given its own (`name`,
/// or `name-1`, `name-2`, … when taken), so nothing is ever half there or
/// replaced.
pub fn upload(ws: &Workspace, p: Upload) -> Result<Value, ToolError> {
    let name = p.file_name()?;
    let bytes = p.bytes()?;
    let dir = ws.root().join(UPLOAD_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| ToolError::from_io(UPLOAD_DIR, &e))?;
    let dir = ws.resolve_existing(UPLOAD_DIR)?;
    // One upload at a time from the quota check to the file in place:
    // two at once must not both fit the last room.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    within_quota(&dir, bytes.len() as u64)?;
    let mut file = tempfile::Builder::new()
        .prefix(".upload-")
        .tempfile_in(&dir)
        .map_err(|e| ToolError::from_io(UPLOAD_DIR, &e))?;
    file.write_all(&bytes)
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| ToolError::from_io(&name, &e))?;
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem.to_owned(), format!(".{ext}")),
        _ => (name.clone(), String::new()),
    };
    for n in 0..1000 {
        let candidate = if n == 0 {
            name.clone()
        } else {
            format!("{stem}-{n}{ext}")
        };
        let target = dir.join(&candidate);
        match file.persist_noclobber(&target) {
            Ok(_) => return Ok(json!({"path": target, "size": bytes.len()})),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => file = e.file,
            Err(e) => return Err(ToolError::from_io(&candidate, &e.error)),
        }
    }
    Err(ToolError::new(
        "IO_ERROR",
        format!("uploads/ already holds {name} and 999 more like it"),
    ))
}

/// What `uploads/` may hold in all: an agent that uploads in a loop must
/// not fill the disk (OpenClaw's staging area has such limits too).
const UPLOADS_TOTAL: u64 = 256 << 20;
const UPLOADS_FILES: usize = 1000;

fn within_quota(dir: &std::path::Path, adding: u64) -> Result<(), ToolError> {
    let mut files = 0;
    let mut total = 0u64;
    for entry in std::fs::read_dir(dir).map_err(|e| ToolError::from_io(UPLOAD_DIR, &e))? {
        let Ok(meta) = entry.and_then(|e| e.metadata()) else {
            continue;
        };
        if meta.is_file() {
            files += 1;
            total += meta.len();
        }
    }
    if files >= UPLOADS_FILES || total + adding > UPLOADS_TOTAL {
        return Err(ToolError::new(
            "QUOTA_EXCEEDED",
            format!(
                "uploads/ holds {files} files, {} MiB; with this one it would pass its limit of {} MiB and {UPLOADS_FILES} files: remove some first",
                total >> 20,
                UPLOADS_TOTAL >> 20
            ),
        ));
    }
    Ok(())
}

/// Whether the machine can show a notification (`notify-send` on PATH).
pub fn can_notify() -> bool {
    which::which("notify-send").is_ok()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notify {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    priority: Option<String>,
}

/// `system.notify {title?, body?, priority?}` → `{ok: true}` through
/// `notify-send --urgency low|normal|critical` (the one process runner).
pub async fn notify(p: Notify) -> Result<Value, ToolError> {
    let urgency = match p.priority.as_deref() {
        None | Some("normal" | "default" | "active") => "normal",
        Some("low" | "passive") => "low",
        Some("high" | "critical" | "timeSensitive" | "time-sensitive") => "critical",
        Some(other) => {
            return Err(ToolError::new(
                "INVALID_PARAMS",
                format!("priority {other:?} is not low, normal or critical"),
            ));
        }
    };
    let title = p.title.unwrap_or_else(|| "OpenClaw".into());
    let Ok(program) = which::which("notify-send") else {
        return Err(ToolError::new(
            "UNAVAILABLE",
            "notify-send is not installed on this node",
        ));
    };
    let mut args = vec![
        "--urgency".into(),
        urgency.into(),
        "--".into(),
        title.into(),
    ];
    if let Some(body) = p.body {
        args.push(body.into());
    }
    let spec = crate::runner::Spec {
        env_remove: super::SECRET_VARS,
        env_filter: None,
        program: program.into(),
        args,
        cwd: None,
        env: Vec::new(),
        timeout: Duration::from_secs(10),
        grace: Duration::from_secs(1),
        max_output: 4096,
        split_stderr: false,
        stop_after_json: None,
        tap: None,
    };
    let outcome = crate::runner::run(&spec, std::future::pending())
        .await
        .map_err(|e| ToolError::new("IO_ERROR", format!("notify-send: {}", e.source)))?;
    match outcome.exit_code() {
        Some(0) => Ok(json!({"ok": true})),
        code => Err(ToolError::new(
            "IO_ERROR",
            format!(
                "notify-send failed ({}): {}",
                code.map(|c| format!("exit {c}"))
                    .unwrap_or_else(|| "killed".into()),
                outcome.output.join(|_| String::new()).trim()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        (dir, ws)
    }

    #[test]
    fn list_dir_shows_directories_only_visible_first_and_stays_inside() {
        let (dir, mut ws) = ws();
        for d in ["b", "a", ".hidden", "state"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("file.txt"), "x").unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("escape")).unwrap();
        ws.protect(&dir.path().join("state"));
        let listed = list_dir(&ws, ListDir { path: None }).unwrap();
        let names: Vec<&str> = listed["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", ".hidden"]);
        assert_eq!(listed["entries"][2]["hidden"], true);
        assert!(listed.get("parent").is_none(), "the workspace is the top");
        let sub = list_dir(
            &ws,
            ListDir {
                path: Some("a".into()),
            },
        )
        .unwrap();
        assert_eq!(sub["parent"], json!(ws.root()));
        let out = list_dir(
            &ws,
            ListDir {
                path: Some("/etc".into()),
            },
        )
        .unwrap_err();
        assert_eq!(out.code, "PATH_OUTSIDE_WORKSPACE");
    }

    #[test]
    fn uploads_are_capped_atomic_and_never_replace_a_file() {
        let (dir, ws) = ws();
        let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
        let up = |name: &str, body: &[u8]| {
            upload(
                &ws,
                Upload {
                    name: name.into(),
                    content_base64: b64(body),
                },
            )
        };
        let first = up("../../notes.txt", b"one").unwrap();
        assert_eq!(first["size"], 3);
        assert!(
            first["path"]
                .as_str()
                .unwrap()
                .ends_with("uploads/notes.txt")
        );
        let second = up("notes.txt", b"two").unwrap();
        assert!(
            second["path"]
                .as_str()
                .unwrap()
                .ends_with("uploads/notes-1.txt")
        );
        assert_eq!(
            std::fs::read(dir.path().join("uploads/notes.txt")).unwrap(),
            b"one"
        );
        assert_eq!(up("..", b"x").unwrap_err().code, "INVALID_PARAMS");
        let bad = upload(
            &ws,
            Upload {
                name: "x".into(),
                content_base64: "not base64!".into(),
            },
        );
        assert_eq!(bad.unwrap_err().code, "INVALID_PARAMS");
        let huge = Upload {
            name: "x".into(),
            content_base64: "A".repeat(MAX_UPLOAD / 3 * 4 + 8),
        };
        assert_eq!(upload(&ws, huge).unwrap_err().code, "PAYLOAD_TOO_LARGE");
        let leftovers = std::fs::read_dir(dir.path().join("uploads"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".upload-")
            })
            .count();
        assert_eq!(leftovers, 0, "no temporary file is left behind");
    }

    #[test]
    fn uploads_in_all_stay_within_a_quota() {
        let (dir, ws) = ws();
        let uploads = dir.path().join("uploads");
        std::fs::create_dir_all(&uploads).unwrap();
        // A sparse file stands for 256 MiB already there.
        let big = std::fs::File::create(uploads.join("big.bin")).unwrap();
        big.set_len(UPLOADS_TOTAL - 2).unwrap();
        let up = |body: &[u8]| {
            upload(
                &ws,
                Upload {
                    name: "more.txt".into(),
                    content_base64: base64::engine::general_purpose::STANDARD.encode(body),
                },
            )
        };
        assert!(up(b"ok").is_ok(), "up to the limit");
        let over = up(b"x").unwrap_err();
        assert_eq!(over.code, "QUOTA_EXCEEDED");
        assert!(
            over.message.contains("remove some first"),
            "{}",
            over.message
        );
    }
}
