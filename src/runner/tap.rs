//! A live copy of a run's output, for callers that stream it while the
//! run goes on (the node's `node.invoke.progress`).
//!
//! Why it may lose bytes: the readers must never stop draining the pipes
//! (a child blocked on a full pipe would stall, and the deadline would be
//! the only way out), so a tap never waits for its reader. When the
//! reader falls behind by more than the channel holds, the copy drops
//! what does not fit and counts it; the capture (head and tail) is not
//! affected.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

/// The sending side, handed to [`super::Spec::tap`].
#[derive(Debug, Clone)]
pub struct Tap {
    tx: mpsc::Sender<Vec<u8>>,
    lost: Arc<AtomicU64>,
}

/// The receiving side: the output's bytes in the order they were read
/// (stdout and stderr interleaved as read when they have pipes of their
/// own), after an empty first read that says the program started. Ends
/// once the run is over and every copy of the tap is gone.
#[derive(Debug)]
pub struct Tapped {
    rx: mpsc::Receiver<Vec<u8>>,
    lost: Arc<AtomicU64>,
}

impl Tap {
    /// A tap holding at most `depth` reads (up to 64 KiB each) that its
    /// reader has not taken yet.
    pub fn channel(depth: usize) -> (Tap, Tapped) {
        let (tx, rx) = mpsc::channel(depth.max(1));
        let lost = Arc::new(AtomicU64::new(0));
        (
            Tap {
                tx,
                lost: Arc::clone(&lost),
            },
            Tapped { rx, lost },
        )
    }

    /// Copies `bytes` without waiting; counts them as lost when the reader
    /// is behind. A reader that went away costs nothing.
    pub fn offer(&self, bytes: &[u8]) {
        if let Err(mpsc::error::TrySendError::Full(dropped)) = self.tx.try_send(bytes.to_vec()) {
            self.lost.fetch_add(dropped.len() as u64, Ordering::Relaxed);
        }
    }
}

impl Tapped {
    /// The next bytes read; `None` once the run is over.
    pub async fn recv(&mut self) -> Option<Vec<u8>> {
        self.rx.recv().await
    }

    /// Bytes dropped since the last call because the reader was behind.
    pub fn take_lost(&self) -> u64 {
        self.lost.swap(0, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_slow_reader_loses_bytes_and_learns_how_many() {
        let (tap, mut tapped) = Tap::channel(2);
        tap.offer(b"one");
        tap.offer(b"two");
        tap.offer(b"three");
        drop(tap);
        assert_eq!(tapped.recv().await.unwrap(), b"one");
        assert_eq!(tapped.recv().await.unwrap(), b"two");
        assert_eq!(tapped.recv().await, None);
        assert_eq!(tapped.take_lost(), 5);
        assert_eq!(tapped.take_lost(), 0);
    }

    #[tokio::test]
    async fn a_reader_that_left_costs_nothing() {
        let (tap, tapped) = Tap::channel(1);
        drop(tapped);
        tap.offer(b"nobody listens");
    }
}
