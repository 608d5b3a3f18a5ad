//! Replay memory: the request ids a link has taken to run (`poll`'s
//! command ids, `chat`'s `tool.request` ids), so that a service offering
//! one again — a redelivered command, a replayed turn, or the same offer
//! after a restart of ours — never has it run twice.
//!
//! Bounded by time, not by a count: an id is kept for [`KEEP`] after it was
//! last seen, so a flood of new ids cannot push an old one out the way a
//! count-bounded FIFO did. Memory is still bounded — by [`CAP`] ids — and
//! when the cap is reached NEW ids are refused (not run), never old ones
//! forgotten: forgetting would let the flooding service re-offer an old id
//! and have it run again, while refusing only withholds work from the very
//! service that sent more than [`CAP`] requests within [`KEEP`] (the ids all
//! come from it). An id is recorded, on disk, BEFORE its run begins: a
//! crash at any point leaves at worst a recorded id whose run never
//! happened, never a run that is not recorded.
//!
//! On disk, in the state directory, one file per link and service
//! (`replay/poll-<hash of the service>`), mode 0600: a header line, then
//! one line per id — the first 16 bytes of its SHA-256 in hex (the file
//! holds nothing the service wrote) and when it was last seen. New ids are
//! appended (one `write`, then `fdatasync`); the file is rewritten whole —
//! a temporary file renamed over it — when it is opened and whenever stale
//! lines outnumber the live ones. A file that cannot be read or parsed
//! stops the link (fail closed): ids it held could otherwise run again.
//! Only a torn LAST line (a crash in the middle of an append) is dropped,
//! because its run had not begun. A lock file keeps a second process off
//! the same memory.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::shared::hex::hex;

/// How long an id is kept after it was last seen.
pub const KEEP: Duration = Duration::from_secs(24 * 3600);
/// The most ids kept at once (about 4 MiB of memory, 5 MiB of file).
pub const CAP: usize = 100_000;
/// A re-offer refreshes "last seen" on disk only when the copy there is
/// this much older (in memory always): a service re-offering an id on
/// every heartbeat costs no write, and an id is still kept at least
/// `KEEP - REFRESH` after it was last seen, across restarts too.
const REFRESH: Duration = Duration::from_secs(3600);
/// Expired ids are dropped at most this often.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
const HEADER: &str = "clawbot_router replay memory v1";

/// What [`Replay::admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Never seen: now recorded (on disk), so it may run — once.
    New,
    /// Seen before: it must not run again.
    Again,
    /// [`CAP`] ids are kept and none has expired: a new id is not taken.
    /// `first` is true for the first refusal since the memory was last
    /// below its cap (say it once).
    Full { first: bool },
}

/// One link's replay memory; shared by its tasks.
pub struct Replay {
    path: PathBuf,
    inner: Mutex<Inner>,
}

struct Inner {
    /// Id hash → last seen, and what the file says about it (ms).
    ids: HashMap<[u8; 16], Seen>,
    journal: Option<File>,
    /// Lines in the file past its header.
    lines: usize,
    pruned_at: u64,
    full: bool,
    keep_ms: u64,
    cap: usize,
    /// Held (locked) while the memory is open.
    _lock: File,
}

#[derive(Clone, Copy)]
struct Seen {
    last: u64,
    written: u64,
}

impl Replay {
    /// The replay memory of `link` for `scope` (the service it talks to),
    /// in `state_dir`. Err: damaged, unreadable, or held by another
    /// process — the link must not start.
    pub fn open(state_dir: &Path, link: &str, scope: &str) -> Result<Self, String> {
        let name = format!("{link}-{}", &hex(&Sha256::digest(scope.as_bytes()))[..16]);
        Self::open_at(
            &state_dir.join("replay").join(name),
            KEEP,
            CAP,
            crate::shared::clock::now_ms(),
        )
    }

