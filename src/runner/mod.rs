//! PROCESSES: spawn one program, capture its stdout and stderr merged in the
//! order they were written, cap what is kept, enforce a deadline, and make
//! sure no process of its tree outlives the run.
//!
//! This is the only place in the crate that spawns a child. The router, and
//! later `run_command` / `system.run`, all come through [`run`].
//!
//! Why one pipe: two pipes (one per stream) can only be read in the order the
//! reader happens to poll them, which loses the write order. Handing the same
//! pipe to fd 1 and fd 2 (what `2>&1` does) makes the kernel keep the order.
//!
//! Why the run ends without waiting for EOF: a descendant can escape the
//! process group (`setsid`) and keep the pipe open forever. Every wait below
//! is bounded: after a timeout the run returns by `timeout + grace + REAP +
//! DRAIN` (0.6 s past the grace period); after the child exits on its own,
//! by `exit + LINGER + grace + REAP + DRAIN`. Descendants that escaped the
//! group are found through adoption (Linux subreaper) and a tag in their
//! inherited environment (the trick Jenkins' ProcessTreeKiller uses), and
//! are stopped with the rest (see `unix.rs`).
//!
//! What it must never do: print, decide what a result means, or block the
//! runtime.

mod capture;
mod resident;
#[cfg(target_os = "linux")]
mod sentinel;
mod tap;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as platform;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as platform;

pub use capture::{Capture, Captured, incomplete_suffix_len};
pub use resident::{Launch, Resident};
pub use tap::{Tap, Tapped};

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::sync::Arc;

use tokio::io::AsyncReadExt;
use tokio::sync::Notify;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout_at};

/// The environment variable that tags every process a run starts.
pub const RUN_TAG_VAR: &str = "CLAWBOT_ROUTER_RUN_ID";

/// After the child exits, how long its descendants may keep writing before
/// the rest of the tree is stopped.
const LINGER: Duration = Duration::from_millis(200);
/// After the last kill, how long to keep reading what is left in the pipe.
const DRAIN: Duration = Duration::from_millis(300);
/// How long a SIGKILLed leader may take to be reaped before we stop waiting.
const REAP: Duration = Duration::from_millis(300);
/// Read size; large reads keep the syscall count low on floods.
const READ_CHUNK: usize = 64 * 1024;

/// What to run and within which limits.
#[derive(Debug, Clone)]
pub struct Spec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    /// Variables set for the child on top of the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// Inherited variables the child must not see (secrets of ours).
    pub env_remove: &'static [&'static str],
    /// Inherited variables for which this is true are not passed on either
    /// (an agent's command: the node's credentials and loader settings).
    pub env_filter: Option<fn(&str) -> bool>,
    /// Wall-clock limit from spawn to the first termination signal.
    pub timeout: Duration,
    /// Time between the polite signal (SIGTERM) and SIGKILL.
    pub grace: Duration,
    /// Bytes of output kept (per stream when split); the middle of anything
    /// longer is dropped.
    pub max_output: usize,
    /// Capture stderr apart from stdout (for callers whose protocol reports
    /// them separately). Off, both share one pipe and keep their order.
    pub split_stderr: bool,
    /// Stop the tree once stdout holds a complete JSON object that this
    /// accepts (given the object's bytes) and the process has not exited
    /// within a moment: OpenClaw's `--json` answer sometimes arrives whole
    /// from a process that then never exits.
    pub stop_after_json: Option<fn(&[u8]) -> bool>,
    /// A live copy of the output while the run goes on (see `tap.rs`).
    pub tap: Option<Tap>,
}

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The child exited on its own.
    Exited,
    /// The deadline passed and the tree was stopped.
    TimedOut,
    /// The caller's cancel future resolved and the tree was stopped.
    Cancelled,
    /// stdout held a complete JSON value and the process did not exit:
    /// stopped (`Spec::stop_after_json`).
    Completed,
}

/// Everything a caller may want to know about a finished run.
#[derive(Debug)]
pub struct Outcome {
    /// stdout and stderr merged, or stdout alone with `split_stderr`.
    pub output: Captured,
    /// stderr, with `split_stderr`.
    pub stderr: Option<Captured>,
    pub end: End,
    /// `None` when the child could not be reaped in time (it was SIGKILLed).
    pub status: Option<ExitStatus>,
    pub duration: Duration,
}

impl Outcome {
    pub fn exit_code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    pub fn signal(&self) -> Option<i32> {
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            self.status.and_then(|s| s.signal())
        }
        #[cfg(not(unix))]
        {
            None
        }
    }
}

