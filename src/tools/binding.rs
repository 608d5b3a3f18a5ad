//! What an approval covers, beyond the words of a command line: the
//! directory it runs in, the programs it runs and the scripts they read —
//! each by identity, not by name — and the variables it sets.
//!
//! A [`Binding`] is taken when a call is shown to whoever approves it (a
//! plan `system.run.prepare` hands the gateway, the question on the
//! terminal, the policy's reading of an allowlist), and taken again just
//! before the program starts; anything that differs refuses the run. So a
//! script rewritten after its approval, a program swapped behind its path,
//! a file planted earlier on `PATH`, a working directory replaced, or a
//! variable the approver never saw, all stop the command, as OpenClaw's
//! node host stops them ("approval script operand changed before
//! execution") — and more strictly: its identity of a program is a path,
//! ours is the file (device, inode, size, modification and change times),
//! and it binds a script's content only, ours its content and its file.
//! What cannot be bound is not approved at all ([`Drift::Unbindable`]):
//! code loaded by a module or package name (`python3 -m`, `perl -M`,
//! `ruby -r`, `node --require pkg`), files run from a directory
//! only known when it runs, a command line too large to read or naming
//! more files than a binding holds — as OpenClaw refuses such shapes.
//!
//! Which files a command line runs is read with [`super::cmdline`]: each
//! command's program (found on `PATH` from where it runs), the script an
//! interpreter or `source` is given (`sh job.sh`, `python3 -u x.py`,
//! `node --require ./hook.js app.js`), files named as values of options
//! (`--rcfile F`, `--require=F`, `-fprog.awk`), a script an interpreter
//! reads on its input (`sh < F`, `cat F | sh`), what a glob matches, and
//! any executable file a command names by path. A file that is missing is
//! bound as missing: one that appears later changes the binding too.
//!
//! A binding's cost is bounded whatever the command line: a file is bound
//! once however it is named, scripts are hashed up to 64 MiB per call in
//! all (past that, by identity), and only regular files are read (a
//! device or a FIFO is never opened for reading its content).
//!
//! What remains: the moment between the last check and the program or its
//! interpreter opening the file (milliseconds for a script: the
//! interpreter starts first; only for someone who can already write it),
//! what a program loads on its own that its command line does not name,
//! and code a command computes when it runs (`sh -c "$(cat F)"`).

use std::path::{Path, PathBuf};

use super::ToolError;
use super::cmdline::{self, Command, base};
use super::environment;
use super::policy::Exec;

/// Bytes of scripts one binding hashes, in all: past it, a script is
/// bound by its file only (a change still changes its identity). Hashing
/// is the one part of a binding whose cost a command line could choose.
const HASH_AT_MOST: u64 = 64 << 20;
/// Entries of a directory a glob is matched against at most.
const GLOB_LISTS_AT_MOST: usize = 1_000;
/// Files bound per call at most (a command line naming thousands of
/// executables binds the first ones).
const MAX_FILES: usize = 256;

/// One call's binding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    cwd: Option<Identity>,
    files: Vec<Bound>,
    env: Option<String>,
    env_keys: Vec<String>,
    /// Why no approval can cover this command line, if none can: it runs
    /// code this binding cannot pin down (OpenClaw refuses such shapes at
    /// prepare too).
    unbindable: Option<String>,
}

/// A file as the filesystem knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    path: PathBuf,
    /// A regular file (only those are read: a device or a FIFO named as a
    /// script could be read forever, or block).
    regular: bool,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// A file a command line runs, as it stood.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bound {
    /// The word that named it.
    word: String,
    /// `None`: it did not exist (or could not be found on `PATH`).
    file: Option<Identity>,
    /// It is code an interpreter reads (a script), not only a program.
    script: bool,
    /// A script's content, as OpenClaw binds it.
    sha256: Option<String>,
}

/// What changed between a binding and now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// The call sets variables the approved one did not.
    EnvMissing { keys: Vec<String> },
    /// The call sets other values (or fewer variables).
    EnvMismatch { keys: Vec<String> },
    /// The working directory is another directory now.
    Cwd,
    /// A program or a script is another file, or changed.
    File { word: String },
    /// The approved command line could not be bound at all.
    Unbindable { why: String },
}

