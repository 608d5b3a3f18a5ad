//! A Claude Code configuration directory for a test: the fixture
//! (tests/fixtures/claude) copied into a temporary directory, its index's
//! paths made real, and the files' times set so the order is known.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub const A: &str = "11111111-1111-4111-8111-111111111111";
pub const B: &str = "22222222-2222-4222-8222-222222222222";
pub const C: &str = "33333333-3333-4333-8333-333333333333";
pub const F: &str = "66666666-6666-4666-8666-666666666666";

/// `CLAUDE_CONFIG_DIR` holding a copy of the fixture.
pub struct ClaudeDir {
    pub dir: tempfile::TempDir,
}

impl ClaudeDir {
    pub fn fixture() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude");
        copy_tree(&from, dir.path());
        let me = ClaudeDir { dir };
        let projects = me.projects();
        let index = projects.join("-tmp-proj/sessions-index.json");
        let text = std::fs::read_to_string(&index).unwrap();
        std::fs::write(
            &index,
            text.replace("/PROJECTS", projects.to_str().unwrap()),
        )
        .unwrap();
        // JSONL-only sessions are as recent as their files: F, then B.
        me.touch(&format!("-tmp-other/{F}.jsonl"), 1_748_908_800);
        me.touch(&format!("-tmp-proj/{B}.jsonl"), 1_748_822_400);
        me
    }

    /// An empty configuration directory (no projects at all).
    pub fn empty() -> Self {
        ClaudeDir {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Its real path (what the node resolves).
    pub fn projects(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path())
            .unwrap()
            .join("projects")
    }

    pub fn touch(&self, rel: &str, epoch_secs: u64) {
        let file = std::fs::File::options()
            .write(true)
            .open(self.projects().join(rel))
            .unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(epoch_secs))
            .unwrap();
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The base64url cursor of a byte offset, as both nodes write it.
pub fn cursor(offset: u64) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{{\"offset\":{offset}}}"))
}
