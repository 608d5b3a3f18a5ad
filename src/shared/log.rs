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
//!
//! What people running a service expect is here too: levels (`error`,
//! `warn`, `info`, `debug`; `--quiet` keeps warnings and errors), and
//! `--log-format json`, one JSON object a line (`{"ts": ms, "level",
//! "who", "msg"}`) for service managers and log shippers. The text format
//! is unchanged, so what a person reads (and what tests match) stays.
//!
//! Why ours and not `tracing` + `tracing-subscriber`: `tracing` itself is
//! already in the build (through rmcp), but the subscriber with its `json`
//! feature adds `tracing-subscriber`, `tracing-serde`, `sharded-slab`,
//! `thread_local`, `nu-ansi-term` and `tracing-log`, none of which is in
//! the lock file today, for five things we need: a level, a filter, two
//! line formats and a file. Neither of the two promises above comes with
//! it: its writer blocks on a stalled stderr unless `tracing-appender`'s
//! non-blocking writer is added too (one more crate), and every message
//! would still need our escaper in a formatter of our own, since its
//! formatter writes a field as it was given. What we would keep of the
//! crates is the macros and spans, which no room here uses; so this file
//! grows by a level and a format (about sixty lines) instead. The crates'
//! size and build time were not measured: the reasons above do not depend
//! on them.
//!
//! Every mode marks its warnings and errors (`warn`, `error`, `warn_as`,
//! `error_as`); what a person must act on (a pairing or an approval to
//! grant) is a warning, so `--quiet` still shows it.

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

/// How severe a line is; a line less severe than the least one kept is
/// not written (nor formatted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

/// How a line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// `[clawbot_router who] message`: for a person.
    #[default]
    Text,
    /// `{"ts":…,"level":…,"who":…,"msg":…}`: for a service manager or a
    /// log shipper.
    Json,
}

#[derive(Clone, Copy)]
struct Settings {
    format: Format,
    least: Level,
}

/// `--log-format`, `--log-level`, `--quiet`: set once, before the first line.
static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Sets the format and the least severe level kept; the first call wins.
pub fn configure(format: Format, least: Level) {
    let _ = SETTINGS.set(Settings { format, least });
}

fn settings() -> Settings {
    SETTINGS.get().copied().unwrap_or(Settings {
        format: Format::Text,
        least: Level::Info,
    })
}

/// Logs a line on stderr from a thread of its own: a stderr nobody reads
/// must never stall the node. Lines are dropped when the writer falls
/// behind.
pub fn say(message: &str) {
    say_as("node", message);
}

/// A warning of the node's (or the MCP client's): it carries on.
pub fn warn(message: &str) {
    warn_as("node", message);
}

/// An error of the node's: what it was asked to do failed, or it stops.
pub fn error(message: &str) {
    error_as("node", message);
}

/// The same, for another mode of the program (`bridge`, `chat`, `poll`).
pub fn say_as(who: &str, message: &str) {
    log_as(Level::Info, who, message);
}

/// A warning: something went wrong and the mode carries on.
pub fn warn_as(who: &str, message: &str) {
    log_as(Level::Warn, who, message);
}

/// An error: something the mode was asked to do failed.
pub fn error_as(who: &str, message: &str) {
    log_as(Level::Error, who, message);
}

/// Logs `message` at `level`, if that level is kept.
pub fn log_as(level: Level, who: &str, message: &str) {
    let settings = settings();
    if level > settings.least {
        return;
    }
    let _ = log().try_send(Log::Line(line(settings.format, level, who, message)));
}

/// A mode's last words before it exits (a usage error, a refusal): written
/// at once, on stderr, escaped as the log is, whatever the level kept.
pub fn tell(who: &str, message: &str) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(line(settings().format, Level::Error, who, message).as_bytes());
}

/// One JSON line; `msg` is escaped before it is serialized, as a text line is.
#[derive(serde::Serialize)]
struct Record<'a> {
    ts: u64,
    level: Level,
    who: &'a str,
    msg: &'a str,
}

fn line(format: Format, level: Level, who: &str, message: &str) -> String {
    let message = crate::shared::escape::line(message);
    match format {
        Format::Text => {
            let space = if who.is_empty() { "" } else { " " };
            format!("[clawbot_router{space}{who}] {message}\n")
        }
        Format::Json => {
            let record = Record {
                ts: crate::shared::clock::now_ms(),
                level,
                who: if who.is_empty() {
                    "clawbot_router"
                } else {
                    who
                },
                msg: &message,
            };
            serde_json::to_string(&record).expect("a record is plain data") + "\n"
        }
    }
}

/// Waits (briefly) until every line logged so far is written: the last
/// words before exiting matter most.
pub fn flush_log() {
    flush(log(), Duration::from_millis(1500));
}

/// Asks the writer behind `log` to report once it has written everything
/// before, and waits for that at most `wait`, in all.
fn flush(log: &std::sync::mpsc::SyncSender<Log>, wait: Duration) {
    use std::sync::mpsc::TrySendError;
    let until = std::time::Instant::now() + wait;
    let (done, flushed) = std::sync::mpsc::channel();
    // Not `send`: behind a stalled writer the queue stays full, and `send`
    // would wait for room forever.
    let mut ask = Log::Flush(done);
    loop {
        match log.try_send(ask) {
            Ok(()) => break,
            Err(TrySendError::Full(back)) if std::time::Instant::now() < until => {
                ask = back;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(_) => return,
        }
    }
    let _ = flushed.recv_timeout(until.saturating_duration_since(std::time::Instant::now()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_line_carries_its_fields_and_an_escaped_message() {
        let line = line(Format::Json, Level::Warn, "bridge", "a\u{1b}[2Jb\nforged");
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let record: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert!(record["ts"].as_u64().unwrap() > 0);
        assert_eq!(record["level"], "warn");
        assert_eq!(record["who"], "bridge");
        let msg = record["msg"].as_str().unwrap();
        assert!(!msg.contains('\u{1b}') && !msg.contains('\n'), "{msg:?}");
    }

    /// A stderr nobody reads stalls the writer, and the queue fills up
    /// behind it: the last flush before exiting must still give up in time,
    /// or the node (or a link) never exits on SIGTERM.
    #[test]
    fn a_flush_behind_a_full_queue_gives_up_in_time() {
        let (tx, _stalled) = std::sync::mpsc::sync_channel::<Log>(1);
        tx.send(Log::Line("queued\n".into())).unwrap();
        let (returned, in_time) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            flush(&tx, Duration::from_millis(200));
            let _ = returned.send(());
        });
        assert!(
            in_time.recv_timeout(Duration::from_secs(5)).is_ok(),
            "flush_log blocked behind a stalled writer"
        );
    }

    #[test]
    fn a_text_line_is_as_it_was() {
        assert_eq!(
            line(Format::Text, Level::Error, "poll", "stopping"),
            "[clawbot_router poll] stopping\n"
        );
        assert_eq!(
            line(Format::Text, Level::Info, "", "hi"),
            "[clawbot_router] hi\n"
        );
    }
}