impl Drift {
    /// The refusal, in OpenClaw's words where it has them.
    pub fn error(&self) -> ToolError {
        let message = match self {
            Drift::EnvMissing { keys } => format!(
                "SYSTEM_RUN_DENIED: APPROVAL_ENV_BINDING_MISSING: approval id missing env binding for requested env overrides ({}): the approved plan set no variables",
                keys.join(", ")
            ),
            Drift::EnvMismatch { keys } => format!(
                "SYSTEM_RUN_DENIED: APPROVAL_ENV_MISMATCH: approval id env binding mismatch (the run sets {}; the approved plan set other values)",
                if keys.is_empty() {
                    "no variables".to_owned()
                } else {
                    keys.join(", ")
                }
            ),
            Drift::Cwd => "SYSTEM_RUN_DENIED: approval cwd changed before execution".to_owned(),
            Drift::File { word } => format!(
                "SYSTEM_RUN_DENIED: approval script operand changed before execution ({word:?} is not the file that was approved)"
            ),
            Drift::Unbindable { why } => {
                format!("SYSTEM_RUN_DENIED: approval cannot safely bind this command: {why}")
            }
        };
        ToolError::new("SYSTEM_RUN_DENIED", message)
    }
}

impl Binding {
    /// The binding of `exec` as things stand (reads the filesystem).
    /// `requested` is every variable the call asked for (a shell wrapper
    /// may not get them all): it is what was shown, so it is what is bound.
    pub fn of(exec: &Exec, requested: &[(String, String)]) -> Self {
        let reading = super::forbidden::read(exec);
        let mut files: Vec<Bound> = Vec::new();
        // One entry per file however it is named (`a.sh`, `./a.sh`, …).
        let mut seen: std::collections::HashMap<PathBuf, usize> = Default::default();
        let mut unfound = std::collections::HashSet::new();
        let mut hashing = HASH_AT_MOST;
        let mut unbindable = reading
            .incomplete
            .then(|| "its command line is too large or too deeply nested to read".to_owned())
            .or_else(|| reading.commands.iter().find_map(loads_unnamed_code));
        for (word, script, command) in reading.commands.iter().flat_map(|c| {
            named(c, &reading.commands)
                .into_iter()
                // A command's output (`sh $(…)`) names no file here.
                .filter(|(w, _)| !w.is_empty())
                .map(move |(w, s)| (w, s, c))
        }) {
            if files.len() >= MAX_FILES {
                unbindable.get_or_insert_with(|| format!("it names more than {MAX_FILES} files"));
                break;
            }
            if command.cwd.to_string_lossy().contains('\0') {
                unbindable.get_or_insert_with(|| {
                    "it runs files from a directory only known when it runs".to_owned()
                });
                break;
            }
            let file = locate(&word, command).as_deref().and_then(identity);
            let at = match &file {
                Some(id) => seen.get(&id.path).copied(),
                None if !unfound.insert((word.clone(), command.cwd.clone())) => continue,
                None => None,
            };
            let at = match at {
                Some(at) => at,
                None => {
                    if let Some(id) = &file {
                        seen.insert(id.path.clone(), files.len());
                    }
                    files.push(Bound {
                        word,
                        file,
                        script: false,
                        sha256: None,
                    });
                    files.len() - 1
                }
            };
            let bound = &mut files[at];
            bound.script |= script;
            if let (true, None, Some(id)) = (script, &bound.sha256, &bound.file)
                && id.regular
                && id.size <= hashing
            {
                hashing -= id.size;
                bound.sha256 = hash(id);
            }
        }
        let mut env_keys: Vec<String> = requested.iter().map(|(k, _)| k.clone()).collect();
        env_keys.sort();
        Self {
            cwd: identity(&exec.cwd),
            files,
            env: environment::fingerprint(requested),
            env_keys,
            unbindable,
        }
    }

    /// Why no approval can cover this command line, if none can.
    pub fn unbindable(&self) -> Option<&str> {
        self.unbindable.as_deref()
    }

    /// Whether `now` is what this binding covers.
    pub fn check(&self, now: &Binding) -> Result<(), Drift> {
        if let Some(why) = self.unbindable.as_ref().or(now.unbindable.as_ref()) {
            return Err(Drift::Unbindable { why: why.clone() });
        }
        if self.env != now.env {
            return Err(match self.env {
                None => Drift::EnvMissing {
                    keys: now.env_keys.clone(),
                },
                Some(_) => Drift::EnvMismatch {
                    keys: now.env_keys.clone(),
                },
            });
        }
        if self.cwd != now.cwd {
            return Err(Drift::Cwd);
        }
        let changed = self
            .files
            .iter()
            .zip(&now.files)
            .find(|(a, b)| a != b)
            .map(|(a, _)| a.word.clone())
            .or_else(|| {
                (self.files.len() != now.files.len()).then(|| {
                    let longer = if self.files.len() > now.files.len() {
                        &self.files
                    } else {
                        &now.files
                    };
                    longer[self.files.len().min(now.files.len())].word.clone()
                })
            });
        match changed {
            Some(word) => Err(Drift::File { word }),
            None => Ok(()),
        }
    }

    /// Whether the command runs code from a file an interpreter reads (a
    /// script): an approval of it covers the file as it is now, which a
    /// standing allowlist entry (a program and its arguments) cannot.
    pub fn runs_a_script(&self) -> bool {
        self.files.iter().any(|f| f.script)
    }

