//! `file.write`: a whole file from base64 (OpenClaw's `handleFileWrite`).
//! The preflight resolves the target and binds it: to the file's identity
//! when it exists, else to the identity of its nearest existing ancestor
//! (the anchor). The real write then only ever touches what is bound: an
//! existing file is overwritten in place through a descriptor whose
//! identity was checked (its inode kept, as OpenClaw keeps it); a new one
//! is created exclusively, its missing parents made one by one under the
//! anchor, never through a symlink.

use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};

use base64::Engine;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{
    Binding, Existing, Failure, Files, HARD_MAX_BYTES, Identity, Request, identity,
    identity_changed, normalize, open, os_message, reply, symlink_rejected,
};
use crate::shared::hex::hex;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Written<B: Serialize> {
    ok: bool,
    path: String,
    size: usize,
    sha256: String,
    overwritten: bool,
    binding: B,
    /// Echoed when asked and honoured: without it the gateway refuses
    /// (`HARDLINK_REJECTION_UNSUPPORTED`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    reject_hardlinks: bool,
}

/// `binding: {kind:"write", anchorPath, anchorDevice, anchorInode,
/// targetDevice?, targetInode?}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WriteBinding {
    kind: &'static str,
    anchor_path: String,
    anchor_device: String,
    anchor_inode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_device: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_inode: Option<String>,
}

/// OpenClaw's `inspectStrictBase64`: the decoded size of base64 in either
/// alphabet with well-formed padding (no whitespace), or `None`.
pub(super) fn strict_base64_len(text: &str) -> Option<usize> {
    let (mut data, mut padding, mut padded) = (0usize, 0usize, false);
    for b in text.bytes() {
        if b == b'=' {
            padding += 1;
            if padding > 2 {
                return None;
            }
            padded = true;
            continue;
        }
        if padded || !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')) {
            return None;
        }
        data += 1;
    }
    if data == 0 {
        return (padding == 0).then_some(0);
    }
    let rest = data % 4;
    if padding == 0 {
        return (rest != 1).then_some(data * 3 / 4);
    }
    if data + padding < 4 || (data + padding) % 4 != 0 {
        return None;
    }
    if (padding == 1 && rest != 3) || (padding == 2 && rest != 2) {
        return None;
    }
    Some(data * 3 / 4)
}

/// The bytes; `None` where OpenClaw's re-encoding check fails (bits left
/// over that a canonical encoding would not carry).
pub(super) fn decode(text: &str) -> Option<Vec<u8>> {
    let standard: String = text
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(standard)
        .ok()
}

fn failure(code: &'static str, message: impl Into<String>) -> Failure {
    Failure::new(code, message)
}

