//! The built-in forbidden rules: what no remote agent may run here, whoever
//! approved it — privilege escalation, powering off, and wiping the disk or
//! the system (recursive removal of `/`, the home directory or a system
//! directory; writing a disk device).
//!
//! A rule is judged on the command line as a shell would run it
//! ([`super::cmdline`]): quotes and escapes undone, variables and `~`
//! expanded, `cd` followed, wrappers and nested shells looked through, and
//! each target path normalised (`//`, `/./`, `..`, trailing slashes, the
//! working directory, globs, symlinks on the way) before it is compared —
//! never a list of spellings. It is a guard rail against an agent's
//! obvious mistakes, not a sandbox: a program can always do what its
//! command line does not say.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::cmdline::{self, Command, Reading, Word, base, lexical};
use super::policy::Exec;

/// Programs no remote agent may run here, wherever they appear.
const PROGRAMS: &[&str] = &[
    "sudo", "su", "doas", "pkexec", "shutdown", "reboot", "poweroff", "halt", "mkfs",
];

/// Directories whose direct children are system directories too
/// (`/usr/bin`, `/var/lib`, `/etc/ssh`, `/home/alice`); the children of any
/// other top-level directory (`/tmp/x`, `/mnt/usb`, `/opt/app`) are not.
const SYSTEM_PARENTS: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/sys",
    "/usr",
    "/usr/local",
    "/var",
];

/// The rule `exec` breaks, if any.
pub fn rule_broken(exec: &Exec) -> Option<String> {
    let reading = read(exec);
    if reading.incomplete {
        return Some("its command line is too large or too deeply nested to be checked".into());
    }
    let program = base(&exec.executable.to_string_lossy()).to_owned();
    let home = home();
    std::iter::once(program.as_str())
        .chain(reading.words())
        .find_map(forbidden_program)
        .or_else(|| reading.commands.iter().find_map(powers_off))
        .or_else(|| {
            reading
                .commands
                .iter()
                .find_map(|c| removes_the_system(c, &home))
        })
        .or_else(|| reading.commands.iter().find_map(writes_a_disk))
}

/// How the command line reads, with the variables its programs would see.
pub fn read(exec: &Exec) -> Reading {
    let mut vars: HashMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| !super::SECRET_VARS.contains(&k.as_str()))
        .collect();
    vars.extend(exec.env.iter().cloned());
    vars.insert("HOME".into(), home().to_string_lossy().into_owned());
    cmdline::read(&exec.argv, &exec.cwd, vars)
}

/// The home directory commands run with (the node's own).
fn home() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"))
}

fn forbidden_program(word: &str) -> Option<String> {
    let name = base(word);
    PROGRAMS
        .iter()
        .any(|f| name == *f || (*f == "mkfs" && name.starts_with("mkfs.")))
        .then(|| format!("{name} is never run for a remote agent"))
}

/// `systemctl poweroff`, `init 0` and the like.
fn powers_off(command: &Command) -> Option<String> {
    let program = base(&command.words.first()?.text);
    let verbs: &[&str] = match program {
        "systemctl" | "loginctl" => &["poweroff", "reboot", "halt", "kexec", "soft-reboot"],
        "init" | "telinit" => &["0", "6"],
        _ => return None,
    };
    command.words[1..]
        .iter()
        .any(|w| verbs.contains(&w.text.as_str()))
        .then(|| format!("{program} would power off or restart this machine"))
}

/// `rm -r` (any spelling of it) or `find … -delete` of `/`, the home
/// directory, a system directory, or anything that holds one.
fn removes_the_system(command: &Command, home: &Path) -> Option<String> {
    let program = base(&command.words.first()?.text);
    let targets: Vec<&Word> = match program {
        "rm" => {
            let (recursive, operands) = rm_arguments(&command.words[1..]);
            if !recursive {
                return None;
            }
            operands
        }
        "find" if command.words.iter().any(|w| w.text == "-delete") => {
            let starts: Vec<&Word> = command.words[1..]
                .iter()
                .skip_while(|w| matches!(w.text.as_str(), "-H" | "-L" | "-P"))
                .take_while(|w| !w.text.starts_with(['-', '(', '!']))
                .collect();
            if starts.is_empty() {
                return dangerous(
                    &Word {
                        text: ".".into(),
                        glob: false,
                    },
                    &command.cwd,
                    home,
                )
                .map(|t| format!("find -delete of a system or home directory ({t})"));
            }
            starts
        }
        _ => return None,
    };
    targets
        .into_iter()
        .find_map(|w| dangerous(w, &command.cwd, home))
        .map(|t| format!("recursive removal of a system or home directory ({t})"))
}