    /// A short fingerprint of the files and the directory (what "allow
    /// always" remembers besides the command line and its variables).
    pub fn digest(&self) -> String {
        let mut text = format!("{:?}", self.cwd);
        for file in &self.files {
            text.push_str(&format!(
                "\0{:?}\0{:?}\0{:?}",
                file.word, file.file, file.sha256
            ));
        }
        super::audit::digest(&text)
    }

    /// The first script's binding, in the shape OpenClaw's plan carries
    /// it (`mutableFileOperand {argvIndex, path, sha256}`), when the script
    /// is one of `argv`'s own words.
    pub fn operand(&self, argv: &[String]) -> Option<serde_json::Value> {
        self.files.iter().find_map(|f| {
            let sha = f.sha256.as_ref()?;
            let index = argv.iter().skip(1).position(|a| *a == f.word)? + 1;
            Some(serde_json::json!({"argvIndex": index, "path": f.file.as_ref()?.path, "sha256": sha}))
        })
    }
}

/// The files `command` runs, each with whether it is code read by an
/// interpreter (its content is bound too): its program, the script an
/// interpreter or `source` is given — as an operand, an option's value
/// (`--rcfile F`, `--require=F`, `-fF`), on its input (`sh < F`), or
/// printed into it by the command before it in a pipeline (`cat F | sh`)
/// — and any executable file it names by path. A glob is bound as what it
/// matches now.
fn named(command: &Command, all: &[Command]) -> Vec<(String, bool)> {
    let own = runs(command);
    let mut out = own.files;
    let program = command.words.first().map_or("", |w| base(&w.text));
    if own.stdin_code || program == "exec" {
        out.extend(command.inputs.iter().map(|w| (w.text.clone(), true)));
    }
    if command
        .feeds
        .and_then(|at| all.get(at))
        .is_some_and(|fed| runs(fed).stdin_code)
    {
        out.extend(
            command
                .words
                .iter()
                .skip(1)
                .filter(|w| !w.text.starts_with('-'))
                .map(|w| (w.text.clone(), true)),
        );
    }
    // A glob names what it matches (or, matching nothing, itself).
    let globs: Vec<&str> = command
        .words
        .iter()
        .chain(&command.inputs)
        .filter(|w| w.glob)
        .map(|w| w.text.as_str())
        .collect();
    out.into_iter()
        .flat_map(|(word, script)| {
            let matches = if globs.contains(&word.as_str()) {
                glob_matches(&word, &command.cwd)
            } else {
                Vec::new()
            };
            if matches.is_empty() {
                vec![(word, script)]
            } else {
                matches.into_iter().map(|m| (m, script)).collect()
            }
        })
        .collect()
}

