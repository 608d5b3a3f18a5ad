//! What a command line runs, as a shell would see it: the simple commands
//! of an argv — and of every script it hands a shell (`sh -c`, `eval`, a
//! here-document fed to a shell), command substitutions included — each
//! with its words quoted, escaped and expanded as the shell would, the
//! wrappers in front of it (`env`, `nice`, `timeout`, `xargs`, …) taken
//! off, and the directory it runs in (`cd` is followed).
//!
//! The forbidden rules ([`super::forbidden`]) and the approval binding
//! ([`super::binding`]) both read commands through here, so a rule is
//! judged on what runs, not on how it was spelled: `rm -f -r /`, `r''m -rf
//! //`, `rm -rf "${HOME}"` and `cd / && rm -rf *` are one command.
//!
//! It is a reading, not an interpreter: what the shell computes from what
//! is known is computed (braces, `IFS` splitting, arrays, `${X%p}` and the
//! other string operations, positional parameters where a script or a
//! function is handed them, aliases, `read <<<`, `printf -v`); a variable
//! nobody set expands to nothing (the worst case for `rm -rf "$DIR/"`), a
//! command substitution to a word marked [`Word::computed`] (its own
//! commands are read as well; so is what `echo` or `printf` print into a
//! shell), what `xargs` reads to one more such word,
//! control flow is read as if every branch ran (a function's body where it
//! stands and at each call), and what a program does with its input is
//! not seen. It must never run anything, never touch the filesystem (callers
//! resolve paths), and never panic or loop on any input: every input is
//! read once, nesting is bounded.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

mod launchers;
mod lex;
mod strings;

pub use launchers::has_command_flag;
use launchers::{Unwrapped, fed_to_shell, printed, reads_its_input, unwrap};
use lex::{Op, Part, Raw, Token, Unread, VarOp, tokenize};
use strings::{brace_group, printf, replace, trim};

/// How deep scripts may nest (`sh -c "sh -c '…'"`, `$( $( … ) )`) before
/// the rest is read as plain words.
const MAX_DEPTH: usize = 8;
/// Steps (commands, words, nested scripts) one reading takes at most: far
/// beyond any command line a person writes, and few enough that a hostile
/// one cannot hold the node's thread. A reading that runs out is
/// `incomplete`, and its judges refuse it.
const BUDGET: usize = 50_000;
/// Words one brace expansion makes at most (`{a,b}{c,d}…`); more, and
/// the reading is incomplete.
const MAX_BRACES: usize = 1024;
/// Stands, inside a value being read, for text only known when the command
/// runs: a command's output, a variable or parameter the reading never saw
/// set, the result of an operation too costly to compute. NUL, because no
/// argument, path or variable of a real run can hold one: it travels
/// through assignments, loops and string operations as any text does, and
/// a word holding it comes out [`Word::computed`] (without it).
const UNKNOWN: char = '\0';

/// One simple command, expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The words after the wrappers: `words[0]` names the program.
    pub words: Vec<Word>,
    /// Where it runs (the call's directory, or where `cd` led).
    pub cwd: PathBuf,
    /// Redirection targets (`> FILE`, `2>>FILE`, `<FILE`).
    pub redirects: Vec<Word>,
    /// Of those, the ones it reads (`< FILE`, `3<FILE`, `<> FILE`).
    pub inputs: Vec<Word>,
    /// The command whose input this one's output is (`cat x | sh`): its
    /// index in [`Reading::commands`].
    pub feeds: Option<usize>,
    /// The `PATH` it runs with (the call's, or one an assignment in front
    /// of it, an `env` wrapper or the script set).
    pub path: Option<String>,
}

/// One word as the program receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    /// It holds a glob character (`*`, `?`, `[`) the shell would expand.
    pub glob: bool,
    /// Part of it is only known when it runs: a command's output (`$(…)`,
    /// backquotes, a process substitution), or what `xargs` reads and
    /// appends. `text` holds the rest.
    pub computed: bool,
}

impl Word {
    pub fn plain(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            glob: false,
            computed: false,
        }
    }
}

/// Everything a command line runs.
#[derive(Debug, Default)]
pub struct Reading {
    pub commands: Vec<Command>,
    /// The command line was too large or too deep to read to its end.
    pub incomplete: bool,
}

impl Reading {
    /// Every word of every command (programs and arguments), expanded.
    pub fn words(&self) -> impl Iterator<Item = &str> {
        self.commands
            .iter()
            .flat_map(|c| c.words.iter())
            .map(|w| w.text.as_str())
    }
}

/// Reads `argv` (a program and its arguments, no shell between) run in
/// `cwd` with the variables `vars` (what its environment holds).
pub fn read(argv: &[String], cwd: &Path, vars: HashMap<String, String>) -> Reading {
    let mut reader = Reader::new(&vars);
    let words = argv.iter().map(|a| Word::plain(a)).collect();
    let mut state = State::new(cwd, vars);
    reader.command_with(words, Redirects::default(), &mut state, 0);
    Reading {
        incomplete: reader.budget == 0,
        commands: reader.out,
    }
}

/// Reads a shell script as `sh -c SCRIPT` would run it.
#[cfg(test)]
pub fn read_script(script: &str, cwd: &Path, vars: HashMap<String, String>) -> Reading {
    let mut reader = Reader::new(&vars);
    let mut state = State::new(cwd, vars);
    reader.script(script, &mut state, 0);
    Reading {
        incomplete: reader.budget == 0,
        commands: reader.out,
    }
}

/// The shell a program name is, if it is one that runs `-c` scripts.
pub fn is_shell(name: &str) -> bool {
    matches!(
        base(name),
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "yash" | "posh" | "rbash"
    )
}

