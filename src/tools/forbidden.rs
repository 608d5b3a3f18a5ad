//! The built-in forbidden rules: what no remote agent may run here, whoever
//! approved it — privilege escalation, powering off, and wiping the disk or
//! the system (recursive removal of `/`, the home directory or a system
//! directory, moving one away or locking it with `chmod -R` and the like,
//! whatever target is only computed when it runs; writing a disk device).
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
    "sudo", "sudoedit", "su", "doas", "pkexec", "run0", "ksu", "shutdown", "reboot", "poweroff",
    "halt", "mkfs", "mke2fs", "mkswap", "mkdosfs", "mkntfs",
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
                .flat_map(as_each_it_may_be)
                .find_map(|c| {
                    removes_the_system(&c, &home).or_else(|| takes_the_system_away(&c, &home))
                })
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

/// `systemctl poweroff` (or `start poweroff.target`, `suspend`,
/// `emergency`), `init 0`, `kill 1`, `killall5`, `kexec -e`, a write to
/// `/proc/sysrq-trigger`: what stops this machine or all it runs.
fn powers_off(command: &Command) -> Option<String> {
    let program = base(&command.words.first()?.text);
    let args = &command.words[1..];
    let said = |what: &str| Some(format!("{program} would {what}"));
    let sysrq = Path::new("/proc/sysrq-trigger");
    let written: Vec<&str> = command
        .redirects
        .iter()
        .filter(|w| !command.inputs.contains(w))
        .map(|w| w.text.as_str())
        .chain(match program {
            "tee" => args.iter().map(|w| w.text.as_str()).collect(),
            "dd" => args
                .iter()
                .filter_map(|w| w.text.strip_prefix("of="))
                .collect(),
            _ => Vec::new(),
        })
        .collect();
    if written
        .iter()
        .any(|w| lexical(&command.cwd.join(w)) == sysrq)
    {
        return Some("writing /proc/sysrq-trigger would stop this machine".into());
    }
    match program {
        "systemctl" | "loginctl" => {
            // A verb, or the target a verb starts (`start poweroff.target`).
            const STOPS: &[&str] = &[
                "poweroff",
                "reboot",
                "halt",
                "kexec",
                "soft-reboot",
                "suspend",
                "hibernate",
                "hybrid-sleep",
                "suspend-then-hibernate",
                "sleep",
                "rescue",
                "emergency",
                "ctrl-alt-del",
            ];
            let verb = args.iter().find(|w| !w.text.starts_with('-'))?;
            let stops = |t: &str| STOPS.contains(&t.strip_suffix(".target").unwrap_or(t));
            let starts = matches!(
                verb.text.as_str(),
                "start" | "restart" | "isolate" | "reload-or-restart" | "try-restart"
            );
            (stops(&verb.text) && !verb.text.ends_with(".target")
                || starts && args.iter().any(|w| stops(&w.text)))
            .then(|| format!("{program} would power off, suspend or restart this machine"))
        }
        "init" | "telinit" => args
            .iter()
            .any(|w| matches!(w.text.as_str(), "0" | "6" | "1" | "s" | "S"))
            .then(|| format!("{program} would power off or restart this machine")),
        "killall5" => said("stop every process on this machine"),
        "kexec" => args
            .iter()
            .any(|w| matches!(w.text.as_str(), "-e" | "--exec" | "-f" | "--force"))
            .then(|| format!("{program} would restart this machine")),
        "kill" => {
            // The signal comes first (`-9`, `-s KILL`, `-KILL`); every
            // other word is a process: 1 is init, -1 is every process.
            let mut rest = args;
            match rest.first().map(|w| w.text.as_str()) {
                Some("-s" | "-n") => rest = rest.get(2..).unwrap_or_default(),
                Some("--") => rest = &rest[1..],
                Some(t) if t.starts_with('-') => rest = &rest[1..],
                _ => {}
            }
            rest.iter()
                .skip_while(|w| w.text == "--")
                .any(|w| matches!(w.text.as_str(), "1" | "-1"))
                .then(|| format!("{program} would stop init or every process on this machine"))
        }
        _ => None,
    }
}

