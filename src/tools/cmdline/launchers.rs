//! What a program does with its words, as far as running other code
//! goes: the wrappers and launchers that run their operands (`env`,
//! `timeout`, `xargs`, `ssh HOST CMD`, …), the shells that take a script
//! (`-c`, on their input), and what `echo`/`printf` print into one.

use super::*;

/// What taking a wrapper off a command gives.
pub(super) enum Unwrapped {
    /// `words[0]` is a wrapper that runs the rest (a program of its own).
    Inner(Vec<Word>),
    /// A builtin or reserved word in front: the rest is the command.
    Split(Vec<Word>),
    Done,
}

/// Takes one wrapper off the front of `words`, updating what the wrapped
/// command runs with (`env K=V`, `env -C DIR`).
pub(super) fn unwrap(words: &[Word], state: &mut State) -> Unwrapped {
    let Some(first) = words.first() else {
        return Unwrapped::Done;
    };
    let name = base(&first.text);
    let rest = &words[1..];
    // Options of the wrapper, then its own operands, then the command.
    let skip = |values: &[&str], operands: usize| -> Option<Vec<Word>> {
        let mut i = 0;
        while i < rest.len() {
            let w = rest[i].text.as_str();
            if w == "--" {
                i += 1;
                break;
            }
            if !w.starts_with('-') || w == "-" {
                break;
            }
            let takes_value = values.contains(&w);
            i += if takes_value { 2 } else { 1 };
        }
        let at = i + operands;
        (at < rest.len()).then(|| rest[at..].to_vec())
    };
    let inner = match name {
        "env" => {
            // Options come first: after `--` or the first NAME=VALUE, a
            // word starting with `-` is the command (`env A=1 -x` runs -x).
            let mut options = true;
            let mut i = 0;
            while i < rest.len() {
                let w = rest[i].text.as_str();
                if options && w == "--" {
                    options = false;
                    i += 1;
                    continue;
                }
                if !options && w.starts_with('-') {
                    break;
                }
                if w == "-i" || w == "-" || w == "--ignore-environment" {
                    state.vars.retain(|k, _| k == "HOME" || k == "PWD");
                    i += 1;
                } else if w == "-u" || w == "--unset" {
                    if let Some(n) = rest.get(i + 1) {
                        state.vars.remove(&n.text);
                    }
                    i += 2;
                } else if w == "-C" || w == "--chdir" {
                    if let Some(d) = rest.get(i + 1) {
                        state.cwd = lexical(&state.cwd.join(&d.text));
                    }
                    i += 2;
                } else if let Some(d) = w.strip_prefix("--chdir=") {
                    state.cwd = lexical(&state.cwd.join(d));
                    i += 1;
                } else if w == "-S"
                    || w == "--split-string"
                    || w.starts_with("--split-string=")
                    || (w.starts_with("-S") && w.len() > 2)
                {
                    // The string is split into words, which come first.
                    let (text, used) = match w {
                        "-S" | "--split-string" => (
                            rest.get(i + 1).map(|s| s.text.clone()).unwrap_or_default(),
                            2,
                        ),
                        _ => (
                            w.strip_prefix("--split-string=")
                                .or_else(|| w.strip_prefix("-S"))
                                .unwrap_or("")
                                .to_owned(),
                            1,
                        ),
                    };
                    let mut split: Vec<Word> = shell_words::split(&text)
                        .unwrap_or_else(|_| text.split_whitespace().map(str::to_owned).collect())
                        .iter()
                        .map(|s| Word::plain(s))
                        .collect();
                    split.extend(rest[(i + used).min(rest.len())..].iter().cloned());
                    let mut more = vec![first.clone()];
                    more.extend(split);
                    return unwrap(&more, state);
                } else if w.starts_with('-') && w.len() > 1 {
                    i += 1;
                } else if let Some((k, v)) = w.split_once('=').filter(|(k, _)| is_name(k)) {
                    state.vars.insert(k.to_owned(), v.to_owned());
                    options = false;
                    i += 1;
                } else {
                    break;
                }
            }
            (i < rest.len()).then(|| rest[i..].to_vec())
        }
        "nice" => skip(&["-n", "--adjustment"], 0),
        "nohup" | "setsid" | "builtin" | "caffeinate" => skip(&[], 0),
        "exec" => skip(&["-a"], 0),
        "command" => {
            // `command -v NAME` only looks a name up.
            if rest
                .iter()
                .any(|w| w.text.starts_with("-v") || w.text.starts_with("-V"))
            {
                return Unwrapped::Done;
            }
            skip(&[], 0)
        }
        "timeout" => skip(&["-s", "--signal", "-k", "--kill-after"], 1),
        "stdbuf" => skip(&["-i", "-o", "-e", "--input", "--output", "--error"], 0),
        "time" => skip(&["-o", "--output", "-f", "--format"], 0),
        "ionice" => skip(&["-c", "--class", "-n", "--classdata", "-p", "-P", "-u"], 0),
        "taskset" => {
            let cpus = rest.first().is_some_and(|w| w.text.starts_with('-'));
            skip(&["-c", "--cpu-list"], usize::from(!cpus))
        }
        "chrt" => skip(&[], 1),
        "flock" => {
            // `flock FILE -c COMMAND` hands a shell the command.
            let after = skip(&["-w", "--timeout", "-E", "--conflict-exit-code"], 1);
            match after.as_deref() {
                Some([flag, command, ..]) if matches!(flag.text.as_str(), "-c" | "--command") => {
                    Some(shell_of(&command.text))
                }
                _ => after,
            }
        }
        // Launchers that run their operands as a command.
        "strace" | "ltrace" => skip(
            &[
                "-o", "-e", "-p", "-s", "-u", "-P", "-a", "-b", "-E", "-I", "-S", "-U", "-X",
            ],
            0,
        ),
        "fakeroot" | "fakechroot" => skip(&["-l", "--lib", "--faked", "-s", "-i"], 0),
        "valgrind" | "catchsegv" | "firejail" | "proot" | "torsocks" | "proxychains"
        | "proxychains4" | "unbuffer" => skip(&["-f", "-q"], 0),
        "chroot" => skip(&["--userspec", "--groups"], 1),
        "nsenter" => skip(
            &[
                "-t", "--target", "-S", "--setuid", "-G", "--setgid", "-w", "--wd",
            ],
            0,
        ),
        "unshare" => skip(
            &[
                "--map-user",
                "--map-group",
                "-S",
                "--setuid",
                "-G",
                "--setgid",
                "-R",
                "--root",
                "-w",
                "--wd",
                "--propagation",
                "--setgroups",
            ],
            0,
        ),
        "setpriv" | "cpulimit" | "prlimit" | "numactl" => {
            skip(&["-l", "--limit", "-p", "--pid"], 0)
        }
        "systemd-run" => skip(
            &[
                "-u",
                "--unit",
                "-p",
                "--property",
                "--description",
                "--slice",
                "-E",
                "--setenv",
                "--uid",
                "--gid",
                "--working-directory",
                "-M",
                "--machine",
                "-H",
                "--host",
                "--on-active",
                "--on-calendar",
                "--on-boot",
                "--on-startup",
                "--timer-property",
                "--path-property",
                "--socket-property",
                "--nice",
            ],
            0,
        ),
        // Package runners: `uv run CMD`, `poetry run CMD`, `bundle exec CMD`.
        "uv" | "poetry" | "pipenv" | "pdm" | "hatch" | "rye" | "bundle" => match rest {
            [sub, more @ ..] if matches!(sub.text.as_str(), "run" | "exec") => {
                let at = more
                    .iter()
                    .position(|w| !w.text.starts_with('-'))
                    .unwrap_or(more.len());
                (at < more.len()).then(|| more[at..].to_vec())
            }
            _ => None,
        },
        // `parallel CMD ::: ARGS`: the arguments are the command's.
        "parallel" => skip(&["-j", "--jobs", "-S", "--sshlogin"], 0).map(|words| {
            words
                .into_iter()
                .filter(|w| !w.text.starts_with(":::"))
                .collect()
        }),
        // These hand a shell their words, joined: `watch 'rm …'`,
        // `script -c CMD`, `ssh HOST CMD` (this machine may be the host),
        // `tmux new 'CMD'`.
        "watch" => skip(&["-n", "--interval", "-d", "-g", "--chgexit"], 0)
            .map(|words| shell_of(&join(&words))),
        "script" => rest
            .iter()
            .position(|w| {
                matches!(w.text.as_str(), "-c" | "--command")
                    || (w.text.starts_with('-')
                        && !w.text.starts_with("--")
                        && w.text.ends_with('c'))
            })
            .and_then(|at| rest.get(at + 1))
            .map(|command| shell_of(&command.text)),
        "ssh" => skip(
            &[
                "-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b", "-c", "-E", "-e", "-m",
                "-O", "-Q", "-S", "-W", "-w", "-B",
            ],
            1,
        )
        .map(|words| shell_of(&join(&words))),
        "tmux" | "screen" => rest
            .iter()
            .rposition(|w| !w.text.starts_with('-'))
            .filter(|&at| at > 0)
            .map(|at| shell_of(&rest[at].text)),
        "xargs" => skip(
            &[
                "-a",
                "-d",
                "-E",
                "-e",
                "-I",
                "-i",
                "-L",
                "-l",
                "-n",
                "-P",
                "-s",
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--max-lines",
                "--max-chars",
                "--replace",
                "--eof",
            ],
            0,
        )
        .map(|mut words| {
            // What it reads is appended (or put in for `-I`'s string).
            words.push(Word::plain(&UNKNOWN.to_string()));
            words
        }),
        "busybox" | "toybox" => (!rest.is_empty()).then(|| rest.to_vec()),
        "sudo" | "doas" => skip(&["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"], 0),
        _ => return Unwrapped::Done,
    };
    match inner {
        Some(inner) if matches!(name, "builtin" | "command" | "exec") => Unwrapped::Split(inner),
        Some(inner) => Unwrapped::Inner(inner),
        None => Unwrapped::Done,
    }
}