/// Whether `rm`'s options ask for recursion, and its operands. As GNU rm
/// reads them: options anywhere until `--`, clustered or apart.
fn rm_arguments(args: &[Word]) -> (bool, Vec<&Word>) {
    let mut recursive = false;
    let mut operands = Vec::new();
    let mut options = true;
    for word in args {
        let t = word.text.as_str();
        if options && t == "--" {
            options = false;
        } else if options && t.starts_with("--") {
            recursive |= "--recursive".starts_with(t) && t.len() >= 3;
        } else if options && t.starts_with('-') && t.len() > 1 {
            recursive |= t[1..].contains(['r', 'R']);
        } else {
            operands.push(word);
        }
    }
    (recursive, operands)
}

/// The protected directory a removal target names or holds, if any.
fn dangerous(word: &Word, cwd: &Path, home: &Path) -> Option<String> {
    if word.text.is_empty() {
        return None;
    }
    let absolute = lexical(&cwd.join(&word.text));
    let mut forms = vec![absolute.clone()];
    // Where the kernel would take it: symlinks on the way resolved, the
    // last one followed only with a trailing slash (as rm does).
    let trailing = word.text.ends_with('/') || word.text.ends_with("/.");
    if trailing {
        forms.extend(std::fs::canonicalize(&absolute).ok());
    } else if let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) {
        forms.extend(std::fs::canonicalize(parent).ok().map(|p| p.join(name)));
    }
    for form in forms {
        if word.glob {
            if let Some(hit) = glob_hits_protected(&form, home) {
                return Some(hit);
            }
        } else if is_protected(&form, home) {
            return Some(form.to_string_lossy().into_owned());
        }
    }
    None
}

/// `/`, any top-level directory, the children of a system directory, the
/// home directory and everything above it.
fn is_protected(path: &Path, home: &Path) -> bool {
    let depth = path.components().count().saturating_sub(1);
    depth <= 1
        || path
            .parent()
            .is_some_and(|p| SYSTEM_PARENTS.iter().any(|s| p == Path::new(s)))
        || home.starts_with(path)
}

/// A glob pattern that could name a protected directory, or empty one (a
/// last component that matches everything: `/*`, `~/.*`, `/usr/**`).
fn glob_hits_protected(pattern: &Path, home: &Path) -> Option<String> {
    let text = pattern.to_string_lossy();
    let last = pattern
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    if let (Some(last), Some(parent)) = (last, pattern.parent())
        && catch_all(&last)
    {
        let parent_protected = if parent.to_string_lossy().contains(['*', '?', '[']) {
            glob_hits_protected(parent, home).is_some()
        } else {
            is_protected(parent, home)
        };
        if parent_protected {
            return Some(text.into_owned());
        }
    }
    let matcher = globset::GlobBuilder::new(&text)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .ok()?
        .compile_matcher();
    candidates(home)
        .into_iter()
        .find(|c| matcher.is_match(c))
        .map(|c| format!("{text}, which matches {}", c.display()))
}

/// A glob component with no literal name in it: it matches everything.
fn catch_all(component: &str) -> bool {
    component.contains(['*', '?', '['])
        && component
            .chars()
            .all(|c| matches!(c, '*' | '?' | '.' | '[' | ']' | '!' | '^' | '{' | '}' | ','))
}

/// The protected directories that exist here (and the usual ones that do
/// not), for matching globs against.
fn candidates(home: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = vec![PathBuf::from("/")];
    let children = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.path())
                    .take(10_000)
                    .collect()
            })
            .unwrap_or_default()
    };
    out.extend(children(Path::new("/")));
    for parent in SYSTEM_PARENTS {
        out.push(PathBuf::from(parent));
        out.extend(children(Path::new(parent)));
    }
    out.extend(home.ancestors().map(Path::to_path_buf));
    out
}

/// `dd of=DEVICE`, `> DEVICE`, `shred|wipefs|blkdiscard DEVICE`: a write to
/// a disk device.
fn writes_a_disk(command: &Command) -> Option<String> {
    let program = command.words.first().map(|w| base(&w.text)).unwrap_or("");
    let mut paths: Vec<&str> = command.redirects.iter().map(|w| w.text.as_str()).collect();
    match program {
        "dd" => paths.extend(
            command.words[1..]
                .iter()
                .filter_map(|w| w.text.strip_prefix("of=")),
        ),
        "shred" | "wipefs" | "blkdiscard" | "sgdisk" | "fdisk" | "sfdisk" | "parted" => paths
            .extend(
                command.words[1..]
                    .iter()
                    .map(|w| w.text.as_str())
                    .filter(|t| !t.starts_with('-')),
            ),
        _ => {}
    }
    paths
        .into_iter()
        .find(|p| is_block_device(&command.cwd.join(p)))
        .map(|p| format!("{program} would write the disk device {p}"))
}