/// What a glob word matches in `cwd` now, when only its last component
/// is a pattern (a deeper pattern is bound as the word it is).
fn glob_matches(word: &str, cwd: &Path) -> Vec<String> {
    let path = cwd.join(word);
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    if parent.to_string_lossy().contains(['*', '?', '[']) {
        return Vec::new();
    }
    let Ok(matcher) = globset::GlobBuilder::new(&name.to_string_lossy())
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
    else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .take(GLOB_LISTS_AT_MOST)
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| {
            !n.to_string_lossy().starts_with('.') || name.to_string_lossy().starts_with('.')
        })
        .filter(|n| matcher.is_match(n))
        .map(|n| parent.join(n).to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// Options by which an interpreter loads code its command line names only
/// by a module or package name, found on a search path when it runs
/// (`python3 -m job`, `perl -MFoo`, `ruby -rfoo`, `node --require pkg`):
/// nothing here can be bound, so OpenClaw refuses to approve them, and so
/// do we. (`env -C DIR` is followed by the reader, as `cd` is.)
fn loads_unnamed_code(command: &Command) -> Option<String> {
    let (program, args) = command.words.split_first()?;
    let name = base(&program.text);
    // A program or a script named by what is only known when it runs
    // (`$(…) x`, `sh "$(…)"`, `python3 ./$(…).py`).
    if program.computed {
        return Some("its program is named only when it runs".into());
    }
    if interpreter(name).is_some() && args.iter().any(|w| w.computed) {
        return Some(format!("{name} runs code named only when it runs"));
    }
    let args: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
    let options = args
        .iter()
        .take_while(|a| a.starts_with('-') && **a != "--");
    let found = |flags: &[&str]| {
        options
            .clone()
            .find(|a| {
                flags
                    .iter()
                    .any(|f| a.starts_with(f) && !(f.len() == 2 && a.starts_with("--")))
            })
            .map(|a| format!("{name} {a} loads code found only when it runs"))
    };
    if name.starts_with("python") {
        found(&["-m"])
    } else if name.starts_with("perl") {
        found(&["-M", "-m", "-I"])
    } else if name.starts_with("ruby") {
        found(&["-r", "-I", "--require"])
    } else if matches!(name, "node" | "nodejs" | "bun" | "deno") {
        // A file (`-r ./hook.js`) is bound; a package is not.
        let mut words = args.iter();
        while let Some(a) = words.next() {
            let value = match *a {
                "-r" | "--require" | "--import" | "--loader" | "--experimental-loader" => {
                    words.next().copied()
                }
                a => [
                    "--require=",
                    "--import=",
                    "--loader=",
                    "--experimental-loader=",
                ]
                .iter()
                .find_map(|p| a.strip_prefix(p)),
            };
            if let Some(value) = value
                && !value.contains('/')
            {
                return Some(format!(
                    "{name} loads the package {value:?}, found only when it runs"
                ));
            }
        }
        None
    } else {
        None
    }
}

/// What a command's own words say it runs.
struct Runs {
    files: Vec<(String, bool)>,
    /// It is an interpreter given no script: it reads its code from its
    /// input (`sh`, `bash -s`, `python3 -`).
    stdin_code: bool,
}

fn runs(command: &Command) -> Runs {
    let words: Vec<&str> = command.words.iter().map(|w| w.text.as_str()).collect();
    let Some((program, args)) = words.split_first() else {
        return Runs {
            files: Vec::new(),
            stdin_code: false,
        };
    };
    let mut out = vec![(program.to_string(), false)];
    let mut stdin_code = false;
    let name = base(program);
    if matches!(name, "." | "source") {
        out.extend(args.first().map(|s| (s.to_string(), true)));
        return Runs {
            files: out,
            stdin_code,
        };
    }
    // `sh -c SCRIPT`, `bash -xec SCRIPT`: the reader read the script (told
    // the one way the reader tells it).
    let inline = cmdline::is_shell(name) && cmdline::has_command_flag(&command.words);
    if let Some(rules) = interpreter(name) {
        stdin_code = rules.from_stdin;
        let mut i = 0;
        while i < args.len() {
            let arg = args[i];
            if arg == "--" {
                stdin_code = rules.from_stdin && args.get(i + 1).is_none();
                out.extend(args.get(i + 1).map(|s| (s.to_string(), true)));
                break;
            }
            let cluster = !arg.starts_with("--") && arg.starts_with('-') && arg.contains('c');
            if (inline && (cluster || arg == "--command"))
                || rules.inline.contains(&arg)
                || rules
                    .inline
                    .iter()
                    .any(|f| f.len() == 2 && arg.starts_with(f) && !arg.starts_with("--"))
            {
                // The code is on the command line (`-c`, `-e`), or on the
                // input (`-`, `-s`).
                stdin_code = rules.from_stdin && matches!(arg, "-" | "-s");
                break;
            }
            if rules.valued.contains(&arg) {
                // An option's value may be a file it loads (`--rcfile F`).
                out.extend(args.get(i + 1).map(|s| (s.to_string(), true)));
                i += 2;
                continue;
            }
            // ... given in the same word: `--require=F`, `-fF`, `-r./F`.
            let attached = arg
                .split_once('=')
                .filter(|(o, _)| o.starts_with("--") && rules.valued.contains(o))
                .map(|(_, v)| v)
                .or_else(|| {
                    rules
                        .valued
                        .iter()
                        .find(|o| {
                            o.len() == 2
                                && arg.len() > 2
                                && arg.starts_with(**o)
                                && !arg.starts_with("--")
                        })
                        .map(|o| &arg[o.len()..])
                });
            if let Some(value) = attached {
                out.push((value.to_owned(), true));
                i += 1;
                continue;
            }
            if arg.starts_with('-') || (arg.starts_with('+') && cmdline::is_shell(name)) {
                i += 1;
                continue;
            }
            out.push((arg.to_string(), true));
            stdin_code = false;
            break;
        }
    }
    // Anything else named by path that could be run (`xargs ./x.sh`).
    for arg in args {
        if arg.contains('/')
            && !out.iter().any(|(w, _)| w == arg)
            && is_executable(&command.cwd.join(arg))
        {
            out.push((arg.to_string(), false));
        }
    }
    Runs {
        files: out,
        stdin_code,
    }
}

/// How an interpreter takes its script.
struct Rules {
    /// Options whose value follows as the next word.
    valued: &'static [&'static str],
    /// Options that give the code itself: then there is no script file.
    inline: &'static [&'static str],
    /// Given no script, it reads its code from its input.
    from_stdin: bool,
}

