//! A running command's output, streamed to the gateway as it comes:
//! `node.invoke.progress {invokeId, nodeId, seq, chunk}` requests, the
//! way OpenClaw's node host streams its duplex commands. `seq` is
//! zero-based and gapless, a chunk is UTF-8 text of at most 16384 bytes
//! (the gateway refuses more), and an empty chunk after 5 s of silence
//! tells a listener the command is still alive. The invocation's one
//! `node.invoke.result` follows the last chunk.
//!
//! What it must never do: slow the command or crowd out the link. Output
//! is read from a tap that drops rather than waits (`runner/tap.rs`),
//! chunks are sent only while the outbox has room to spare for results
//! and events, at most `LIMIT` bytes are streamed per invocation (the
//! result carries the output's head and tail anyway), and what could not
//! be streamed is said in the stream. A cancelled invocation streams
//! nothing more.

use std::time::Duration;

use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::gateway::client::Outbox;
use crate::runner::{Tap, Tapped};

/// The gateway's limit on one chunk, in bytes.
pub const MAX_CHUNK: usize = 16384;
/// How long output may wait to be joined with more before it is sent.
const COALESCE: Duration = Duration::from_millis(200);
/// An empty chunk after this long without output, as OpenClaw's writer.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// Text streamed per invocation at most.
const LIMIT: usize = 4 << 20;
/// Text held while the outbox has no room to spare; more is dropped.
const BACKLOG: usize = 256 << 10;
/// Reads the tap holds for a stream that is behind.
const TAP_DEPTH: usize = 64;
/// Outbox frames kept free for results, events and the like.
const RESERVE: usize = 64;

/// What a stream sent, for the node's log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub chunks: u64,
    pub bytes: u64,
    /// Output bytes that were not streamed (the link was busy, or over
    /// `LIMIT`); the result still has its head and tail.
    pub skipped: u64,
}

/// Starts streaming for one invocation: the tap goes to the command, the
/// handle ends (with its summary) once the command's output is over and
/// everything that could be sent is queued, or at once on `cancel`.
pub fn start(
    outbox: Outbox,
    invoke_id: String,
    node_id: String,
    cancel: CancellationToken,
) -> (Tap, JoinHandle<Summary>) {
    let (tap, tapped) = Tap::channel(TAP_DEPTH);
    let sink = Sink {
        outbox,
        invoke_id,
        node_id,
        seq: 0,
        summary: Summary::default(),
    };
    (tap, tokio::spawn(stream(tapped, sink, cancel)))
}

struct Sink {
    outbox: Outbox,
    invoke_id: String,
    node_id: String,
    seq: u64,
    summary: Summary,
}

impl Sink {
    /// Queues one chunk, if the outbox can spare a frame beyond `reserve`.
    fn send(&mut self, chunk: &str, reserve: usize) -> bool {
        if self.outbox.room() <= reserve {
            return false;
        }
        let params = json!({
            "invokeId": self.invoke_id,
            "nodeId": self.node_id,
            "seq": self.seq,
            "chunk": chunk,
        });
        if self
            .outbox
            .request("node.invoke.progress", params)
            .is_none()
        {
            return false;
        }
        self.seq += 1;
        self.summary.chunks += 1;
        self.summary.bytes += chunk.len() as u64;
        true
    }
}

async fn stream(mut tapped: Tapped, mut sink: Sink, cancel: CancellationToken) -> Summary {
    let mut text = Text::default();
    // When pending text goes out (the first byte waits at most COALESCE).
    let mut flush_at: Option<Instant> = None;
    // Since when nothing was sent; armed once the program runs (the
    // runner's empty first offer), so no heartbeat goes out while a
    // human is still asked whether it may run.
    let mut quiet_since: Option<Instant> = None;
    let far = || Instant::now() + Duration::from_secs(3600);
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return sink.summary,
            bytes = tapped.recv() => {
                let Some(bytes) = bytes else { break };
                quiet_since.get_or_insert_with(Instant::now);
                if bytes.is_empty() {
                    continue; // the program started
                }
                text.note_lost(tapped.take_lost());
                text.push(&bytes);
                flush_at.get_or_insert_with(|| Instant::now() + COALESCE);
                if text.ready() >= MAX_CHUNK {
                    text.flush(&mut sink, false);
                    quiet_since = Some(Instant::now());
                    // What is left (less than a chunk) still goes out soon.
                    flush_at = (text.ready() > 0).then(|| Instant::now() + COALESCE);
                }
            }
            _ = sleep_until(flush_at.unwrap_or_else(far)), if flush_at.is_some() => {
                text.flush(&mut sink, true);
                quiet_since = Some(Instant::now());
                // Left only when the outbox had no room: try again soon.
                flush_at = (text.ready() > 0).then(|| Instant::now() + COALESCE);
            }
            _ = sleep_until(quiet_since.map_or_else(far, |q| q + HEARTBEAT)),
                if flush_at.is_none() && quiet_since.is_some() =>
            {
                sink.send("", RESERVE);
                quiet_since = Some(Instant::now());
            }
        }
    }
    text.note_lost(tapped.take_lost());
    text.finish();
    // The end: what is left goes out while a few frames stay free for
    // the event and the result that follow.
    text.flush(&mut sink, true);
    sink.summary.skipped = text.skipped;
    sink.summary
}

/// Output on its way to chunks: bytes decoded to text (a character cut
/// between two reads waits for its end; invalid bytes become U+FFFD),
/// held until sent, within `BACKLOG` and `LIMIT`.
#[derive(Default)]
struct Text {
    /// Bytes of an unfinished character.
    partial: Vec<u8>,
    pending: String,
    /// Text accepted for streaming so far.
    accepted: usize,
    skipped: u64,
    /// Bytes dropped since the stream last said so.
    gap: u64,
    /// The limit note went into the stream.
    capped: bool,
}

