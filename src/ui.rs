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