/// `sh -c TEXT`: what a launcher that hands a shell its command runs.
fn shell_of(text: &str) -> Vec<Word> {
    ["sh", "-c", text].into_iter().map(Word::plain).collect()
}

fn join(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a shell's arguments include `-c` (alone or in a cluster such as
/// `-lc`, `-ec`) among its options.
pub fn has_command_flag(words: &[Word]) -> bool {
    let mut i = 1;
    while i < words.len() {
        let t = words[i].text.as_str();
        if t == "--" || !(t.starts_with('-') || t.starts_with('+')) || t.len() < 2 {
            return false;
        }
        if t == "--command" || (!t.starts_with("--") && t.starts_with('-') && t[1..].contains('c'))
        {
            return true;
        }
        // Options that take the next word as their value.
        if matches!(t, "-o" | "-O" | "+o" | "+O" | "--rcfile" | "--init-file") {
            i += 1;
        }
        i += 1;
    }
    false
}

/// What `echo` or `printf` given these words prints, when the words are
/// known.
pub(super) fn printed(words: &[Word]) -> Option<String> {
    let (program, args) = words.split_first()?;
    if args.iter().any(|w| w.computed || w.text.contains(UNKNOWN)) {
        return None;
    }
    let args: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
    match base(&program.text) {
        "echo" => {
            let at = args
                .iter()
                .position(|a| !matches!(*a, "-n" | "-e" | "-E" | "-ne" | "-en"))
                .unwrap_or(args.len());
            Some(args[at..].join(" "))
        }
        "printf" => {
            let args = args.strip_prefix(&["--"]).unwrap_or(&args);
            let (format, rest) = args.split_first()?;
            Some(printf(format, rest))
        }
        _ => None,
    }
}

/// Whether these words are a shell that reads its script from its input:
/// no `-c`, no script file (`sh`, `bash -s ARGS`, `sh -e`).
pub(super) fn reads_its_input(words: &[Word]) -> bool {
    if !words.first().is_some_and(|w| is_shell(&w.text)) || has_command_flag(words) {
        return false;
    }
    let mut i = 1;
    while i < words.len() {
        let t = words[i].text.as_str();
        if t == "--" {
            return i + 1 == words.len();
        }
        if !(t.starts_with('-') || t.starts_with('+')) || t.len() < 2 {
            return false;
        }
        if !t.starts_with("--") && t.starts_with('-') && t[1..].contains('s') {
            return true;
        }
        if matches!(t, "-o" | "-O" | "+o" | "+O" | "--rcfile" | "--init-file") {
            i += 1;
        }
        i += 1;
    }
    true
}

/// Whether the command so far is a shell, which reads what it is fed.
pub(super) fn fed_to_shell(words: &[Raw]) -> bool {
    words
        .iter()
        .find_map(|w| w.literal().filter(|t| !t.contains('=')))
        .is_some_and(|program| is_shell(&program))
}
