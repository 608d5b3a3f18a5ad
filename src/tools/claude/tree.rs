//! The projects root and what is in it: the project directories, which of
//! them hold a `sessions-index.json`, and the `*.jsonl` names the
//! discovery may scan (at most 10,000 in all, as OpenClaw's
//! `MAX_CATALOG_DISCOVERY_FILES`).
//!
//! Owns the confinement: every file these commands read is opened through
//! [`Root::open`], which walks down from the root's real path one
//! component at a time without following a link (`openat` +
//! `O_NOFOLLOW`), refuses anything but a regular file *before* opening it
//! (a FIFO would block, a device could act), and checks that what it
//! opened is the file that was vetted. Must never read outside the root,
//! whatever an index entry or a link says.

use std::collections::BinaryHeap;
use std::ffi::OsStr;
use std::fs::File;
use std::path::{Component, Path, PathBuf};

use super::{Check, Failure, Stop, js};

/// `*.jsonl` names the discovery takes, across all project directories.
pub const MAX_DISCOVERY_FILES: usize = 10_000;
/// Project directories read: past this many the rest are left out (OpenClaw
/// has no bound; one is needed for bounded memory).
pub const MAX_PROJECT_DIRS: usize = 10_000;

/// A session file found safe to read: its real path and identity as it
/// was vetted.
#[derive(Debug, Clone, PartialEq)]
pub struct SafeFile {
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
}

/// The projects root of one call: its path as configured and its real path.
pub struct Root {
    pub dir: PathBuf,
    pub resolved: PathBuf,
}

pub struct ProjectDir {
    /// The directory under the root as configured (`<root>/<name>`), the
    /// path an index entry's `fullPath` names.
    pub path: PathBuf,
    pub has_index: bool,
    /// The `*.jsonl` names it contributes to the discovery, in byte order
    /// (Node's `readdir` order); `None` for a name that is not UTF-8 (it
    /// counts towards the bound, as in OpenClaw, but names no session).
    pub jsonl: Vec<Option<String>>,
}

/// The root, or none: a root that does not exist or cannot be read lists
/// nothing (OpenClaw's "unavailable" snapshot).
pub fn snapshot(dir: &Path, stop: Stop) -> Result<Option<(Root, Vec<ProjectDir>)>, Failure> {
    let Some(root) = Root::at(dir) else {
        return Ok(None);
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut names = Vec::new();
    for entry in entries.flatten() {
        // The entry's own type: a link to a directory is not a project.
        if entry.file_type().is_ok_and(|t| t.is_dir())
            && let Ok(name) = entry.file_name().into_string()
        {
            names.push(name);
            if names.len() >= MAX_PROJECT_DIRS {
                break;
            }
        }
    }
    names.sort_by(|a, b| js::locale_compare(a, b));
    let mut dirs = Vec::with_capacity(names.len());
    let mut left = MAX_DISCOVERY_FILES;
    for name in names {
        stop.check()?;
        let path = dir.join(&name);
        dirs.push(project_dir(path, &mut left, stop)?);
    }
    Ok(Some((root, dirs)))
}

/// One project directory, read as a stream: the smallest `left` names
/// ending in `.jsonl` are kept (a bounded heap), however many there are.
fn project_dir(path: PathBuf, left: &mut usize, stop: Stop) -> Result<ProjectDir, Failure> {
    let mut has_index = false;
    let mut heap: BinaryHeap<Vec<u8>> = BinaryHeap::new();
    let mut seen = 0usize;
    if let Ok(entries) = std::fs::read_dir(&path) {
        for (n, entry) in entries.flatten().enumerate() {
            if n % 4096 == 0 {
                stop.check()?;
            }
            let name = entry.file_name();
            let bytes = name.as_encoded_bytes();
            if bytes == b"sessions-index.json" {
                has_index = true;
            }
            if !bytes.ends_with(b".jsonl") {
                continue;
            }
            seen += 1;
            if *left == 0 {
                continue;
            }
            if heap.len() < *left {
                heap.push(bytes.to_vec());
            } else if heap.peek().is_some_and(|max| bytes < max.as_slice()) {
                heap.pop();
                heap.push(bytes.to_vec());
            }
        }
    }
    *left -= seen.min(*left);
    let jsonl = heap
        .into_sorted_vec()
        .into_iter()
        .map(|b| String::from_utf8(b).ok())
        .collect();
    Ok(ProjectDir {
        path,
        has_index,
        jsonl,
    })
}

impl Root {
    /// The root at `dir`, when it resolves.
    pub fn at(dir: &Path) -> Option<Root> {
        Some(Root {
            dir: dir.to_path_buf(),
            resolved: std::fs::canonicalize(dir).ok()?,
        })
    }

    /// OpenClaw's `safeSessionFile`: `candidate` (absolute, or relative to
    /// our working directory, as `path.resolve` takes it) lies under the
    /// root, is named `<id>.jsonl`, resolves inside the root's real path,
    /// and is a regular file there. Anything else is no file at all.
    pub fn vet(&self, candidate: &Path, id: &str) -> Option<SafeFile> {
        let candidate = crate::tools::js::resolve(candidate)?;
        if !candidate.starts_with(&self.dir)
            || candidate.file_name() != Some(OsStr::new(&format!("{id}.jsonl")))
        {
            return None;
        }
        let real = std::fs::canonicalize(&candidate).ok()?;
        let (dev, ino) = self.stat_beneath(&real)?;
        Some(SafeFile {
            path: real,
            dev,
            ino,
        })
    }

    /// The vetted file, opened: still a regular file inside the root, and
    /// still the same one.
    pub fn open(&self, file: &SafeFile) -> Option<File> {
        let opened = open_beneath(&self.resolved, &file.path)?;
        same_file(&opened, file).then_some(opened)
    }

    /// A regular file at this real path inside the root, opened.
    pub fn open_real(&self, real: &Path) -> Option<File> {
        open_beneath(&self.resolved, real)
    }

    /// A regular file's identity, reached from the root without following
    /// a link.
    fn stat_beneath(&self, real: &Path) -> Option<(u64, u64)> {
        stat_beneath(&self.resolved, real)
    }
}

/// The components of `real` below `root`, all plain names; none when it
/// is not below it.
fn below<'a>(root: &Path, real: &'a Path) -> Option<Vec<&'a OsStr>> {
    let rel = real.strip_prefix(root).ok()?;
    let parts: Option<Vec<&OsStr>> = rel
        .components()
        .map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    parts.filter(|p| !p.is_empty())
}