/// The child could not be started.
#[derive(Debug, thiserror::Error)]
#[error("error spawning {program:?}")]
pub struct SpawnError {
    pub program: OsString,
    #[source]
    pub source: io::Error,
}

/// Runs `spec` to completion. `cancel` resolving stops the tree the same way
/// the deadline does.
pub async fn run(spec: &Spec, cancel: impl Future<Output = ()>) -> Result<Outcome, SpawnError> {
    let ran = run_with(spec, cancel, None).await?;
    let mut captured = ran.captures.into_iter().map(Capture::finish);
    Ok(Outcome {
        output: captured.next().unwrap_or_else(|| Capture::new(0).finish()),
        stderr: captured.next(),
        end: ran.end,
        status: ran.status,
        duration: ran.duration,
    })
}

/// A finished run whose stdout is data (an archive), kept byte for byte.
#[derive(Debug)]
pub struct Bytes {
    /// stdout, whole: at most `Spec::max_output` bytes.
    pub stdout: Vec<u8>,
    /// stdout went past `Spec::max_output`: the tree was stopped there
    /// (`end` is `Cancelled`) and `stdout` is only its start.
    pub overflowed: bool,
    /// stderr, captured apart as text (head and tail).
    pub stderr: Captured,
    pub end: End,
    pub status: Option<ExitStatus>,
}

/// Runs `spec` as [`run`] does, but keeps stdout whole and undecoded (stderr
/// has a pipe of its own); output past `max_output` stops the tree at once
/// rather than being cut in the middle.
pub async fn run_bytes(spec: &Spec, cancel: impl Future<Output = ()>) -> Result<Bytes, SpawnError> {
    let spec = Spec {
        split_stderr: true,
        stop_after_json: None,
        ..spec.clone()
    };
    let overflow = Arc::new(Notify::new());
    let ran = run_with(&spec, cancel, Some(Arc::clone(&overflow))).await?;
    let mut captures = ran.captures.into_iter();
    let (stdout, total) = captures.next().map(Capture::into_bytes).unwrap_or_default();
    Ok(Bytes {
        overflowed: total > spec.max_output as u64,
        stdout,
        stderr: captures.next().unwrap_or_else(|| Capture::new(0)).finish(),
        end: ran.end,
        status: ran.status,
    })
}

/// What every run ends with, before its captures are read.
struct Ran {
    captures: Vec<Capture>,
    end: End,
    status: Option<ExitStatus>,
    duration: Duration,
}

/// The one spawning path. `whole`: stdout is kept whole (see
/// [`Capture::whole`]) and this is notified, and the tree stopped, once it
/// passes `max_output`.
async fn run_with(
    spec: &Spec,
    cancel: impl Future<Output = ()>,
    whole: Option<Arc<Notify>>,
) -> Result<Ran, SpawnError> {
    let started = Instant::now();
    let deadline = started + spec.timeout;
    let spawn_error = |source| SpawnError {
        program: spec.program.clone(),
        source,
    };

    let (reader, writer) = io::pipe().map_err(spawn_error)?;
    let mut readers = vec![platform::async_reader(reader).map_err(spawn_error)?];
    let stderr_writer = if spec.split_stderr {
        let (reader, writer) = io::pipe().map_err(spawn_error)?;
        readers.push(platform::async_reader(reader).map_err(spawn_error)?);
        writer
    } else {
        writer.try_clone().map_err(spawn_error)?
    };
    let tag = new_tag();
    let mut cmd = command(
        &spec.program,
        &spec.args,
        spec.cwd.as_deref(),
        &spec.env,
        spec.env_remove,
        &tag,
    );
    if let Some(blocked) = spec.env_filter {
        for (key, _) in std::env::vars_os() {
            if key.to_str().is_some_and(blocked) {
                cmd.env_remove(key);
            }
        }
    }
    cmd.stdin(Stdio::null())
        .stdout(writer)
        .stderr(stderr_writer);
    // `spawn` consumes the command, closing our copies of the write ends:
    // from here on only the child's tree holds them, so EOF means they are
    // done.
    let mut tree = platform::Tree::spawn(cmd, tag).map_err(spawn_error)?;
    if let Some(tap) = &spec.tap {
        tap.offer(&[]); // the program runs: a streaming reader may say so
    }
    let json_done = spec
        .stop_after_json
        .map(|accept| (accept, Arc::new(Notify::new())));
    let mut pump = Pump::start(
        readers,
        spec.max_output,
        json_done.clone(),
        spec.tap.clone(),
        whole.clone(),
    );

    tokio::pin!(cancel);
    let overflowed = async {
        match &whole {
            Some(over) => over.notified().await,
            None => std::future::pending().await,
        }
    };
    let json_complete = async {
        match &json_done {
            Some((_, done)) => done.notified().await,
            None => std::future::pending().await,
        }
    };
    let (end, mut status) = tokio::select! {
        status = tree.wait() => (End::Exited, status.ok()),
        never = keep_the_sentinel() => match never {},
        _ = tokio::time::sleep_until(deadline) => (End::TimedOut, None),
        _ = &mut cancel => (End::Cancelled, None),
        _ = overflowed => (End::Cancelled, None),
        _ = json_complete => {
            // The answer is whole; a process about to exit gets a moment.
            match tokio::time::timeout(LINGER, tree.wait()).await {
                Ok(status) => (End::Exited, status.ok()),
                Err(_) => (End::Completed, None),
            }
        }
    };

    let clean_exit =
        status.is_some() && pump.eof_by(Instant::now() + LINGER).await && !tree.group_alive();
    if !clean_exit {
        // A timeout, a cancel, or a child that left descendants behind.
        status = stop_tree(&mut tree, status, Some(&mut pump), spec.grace).await;
    }
    pump.eof_by(Instant::now() + DRAIN).await;
    tree.disarm();

    Ok(Ran {
        captures: pump.finish().await,
        end,
        status,
        duration: started.elapsed(),
    })
}

