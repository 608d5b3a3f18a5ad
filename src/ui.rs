//! The only place that talks to a terminal: the progress spinner on stderr.
//!
//! It runs only when stderr is a terminal, so scripts, hosts and CI (pipes)
//! see nothing on stderr and exactly one JSON object on stdout.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::router::messages::{self, Lang};

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(100);

/// A running spinner; [`Spinner::stop`] clears its line.
pub struct Spinner {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Spinner {
    /// Starts the seed's pre-announcement with elapsed time, if stderr is a
    /// terminal; `None` otherwise.
    pub fn start(lang: Lang) -> Option<Self> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let (stop, mut stopped) = oneshot::channel();
        let text = messages::announce(lang);
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut tick = tokio::time::interval(TICK);
            for frame in FRAMES.iter().cycle() {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = tick.tick() => {
                        let secs = started.elapsed().as_secs_f64();
                        let mut err = std::io::stderr().lock();
                        let _ = write!(err, "\r\x1b[2K{frame} {text} {secs:.1}s");
                        let _ = err.flush();
                    }
                }
            }
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        });
        Some(Self { stop, task })
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// An approval question's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Once,
    Always,
    Deny,
    TimedOut,
}

/// Asks the user on the terminal, one question at a time.
///
/// Exists only when stdin and stderr are both terminals: a prompt nobody can
/// see or answer must not block (that is how `dialoguer` hangs when stdin is
/// not a terminal). Lines are read by one thread for the life of the
/// process, so a question that timed out never swallows the next answer.
pub struct Prompter {
    lines: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<String>>,
}

impl Prompter {
    pub fn for_terminal() -> Option<Self> {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return None;
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            let mut line = String::new();
            while stdin.read_line(&mut line).unwrap_or(0) > 0 {
                if tx.send(std::mem::take(&mut line)).is_err() {
                    break;
                }
            }
        });
        Some(Self {
            lines: tokio::sync::Mutex::new(rx),
        })
    }

    /// Shows `what` and waits up to `wait` for o(nce) / a(lways) / d(eny).
    pub async fn ask(&self, what: &str, wait: Duration) -> Answer {
        let mut lines = self.lines.lock().await;
        while lines.try_recv().is_ok() {} // typed before the question: not an answer
        eprint!(
            "\n[clawbot_router] OpenClaw wants to run on this machine:\n    {what}\n  Allow [o]nce, allow [a]lways, or [d]eny? "
        );
        let answer = tokio::time::timeout(wait, async {
            loop {
                let Some(line) = lines.recv().await else {
                    return Answer::Deny;
                };
                match line.trim().to_ascii_lowercase().as_str() {
                    "o" | "once" | "y" | "yes" => return Answer::Once,
                    "a" | "always" => return Answer::Always,
                    "d" | "deny" | "n" | "no" => return Answer::Deny,
                    _ => eprint!("  Please answer o, a or d: "),
                }
            }
        })
        .await
        .unwrap_or(Answer::TimedOut);
        match answer {
            Answer::TimedOut => eprintln!("\n  (no answer in time: denied)"),
            Answer::Deny => eprintln!("  denied"),
            _ => eprintln!("  allowed"),
        }
        answer
    }
}
