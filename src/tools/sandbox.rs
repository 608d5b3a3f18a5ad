//! Workspace confinement: turns a path string sent by the agent into a real
//! path that lies inside the workspace root.
//!
//! Owns the only path check the tools have. Every tool resolves what the
//! agent sent through [`Workspace::resolve_existing`] or
//! [`Workspace::resolve_for_write`]; nothing else decides whether a path is
//! allowed. This module must never read or change file contents, create
//! anything, or name in a message an outside path the caller did not send
//! (where a symlink leads stays unsaid).
//!
//! Two checks, both required. A lexical one on the text as sent, so that a
//! `..` climbing out is refused as outside even when nothing exists there;
//! then a canonical one after the OS resolved every symlink, so that a link
//! inside the workspace cannot carry a tool outside. The guarantee holds at
//! resolution time: a local process that swaps a directory for a symlink
//! between the check and the use is beyond it (the agent itself has no tool
//! that makes symlinks).
//!
//! Protected places (our state, OpenClaw's, the files we read a secret
//! from) are refused inside the workspace too, under any name: by path, by
//! what a symlink leads to, and by identity (device and inode, on Unix), so
//! a hard link to a protected file, or a bind mount of a protected
//! directory, is refused as the original is. A file inside a protected
//! directory that has other links is looked for among that directory's
//! files, once per call that meets such a file (most meet none; the look
//! is bounded, see [`TWIN_SCAN`]).

use std::cell::OnceCell;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::ToolError;

#[derive(Debug, Clone)]
pub struct Workspace {
    /// Canonical: every resolved path is compared against this.
    root: PathBuf,
    /// The root as configured, when that spelling differs from the canonical
    /// one (e.g. through a symlinked home), so absolute paths the agent was
    /// told in that spelling are recognised too.
    given: Option<PathBuf>,
    /// Places inside the root no tool may touch: the node's own state
    /// (private key, tokens, approvals) and OpenClaw's (config, credentials).
    protected: Vec<PathBuf>,
    /// The same places by identity: another name (a hard link, a bind
    /// mount) leads to the same file.
    identities: Vec<Identity>,
}

/// What a file is whatever its name: its device and inode (Unix; none
/// elsewhere, where the path alone protects).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(not(unix), allow(dead_code))]
struct Identity {
    device: u64,
    inode: u64,
}

impl Identity {
    #[cfg(unix)]
    fn of(meta: &fs::Metadata) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        Some(Self {
            device: meta.dev(),
            inode: meta.ino(),
        })
    }

    #[cfg(not(unix))]
    fn of(_meta: &fs::Metadata) -> Option<Self> {
        None
    }
}

/// Whether a regular file has other names than this one.
#[cfg(unix)]
fn has_other_links(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.is_file() && meta.nlink() > 1
}

#[cfg(not(unix))]
fn has_other_links(_meta: &fs::Metadata) -> bool {
    false
}

/// Entries of the protected directories looked at, at most, for the
/// other links of a file with several: past that, a hard link into the
/// workspace of a file deeper in a huge protected tree is not recognised
/// (its path and what links to it by symlink still are).
const TWIN_SCAN: usize = 50_000;

/// One call's view of what is protected (see the module's documentation):
/// it gathers the protected files that have other links the first time it
/// meets a file with several links, and keeps them for the rest of the call.
pub struct Screen<'a> {
    ws: &'a Workspace,
    twins: OnceCell<HashSet<Identity>>,
}

impl Screen<'_> {
    /// Whether `path` — an entry a walk met (a symlink is judged by what it
    /// leads to), or a resolved path — is protected.
    pub fn hides(&self, path: &Path) -> bool {
        if self.ws.protected.iter().any(|p| path.starts_with(p)) {
            return true;
        }
        let Ok(meta) = fs::symlink_metadata(path) else {
            return false;
        };
        if meta.file_type().is_symlink() {
            return fs::canonicalize(path)
                .is_ok_and(|real| !real.is_symlink() && self.hides(&real));
        }
        let Some(identity) = Identity::of(&meta) else {
            return false;
        };
        self.ws.identities.contains(&identity)
            || has_other_links(&meta) && self.twins().contains(&identity)
    }

    /// The identities of the protected files that have other links.
    fn twins(&self) -> &HashSet<Identity> {
        self.twins.get_or_init(|| {
            let mut found = HashSet::new();
            let mut budget = TWIN_SCAN;
            let mut pending: Vec<PathBuf> = self.ws.protected.clone();
            while let Some(path) = pending.pop() {
                let Ok(meta) = fs::symlink_metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    let Ok(entries) = fs::read_dir(&path) else {
                        continue;
                    };
                    let entries: Vec<PathBuf> = entries
                        .filter_map(|e| e.ok().map(|e| e.path()))
                        .take(budget)
                        .collect();
                    budget -= entries.len();
                    pending.extend(entries);
                } else if has_other_links(&meta) {
                    found.extend(Identity::of(&meta));
                }
            }
            found
        })
    }
}

