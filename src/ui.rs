//! The only place that talks to a terminal: the progress spinner and the
//! approval prompt, both on stderr.
//!
//! They run only when stderr (and, to ask, stdin) is a terminal, so scripts,
//! hosts and CI (pipes) see nothing on stderr and exactly one JSON object on
//! stdout. Terminal writes happen on threads of their own: a terminal that
//! stops reading (Ctrl-S, a pty nobody drains) must never freeze the runtime
//! that enforces deadlines.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc as std_mpsc};
use std::time::{Duration, Instant};

use crate::shared::escape;

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(100);

/// A running spinner; [`Spinner::stop`] clears its line.
pub struct Spinner {
    stop: Arc<AtomicBool>,
    done: std_mpsc::Receiver<()>,
    activity: Activity,
}

/// What the remote agent is doing, as the spinner shows it after the
/// elapsed time (fed by the gateway's streamed events).
#[derive(Clone, Default)]
pub struct Activity(Arc<std::sync::Mutex<Doing>>);

#[derive(Default)]
struct Doing {
    line: String,
    /// The reply's last characters, on one line.
    tail: String,
}

impl std::fmt::Debug for Activity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Activity")
    }
}

/// The most of the reply's tail the spinner line shows.
const ACTIVITY_CHARS: usize = 40;

impl Activity {
    pub fn show(&self, progress: &crate::gateway::operator::Progress) {
        use crate::gateway::operator::Progress;
        let Ok(mut doing) = self.0.lock() else { return };
        match progress {
            Progress::Accepted(_) => doing.line = "accepted".into(),
            Progress::Text(text) => {
                let joined: String = format!("{}{text}", doing.tail)
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect();
                let skip = joined.chars().count().saturating_sub(ACTIVITY_CHARS);
                doing.tail = joined.chars().skip(skip).collect();
                doing.line = format!("\u{2026}{}", escape::line(&doing.tail));
            }
            Progress::Tool { name, title } => {
                let what = if title.is_empty() { name } else { title };
                doing.line = format!("tool: {}", escape::line(what));
            }
            Progress::Rewritten | Progress::Activity => {}
        }
    }

    /// The current activity line (empty until something happened).
    pub fn text(&self) -> String {
        self.0.lock().map(|d| d.line.clone()).unwrap_or_default()
    }
}

impl Spinner {
    /// Starts `text` (the seed's pre-announcement) with elapsed time, if
    /// stderr is a terminal; `None` otherwise.
    pub fn start(text: &'static str) -> Option<Self> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = std_mpsc::channel();
        let flag = stop.clone();
        let activity = Activity::default();
        let doing = activity.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            for frame in FRAMES.iter().cycle() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                let secs = started.elapsed().as_secs_f64();
                let mut err = std::io::stderr().lock();
                let doing = doing.text();
                let sep = if doing.is_empty() { "" } else { " \u{b7} " };
                let _ = write!(err, "\r\x1b[2K{frame} {text} {secs:.1}s{sep}{doing}");
                let _ = err.flush();
                drop(err);
                std::thread::sleep(TICK);
            }
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            let _ = done_tx.send(());
        });
        Some(Self {
            stop,
            done,
            activity,
        })
    }

    /// The handle that feeds the spinner's activity text.
    pub fn activity(&self) -> Activity {
        self.activity.clone()
    }

    /// Stops and clears the line; waits for that briefly, never for a
    /// terminal that does not take output.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.done.recv_timeout(TICK * 3);
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
    say: std_mpsc::Sender<String>,
}

/// stdin, read by one thread for the life of the process: a line typed
/// while a question waits is its answer; any other line is a message (for
/// the doctor session). Both channels close at end of input.
struct Stdin {
    asking: Arc<AtomicBool>,
    answers: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<String>>,
    messages: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
}

fn stdin() -> &'static Stdin {
    static STDIN: std::sync::OnceLock<Stdin> = std::sync::OnceLock::new();
    STDIN.get_or_init(|| {
        let asking = Arc::new(AtomicBool::new(false));
        let (answer_tx, answers) = tokio::sync::mpsc::unbounded_channel();
        let (message_tx, messages) = tokio::sync::mpsc::unbounded_channel();
        let routing = asking.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut stdin = std::io::stdin().lock();
            let mut bytes = Vec::new();
            while stdin.read_until(b'\n', &mut bytes).unwrap_or(0) > 0 {
                let line = String::from_utf8_lossy(&bytes).into_owned();
                bytes.clear();
                let to = if routing.load(Ordering::SeqCst) {
                    &answer_tx
                } else {
                    &message_tx
                };
                let _ = to.send(line);
            }
        });
        Stdin {
            asking,
            answers: tokio::sync::Mutex::new(answers),
            messages: std::sync::Mutex::new(Some(messages)),
        }
    })
}

/// The lines of stdin that are not answers to a question, until end of
/// input; only the first caller gets them.
pub fn stdin_messages() -> Option<tokio::sync::mpsc::UnboundedReceiver<String>> {
    stdin().messages.lock().ok()?.take()
}

impl Prompter {
    pub fn for_terminal() -> Option<Self> {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return None;
        }
        let (say, said) = std_mpsc::channel::<String>();
        std::thread::spawn(move || {
            for text in said {
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(text.as_bytes());
                let _ = err.flush();
            }
        });
        Some(Self { say })
    }

    /// Shows what `who` wants (`what`) and waits up to `wait` for o(nce) /
    /// a(lways) / d(eny).
    pub async fn ask(&self, who: &str, what: &str, wait: Duration) -> Answer {
        let stdin = stdin();
        // One question at a time: waiting for an earlier one counts
        // against this one's time, so a queued question never outlives it.
        let started = std::time::Instant::now();
        let Ok(mut lines) = tokio::time::timeout(wait, stdin.answers.lock()).await else {
            return Answer::TimedOut;
        };
        let wait = wait.saturating_sub(started.elapsed());
        while lines.try_recv().is_ok() {} // typed before the question: not an answer
        stdin.asking.store(true, Ordering::SeqCst);
        // What an agent sends must not move the cursor or erase the line
        // the user is asked to judge.
        let (who, what) = (escape::line(who), escape::line(what));
        self.print(format!(
            "\n[clawbot_router] {who} wants to run on this machine:\n    {what}\n  Allow [o]nce, allow [a]lways, or [d]eny? "
        ));
        let answer = tokio::time::timeout(wait, async {
            loop {
                let Some(line) = lines.recv().await else {
                    return Answer::Deny;
                };
                match line.trim().to_ascii_lowercase().as_str() {
                    "o" | "once" | "y" | "yes" => return Answer::Once,
                    "a" | "always" => return Answer::Always,
                    "d" | "deny" | "n" | "no" => return Answer::Deny,
                    _ => self.print("  Please answer o, a or d: ".into()),
                }
            }
        })
        .await
        .unwrap_or(Answer::TimedOut);
        stdin.asking.store(false, Ordering::SeqCst);
        self.print(
            match answer {
                Answer::TimedOut => "\n  (no answer in time: denied)\n",
                Answer::Deny => "  denied\n",
                _ => "  allowed\n",
            }
            .into(),
        );
        answer
    }

    fn print(&self, text: String) {
        let _ = self.say.send(text);
    }
}
