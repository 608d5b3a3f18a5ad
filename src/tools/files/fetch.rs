//! `file.fetch`: one regular file, whole, as base64 with its sha256
//! (OpenClaw's `handleFileFetch`), bound to the identity the preflight
//! returned.

use crate::shared::hex::hex;
use std::io::Read;
use std::os::unix::fs::MetadataExt;

use base64::Engine;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{
    Existing, Failure, Files, Request, binding_differs, canonical_for_read, classify_read,
    identity, mime, open, os_message, reply,
};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Fetched {
    ok: bool,
    path: String,
    size: u64,
    mime_type: String,
    base64: String,
    sha256: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    preflight_only: bool,
    binding: Existing,
}

pub fn file_fetch(files: &Files, request: &Request) -> Result<Value, Failure> {
    super::absolute(request)?;
    // The duplex form (1 MiB frames) is not implemented: its preflight
    // is answered, its transfer refused as OpenClaw's node refuses it
    // without duplex IO (the gateway's tools use the unary form).
    let binary = match request.params.get("transport") {
        None => false,
        Some(Value::String(t)) if t == "binary" => true,
        Some(_) => {
            return Err(Failure::new(
                "INVALID_PARAMS",
                "Error: file.fetch transport must be \"binary\" when supplied",
            ));
        }
    };
    let safe_max = request.params["maxBytes"]
        .as_u64()
        .is_some_and(|n| n > 0 && n < (1 << 53));
    if binary && !safe_max {
        return Err(Failure::new(
            "INVALID_PARAMS",
            "Error: binary file.fetch maxBytes must be a positive safe integer",
        ));
    }
    let asked = request.max_bytes();
    let (path, real) = canonical_for_read(files, request, "file not found", classify_read)?;
    // What it is, before opening it: opening a device has effects of its
    // own (a serial port resets what hangs on it, a camera lights up).
    // The type is checked again on the descriptor below.
    let named = std::fs::symlink_metadata(&real).map_err(|e| {
        Failure::new(
            classify_read(&e),
            format!("open failed: {}", os_message(&e)),
        )
        .at(&path)
    })?;
    if named.is_dir() {
        return Err(Failure::new("IS_DIRECTORY", "path is a directory").at(&path));
    }
    if !named.is_file() && !named.file_type().is_symlink() {
        return Err(Failure::new(
            "UNSUPPORTED_FILE_TYPE",
            "only regular files can be fetched (this is a FIFO, socket or device)",
        )
        .at(&path));
    }
    let file = open::for_reading(&real, false).map_err(|e| {
        let code = match e.raw_os_error() {
            Some(libc::ELOOP) => "SYMLINK_REDIRECT",
            _ => classify_read(&e),
        };
        Failure::new(code, format!("open failed: {}", os_message(&e))).at(&path)
    })?;
    let meta = file.metadata().map_err(|e| {
        Failure::new(
            classify_read(&e),
            format!("open failed: {}", os_message(&e)),
        )
        .at(&path)
    })?;
    if meta.is_dir() {
        return Err(Failure::new("IS_DIRECTORY", "path is a directory").at(&path));
    }
    if !meta.is_file() {
        return Err(Failure::new(
            "UNSUPPORTED_FILE_TYPE",
            "only regular files can be fetched (this is a FIFO, socket or device)",
        )
        .at(&path));
    }
    // fs-safe's default hardlink policy (`reject`), and so OpenClaw's.
    if meta.nlink() > 1 {
        return Err(Failure::new(
            "READ_ERROR",
            "open failed: FsSafeError: hardlinked path not allowed",
        )
        .at(&path));
    }
    if !open::is_at(&file, &real) {
        return Err(Failure::new(
            "CANONICAL_PATH_CHANGED",
            "canonical path differs from the authorized target",
        )
        .at(&path));
    }
    if let Some(changed) = request.canonical_changed(&path) {
        return Err(changed);
    }
    let id = identity(&meta);
    if let Some(changed) = binding_differs(request, &id, &path) {
        return Err(changed);
    }
    if meta.len() > asked {
        return Err(Failure::new(
            "FILE_TOO_LARGE",
            format!("file size {} exceeds limit {asked}", meta.len()),
        )
        .at(&path));
    }
    // What the gateway's frame can carry as base64 (its maxPayload).
    let limit = asked.min(request.transfer_budget);
    if meta.len() > limit {
        return Err(Failure::new(
            "FILE_TOO_LARGE",
            format!(
                "file size {} exceeds limit {limit} (what the gateway's maxPayload carries as base64)",
                meta.len()
            ),
        )
        .at(&path));
    }
    if request.preflight() {
        return reply(Fetched {
            ok: true,
            path,
            size: meta.len(),
            mime_type: String::new(),
            base64: String::new(),
            sha256: String::new(),
            preflight_only: true,
            binding: Existing::new(id),
        });
    }
    if binary {
        return Err(Failure::new(
            "INVALID_PARAMS",
            "binary file.fetch requires duplex IO and an authorized filesystem binding",
        ));
    }
    // Bounded: a file that grew since fstat is refused, not read on.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&file)
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            Failure::new(
                classify_read(&e),
                format!("read failed: {}", os_message(&e)),
            )
            .at(&path)
        })?;
    if bytes.len() as u64 > limit {
        return Err(Failure::new(
            "FILE_TOO_LARGE",
            format!("read failed: file grew beyond the limit of {limit} bytes while it was read"),
        )
        .at(&path));
    }
    let sha256 = hex(&Sha256::digest(&bytes));
    let mime_type = mime::of_content(&bytes, &path);
    let base64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    reply(Fetched {
        ok: true,
        path,
        size: bytes.len() as u64,
        mime_type,
        base64,
        sha256,
        preflight_only: false,
        binding: Existing::new(id),
    })
}
