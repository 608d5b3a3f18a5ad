//! Our secrets — the gateway's token and password, setup codes, the links'
//! tokens and keys — kept from every program we run and from the other
//! processes of this machine's users.
//!
//! A child can read its parent's `/proc/PPID/environ` and
//! `/proc/PPID/cmdline`, and those files do not show the environment or
//! the arguments as the process keeps them now: they show the memory the
//! kernel filled at `execve` (between `env_start` and `env_end`, `arg_start`
//! and `arg_end`), which `unsetenv` never touches. So [`seal`], once at
//! start-up, before any other thread exists:
//!
//! - makes the process non-dumpable (Linux `PR_SET_DUMPABLE` 0): its
//!   `/proc/PID/environ`, `mem`, `fd`… then belong to root, and no process
//!   of the same user may read them or attach to it (root still can — hence
//!   the rest). It costs core dumps; our own `/proc/self` reads (`exe`,
//!   `stat`, `task/*/children`) stay allowed, as they are for any process.
//!   A program we run is dumpable again once it `exec`s.
//! - takes every secret variable ([`VARS`]) out of the environment into
//!   this module, where [`var`] finds it, and overwrites its value in the
//!   kernel's copy;
//! - overwrites the value of every secret flag ([`FLAGS`]) in the kernel's
//!   copy of the command line, which stays readable by every user (`ps`)
//!   even for a non-dumpable process — as mysql does with `-pPASSWORD`. The
//!   arguments were copied before: the program parses the copy.
//!
//! The openclaw CLI the router runs still gets the gateway's token and
//! password it was given ([`for_openclaw`]): it needs them, and it is the
//! program they are for. Files we read a secret from are recorded
//! ([`holds_secrets`]) so the workspace keeps them from the file tools.
//!
//! Elsewhere than Linux only the environment is cleared: the kernel's
//! copies stay as they were. Must never print or log a secret.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Our credentials, as variables: no program we run may see them (an
/// agent's `env` would put them in a transcript), and none stays in our
/// environment once [`seal`] ran.
pub const VARS: &[&str] = &[
    "OPENCLAW_GATEWAY_TOKEN",
    "OPENCLAW_GATEWAY_PASSWORD",
    "CLAWBOT_ROUTER_SETUP_CODE",
    "CLAWBOT_ROUTER_MCP_TOKEN",
    "CLAWBOT_BRIDGE_TOKEN",
    "CLAWBOT_ROUTER_POLL_KEY",
    "CLAWBOT_BROWSER_CDP_URL",
];

/// The variables that are OpenClaw's own: the openclaw CLI gets them back.
const OPENCLAWS: &[&str] = &["OPENCLAW_GATEWAY_TOKEN", "OPENCLAW_GATEWAY_PASSWORD"];

/// Flags whose value is a secret (the links refuse theirs, but a refused
/// flag's value is still on the command line).
pub const FLAGS: &[&str] = &[
    "--token",
    "--pair",
    "--pair-if-needed",
    "--http-token",
    "--key",
    "--browser-cdp-url",
];

/// What an overwritten secret reads as.
#[cfg(any(target_os = "linux", test))]
const SCRUBBED: u8 = b'*';

/// The variables [`seal`] took out of the environment; unset when it did
/// not run (the library's own tests), and [`var`] reads the environment.
static TAKEN: OnceLock<Vec<(&'static str, OsString)>> = OnceLock::new();

/// Files a secret of ours was read from.
static FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Seals the process's secrets away (see the module's documentation).
/// `args` are the program's arguments, already copied: what is overwritten
/// is the kernel's copy (which `std::env::args` reads).
///
/// Call once, first thing, while the process has one thread: the
/// environment is not safe to change beside another thread. A process
/// given no secret pays one `prctl` for it.
pub fn seal(args: &[OsString]) {
    not_dumpable();
    let mut taken = Vec::new();
    for &name in VARS {
        if let Some(value) = std::env::var_os(name) {
            // SAFETY: the caller's promise: no other thread exists yet, so
            // none reads the environment while it changes.
            unsafe { std::env::remove_var(name) };
            taken.push((name, value));
        }
    }
    #[cfg(target_os = "linux")]
    if !taken.is_empty()
        || args
            .iter()
            .any(|a| names_a_secret_flag(a.as_encoded_bytes()))
    {
        linux::scrub_kernel_copies();
    }
    #[cfg(not(target_os = "linux"))]
    let _ = args;
    let _ = TAKEN.set(taken);
}

/// A secret variable's value: as [`seal`] took it, or from the
/// environment when nothing was sealed.
pub fn var(name: &str) -> Option<String> {
    match TAKEN.get() {
        Some(taken) => taken
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.clone().into_string().ok()),
        None => std::env::var(name).ok(),
    }
}

/// The variables of OpenClaw's own we were given, for the openclaw CLI we
/// run (empty when nothing was sealed: it inherits them then).
pub fn for_openclaw() -> Vec<(OsString, OsString)> {
    TAKEN
        .get()
        .into_iter()
        .flatten()
        .filter(|(name, _)| OPENCLAWS.contains(name))
        .map(|(name, value)| (OsString::from(name), value.clone()))
        .collect()
}

