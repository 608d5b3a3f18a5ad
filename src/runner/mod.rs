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
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as platform;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as platform;

pub use capture::{Capture, Captured};

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::AsyncReadExt;
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
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(stderr_writer);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    let tag = new_tag();
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env(RUN_TAG_VAR, &tag);
    // `spawn` consumes the command, closing our copies of the write ends:
    // from here on only the child's tree holds them, so EOF means they are
    // done.
    let mut tree = platform::Tree::spawn(cmd, tag).map_err(spawn_error)?;
    let mut pump = Pump::start(readers, spec.max_output);

    tokio::pin!(cancel);
    let (end, mut status) = tokio::select! {
        status = tree.wait() => (End::Exited, status.ok()),
        _ = tokio::time::sleep_until(deadline) => (End::TimedOut, None),
        _ = &mut cancel => (End::Cancelled, None),
    };

    let clean_exit =
        status.is_some() && pump.eof_by(Instant::now() + LINGER).await && !tree.group_alive();
    if !clean_exit {
        // A timeout, a cancel, or a child that left descendants behind.
        status = stop_tree(&mut tree, status, &mut pump, spec.grace).await;
    }
    pump.eof_by(Instant::now() + DRAIN).await;
    tree.disarm();

    let mut captured = pump.finish().await.into_iter();
    Ok(Outcome {
        output: captured.next().unwrap_or_else(|| Capture::new(0).finish()),
        stderr: captured.next(),
        end,
        status,
        duration: started.elapsed(),
    })
}

/// TERM the whole tree, give it `grace` to exit and close the pipe, then KILL
/// whatever is left. Returns the leader's status when it could be reaped.
async fn stop_tree(
    tree: &mut platform::Tree,
    mut status: Option<ExitStatus>,
    pump: &mut Pump,
    grace: Duration,
) -> Option<ExitStatus> {
    tree.terminate();
    let by = Instant::now() + grace;
    if status.is_none() {
        status = timeout_at(by, tree.wait()).await.ok().and_then(Result::ok);
    }
    let eof = pump.eof_by(by).await;
    // Members of the group that ignore TERM keep it alive without holding
    // the pipe; poll until they are gone or the grace period ends.
    while eof && tree.anything_alive() && Instant::now() < by {
        sleep(Duration::from_millis(10)).await;
    }
    if status.is_none() || !eof || tree.anything_alive() {
        tree.kill();
        if status.is_none() {
            status = timeout_at(Instant::now() + REAP, tree.wait())
                .await
                .ok()
                .and_then(Result::ok);
        }
    }
    status
}

/// Reads each pipe in a task of its own, so the wait for the child and the
/// wait for EOF can each be bounded separately.
struct Pump {
    readers: Vec<Reader>,
}

struct Reader {
    task: Option<JoinHandle<Capture>>,
    stop: Option<oneshot::Sender<()>>,
    done: Option<Capture>,
}

impl Pump {
    fn start<R>(pipes: Vec<R>, limit: usize) -> Self
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
    {
        let readers = pipes
            .into_iter()
            .map(|mut pipe| {
                let (stop, mut stopped) = oneshot::channel();
                let task = tokio::spawn(async move {
                    let mut capture = Capture::new(limit);
                    let mut buf = vec![0u8; READ_CHUNK];
                    loop {
                        tokio::select! {
                            // Data already in the pipe wins over a stop request.
                            biased;
                            read = pipe.read(&mut buf) => match read {
                                Ok(0) => break,
                                Ok(n) => capture.push(&buf[..n]),
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
    async fn finish(self) -> Vec<Captured> {
        let mut out = Vec::with_capacity(self.readers.len());
        for mut reader in self.readers {
            if let Some(stop) = reader.stop.take() {
                let _ = stop.send(());
            }
            if let Some(task) = reader.task.take() {
                reader.done = task.await.ok();
            }
            out.push(reader.done.unwrap_or_else(|| Capture::new(0)).finish());
        }
        out
    }
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
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: None,
            env: vec![("GREETING".into(), "hi".into())],
            timeout: Duration::from_secs(10),
            grace: Duration::from_millis(200),
            max_output: 1024,
            split_stderr: split,
        }
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
