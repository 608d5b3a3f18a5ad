//! The file tools the agent calls: read, list, search and write.
//!
//! Owns turning tool parameters into filesystem work and shaping the JSON
//! answers. Every path an agent sends goes through the [`Workspace`](super::sandbox::Workspace)
//! resolvers first; this module has no path check of its own and must never
//! grow one. Walks start from a resolved directory and descend only into real
//! directories, never through symlinks, so they cannot leave it. Must never
//! load more of a file than a cap allows, follow a symlinked directory,
//! create directories, or leave a half-written file behind.
//!
//! One file per tool (`read`, `list`, `search`, `write`) and the one walk
//! the listing and the search share (`walk`).

mod list;
mod read;
mod search;
mod walk;
mod write;

pub use list::list_files;
pub use read::read_file;
pub use search::search_files;
pub use write::{WriteFile, write_file};

#[cfg(test)]
mod tests {
    use super::list::ListFiles;
    use super::read::ReadFile;
    use super::search::{SEARCH_MAX_FILE_BYTES, SEARCH_MAX_LINE_CHARS, SearchFiles};
    use super::*;
    use crate::tools::ToolError;
    use crate::tools::sandbox::Workspace;
    use serde_json::{Value, json};
    use std::fs::{self, Permissions};
    use tempfile::TempDir;

    fn setup() -> (TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::new(dir.path()).expect("workspace");
        (dir, ws)
    }

    fn put(ws: &Workspace, rel: &str, content: &[u8]) {
        let path = ws.root().join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(path, content).expect("write");
    }

    fn read(ws: &Workspace, path: &str, max_lines: Option<usize>, max_bytes: usize) -> Value {
        let p = ReadFile {
            path: path.into(),
            max_lines,
        };
        read_file(ws, p, max_bytes).expect("read_file")
    }

    fn list(ws: &Workspace, path: Option<&str>, pattern: Option<&str>, recursive: bool) -> Value {
        let p = ListFiles {
            path: path.map(Into::into),
            pattern: pattern.map(Into::into),
            recursive: Some(recursive),
        };
        list_files(ws, p, 100).expect("list_files")
    }

    fn names(listing: &Value) -> Vec<String> {
        let entries = listing["entries"].as_array().cloned().unwrap_or_default();
        entries
            .iter()
            .filter_map(|e| e["name"].as_str().map(String::from))
            .collect()
    }

    fn search(ws: &Workspace, query: &str, content: bool, max: usize) -> Value {
        let p = SearchFiles {
            query: query.into(),
            search_content: Some(content),
            path: None,
        };
        search_files(ws, p, max).expect("search_files")
    }

    fn write(ws: &Workspace, path: &str, content: &str) -> Result<Value, ToolError> {
        let p = WriteFile {
            path: path.into(),
            content: content.into(),
        };
        write_file(ws, p)
    }

    #[test]
    fn params_deserialize_from_camel_case() {
        let r: ReadFile =
            serde_json::from_value(json!({"path": "a", "maxLines": 3, "extra": 1})).expect("read");
        assert_eq!(r.max_lines, Some(3));
        let s: SearchFiles =
            serde_json::from_value(json!({"query": "q", "searchContent": true})).expect("search");
        assert_eq!(s.search_content, Some(true));
        assert_eq!(s.path, None);
        let l: ListFiles = serde_json::from_value(json!({})).expect("list");
        assert_eq!((l.path, l.pattern, l.recursive), (None, None, None));
    }

    #[test]
    fn read_returns_whole_small_file() {
        let (_dir, ws) = setup();
        put(&ws, "docs/a.txt", b"one\ntwo\n");
        let got = read(&ws, "docs/a.txt", None, 1000);
        let want = json!({
            "path": "docs/a.txt", "content": "one\ntwo\n", "truncated": false, "bytes": 8,
            "binary": false,
        });
        assert_eq!(got, want);
    }

    #[test]
    fn read_respects_max_lines_and_max_bytes() {
        let (_dir, ws) = setup();
        put(&ws, "a.txt", b"one\ntwo\nthree\n");
        let by_lines = read(&ws, "a.txt", Some(2), 1000);
        assert_eq!(by_lines["content"], "one\ntwo\n");
        assert_eq!(by_lines["truncated"], true);
        assert_eq!(by_lines["bytes"], 14);
        let by_bytes = read(&ws, "a.txt", None, 5);
        assert_eq!(by_bytes["content"], "one\nt");
        assert_eq!(by_bytes["truncated"], true);
        let exact = read(&ws, "a.txt", Some(3), 14);
        assert_eq!(exact["truncated"], false);
    }