    fn open_at(path: &Path, keep: Duration, cap: usize, now: u64) -> Result<Self, String> {
        let dir = path.parent().unwrap_or(Path::new("."));
        crate::shared::paths::create_private_dir(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let lock_path = path.with_extension("lock");
        let lock = private_options()
            .write(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(format!(
                    "another process uses the replay memory {} (a second link for the same service on this state directory?): give each its own --state-dir",
                    path.display()
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(format!("cannot lock {}: {e}", lock_path.display()));
            }
        }
        let keep_ms = keep.as_millis() as u64;
        let ids = match std::fs::read(path) {
            Ok(bytes) => parse(&bytes, now, keep_ms).map_err(|why| {
                format!(
                    "the replay memory {} is damaged ({why}); refusing to start, since the requests it remembers could run a second time. Move it away to start anyway, accepting that risk",
                    path.display()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(e) => {
                return Err(format!(
                    "cannot read the replay memory {} ({e}); refusing to start, since the requests it remembers could run a second time",
                    path.display()
                ));
            }
        };
        let replay = Self {
            path: path.to_owned(),
            inner: Mutex::new(Inner {
                ids,
                journal: None,
                lines: 0,
                pruned_at: now,
                full: false,
                keep_ms,
                cap,
                _lock: lock,
            }),
        };
        replay
            .inner
            .lock()
            .unwrap()
            .rewrite(&replay.path)
            .map_err(|e| format!("cannot write {}: {e}", replay.path.display()))?;
        Ok(replay)
    }

    #[cfg(test)]
    fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `id` was seen before (and, if so, it is seen now: kept
    /// [`KEEP`] from now).
    pub fn seen(&self, id: &str) -> bool {
        self.seen_at(id, crate::shared::clock::now_ms())
    }

    fn seen_at(&self, id: &str, now: u64) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let key = key(id);
        let keep = inner.keep_ms;
        let Some(seen) = inner.ids.get_mut(&key) else {
            return false;
        };
        if seen.last.saturating_add(keep) <= now {
            // Expired, not yet pruned.
            inner.ids.remove(&key);
            return false;
        }
        seen.last = seen.last.max(now);
        let refresh = now.saturating_sub(seen.written) >= REFRESH.as_millis() as u64;
        if refresh {
            // A lost refresh only shortens how long the id is kept after a
            // restart by up to REFRESH; the in-memory copy stays.
            let _ = inner.append(&self.path, &key, now);
        }
        true
    }

    /// Records `id` before it runs: [`Admit::New`] once it is on disk.
    /// Err: it could not be recorded, so it must not run.
    pub fn admit(&self, id: &str) -> Result<Admit, String> {
        self.admit_at(id, crate::shared::clock::now_ms())
    }

    fn admit_at(&self, id: &str, now: u64) -> Result<Admit, String> {
        if self.seen_at(id, now) {
            return Ok(Admit::Again);
        }
        let mut inner = self.inner.lock().unwrap();
        let key = key(id);
        // Another thread may have recorded it since it was looked for.
        if inner.ids.contains_key(&key) {
            return Ok(Admit::Again);
        }
        let every = PRUNE_EVERY.as_millis() as u64;
        let at_cap = inner.ids.len() >= inner.cap;
        // At the cap, expired ids make room: looked for at most once a second.
        let since = now.saturating_sub(inner.pruned_at);
        if since >= every || (at_cap && since >= 1000) {
            inner.prune(now);
        }
        if inner.ids.len() >= inner.cap {
            let first = !inner.full;
            inner.full = true;
            return Ok(Admit::Full { first });
        }
        inner.full = false;
        inner
            .append(&self.path, &key, now)
            .map_err(|e| format!("cannot record it in {}: {e}", self.path.display()))?;
        inner.ids.insert(
            key,
            Seen {
                last: now,
                written: now,
            },
        );
        // Stale lines (refreshes, expired ids) past the live ones: compact.
        if inner.lines > 2 * inner.ids.len() + 1024 {
            let _ = inner.rewrite(&self.path);
        }
        Ok(Admit::New)
    }

    /// Ids kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap().ids.len()
    }
}

impl Inner {
    fn prune(&mut self, now: u64) {
        let keep = self.keep_ms;
        self.ids
            .retain(|_, seen| seen.last.saturating_add(keep) > now);
        self.pruned_at = now;
    }

    /// One line, appended and flushed to the disk; `written` updated.
    fn append(&mut self, path: &Path, key: &[u8; 16], now: u64) -> std::io::Result<()> {
        if self.journal.is_none() {
            self.journal = Some(private_options().append(true).open(path)?);
        }
        let journal = self.journal.as_mut().expect("opened above");
        journal.write_all(format!("{} {now}\n", hex(key)).as_bytes())?;
        journal.sync_data()?;
        self.lines += 1;
        if let Some(seen) = self.ids.get_mut(key) {
            seen.written = now;
        }
        Ok(())
    }

    /// The live ids only, written aside and renamed over the file.
    fn rewrite(&mut self, path: &Path) -> std::io::Result<()> {
        let mut text = String::with_capacity(HEADER.len() + 1 + self.ids.len() * 48);
        text.push_str(HEADER);
        text.push('\n');
        for (key, seen) in &mut self.ids {
            text.push_str(&format!("{} {}\n", hex(key), seen.last));
            seen.written = seen.last;
        }
        // Closed first: Windows renames over an open file only sometimes.
        self.journal = None;
        crate::shared::paths::write_private(path, text.as_bytes())?;
        self.lines = self.ids.len();
        Ok(())
    }
}

/// The file's ids still within `keep_ms` of `now`; Err names the line
/// that is not ours.
fn parse(bytes: &[u8], now: u64, keep_ms: u64) -> Result<HashMap<[u8; 16], Seen>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "it is not text".to_owned())?;
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end_matches('\n') == HEADER => {}
        _ => return Err(format!("its first line is not {HEADER:?}")),
    }
    let mut ids = HashMap::new();
    for (n, line) in lines.enumerate() {
        let Some(line) = line.strip_suffix('\n') else {
            // A torn append: its run had not begun.
            break;
        };
        let entry = line.split_once(' ').and_then(|(hash, ms)| {
            let key = unhex(hash)?;
            let ms = ms
                .parse::<u64>()
                .ok()
                .filter(|_| ms.bytes().all(|b| b.is_ascii_digit()))?;
            Some((key, ms))
        });
        let Some((key, last)) = entry else {
            return Err(format!("line {} is not an id and a time", n + 2));
        };
        if last.saturating_add(keep_ms) <= now {
            continue;
        }
        let seen = ids.entry(key).or_insert(Seen {
            last,
            written: last,
        });
        seen.last = seen.last.max(last);
        seen.written = seen.last;
    }
    Ok(ids)
}

fn key(id: &str) -> [u8; 16] {
    let digest = Sha256::digest(id.as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

fn unhex(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 {
        return None;
    }
    let mut key = [0u8; 16];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(key)
}

fn private_options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3600 * 1000;

    fn open(dir: &Path, now: u64) -> Result<Replay, String> {
        Replay::open_at(&dir.join("replay/poll-x"), KEEP, 50, now)
    }

    #[test]
    fn an_id_is_new_once_then_seen_again() {
        let dir = tempfile::tempdir().unwrap();
        let replay = open(dir.path(), 1000).unwrap();
        assert_eq!(replay.admit_at("cmd-1", 1000), Ok(Admit::New));
        assert_eq!(replay.admit_at("cmd-1", 2000), Ok(Admit::Again));
        assert!(replay.seen_at("cmd-1", 3000));
        assert!(!replay.seen_at("cmd-2", 3000));
    }

    #[test]
    fn a_flood_past_the_cap_refuses_new_ids_and_never_forgets_an_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let replay = open(dir.path(), 0).unwrap();
        assert_eq!(replay.admit_at("first", 0), Ok(Admit::New));
        for i in 0..49 {
            assert_eq!(replay.admit_at(&format!("flood{i}"), 1), Ok(Admit::New));
        }
        assert_eq!(
            replay.admit_at("one-more", 2),
            Ok(Admit::Full { first: true })
        );
        assert_eq!(
            replay.admit_at("and-more", 3),
            Ok(Admit::Full { first: false })
        );
        assert_eq!(replay.admit_at("first", 4), Ok(Admit::Again));
        assert_eq!(replay.len(), 50);
        // Once the old ids expire there is room again.
        let later = KEEP.as_millis() as u64 + 10;
        assert_eq!(replay.admit_at("one-more", later), Ok(Admit::New));
        assert_eq!(replay.len(), 1);
    }

    #[test]
    fn ids_are_kept_for_the_time_after_they_were_last_seen() {
        let dir = tempfile::tempdir().unwrap();
        let replay = open(dir.path(), 0).unwrap();
        assert_eq!(replay.admit_at("old", 0), Ok(Admit::New));
        assert_eq!(replay.admit_at("offered-again", 0), Ok(Admit::New));
        // Re-offered at 20 h: kept until 44 h.
        assert!(replay.seen_at("offered-again", 20 * HOUR));
        assert_eq!(replay.admit_at("new", 25 * HOUR), Ok(Admit::New));
        assert_eq!(replay.admit_at("old", 25 * HOUR), Ok(Admit::New));
        assert_eq!(
            replay.admit_at("offered-again", 25 * HOUR),
            Ok(Admit::Again)
        );
        // And across a restart: the refresh reached the file.
        drop(replay);
        let replay = open(dir.path(), 30 * HOUR).unwrap();
        assert!(replay.seen_at("offered-again", 30 * HOUR));
        drop(replay);
        // Last seen at 30 h: gone at 54 h.
        let replay = open(dir.path(), 53 * HOUR).unwrap();
        assert!(replay.seen_at("offered-again", 53 * HOUR));
        drop(replay);
        let replay = open(dir.path(), 78 * HOUR).unwrap();
        assert!(!replay.seen_at("offered-again", 78 * HOUR));
    }

    #[test]
    fn the_memory_survives_a_restart_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let replay = open(dir.path(), 1000).unwrap();
        assert_eq!(replay.admit_at("ran-before", 1000), Ok(Admit::New));
        let path = replay.path().to_owned();
        drop(replay);
        let replay = open(dir.path(), 2000).unwrap();
        assert_eq!(replay.admit_at("ran-before", 2000), Ok(Admit::Again));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(HEADER), "{text}");
        assert!(!text.contains("ran-before"), "only hashes: {text}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_second_process_cannot_share_the_memory() {
        let dir = tempfile::tempdir().unwrap();
        let _first = open(dir.path(), 0).unwrap();
        let second = open(dir.path(), 0).err().unwrap();
        assert!(second.contains("another process"), "{second}");
    }