fn interpreter(name: &str) -> Option<Rules> {
    let rules = |valued, inline| {
        Some(Rules {
            valued,
            inline,
            from_stdin: true,
        })
    };
    let name = name.strip_suffix(".exe").unwrap_or(name);
    if cmdline::is_shell(name) || matches!(name, "fish" | "csh" | "tcsh") {
        // `-c` (alone or in a cluster) is told by the command line reader.
        return rules(
            &["--rcfile", "--init-file", "-o", "-O", "+o", "+O"],
            &["-s", "-"],
        );
    }
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    match stem {
        "python" | "pypy" => rules(&["-W", "-X", "-Q"], &["-c", "-m", "-"]),
        "node" | "nodejs" => rules(
            &[
                "-r",
                "--require",
                "--import",
                "--loader",
                "--experimental-loader",
                "--env-file",
                "--env-file-if-exists",
                "--input-type",
            ],
            &["-e", "--eval", "-p", "--print", "-"],
        ),
        "perl" => rules(&["-I", "-M", "-m", "-x"], &["-e", "-E", "-"]),
        "ruby" => rules(&["-I", "-r", "-C", "-E", "--encoding"], &["-e", "-"]),
        "php" => rules(&["-c", "-d", "-f", "-z"], &["-r", "-R", "-B", "-E", "-"]),
        "lua" | "luajit" => rules(&["-l"], &["-e", "-"]),
        "Rscript" | "tclsh" | "wish" | "julia" | "tsx" | "ts-node" | "deno" | "bun" | "java"
        | "osascript" => rules(
            &[
                "-f",
                "-jar",
                "--config",
                "-r",
                "--require",
                "--preload",
                "--import-map",
            ],
            &["-e", "--eval", "-"],
        ),
        // Its program is an operand or `-f FILE`; its input is data.
        "awk" | "gawk" | "mawk" | "nawk" => Some(Rules {
            valued: &["-f", "--file", "-v", "-F", "-i"],
            inline: &[],
            from_stdin: false,
        }),
        _ => None,
    }
}

/// Where `word` is as `command` would find it: a path from its directory,
/// a name on its `PATH`.
fn locate(word: &str, command: &Command) -> Option<PathBuf> {
    if word.is_empty() {
        return None;
    }
    if word.contains('/') {
        return Some(command.cwd.join(word));
    }
    let path = command.path.clone().or_else(|| std::env::var("PATH").ok());
    which::which_in(word, path, &command.cwd)
        .ok()
        // A script named without a path is read from the directory.
        .or_else(|| Some(command.cwd.join(word)).filter(|p| p.is_file()))
}

/// A file by what it is; a directory by which one it is — its inode and
/// when it was made (its contents, and so its other times, change with
/// every file made in it; an inode number is reused at once).
fn identity(path: &Path) -> Option<Identity> {
    let real = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&real).ok()?;
    let (mtime, ctime) = if meta.is_dir() {
        (born(&meta), (0, 0))
    } else {
        times(&meta)
    };
    Some(Identity {
        regular: meta.is_file(),
        dev: dev(&meta),
        ino: ino(&meta),
        size: if meta.is_dir() { 0 } else { meta.len() },
        mtime,
        ctime,
        path: real,
    })
}

/// A regular file's SHA-256, read through a descriptor that is checked to
/// be that very file (opened without blocking, so a FIFO swapped in after
/// the look cannot hold the thread), `size` bytes at most.
fn hash(id: &Identity) -> Option<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut options = std::fs::File::options();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOCTTY,
    );
    let file = options.open(&id.path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || dev(&meta) != id.dev || ino(&meta) != id.ino {
        return None;
    }
    let mut file = file.take(id.size);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(crate::shared::hex::hex(&hasher.finalize()))
}

/// When a file was made, where the filesystem says (statx's birth time).
fn born(meta: &std::fs::Metadata) -> (i64, i64) {
    meta.created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| (d.as_secs() as i64, i64::from(d.subsec_nanos())))
        .unwrap_or_default()
}

#[cfg(unix)]
pub(super) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
pub(super) fn is_executable(path: &Path) -> bool {
    path.is_file()
}

#[cfg(unix)]
fn dev(meta: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::dev(meta)
}

