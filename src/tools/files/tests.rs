//! One test per row of OpenClaw's file-transfer contract and of our
//! confinement, driving [`Files`] as the dispatcher does.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::*;

struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    files: Arc<Files>,
}

fn setup() -> Setup {
    setup_with(|_| {})
}

fn setup_with(protect: impl FnOnce(&mut Workspace)) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("ws");
    let outside = root.join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "outside\n").unwrap();
    let mut workspace = Workspace::new(&ws).unwrap();
    protect(&mut workspace);
    let files = Arc::new(Files::new(&workspace, &[]).unwrap());
    Setup {
        _dir: dir,
        ws,
        outside,
        files,
    }
}

async fn call(files: &Arc<Files>, op: Op, params: Value) -> Value {
    let request = Request::parse(op, params, 16 << 20);
    files
        .run(
            request,
            Duration::from_secs(30),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap()
}

fn p(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

/// The gateway's two calls: the preflight, then the real one carrying
/// what the preflight bound.
async fn both(files: &Arc<Files>, op: Op, params: Value) -> (Value, Value) {
    let mut pre = params.clone();
    pre["preflightOnly"] = json!(true);
    let preflight = call(files, op, pre).await;
    assert_eq!(preflight["ok"], true, "{preflight}");
    let mut real = params;
    real["expectedCanonicalPath"] = preflight["path"].clone();
    real["expectedBinding"] = preflight["binding"].clone();
    (preflight.clone(), call(files, op, real).await)
}

fn sha(bytes: &[u8]) -> String {
    crate::shared::hex::hex(&Sha256::digest(bytes))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn fetch_preflight_then_fetch_returns_the_file_bound_to_its_inode() {
    let s = setup();
    let path = p(&s.ws.join("a.txt"));
    let (pre, got) = both(&s.files, Op::Fetch, json!({ "path": path })).await;
    assert_eq!(pre["preflightOnly"], true);
    assert_eq!(pre["base64"], "");
    assert_eq!(pre["mimeType"], "");
    assert_eq!(pre["size"], 6);
    let inode = std::fs::metadata(s.ws.join("a.txt")).unwrap().ino();
    assert_eq!(pre["binding"]["kind"], "existing");
    assert_eq!(pre["binding"]["inode"], inode.to_string());
    assert_eq!(got["ok"], true, "{got}");
    assert_eq!(got["path"], path);
    assert_eq!(got["base64"], b64(b"hello\n"));
    assert_eq!(got["sha256"], sha(b"hello\n"));
    assert_eq!(got["mimeType"], "text/plain");
    assert!(got.get("preflightOnly").is_none(), "{got}");
}

#[tokio::test]
async fn the_same_call_twice_is_answered_twice_never_deduplicated() {
    let s = setup();
    let path = p(&s.ws.join("a.txt"));
    let first = call(&s.files, Op::Fetch, json!({ "path": path })).await;
    std::fs::write(s.ws.join("a.txt"), "changed\n").unwrap();
    let second = call(&s.files, Op::Fetch, json!({ "path": path })).await;
    assert_eq!(first["base64"], b64(b"hello\n"));
    assert_eq!(second["base64"], b64(b"changed\n"));
}

#[tokio::test]
async fn a_path_outside_every_root_is_refused_in_the_payload_naming_the_flag() {
    let s = setup();
    for op in [Op::Fetch, Op::Stat, Op::List, Op::Archive] {
        let got = call(
            &s.files,
            op,
            json!({ "path": p(&s.outside.join("secret.txt")) }),
        )
        .await;
        assert_eq!(got["ok"], false, "{got}");
        assert_eq!(got["code"], OUTSIDE, "{got}");
        assert!(
            got["message"].as_str().unwrap().contains("--file-root"),
            "{got}"
        );
    }
    let dotdot = format!("{}/../outside/secret.txt", p(&s.ws));
    let got = call(&s.files, Op::Fetch, json!({ "path": dotdot })).await;
    assert_eq!(got["code"], OUTSIDE, "{got}");
    // Whether an outside path exists is not told.
    let missing = call(&s.files, Op::Fetch, json!({ "path": "/nonexistent/x" })).await;
    assert_eq!(missing["code"], OUTSIDE, "{missing}");
    let write = call(
        &s.files,
        Op::Write,
        json!({ "path": p(&s.outside.join("new.txt")), "contentBase64": "aGk=" }),
    )
    .await;
    assert_eq!(write["code"], OUTSIDE, "{write}");
    assert!(!s.outside.join("new.txt").exists());
}

#[tokio::test]
async fn a_file_root_widens_reads_and_writes_but_keeps_protection() {
    let s = setup();
    let ws = Workspace::new(&s.ws).unwrap();
    let mut guarded = ws.clone();
    guarded.protect(&s.outside.join("secret.txt"));
    let files = Arc::new(Files::new(&guarded, std::slice::from_ref(&s.outside)).unwrap());
    std::fs::write(s.outside.join("open.txt"), "open").unwrap();
    let got = call(
        &files,
        Op::Fetch,
        json!({ "path": p(&s.outside.join("open.txt")) }),
    )
    .await;
    assert_eq!(got["ok"], true, "{got}");
    let secret = call(
        &files,
        Op::Fetch,
        json!({ "path": p(&s.outside.join("secret.txt")) }),
    )
    .await;
    assert_eq!(secret["code"], "PROTECTED_PATH", "{secret}");
    let (_, wrote) = both(
        &files,
        Op::Write,
        json!({ "path": p(&s.outside.join("w.txt")), "contentBase64": "aGk=" }),
    )
    .await;
    assert_eq!(wrote["ok"], true, "{wrote}");
    assert_eq!(std::fs::read(s.outside.join("w.txt")).unwrap(), b"hi");
}

#[tokio::test]
async fn relative_empty_and_nul_paths_are_invalid() {
    let s = setup();
    for (path, message) in [
        (json!("a.txt"), "path must be absolute"),
        (json!(""), "path required"),
        (json!(5), "path required"),
        (json!("/ws/\u{0}x"), "path contains NUL byte"),
    ] {
        let got = call(&s.files, Op::Fetch, json!({ "path": path })).await;
        assert_eq!(got["code"], "INVALID_PATH", "{got}");
        assert_eq!(got["message"], message);
    }
    let got = call(
        &s.files,
        Op::Write,
        json!({ "path": "rel", "contentBase64": "" }),
    )
    .await;
    assert_eq!(got["message"], "path must be absolute");
}

#[tokio::test]
async fn symlinks_are_refused_unless_followed_and_never_lead_outside() {
    let s = setup();
    std::os::unix::fs::symlink(s.ws.join("a.txt"), s.ws.join("link")).unwrap();
    std::os::unix::fs::symlink(s.outside.join("secret.txt"), s.ws.join("out")).unwrap();
    let link = p(&s.ws.join("link"));
    let got = call(&s.files, Op::Fetch, json!({ "path": link })).await;
    assert_eq!(got["code"], "SYMLINK_REDIRECT", "{got}");
    assert!(got["message"].as_str().unwrap().contains("allowReadPaths"));
    assert_eq!(got["canonicalPath"], p(&s.ws.join("a.txt")));
    let followed = call(
        &s.files,
        Op::Fetch,
        json!({ "path": link, "followSymlinks": true }),
    )
    .await;
    assert_eq!(followed["ok"], true, "{followed}");
    assert_eq!(followed["path"], p(&s.ws.join("a.txt")));
    for follow in [false, true] {
        let out = call(
            &s.files,
            Op::Fetch,
            json!({ "path": p(&s.ws.join("out")), "followSymlinks": follow }),
        )
        .await;
        assert_eq!(out["ok"], false, "{out}");
        assert!(
            !out.to_string().contains("outside/secret"),
            "names the target: {out}"
        );
    }
    // A trailing separator on a file is no file (Node's normalize keeps it).
    let slash = call(
        &s.files,
        Op::Fetch,
        json!({ "path": format!("{}/", p(&s.ws.join("a.txt"))) }),
    )
    .await;
    assert_eq!(slash["ok"], false, "{slash}");
}

#[tokio::test]
async fn a_hard_linked_file_is_not_fetched_and_one_of_a_protected_file_is_protected() {
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("token");
    std::fs::write(&secret, "s3cret").unwrap();
    let s = setup_with(|ws| ws.protect(&secret));
    std::fs::hard_link(s.ws.join("a.txt"), s.ws.join("twin.txt")).unwrap();
    let got = call(
        &s.files,
        Op::Fetch,
        json!({ "path": p(&s.ws.join("twin.txt")) }),
    )
    .await;
    assert_eq!(got["code"], "READ_ERROR", "{got}");
    assert!(
        got["message"]
            .as_str()
            .unwrap()
            .contains("hardlinked path not allowed")
    );
    std::fs::hard_link(&secret, s.ws.join("innocent")).unwrap();
    for op in [Op::Fetch, Op::Stat] {
        let got = call(&s.files, op, json!({ "path": p(&s.ws.join("innocent")) })).await;
        assert_eq!(got["code"], "PROTECTED_PATH", "{got}");
    }
    let write = call(
        &s.files,
        Op::Write,
        json!({ "path": p(&s.ws.join("innocent")), "contentBase64": "aGk=", "overwrite": true }),
    )
    .await;
    assert_eq!(write["code"], "PROTECTED_PATH", "{write}");
    assert_eq!(std::fs::read(&secret).unwrap(), b"s3cret");
}

#[tokio::test]
async fn a_fifo_never_blocks_and_is_refused() {
    let s = setup();
    let fifo = s.ws.join("pipe");
    let name = std::ffi::CString::new(p(&fifo)).unwrap();
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let got = tokio::time::timeout(
        Duration::from_secs(5),
        call(&s.files, Op::Fetch, json!({ "path": p(&fifo) })),
    )
    .await
    .expect("a FIFO must not block");
    assert_eq!(got["code"], "UNSUPPORTED_FILE_TYPE", "{got}");
    let stat = call(&s.files, Op::Stat, json!({ "path": p(&fifo) })).await;
    assert_eq!(stat["code"], "UNSUPPORTED_FILE_TYPE", "{stat}");
    let write = tokio::time::timeout(
        Duration::from_secs(5),
        call(
            &s.files,
            Op::Write,
            json!({ "path": p(&fifo), "contentBase64": "aGk=", "overwrite": true }),
        ),
    )
    .await
    .expect("a FIFO must not block");
    assert_eq!(write["ok"], false, "{write}");
}

#[tokio::test]
async fn a_file_swapped_after_the_preflight_is_refused() {
    let s = setup();
    let path = p(&s.ws.join("a.txt"));
    let pre = call(
        &s.files,
        Op::Fetch,
        json!({ "path": path, "preflightOnly": true }),
    )
    .await;
    // Same path, another inode (the old file kept: a freed inode number
    // is handed out again at once).
    std::fs::rename(s.ws.join("a.txt"), s.ws.join("a.old")).unwrap();
    std::fs::write(s.ws.join("a.txt"), "swapped").unwrap();
    let got = call(
        &s.files,
        Op::Fetch,
        json!({ "path": path, "expectedCanonicalPath": pre["path"], "expectedBinding": pre["binding"] }),
    )
    .await;
    assert_eq!(got["code"], "CANONICAL_PATH_CHANGED", "{got}");
    assert_eq!(
        got["message"],
        "filesystem identity differs from the authorized target"
    );
    // A binding of the wrong kind, or another canonical path.
    let wrong = call(
        &s.files,
        Op::Fetch,
        json!({ "path": path, "expectedBinding": {"kind": "write"} }),
    )
    .await;
    assert_eq!(wrong["code"], "CANONICAL_PATH_CHANGED", "{wrong}");
    let elsewhere = call(
        &s.files,
        Op::Fetch,
        json!({ "path": path, "expectedCanonicalPath": "/elsewhere" }),
    )
    .await;
    assert_eq!(
        elsewhere["message"],
        "canonical path differs from the authorized target"
    );
}

#[tokio::test]
async fn a_parent_swapped_for_a_symlink_after_the_preflight_is_refused() {
    let s = setup();
    std::fs::create_dir(s.ws.join("d")).unwrap();
    std::fs::write(s.ws.join("d/f.txt"), "inside").unwrap();
    let path = p(&s.ws.join("d/f.txt"));
    let pre = call(
        &s.files,
        Op::Fetch,
        json!({ "path": path, "preflightOnly": true }),
    )
    .await;
    std::fs::rename(s.ws.join("d"), s.ws.join("d-old")).unwrap();
    std::fs::create_dir(s.outside.join("d")).unwrap();
    std::fs::write(s.outside.join("d/f.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(s.outside.join("d"), s.ws.join("d")).unwrap();
    let got = call(
        &s.files,
        Op::Fetch,
        json!({ "path": path, "expectedCanonicalPath": pre["path"], "expectedBinding": pre["binding"] }),
    )
    .await;
    assert_eq!(got["ok"], false, "{got}");
    assert!(!got.to_string().contains(&b64(b"outside")), "{got}");
}

#[tokio::test]
async fn sizes_follow_openclaws_limits() {
    let s = setup();
    let path = p(&s.ws.join("a.txt"));
    let small = call(&s.files, Op::Fetch, json!({ "path": path, "maxBytes": 1 })).await;
    assert_eq!(small["code"], "FILE_TOO_LARGE", "{small}");
    assert_eq!(small["message"], "file size 6 exceeds limit 1");
    for lenient in [json!(0), json!(-1), json!("8"), json!(null), json!(1e300)] {
        let got = call(
            &s.files,
            Op::Fetch,
            json!({ "path": path, "maxBytes": lenient }),
        )
        .await;
        assert_eq!(got["ok"], true, "{lenient}: {got}");
    }
    // A sparse 1 TiB file is refused from its size, never read.
    let sparse = std::fs::File::create(s.ws.join("sparse")).unwrap();
    sparse.set_len(1 << 40).unwrap();
    let started = std::time::Instant::now();
    let got = call(
        &s.files,
        Op::Fetch,
        json!({ "path": p(&s.ws.join("sparse")) }),
    )
    .await;
    assert_eq!(got["code"], "FILE_TOO_LARGE", "{got}");
    assert!(started.elapsed() < Duration::from_secs(2));
    // Exactly 16 MiB passes; one byte more does not.
    let big = s.ws.join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let got = call(
        &s.files,
        Op::Fetch,
        json!({ "path": p(&big), "maxBytes": 16 << 20 }),
    )
    .await;
    assert_eq!(got["size"], 16 << 20);
    std::fs::File::options()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len((16 << 20) + 1)
        .unwrap();
    let got = call(
        &s.files,
        Op::Fetch,
        json!({ "path": p(&big), "maxBytes": 1e20 }),
    )
    .await;
    assert_eq!(got["code"], "FILE_TOO_LARGE", "{got}");
}

#[tokio::test]
async fn a_small_gateway_frame_lowers_the_limit_with_a_clear_error() {
    let s = setup();
    std::fs::write(s.ws.join("b.bin"), vec![7u8; 4096]).unwrap();
    let request = Request::parse(Op::Fetch, json!({ "path": p(&s.ws.join("b.bin")) }), 1024);
    let got = s
        .files
        .run(
            request,
            Duration::from_secs(5),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(got["code"], "FILE_TOO_LARGE", "{got}");
    assert!(
        got["message"].as_str().unwrap().contains("maxPayload"),
        "{got}"
    );
}

#[tokio::test]
async fn file_stat_says_type_size_and_mtime() {
    let s = setup();
    let (pre, got) = both(
        &s.files,
        Op::Stat,
        json!({ "path": p(&s.ws.join("a.txt")) }),
    )
    .await;
    assert_eq!(pre["preflightOnly"], true);
    assert_eq!(got["type"], "file");
    assert_eq!(got["size"], 6);
    assert!(got["mtimeMs"].as_f64().unwrap() > 1e12, "{got}");
    let dir = call(&s.files, Op::Stat, json!({ "path": p(&s.ws) })).await;
    assert_eq!(dir["type"], "directory", "{dir}");
    let missing = call(
        &s.files,
        Op::Stat,
        json!({ "path": p(&s.ws.join("a.txt/x")) }),
    )
    .await;
    assert_eq!(missing["code"], "NOT_FOUND", "{missing}");
}

#[tokio::test]
async fn dir_list_pages_sorted_entries_without_following_links() {
    let s = setup();
    for name in ["b.json", "C.md", ".hidden"] {
        std::fs::write(s.ws.join(name), "x").unwrap();
    }
    std::fs::create_dir(s.ws.join("sub")).unwrap();
    std::os::unix::fs::symlink(&s.outside, s.ws.join("z-link")).unwrap();
    let path = p(&s.ws);
    let (pre, first) = both(&s.files, Op::List, json!({ "path": path, "maxEntries": 2 })).await;
    assert_eq!(pre["preflight"], true, "{pre}");
    assert!(pre.get("preflightOnly").is_none());
    let names = |v: &Value| -> Vec<String> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&first), [".hidden", "a.txt"]);
    assert_eq!(first["truncated"], true);
    assert_eq!(first["nextPageToken"], "2");
    let rest = call(
        &s.files,
        Op::List,
        json!({ "path": path, "pageToken": "2" }),
    )
    .await;
    assert_eq!(names(&rest), ["b.json", "C.md", "sub", "z-link"]);
    assert_eq!(rest["truncated"], false);
    assert!(rest.get("nextPageToken").is_none());
    let entries = rest["entries"].as_array().unwrap();
    assert_eq!(entries[0]["mimeType"], "application/json");
    assert_eq!(entries[2]["mimeType"], "inode/directory");
    assert_eq!(entries[2]["size"], 0);
    assert_eq!(
        entries[3]["isDir"], false,
        "a symlink is listed, not followed"
    );
    assert_eq!(entries[3]["path"], format!("{path}/z-link"));
    let bad_token = call(&s.files, Op::List, json!({ "path": path, "pageToken": 2 })).await;
    assert_eq!(names(&bad_token).len(), 6);
    let file = call(
        &s.files,
        Op::List,
        json!({ "path": p(&s.ws.join("a.txt")) }),
    )
    .await;
    assert_eq!(file["code"], "IS_FILE", "{file}");
}

#[tokio::test]
async fn dir_list_hides_protected_entries() {
    let holder = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(holder.path()).unwrap();
    std::fs::create_dir(ws.join("state")).unwrap();
    std::fs::write(ws.join("seen"), "x").unwrap();
    let mut workspace = Workspace::new(&ws).unwrap();
    workspace.protect(&ws.join("state"));
    let files = Arc::new(Files::new(&workspace, &[]).unwrap());
    let got = call(&files, Op::List, json!({ "path": p(&ws) })).await;
    assert_eq!(got["entries"].as_array().unwrap().len(), 1, "{got}");
    let inside = call(&files, Op::List, json!({ "path": p(&ws.join("state")) })).await;
    assert_eq!(inside["code"], "PROTECTED_PATH", "{inside}");
}

#[tokio::test]
async fn file_write_creates_exclusively_then_overwrites_in_place() {
    let s = setup();
    let path = p(&s.ws.join("n.txt"));
    let params = json!({ "path": path, "contentBase64": "aGk=", "expectedSha256": sha(b"hi") });
    let (pre, got) = both(&s.files, Op::Write, params.clone()).await;
    assert_eq!(pre["binding"]["kind"], "write", "{pre}");
    assert_eq!(pre["binding"]["anchorPath"], p(&s.ws));
    assert!(pre["binding"].get("targetInode").is_none());
    assert_eq!(got["ok"], true, "{got}");
    assert_eq!(got["overwritten"], false);
    assert_eq!(got["binding"]["kind"], "existing");
    assert_eq!(std::fs::read(s.ws.join("n.txt")).unwrap(), b"hi");
    let again = call(&s.files, Op::Write, params.clone()).await;
    assert_eq!(again["code"], "EXISTS_NO_OVERWRITE", "{again}");
    let inode = std::fs::metadata(s.ws.join("n.txt")).unwrap().ino();
    let mut over =
        json!({ "path": path, "contentBase64": b64(b"longer content"), "overwrite": true });
    over["expectedSha256"] = json!(sha(b"longer content").to_uppercase());
    let (pre, got) = both(&s.files, Op::Write, over).await;
    assert_eq!(pre["binding"]["targetInode"], inode.to_string());
    assert_eq!(got["overwritten"], true, "{got}");
    assert_eq!(
        std::fs::read(s.ws.join("n.txt")).unwrap(),
        b"longer content"
    );
    assert_eq!(std::fs::metadata(s.ws.join("n.txt")).unwrap().ino(), inode);
}

#[tokio::test]
async fn file_write_checks_parents_base64_and_integrity() {
    let s = setup();
    let deep = p(&s.ws.join("x/y/z.txt"));
    let got = call(
        &s.files,
        Op::Write,
        json!({ "path": deep, "contentBase64": "aGk=" }),
    )
    .await;
    assert_eq!(got["code"], "PARENT_NOT_FOUND", "{got}");
    assert_eq!(
        got["message"],
        format!("parent directory does not exist: {}", p(&s.ws.join("x/y")))
    );
    let (pre, got) = both(
        &s.files,
        Op::Write,
        json!({ "path": deep, "contentBase64": "aGk=", "createParents": true }),
    )
    .await;
    assert_eq!(pre["binding"]["anchorPath"], p(&s.ws), "{pre}");
    assert!(!s.ws.join("x").exists() || got["ok"] == true);
    assert_eq!(got["ok"], true, "{got}");
    assert_eq!(std::fs::read(s.ws.join("x/y/z.txt")).unwrap(), b"hi");
    for (content, ok) in [
        ("aGk", true),     // missing padding
        ("-_8=", true),    // url-safe alphabet
        ("aGk =", false),  // whitespace
        ("aGl=", false),   // bits a canonical encoding would not carry
        ("a", false),      // one character left over
        ("aGk===", false), // too much padding
        ("", true),        // an empty file
    ] {
        let got = call(
            &s.files,
            Op::Write,
            json!({ "path": p(&s.ws.join("b64")), "contentBase64": content, "overwrite": true, "preflightOnly": true }),
        )
        .await;
        assert_eq!(got["ok"] == true, ok, "{content:?}: {got}");
        if !ok {
            assert_eq!(got["code"], "INVALID_BASE64", "{got}");
        }
    }
    let missing = call(&s.files, Op::Write, json!({ "path": p(&s.ws.join("m")) })).await;
    assert_eq!(missing["message"], "contentBase64 is required");
    let wrong = call(
        &s.files,
        Op::Write,
        json!({ "path": p(&s.ws.join("w")), "contentBase64": "aGk=", "expectedSha256": sha(b"no") }),
    )
    .await;
    assert_eq!(wrong["code"], "INTEGRITY_FAILURE", "{wrong}");
    assert!(!s.ws.join("w").exists());
    let huge = "A".repeat(((16 << 20) + 3) / 3 * 4);
    let got = call(
        &s.files,
        Op::Write,
        json!({ "path": p(&s.ws.join("h")), "contentBase64": huge }),
    )
    .await;
    assert_eq!(got["code"], "FILE_TOO_LARGE", "{got}");
}

#[tokio::test]
async fn file_write_never_goes_through_a_symlink() {
    let s = setup();
    std::os::unix::fs::symlink(s.outside.join("secret.txt"), s.ws.join("target")).unwrap();
    std::os::unix::fs::symlink(&s.outside, s.ws.join("dir")).unwrap();
    let through_target = call(
        &s.files,
        Op::Write,
        json!({ "path": p(&s.ws.join("target")), "contentBase64": "aGk=", "overwrite": true }),
    )
    .await;
    assert_eq!(
        through_target["code"], "SYMLINK_REDIRECT",
        "{through_target}"
    );
    let followed = call(
        &s.files,
        Op::Write,
        json!({ "path": p(&s.ws.join("target")), "contentBase64": "aGk=", "overwrite": true, "followSymlinks": true }),
    )
    .await;
    assert_eq!(followed["ok"], false, "{followed}");
    let through_parent = call(
        &s.files,
        Op::Write,
        json!({ "path": p(&s.ws.join("dir/new.txt")), "contentBase64": "aGk=", "followSymlinks": true }),
    )
    .await;
    assert_eq!(through_parent["code"], OUTSIDE, "{through_parent}");
    assert_eq!(
        std::fs::read(s.outside.join("secret.txt")).unwrap(),
        b"outside\n"
    );
    assert!(!s.outside.join("new.txt").exists());
}

#[tokio::test]
async fn file_write_hardlink_rejection_is_echoed_and_honoured() {
    let s = setup();
    let path = p(&s.ws.join("a.txt"));
    let pre = call(
        &s.files,
        Op::Write,
        json!({ "path": path, "contentBase64": "aGk=", "overwrite": true, "rejectHardlinks": true, "preflightOnly": true }),
    )
    .await;
    assert_eq!(pre["rejectHardlinks"], true, "{pre}");
    std::fs::hard_link(s.ws.join("a.txt"), s.ws.join("twin")).unwrap();
    let got = call(
        &s.files,
        Op::Write,
        json!({ "path": path, "contentBase64": "aGk=", "overwrite": true, "rejectHardlinks": true }),
    )
    .await;
    assert_eq!(got["code"], "HARDLINK_TARGET_DENIED", "{got}");
}

#[tokio::test]
async fn a_file_with_a_name_outside_the_roots_is_never_overwritten_through_its_name_inside() {
    // pnpm's store, a backup's twin: the same inode outside every root.
    let s = setup();
    let outside = s.outside.join("store.js");
    std::fs::write(&outside, "original").unwrap();
    std::fs::hard_link(&outside, s.ws.join("index.js")).unwrap();
    let got = call(
        &s.files,
        Op::Write,
        json!({ "path": p(&s.ws.join("index.js")), "contentBase64": "aGk=", "overwrite": true }),
    )
    .await;
    assert_eq!(got["code"], "HARDLINK_TARGET_DENIED", "{got}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "original");
}

#[tokio::test]
async fn a_write_through_a_link_outside_never_names_where_it_leads() {
    let s = setup();
    std::os::unix::fs::symlink(&s.outside, s.ws.join("cfg")).unwrap();
    let got = call(
        &s.files,
        Op::Write,
        json!({ "path": p(&s.ws.join("cfg/x")), "contentBase64": "", "followSymlinks": true,
                "expectedCanonicalPath": "/elsewhere" }),
    )
    .await;
    assert_eq!(got["code"], "PATH_OUTSIDE_WORKSPACE", "{got}");
    assert!(
        !got.to_string().contains(s.outside.to_str().unwrap()),
        "{got}"
    );
    assert!(!s.outside.join("x").exists());
}

#[tokio::test]
async fn a_write_target_created_or_replaced_after_the_preflight_is_not_written() {
    let s = setup();
    let path = p(&s.ws.join("race.txt"));
    let params = json!({ "path": path, "contentBase64": "aGk=", "overwrite": true });
    let mut pre_params = params.clone();
    pre_params["preflightOnly"] = json!(true);
    let pre = call(&s.files, Op::Write, pre_params.clone()).await;
    std::fs::write(s.ws.join("race.txt"), "someone else's").unwrap();
    let mut real = params.clone();
    real["expectedCanonicalPath"] = pre["path"].clone();
    real["expectedBinding"] = pre["binding"].clone();
    let got = call(&s.files, Op::Write, real).await;
    assert_eq!(got["code"], "CANONICAL_PATH_CHANGED", "{got}");
    assert_eq!(
        std::fs::read(s.ws.join("race.txt")).unwrap(),
        b"someone else's"
    );
    // An existing target replaced by another file.
    let pre = call(&s.files, Op::Write, pre_params).await;
    std::fs::rename(s.ws.join("race.txt"), s.ws.join("race.old")).unwrap();
    std::fs::write(s.ws.join("race.txt"), "replacement").unwrap();
    let mut real = params;
    real["expectedCanonicalPath"] = pre["path"].clone();
    real["expectedBinding"] = pre["binding"].clone();
    let got = call(&s.files, Op::Write, real).await;
    assert_eq!(got["code"], "CANONICAL_PATH_CHANGED", "{got}");
    assert_eq!(
        std::fs::read(s.ws.join("race.txt")).unwrap(),
        b"replacement"
    );
}

#[tokio::test]
async fn dir_fetch_archives_the_tree_it_named_at_preflight() {
    let s = setup();
    let tree = s.ws.join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("one.txt"), "1").unwrap();
    std::fs::write(tree.join("sub/two.txt"), "2").unwrap();
    let (pre, got) = both(&s.files, Op::Archive, json!({ "path": p(&tree) })).await;
    assert_eq!(
        pre["entries"],
        json!(["one.txt", "sub", "sub/two.txt"]),
        "{pre}"
    );
    assert_eq!(pre["fileCount"], 3);
    assert_eq!(pre["tarBase64"], "");
    assert_eq!(got["ok"], true, "{got}");
    let tar = base64::engine::general_purpose::STANDARD
        .decode(got["tarBase64"].as_str().unwrap())
        .unwrap();
    assert_eq!(got["tarBytes"], tar.len());
    assert_eq!(got["sha256"], sha(&tar));
    let saved = s.outside.join("t.tgz");
    std::fs::write(&saved, &tar).unwrap();
    let listed = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(&saved)
        .output()
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    for name in ["./one.txt", "./sub/", "./sub/two.txt"] {
        assert!(listed.lines().any(|l| l == name), "{name} in {listed}");
    }
}

#[tokio::test]
async fn dir_fetch_refuses_at_preflight_what_the_gateway_would_refuse() {
    let s = setup();
    let tree = s.ws.join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", tree.join("link")).unwrap();
    let got = call(
        &s.files,
        Op::Archive,
        json!({ "path": p(&tree), "preflightOnly": true }),
    )
    .await;
    assert_eq!(got["code"], "UNSUPPORTED_FILE_TYPE", "{got}");
    std::fs::remove_file(tree.join("link")).unwrap();
    // One name in the tree, the other outside: not archived either.
    std::fs::hard_link(s.outside.join("secret.txt"), tree.join("twin")).unwrap();
    let got = call(
        &s.files,
        Op::Archive,
        json!({ "path": p(&tree), "preflightOnly": true }),
    )
    .await;
    assert_eq!(got["code"], "UNSUPPORTED_FILE_TYPE", "{got}");
    std::fs::remove_file(tree.join("twin")).unwrap();
    for i in 0..=MAX_TREE_ENTRIES {
        std::fs::write(tree.join(format!("f{i}")), "").unwrap();
    }
    let got = call(
        &s.files,
        Op::Archive,
        json!({ "path": p(&tree), "preflightOnly": true }),
    )
    .await;
    assert_eq!(got["code"], "TREE_TOO_LARGE", "{got}");
    assert_eq!(
        got["message"],
        "directory tree exceeds 5000 entries during preflight"
    );
}

#[tokio::test]
async fn dir_fetch_refuses_a_tree_holding_our_state_or_a_huge_file() {
    let holder = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(holder.path()).unwrap();
    std::fs::create_dir_all(ws.join("state")).unwrap();
    std::fs::write(ws.join("state/key"), "k").unwrap();
    let mut workspace = Workspace::new(&ws).unwrap();
    workspace.protect(&ws.join("state"));
    let files = Arc::new(Files::new(&workspace, &[]).unwrap());
    let got = call(&files, Op::Archive, json!({ "path": p(&ws) })).await;
    assert_eq!(got["code"], "PROTECTED_PATH", "{got}");
    std::fs::create_dir(ws.join("big")).unwrap();
    std::fs::File::create(ws.join("big/sparse"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let got = call(&files, Op::Archive, json!({ "path": p(&ws.join("big")) })).await;
    assert_eq!(got["code"], "TREE_TOO_LARGE", "{got}");
}