impl Workspace {
    pub fn new(root: &Path) -> io::Result<Self> {
        let canonical = fs::canonicalize(root)?;
        if !canonical.is_dir() {
            let message = format!("workspace root {} is not a directory", root.display());
            return Err(io::Error::new(io::ErrorKind::NotADirectory, message));
        }
        let given = configured_spelling(root, &canonical);
        Ok(Self {
            root: canonical,
            given,
            protected: Vec::new(),
            identities: Vec::new(),
        })
    }

    /// Another root under the same protection: what this workspace keeps
    /// out of every tool's reach stays out of reach under `root` too (the
    /// owner's `--file-root` directories).
    pub fn rooted_at(&self, root: &Path) -> io::Result<Self> {
        let mut other = Self::new(root)?;
        other.protected = self.protected.clone();
        other.identities = self.identities.clone();
        Ok(other)
    }

    /// Whether an absolute, normalised path lies under the root as
    /// spelled canonically or as configured (judged on the text alone).
    pub fn contains_spelling(&self, path: &Path) -> bool {
        std::iter::once(&self.root)
            .chain(&self.given)
            .any(|root| path.starts_with(root))
    }

    /// Puts `path` (a file or a directory, existing or not) out of every
    /// tool's reach, even when it lies inside the workspace, under any name.
    pub fn protect(&mut self, path: &Path) {
        let real = fs::canonicalize(path)
            .ok()
            .or_else(|| normalize(path).filter(|p| p.is_absolute()));
        self.protected.extend(real);
        let identity = fs::metadata(path).ok().as_ref().and_then(Identity::of);
        self.identities.extend(identity);
    }

