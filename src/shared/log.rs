//! The log: lines on stderr (or a file), written by a thread of
//! their own so that a reader that stops reading never stalls the node —
//! and the only way the node, the links and `mcp` put a sentence on
//! stderr.
//!
//! A logged message is one line, escaped whole by [`crate::shared::escape::line`]:
//! sentences here carry what strangers sent (a gateway's reasons, a
//! client's names, an MCP server's stderr), and none of it may drive the
//! terminal or forge a line of ours. A message of several lines is logged
//! as several messages.

use std::fs::File;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// `--log-file`: set once, before the first line.
static FILE: OnceLock<File> = OnceLock::new();

/// Sends the log to `path` (appended, created 0600) instead of stderr.
pub fn to_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = options.open(path)?;
    let _ = FILE.set(file);
    Ok(())
}

/// Logs a line on stderr from a thread of its own: a stderr nobody reads
/// must never stall the node. Lines are dropped when the writer falls
/// behind.
pub fn say(message: &str) {
    say_as("node", message);
}

/// The same, for another mode of the program (`bridge`, `chat`, `poll`).
pub fn say_as(mode: &str, message: &str) {
    let _ = log().try_send(Log::Line(line(mode, message)));
}

/// A mode's last words before it exits (a usage error, a refusal): written
/// at once, on stderr, escaped as the log is.
pub fn tell(mode: &str, message: &str) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(line(mode, message).as_bytes());
}

fn line(mode: &str, message: &str) -> String {
    let space = if mode.is_empty() { "" } else { " " };
    format!(
        "[clawbot_router{space}{mode}] {}\n",
        crate::shared::escape::line(message)
    )
}

/// Waits (briefly) until every line logged so far is written: the last
/// words before exiting matter most.
pub fn flush_log() {
    let (done, flushed) = std::sync::mpsc::channel();
    if log().send(Log::Flush(done)).is_ok() {
        let _ = flushed.recv_timeout(Duration::from_millis(1500));
    }
}

enum Log {
    Line(String),
    Flush(std::sync::mpsc::Sender<()>),
}

fn log() -> &'static std::sync::mpsc::SyncSender<Log> {
    static LOG: std::sync::OnceLock<std::sync::mpsc::SyncSender<Log>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Log>(1024);
        std::thread::spawn(move || {
            use std::io::Write;
            for entry in rx {
                match entry {
                    Log::Line(line) => match FILE.get() {
                        Some(mut file) => {
                            let _ = file.write_all(line.as_bytes());
                        }
                        None => {
                            let mut err = std::io::stderr().lock();
                            let _ = err.write_all(line.as_bytes());
                            let _ = err.flush();
                        }
                    },
                    Log::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        tx
    })
}
