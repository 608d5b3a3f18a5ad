//! Files across the proxy, both ways, with OpenClaw's limits
//! (node-commands.md §1.1 and §1.5):
//! - out: the screenshots, PDFs and downloads a route's result names
//!   travel in the payload's `files` (≤ 10 MiB each, ≤ 16 MiB in all,
//!   ≤ 256), read only from our own media and download directories, and
//!   removed once read (the gateway keeps its copy);
//! - in: `browser.proxy.upload.v1` files are staged under
//!   `<state>/browser/uploads/.proxy-uploads/upload-XXXXXX/<n>/<name>`
//!   (directories 0700, files 0600, a marker file), kept 24 hours, at most
//!   64 stagings and 256 MiB.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::tools::ToolError;

pub const MAX_FILE: usize = 10 << 20;
pub const MAX_TOTAL: usize = 16 << 20;
pub const MAX_FILES: usize = 256;
/// The whole payload, encoded.
pub const MAX_PAYLOAD: usize = 24 << 20;
const MARKER: &str = ".openclaw-browser-proxy-upload-v1";
const KEEP: Duration = Duration::from_secs(24 * 3600);
const MAX_STAGINGS: usize = 64;
const MAX_STAGED_BYTES: u64 = 256 << 20;

/// `upload` of `browser.proxy.upload.v1`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upload {
    pub envelope: String,
    pub files: Vec<UploadFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UploadFile {
    pub name: String,
    pub content_base64: String,
}

/// Files staged for one call.
#[derive(Debug)]
pub struct Staged(Vec<PathBuf>);

impl Staged {
    pub fn paths(&self) -> Vec<String> {
        self.0.iter().map(|p| p.display().to_string()).collect()
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new("INVALID_REQUEST", message)
}

/// A file name as it may be written: the last component, no control
/// characters, no leading dots, at most 200 bytes.
pub fn sanitise(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let mut clean: String = last
        .chars()
        .map(|c| if c.is_control() || c == ':' { '_' } else { c })
        .collect();
    while clean.starts_with('.') {
        clean.remove(0);
    }
    let mut end = clean.len().min(200);
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    clean.truncate(end);
    if clean.trim().is_empty() {
        "upload".to_owned()
    } else {
        clean
    }
}

/// Decodes and checks an upload, then writes it to a new staging
/// directory (old ones pruned first).
pub fn stage(uploads: &Path, upload: &Upload) -> Result<Staged, ToolError> {
    if upload.envelope != "browser-upload-v1" {
        return Err(invalid(format!(
            "unknown upload envelope {:?} (expected browser-upload-v1)",
            upload.envelope
        )));
    }
    if upload.files.is_empty() {
        return Err(invalid("upload has no files"));
    }
    if upload.files.len() > MAX_FILES {
        return Err(invalid(format!("upload has more than {MAX_FILES} files")));
    }
    let mut decoded = Vec::with_capacity(upload.files.len());
    let mut total = 0usize;
    for file in &upload.files {
        // Refused before decoding: the encoded size bounds the decoded one.
        if file.content_base64.len() > MAX_FILE.div_ceil(3) * 4 {
            return Err(invalid(format!("{}: file exceeds 10 MiB", file.name)));
        }
        let bytes = STANDARD
            .decode(&file.content_base64)
            .ok()
            .filter(|b| STANDARD.encode(b) == file.content_base64)
            .ok_or_else(|| {
                invalid(format!(
                    "{}: contentBase64 is not canonical base64",
                    file.name
                ))
            })?;
        if bytes.len() > MAX_FILE {
            return Err(invalid(format!("{}: file exceeds 10 MiB", file.name)));
        }
        total += bytes.len();
        if total > MAX_TOTAL {
            return Err(invalid("upload exceeds 16 MiB in total"));
        }
        decoded.push((sanitise(&file.name), bytes));
    }
    let root = uploads.join(".proxy-uploads");
    crate::shared::paths::create_private_dir(&root)
        .map_err(|e| ToolError::new("IO_ERROR", format!("cannot stage the upload: {e}")))?;
    prune(&root, total as u64)?;
    let dir = tempfile::Builder::new()
        .prefix("upload-")
        .tempdir_in(&root)
        .map_err(|e| ToolError::new("IO_ERROR", format!("cannot stage the upload: {e}")))?
        .keep();
    let io =
        |e: std::io::Error| ToolError::new("IO_ERROR", format!("cannot stage the upload: {e}"));
    crate::shared::paths::write_private(&dir.join(MARKER), b"").map_err(io)?;
    let mut paths = Vec::new();
    for (index, (name, bytes)) in decoded.iter().enumerate() {
        let sub = dir.join(index.to_string());
        crate::shared::paths::create_private_dir(&sub).map_err(io)?;
        let path = sub.join(name);
        crate::shared::paths::write_private(&path, bytes).map_err(io)?;
        paths.push(path);
    }
    Ok(Staged(paths))
}

/// Removes stagings older than a day, then refuses when what is left
/// (with `incoming` bytes more) is over the limits.
fn prune(root: &Path, incoming: u64) -> Result<(), ToolError> {
    let mut kept = Vec::new();
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let path = entry.path();
        // Only what we staged (marker inside) is ever removed.
        if !path.join(MARKER).is_file() {
            continue;
        }
        let age = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .unwrap_or_default();
        if age > KEEP {
            let _ = std::fs::remove_dir_all(&path);
        } else {
            kept.push(path);
        }
    }
    let bytes: u64 = kept.iter().map(|p| size_of_tree(p)).sum();
    if kept.len() >= MAX_STAGINGS || bytes + incoming > MAX_STAGED_BYTES {
        return Err(ToolError::new(
            "RESOURCE_EXHAUSTED",
            "RESOURCE_EXHAUSTED: browser proxy upload staging limit reached",
        ));
    }
    Ok(())
}