#[cfg(unix)]
fn ino(meta: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

#[cfg(unix)]
fn times(meta: &std::fs::Metadata) -> ((i64, i64), (i64, i64)) {
    use std::os::unix::fs::MetadataExt;
    (
        (meta.mtime(), meta.mtime_nsec()),
        (meta.ctime(), meta.ctime_nsec()),
    )
}

#[cfg(not(unix))]
fn dev(_meta: &std::fs::Metadata) -> u64 {
    0
}

#[cfg(not(unix))]
fn ino(_meta: &std::fs::Metadata) -> u64 {
    0
}

#[cfg(not(unix))]
fn times(meta: &std::fs::Metadata) -> ((i64, i64), (i64, i64)) {
    let at = |t: std::io::Result<std::time::SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| (d.as_secs() as i64, i64::from(d.subsec_nanos())))
            .unwrap_or_default()
    };
    (at(meta.modified()), at(meta.created()))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn exec(argv: &[&str], cwd: &Path, env: &[(&str, &str)]) -> (Exec, Vec<(String, String)>) {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let executable = which::which_in(&argv[0], std::env::var_os("PATH"), cwd)
            .unwrap_or_else(|_| cwd.join(&argv[0]));
        (
            Exec {
                executable,
                argv,
                cwd: cwd.to_path_buf(),
                env: env.clone(),
                bound: None,
            },
            env,
        )
    }

    fn binding(argv: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Binding {
        let (exec, env) = exec(argv, cwd, env);
        Binding::of(&exec, &env)
    }

    /// A program or a script named by what is only known when it runs is
    /// never approved: nothing pins the file that will run.
    #[test]
    fn code_named_only_when_it_runs_cannot_be_approved() {
        let dir = tempfile::tempdir().unwrap();
        for script in [
            "sh \"$(echo job.sh)\"",
            "python3 ./$(echo a).py",
            "$(echo sh) job.sh",
        ] {
            let bound = binding(&["sh", "-c", script], dir.path(), &[]);
            assert!(bound.unbindable.is_some(), "{script}: {bound:?}");
        }
        let bound = binding(&["sh", "-c", "sh job.sh $(date)"], dir.path(), &[]);
        assert!(bound.unbindable.is_some(), "an argument may be code too");
        let bound = binding(&["sh", "-c", "ls $(pwd)"], dir.path(), &[]);
        assert_eq!(bound.unbindable, None);
    }

    /// A shell's inline script is no file, however its `-c` is clustered;
    /// a file it loads by an option still is.
    #[test]
    fn a_shells_inline_script_is_no_file_but_its_rcfile_is() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("rc"), "echo rc\n").unwrap();
        for argv in [
            &["bash", "-xec", "echo hi"][..],
            &["bash", "--rcfile", "rc", "-ic", "echo hi"],
        ] {
            let bound = binding(argv, dir.path(), &[]);
            assert!(
                bound.files.iter().all(|f| f.word != "echo hi"),
                "{argv:?}: {:?}",
                bound.files
            );
            assert_eq!(bound.unbindable, None);
        }
        let with_rc = binding(
            &["bash", "--rcfile", "rc", "-ic", "echo hi"],
            dir.path(),
            &[],
        );
        assert!(with_rc.files.iter().any(|f| f.word == "rc" && f.script));
    }

    /// Rewrites a file with new content, keeping its inode.
    fn rewrite(path: &Path, content: &str) {
        std::fs::write(path, content).unwrap();
    }

    #[test]
    fn a_script_rewritten_after_approval_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("job.sh");
        std::fs::write(&script, "echo approved\n").unwrap();
        for argv in [
            &["sh", "job.sh"][..],
            &["bash", "-x", "./job.sh", "arg"],
            &["sh", "-c", "sh job.sh && echo done"],
            &["nice", "-n", "5", "bash", "--", "job.sh"],
            &["sh", "-c", ". ./job.sh"],
            &["python3", "-u", "job.sh"],
        ] {
            rewrite(&script, "echo approved\n");
            let approved = binding(argv, dir.path(), &[]);
            assert_eq!(
                approved.check(&binding(argv, dir.path(), &[])),
                Ok(()),
                "{argv:?}"
            );
            rewrite(&script, "echo evil\n");
            let drift = approved.check(&binding(argv, dir.path(), &[])).unwrap_err();
            assert!(matches!(drift, Drift::File { .. }), "{argv:?}: {drift:?}");
            assert!(
                drift
                    .error()
                    .message
                    .contains("approval script operand changed before execution")
            );
        }
    }

    #[test]
    fn a_program_swapped_behind_its_path_or_planted_on_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "#!/bin/sh\necho one\n").unwrap();
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let approved = binding(&["./tool"], dir.path(), &[]);
        // Replaced by rename: same name, another file.
        let other = dir.path().join("tool.new");
        std::fs::write(&other, "#!/bin/sh\necho one\n").unwrap();
        std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        std::fs::rename(&other, &tool).unwrap();
        assert!(matches!(
            approved.check(&binding(&["./tool"], dir.path(), &[])),
            Err(Drift::File { .. })
        ));
        // A name found on PATH in a shell that puts a writable directory first.
        let script = format!("PATH={}:$PATH; uname -s", dir.path().display());
        let approved = binding(&["sh", "-c", &script], dir.path(), &[]);
        let planted = dir.path().join("uname");
        std::fs::write(&planted, "#!/bin/sh\necho planted\n").unwrap();
        std::fs::set_permissions(
            &planted,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        assert!(matches!(
            approved.check(&binding(&["sh", "-c", &script], dir.path(), &[])),
            Err(Drift::File { .. })
        ));
    }

    #[test]
    fn variables_the_approval_did_not_show_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let plain = binding(&["env"], dir.path(), &[]);
        let with = binding(&["env"], dir.path(), &[("GREETING", "hi")]);
        assert_eq!(
            plain.check(&with),
            Err(Drift::EnvMissing {
                keys: vec!["GREETING".into()]
            })
        );
        let other = binding(&["env"], dir.path(), &[("GREETING", "bye")]);
        assert!(matches!(with.check(&other), Err(Drift::EnvMismatch { .. })));
        assert!(matches!(with.check(&plain), Err(Drift::EnvMismatch { .. })));
        assert_eq!(
            with.check(&binding(&["env"], dir.path(), &[("GREETING", "hi")])),
            Ok(())
        );
    }

    #[test]
    fn a_working_directory_replaced_is_refused() {
        let holder = tempfile::tempdir().unwrap();
        let cwd = holder.path().join("w");
        std::fs::create_dir(&cwd).unwrap();
        let approved = binding(&["true"], &cwd, &[]);
        std::fs::remove_dir(&cwd).unwrap();
        std::fs::create_dir(&cwd).unwrap();
        assert_eq!(
            approved.check(&binding(&["true"], &cwd, &[])),
            Err(Drift::Cwd)
        );
    }

    #[test]
    fn the_script_operand_is_shaped_as_openclaw_plans_carry_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.py"), "print(\"v1\")\n").unwrap();
        let b = binding(&["python3", "a.py"], dir.path(), &[]);
        let operand = b.operand(&["python3".into(), "a.py".into()]).unwrap();
        assert_eq!(operand["argvIndex"], 1);
        // OpenClaw's vector for this content.
        assert_eq!(
            operand["sha256"],
            "e2a825567edf6017316f13512b35ebd795459451065f11edc7ded05f6bc8a90f"
        );
    }

    /// Binds `argv` in `dir`, rewrites `file` there in place (same inode,
    /// same size) and says whether the binding noticed.
    fn notices_a_rewrite(argv: &[&str], dir: &Path, file: &str) -> bool {
        let path = dir.join(file);
        std::fs::write(&path, "echo approved\n").unwrap();
        let approved = binding(argv, dir, &[]);
        std::fs::write(&path, "echo changed\n").unwrap();
        let noticed = approved.check(&binding(argv, dir, &[])).is_err();
        std::fs::write(&path, "echo approved\n").unwrap();
        noticed
    }

    #[test]
    fn a_script_named_by_an_options_attached_value_is_bound() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["app.js", "x.rb", "input"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        for (argv, file) in [
            (&["node", "--require=./hook.js", "app.js"][..], "hook.js"),
            (&["node", "--import=./hook.mjs", "app.js"], "hook.mjs"),
            (&["ruby", "-r./hook.rb", "x.rb"], "hook.rb"),
            (&["awk", "-fprog.awk", "input"], "prog.awk"),
            (&["awk", "--file=prog.awk", "input"], "prog.awk"),
        ] {
            assert!(
                notices_a_rewrite(argv, dir.path(), file),
                "{argv:?}: {file} rewritten unnoticed"
            );
        }
    }

    #[test]
    fn a_script_fed_on_standard_input_is_bound() {
        let dir = tempfile::tempdir().unwrap();
        for script in [
            "sh < job.sh",
            "bash -s < job.sh",
            "python3 - < job.sh",
            "cat job.sh | sh",
            "cat ./job.sh | bash -s -- arg",
            "exec 3<job.sh; sh /dev/fd/3",
        ] {
            assert!(
                notices_a_rewrite(&["sh", "-c", script], dir.path(), "job.sh"),
                "{script}: job.sh rewritten unnoticed"
            );
        }
        // Data a script reads is not its code.
        std::fs::write(dir.path().join("x.py"), "print(1)\n").unwrap();
        for script in ["cat job.sh | python3 x.py", "python3 x.py < job.sh"] {
            assert!(
                !notices_a_rewrite(&["sh", "-c", script], dir.path(), "job.sh"),
                "{script}: data bound as code"
            );
        }
    }

    #[test]
    fn a_script_named_by_a_glob_braces_or_a_function_argument_is_bound() {
        let dir = tempfile::tempdir().unwrap();
        for script in [
            "sh j*.sh",
            "sh job.s?",
            "sh ./[j]ob.sh",
            "sh {job,none}.sh",
            "f(){ sh \"$1\"; }; f job.sh",
        ] {
            assert!(
                notices_a_rewrite(&["sh", "-c", script], dir.path(), "job.sh"),
                "{script}: job.sh rewritten unnoticed"
            );
        }
    }

    /// Runs `work` on a thread and waits for it, at most a minute: what a
    /// binding reads must end (a device or a FIFO never does).
    fn ends<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(work());
        });
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("binding a command line never ended")
    }

    #[test]
    fn devices_and_fifos_named_as_scripts_are_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("job.sh");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for script in ["/dev/zero", "/dev/urandom", "job.sh"] {
            let cwd = dir.path().to_path_buf();
            let bound = ends(move || binding(&["sh", script], &cwd, &[]));
            assert!(
                bound.files.iter().all(|f| f.sha256.is_none()),
                "{script}: {bound:?}"
            );
        }
    }

    #[test]
    fn one_file_named_many_ways_is_bound_and_hashed_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.sh"), "echo a\n").unwrap();
        let script = "sh a.sh; sh ./a.sh; sh .//a.sh; sh ././a.sh; sh $PWD/a.sh";
        let bound = binding(&["sh", "-c", script], dir.path(), &[]);
        let hashed = bound.files.iter().filter(|f| f.sha256.is_some()).count();
        assert_eq!(hashed, 1, "{bound:?}");
    }

    #[test]
    fn a_binding_hashes_a_bounded_amount_in_all() {
        // Three sparse 40 MiB scripts: hashing them all would read 120
        // MiB for one call; past the bound, a file is bound by identity.
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.sh", "b.sh", "c.sh"] {
            let file = std::fs::File::create(dir.path().join(name)).unwrap();
            file.set_len(40 << 20).unwrap();
        }
        let argv = ["sh", "-c", "sh a.sh; sh b.sh; sh c.sh"];
        let bound = binding(&argv, dir.path(), &[]);
        let hashed = bound.files.iter().filter(|f| f.sha256.is_some()).count();
        assert_eq!(hashed, 1, "{bound:?}");
        // What is bound by identity only still notices a change.
        std::fs::write(dir.path().join("c.sh"), "echo changed\n").unwrap();
        assert!(matches!(
            bound.check(&binding(&argv, dir.path(), &[])),
            Err(Drift::File { .. })
        ));
    }

    /// `builtin cd` / `command cd` / `eval cd` move the shell: the script
    /// bound is the one in the new directory (it was the old one's).
    #[test]
    fn a_cd_behind_builtin_command_or_eval_binds_the_script_that_runs() {
        for script in [
            "builtin cd sub && ./x.sh",
            "command cd sub && ./x.sh",
            "eval cd sub; ./x.sh",
        ] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("sub")).unwrap();
            std::fs::write(dir.path().join("x.sh"), "echo decoy\n").unwrap();
            std::fs::write(dir.path().join("sub/x.sh"), "echo approved\n").unwrap();
            let argv = ["bash", "-c", script];
            let approved = binding(&argv, dir.path(), &[]);
            rewrite(&dir.path().join("sub/x.sh"), "echo NOT approved\n");
            assert!(
                approved.check(&binding(&argv, dir.path(), &[])).is_err(),
                "{script}: sub/x.sh was rewritten after approval and still runs"
            );
        }
    }

    /// `python3 -m mod` runs ./mod.py from the working directory, found
    /// when it runs: no approval covers it (OpenClaw refuses to approve a
    /// shape it cannot bind), however it was approved.
    #[test]
    fn code_loaded_by_module_name_cannot_be_approved() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("job.py"), "print('approved')\n").unwrap();
        let argv = ["python3", "-m", "job"];
        let approved = binding(&argv, dir.path(), &[]);
        rewrite(&dir.path().join("job.py"), "print('NOT approved')\n");
        assert!(approved.check(&binding(&argv, dir.path(), &[])).is_err());
    }

    /// Past MAX_FILES bound files the rest of the command line went
    /// unbound, silently: a script named after 256 other files could be
    /// rewritten after approval. Now no approval covers such a line.
    #[test]
    fn a_command_line_naming_too_many_files_cannot_be_approved() {
        let dir = tempfile::tempdir().unwrap();
        let mut line = String::from("ls");
        for i in 0..300 {
            let f = dir.path().join(format!("t{i}"));
            std::fs::write(&f, "").unwrap();
            std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            line.push_str(&format!(" ./t{i}"));
        }
        line.push_str("; sh job.sh");
        std::fs::write(dir.path().join("job.sh"), "echo approved\n").unwrap();
        let argv = ["sh", "-c", line.as_str()];
        let approved = binding(&argv, dir.path(), &[]);
        rewrite(&dir.path().join("job.sh"), "echo NOT approved\n");
        assert!(approved.check(&binding(&argv, dir.path(), &[])).is_err());
    }
}