    #[test]
    fn a_damaged_file_stops_the_link_but_a_torn_last_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let replay = open(dir.path(), 0).unwrap();
        assert_eq!(replay.admit_at("kept", 0), Ok(Admit::New));
        let path = replay.path().to_owned();
        drop(replay);
        let whole = std::fs::read_to_string(&path).unwrap();
        // A crash in the middle of an append.
        std::fs::write(&path, format!("{whole}0123abc")).unwrap();
        let replay = open(dir.path(), 1).unwrap();
        assert!(replay.seen_at("kept", 1));
        drop(replay);
        for damage in [
            format!("{whole}not an id\n"),
            format!("{whole}{} soon\n", "ab".repeat(16)),
            whole.replace(HEADER, "something else"),
            String::new(),
            "\u{0}\u{1}".into(),
        ] {
            std::fs::write(&path, &damage).unwrap();
            let why = open(dir.path(), 1).err().unwrap();
            assert!(why.contains("is damaged"), "{damage:?}: {why}");
            assert!(why.contains(&path.display().to_string()), "{why}");
        }
    }

    #[test]
    fn stale_lines_are_compacted_away() {
        let dir = tempfile::tempdir().unwrap();
        let replay = Replay::open_at(&dir.path().join("r"), KEEP, 100_000, 0).unwrap();
        for i in 0..1500u64 {
            // Each expires before the next is admitted: the file must not
            // keep them all.
            let now = i * (KEEP.as_millis() as u64 / 10);
            assert_eq!(replay.admit_at(&format!("id{i}"), now), Ok(Admit::New));
        }
        let lines = std::fs::read_to_string(replay.path())
            .unwrap()
            .lines()
            .count();
        assert!(lines < 1100, "{lines} lines kept");
    }
}