pub fn file_write(files: &Files, request: &Request) -> Result<Value, Failure> {
    let raw = request.string("path").unwrap_or("");
    if raw.is_empty() {
        return Err(failure("INVALID_PATH", "path is required"));
    }
    if raw.contains('\0') {
        return Err(failure("INVALID_PATH", "path must not contain NUL bytes"));
    }
    if !raw.starts_with('/') {
        return Err(failure("INVALID_PATH", "path must be absolute"));
    }
    let Some(content) = request.string("contentBase64") else {
        return Err(failure("INVALID_BASE64", "contentBase64 is required"));
    };
    let Some(size) = strict_base64_len(content) else {
        return Err(failure(
            "INVALID_BASE64",
            "contentBase64 is not valid base64",
        ));
    };
    if size as u64 > HARD_MAX_BYTES {
        return Err(failure(
            "FILE_TOO_LARGE",
            format!("decoded content is {size} bytes; maximum is {HARD_MAX_BYTES} bytes (16 MB)"),
        ));
    }
    let Some(bytes) = decode(content) else {
        return Err(failure(
            "INVALID_BASE64",
            "contentBase64 is not valid base64",
        ));
    };
    let overwrite = request.flag("overwrite");
    let create_parents = request.flag("createParents");
    let reject_hardlinks = request.flag("rejectHardlinks");
    let follow = request.follow();
    // The target's own name: a trailing separator names it all the same.
    let target = normalize(raw).trim_end_matches('/').to_owned();
    if target.is_empty() || !files.spelled_inside(Path::new(&target)) {
        return Err(files.outside(raw, ""));
    }
    let parent_dir = match target.rfind('/') {
        Some(0) => "/".to_owned(),
        Some(i) => target[..i].to_owned(),
        None => "/".to_owned(),
    };
    let parent_exists = std::fs::metadata(&parent_dir).is_ok();
    let canonical = canonical_from_ancestor(&target);
    if !follow && (traverses_symlink(&target) || canonical != target) {
        let failure = failure("SYMLINK_REDIRECT", symlink_rejected(true));
        return Err(match files.root_of(Path::new(&canonical)) {
            Some(_) => failure.at(&canonical),
            None => failure,
        });
    }
    // Confined first: the answers below name the canonical path, which
    // must not tell a caller where a link outside the roots leads.
    files.confine(raw, Path::new(&canonical))?;
    if let Some(changed) = request.canonical_changed(&canonical) {
        return Err(changed);
    }
    let bound = match request.params.get("expectedBinding") {
        None => None,
        Some(sent) => match Binding::read(sent) {
            Some(b @ Binding::Write { .. }) => Some(b),
            _ => return Err(identity_changed(&canonical)),
        },
    };
    if !parent_exists && !create_parents {
        return Err(failure(
            "PARENT_NOT_FOUND",
            format!("parent directory does not exist: {parent_dir}"),
        ));
    }
    let sha256 = hex(&Sha256::digest(&bytes));
    let integrity = |target: &str| {
        let expected = request.string("expectedSha256")?.to_ascii_lowercase();
        (!expected.is_empty() && expected != sha256).then(|| {
            failure(
                "INTEGRITY_FAILURE",
                format!("sha256 mismatch: expected {expected}, got {sha256}"),
            )
            .at(target)
        })
    };
    let mut existing = None;
    if parent_exists {
        match std::fs::symlink_metadata(&target) {
            Ok(meta) => {
                let kind = meta.file_type();
                if kind.is_symlink() {
                    return Err(failure(
                        "SYMLINK_TARGET_DENIED",
                        format!("path is a symlink; refusing to write through it: {target}"),
                    ));
                }
                if kind.is_dir() {
                    return Err(failure(
                        "IS_DIRECTORY",
                        format!("path resolves to a directory: {target}"),
                    ));
                }
                if !overwrite {
                    return Err(failure(
                        "EXISTS_NO_OVERWRITE",
                        format!("file already exists and overwrite is false: {target}"),
                    ));
                }
                if !kind.is_file() {
                    return Err(failure(
                        "UNSUPPORTED_FILE_TYPE",
                        format!(
                            "only regular files can be written (this is a FIFO, socket or device): {target}"
                        ),
                    ));
                }
                // Always, not only when asked (OpenClaw: only then): the
                // other names of the file may be outside every root.
                if meta.nlink() > 1 {
                    return Err(failure(
                        "HARDLINK_TARGET_DENIED",
                        "refusing to overwrite a file with hard links",
                    ));
                }
                existing = Some(identity(&meta));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(failure(
                    "PERMISSION_DENIED",
                    format!("permission denied: {target}"),
                ));
            }
            Err(e) => {
                return Err(failure(
                    "WRITE_ERROR",
                    format!("unexpected stat error: {}", os_message(&e)),
                ));
            }
        }
    }
    if let Some(failed) = integrity(&target) {
        return Err(failed);
    }
    if request.preflight() {
        let (anchor_path, anchor) = anchor_of(&canonical)?;
        return reply(Written {
            ok: true,
            path: canonical,
            size: bytes.len(),
            sha256,
            overwritten: existing.is_some(),
            binding: WriteBinding {
                kind: "write",
                anchor_path,
                anchor_device: anchor.device,
                anchor_inode: anchor.inode,
                target_device: existing.as_ref().map(|t| t.device.clone()),
                target_inode: existing.map(|t| t.inode),
            },
            reject_hardlinks,
        });
    }
    // A call without the gateway's binding (a direct invoke) is bound now.
    let binding = match bound {
        Some(b) => b,
        None => {
            let (anchor_path, anchor) = anchor_of(&canonical)?;
            Binding::Write {
                anchor_path,
                anchor,
                target: existing,
            }
        }
    };
    let Binding::Write {
        anchor_path,
        anchor,
        target: bound_target,
    } = binding
    else {
        return Err(identity_changed(&canonical));
    };
    let (path, overwritten, id) = match bound_target {
        Some(expected) => {
            let id = overwrite_bound(&canonical, &expected, &bytes)?;
            (canonical, true, id)
        }
        None => {
            if !files
                .root_of(Path::new(&anchor_path))
                .is_some_and(|r| Path::new(&canonical).starts_with(r.root()))
            {
                return Err(failure(
                    "WRITE_ERROR",
                    "write target is outside the authorized anchor",
                ));
            }
            let id = create_bound(&canonical, &anchor_path, &anchor, &bytes)?;
            (canonical, false, id)
        }
    };
    reply(Written {
        ok: true,
        path,
        size: bytes.len(),
        sha256,
        overwritten,
        binding: Existing::new(id),
        reject_hardlinks: false,
    })
}