/// A command as it runs, or, when its program is only known then
/// (`$(echo rm) -rf /usr`), as each program a removal rule knows.
fn as_each_it_may_be(command: &Command) -> Vec<std::borrow::Cow<'_, Command>> {
    use std::borrow::Cow;
    if !command.words.first().is_some_and(|w| w.computed) {
        return vec![Cow::Borrowed(command)];
    }
    ["rm", "mv", "chmod", "chown"]
        .iter()
        .map(|program| {
            let mut as_it = command.clone();
            as_it.words[0] = Word::plain(program);
            Cow::Owned(as_it)
        })
        .collect()
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
                return dangerous(&Word::plain("."), &command.cwd, home)
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

/// `mv` of `/`, the home directory or a system directory (or anything that
/// holds one) elsewhere, and `chmod -R`, `chown -R`, `chgrp -R` of one:
/// the system wiped or locked by other verbs than removal.
fn takes_the_system_away(command: &Command, home: &Path) -> Option<String> {
    let program = base(&command.words.first()?.text);
    let args = &command.words[1..];
    let (options, operands) = split_options(args, |o| matches!(o, "-t" | "-S" | "--suffix"));
    let (verb, targets): (&str, Vec<&Word>) = match program {
        "mv" => {
            // Without `-t DIR`, the last operand is where the rest go.
            let to_dir = options
                .iter()
                .any(|o| o.starts_with("-t") || o.starts_with("--target-directory"));
            let sources = if to_dir {
                &operands[..]
            } else {
                &operands[..operands.len().saturating_sub(1)]
            };
            ("moving", sources.to_vec())
        }
        "chmod" | "chown" | "chgrp" => {
            let recursive = options
                .iter()
                .any(|o| *o == "--recursive" || (!o.starts_with("--") && o[1..].contains('R')));
            if !recursive {
                return None;
            }
            // The mode, owner or group comes first unless a reference
            // file or a mode spelled as an option (`chmod -R -w`) gives it.
            let given = options.iter().any(|o| {
                o.starts_with("--reference")
                    || (program == "chmod" && o[1..].chars().all(|c| "rwxXst".contains(c)))
            });
            let skip = usize::from(!given);
            let verb = if program == "chmod" {
                "changing the mode of"
            } else {
                "changing the owner of"
            };
            (verb, operands.iter().skip(skip).copied().collect())
        }
        _ => return None,
    };
    targets
        .into_iter()
        .find_map(|w| dangerous(w, &command.cwd, home))
        .map(|t| format!("{verb} a system or home directory ({t})"))
}

/// A GNU tool's options (anywhere until `--`; `valued` ones take the next
/// word) and its operands.
fn split_options(args: &[Word], valued: impl Fn(&str) -> bool) -> (Vec<&str>, Vec<&Word>) {
    let mut options = Vec::new();
    let mut operands = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let t = word.text.as_str();
        if t == "--" {
            operands.extend(words.by_ref());
        } else if t.starts_with('-') && t.len() > 1 && !word.computed {
            options.push(t);
            if valued(t) {
                // `-t DIR`: the value is the option's.
                words.next();
            }
        } else {
            operands.push(word);
        }
    }
    (options, operands)
}

/// Whether `rm`'s options ask for recursion, and its operands. As GNU rm
/// reads them: options anywhere until `--`, clustered or apart.
fn rm_arguments(args: &[Word]) -> (bool, Vec<&Word>) {
    let (options, operands) = split_options(args, |_| false);
    let recursive = options.iter().any(|t| {
        if t.starts_with("--") {
            "--recursive".starts_with(t) && t.len() >= 3
        } else {
            t[1..].contains(['r', 'R'])
        }
    });
    (recursive, operands)
}

