//! Bounded capture of a child's output: the first half of the budget is kept
//! as the head, the last half as a rolling tail, and everything between is
//! counted and dropped.
//!
//! Why head *and* tail: an agent's answer usually ends its output, while the
//! cause of a failure is usually near the start; the middle of a flood is the
//! least useful part. Memory is `limit` bytes whatever the child prints, and
//! the reader never stops draining, so a chatty child never blocks on a full
//! pipe.
//!
//! This module never decodes text until [`Capture::finish`]; invalid UTF-8 is
//! replaced there (U+FFFD), never a panic.

use std::collections::VecDeque;

/// Raw bytes as they arrive, within a byte budget.
#[derive(Debug)]
pub struct Capture {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

/// What a capture holds once the child is done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The start of the output (or all of it when nothing was dropped).
    pub head: String,
    /// Bytes dropped between head and tail; 0 when the output fitted.
    pub dropped: u64,
    /// The end of the output; empty when nothing was dropped.
    pub tail: String,
}

impl Capture {
    /// A capture that keeps at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        let head_cap = limit / 2;
        let tail_cap = limit - head_cap;
        Self {
            head_cap,
            tail_cap,
            head: Vec::with_capacity(head_cap.min(64 * 1024)),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let take = room.min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        if chunk.is_empty() {
            return;
        }
        if chunk.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend(&chunk[chunk.len() - self.tail_cap..chunk.len()]);
            return;
        }
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    /// A capture that keeps the first `limit` bytes whole (no tail), for
    /// output that is data rather than text: an archive is useless cut in
    /// the middle, so its caller refuses it once [`Capture::total`] passes
    /// `limit`.
    pub fn whole(limit: usize) -> Self {
        Self {
            head_cap: limit,
            tail_cap: 0,
            head: Vec::with_capacity(limit.min(64 * 1024)),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    /// The bytes kept, undecoded, and how many were seen in all.
    pub fn into_bytes(self) -> (Vec<u8>, u64) {
        (self.head, self.total)
    }

    /// Total bytes seen, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Decodes what was kept. When bytes were dropped, the cut points move to
    /// character boundaries so neither side starts or ends with half a
    /// character (those bytes count as dropped).
    pub fn finish(self) -> Captured {
        let mut head = self.head;
        let mut tail: Vec<u8> = self.tail.into();
        let kept = (head.len() + tail.len()) as u64;
        if kept == self.total {
            head.extend_from_slice(&tail);
            return Captured {
                head: String::from_utf8_lossy(&head).into_owned(),
                dropped: 0,
                tail: String::new(),
            };
        }
        head.truncate(head.len() - incomplete_suffix_len(&head));
        let skip = continuation_prefix_len(&tail);
        tail.drain(..skip);
        Captured {
            dropped: self.total - (head.len() + tail.len()) as u64,
            head: String::from_utf8_lossy(&head).into_owned(),
            tail: String::from_utf8_lossy(&tail).into_owned(),
        }
    }
}

impl Captured {
    pub fn truncated(&self) -> bool {
        self.dropped > 0
    }

    /// Head, then `marker` on a line of its own, then tail; or just the text
    /// when nothing was dropped.
    pub fn join(&self, marker: impl FnOnce(u64) -> String) -> String {
        if !self.truncated() {
            return self.head.clone();
        }
        let mut out = String::with_capacity(self.head.len() + self.tail.len() + 128);
        out.push_str(&self.head);
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&marker(self.dropped));
        out.push('\n');
        out.push_str(&self.tail);
        out
    }
}

/// Length of a UTF-8 sequence cut short at the end of `bytes` (0 if none).
pub fn incomplete_suffix_len(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // continuation byte: keep looking for the lead
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

/// Continuation bytes at the start of `bytes` (the rest of a character whose
/// lead byte was dropped), at most 3.
fn continuation_prefix_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| *b & 0b1100_0000 == 0b1000_0000)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(limit: usize, chunks: &[&[u8]]) -> Captured {
        let mut c = Capture::new(limit);
        for chunk in chunks {
            c.push(chunk);
        }
        c.finish()
    }

    #[test]
    fn output_within_the_limit_is_kept_whole() {
        let got = capture(16, &[b"hello ", b"world"]);
        assert_eq!(got.head, "hello world");
        assert_eq!(got.dropped, 0);
        assert!(!got.truncated());
        assert_eq!(got.join(|_| unreachable!()), "hello world");
    }

    #[test]
    fn output_exactly_at_the_limit_is_not_truncated() {
        let got = capture(10, &[b"0123456789"]);
        assert_eq!(got.head, "0123456789");
        assert_eq!(got.dropped, 0);
    }

    #[test]
    fn the_middle_is_dropped_and_counted() {
        let got = capture(8, &[b"abcd", b"XXXXXXXXXX", b"wxyz"]);
        assert_eq!(got.head, "abcd");
        assert_eq!(got.tail, "wxyz");
        assert_eq!(got.dropped, 10);
        assert_eq!(got.join(|n| format!("[cut {n}]")), "abcd\n[cut 10]\nwxyz");
    }

    #[test]
    fn the_tail_rolls_across_many_small_chunks() {
        let mut c = Capture::new(6);
        for i in 0..1000u32 {
            c.push(format!("{}", i % 10).as_bytes());
        }
        assert_eq!(c.total(), 1000);
        let got = c.finish();
        assert_eq!(got.head, "012");
        assert_eq!(got.tail, "789");
        assert_eq!(got.dropped, 994);
    }

    #[test]
    fn a_chunk_larger_than_the_tail_keeps_its_end() {
        let got = capture(4, &[b"ab", b"0123456789"]);
        assert_eq!(got.head, "ab");
        assert_eq!(got.tail, "89");
        assert_eq!(got.dropped, 8);
    }

    #[test]
    fn cuts_move_to_character_boundaries() {
        // "é" is 2 bytes, "中" is 3: the head budget (3) ends inside "中",
        // and the tail budget (3) starts inside "文".
        let text = "a中bbbbbbbbbb文z";
        let got = capture(6, &[text.as_bytes()]);
        assert_eq!(got.head, "a");
        assert_eq!(got.tail, "z");
        assert_eq!(got.dropped as usize, text.len() - 2);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let got = capture(64, &[b"ok \xff\xfe done"]);
        assert_eq!(got.head, "ok \u{fffd}\u{fffd} done");
    }

    #[test]
    fn a_character_split_across_reads_survives() {
        let bytes = "中".as_bytes();
        let got = capture(64, &[&bytes[..1], &bytes[1..]]);
        assert_eq!(got.head, "中");
    }

    #[test]
    fn zero_limit_keeps_nothing_but_counts() {
        let got = capture(0, &[b"abc"]);
        assert_eq!(got.dropped, 3);
        assert_eq!(got.join(|n| format!("<{n}>")), "<3>\n");
    }
}