    #[test]
    fn read_cut_does_not_split_a_character() {
        let (_dir, ws) = setup();
        put(&ws, "u.txt", "aé".as_bytes());
        let got = read(&ws, "u.txt", None, 2);
        assert_eq!(got["content"], "a");
        assert_eq!(got["truncated"], true);
    }

    #[test]
    fn invalid_utf8_is_replaced_lossily() {
        let (_dir, ws) = setup();
        put(&ws, "l.txt", b"ok\xffok");
        assert_eq!(read(&ws, "l.txt", None, 100)["content"], "ok\u{fffd}ok");
    }

    #[test]
    fn binary_file_is_flagged() {
        let (_dir, ws) = setup();
        put(&ws, "b.bin", b"\x89PNG\0\0garbage");
        let got = read(&ws, "b.bin", None, 1000);
        assert_eq!(got["binary"], true);
        assert_eq!(got["content"], "");
        assert_eq!(got["bytes"], 13);
    }

    #[test]
    fn read_refusals_have_codes() {
        let (_dir, ws) = setup();
        put(&ws, "d/a.txt", b"x");
        let code = |path: &str, max_lines| {
            let p = ReadFile {
                path: path.into(),
                max_lines,
            };
            read_file(&ws, p, 10).expect_err("refused").code
        };
        assert_eq!(code("d", None), "NOT_A_FILE");
        assert_eq!(code("d/missing.txt", None), "NOT_FOUND");
        assert_eq!(code("d/a.txt", Some(0)), "INVALID_PARAMS");
        assert_eq!(code("../x", None), "PATH_OUTSIDE_WORKSPACE");
    }

    #[test]
    fn list_is_sorted_with_types_and_sizes() {
        let (_dir, ws) = setup();
        put(&ws, "b.txt", b"12345");
        put(&ws, ".hidden", b"");
        put(&ws, "a/inner.txt", b"x");
        let got = list(&ws, None, None, false);
        let want = json!({
            "path": ".",
            "entries": [
                {"name": ".hidden", "type": "file", "size": 0},
                {"name": "a", "type": "dir"},
                {"name": "b.txt", "type": "file", "size": 5},
            ],
            "truncated": false,
        });
        assert_eq!(got, want);
        let nested = list(&ws, Some("a"), None, false);
        assert_eq!(nested["path"], "a");
        assert_eq!(names(&nested), ["inner.txt"]);
    }

    #[test]
    fn list_recursive_walks_depth_first() {
        let (_dir, ws) = setup();
        put(&ws, "a/x/deep.txt", b"");
        put(&ws, "a/y.txt", b"");
        put(&ws, "b.txt", b"");
        let got = list(&ws, None, None, true);
        assert_eq!(
            names(&got),
            ["a", "a/x", "a/x/deep.txt", "a/y.txt", "b.txt"]
        );
    }

    #[cfg(unix)]
    #[test]
    fn list_recursive_does_not_follow_symlinked_dirs() {
        let (_dir, ws) = setup();
        put(&ws, "real/file.txt", b"");
        std::os::unix::fs::symlink("real", ws.root().join("link")).expect("link");
        let got = list(&ws, None, None, true);
        assert_eq!(names(&got), ["link", "real", "real/file.txt"]);
        assert_eq!(got["entries"][0]["type"], "symlink");
    }