/// TERM the whole tree, give it `grace` to exit and close the pipe, then KILL
/// whatever is left. Returns the leader's status when it could be reaped.
/// (`pump`: the pipes to see closed; a resident child's are its user's.)
/// While a run goes on, a sentinel someone killed is replaced within a
/// second (and given every group still watched): the run stays covered if
/// we are killed next. Never ends.
async fn keep_the_sentinel() -> std::convert::Infallible {
    loop {
        sleep(Duration::from_secs(1)).await;
        #[cfg(target_os = "linux")]
        sentinel::pid();
    }
}

async fn stop_tree(
    tree: &mut platform::Tree,
    mut status: Option<ExitStatus>,
    pump: Option<&mut Pump>,
    grace: Duration,
) -> Option<ExitStatus> {
    tree.terminate();
    let by = Instant::now() + grace;
    if status.is_none() {
        status = timeout_at(by, tree.wait()).await.ok().and_then(Result::ok);
    }
    let eof = match pump {
        Some(pump) => pump.eof_by(by).await,
        None => true,
    };
    // Members of the group that ignore TERM keep it alive without holding
    // the pipe; poll until they are gone or the grace period ends.
    while eof && tree.anything_alive() && Instant::now() < by {
        sleep(Duration::from_millis(10)).await;
    }
    if status.is_none() || !eof || tree.anything_alive() {
        tree.kill();
        let reaped = Instant::now() + REAP;
        if status.is_none() {
            status = timeout_at(reaped, tree.wait())
                .await
                .ok()
                .and_then(Result::ok);
        }
        // KILL is delivered, not yet done: see the tree gone (bounded).
        while tree.anything_alive() && Instant::now() < reaped {
            sleep(Duration::from_millis(10)).await;
        }
    }
    status
}

/// Reads each pipe in a task of its own, so the wait for the child and the
/// wait for EOF can each be bounded separately.
/// Finds, chunk by chunk, the end of the first JSON object in a byte
/// stream that `accept` takes: depth, strings and escapes only until an
/// object closes, then `accept` judges its bytes. An object must open a
/// line (`{` as the line's first non-blank byte), so `[openclaw] …` or
/// `… {x}` log lines are skipped, and a whole-line JSON log record that
/// `accept` refuses is skipped too.
#[derive(Debug)]
pub struct JsonEnd {
    accept: fn(&[u8]) -> bool,
    depth: usize,
    started: bool,
    /// Only blanks so far on the current line (before the object).
    line_start: bool,
    in_string: bool,
    escaped: bool,
    /// The candidate object's bytes (none kept beyond `MAX_JSON`: such an
    /// object is never taken for the answer, the process's exit is).
    object: Vec<u8>,
    too_big: bool,
}

/// What accepts a JSON answer, and whom to tell when one is complete.
type JsonWatch = (fn(&[u8]) -> bool, Arc<Notify>);

