//! `--allow-command` and `--deny-command`: which names the user listed and
//! what each one matches (the command, a `SERVER.*` of proxied tools, or a
//! program, however a command line wraps it).
//!
//! Owns matching only: must never decide a call (the policy orders the
//! rules) nor be stepped around by a wrapper (`env`, `nice`, `sh -c`): a
//! deny list a wrapper could pass would be worthless.

use std::path::PathBuf;

use super::{Call, Exec};

/// The names listed on the command line, and the programs the allowed
/// ones resolved to on PATH when the process started.
pub(super) struct Lists {
    allow: Vec<String>,
    /// `--allow-command` names resolved on PATH, canonical.
    allowed_programs: Vec<PathBuf>,
    deny: Vec<String>,
}

impl Lists {
    pub(super) fn new(allow: Vec<String>, deny: Vec<String>) -> Self {
        let allowed_programs = allow
            .iter()
            .filter_map(|name| which::which(name).ok())
            .filter_map(|path| std::fs::canonicalize(path).ok())
            .collect();
        Self {
            allow,
            allowed_programs,
            deny,
        }
    }

    /// The first name in `names` that is the command or its executable.
    /// `--deny-command`: the command, or any word of its command line
    /// (argv, a shell script's words, what follows `env`, `nice`, ...) —
    /// a deny list that a wrapper could step around would be worthless.
    pub(super) fn denied(&self, call: &Call) -> Option<&str> {
        if self.deny.is_empty() {
            return None;
        }
        let words = call.exec.as_ref().map(command_words).unwrap_or_default();
        self.deny
            .iter()
            .find(|n| {
                **n == call.command
                    || words.iter().any(|w| w == *n)
                    || whole_server(n, call).is_some_and(|s| call.command.starts_with(s))
            })
            .map(String::as_str)
    }

    /// `--allow-command`: the command, or exactly the program a name
    /// resolved to on PATH when the node started (a `./vendor/ls` is not
    /// the `ls` the user pre-approved).
    pub(super) fn pre_approved(&self, call: &Call) -> bool {
        self.allow.iter().any(|n| {
            *n == call.command || whole_server(n, call).is_some_and(|s| call.command.starts_with(s))
        }) || call
            .exec
            .as_ref()
            .is_some_and(|e| self.allowed_programs.contains(&e.executable))
    }
}

/// `SERVER.*` names every tool of a proxied server (`SERVER.`), and only
/// those: never `system.run` or `fs.listDir`, whatever a server is called.
fn whole_server<'a>(name: &'a str, call: &Call) -> Option<&'a str> {
    name.strip_suffix('*')
        .filter(|s| call.upstream && s.len() > 1 && s.ends_with('.'))
}

/// Every word that may name a program in `exec`: the executable's name,
/// and every word of every command its command line runs, as a shell
/// would read it (quotes undone, wrappers and nested shells looked through).
fn command_words(exec: &Exec) -> Vec<String> {
    let reading = crate::tools::forbidden::read(exec);
    std::iter::once(exec.executable.to_string_lossy().into_owned())
        .chain(reading.words().map(str::to_owned))
        .map(|w| crate::tools::cmdline::base(&w).to_owned())
        .collect()
}