fn size_of_tree(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size_of_tree(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// The paths a result names, where OpenClaw's node looks for them.
fn named_paths(result: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    for p in [
        &result["path"],
        &result["imagePath"],
        &result["download"]["path"],
    ] {
        if let Some(p) = p.as_str() {
            paths.push(p.to_owned());
        }
    }
    for d in result["downloads"].as_array().into_iter().flatten() {
        if let Some(p) = d["path"].as_str() {
            paths.push(p.to_owned());
        }
    }
    paths.dedup();
    paths
}

/// The `files` of a payload: every path the result names, read (only
/// from `ours`), encoded, and removed from disk.
pub fn envelope(result: &Value, ours: &[PathBuf]) -> Result<Vec<Value>, String> {
    let paths = named_paths(result);
    if paths.len() > MAX_FILES {
        return Err(format!(
            "browser proxy result names more than {MAX_FILES} files"
        ));
    }
    let mut files = Vec::new();
    let mut total = 0usize;
    for path in paths {
        let p = Path::new(&path);
        if !ours.iter().any(|dir| p.parent() == Some(dir.as_path())) {
            return Err(format!(
                "browser proxy result names a file outside its own: {path}"
            ));
        }
        let bytes = read_bounded(p)?;
        total += bytes.len();
        if total > MAX_TOTAL {
            return Err("browser proxy files exceed 16 MiB in total".into());
        }
        let _ = std::fs::remove_file(p);
        files.push(json!({
            "path": path,
            "base64": STANDARD.encode(&bytes),
            "mimeType": mime_type(p),
        }));
    }
    Ok(files)
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() > MAX_FILE {
        let _ = std::fs::remove_file(path);
        return Err(format!(
            "browser proxy file exceeds 10 MiB: {}",
            path.display()
        ));
    }
    Ok(bytes)
}

fn mime_type(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("pdf") => "application/pdf",
        Some("txt") => "text/plain",
        Some("html" | "htm") => "text/html",
        Some("json") => "application/json",
        Some("zip") => "application/zip",
        Some("csv") => "text/csv",
        _ => "application/octet-stream",
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn upload(files: &[(&str, &[u8])]) -> Upload {
        Upload {
            envelope: "browser-upload-v1".into(),
            files: files
                .iter()
                .map(|(n, b)| UploadFile {
                    name: (*n).into(),
                    content_base64: STANDARD.encode(b),
                })
                .collect(),
        }
    }

    #[test]
    fn uploads_are_staged_private_with_their_marker() {
        let dir = tempfile::tempdir().unwrap();
        let staged = stage(dir.path(), &upload(&[("../../etc/notes.txt", b"hi")])).unwrap();
        let path = &staged.0[0];
        assert_eq!(path.file_name().unwrap(), "notes.txt");
        assert_eq!(path.parent().unwrap().file_name().unwrap(), "0");
        assert!(path.starts_with(dir.path().join(".proxy-uploads")));
        assert_eq!(std::fs::read(path).unwrap(), b"hi");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert!(
            path.parent()
                .unwrap()
                .parent()
                .unwrap()
                .join(MARKER)
                .is_file()
        );
    }

    #[test]
    fn bad_uploads_are_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut u = upload(&[("a", b"x")]);
        u.files[0].content_base64 = "eA".into(); // unpadded: not canonical
        assert!(
            stage(dir.path(), &u)
                .unwrap_err()
                .message
                .contains("canonical")
        );
        let mut u = upload(&[("a", b"x")]);
        u.envelope = "v2".into();
        assert!(stage(dir.path(), &u).is_err());
        assert!(stage(dir.path(), &upload(&[])).is_err());
        let big = vec![0u8; MAX_FILE + 1];
        assert!(
            stage(dir.path(), &upload(&[("big", &big)]))
                .unwrap_err()
                .message
                .contains("10 MiB")
        );
        let nine = vec![0u8; 9 << 20];
        assert!(
            stage(dir.path(), &upload(&[("a", &nine), ("b", &nine)]))
                .unwrap_err()
                .message
                .contains("16 MiB")
        );
        assert!(!dir.path().join(".proxy-uploads").exists());
    }

    #[test]
    fn stagings_are_limited() {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..MAX_STAGINGS {
            stage(dir.path(), &upload(&[("a", b"x")])).unwrap();
        }
        let e = stage(dir.path(), &upload(&[("a", b"x")])).unwrap_err();
        assert_eq!(e.code, "RESOURCE_EXHAUSTED");
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(sanitise("C:\\Users\\me\\cv.pdf"), "cv.pdf");
        assert_eq!(sanitise("..."), "upload");
        assert_eq!(sanitise(".bashrc"), "bashrc");
        assert_eq!(sanitise("a\nb"), "a_b");
        assert!(sanitise(&"é".repeat(300)).len() <= 200);
    }

    #[test]
    fn the_envelope_reads_only_our_files_and_removes_them() {
        let dir = tempfile::tempdir().unwrap();
        let media = dir.path().join("media");
        std::fs::create_dir(&media).unwrap();
        let shot = media.join("shot.png");
        std::fs::write(&shot, b"PNG").unwrap();
        let result = json!({ "ok": true, "path": shot });
        let files = envelope(&result, std::slice::from_ref(&media)).unwrap();
        assert_eq!(files[0]["base64"], STANDARD.encode(b"PNG"));
        assert_eq!(files[0]["mimeType"], "image/png");
        assert!(!shot.exists());
        // A path anywhere else is never read.
        let other = json!({ "path": "/etc/passwd" });
        assert!(envelope(&other, &[media]).unwrap_err().contains("outside"));
    }
}