/// Records that `path` holds a secret of ours: the file tools will not
/// reach it, under any name (the hands are built after every mode read
/// its secrets).
pub fn holds_secrets(path: &Path) {
    if let Ok(mut files) = FILES.lock() {
        files.push(path.to_owned());
    }
}

/// Every file [`holds_secrets`] recorded.
pub fn files() -> Vec<PathBuf> {
    FILES.lock().map(|f| f.clone()).unwrap_or_default()
}

#[cfg(target_os = "linux")]
fn not_dumpable() {
    // SAFETY: prctl with integer arguments; failing leaves us dumpable,
    // which the kernel's copies being scrubbed still covers for the rest.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

#[cfg(not(target_os = "linux"))]
fn not_dumpable() {}

/// Where secrets sit in the kernel's copies (byte ranges of the block):
/// the values of `names` among NUL-separated `NAME=VALUE` entries.
#[cfg(any(target_os = "linux", test))]
fn values_of_variables(block: &[u8], names: &[&str]) -> Vec<std::ops::Range<usize>> {
    entries(block)
        .filter_map(|(at, entry)| {
            let eq = entry.iter().position(|&b| b == b'=')?;
            let name = std::str::from_utf8(&entry[..eq]).ok()?;
            (names.contains(&name) && eq + 1 < entry.len()).then_some(at + eq + 1..at + entry.len())
        })
        .collect()
}

/// Whether `word` is a secret flag: alone, as `--flag=value`, or glued
/// (`--flagVALUE`).
#[cfg(any(target_os = "linux", test))]
fn names_a_secret_flag(word: &[u8]) -> bool {
    word_spans(word).next().is_some() || FLAGS.iter().any(|f| word == f.as_bytes())
}

/// Where the secrets sit among command-line words, as (the word's index,
/// the secret's bytes in it): the word after `--flag`, what follows
/// `--flag=` (the next word even when it begins with one `-`: clap's
/// refusal then quotes it; not a long option, as `--pair-if-needed
/// --workspace` has), and a value typed without its `=` (`--flagVALUE`, at least
/// 4 bytes: clap refuses it and echoes it whole) — never another flag that
/// merely begins like one (`--token-file`). The one reading of secret
/// flags: the kernel's copy of argv is scrubbed by it, and a refused
/// command line is redacted by it before it is echoed.
pub fn secret_spans<W: AsRef<[u8]>>(words: &[W]) -> Vec<(usize, std::ops::Range<usize>)> {
    let mut found = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let word = word.as_ref();
        if FLAGS.iter().any(|f| word == f.as_bytes())
            && let Some(next) = words.get(i + 1)
            && !next.as_ref().is_empty()
            && !next.as_ref().starts_with(b"--")
        {
            found.push((i + 1, 0..next.as_ref().len()));
        }
        found.extend(word_spans(word).map(|range| (i, range)));
    }
    found
}

/// The secret inside one word (`--flag=VALUE`, `--flagVALUE`).
fn word_spans(word: &[u8]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    FLAGS.iter().filter_map(move |flag| {
        let rest = word.strip_prefix(flag.as_bytes())?;
        match rest.first()? {
            b'=' if rest.len() > 1 => Some(flag.len() + 1..word.len()),
            b'=' | b'-' => None,
            _ if rest.len() >= 4 => Some(flag.len()..word.len()),
            _ => None,
        }
    })
}

/// The values of the secret flags among NUL-separated arguments (the
/// kernel's copy of argv; the first entry is the program).
#[cfg(any(target_os = "linux", test))]
fn values_of_flags(block: &[u8]) -> Vec<std::ops::Range<usize>> {
    let words: Vec<(usize, &[u8])> = entries(block).skip(1).collect();
    let bare: Vec<&[u8]> = words.iter().map(|(_, w)| *w).collect();
    secret_spans(&bare)
        .into_iter()
        .map(|(i, range)| words[i].0 + range.start..words[i].0 + range.end)
        .collect()
}

/// The NUL-separated entries of a block, each with its offset.
#[cfg(any(target_os = "linux", test))]
fn entries(block: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut at = 0;
    block.split(|&b| b == 0).map(move |entry| {
        let start = at;
        at += entry.len() + 1;
        (start, entry)
    })
}

#[cfg(target_os = "linux")]
mod linux {
    /// Overwrites our secrets where `/proc/self/environ` and
    /// `/proc/self/cmdline` read them.
    pub fn scrub_kernel_copies() {
        let Some([arg_start, arg_end, env_start, env_end]) = kernel_copies() else {
            return;
        };
        scrub(env_start, env_end, |block| {
            super::values_of_variables(block, super::VARS)
        });
        scrub(arg_start, arg_end, super::values_of_flags);
    }