    /// One call's view of what is protected, for a walk.
    pub fn screen(&self) -> Screen<'_> {
        Screen {
            ws: self,
            twins: OnceCell::new(),
        }
    }

    /// True for a resolved path that is protected or lies below a protected
    /// place, under any of their names.
    pub fn is_protected(&self, real: &Path) -> bool {
        if self.screen().hides(real) {
            return true;
        }
        // A directory of the workspace may be a protected one under another
        // name (a bind mount): every level down to `real` is looked at.
        real.ancestors()
            .skip(1)
            .take_while(|dir| dir.starts_with(&self.root))
            .filter_map(|dir| fs::metadata(dir).ok())
            .filter_map(|meta| Identity::of(&meta))
            .any(|identity| self.identities.contains(&identity))
    }

    fn unprotected(&self, path: &str, real: PathBuf) -> Result<PathBuf, ToolError> {
        if self.is_protected(&real) {
            let message = format!(
                "{path:?} belongs to the node's or OpenClaw's own state (keys, tokens, approvals, credentials), which agents may not touch"
            );
            return Err(ToolError::new("PROTECTED_PATH", message));
        }
        Ok(real)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// An existing path the tools may read or list.
    pub fn resolve_existing(&self, path: &str) -> Result<PathBuf, ToolError> {
        let rel = self.confine_lexically(path)?;
        let real = fs::canonicalize(self.root.join(rel)).map_err(|e| unresolvable(path, &e))?;
        let real = self.require_inside(path, real)?;
        self.unprotected(path, real)
    }

    /// A path a tool may create or replace: it may not exist yet; its parent directory must exist.
    pub fn resolve_for_write(&self, path: &str) -> Result<PathBuf, ToolError> {
        let rel = self.confine_lexically(path)?;
        let name = name_to_write(path, &rel)?;
        let parent = self.existing_parent(path, &rel)?;
        let real = self.through_symlink(path, parent.join(name))?;
        // A link may lead to a directory, the root itself among them, whose
        // parent is outside: a write's target is a file, refused here
        // before anything is placed beside it.
        if fs::metadata(&real).is_ok_and(|m| m.is_dir()) {
            let shown = self.display(&real);
            let message = format!("{shown:?} is a directory; give the path of a file to write");
            return Err(ToolError::new("NOT_A_FILE", message));
        }
        self.unprotected(path, real)
    }

    /// The path relative to the root, with `/` separators, for display in results.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => slash_joined(rel),
            // Callers pass resolved paths, so an outside path never gets here.
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    /// The path as sent, made relative to the root and free of `.` and `..`,
    /// or refused as outside before anything on disk is consulted.
    fn confine_lexically(&self, path: &str) -> Result<PathBuf, ToolError> {
        require_usable(path)?;
        let sent = Path::new(path);
        let rel = if sent.is_absolute() {
            self.strip_root(sent)
        } else {
            normalize(sent)
        };
        // A relative path can still carry a drive prefix on Windows ("C:x").
        rel.filter(|r| r.components().all(|c| matches!(c, Component::Normal(_))))
            .ok_or_else(|| self.outside(path, ""))
    }

    fn strip_root(&self, absolute: &Path) -> Option<PathBuf> {
        let normal = normalize(absolute)?;
        std::iter::once(&self.root)
            .chain(&self.given)
            .find_map(|root| normal.strip_prefix(root).ok())
            .map(Path::to_path_buf)
    }

    fn existing_parent(&self, path: &str, rel: &Path) -> Result<PathBuf, ToolError> {
        let parent_rel = rel.parent().unwrap_or(Path::new(""));
        let parent = fs::canonicalize(self.root.join(parent_rel)).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => missing_parent(path),
            _ => unresolvable(path, &e),
        })?;
        let parent = self.require_inside(path, parent)?;
        if !parent.is_dir() {
            let message = format!("the parent of {path:?} is not a directory");
            return Err(ToolError::new("NOT_A_DIRECTORY", message));
        }
        Ok(parent)
    }

    /// Writing through a link replaces its target, not the link, so the
    /// target is what must be inside (and must exist, since its own parent
    /// would otherwise go unchecked).
    fn through_symlink(&self, path: &str, target: PathBuf) -> Result<PathBuf, ToolError> {
        match fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let real = fs::canonicalize(&target).map_err(|e| match e.kind() {
                    io::ErrorKind::NotFound => dangling(path),
                    _ => unresolvable(path, &e),
                })?;
                self.require_inside(path, real)
            }
            Ok(_) => Ok(target),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(target),
            Err(e) => Err(ToolError::from_io(path, &e)),
        }
    }

    /// The lexical check already passed, so a canonical path outside can only
    /// come from a symlink on the way.
    fn require_inside(&self, path: &str, real: PathBuf) -> Result<PathBuf, ToolError> {
        if real.starts_with(&self.root) {
            Ok(real)
        } else {
            Err(self.outside(path, ": it goes through a symlink that leads outside"))
        }
    }

    fn outside(&self, path: &str, why: &str) -> ToolError {
        let root = self.root.display();
        let message = format!("path {path:?} is outside the workspace {root}{why}");
        ToolError::new("PATH_OUTSIDE_WORKSPACE", message)
    }
}

/// Keeps the configured spelling only if it really names the same directory;
/// a lexical `..` after a symlink could otherwise alias somewhere else.
fn configured_spelling(root: &Path, canonical: &Path) -> Option<PathBuf> {
    let spelled = normalize(&std::path::absolute(root).ok()?)?;
    let same = fs::canonicalize(&spelled).is_ok_and(|c| c == canonical);
    (same && spelled != canonical).then_some(spelled)
}

fn require_usable(path: &str) -> Result<(), ToolError> {
    if path.is_empty() {
        let message = "path must not be empty; use \".\" for the workspace root";
        return Err(ToolError::new("INVALID_PARAMS", message));
    }
    if path.contains('\0') {
        let message = format!("path {path:?} contains a NUL byte");
        return Err(ToolError::new("INVALID_PARAMS", message));
    }
    Ok(())
}