#[cfg(unix)]
fn is_block_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

#[cfg(not(unix))]
fn is_block_device(_path: &Path) -> bool {
    false
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn exec(argv: &[&str], cwd: &str) -> Exec {
        Exec {
            executable: PathBuf::from(format!("/usr/bin/{}", argv[0])),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: cwd.into(),
            env: Vec::new(),
            bound: None,
        }
    }

    fn broken(argv: &[&str], cwd: &str) -> Option<String> {
        rule_broken(&exec(argv, cwd))
    }

    #[test]
    fn recursive_removal_of_the_system_is_forbidden_in_every_spelling() {
        let home = home();
        let home = home.to_str().unwrap();
        for argv in [
            &["rm", "-rf", "/"][..],
            &["rm", "-f", "-r", "/"],
            &["rm", "/", "-rf"],
            &["rm", "-R", "--force", "//"],
            &["rm", "--recursive", "/./"],
            &["rm", "--recu", "/usr/"],
            &["rm", "-rf", "--", "/var"],
            &["rm", "-rf", "/boot"],
            &["rm", "-rf", "/home"],
            &["rm", "-rf", "/root"],
            &["rm", "-rf", "/usr/bin"],
            &["rm", "-rf", "/usr/local/lib/.."],
            &["rm", "-rf", "/tmp/../etc"],
            &["rm", "-rf", home],
            &["rm", "-rf", "/*"],
            &["sh", "-c", "rm -rf $HOME"],
            &["sh", "-c", "rm -rf ${HOME}/"],
            &["sh", "-c", "rm -rf ~"],
            &["sh", "-c", "rm -rf ~/*"],
            &["sh", "-c", "rm -rf \"$UNSET_VARIABLE/\""],
            &["sh", "-c", "cd / && rm -rf *"],
            &["sh", "-c", "cd /usr; rm -rf ."],
            &["bash", "-lc", "r\\m -r''f /u*"],
            &["env", "HOME=/", "sh", "-c", "rm -rf ~"],
            &["sh", "-c", "X=/etc; rm -rf $X"],
            &["sh", "-c", "for d in /bin /opt; do rm -rf $d; done"],
            &["find", "/", "-delete"],
            &["sh", "-c", "find /usr -name x -delete"],
            &["xargs", "rm", "-rf", "/var"],
            &["busybox", "rm", "-rf", "/etc"],
        ] {
            assert!(broken(argv, "/tmp").is_some(), "{argv:?} was allowed");
        }
        // The working directory counts.
        assert!(broken(&["rm", "-rf", "."], "/").is_some());
        assert!(broken(&["rm", "-rf", "*"], "/").is_some());
        assert!(broken(&["rm", "-rf", ".."], "/usr/bin").is_some());
    }

    #[test]
    fn ordinary_removals_and_mentions_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_str().unwrap();
        for argv in [
            &["rm", "-rf", "build"][..],
            &["rm", "-rf", "./target/debug"],
            &["rm", "-rf", "*"],
            &["rm", "-f", "/etc/x.conf"],
            &["rm", "-rf", "/tmp/build*"],
            &["rm", "-rf", "/usr/lib/*.so"],
            &["rm", "-rf", "/var/tmp/cache"],
            &["sh", "-c", "ls -la /"],
            &["sh", "-c", "rm -rf \"$UNSET_VARIABLE\""],
            &["echo", "rm", "-rf", "/"],
        ] {
            assert_eq!(broken(argv, ws), None, "{argv:?}");
        }
    }

    #[test]
    fn escalation_and_power_are_forbidden_through_wrappers_and_quotes() {
        for argv in [
            &["sudo", "ls"][..],
            &["sh", "-c", "echo hi && s\\udo rm x"],
            &["env", "-S", "sudo id"],
            &["nice", "-n", "5", "/usr/sbin/reboot"],
            &["mkfs.ext4", "/dev/sda"],
            &["systemctl", "poweroff"],
            &["sh", "-c", "$(echo) ; init 0"],
        ] {
            assert!(broken(argv, "/tmp").is_some(), "{argv:?} was allowed");
        }
        assert_eq!(broken(&["systemctl", "status"], "/tmp"), None);
    }
}