impl Text {
    fn push(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        // A character cut between two reads waits for its end (the
        // runner's capture finds that end the same way).
        let whole = self.partial.len() - crate::runner::incomplete_suffix_len(&self.partial);
        let decoded = String::from_utf8_lossy(&self.partial[..whole]).into_owned();
        self.partial.drain(..whole);
        self.accept(&decoded);
    }

    /// An unfinished character at the very end is invalid; a gap not
    /// yet told is told now.
    fn finish(&mut self) {
        if !self.partial.is_empty() {
            self.partial.clear();
            self.accept("\u{FFFD}");
        }
        self.tell_gap(true);
    }

    /// Bytes the tap dropped.
    fn note_lost(&mut self, bytes: u64) {
        if bytes > 0 && !self.capped {
            self.skipped += bytes;
            self.gap += bytes;
        }
    }

    /// Says how much output was skipped, once the backlog has room again
    /// (or at the end): one short note per gap, never one per read.
    fn tell_gap(&mut self, now: bool) {
        if self.gap > 0 && (now || self.pending.len() < BACKLOG) {
            let note = format!(
                "\n[clawbot_router] … {} bytes of output not streamed (the link was busy); the result has the head and tail …\n",
                self.gap
            );
            self.pending.push_str(&note);
            self.gap = 0;
        }
    }

    fn accept(&mut self, text: &str) {
        if self.capped {
            self.skipped += text.len() as u64;
            return;
        }
        self.tell_gap(false);
        let limit_room = LIMIT.saturating_sub(self.accepted);
        let backlog_room = BACKLOG.saturating_sub(self.pending.len());
        let room = limit_room.min(backlog_room);
        let take = floor_char_boundary(text, room);
        self.pending.push_str(&text[..take]);
        self.accepted += take;
        let dropped = text.len() - take;
        if dropped == 0 {
            return;
        }
        self.skipped += dropped as u64;
        // The limit, not the backlog, kept the text out (also when the
        // next character is wider than the bytes the limit leaves).
        if limit_room <= backlog_room {
            self.capped = true;
            self.tell_gap(true);
            self.pending.push_str(&format!(
                "\n[clawbot_router] … streamed {LIMIT} bytes; the rest of the output is in the result's head and tail …\n"
            ));
        } else {
            self.gap += dropped as u64;
        }
    }

    /// Bytes ready to go.
    fn ready(&self) -> usize {
        self.pending.len()
    }

    /// Sends full chunks (and, with `all`, the remainder); true when text
    /// is left because the outbox had no room.
    fn flush(&mut self, sink: &mut Sink, all: bool) -> bool {
        self.tell_gap(false);
        while !self.pending.is_empty() && (all || self.pending.len() >= MAX_CHUNK) {
            let cut = floor_char_boundary(&self.pending, MAX_CHUNK);
            if !sink.send(&self.pending[..cut], RESERVE) {
                return true;
            }
            self.pending.drain(..cut);
        }
        false
    }
}

/// The largest `n <= max` at which `text` can be cut.
fn floor_char_boundary(text: &str, max: usize) -> usize {
    if max >= text.len() {
        return text.len();
    }
    (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_cut_between_reads_are_joined_and_invalid_bytes_replaced() {
        let mut text = Text::default();
        let euro = "€".as_bytes();
        text.push(&[b'a', euro[0]]);
        assert_eq!(text.pending, "a");
        text.push(&[euro[1], euro[2], 0xff, b'b', euro[0]]);
        assert_eq!(text.pending, "a€\u{FFFD}b");
        text.finish();
        assert_eq!(text.pending, "a€\u{FFFD}b\u{FFFD}");
    }

    #[test]
    fn a_flood_is_held_within_the_backlog_and_says_what_it_skipped() {
        let mut text = Text::default();
        text.push(&vec![b'x'; BACKLOG + 10]);
        text.push(b"more");
        assert_eq!(text.pending, "x".repeat(BACKLOG), "held, not grown");
        text.finish();
        assert!(text.pending.ends_with("14 bytes of output not streamed (the link was busy); the result has the head and tail …\n"), "one note for the whole gap");
        assert_eq!(text.skipped, 14);
    }

    #[test]
    fn past_the_limit_the_stream_says_so_once_and_takes_no_more() {
        let mut text = Text::default();
        for _ in 0..(LIMIT / BACKLOG + 2) {
            text.push(&vec![b'y'; BACKLOG]);
            text.pending.clear(); // as if sent
        }
        assert!(text.capped);
        text.push(b"late");
        assert_eq!(text.pending, "");
        assert_eq!(text.skipped, 2 * BACKLOG as u64 + 4);
    }

    #[test]
    fn a_limit_that_no_character_fits_still_caps_the_stream() {
        let mut text = Text {
            accepted: LIMIT - 1,
            ..Text::default()
        };
        text.push("€".as_bytes());
        assert!(text.capped, "a three-byte character in one byte of room");
        assert!(
            text.pending
                .contains("the rest of the output is in the result")
        );
        let note = text.pending.clone();
        text.push("€€".as_bytes());
        assert_eq!(text.pending, note, "no note per read after the cap");
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let text = "ab€";
        assert_eq!(floor_char_boundary(text, 3), 2);
        assert_eq!(floor_char_boundary(text, 5), 5);
        assert_eq!(floor_char_boundary(text, 99), 5);
    }
}