/// The protected directory a removal target names or holds, if any.
fn dangerous(word: &Word, cwd: &Path, home: &Path) -> Option<String> {
    if word.computed {
        // `$(…)`, backquotes, what `xargs` reads: it may be `/`.
        return Some(format!(
            "{:?} is only known when it runs: name the path",
            format!("{}…", word.text)
        ));
    }
    if word.text.is_empty() {
        return None;
    }
    // After a `cd` (or `env -C`) to a directory only known when it runs,
    // a relative path may be anything: `cd "$(…)" && rm -rf *`.
    if !word.text.starts_with('/') && cwd.to_string_lossy().contains('\0') {
        return Some(format!(
            "{:?} in a directory only known when it runs: name the path",
            word.text
        ));
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
    // ... and `..` taken where the kernel takes it: after the symlinks
    // before it (`tools/../lib` with `tools` -> /usr/bin is /usr/lib).
    forms.extend(kernel_path(cwd, &word.text));
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

/// Where path resolution takes `word` from `cwd`: every directory on the
/// way resolved (symlinks, then `..` from where they lead), the last
/// component followed only when a slash ends the word, as `rm` does.
fn kernel_path(cwd: &Path, word: &str) -> Option<PathBuf> {
    let joined = cwd.join(word);
    let text = joined.to_string_lossy();
    let trimmed = text.trim_end_matches('/');
    let (dir, last) = trimmed.rsplit_once('/')?;
    if trimmed.len() != text.len() || matches!(last, "." | "..") {
        return std::fs::canonicalize(&joined).ok();
    }
    let dir = if dir.is_empty() { "/" } else { dir };
    Some(std::fs::canonicalize(dir).ok()?.join(last))
}

/// `/`, any top-level directory, the children of a system directory, the
/// home directory and everything above it — and whatever is reached
/// through the kernel's magic links (`/proc/PID/root`, `/proc/self/cwd`,
/// `/dev/fd/N`), which lead anywhere (and name the node's own process
/// here, another one when the command runs).
fn is_protected(path: &Path, home: &Path) -> bool {
    let depth = path.components().count().saturating_sub(1);
    depth <= 1
        || path.starts_with("/proc")
        || path.starts_with("/dev/fd")
        || path
            .parent()
            .is_some_and(|p| SYSTEM_PARENTS.iter().any(|s| p == Path::new(s)))
        || home.starts_with(path)
}

/// A glob pattern that could name a protected directory, or empty one (a
/// last component that matches everything: `/*`, `~/.*`, `/usr/**`).
/// Judged by its shape alone, never by what exists now: a match can be
/// made between the check and the run, and a flood of globs must not
/// read directories on the node's thread.
fn glob_hits_protected(pattern: &Path, home: &Path) -> Option<String> {
    let text = pattern.to_string_lossy();
    let parent = pattern.parent();
    let is_glob = |p: &Path| p.to_string_lossy().contains(['*', '?', '[']);
    let last = pattern
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    if let (Some(last), Some(parent)) = (&last, parent)
        && catch_all(last)
    {
        let parent_protected = if is_glob(parent) {
            glob_hits_protected(parent, home).is_some()
        } else {
            is_protected(parent, home)
        };
        if parent_protected {
            return Some(text.into_owned());
        }
    }
    let matcher = |p: &Path| {
        globset::GlobBuilder::new(&p.to_string_lossy())
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .ok()
            .map(|g| g.compile_matcher())
    };
    // What it names is protected when it is at the top, under a system
    // directory (any one its parent could match), in the magic links, or
    // is the home directory or above it.
    let depth = pattern.components().count().saturating_sub(1);
    let system = || SYSTEM_PARENTS.iter().chain(["/proc", "/dev/fd"].iter());
    // The home directory counts as one: `~/[a-z]*`, `~/[!-~]*` and
    // `~/{a..z}*` empty it as surely as `~/*`, and no shape tells them apart.
    let under_system = match parent {
        Some(p) if is_glob(p) => {
            matcher(p).is_some_and(|m| system().any(|s| m.is_match(s)) || m.is_match(home))
        }
        Some(p) => system().any(|s| p == Path::new(s)) || p == home,
        None => false,
    };
    if depth <= 1 || under_system || pattern.starts_with("/proc") {
        return Some(text.into_owned());
    }
    // Only a pattern as deep as one of them can match the home directory
    // or a directory above it.
    let home_depth = home.components().count().saturating_sub(1);
    (depth <= home_depth)
        .then(|| matcher(pattern))
        .flatten()
        .and_then(|m| {
            home.ancestors()
                .find(|a| m.is_match(a))
                .map(Path::to_path_buf)
        })
        .map(|h| format!("{text}, which matches {}", h.display()))
}

/// A glob component with no literal name in it: it matches everything.
fn catch_all(component: &str) -> bool {
    component.contains(['*', '?', '['])
        && component
            .chars()
            .all(|c| matches!(c, '*' | '?' | '.' | '[' | ']' | '!' | '^' | '{' | '}' | ','))
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
        // A variable the reading never saw set may hold anything when it
        // runs (read from a file, set by a loop).
        assert!(broken(&["sh", "-c", "rm -rf \"$UNSET_VARIABLE\""], "/tmp").is_some());
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

    /// Each spelling below removes `/` or a system directory when a shell
    /// (bash, or dash where it applies) runs it.
    fn refused_in_a_shell(scripts: &[&str]) {
        for script in scripts {
            for shell in ["sh", "bash"] {
                assert!(
                    broken(&[shell, "-c", script], "/tmp").is_some(),
                    "{shell} -c {script:?} was allowed"
                );
            }
        }
    }

    #[test]
    fn braces_arrays_and_ifs_are_expanded_as_the_shell_expands_them() {
        refused_in_a_shell(&[
            "rm -rf {/,}",
            "rm -rf {/usr,/tmp/x}",
            "rm -rf {/tmp/x,/etc/ssh}",
            "rm -rf /{tmp/x,usr}",
            "a=(/); rm -rf \"${a[@]}\"",
            "a=(/tmp/x /usr); rm -rf \"${a[@]}\"",
            "a=(/tmp/x /usr); rm -rf ${a[1]}",
            "declare -a a=(/tmp/x /var); rm -rf \"${a[@]}\"",
            "IFS=:; X=a:/; rm -rf $X",
            "IFS=,; X=/tmp/x,/usr; rm -rf $X",
        ]);
    }

    #[test]
    fn arguments_reach_the_scripts_functions_and_aliases_they_are_given_to() {
        refused_in_a_shell(&[
            "f(){ rm -rf \"$1\"; }; f /",
            "f() { rm -rf \"$@\"; }; f /tmp/x /usr",
            "function f { rm -rf \"$2\"; }; f /tmp/x /etc",
            "function f() { rm -r \"$*\"; }\nf /var",
            "f() ( rm -rf \"$1\" ); f /boot",
            "alias x='rm -rf'\nx /",
        ]);
        for argv in [
            &["sh", "-c", "rm -rf \"$1\"", "_", "/"][..],
            &["sh", "-c", "rm -rf $0", "/"],
            &["bash", "-c", "rm -rf \"$@\"", "x", "/tmp/a", "/usr"],
            &["sh", "-ec", "rm -rf \"${1:-/tmp/x}\"", "sh", "/etc"],
            &["env", "sh", "-c", "rm -rf \"$2\"", "_", "a", "/var"],
        ] {
            assert!(broken(argv, "/tmp").is_some(), "{argv:?} was allowed");
        }
        // What is given only names what runs.
        assert_eq!(
            broken(&["sh", "-c", "rm -rf \"$1\"", "_", "build"], "/tmp"),
            None
        );
        assert_eq!(
            broken(&["sh", "-c", "f(){ rm -rf \"$1\"; }; f build"], "/tmp"),
            None
        );
    }

    #[test]
    fn string_operations_indirection_and_reads_are_evaluated() {
        refused_in_a_shell(&[
            "rm -rf $\"/\"",
            "X=/; Y=X; rm -rf ${!Y}",
            "X=/usrx; rm -rf ${X%x}",
            "X=/usr.bak; rm -rf ${X%.*}",
            "X=x/etc; rm -rf ${X#x}",
            "X=a/b/etc; rm -rf /${X##*/}",
            "X=/usrx; rm -rf ${X/x/}",
            "X=/u_s_r; rm -rf ${X//_/}",
            "X=/USR; rm -rf ${X,,}",
            "X=/usr/local/lib; rm -rf ${X:0:4}",
            "read X <<< /; rm -rf $X",
            "read -r A B <<< 'x /var'; rm -rf $B",
            "printf -v X /; rm -rf \"$X\"",
            "printf -v X '%s%s' /e tc; rm -rf \"$X\"",
        ]);
        assert_eq!(
            broken(&["sh", "-c", "X=/tmp/x.bak; rm -rf ${X%.bak}"], "/tmp"),
            None
        );
    }

    #[test]
    fn dot_dot_after_a_symlink_is_where_the_kernel_goes() {
        // `tools` -> /usr/bin: `../lib` from inside it is /usr/lib.
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/usr/bin", dir.path().join("tools")).unwrap();
        let ws = dir.path().to_str().unwrap();
        for argv in [
            &["rm", "-rf", "tools/../lib"][..],
            &["sh", "-c", "cd tools && rm -rf ../lib"],
            &["sh", "-c", "cd tools; rm -rf ../../etc"],
        ] {
            assert!(broken(argv, ws).is_some(), "{argv:?} was allowed");
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert_eq!(broken(&["rm", "-rf", "sub/../build"], ws), None);
    }

    #[test]
    fn launchers_that_run_their_operands_are_looked_through() {
        refused_in_a_shell(&[
            "watch rm -rf /",
            "watch -n 1 'rm -rf /'",
            "strace -f -o /tmp/log rm -rf /",
            "ltrace rm -rf /",
            "fakeroot rm -rf /",
            "flock /tmp/l -c 'rm -rf /'",
            "script -qc 'rm -rf /' /dev/null",
            "chroot / rm -rf /usr",
            "nsenter -t 1 -m rm -rf /",
            "unshare -m rm -rf /",
            "systemd-run --user rm -rf ~",
            "valgrind rm -rf /",
            "uv run rm -rf /",
            "poetry run rm -rf /etc",
            "parallel rm -rf ::: /",
            "tmux new -d 'rm -rf /'",
            "ssh localhost rm -rf /",
            "time -p rm -rf /",
            "rm -rf ~+",
            "OLDPWD=/usr; rm -rf ~-",
        ]);
    }

    #[test]
    fn cdpath_and_find_exec_lead_where_the_shell_and_find_go() {
        refused_in_a_shell(&["CDPATH=/ cd usr; rm -rf .", "CDPATH=/: cd usr && rm -rf *"]);
        for argv in [
            &[
                "find",
                "/",
                "-maxdepth",
                "0",
                "-exec",
                "rm",
                "-rf",
                "{}",
                "+",
            ][..],
            &["find", "/usr", "-exec", "rm", "-rf", "{}", ";"],
            &[
                "find",
                "/",
                "-mindepth",
                "1",
                "-maxdepth",
                "1",
                "-execdir",
                "rm",
                "-rf",
                "{}",
                "+",
            ],
            &["sh", "-c", "cd / && find . -maxdepth 1 -exec rm -r {} +"],
            &[
                "find",
                "/tmp/x",
                "/etc",
                "-exec",
                "sh",
                "-c",
                "rm -rf \"$0\"",
                "{}",
                ";",
            ],
        ] {
            assert!(broken(argv, "/tmp").is_some(), "{argv:?} was allowed");
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_str().unwrap();
        assert_eq!(
            broken(
                &[
                    "find",
                    ".",
                    "-name",
                    "__pycache__",
                    "-exec",
                    "rm",
                    "-rf",
                    "{}",
                    "+"
                ],
                ws
            ),
            None
        );
    }

    #[test]
    fn paths_through_the_kernels_magic_links_are_not_a_way_around() {
        for argv in [
            &["rm", "-rf", "/proc/1/root/"][..],
            &["rm", "-rf", "/proc/self/root/usr"],
            &["rm", "-rf", "/proc/thread-self/cwd/"],
            &["sh", "-c", "cd / && rm -rf /proc/self/cwd/"],
            &["rm", "-rf", "/dev/fd/3/"],
        ] {
            assert!(broken(argv, "/tmp").is_some(), "{argv:?} was allowed");
        }
    }

    #[test]
    fn every_way_to_power_off_escalate_or_format_is_forbidden() {
        for argv in [
            &["systemctl", "start", "poweroff.target"][..],
            &["systemctl", "isolate", "reboot.target"],
            &["systemctl", "--no-block", "start", "halt.target"],
            &["systemctl", "emergency"],
            &["systemctl", "suspend"],
            &["kill", "-9", "1"],
            &["kill", "-s", "INT", "1"],
            &["kill", "-KILL", "-1"],
            &["kill", "--", "-1"],
            &["killall5", "-9"],
            &["telinit", "1"],
            &["kexec", "-e"],
            &["sh", "-c", "echo b > /proc/sysrq-trigger"],
            &["sh", "-c", "echo o | tee /proc/sysrq-trigger"],
            &["run0", "id"],
            &["sudoedit", "/etc/hosts"],
            &["mke2fs", "/dev/sdz9"],
            &["mkswap", "/dev/sdz9"],
        ] {
            assert!(broken(argv, "/tmp").is_some(), "{argv:?} was allowed");
        }
        for argv in [
            &["kill", "-1", "4242"][..],
            &["kill", "4242"],
            &["systemctl", "status", "reboot.target"],
            &["systemctl", "list-dependencies", "poweroff.target"],
            &["cat", "/proc/sys/kernel/sysrq"],
        ] {
            assert_eq!(broken(argv, "/tmp"), None, "{argv:?}");
        }
    }

    #[test]
    fn a_glob_is_judged_by_its_shape_not_by_what_exists_now() {
        // A glob over the top level or a system directory's children
        // names the system whether or not a match exists at this moment
        // (one can be made between the check and the run), and judging
        // it reads no directory.
        refused_in_a_shell(&[
            "rm -rf /zz-not-there*",
            "rm -rf /usr/zz-not-there*",
            "rm -rf /*/zz-not-there",
            "rm -rf /usr/local/zz?",
            "rm -rf /proc/[0-9]*/root/",
        ]);
        for script in [
            "rm -rf /tmp/build*",
            "rm -rf /usr/lib/*.so",
            "rm -rf /var/tmp/cache-*",
        ] {
            assert_eq!(broken(&["sh", "-c", script], "/tmp"), None, "{script}");
        }
    }

    #[test]
    fn judging_any_glued_text_ends_without_a_panic() {
        const PIECES: &[&str] = &[
            "rm ",
            "-rf ",
            "-r",
            " /",
            "/",
            "..",
            ".",
            "~",
            "*",
            "?",
            "[",
            "]",
            "{",
            ",",
            "}",
            "$X",
            "X=/;",
            "cd ",
            "; ",
            "| ",
            "find ",
            "-delete ",
            "-exec ",
            "{} ",
            "+ ",
            "kill ",
            "-1 ",
            "1",
            "systemctl ",
            "start ",
            "poweroff.target",
            "> ",
            "/proc/",
            "self/",
            "root/",
            "/dev/fd/",
            "tee ",
            "dd ",
            "of=",
            "sysrq-trigger",
            "\"",
            "'",
            "\\",
            "\n",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..2_000 {
            let len = (next() % 16) as usize;
            let script: String = (0..len)
                .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
                .collect();
            let _ = broken(&["sh", "-c", &script], "/tmp");
        }
    }

    /// A removal's target the reader cannot know before the run — a
    /// command's output (`$(…)`, backquotes, a process substitution),
    /// what `xargs` reads — is refused as if it named `/`; a shell fed a
    /// literal script by `echo` or `printf` has that script read.
    #[test]
    fn targets_computed_at_run_time_are_refused() {
        refused_in_a_shell(&[
            "rm -rf \"$(echo /)\"",
            "rm -rf $(echo /)",
            "cd / && rm -rf \"$(pwd)\"",
            "rm -rf `printf /usr`",
            "rm -rf \"$(pwd)/build\"",
            "find \"$(echo /)\" -delete",
            "echo / | xargs rm -rf",
            "xargs rm -rf <<< /usr",
            "xargs -I{} rm -rf {} < list",
            "echo 'rm -rf /' | sh",
            "printf 'rm -rf %s' / | bash -s",
            "echo 'chmod -R 000 /' | sh",
        ]);
        // What the reader knows stays open: a computed word that is not a
        // removal's target, a removal of named paths, a script it can read.
        for script in [
            "rm -f \"$(mktemp)\"",
            "ls \"$(pwd)\"",
            "echo / | xargs ls",
            "rm -rf /tmp/x \"build-$(date +%s)\" 2>/dev/null; true",
            "echo 'echo hi' | sh",
        ] {
            let allowed = !script.contains("build-");
            assert_eq!(
                broken(&["sh", "-c", script], "/tmp").is_none(),
                allowed,
                "{script}"
            );
        }
    }

    /// A second review's ways through the unknown: a directory only known
    /// when it runs, `eval`'s own redirections, `read` of unknown text, an
    /// unknown `IFS`, an unknown pattern or offset, a here-document read
    /// by another command than its own. Each was allowed.
    #[test]
    fn what_is_unknown_stays_unknown_however_it_travels() {
        refused_in_a_shell(&[
            "cd \"$NOPE\" && rm -rf *",
            "cd \"$(echo /)\" && rm -rf *",
            "cd $(echo /) && rm -rf ./*",
            "env -C \"$(echo /)\" rm -rf usr",
            "cd \"$(echo /)\" && find -delete",
            "eval 'echo b' > /proc/sysrq-trigger",
            "read A B <<< \"$(echo x /)\"; rm -rf \"$B\"",
            "IFS=$(echo x); X=$(echo /); rm -rf $X",
            "IFS=$(echo x); rm -rf $NOPE",
            "X=/opt/x; rm -rf \"${X%$(echo /x)}\"",
            "X=/opt/x; rm -rf \"${X/$(echo /x)/}\"",
            "X=/usr/x; rm -rf \"${X:0:$(echo 4)}\"",
            "N=4; X=/usr/x; rm -rf \"${X:0:N}\"",
            "read X <<EOF; read Y < list.txt\n/tmp/safe\nEOF\nrm -rf \"$Y\"",
            "sh <<EOF; echo hi\nrm -rf /\nEOF",
        ]);
        // `eval`'s redirections are its own: a disk device this machine has.
        let disk = std::fs::read_dir("/dev")
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| is_block_device(p));
        if let Some(disk) = disk {
            let script = format!("eval cat img > {}", disk.display());
            assert!(broken(&["sh", "-c", &script], "/tmp").is_some(), "{script}");
        }
        // What is always a number is known enough to name a path.
        for script in [
            "rm -rf /tmp/foo.$$",
            "rm -rf \"/tmp/x-$RANDOM\"",
            "X=/usr/x; rm -rf \"${X:5:1}\"",
            "read X <<EOF\n/tmp/safe\nEOF\nrm -rf \"$X\"",
        ] {
            assert_eq!(broken(&["bash", "-c", script], "/tmp"), None, "{script}");
        }
    }

    /// Wiping the system by other verbs than removal: moving a protected
    /// directory away, or taking it from everyone recursively.
    #[test]
    fn moving_or_locking_the_system_away() {
        refused_in_a_shell(&[
            "mv /usr /tmp/x",
            "mv -f -- /etc/ssh /tmp/x",
            "mv -t /tmp /home",
            "mv --target-directory=/tmp ~",
            "chmod -R 000 /",
            "chmod --recursive a-rwx /usr/bin",
            "chmod -R --reference=/tmp/x /etc",
            "chown -R nobody /etc",
            "chown -hR nobody:nogroup ~",
            "chgrp -R nogroup /var/lib",
            "cd / && chmod -R 000 .",
            "chmod -R 000 \"$(echo /)\"",
            "chmod -R -w /",
        ]);
        // Moving into a system directory, or a plain chmod of one, is an
        // ordinary risky call; so is anything deeper than a system
        // directory's children (`/usr/lib/x86_64-linux-gnu`).
        for script in [
            "mv /tmp/x /usr/local/bin/",
            "chmod 755 /usr/local/bin",
            "chmod -R u+w /tmp/x",
            "chown -R nobody /tmp/x",
            "cd / && chmod -R 755 /tmp/x",
            "rm -rf /usr/lib/x86_64-linux-gnu",
        ] {
            assert!(
                broken(&["sh", "-c", script], "/tmp").is_none(),
                "{script} was refused"
            );
        }
    }

    /// What the reader cannot know is unknown, not nothing: each line
    /// removes /usr under a real bash or dash (a reviewer's stand-in `rm`
    /// printed its arguments), and each was allowed.
    #[test]
    fn values_known_only_when_it_runs_are_unknown_not_empty() {
        refused_in_a_shell(&[
            "$(echo rm) -rf /usr",
            "X=$(echo /usr); rm -rf \"$X\"",
            "set -- /usr; rm -rf \"$1\"",
            "read X < /tmp/f; rm -rf \"$X\"",
            "while read d; do rm -rf \"$d\"; done < /tmp/f",
            "command cd / && rm -rf usr",
            "eval cd /; rm -rf usr",
            "eval X=/usr; rm -rf $X",
        ]);
        for script in [
            "builtin cd / && rm -rf usr",
            "trap 'rm -rf /usr' EXIT",
            "rm -rf $'\\u002fusr'",
            "mapfile -t a < /tmp/f; rm -rf \"${a[@]}\"",
        ] {
            assert!(
                broken(&["bash", "-c", script], "/tmp").is_some(),
                "bash -c {script:?} was allowed"
            );
        }
    }

    /// A glob directly under the home directory, however spelled: it may
    /// match every name there (`[!-~]*`, `[a-z]*`, braces), and no shape
    /// tells that apart from one that does not.
    #[test]
    fn globs_directly_under_the_home_directory_are_refused() {
        let home = Path::new("/home/alice");
        for script in [
            "rm -rf /home/alice/[!-~]*",
            "rm -rf /home/alice/[a-z]*",
            "rm -rf /home/alice/[[:alnum:]]*",
            "rm -rf /home/alice/{a..z}*",
            "cd /home/alice && rm -rf [a-z]*",
            "find /home/alice/[a-z]* -delete",
            "rm -rf /home/a*/[a-z]*",
        ] {
            let reading = cmdline::read_script(script, Path::new("/tmp"), HashMap::new());
            assert!(
                reading
                    .commands
                    .iter()
                    .any(|c| removes_the_system(c, home).is_some()),
                "{script} was allowed"
            );
        }
        // One level deeper is the user's own business.
        let reading = cmdline::read_script(
            "rm -rf /home/alice/src/[a-z]*",
            Path::new("/tmp"),
            HashMap::new(),
        );
        assert!(
            reading
                .commands
                .iter()
                .all(|c| removes_the_system(c, home).is_none())
        );
    }
}