/// The largest object `JsonEnd` judges.
const MAX_JSON: usize = 64 << 20;

impl JsonEnd {
    pub fn new(accept: fn(&[u8]) -> bool) -> Self {
        Self {
            accept,
            depth: 0,
            started: false,
            line_start: true,
            in_string: false,
            escaped: false,
            object: Vec::new(),
            too_big: false,
        }
    }
}

impl JsonEnd {
    /// Feeds the next bytes; true once the first value is complete.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            if !self.started {
                match b {
                    b'{' if self.line_start => {
                        self.started = true;
                        self.depth = 1;
                        self.object.clear();
                        self.object.push(b);
                        self.too_big = false;
                    }
                    b'\n' => self.line_start = true,
                    b' ' | b'\t' | b'\r' => {}
                    _ => self.line_start = false,
                }
                continue;
            }
            if self.object.len() < MAX_JSON {
                self.object.push(b);
            } else {
                self.too_big = true;
            }
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        if !self.too_big && (self.accept)(&self.object) {
                            return true;
                        }
                        // Not the answer: keep looking on later lines.
                        self.started = false;
                        self.line_start = false;
                        self.object.clear();
                    }
                }
                _ => {}
            }
        }
        false
    }
}

struct Pump {
    readers: Vec<Reader>,
}

struct Reader {
    task: Option<JoinHandle<Capture>>,
    stop: Option<oneshot::Sender<()>>,
    done: Option<Capture>,
}

impl Pump {
    /// `json_done`, if given, is notified once the first pipe has carried
    /// a complete JSON object its function accepts; `whole`, once the first
    /// pipe (kept whole) has carried more than `limit` bytes.
    fn start<R>(
        pipes: Vec<R>,
        limit: usize,
        json_done: Option<JsonWatch>,
        tap: Option<Tap>,
        whole: Option<Arc<Notify>>,
    ) -> Self
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
    {
        let readers = pipes
            .into_iter()
            .enumerate()
            .map(|(i, mut pipe)| {
                let (stop, mut stopped) = oneshot::channel();
                let mut json = json_done
                    .clone()
                    .filter(|_| i == 0)
                    .map(|(accept, done)| (JsonEnd::new(accept), done));
                let tap = tap.clone();
                let whole = whole.clone().filter(|_| i == 0);
                let task = tokio::spawn(async move {
                    let mut capture = match whole {
                        Some(_) => Capture::whole(limit),
                        None => Capture::new(limit),
                    };
                    // Read into spare capacity: never zeroed, so a short
                    // output touches one page of it, not sixteen.
                    let mut buf = Vec::with_capacity(READ_CHUNK);
                    loop {
                        buf.clear();
                        tokio::select! {
                            // Data already in the pipe wins over a stop request.
                            biased;
                            read = pipe.read_buf(&mut buf) => match read {
                                Ok(0) => break,
                                Ok(_) => {
                                    capture.push(&buf);
                                    if let Some(over) = &whole
                                        && capture.total() > limit as u64 {
                                            over.notify_one();
                                            break;
                                        }
                                    if let Some(tap) = &tap {
                                        tap.offer(&buf);
                                    }
                                    if let Some((scanner, done)) = &mut json
                                        && scanner.feed(&buf) {
                                            done.notify_one();
                                            json = None;
                                        }
                                }
                                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                                Err(_) => break,
                            },
                            _ = &mut stopped => break,
                        }
                    }
                    capture
                });
                Reader {
                    task: Some(task),
                    stop: Some(stop),
                    done: None,
                }
            })
            .collect();
        Self { readers }
    }

    /// Waits for EOF on every pipe until `by`; true if all are closed.
    async fn eof_by(&mut self, by: Instant) -> bool {
        let mut all = true;
        for reader in &mut self.readers {
            let Some(task) = reader.task.as_mut() else {
                continue;
            };
            match timeout_at(by, task).await {
                Ok(joined) => {
                    reader.done = joined.ok();
                    reader.task = None;
                }
                Err(_) => all = false,
            }
        }
        all
    }

    /// Stops reading (where still reading) and hands over what was captured,
    /// one per pipe.
    async fn finish(self) -> Vec<Capture> {
        let mut out = Vec::with_capacity(self.readers.len());
        for mut reader in self.readers {
            if let Some(stop) = reader.stop.take() {
                let _ = stop.send(());
            }
            if let Some(task) = reader.task.take() {
                reader.done = task.await.ok();
            }
            out.push(reader.done.unwrap_or_else(|| Capture::new(0)));
        }
        out
    }
}