    /// `arg_start`, `arg_end`, `env_start`, `env_end`: fields 48 to 51 of
    /// `/proc/self/stat` (Linux 3.5 and later).
    fn kernel_copies() -> Option<[usize; 4]> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // "pid (comm) state …": comm may hold spaces and ')'; field 3 is
        // the first after it.
        let fields: Vec<&str> = stat
            .get(stat.rfind(')')? + 1..)?
            .split_whitespace()
            .collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
        let copies = [field(48)?, field(49)?, field(50)?, field(51)?];
        let sane = |start: usize, end: usize| start != 0 && start < end && end - start < 1 << 30;
        (sane(copies[0], copies[1]) && sane(copies[2], copies[3])).then_some(copies)
    }

    /// Overwrites the ranges `find` picks in the block `[start, end)`.
    fn scrub(start: usize, end: usize, find: impl Fn(&[u8]) -> Vec<std::ops::Range<usize>>) {
        // SAFETY: [start, end) is this process's argument or environment
        // area, which the kernel mapped at execve (at the top of the main
        // thread's stack, writable, for the process's whole life) and
        // /proc/self/stat names. Only one thread exists (seal's promise).
        // The block is copied first; no reference into it is held while
        // it is written.
        let copy = unsafe { std::slice::from_raw_parts(start as *const u8, end - start) }.to_vec();
        for range in find(&copy) {
            for i in range {
                // SAFETY: as above; `i` is inside the block.
                unsafe { (start as *mut u8).add(i).write_volatile(super::SCRUBBED) };
            }
        }
    }
}

/// Where a secret comes from: its command-line flag (refused), its
/// file flag, its environment variable.
pub struct SecretSource<'a> {
    /// What was given on the command line, to refuse.
    pub flag: Option<&'a str>,
    pub file: Option<&'a Path>,
    /// The file flag's name (`--token-file`), for the messages.
    pub file_flag: &'a str,
    pub var: &'a str,
    /// What it is ("the bridge token").
    pub what: &'a str,
}

/// A secret (a token, an API key), from its file or its variable — never
/// from the command line, where every user of the machine can read it
/// (`ps`).
pub fn secret(from: &SecretSource<'_>) -> Result<String, String> {
    let SecretSource {
        flag,
        file,
        file_flag,
        var,
        what,
    } = *from;
    if flag.is_some() {
        return Err(format!(
            "{what} on the command line is visible to every user of this machine (ps); put it in the environment variable {var} or a file ({file_flag} FILE)"
        ));
    }
    let text = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {what} from {}: {e}", path.display()))?;
            holds_secrets(path);
            text
        }
        None => self::var(var).unwrap_or_default(),
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(format!(
            "{what} is missing: set {var} or give {file_flag} FILE"
        ));
    }
    Ok(text.to_owned())
}

/// Whether two secrets are equal, in time that depends neither on where
/// they differ nor on their lengths: both are hashed first, and the digests
/// compared with `subtle` (whose comparison the optimiser cannot turn into
/// an early exit — a hand-written fold carries no such promise).
pub fn same_secret(a: &str, b: &str) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    let (x, y) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    x.as_slice().ct_eq(y.as_slice()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrubbed(block: &[u8], ranges: Vec<std::ops::Range<usize>>) -> String {
        let mut block = block.to_vec();
        for range in ranges {
            block[range].fill(SCRUBBED);
        }
        String::from_utf8_lossy(&block).replace('\0', "|")
    }

    #[test]
    fn the_values_of_secret_variables_are_found_and_nothing_else() {
        let block = b"PATH=/bin\0OPENCLAW_GATEWAY_TOKEN=abc\0X_OPENCLAW_GATEWAY_TOKEN=keep\0CLAWBOT_BRIDGE_TOKEN=\0CLAWBOT_ROUTER_POLL_KEY=k=v\0";
        assert_eq!(
            scrubbed(block, values_of_variables(block, VARS)),
            "PATH=/bin|OPENCLAW_GATEWAY_TOKEN=***|X_OPENCLAW_GATEWAY_TOKEN=keep|CLAWBOT_BRIDGE_TOKEN=|CLAWBOT_ROUTER_POLL_KEY=***|"
        );
    }

    #[test]
    fn the_values_of_secret_flags_are_found_in_both_spellings() {
        let block = b"--token\0node\0--token\0s3cret\0--pair=code-1\0--pair-if-needed\0--workspace\0w\0--message\0--token\0--http-token=\0--tokens\0x\0";
        assert_eq!(
            scrubbed(block, values_of_flags(block)),
            "--token|node|--token|******|--pair=******|--pair-if-needed|--workspace|w|--message|--token|--http-token=|--tokens|x|",
            "argv[0] is the program"
        );
        let glued = b"prog\0node\0--tokenS3kretGlued\0--token-file\0f\0";
        assert_eq!(
            scrubbed(glued, values_of_flags(glued)),
            "prog|node|--token***********|--token-file|f|",
            "a value typed without its = is scrubbed too"
        );
        for (word, secret) in [
            ("--token", true),
            ("--token=x", true),
            ("--pair-if-needed", true),
            ("--tokens", false),
            ("--tokenS3kretGlued", true),
            ("--token-file", false),
            ("--pair-code", false),
            ("token", false),
        ] {
            assert_eq!(names_a_secret_flag(word.as_bytes()), secret, "{word}");
        }
    }
}