/// A path's last component (a program's name however it was spelled).
pub fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `.` and `..` resolved on the text alone (`..` at the root stays there,
/// as the kernel does), `//` collapsed; relative paths are made absolute
/// against nothing (callers join a directory first).
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Where a command line is, as it is read.
#[derive(Clone)]
struct State {
    cwd: PathBuf,
    vars: HashMap<String, String>,
    /// Arrays (`a=(x y)`): all their elements, as any subscript may pick
    /// any of them.
    arrays: HashMap<String, Vec<String>>,
    /// `$0`, `$1`, …: known where a script is handed them (`sh -c SCRIPT
    /// NAME ARGS…`, a function's call); unknown elsewhere.
    args: Option<Vec<String>>,
    /// Functions defined so far, by name: their bodies, read again at
    /// each call with its arguments.
    functions: HashMap<String, Rc<[Token]>>,
    /// Aliases defined so far (expanded whether or not the shell would:
    /// dash does, bash with `expand_aliases`).
    aliases: HashMap<String, String>,
    /// The `read` being read was given its text (a here-string or a
    /// here-document); any other `read` takes what is only known then.
    read_fed: bool,
}

impl State {
    fn new(cwd: &Path, vars: HashMap<String, String>) -> Self {
        Self {
            cwd: lexical(cwd),
            vars,
            arrays: HashMap::new(),
            args: None,
            functions: HashMap::new(),
            aliases: HashMap::new(),
            read_fed: false,
        }
    }

    /// What a new shell or program started from here has: the variables
    /// and the directory, none of the shell's functions, aliases or
    /// arguments.
    fn child(&self) -> Self {
        Self::new(&self.cwd, self.vars.clone())
    }

    /// Where unquoted expansions and `read` split: blanks, and what `IFS`
    /// holds.
    fn ifs(&self) -> Ifs {
        Ifs(self
            .vars
            .get("IFS")
            .map(|i| i.chars().collect())
            .unwrap_or_default())
    }

    /// What copying this state costs, in budget steps.
    fn weight(&self) -> usize {
        self.vars.len()
            + self.arrays.values().map(Vec::len).sum::<usize>()
            + self.args.as_ref().map_or(0, Vec::len)
            + self.functions.len()
            + self.aliases.len()
    }
}

/// The characters a field ends at ([`State::ifs`]).
struct Ifs(Vec<char>);

impl Ifs {
    fn splits(&self, c: char) -> bool {
        c != UNKNOWN && (matches!(c, ' ' | '\t' | '\n') || self.0.contains(&c))
    }

    /// `IFS` itself is only known when it runs: where fields end is not.
    fn unknown(&self) -> bool {
        self.0.contains(&UNKNOWN)
    }
}

/// A command's redirections: every target, and which of them it reads.
#[derive(Default)]
struct Redirects {
    all: Vec<Word>,
    inputs: Vec<Word>,
}

struct Reader {
    out: Vec<Command>,
    home: String,
    /// Steps left (see [`BUDGET`]).
    budget: usize,
    /// Functions and aliases being expanded now (one does not expand
    /// itself again: a recursive function is read once).
    calling: Vec<String>,
    /// `~user` homes looked up so far.
    homes: HashMap<String, Option<String>>,
}

impl Reader {
    fn new(vars: &HashMap<String, String>) -> Self {
        Self {
            out: Vec::new(),
            home: vars.get("HOME").cloned().unwrap_or_default(),
            budget: BUDGET,
            calling: Vec::new(),
            homes: HashMap::new(),
        }
    }

    /// Reads a script's commands in order, `cd` and assignments followed.
    fn script(&mut self, text: &str, state: &mut State, depth: usize) {
        if depth > MAX_DEPTH {
            self.budget = 0;
            return;
        }
        if !self.spend(text.len() / 64 + 1) {
            return;
        }
        let tokens = tokenize(text);
        self.tokens(&tokens, state, depth);
    }

    /// Reads tokens as a script: simple commands, pipelines, function
    /// definitions and arrays.
    fn tokens(&mut self, tokens: &[Token], state: &mut State, depth: usize) {
        let mut words: Vec<Raw> = Vec::new();
        let mut redirects: Vec<(Raw, bool)> = Vec::new();
        // The commands of a pipeline so far, each feeding the next.
        let mut pipeline: Vec<Unread> = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            if !self.spend(1) {
                return;
            }
            match &tokens[i] {
                Token::Word(raw) => {
                    // `function NAME { … }`
                    if words.len() == 2
                        && words[0].literal().as_deref() == Some("function")
                        && raw.literal().as_deref() == Some("{")
                        && let Some(name) = words[1].literal()
                    {
                        self.define(name, tokens, i, state);
                        words.clear();
                    }
                    words.push(raw.clone());
                }
                Token::Redirect { heredoc: true, .. } => {}
                Token::Redirect {
                    herestring, input, ..
                } => {
                    let Some(Token::Word(target)) = tokens.get(i + 1) else {
                        i += 1;
                        continue;
                    };
                    i += 1;
                    if !herestring {
                        redirects.push((target.clone(), *input));
                    } else if fed_to_shell(&words) {
                        // `sh <<< "rm -rf /"`: the text is the shell's script.
                        let text = self.expand_joined(target, state, depth);
                        self.script(&text, state, depth + 1);
                    } else if words.first().and_then(Raw::literal).as_deref() == Some("read") {
                        // `read X <<< /`: the text is the variables'.
                        let text = self.expand_joined(target, state, depth);
                        read_into(&words[1..], &text, state);
                    }
                }
                // A here-document fed to a shell is its script; to `read`,
                // its first line is the variables'.
                Token::Heredoc(body) if fed_to_shell(&words) => {
                    self.script(body, state, depth + 1);
                }
                Token::Heredoc(body)
                    if words.first().and_then(Raw::literal).as_deref() == Some("read") =>
                {
                    let line = body.lines().next().unwrap_or_default().to_owned();
                    read_into(&words[1..], &line, state);
                }
                Token::Heredoc(_) => {}
                Token::Break(Op::Open)
                    if matches!(tokens.get(i + 1), Some(Token::Break(Op::Close)))
                        && function_name(&words).is_some() =>
                {
                    // `NAME () BODY`: the body is read where it stands (as
                    // if it ran with no arguments) and at every call.
                    if let Some(name) = function_name(&words) {
                        let mut start = i + 2;
                        while matches!(tokens.get(start), Some(Token::Break(Op::End))) {
                            start += 1;
                        }
                        self.define(name, tokens, start, state);
                    }
                    words.clear();
                    i += 2;
                    continue;
                }
                Token::Break(Op::Open) if words.last().and_then(Raw::array_name).is_some() => {
                    // `NAME=( … )`: an array.
                    let name = words.pop().and_then(|w| w.array_name()).unwrap_or_default();
                    let end = tokens[i + 1..]
                        .iter()
                        .position(|t| matches!(t, Token::Break(Op::Close)))
                        .map_or(tokens.len(), |p| i + 1 + p);
                    let mut elements = Vec::new();
                    for token in &tokens[i + 1..end] {
                        if let Token::Word(raw) = token {
                            elements
                                .extend(self.expand(raw, state, depth).into_iter().map(|w| w.text));
                        }
                    }
                    state
                        .vars
                        .insert(name.clone(), elements.first().cloned().unwrap_or_default());
                    state.arrays.insert(name, elements);
                    i = end + 1;
                    continue;
                }
                Token::Break(op) => {
                    let command = (std::mem::take(&mut words), std::mem::take(&mut redirects));
                    pipeline.push(command);
                    if *op != Op::Pipe {
                        self.pipeline(std::mem::take(&mut pipeline), state, depth);
                    }
                }
            }
            i += 1;
        }
        pipeline.push((words, redirects));
        self.pipeline(pipeline, state, depth);
    }

    /// Records the function `name` whose body starts at `tokens[start]`.
    fn define(&mut self, name: String, tokens: &[Token], start: usize, state: &mut State) {
        let end = body_end(tokens, start);
        if self.spend(end - start) {
            state.functions.insert(name, tokens[start..end].into());
        }
    }

    /// The commands of a pipeline, in order; each one that feeds another
    /// says which (by its index in what is read).
    fn pipeline(&mut self, commands: Vec<Unread>, state: &mut State, depth: usize) {
        let mut feeding: Option<std::ops::Range<usize>> = None;
        for (words, redirects) in commands {
            let start = self.out.len();
            self.simple(words, &redirects, state, depth);
            let end = self.out.len();
            // What a command's main word is read last: the one fed.
            if let Some(range) = feeding.take()
                && end > start
            {
                for command in &mut self.out[range.clone()] {
                    command.feeds.get_or_insert(end - 1);
                }
                // `echo 'SCRIPT' | sh`: the shell runs what it is printed.
                let printed = range
                    .last()
                    .and_then(|producer| printed(&self.out[producer].words));
                if let Some(script) = printed
                    && reads_its_input(&self.out[end - 1].words)
                {
                    let mut inner = self.copy(state).child();
                    self.script(&script, &mut inner, depth + 1);
                }
            }
            feeding = Some(start..end);
        }
    }

    /// One simple command of a script: assignments in front, then words.
    fn simple(
        &mut self,
        raws: Vec<Raw>,
        redirects: &[(Raw, bool)],
        state: &mut State,
        depth: usize,
    ) {
        // Reserved words that only lead into the real command.
        let mut raws: &[Raw] = &raws;
        while let Some(first) = raws.first().and_then(Raw::literal) {
            if matches!(
                first.as_str(),
                "{" | "}"
                    | "!"
                    | "if"
                    | "then"
                    | "else"
                    | "elif"
                    | "fi"
                    | "do"
                    | "done"
                    | "while"
                    | "until"
                    | "time"
                    | "esac"
                    | "in"
            ) {
                raws = &raws[1..];
                // `time -p`: the option is the keyword's.
                if first == "time" && raws.first().and_then(Raw::literal).as_deref() == Some("-p") {
                    raws = &raws[1..];
                }
            } else {
                break;
            }
        }
        if raws
            .first()
            .and_then(Raw::literal)
            .is_some_and(|w| w == "for" || w == "case")
        {
            // `for X in WORDS` / `case WORD in`: no command of its own. The
            // loop's variable holds every word at once: `rm -rf $X` in the
            // body is read as removing them all.
            let words: Vec<String> = raws
                .iter()
                .skip(3)
                .flat_map(|raw| self.expand(raw, state, depth))
                .map(|w| w.text)
                .collect();
            if let Some(name) = raws.get(1).and_then(Raw::literal).filter(|n| is_name(n))
                && raws.first().and_then(Raw::literal).as_deref() == Some("for")
            {
                state.vars.insert(name, words.join(" "));
            }
            return;
        }
        // Leading NAME=value: for this command only, or (alone) the shell's.
        let mut assigned = HashMap::new();
        let mut at = 0;
        while let Some((name, value)) = raws.get(at).and_then(|r| r.assignment()) {
            let value = self.expand_joined(&value, state, depth);
            assigned.insert(name, value);
            at += 1;
        }
        let mut words: Vec<Word> = Vec::new();
        for raw in &raws[at..] {
            words.extend(self.expand(raw, state, depth));
        }
        let mut targets = Redirects::default();
        for (raw, input) in redirects {
            let expanded = self.expand(raw, state, depth);
            if *input {
                targets.inputs.extend(expanded.iter().cloned());
            }
            targets.all.extend(expanded);
        }
        if words.is_empty() {
            state.vars.extend(assigned);
            if !targets.all.is_empty() {
                self.push(Command {
                    words,
                    cwd: state.cwd.clone(),
                    redirects: targets.all,
                    inputs: targets.inputs,
                    feeds: None,
                    path: state.vars.get("PATH").cloned(),
                });
            }
            return;
        }
        // An alias is its text, then the rest of the words.
        if let Some(text) = state.aliases.get(&words[0].text).cloned()
            && !self.calling.contains(&words[0].text)
        {
            let rest: Vec<&str> = words[1..].iter().map(|w| w.text.as_str()).collect();
            let text = format!("{text} {}", shell_words::join(rest));
            self.calling.push(words[0].text.clone());
            self.script(&text, state, depth + 1);
            self.calling.pop();
            return;
        }
        // A function is its body, with these arguments.
        if let Some(body) = state.functions.get(&words[0].text).cloned()
            && !self.calling.contains(&words[0].text)
        {
            let mut inner = self.copy(state);
            inner.vars.extend(assigned.clone());
            let zero = state
                .args
                .as_ref()
                .and_then(|a| a.first().cloned())
                .unwrap_or_default();
            inner.args = Some(
                std::iter::once(zero)
                    .chain(words[1..].iter().map(|w| w.text.clone()))
                    .collect(),
            );
            self.calling.push(words[0].text.clone());
            self.tokens(&body, &mut inner, depth + 1);
            self.calling.pop();
        }
        let mut vars = state.vars.clone();
        vars.extend(assigned);
        // `builtin cd`, `command cd`: the same builtin.
        let head = words
            .iter()
            .position(|w| !matches!(w.text.as_str(), "builtin" | "command"))
            .unwrap_or(0);
        let own = &words[head..];
        match own[0].text.as_str() {
            "cd" | "pushd" => {
                let target = own
                    .iter()
                    .skip(1)
                    .find(|w| w.text == "-" || !w.text.starts_with('-'));
                // `CDPATH` is searched before the working directory.
                let cdpath = vars
                    .get("CDPATH")
                    .and_then(|p| p.split(':').find(|e| !e.is_empty()))
                    .map(|e| state.cwd.join(e));
                let next = match target.map(|w| w.text.as_str()) {
                    None | Some("") => PathBuf::from(
                        state
                            .vars
                            .get("HOME")
                            .cloned()
                            .unwrap_or_else(|| self.home.clone()),
                    ),
                    Some("-") => {
                        PathBuf::from(state.vars.get("OLDPWD").cloned().unwrap_or_default())
                    }
                    Some(dir) if !dir.starts_with(['/', '.']) && cdpath.is_some() => {
                        cdpath.unwrap_or_default().join(dir)
                    }
                    Some(dir) => state.cwd.join(dir),
                };
                if !next.as_os_str().is_empty() {
                    let old = std::mem::replace(&mut state.cwd, lexical(&next));
                    state
                        .vars
                        .insert("OLDPWD".into(), old.to_string_lossy().into_owned());
                    state
                        .vars
                        .insert("PWD".into(), state.cwd.to_string_lossy().into_owned());
                }
            }
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                for word in &own[1..] {
                    if let Some((name, value)) = word.text.split_once('=')
                        && is_name(name)
                    {
                        state.vars.insert(name.to_owned(), value.to_owned());
                    }
                }
            }
            "printf" if own.get(1).is_some_and(|w| w.text == "-v") => {
                // `printf -v NAME FORMAT ARGS…`: NAME holds what it prints.
                if let (Some(name), Some(format)) = (own.get(2), own.get(3)) {
                    let args: Vec<&str> = own[4..].iter().map(|w| w.text.as_str()).collect();
                    state
                        .vars
                        .insert(name.text.clone(), printf(&format.text, &args));
                }
            }
            "alias" => {
                for word in &own[1..] {
                    if let Some((name, value)) = word.text.split_once('=')
                        && !name.is_empty()
                    {
                        state.aliases.insert(name.to_owned(), value.to_owned());
                    }
                }
            }
            // `eval TEXT` runs in this shell: what it sets and where it
            // goes stay for the rest of the script.
            "eval" => {
                // Its redirections are its own (`eval … > /dev/sda`).
                if !targets.all.is_empty() {
                    self.push(Command {
                        words: own[..1].to_vec(),
                        cwd: state.cwd.clone(),
                        redirects: std::mem::take(&mut targets.all),
                        inputs: std::mem::take(&mut targets.inputs),
                        feeds: None,
                        path: vars.get("PATH").cloned(),
                    });
                }
                let text: Vec<&str> = own[1..].iter().map(|w| w.text.as_str()).collect();
                // `D=/ eval …`: a special builtin's assignments stay.
                state
                    .vars
                    .extend(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
                self.script(&text.join(" "), state, depth + 1);
                return;
            }
            // `set -- A B`, `set -e A`: the positional parameters.
            "set" => {
                let mut rest = own[1..].iter().peekable();
                let mut ended = false;
                while let Some(w) = rest.peek() {
                    if w.text == "--" {
                        ended = true;
                        rest.next();
                        break;
                    }
                    if !w.text.starts_with(['-', '+']) {
                        break;
                    }
                    // `-o NAME`: the option's value.
                    if matches!(w.text.as_str(), "-o" | "+o") {
                        rest.next();
                    }
                    rest.next();
                }
                let given: Vec<String> = rest.map(|w| w.text.clone()).collect();
                if ended || !given.is_empty() {
                    let zero = state
                        .args
                        .as_ref()
                        .and_then(|a| a.first().cloned())
                        .unwrap_or_default();
                    state.args = Some(std::iter::once(zero).chain(given).collect());
                }
            }
            // `trap 'CMD' SIGNAL…`: CMD runs later, in this shell.
            "trap" => {
                if let Some(action) = own.get(1).filter(|w| !w.text.starts_with('-')) {
                    let mut inner = self.copy(state);
                    self.script(&action.text, &mut inner, depth + 1);
                }
            }
            // What `read` and `mapfile` take from a file or a pipe is
            // unknown (a here-string or here-document is read above).
            "read" | "mapfile" | "readarray" if !std::mem::take(&mut state.read_fed) => {
                for word in own[1..].iter().filter(|w| is_name(&w.text)) {
                    state.vars.insert(word.text.clone(), UNKNOWN.to_string());
                    state.arrays.remove(&word.text);
                }
            }
            _ => {}
        }
        let mut inner = self.copy(state);
        inner.vars = vars;
        self.command_with(words, targets, &mut inner, depth);
    }
    /// A command given as words (an argv, or a script's simple command):
    /// wrappers come off, and what it hands a shell is read too.
    fn command_with(
        &mut self,
        mut words: Vec<Word>,
        redirects: Redirects,
        state: &mut State,
        depth: usize,
    ) {
        if depth > MAX_DEPTH {
            self.budget = 0;
            return;
        }
        let mut redirects = redirects;
        for _ in 0..=MAX_DEPTH {
            match unwrap(&words, state) {
                Unwrapped::Inner(rest) => {
                    // The wrapper itself runs too (its program is bound).
                    let taken = std::mem::take(&mut redirects);
                    self.push(Command {
                        words: words[..1].to_vec(),
                        cwd: state.cwd.clone(),
                        redirects: taken.all,
                        inputs: taken.inputs,
                        feeds: None,
                        path: state.vars.get("PATH").cloned(),
                    });
                    words = rest;
                }
                Unwrapped::Split(rest) => words = rest,
                Unwrapped::Done => break,
            }
            if words.is_empty() {
                return;
            }
        }
        let program = base(&words[0].text).to_owned();
        if is_shell(&program) {
            // Any argument may be the script (`-c X`, `-c -- X`,
            // `--rcfile F -c X`): which one runs is the shell's business,
            // so every non-option argument is read as one — with the words
            // after it as its `$0`, `$1`, ….
            if has_command_flag(&words) {
                let mut options = true;
                for (at, word) in words.iter().enumerate().skip(1) {
                    // After `--` every word is an operand: `sh -c -- -x`.
                    if options && word.text == "--" {
                        options = false;
                        continue;
                    }
                    if options && word.text.starts_with('-') {
                        continue;
                    }
                    let mut inner = self.copy(state).child();
                    inner.args = Some(words[at + 1..].iter().map(|w| w.text.clone()).collect());
                    self.script(&word.text, &mut inner, depth + 1);
                }
            }
        } else if program == "eval" {
            let text: Vec<&str> = words[1..].iter().map(|w| w.text.as_str()).collect();
            let mut inner = self.copy(state);
            self.script(&text.join(" "), &mut inner, depth + 1);
        } else if program == "find" {
            // `-exec CMD … ;`, `-execdir`, `-ok`: commands of their own,
            // `{}` standing for what find found — read as each place it
            // starts from, which holds all it can find there.
            let starts: Vec<Word> = {
                let given: Vec<Word> = words[1..]
                    .iter()
                    .skip_while(|w| matches!(w.text.as_str(), "-H" | "-L" | "-P"))
                    .take_while(|w| !w.text.starts_with(['-', '(', '!']))
                    .cloned()
                    .collect();
                if given.is_empty() {
                    vec![Word::plain(".")]
                } else {
                    given
                }
            };
            let mut i = 1;
            while i < words.len() {
                if matches!(
                    words[i].text.as_str(),
                    "-exec" | "-execdir" | "-ok" | "-okdir"
                ) {
                    let end = words[i + 1..]
                        .iter()
                        .position(|w| w.text == ";" || w.text == "+")
                        .map_or(words.len(), |p| i + 1 + p);
                    let inner: Vec<Word> = words[i + 1..end].to_vec();
                    let found = inner.iter().any(|w| w.text.contains("{}"));
                    for start in starts.iter().take(if found { starts.len() } else { 1 }) {
                        if inner.is_empty() {
                            break;
                        }
                        let inner: Vec<Word> = inner
                            .iter()
                            .map(|w| Word {
                                text: w.text.replace("{}", &start.text),
                                glob: w.glob || (w.text.contains("{}") && start.glob),
                                computed: w.computed || (w.text.contains("{}") && start.computed),
                            })
                            .collect();
                        let mut st = self.copy(state).child();
                        self.command_with(inner, Redirects::default(), &mut st, depth + 1);
                    }
                    i = end;
                }
                i += 1;
            }
        }
        self.push(Command {
            words,
            cwd: state.cwd.clone(),
            redirects: redirects.all,
            inputs: redirects.inputs,
            feeds: None,
            path: state.vars.get("PATH").cloned(),
        });
    }

    /// A copy of `state` for a command or script of its own, paid for.
    fn copy(&mut self, state: &State) -> State {
        self.spend(state.weight() / 64 + 1);
        state.clone()
    }

    fn push(&mut self, mut command: Command) {
        for word in command
            .words
            .iter_mut()
            .chain(&mut command.redirects)
            .chain(&mut command.inputs)
        {
            if word.text.contains(UNKNOWN) {
                word.text.retain(|c| c != UNKNOWN);
                word.computed = true;
            }
        }
        if self.spend(1 + command.words.len()) {
            self.out.push(command);
        }
    }

    /// Takes `steps` from the budget; false (and nothing more is read) once
    /// it is spent.
    fn spend(&mut self, steps: usize) -> bool {
        self.budget = self.budget.saturating_sub(steps);
        self.budget > 0
    }

    /// A word's fields after expansion: braces first (`{a,b}`, `{1..3}`,
    /// as bash expands them — read so for every shell, the stricter
    /// reading), then unquoted expansions split on blanks and `IFS`, as
    /// the shell splits them.
    fn expand(&mut self, raw: &Raw, state: &mut State, depth: usize) -> Vec<Word> {
        let mut out = Vec::new();
        for raw in self.braces(raw) {
            out.extend(self.expand_one(&raw, state, depth));
        }
        out
    }

    /// The words brace expansion makes of `raw` (itself when it has no
    /// brace group in its unquoted text).
    fn braces(&mut self, raw: &Raw) -> Vec<Raw> {
        let mut done = Vec::new();
        let mut todo = vec![raw.clone()];
        while let Some(raw) = todo.pop() {
            let group = raw
                .parts
                .iter()
                .enumerate()
                .find_map(|(at, part)| match part {
                    Part::Text {
                        text,
                        quoted: false,
                    } => brace_group(text).map(|g| (at, text.clone(), g)),
                    _ => None,
                });
            let Some((at, text, (open, close, alternatives))) = group else {
                done.push(raw);
                continue;
            };
            if !self.spend(alternatives.len()) || done.len() + todo.len() > MAX_BRACES {
                // More words than any command line means: not read on.
                self.budget = 0;
                return vec![raw];
            }
            for alternative in alternatives.into_iter().rev() {
                let mut next = raw.clone();
                next.parts[at] = Part::Text {
                    text: format!("{}{alternative}{}", &text[..open], &text[close + 1..]),
                    quoted: false,
                };
                todo.push(next);
            }
        }
        done
    }

    fn expand_one(&mut self, raw: &Raw, state: &mut State, depth: usize) -> Vec<Word> {
        if !self.spend(raw.parts.len()) {
            return Vec::new();
        }
        let mut fields: Vec<Word> = Vec::new();
        let mut current = Word::plain("");
        let mut started = false;
        for part in &raw.parts {
            match part {
                Part::Text { text, quoted } => {
                    current.text.push_str(text);
                    current.glob |= !quoted && text.contains(['*', '?', '[']);
                    started = true;
                }
                Part::Tilde(user) => {
                    let home = self.tilde(user, state);
                    current.text.push_str(&home);
                    started = true;
                }
                Part::Sub(text) => {
                    let mut inner = self.copy(state);
                    self.script(text, &mut inner, depth + 1);
                    // Its output is a word, or several, or none: unknown.
                    current.text.push(UNKNOWN);
                    started = true;
                }
                Part::Var {
                    name,
                    quoted,
                    subscript,
                    op,
                } => {
                    // `"$@"` and `"${a[@]}"` are a word per element; an
                    // element picked by index could be any of them.
                    let list = match (op, state.args.as_ref()) {
                        (None, Some(args)) if name == "@" || name == "*" => {
                            Some(args.iter().skip(1).cloned().collect::<Vec<_>>())
                        }
                        (None, _) if *subscript => state.arrays.get(name).cloned(),
                        _ => None,
                    };
                    if *quoted {
                        match list {
                            Some(list) => {
                                for (n, element) in list.iter().enumerate() {
                                    if n > 0 {
                                        fields
                                            .push(std::mem::replace(&mut current, Word::plain("")));
                                    }
                                    current.text.push_str(element);
                                    started = true;
                                }
                            }
                            None => {
                                let value = self.var(name, op.as_ref(), state, depth);
                                current.text.push_str(&value);
                                started = true;
                            }
                        }
                        continue;
                    }
                    let value = match list {
                        Some(list) => list.join(" "),
                        None => self.var(name, op.as_ref(), state, depth),
                    };
                    // Unquoted: split on blanks and on what `IFS` holds;
                    // glob characters stay live.
                    let ifs = state.ifs();
                    if ifs.unknown() && !value.is_empty() {
                        current.text.push(UNKNOWN);
                    }
                    let split = |c: char| ifs.splits(c);
                    let mut pieces = value.split(split).peekable();
                    let leading_blank = value.starts_with(split);
                    if leading_blank && started {
                        fields.push(std::mem::replace(&mut current, Word::plain("")));
                        started = false;
                    }
                    while let Some(piece) = pieces.next() {
                        current.text.push_str(piece);
                        current.glob |= piece.contains(['*', '?', '[']);
                        started |= !piece.is_empty();
                        if pieces.peek().is_some() && started {
                            fields.push(std::mem::replace(&mut current, Word::plain("")));
                            started = false;
                        }
                    }
                }
            }
        }
        // An unquoted expansion to nothing is no word at all; `""` is one.
        let quoted_empty = raw
            .parts
            .iter()
            .any(|p| matches!(p, Part::Text { quoted: true, .. }));
        if started || quoted_empty || !current.text.is_empty() {
            fields.push(current);
        }
        fields
    }

    /// A word expanded as one string (an assignment's value, a here-string).
    fn expand_joined(&mut self, raw: &Raw, state: &mut State, depth: usize) -> String {
        let mut quoted = raw.clone();
        for part in &mut quoted.parts {
            if let Part::Var { quoted, .. } | Part::Text { quoted, .. } = part {
                *quoted = true;
            }
        }
        self.expand(&quoted, state, depth)
            .into_iter()
            .map(|w| w.text)
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn var(&mut self, name: &str, op: Option<&VarOp>, state: &mut State, depth: usize) -> String {
        // `${!NAME}`: the variable NAME names.
        let value = match name.strip_prefix('!').filter(|n| !n.is_empty()) {
            Some(pointer) => {
                let target = self.lookup(pointer, state).unwrap_or_default();
                self.lookup(&target, state)
            }
            None => self.lookup(name, state),
        };
        let Some(op) = op else {
            return value.unwrap_or_else(|| UNKNOWN.to_string());
        };
        if value.as_ref().is_some_and(|v| v.contains(UNKNOWN)) {
            return UNKNOWN.to_string();
        }
        let value_or_empty = value.clone().unwrap_or_default();
        match op {
            VarOp::Default(op, colon, word) => {
                let set = value.as_ref().is_some_and(|v| !*colon || !v.is_empty());
                match op {
                    '+' if set => self.expand_joined(word, state, depth),
                    '+' => String::new(),
                    '-' | '=' if !set => {
                        let text = self.expand_joined(word, state, depth);
                        if *op == '=' {
                            state.vars.insert(name.to_owned(), text.clone());
                        }
                        text
                    }
                    _ => value_or_empty,
                }
            }
            VarOp::Trim {
                suffix,
                longest,
                pattern,
            } => {
                let pattern = self.expand_joined(pattern, state, depth);
                if pattern.contains(UNKNOWN) {
                    return UNKNOWN.to_string();
                }
                trim(&value_or_empty, &pattern, *suffix, *longest)
            }
            VarOp::Replace {
                all,
                anchor,
                pattern,
                with,
            } => {
                let pattern = self.expand_joined(pattern, state, depth);
                let with = self.expand_joined(with, state, depth);
                if pattern.contains(UNKNOWN) || with.contains(UNKNOWN) {
                    return UNKNOWN.to_string();
                }
                replace(&value_or_empty, &pattern, &with, *all, *anchor)
            }
            VarOp::Slice(offset, length) => {
                // Arithmetic is not read: only literal numbers are known.
                let literal = |t: &str| {
                    let t = t.trim();
                    let digits = t.strip_prefix('-').unwrap_or(t);
                    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
                };
                if !literal(offset) || length.as_deref().is_some_and(|l| !literal(l)) {
                    return UNKNOWN.to_string();
                }
                let chars: Vec<char> = value_or_empty.chars().collect();
                let number = |t: &str| t.trim().parse::<i64>().unwrap_or(0);
                let len = chars.len() as i64;
                let start = number(offset);
                let start = if start < 0 {
                    len.saturating_add(start).max(0)
                } else {
                    start.min(len)
                };
                let end = match length.as_deref().map(number) {
                    None => len,
                    Some(n) if n < 0 => len.saturating_add(n).max(start),
                    Some(n) => start.saturating_add(n).min(len),
                };
                chars[start as usize..end.max(start) as usize]
                    .iter()
                    .collect()
            }
            VarOp::Case { upper, all } => {
                let change = |c: char| {
                    if *upper {
                        c.to_uppercase().collect::<String>()
                    } else {
                        c.to_lowercase().collect::<String>()
                    }
                };
                let mut chars = value_or_empty.chars();
                if *all {
                    chars.map(change).collect()
                } else {
                    chars
                        .next()
                        .map(|c| change(c) + chars.as_str())
                        .unwrap_or_default()
                }
            }
        }
    }

    /// A variable's value: the special ones, the positional ones where
    /// they are known, then the shell's variables.
    fn lookup(&self, name: &str, state: &State) -> Option<String> {
        // Only ever a number, whatever it is when it runs (`/tmp/x.$$`).
        const NUMBERS: &[&str] = &[
            "$",
            "!",
            "?",
            "RANDOM",
            "SRANDOM",
            "BASHPID",
            "PPID",
            "LINENO",
            "SECONDS",
            "EPOCHSECONDS",
            "UID",
            "EUID",
        ];
        if NUMBERS.contains(&name) || (name == "#" && state.args.is_none()) {
            return Some(state.vars.get(name).cloned().unwrap_or_else(|| "0".into()));
        }
        match name {
            "PWD" => Some(state.cwd.to_string_lossy().into_owned()),
            "HOME" => state.vars.get("HOME").cloned().or(Some(self.home.clone())),
            _ => match state.args.as_ref() {
                Some(args)
                    if name.chars().all(|c| c.is_ascii_digit())
                        || matches!(name, "@" | "*" | "#") =>
                {
                    match name {
                        "@" | "*" => {
                            Some(args.iter().skip(1).cloned().collect::<Vec<_>>().join(" "))
                        }
                        "#" => Some(args.len().saturating_sub(1).to_string()),
                        // Past the last argument: known to be empty.
                        _ => Some(
                            name.parse::<usize>()
                                .ok()
                                .and_then(|n| args.get(n).cloned())
                                .unwrap_or_default(),
                        ),
                    }
                }
                _ => state.vars.get(name).cloned(),
            },
        }
    }

    fn tilde(&mut self, user: &str, state: &State) -> String {
        // `~+` is where it is, `~-` where it was.
        match user {
            "+" => return state.cwd.to_string_lossy().into_owned(),
            "-" => {
                return state
                    .vars
                    .get("OLDPWD")
                    .cloned()
                    .unwrap_or_else(|| "~-".into());
            }
            _ => {}
        }
        if user.is_empty() {
            return state
                .vars
                .get("HOME")
                .cloned()
                .unwrap_or_else(|| self.home.clone());
        }
        // Read once per reading: a line of many `~user` words must not
        // read the password file for each.
        self.homes
            .entry(user.to_owned())
            .or_insert_with(|| home_of(user))
            .clone()
            .unwrap_or_else(|| format!("~{user}"))
    }
}

fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A user's home directory from /etc/passwd (read as text: the static
/// executable must not load NSS modules).
fn home_of(user: &str) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 6 && f[0] == user)
        .map(|f| f[5].to_owned())
}