    #[cfg(unix)]
    #[test]
    fn walks_pass_over_a_protected_file_under_every_name() {
        let (_dir, mut ws) = setup();
        put(&ws, "keys/token", b"needle-secret");
        put(&ws, "notes.txt", b"needle-free");
        ws.protect(&ws.root().join("keys/token"));
        fs::hard_link(ws.root().join("keys/token"), ws.root().join("alias")).expect("link");
        std::os::unix::fs::symlink("keys/token", ws.root().join("pointer")).expect("link");
        let listed = list(&ws, None, None, true);
        assert_eq!(names(&listed), ["keys", "notes.txt"], "{listed}");
        let by_content = search(&ws, "needle", true, 100);
        let paths: Vec<&str> = by_content["matches"]
            .as_array()
            .expect("matches")
            .iter()
            .filter_map(|m| m["path"].as_str())
            .collect();
        assert_eq!(paths, ["notes.txt"], "{by_content}");
        let by_name = search(&ws, "o", false, 100);
        assert!(!by_name.to_string().contains("token"), "{by_name}");
        assert!(!by_name.to_string().contains("pointer"), "{by_name}");
        assert!(!by_name.to_string().contains("alias"), "{by_name}");
    }

    #[test]
    fn list_pattern_filters_names() {
        let (_dir, ws) = setup();
        put(&ws, "README.md", b"");
        put(&ws, "main.rs", b"");
        put(&ws, "docs/guide.md", b"");
        assert_eq!(names(&list(&ws, None, Some("*.md"), false)), ["README.md"]);
        assert_eq!(
            names(&list(&ws, None, Some("*.md"), true)),
            ["README.md", "docs/guide.md"]
        );
    }

    #[test]
    fn list_respects_max_entries() {
        let (_dir, ws) = setup();
        for name in ["a", "b", "c"] {
            put(&ws, name, b"");
        }
        let everything = || ListFiles {
            path: None,
            pattern: None,
            recursive: None,
        };
        let cut = list_files(&ws, everything(), 2).expect("list");
        assert_eq!(names(&cut), ["a", "b"]);
        assert_eq!(cut["truncated"], true);
        assert_eq!(
            list_files(&ws, everything(), 3).expect("list")["truncated"],
            false
        );
    }

    #[test]
    fn bad_glob_is_invalid_params() {
        let (_dir, ws) = setup();
        let p = ListFiles {
            path: None,
            pattern: Some("[".into()),
            recursive: None,
        };
        let err = list_files(&ws, p, 10).expect_err("bad glob");
        assert_eq!(err.code, "INVALID_PARAMS");
        assert!(err.message.contains("\"[\""), "{}", err.message);
    }

    #[test]
    fn list_on_a_file_is_not_a_directory() {
        let (_dir, ws) = setup();
        put(&ws, "f.txt", b"");
        let p = ListFiles {
            path: Some("f.txt".into()),
            pattern: None,
            recursive: None,
        };
        assert_eq!(
            list_files(&ws, p, 10).expect_err("file").code,
            "NOT_A_DIRECTORY"
        );
    }

    #[test]
    fn search_by_name_and_content() {
        let (_dir, ws) = setup();
        put(&ws, "notes/Todo.md", b"nothing here\n");
        put(&ws, "src/lib.rs", b"fn main() {}\n    // TODO: fix   \n");
        let names_only = search(&ws, "todo", false, 10);
        assert_eq!(
            names_only["matches"],
            json!([{"path": "notes/Todo.md", "kind": "name"}])
        );
        let both = search(&ws, "todo", true, 10);
        let want = json!({
            "query": "todo",
            "matches": [
                {"path": "notes/Todo.md", "kind": "name"},
                {"path": "src/lib.rs", "kind": "content", "line": 2, "text": "// TODO: fix"},
            ],
            "truncated": false,
        });
        assert_eq!(both, want);
    }