/// Resolves `.` and `..` on the text alone; `None` when `..` climbs above
/// where the path starts.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    let mut depth = 0usize;
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                depth = depth.checked_sub(1)?;
                out.pop();
            }
            Component::Normal(name) => {
                depth += 1;
                out.push(name);
            }
            Component::Prefix(_) | Component::RootDir => out.push(part),
        }
    }
    Some(out)
}

/// Checked on the text as sent because `Path::components` silently drops a
/// trailing `.` and separator, which would turn "dir/." into "dir".
fn name_to_write<'a>(path: &str, rel: &'a Path) -> Result<&'a OsStr, ToolError> {
    let last = path.rsplit(std::path::is_separator).next().unwrap_or("");
    let names_a_file = !matches!(last, "" | "." | "..");
    rel.file_name().filter(|_| names_a_file).ok_or_else(|| {
        let message =
            format!("path {path:?} does not name a file (it ends in a separator, \".\" or \"..\")");
        ToolError::new("INVALID_PARAMS", message)
    })
}

fn unresolvable(path: &str, err: &io::Error) -> ToolError {
    match err.kind() {
        io::ErrorKind::NotFound => {
            let message = format!("path {path:?} does not exist in the workspace");
            ToolError::new("NOT_FOUND", message)
        }
        io::ErrorKind::NotADirectory => {
            let message = format!("path {path:?} goes through a file as if it were a directory");
            ToolError::new("NOT_A_DIRECTORY", message)
        }
        _ => ToolError::from_io(path, err),
    }
}

fn missing_parent(path: &str) -> ToolError {
    let message = format!(
        "the parent directory of {path:?} does not exist; directories are not created automatically"
    );
    ToolError::new("NOT_FOUND", message)
}

fn dangling(path: &str) -> ToolError {
    let message =
        format!("{path:?} is a symlink whose target does not exist; refusing to write through it");
    ToolError::new("NOT_FOUND", message)
}