/// `read [OPTIONS] NAMES…` given `text`: a field per name, the last
/// taking the rest (`-a NAME`: an array of every field).
fn read_into(args: &[Raw], text: &str, state: &mut State) {
    state.read_fed = true;
    let mut names = Vec::new();
    let mut array = None;
    let mut i = 0;
    while i < args.len() {
        let Some(word) = args[i].literal() else {
            i += 1;
            continue;
        };
        match word.as_str() {
            "-a" => {
                array = args.get(i + 1).and_then(Raw::literal);
                i += 2;
                continue;
            }
            "-d" | "-p" | "-n" | "-N" | "-t" | "-u" | "-i" => i += 1,
            w if w.starts_with('-') => {}
            w if is_name(w) => names.push(w.to_owned()),
            _ => {}
        }
        i += 1;
    }
    if text.contains(UNKNOWN) || state.ifs().unknown() {
        // Which field lands where is unknown: every one of them is.
        for name in names.iter().chain(&array) {
            state.vars.insert(name.clone(), UNKNOWN.to_string());
            state.arrays.remove(name);
        }
        if names.is_empty() && array.is_none() {
            state.vars.insert("REPLY".into(), UNKNOWN.to_string());
        }
        return;
    }
    let ifs = state.ifs();
    let split = |c: char| ifs.splits(c);
    let fields: Vec<String> = text
        .split(split)
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(name) = array {
        state
            .vars
            .insert(name.clone(), fields.first().cloned().unwrap_or_default());
        state.arrays.insert(name, fields);
        return;
    }
    if names.is_empty() {
        names.push("REPLY".to_owned());
    }
    for (n, name) in names.iter().enumerate() {
        let value = if n + 1 == names.len() {
            fields
                .get(n..)
                .map(|rest| rest.join(" "))
                .unwrap_or_default()
        } else {
            fields.get(n).cloned().unwrap_or_default()
        };
        state.vars.insert(name.clone(), value);
    }
}