#[cfg(unix)]
mod walk {
    use std::ffi::{CString, OsStr};
    use std::fs::File;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    use super::{SafeFile, below};

    fn c(name: &OsStr) -> Option<CString> {
        CString::new(name.as_bytes()).ok()
    }

    /// The directory holding the last component, reached from `root`
    /// one directory at a time, never through a link; and that last name.
    fn parent_of<'a>(root: &Path, real: &'a Path) -> Option<(OwnedFd, &'a OsStr)> {
        let parts = below(root, real)?;
        let (last, dirs) = parts.split_last()?;
        let root = c(root.as_os_str())?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: plain open(2)/openat(2) calls on NUL-terminated names;
        // every fd returned is owned at once.
        let mut dir = unsafe {
            let fd = libc::open(root.as_ptr(), flags);
            (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))?
        };
        for part in dirs {
            let name = c(part)?;
            dir = unsafe {
                let fd = libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_NOFOLLOW);
                (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))?
            };
        }
        Some((dir, last))
    }

    /// A regular file's identity, the name itself not followed.
    fn regular_at(dir: &OwnedFd, name: &CString) -> Option<(u64, u64)> {
        // SAFETY: fstatat(2) into a stat we own.
        let st = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            let rc = libc::fstatat(
                dir.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            );
            (rc == 0).then_some(st)?
        };
        (st.st_mode & libc::S_IFMT == libc::S_IFREG).then_some((st.st_dev as u64, st.st_ino as u64))
    }

    pub fn stat_beneath(root: &Path, real: &Path) -> Option<(u64, u64)> {
        let (dir, last) = parent_of(root, real)?;
        regular_at(&dir, &c(last)?)
    }

    pub fn open_beneath(root: &Path, real: &Path) -> Option<File> {
        let (dir, last) = parent_of(root, real)?;
        let name = c(last)?;
        // Looked at before it is opened: only a regular file is opened at
        // all, and without blocking should it have become a FIFO since.
        regular_at(&dir, &name)?;
        let flags =
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: openat(2); the fd is owned at once.
        let file = unsafe {
            let fd = libc::openat(dir.as_raw_fd(), name.as_ptr(), flags);
            (fd >= 0).then(|| File::from_raw_fd(fd))?
        };
        file.metadata().ok().filter(|m| m.is_file())?;
        Some(file)
    }

    pub fn same_file(file: &File, vetted: &SafeFile) -> bool {
        file.metadata()
            .is_ok_and(|m| m.dev() == vetted.dev && m.ino() == vetted.ino)
    }
}

#[cfg(not(unix))]
mod walk {
    use std::fs::File;
    use std::path::Path;

    use super::{SafeFile, below};

    pub fn stat_beneath(root: &Path, real: &Path) -> Option<(u64, u64)> {
        below(root, real)?;
        let meta = std::fs::symlink_metadata(real).ok()?;
        meta.is_file().then_some((0, 0))
    }

    pub fn open_beneath(root: &Path, real: &Path) -> Option<File> {
        stat_beneath(root, real)?;
        let file = File::open(real).ok()?;
        file.metadata().ok().filter(|m| m.is_file())?;
        Some(file)
    }

    pub fn same_file(_file: &File, _vetted: &SafeFile) -> bool {
        true
    }
}