    #[test]
    fn search_skips_git_and_node_modules() {
        let (_dir, ws) = setup();
        for skipped in [".git", "node_modules", "target"] {
            put(&ws, &format!("{skipped}/needle.txt"), b"needle");
        }
        put(&ws, "keep/needle.txt", b"needle");
        let got = search(&ws, "needle", true, 10);
        let paths: Vec<_> = got["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| m["path"].clone())
            .collect();
        assert_eq!(paths, [json!("keep/needle.txt"), json!("keep/needle.txt")]);
    }

    #[test]
    fn search_skips_binary_and_large_files() {
        let (_dir, ws) = setup();
        put(&ws, "bin", b"needle\0");
        let mut big = b"needle\n".to_vec();
        big.resize(SEARCH_MAX_FILE_BYTES + 1, b'x');
        put(&ws, "big", &big);
        assert_eq!(search(&ws, "needle", true, 10)["matches"], json!([]));
    }

    #[test]
    fn search_clips_long_lines_and_caps_matches() {
        let (_dir, ws) = setup();
        let long = format!("needle {}\nneedle\nneedle\n", "é".repeat(400));
        put(&ws, "f.txt", long.as_bytes());
        let got = search(&ws, "NEEDLE", true, 2);
        assert_eq!(got["truncated"], true);
        let first = got["matches"][0]["text"].as_str().unwrap_or_default();
        assert_eq!(first.chars().count(), SEARCH_MAX_LINE_CHARS);
        assert_eq!(got["matches"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn search_blank_query_is_invalid_params() {
        let (_dir, ws) = setup();
        let p = SearchFiles {
            query: "  ".into(),
            search_content: None,
            path: None,
        };
        assert_eq!(
            search_files(&ws, p, 10).expect_err("blank").code,
            "INVALID_PARAMS"
        );
    }

    #[test]
    fn write_creates_and_replaces() {
        let (_dir, ws) = setup();
        let created = write(&ws, "new.txt", "héllo").expect("write");
        assert_eq!(
            created,
            json!({"path": "new.txt", "bytes": 6, "created": true})
        );
        let replaced = write(&ws, "new.txt", "bye").expect("write");
        assert_eq!(replaced["created"], false);
        assert_eq!(
            fs::read_to_string(ws.root().join("new.txt")).expect("read"),
            "bye"
        );
    }

    #[cfg(unix)]
    #[test]
    fn write_is_atomic_and_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, ws) = setup();
        put(&ws, "script.sh", b"old");
        let path = ws.root().join("script.sh");
        fs::set_permissions(&path, Permissions::from_mode(0o750)).expect("chmod");
        write(&ws, "script.sh", "new").expect("write");
        assert_eq!(fs::read_to_string(&path).expect("read"), "new");
        let mode = fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o7777, 0o750);
        let left: Vec<_> = fs::read_dir(ws.root())
            .expect("ls")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, ["script.sh"], "no temporary file may remain");
    }

    #[cfg(unix)]
    #[test]
    fn new_file_gets_ordinary_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, ws) = setup();
        write(&ws, "fresh.txt", "x").expect("write");
        let mode = fs::metadata(ws.root().join("fresh.txt"))
            .expect("stat")
            .permissions()
            .mode();
        // Readable by the group as well unless the umask says otherwise; not tempfile's 0600.
        assert_ne!(mode & 0o777, 0o600);
    }

    #[cfg(unix)]
    #[test]
    fn write_through_symlink_inside_replaces_target() {
        let (_dir, ws) = setup();
        put(&ws, "real.txt", b"old");
        std::os::unix::fs::symlink("real.txt", ws.root().join("link.txt")).expect("link");
        let got = write(&ws, "link.txt", "new").expect("write");
        assert_eq!(got["path"], "real.txt");
        assert!(
            fs::symlink_metadata(ws.root().join("link.txt"))
                .expect("stat")
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(ws.root().join("real.txt")).expect("read"),
            "new"
        );
    }

    #[test]
    fn write_refuses_read_only_file() {
        let (_dir, ws) = setup();
        put(&ws, "locked.txt", b"keep");
        let path = ws.root().join("locked.txt");
        let mut perms = fs::metadata(&path).expect("stat").permissions();
        perms.set_readonly(true);
        fs::set_permissions(&path, perms).expect("chmod");
        let err = write(&ws, "locked.txt", "x").expect_err("read-only");
        assert_eq!(err.code, "IO_ERROR");
        assert!(err.message.contains("permission denied"), "{}", err.message);
        assert_eq!(fs::read_to_string(&path).expect("read"), "keep");
    }

    #[test]
    fn write_does_not_create_directories() {
        let (_dir, ws) = setup();
        let err = write(&ws, "missing/dir/f.txt", "x").expect_err("no parent");
        assert_eq!(err.code, "NOT_FOUND");
        assert!(!ws.root().join("missing").exists());
    }

    #[test]
    fn write_into_dir_path_is_not_a_file() {
        let (_dir, ws) = setup();
        fs::create_dir(ws.root().join("d")).expect("mkdir");
        assert_eq!(write(&ws, "d", "x").expect_err("dir").code, "NOT_A_FILE");
        assert!(ws.root().join("d").is_dir());
    }
}