/// The name a function definition's words give it (`NAME`, `function
/// NAME`), if they are one.
fn function_name(words: &[Raw]) -> Option<String> {
    let name = match words {
        [name] => name.literal()?,
        [keyword, name] if keyword.literal().as_deref() == Some("function") => name.literal()?,
        _ => return None,
    };
    (!name.is_empty() && !name.contains(['=', '/', '$'])).then_some(name)
}

/// Where a function body that starts at `tokens[start]` ends: after its
/// `{ … }` or `( … )` group, or the command it is.
fn body_end(tokens: &[Token], start: usize) -> usize {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(start) {
        match token {
            Token::Word(raw) if raw.literal().as_deref() == Some("{") => depth += 1,
            Token::Word(raw) if raw.literal().as_deref() == Some("}") => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            Token::Break(Op::Open) => depth += 1,
            Token::Break(Op::Close) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            Token::Break(Op::End) if depth == 0 => return i,
            _ => {}
        }
    }
    tokens.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> HashMap<String, String> {
        HashMap::from([("HOME".to_owned(), "/home/u".to_owned())])
    }

    fn commands(script: &str) -> Vec<(Vec<String>, String)> {
        read_script(script, Path::new("/w"), vars())
            .commands
            .into_iter()
            .map(|c| {
                (
                    c.words.into_iter().map(|w| w.text).collect(),
                    c.cwd.to_string_lossy().into_owned(),
                )
            })
            .collect()
    }

    fn words_of(script: &str) -> Vec<Vec<String>> {
        commands(script).into_iter().map(|(w, _)| w).collect()
    }

    #[test]
    fn quotes_escapes_and_expansions_are_undone_as_a_shell_would() {
        assert_eq!(
            words_of(r#"r''m -rf "//" "$HOME"/x ${HOME}"#),
            [["rm", "-rf", "//", "/home/u/x", "/home/u"]]
        );
        // A wrapper runs, and so does what it wraps.
        assert_eq!(
            words_of(r"su\do ls ~ ~/a"),
            [vec!["sudo"], vec!["ls", "/home/u", "/home/u/a"]]
        );
        assert_eq!(
            words_of("echo $'a\\x41' '$HOME'"),
            [["echo", "aA", "$HOME"]]
        );
        assert_eq!(
            words_of("echo ${NOPE:-/} ${HOME:+set} $NOPE"),
            // A variable the reading never saw set may be set when it
            // runs: a word, computed.
            [["echo", "/", "set", ""]]
        );
        assert_eq!(
            words_of(r#"X="a b"; echo $X "$X""#),
            [vec!["echo", "a", "b", "a b"]]
        );
    }

    #[test]
    fn commands_split_on_operators_substitutions_and_heredocs() {
        let got = words_of("a && b | c; d & e || f\ng $(h -x) `i`");
        let programs: Vec<&str> = got.iter().map(|w| w[0].as_str()).collect();
        assert_eq!(programs, ["a", "b", "c", "d", "e", "f", "h", "i", "g"]);
        let got = words_of("bash <<'EOF'\nrm -rf /\nEOF\necho done");
        assert!(got.iter().any(|w| w == &["rm", "-rf", "/"]), "{got:?}");
        let got = words_of("sh <<< 'rm -rf /'");
        assert!(got.iter().any(|w| w == &["rm", "-rf", "/"]), "{got:?}");
        // A redirection's target is not an argument.
        assert_eq!(words_of("echo hi > out 2>&1"), [["echo", "hi"]]);
    }

    #[test]
    fn cd_and_assignments_are_followed() {
        let got = commands("cd / && rm -rf *; cd ~; pwd; cd -; X=/etc; rm $X");
        assert_eq!(
            got[1],
            (vec!["rm".into(), "-rf".into(), "*".into()], "/".into())
        );
        assert_eq!(
            got.iter().find(|(w, _)| w[0] == "pwd").unwrap().1,
            "/home/u"
        );
        assert_eq!(
            got.last().unwrap(),
            &(vec!["rm".into(), "/etc".into()], "/".into())
        );
        let got = commands("cd .. ; cd ../../..; ls");
        assert_eq!(got.last().unwrap().1, "/");
    }

    #[test]
    fn env_takes_options_only_before_its_assignments() {
        // GNU env: `env A=1 -x` and `env -- -x` run a program named `-x`.
        for argv in [
            &["env", "A=1", "-/mkfs.x"][..],
            &["env", "--", "-/mkfs.x"],
            &["env", "-i", "A=1", "-/mkfs.x", "y"],
        ] {
            let argv: Vec<String> = argv.iter().map(|w| w.to_string()).collect();
            let r = read(&argv, Path::new("/w"), vars());
            assert!(
                r.commands.iter().any(|c| c.words[0].text == "-/mkfs.x"),
                "{argv:?}: {:?}",
                r.commands
            );
        }
    }

    #[test]
    fn wrappers_come_off_and_nested_shells_are_read() {
        let r = read(
            &[
                "env", "-i", "HOME=/", "nice", "-n", "5", "sh", "-c", "rm -rf ~",
            ]
            .map(str::to_owned),
            Path::new("/w"),
            vars(),
        );
        assert!(
            r.commands.iter().any(|c| c
                .words
                .iter()
                .map(|w| w.text.as_str())
                .eq(["rm", "-rf", "/"])),
            "{:?}",
            r.commands
        );
        let got = words_of(
            "timeout -s KILL 5 xargs -n1 busybox rm -rf /x; find / -exec rm -rf {} \\;; eval 'rm -rf /y'",
        );
        // What xargs reads comes after its words: unknown, but a word.
        assert!(
            got.contains(&vec!["rm".into(), "-rf".into(), "/x".into(), "".into()]),
            "{got:?}"
        );
        // `{}` is where find starts: what it can find is there.
        assert!(
            got.contains(&vec!["rm".into(), "-rf".into(), "/".into()]),
            "{got:?}"
        );
        assert!(
            got.contains(&vec!["rm".into(), "-rf".into(), "/y".into()]),
            "{got:?}"
        );
        let got = words_of("command -v rm; env -S 'rm -rf /z'");
        assert!(
            got.contains(&vec!["rm".into(), "-rf".into(), "/z".into()]),
            "{got:?}"
        );
        assert!(!got.iter().any(|w| w[0] == "rm" && w.len() == 1), "{got:?}");
    }

    #[test]
    fn hostile_text_ends_without_a_panic() {
        for text in [
            "$(((((",
            "${",
            "'",
            "\"",
            "`",
            "<<",
            "<<<",
            "$'\\x",
            "a\\",
            "${X:-",
            "$((1+",
            "~",
            "cd",
            "env -u",
            "env -S",
            "timeout",
            "x >",
            "$(",
            "))))",
            "{ }",
            "for x in",
            // What the reader evaluates: slices, sequences, patterns,
            // functions, arrays, reads — at their limits.
            "X=abc; echo ${X:1:9223372036854775807} ${X:-9223372036854775808:-9223372036854775808}",
            "echo {1..9223372036854775807..-9223372036854775808} {9223372036854775807..9223372036854775806}",
            "echo {-9223372036854775808..-9223372036854775807..9223372036854775807}",
            "echo {a..}{..b}{,}{{{,}}} {z..a..0}",
            "X=a; echo ${X//} ${X/} ${X#} ${X%%} ${X/[/x} ${X^} ${X,,} ${!} ${!X} ${X[} ${#}",
            "f() {",
            "f()",
            "function",
            "function f",
            "f() ( ",
            "a=(",
            "a=( x",
            "a=()",
            "read <<<",
            "read -a <<< x",
            "read x <<E",
            "printf -v",
            "printf -v X",
            "printf -v X %",
            "$\"",
            "<(",
            ">(x",
            "cat <( <(",
            "alias",
            "alias x=x\nx",
            "f() { f; }; f",
            "~+",
            "~-",
            "watch",
            "flock f -c",
            "script -c",
            "ssh",
            "tmux",
            "uv run",
            "parallel :::",
        ] {
            let _ = read_script(text, Path::new("/"), vars());
        }
        // Deep nesting is bounded.
        let deep = "eval ".repeat(50) + "rm -rf /";
        assert!(read_script(&deep, Path::new("/"), vars()).incomplete);
        let subs = "$(".repeat(10_000);
        let _ = read_script(&subs, Path::new("/"), vars());
        // Too much to read is said, not silently cut.
        let many = "a; ".repeat(100_000);
        assert!(read_script(&many, Path::new("/"), vars()).incomplete);
        assert!(!read_script("a; b", Path::new("/"), vars()).incomplete);
    }

    #[test]
    fn shell_fragments_in_any_order_end_without_a_panic() {
        // A fixed sequence of pseudo-random scripts glued from the pieces
        // the reader treats specially: every piece next to every other.
        const PIECES: &[&str] = &[
            "$",
            "{",
            "}",
            "(",
            ")",
            "[",
            "]",
            "'",
            "\"",
            "`",
            "\\",
            "$'",
            "$\"",
            "${",
            "${!",
            "${#",
            ":",
            "-",
            "+",
            "=",
            "?",
            "#",
            "%",
            "/",
            "//",
            "^",
            ",",
            "..",
            "*",
            "~",
            "~+",
            "<",
            ">",
            "<<",
            "<<<",
            "<(",
            "|",
            "||",
            "&",
            ";",
            "\n",
            " ",
            "a",
            "X",
            "1",
            "-9223372036854775808",
            "rm",
            "-rf",
            "sh",
            "-c",
            "eval",
            "f()",
            "function",
            "alias",
            "read",
            "printf",
            "-v",
            "find",
            "-exec",
            "{}",
            "xargs",
            "env",
            "-S",
            "cd",
            "CDPATH=/",
            "IFS=:",
            "a=(",
            "@",
            "E\n",
            "E",
            "é",
            "\u{0}",
        ];
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..5_000 {
            let len = (next() % 24) as usize;
            let script: String = (0..len)
                .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
                .collect();
            let _ = read_script(&script, Path::new("/w"), vars());
        }
    }

    #[test]
    fn lexical_paths_collapse_dots_and_slashes() {
        for (given, want) in [
            ("//", "/"),
            ("/./", "/"),
            ("/usr/", "/usr"),
            ("/a/../..", "/"),
            ("/usr/./bin//", "/usr/bin"),
        ] {
            assert_eq!(lexical(Path::new(given)), PathBuf::from(want), "{given}");
        }
    }

    /// `${X//*b/c}` tries every start with every end (cubic in the value):
    /// on a long value it is unknown instead (a 1,000-character value held
    /// the node's thread for seconds per expansion; 4,000 for minutes).
    #[test]
    fn pattern_operations_are_bounded_in_time() {
        let long = "a".repeat(1000);
        let read = read_script(
            &format!("X={long}; echo ${{X//*b/c}} ${{X#*a}} ${{X/a/b}}"),
            Path::new("/tmp"),
            vars(),
        );
        let words = &read.commands[0].words;
        // The replacement is past its bound: unknown. Trimming is not.
        assert!(words[1].computed && words[1].text.is_empty(), "{words:?}");
        assert_eq!(words[2].text, "a".repeat(999));
        assert!(words[3].computed);
        assert_eq!(
            words_of("X=abcb; echo ${X//b/c} ${X/b}"),
            [["echo", "accc", "acb"]]
        );
    }
}