use walk::{open_beneath, same_file, stat_beneath};

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn never() -> bool {
        false
    }

    fn root(dir: &Path) -> Root {
        Root {
            dir: dir.to_path_buf(),
            resolved: std::fs::canonicalize(dir).unwrap(),
        }
    }

    #[test]
    fn a_link_out_of_the_root_is_no_file() {
        let tmp = tempfile::tempdir().unwrap();
        let projects = tmp.path().join("projects");
        std::fs::create_dir_all(projects.join("p")).unwrap();
        std::fs::write(tmp.path().join("secret.jsonl"), "x").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret.jsonl"), projects.join("p/s.jsonl"))
            .unwrap();
        std::os::unix::fs::symlink(tmp.path(), projects.join("out")).unwrap();
        let r = root(&projects);
        assert_eq!(r.vet(&projects.join("p/s.jsonl"), "s"), None);
        assert_eq!(r.vet(&projects.join("out/secret.jsonl"), "secret"), None);
        assert_eq!(r.vet(&tmp.path().join("secret.jsonl"), "secret"), None);
        assert_eq!(
            r.vet(&projects.join("p/../../secret.jsonl"), "secret"),
            None
        );
        // The wrong name for the id, and a directory named like a file.
        std::fs::write(projects.join("p/a.jsonl"), "x").unwrap();
        assert_eq!(r.vet(&projects.join("p/a.jsonl"), "b"), None);
        std::fs::create_dir(projects.join("p/d.jsonl")).unwrap();
        assert_eq!(r.vet(&projects.join("p/d.jsonl"), "d"), None);
        assert!(r.vet(&projects.join("p/a.jsonl"), "a").is_some());
    }

    #[test]
    fn a_link_inside_the_root_is_followed_to_its_real_path() {
        let tmp = tempfile::tempdir().unwrap();
        let projects = tmp.path().join("projects");
        std::fs::create_dir_all(projects.join("p")).unwrap();
        std::fs::write(projects.join("p/a.jsonl"), "x").unwrap();
        std::os::unix::fs::symlink("a.jsonl", projects.join("p/b.jsonl")).unwrap();
        let r = root(&projects);
        let vetted = r.vet(&projects.join("p/b.jsonl"), "b");
        // b.jsonl's real name is a.jsonl: OpenClaw checks the name asked for.
        assert_eq!(vetted.map(|f| f.path), Some(r.resolved.join("p/a.jsonl")));
    }

    #[test]
    fn a_fifo_is_never_opened() {
        let tmp = tempfile::tempdir().unwrap();
        let projects = tmp.path().join("projects");
        std::fs::create_dir_all(projects.join("p")).unwrap();
        let fifo = projects.join("p/f.jsonl");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let r = root(&projects);
        assert_eq!(r.vet(&fifo, "f"), None);
    }

    #[test]
    fn a_file_swapped_after_it_was_vetted_is_not_opened() {
        let tmp = tempfile::tempdir().unwrap();
        let projects = tmp.path().join("projects");
        std::fs::create_dir_all(projects.join("p")).unwrap();
        std::fs::write(projects.join("p/a.jsonl"), "one").unwrap();
        let r = root(&projects);
        let vetted = r.vet(&projects.join("p/a.jsonl"), "a").unwrap();
        assert!(r.open(&vetted).is_some());
        std::fs::remove_file(projects.join("p/a.jsonl")).unwrap();
        std::fs::write(tmp.path().join("other"), "two").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("other"), projects.join("p/a.jsonl")).unwrap();
        assert!(r.open(&vetted).is_none());
        std::fs::remove_file(projects.join("p/a.jsonl")).unwrap();
        std::fs::write(projects.join("p/a.jsonl"), "three").unwrap();
        assert!(r.open(&vetted).is_none(), "a new inode is another file");
    }

    #[test]
    fn the_discovery_keeps_the_first_ten_thousand_names_in_byte_order() {
        let tmp = tempfile::tempdir().unwrap();
        let projects = tmp.path().join("projects");
        std::fs::create_dir_all(projects.join("a")).unwrap();
        std::fs::create_dir_all(projects.join("b")).unwrap();
        for i in (0..MAX_DISCOVERY_FILES + 1).rev() {
            std::fs::write(projects.join(format!("a/{i:05}.jsonl")), "").unwrap();
        }
        std::fs::write(projects.join("b/z.jsonl"), "").unwrap();
        std::fs::write(projects.join("b/sessions-index.json"), "{}").unwrap();
        std::os::unix::fs::symlink(projects.join("b"), projects.join("c")).unwrap();
        let (_, dirs) = snapshot(&projects, &never).unwrap().unwrap();
        assert_eq!(dirs.len(), 2, "a linked directory is no project");
        assert_eq!(dirs[0].jsonl.len(), MAX_DISCOVERY_FILES);
        assert_eq!(dirs[0].jsonl[0].as_deref(), Some("00000.jsonl"));
        assert_eq!(dirs[0].jsonl[9_999].as_deref(), Some("09999.jsonl"));
        assert!(dirs[1].jsonl.is_empty() && dirs[1].has_index);
    }

    #[test]
    fn no_root_lists_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(
            snapshot(&tmp.path().join("none"), &never)
                .unwrap()
                .is_none()
        );
    }
}