/// The command every child is made from: its program, arguments, working
/// directory and environment (ours minus `env_remove`, plus `env`, plus the
/// run's tag).
fn command(
    program: &OsString,
    args: &[OsString],
    cwd: Option<&std::path::Path>,
    env: &[(OsString, OsString)],
    env_remove: &[&str],
    tag: &str,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    for key in env_remove {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .env(RUN_TAG_VAR, tag);
    cmd
}

/// A command line the user wrote (`--openclaw`, `OPENCLAW_BIN`,
/// `--mcp-server`) as words, as this platform's users write them: on Unix
/// as a POSIX shell splits them (quotes, backslash escapes); on Windows,
/// where `\` is the path separator, only whitespace and double quotes
/// count (`"C:\Program Files\nodejs\npx.cmd" openclaw`). No shell runs.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    if cfg!(windows) {
        split_windows(text)
    } else {
        shell_words::split(text).map_err(|e| e.to_string())
    }
}

/// The program a command's first word names, as spawning will need it: on
/// Windows found through PATH and PATHEXT (`npx` is npm's `npx.cmd`, which
/// CreateProcess would not find by that name) — a relative name from `cwd`,
/// the directory it will start in; elsewhere the word itself.
pub fn find_program(word: &str, cwd: Option<&Path>) -> String {
    if cfg!(windows) {
        let found = match cwd {
            Some(dir) => which::which_in(word, std::env::var_os("PATH"), dir),
            None => which::which(word),
        };
        if let Ok(found) = found {
            return found.to_string_lossy().into_owned();
        }
    }
    word.to_owned()
}

pub(crate) fn split_windows(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut started) = (false, false);
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            // Windows' own rule: space and tab, not every Unicode space.
            ' ' | '\t' if !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if quoted {
        return Err("missing closing quote".into());
    }
    if started {
        words.push(word);
    }
    Ok(words)
}