fn slash_joined(rel: &Path) -> String {
    let parts: Vec<_> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    fn setup() -> (TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::new(dir.path()).expect("workspace");
        fs::create_dir(ws.root().join("sub")).expect("mkdir");
        fs::write(ws.root().join("sub/file.txt"), "hi").expect("write");
        (dir, ws)
    }

    fn code(result: Result<PathBuf, ToolError>) -> &'static str {
        result.expect_err("should be refused").code
    }

    #[test]
    fn relative_path_resolves_inside() {
        let (_dir, ws) = setup();
        let got = ws.resolve_existing("sub/file.txt").expect("resolves");
        assert_eq!(got, ws.root().join("sub/file.txt"));
        assert_eq!(ws.resolve_existing(".").expect("root"), ws.root());
        assert_eq!(
            ws.resolve_existing("./sub/../sub/file.txt").expect("ok"),
            got
        );
    }

    #[test]
    fn dotdot_escape_is_refused() {
        let (_dir, ws) = setup();
        let err = ws.resolve_existing("../etc/passwd").expect_err("refused");
        assert_eq!(err.code, "PATH_OUTSIDE_WORKSPACE");
        assert!(err.message.contains("\"../etc/passwd\""), "{}", err.message);
        assert!(err.message.contains(&ws.root().display().to_string()));
        // Refused as outside even though nothing by that name exists.
        assert_eq!(
            code(ws.resolve_existing("sub/../../nowhere")),
            "PATH_OUTSIDE_WORKSPACE"
        );
        assert_eq!(
            code(ws.resolve_for_write("../new.txt")),
            "PATH_OUTSIDE_WORKSPACE"
        );
    }

    #[test]
    fn absolute_path_outside_is_refused() {
        let (_dir, ws) = setup();
        assert_eq!(
            code(ws.resolve_existing("/etc/passwd")),
            "PATH_OUTSIDE_WORKSPACE"
        );
        assert_eq!(
            code(ws.resolve_for_write("/tmp/evil.txt")),
            "PATH_OUTSIDE_WORKSPACE"
        );
        let sneaky = format!("{}/../x", ws.root().display());
        assert_eq!(code(ws.resolve_existing(&sneaky)), "PATH_OUTSIDE_WORKSPACE");
    }

    #[test]
    fn absolute_path_inside_is_accepted() {
        let (_dir, ws) = setup();
        let abs = ws.root().join("sub/file.txt");
        let text = abs.to_str().expect("utf-8 temp path");
        assert_eq!(ws.resolve_existing(text).expect("inside"), abs);
        assert_eq!(ws.resolve_for_write(text).expect("inside"), abs);
    }

    #[cfg(unix)]
    #[test]
    fn symlink_leading_out_is_refused_for_read() {
        let (_dir, ws) = setup();
        let outside = tempfile::tempdir().expect("tempdir");
        fs::write(outside.path().join("secret"), "s").expect("write");
        std::os::unix::fs::symlink(outside.path(), ws.root().join("out")).expect("link");
        let err = ws.resolve_existing("out/secret").expect_err("refused");
        assert_eq!(err.code, "PATH_OUTSIDE_WORKSPACE");
        assert!(err.message.contains("symlink"), "{}", err.message);
        let target = outside.path().display().to_string();
        assert!(
            !err.message.contains(&target),
            "must not reveal the link target"
        );
    }

    /// The fuzzer's find: a link to the root itself (`up -> sub/..`)
    /// resolved as a write target whose parent is outside.
    #[cfg(unix)]
    #[test]
    fn a_directory_is_no_write_target_even_through_a_link() {
        let (_dir, ws) = setup();
        std::os::unix::fs::symlink("sub/..", ws.root().join("up")).expect("link");
        std::os::unix::fs::symlink("sub", ws.root().join("in")).expect("link");
        for path in ["up", "in", "sub", "sub/../sub"] {
            let err = ws.resolve_for_write(path).expect_err(path);
            assert_eq!(err.code, "NOT_A_FILE", "{path}: {}", err.message);
            assert!(err.message.contains("is a directory"), "{}", err.message);
        }
        assert_eq!(
            ws.resolve_for_write("in/new.txt")
                .expect("a new file through the link"),
            ws.root().join("sub/new.txt")
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlink_leading_out_is_refused_for_write() {
        let (_dir, ws) = setup();
        let outside = tempfile::tempdir().expect("tempdir");
        let secret = outside.path().join("secret");
        fs::write(&secret, "s").expect("write");
        std::os::unix::fs::symlink(&secret, ws.root().join("file-link")).expect("link");
        std::os::unix::fs::symlink(outside.path(), ws.root().join("dir-link")).expect("link");
        let err = ws.resolve_for_write("file-link").expect_err("refused");
        assert_eq!(err.code, "PATH_OUTSIDE_WORKSPACE");
        assert!(err.message.contains("symlink"), "{}", err.message);
        assert_eq!(
            code(ws.resolve_for_write("dir-link/new.txt")),
            "PATH_OUTSIDE_WORKSPACE"
        );
    }

    #[cfg(unix)]
    #[test]
    fn dangling_symlink_is_not_written_through() {
        let (_dir, ws) = setup();
        std::os::unix::fs::symlink("/nonexistent/x", ws.root().join("dangling")).expect("link");
        assert_eq!(code(ws.resolve_for_write("dangling")), "NOT_FOUND");
    }

    #[cfg(unix)]
    #[test]
    fn symlink_inside_is_followed() {
        let (_dir, ws) = setup();
        std::os::unix::fs::symlink("sub", ws.root().join("alias")).expect("link");
        std::os::unix::fs::symlink("sub/file.txt", ws.root().join("f")).expect("link");
        let real = ws.root().join("sub/file.txt");
        assert_eq!(ws.resolve_existing("alias/file.txt").expect("ok"), real);
        assert_eq!(ws.resolve_for_write("f").expect("ok"), real);
        assert_eq!(
            ws.resolve_for_write("alias/new.txt").expect("ok"),
            ws.root().join("sub/new.txt")
        );
    }

    #[cfg(unix)]
    #[test]
    fn root_configured_through_symlink_accepts_both_spellings() {
        let (_dir, ws) = setup();
        let holder = tempfile::tempdir().expect("tempdir");
        let link = holder.path().join("ws-link");
        std::os::unix::fs::symlink(ws.root(), &link).expect("link");
        let via_link = Workspace::new(&link).expect("workspace");
        assert_eq!(via_link.root(), ws.root());
        let spelled = link.join("sub/file.txt");
        let got = via_link
            .resolve_existing(spelled.to_str().expect("utf-8"))
            .expect("ok");
        assert_eq!(got, ws.root().join("sub/file.txt"));
    }

    #[cfg(unix)]
    #[test]
    fn a_protected_file_is_refused_under_every_name_inside_the_workspace() {
        let (_dir, mut ws) = setup();
        let secret = ws.root().join("sub/token");
        fs::write(&secret, "s3cret").expect("write");
        ws.protect(&secret);
        fs::hard_link(&secret, ws.root().join("hard")).expect("hard link");
        std::os::unix::fs::symlink(&secret, ws.root().join("soft")).expect("symlink");
        for name in ["sub/token", "hard", "soft"] {
            assert_eq!(code(ws.resolve_existing(name)), "PROTECTED_PATH", "{name}");
            assert_eq!(code(ws.resolve_for_write(name)), "PROTECTED_PATH", "{name}");
        }
        assert_eq!(
            ws.resolve_existing("sub/file.txt").expect("ok"),
            ws.root().join("sub/file.txt")
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_hard_link_to_a_file_inside_a_protected_directory_is_refused() {
        let (_dir, mut ws) = setup();
        let state = tempfile::tempdir().expect("tempdir");
        fs::create_dir(state.path().join("operator")).expect("mkdir");
        // Written after the directory was protected: caught all the same.
        ws.protect(state.path());
        let key = state.path().join("operator/device-identity.json");
        fs::write(&key, "{}").expect("write");
        fs::hard_link(&key, ws.root().join("innocent.json")).expect("hard link");
        assert_eq!(code(ws.resolve_existing("innocent.json")), "PROTECTED_PATH");
        // A file that merely has another link of its own is not refused.
        fs::hard_link(ws.root().join("sub/file.txt"), ws.root().join("twin.txt")).expect("link");
        assert!(ws.resolve_existing("twin.txt").is_ok());
    }

    #[test]
    fn nul_in_path_is_refused() {
        let (_dir, ws) = setup();
        assert_eq!(code(ws.resolve_existing("sub/\0file")), "INVALID_PARAMS");
        assert_eq!(code(ws.resolve_for_write("a\0")), "INVALID_PARAMS");
    }

    #[test]
    fn empty_path_is_refused() {
        let (_dir, ws) = setup();
        assert_eq!(code(ws.resolve_existing("")), "INVALID_PARAMS");
        assert_eq!(code(ws.resolve_for_write("")), "INVALID_PARAMS");
    }

    #[test]
    fn missing_path_is_not_found() {
        let (_dir, ws) = setup();
        let err = ws.resolve_existing("sub/nope.txt").expect_err("missing");
        assert_eq!(err.code, "NOT_FOUND");
        assert!(err.message.contains("\"sub/nope.txt\""), "{}", err.message);
        assert_eq!(
            code(ws.resolve_existing("sub/file.txt/x")),
            "NOT_A_DIRECTORY"
        );
    }

    #[test]
    fn write_target_may_be_new_but_parent_must_exist() {
        let (_dir, ws) = setup();
        let got = ws.resolve_for_write("sub/new.txt").expect("ok");
        assert_eq!(got, ws.root().join("sub/new.txt"));
        assert_eq!(code(ws.resolve_for_write("nodir/new.txt")), "NOT_FOUND");
        assert_eq!(
            code(ws.resolve_for_write("sub/file.txt/new.txt")),
            "NOT_A_DIRECTORY"
        );
    }

    #[test]
    fn write_name_must_not_be_dot_dotdot_or_trailing_separator() {
        let (_dir, ws) = setup();
        for path in [".", "sub/.", "sub/..", "sub/", "./"] {
            assert_eq!(code(ws.resolve_for_write(path)), "INVALID_PARAMS", "{path}");
        }
    }

    #[test]
    fn display_is_root_relative_with_slashes() {
        let (_dir, ws) = setup();
        assert_eq!(ws.display(ws.root()), ".");
        assert_eq!(
            ws.display(&ws.root().join("sub").join("file.txt")),
            "sub/file.txt"
        );
    }

    #[test]
    fn root_must_be_a_directory() {
        let (_dir, ws) = setup();
        assert!(Workspace::new(&ws.root().join("sub/file.txt")).is_err());
        assert!(Workspace::new(&ws.root().join("missing")).is_err());
    }
}