/// Whether any existing component of `path`, from `/`, is a symlink
/// (fs-safe's walk with `rejectSymlinks`).
fn traverses_symlink(path: &str) -> bool {
    let mut current = std::path::PathBuf::from("/");
    for part in Path::new(path).components().skip(1) {
        current.push(part);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

/// fs-safe's `canonicalPathFromExistingAncestor`: the real path of the
/// nearest ancestor that exists, then the missing rest as written.
fn canonical_from_ancestor(path: &str) -> String {
    let mut ancestor = Path::new(path);
    loop {
        if std::fs::symlink_metadata(ancestor).is_ok() {
            break;
        }
        match ancestor.parent() {
            Some(parent) => ancestor = parent,
            None => return path.to_owned(),
        }
    }
    let rest = Path::new(path)
        .strip_prefix(ancestor)
        .unwrap_or(Path::new(""));
    match std::fs::canonicalize(ancestor) {
        Ok(real) if rest.as_os_str().is_empty() => real.to_string_lossy().into_owned(),
        Ok(real) => real.join(rest).to_string_lossy().into_owned(),
        Err(_) => path.to_owned(),
    }
}

/// The nearest existing directory above `canonical` and its identity
/// (`captureWriteBinding`).
fn anchor_of(canonical: &str) -> Result<(String, Identity), Failure> {
    let mut anchor = Path::new(canonical).parent().unwrap_or(Path::new("/"));
    loop {
        match std::fs::metadata(anchor) {
            Ok(meta) if meta.is_dir() => {
                return Ok((anchor.to_string_lossy().into_owned(), identity(&meta)));
            }
            Ok(_) => {
                return Err(failure(
                    "WRITE_ERROR",
                    format!("write anchor is not a directory: {}", anchor.display()),
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match anchor.parent() {
                Some(parent) => anchor = parent,
                None => {
                    return Err(failure(
                        "WRITE_ERROR",
                        "no existing directory above the target",
                    ));
                }
            },
            Err(e) => {
                return Err(failure(
                    "WRITE_ERROR",
                    format!("failed to write file: {}", os_message(&e)),
                ));
            }
        }
    }
}

/// Overwrites the bound file in place, through a descriptor checked to be
/// it: a regular file, at the canonical path, with the bound identity.
fn overwrite_bound(
    canonical: &str,
    expected: &Identity,
    bytes: &[u8],
) -> Result<Identity, Failure> {
    let real = Path::new(canonical);
    let mut file = open::for_overwrite(real).map_err(|_| identity_changed(canonical))?;
    let meta = file.metadata().map_err(|_| identity_changed(canonical))?;
    if !meta.is_file() || &identity(&meta) != expected || !open::is_at(&file, real) {
        return Err(identity_changed(canonical));
    }
    if meta.nlink() > 1 {
        return Err(failure(
            "HARDLINK_TARGET_DENIED",
            "refusing to overwrite a file with hard links",
        ));
    }
    let written = file
        .set_len(0)
        .and_then(|()| file.write_all(bytes))
        .and_then(|()| file.sync_all());
    written.map_err(|e| {
        failure(
            "WRITE_ERROR",
            format!("failed to write file: {}", os_message(&e)),
        )
    })?;
    Ok(identity(&meta))
}

/// Creates the new file under the bound anchor: the anchor opened and
/// checked, each missing directory made and entered by name under the one
/// before (never through a symlink), the file itself created exclusively
/// (one that appeared since the preflight is not overwritten).
fn create_bound(
    canonical: &str,
    anchor_path: &str,
    anchor: &Identity,
    bytes: &[u8],
) -> Result<Identity, Failure> {
    let changed = || identity_changed(canonical);
    let anchor_real = Path::new(anchor_path);
    let rest = Path::new(canonical)
        .strip_prefix(anchor_real)
        .ok()
        .filter(|r| !r.as_os_str().is_empty())
        .ok_or_else(|| {
            failure(
                "WRITE_ERROR",
                "write target is outside the authorized anchor",
            )
        })?;
    let dir = open::for_reading(anchor_real, true).map_err(|_| changed())?;
    let same = dir.metadata().is_ok_and(|m| &identity(&m) == anchor);
    if !same || !open::is_at(&dir, anchor_real) {
        return Err(changed());
    }
    let mut dir: OwnedFd = dir.into();
    let names: Vec<&std::ffi::OsStr> = rest
        .components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(failure(
                "WRITE_ERROR",
                "write target is outside the authorized anchor",
            )),
        })
        .collect::<Result<_, _>>()?;
    let (last, parents) = names.split_last().expect("rest is not empty");
    for name in parents {
        dir = enter(&dir, name).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => failure(
                "SYMLINK_TARGET_DENIED",
                format!("path is a symlink; refusing to write through it: {canonical}"),
            ),
            _ => failure(
                "WRITE_ERROR",
                format!("failed to create parent directories: {}", os_message(&e)),
            ),
        })?;
    }
    let name = c_name(last)?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o666 as libc::c_uint,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EEXIST) => changed(),
            Some(libc::EACCES) | Some(libc::EPERM) => failure(
                "PERMISSION_DENIED",
                format!("permission denied writing to: {anchor_path}"),
            ),
            _ => failure(
                "WRITE_ERROR",
                format!("failed to write file: {}", os_message(&e)),
            ),
        });
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let mut file = unsafe { File::from_raw_fd(fd) };
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(e) = written {
        // No half-written file is left behind under a name nobody chose.
        // SAFETY: as above.
        unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
        return Err(failure(
            "WRITE_ERROR",
            format!("failed to write file: {}", os_message(&e)),
        ));
    }
    let meta = file.metadata().map_err(|e| {
        failure(
            "WRITE_ERROR",
            format!("failed to write file: {}", os_message(&e)),
        )
    })?;
    Ok(identity(&meta))
}

fn c_name(name: &std::ffi::OsStr) -> Result<CString, Failure> {
    CString::new(name.as_bytes())
        .map_err(|_| failure("INVALID_PATH", "path must not contain NUL bytes"))
}

/// The directory `name` under `dir`, made if missing; never a symlink.
fn enter(dir: &OwnedFd, name: &std::ffi::OsStr) -> std::io::Result<OwnedFd> {
    let name = CString::new(name.as_bytes()).map_err(std::io::Error::other)?;
    let open = || {
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            // SAFETY: just opened, owned by nobody else.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
    };
    match open() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // SAFETY: as above.
            let made = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) };
            if made < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
            }
            open()
        }
        other => other,
    }
}