/// A value unique to this run among every run on the machine.
fn new_tag() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sh(script: &str, split: bool) -> Spec {
        Spec {
            env_remove: &[],
            env_filter: None,
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: None,
            env: vec![("GREETING".into(), "hi".into())],
            timeout: Duration::from_secs(10),
            grace: Duration::from_millis(200),
            max_output: 1024,
            split_stderr: split,
            stop_after_json: None,
            tap: None,
        }
    }

    #[tokio::test]
    async fn bytes_are_kept_whole_and_undecoded() {
        let spec = Spec {
            max_output: 1 << 20,
            ..sh("printf '\\377\\000\\376'; echo oops >&2", false)
        };
        let ran = run_bytes(&spec, std::future::pending()).await.unwrap();
        assert_eq!(ran.stdout, b"\xff\x00\xfe");
        assert!(!ran.overflowed);
        assert_eq!(ran.stderr.head, "oops\n");
        assert_eq!(ran.end, End::Exited);
    }

    #[tokio::test]
    async fn bytes_past_the_cap_stop_the_run_at_once() {
        let spec = Spec {
            max_output: 4096,
            timeout: Duration::from_secs(30),
            ..sh("exec cat /dev/zero", false)
        };
        let started = std::time::Instant::now();
        let ran = run_bytes(&spec, std::future::pending()).await.unwrap();
        assert!(ran.overflowed);
        assert_eq!(ran.stdout.len(), 4096);
        assert_eq!(ran.end, End::Cancelled);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_tap_sees_both_streams_while_the_run_goes_on() {
        let (tap, mut tapped) = Tap::channel(64);
        let spec = Spec {
            tap: Some(tap),
            max_output: 8,
            ..sh("echo first; echo second >&2; sleep 1; echo third", true)
        };
        let run = tokio::spawn(async move { run(&spec, std::future::pending()).await });
        let mut seen = Vec::new();
        // The first two lines arrive before the run ends.
        while !(String::from_utf8_lossy(&seen).contains("first")
            && String::from_utf8_lossy(&seen).contains("second"))
        {
            seen.extend(tapped.recv().await.expect("more output"));
        }
        assert!(!run.is_finished(), "streamed while running");
        while let Some(bytes) = tapped.recv().await {
            seen.extend(bytes);
        }
        let outcome = run.await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&seen).ends_with("third\n"));
        // The capture kept its own budget; the copy had all of it.
        assert!(outcome.output.truncated());
        assert_eq!(tapped.take_lost(), 0);
    }

    #[test]
    fn windows_words_keep_backslashes_and_group_by_double_quotes() {
        assert_eq!(
            split_windows(r#""C:\Program Files\nodejs\npx.cmd" openclaw  Z:\a\b"#).unwrap(),
            [r"C:\Program Files\nodejs\npx.cmd", "openclaw", r"Z:\a\b"]
        );
        assert_eq!(split_windows(r#"a "" b"#).unwrap(), ["a", "", "b"]);
        assert_eq!(split_windows("it's").unwrap(), ["it's"]);
        assert_eq!(
            split_windows("C:\\我的\u{3000}文件\\x.exe a").unwrap(),
            ["C:\\我的\u{3000}文件\\x.exe", "a"]
        );
        assert!(split_windows(r#"open "quote"#).is_err());
        assert_eq!(split_words("a 'b c'").unwrap(), ["a", "b c"], "POSIX here");
    }

    #[test]
    fn json_end_finds_the_end_of_the_first_value_across_chunks() {
        let any: fn(&[u8]) -> bool = |_| true;
        let mut scanner = JsonEnd::new(any);
        assert!(!scanner.feed(b"log line {not json}\n[openclaw] [x] {y}\n"));
        assert!(!scanner.feed(b"  {\"a\": 1"));
        assert!(scanner.feed(b"}"));
        // A JSON log record the caller refuses is skipped.
        let answer: fn(&[u8]) -> bool = |bytes| bytes.windows(6).any(|w| w == b"result");
        let mut scanner = JsonEnd::new(answer);
        assert!(!scanner.feed(b"{\"level\":\"info\",\"msg\":\"{}\"}\n{\"res"));
        assert!(scanner.feed(b"ult\": 1}\n"));
        let mut scanner = JsonEnd::new(any);
        assert!(!scanner.feed(b"noise\n{\"a\": \"}\\\"{\", "));
        assert!(!scanner.feed(b"\"b\": [1, {\"c\": 2}]"));
        assert!(scanner.feed(b"}\ntrailing"));
    }

    #[tokio::test]
    async fn a_process_that_hangs_after_its_json_is_stopped_once_it_is_complete() {
        let mut spec = sh(
            "printf '{\"ok\": '; sleep 0.2; printf 'true}\\n'; exec sleep 30",
            true,
        );
        spec.stop_after_json = Some(|_| true);
        let started = std::time::Instant::now();
        let outcome = run_now(&spec).await;
        assert_eq!(outcome.end, End::Completed);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(outcome.output.join(|_| String::new()), "{\"ok\": true}\n");
        // One that exits right after its JSON keeps its exit status.
        let mut spec = sh("printf '{}'; exit 3", true);
        spec.stop_after_json = Some(|_| true);
        let outcome = run_now(&spec).await;
        assert_eq!(outcome.end, End::Exited);
        assert_eq!(outcome.exit_code(), Some(3));
    }

    async fn run_now(spec: &Spec) -> Outcome {
        run(spec, std::future::pending()).await.unwrap()
    }

    #[tokio::test]
    async fn split_capture_keeps_the_streams_apart() {
        let outcome = run_now(&sh("echo out; echo err >&2; echo $GREETING", true)).await;
        assert_eq!(outcome.output.head, "out\nhi\n");
        assert_eq!(outcome.stderr.as_ref().unwrap().head, "err\n");
        assert_eq!(outcome.exit_code(), Some(0));
    }

    #[tokio::test]
    async fn merged_capture_keeps_the_write_order() {
        let outcome = run_now(&sh("echo 1; echo 2 >&2; echo 3; echo 4 >&2", false)).await;
        assert_eq!(outcome.output.head, "1\n2\n3\n4\n");
        assert!(outcome.stderr.is_none());
    }

    #[tokio::test]
    async fn cancel_stops_the_tree() {
        let spec = sh("echo started; sleep 30", false);
        let outcome = run(&spec, tokio::time::sleep(Duration::from_millis(300)))
            .await
            .unwrap();
        assert_eq!(outcome.end, End::Cancelled);
        assert_eq!(outcome.output.head, "started\n");
        assert!(outcome.duration < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let mut spec = sh("", false);
        spec.program = "/nonexistent/program".into();
        let err = run(&spec, std::future::pending()).await.unwrap_err();
        assert_eq!(err.source.kind(), io::ErrorKind::NotFound);
    }
}
