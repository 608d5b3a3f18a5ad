//! Connections that have not proven the token yet ("strangers"): anyone
//! who can reach the port. Until its `hello` is accepted (or its upgrade
//! request carried the token, as `bridge send`'s does), a connection may
//! send at most [`PRE_HELLO_BYTES`] in all — upgrade request and frames
//! together, where a hello takes a few hundred — and at most
//! [`MAX_STRANGERS`] may wait at once. A newcomer past that closes the
//! OLDEST stranger rather than being refused: refusing would let whoever
//! holds the slots (reopening each as it times out) lock the real client
//! out for good, while closing the oldest costs a real client nothing — it
//! says hello within milliseconds of connecting, so it is never the
//! oldest unless the flood outpaces its own round trip. Bound connections
//! keep the full frame limit. What a stranger costs is therefore bounded
//! (its bytes, its buffers) and returned when it goes.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

/// Bytes a connection may send before its hello is accepted.
pub const PRE_HELLO_BYTES: usize = 8 << 10;
/// Connections that may wait for their hello at once.
pub const MAX_STRANGERS: usize = 64;
/// Closing the oldest is said at most this often (with a count).
const TELL_EVERY: Duration = Duration::from_secs(60);

/// How much a connection has read while it was a stranger, and whether it
/// is one still.
#[derive(Default)]
pub struct Budget {
    trusted: AtomicBool,
    read: AtomicUsize,
}

impl Budget {
    /// The token is proven: the connection reads without a budget now.
    pub fn trust(&self) {
        self.trusted.store(true, Ordering::Release);
    }

    pub fn trusted(&self) -> bool {
        self.trusted.load(Ordering::Acquire)
    }

    /// Whether `error` (from the connection) is this budget running out.
    pub fn spent(error: &io::Error) -> bool {
        error.get_ref().is_some_and(|inner| inner.is::<Spent>())
    }
}

/// The error a stranger's read ends with past its budget.
#[derive(Debug)]
struct Spent;

impl std::fmt::Display for Spent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "more than {PRE_HELLO_BYTES} bytes before hello")
    }
}

impl std::error::Error for Spent {}

/// A stream whose reads are counted against a [`Budget`] while its
/// connection is a stranger: reads never take more than is left, and one
/// past the end fails with [`Spent`]. Writes pass through.
pub struct Metered<S> {
    inner: S,
    budget: Arc<Budget>,
}

impl<S> Metered<S> {
    pub fn new(inner: S, budget: Arc<Budget>) -> Self {
        Self { inner, budget }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.budget.trusted() {
            return Pin::new(&mut self.inner).poll_read(cx, buf);
        }
        let left = PRE_HELLO_BYTES.saturating_sub(self.budget.read.load(Ordering::Acquire));
        if left == 0 {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, Spent)));
        }
        // Read into a buffer no larger than what is left, so bytes past
        // the budget stay in the socket (the kernel's, not ours).
        let mut room = [0u8; PRE_HELLO_BYTES];
        let room = &mut room[..left.min(buf.remaining())];
        let mut small = ReadBuf::new(room);
        let polled = Pin::new(&mut self.inner).poll_read(cx, &mut small);
        if let Poll::Ready(Ok(())) = polled {
            let got = small.filled();
            self.budget.read.fetch_add(got.len(), Ordering::AcqRel);
            buf.put_slice(got);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The strangers waiting for their hello, oldest first.
pub struct Strangers {
    waiting: Mutex<Waiting>,
}

struct Waiting {
    queue: VecDeque<(u64, CancellationToken)>,
    next: u64,
    /// Strangers closed since it was last said, and when that was.
    closed: usize,
    told: Option<Instant>,
}

/// One waiting stranger's place; leaving it (a hello, or the end of the
/// connection) frees it.
pub struct Stranger {
    strangers: Arc<Strangers>,
    id: u64,
    /// Cancelled when a newcomer needs the place.
    pub evicted: CancellationToken,
}

impl Strangers {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            waiting: Mutex::new(Waiting {
                queue: VecDeque::new(),
                next: 0,
                closed: 0,
                told: None,
            }),
        })
    }

    /// A place for a new connection, closing the oldest stranger when all
    /// [`MAX_STRANGERS`] are taken.
    pub fn admit(self: &Arc<Self>) -> Stranger {
        let evicted = CancellationToken::new();
        let mut waiting = self.waiting.lock().unwrap();
        if waiting.queue.len() >= MAX_STRANGERS
            && let Some((_, oldest)) = waiting.queue.pop_front()
        {
            oldest.cancel();
            waiting.closed += 1;
            if waiting.told.is_none_or(|at| at.elapsed() >= TELL_EVERY) {
                super::say(&format!(
                    "{MAX_STRANGERS} connections are waiting to say hello: the oldest is closed for each newcomer ({} closed since the last such line)",
                    waiting.closed
                ));
                waiting.told = Some(Instant::now());
                waiting.closed = 0;
            }
        }
        let id = waiting.next;
        waiting.next += 1;
        waiting.queue.push_back((id, evicted.clone()));
        Stranger {
            strangers: Arc::clone(self),
            id,
            evicted,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.waiting.lock().unwrap().queue.len()
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let mut waiting = self.strangers.waiting.lock().unwrap();
        waiting.queue.retain(|(id, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn a_newcomer_past_the_limit_closes_the_oldest_stranger() {
        let strangers = Strangers::new();
        let mut places: Vec<Stranger> = (0..MAX_STRANGERS).map(|_| strangers.admit()).collect();
        assert!(places.iter().all(|p| !p.evicted.is_cancelled()));
        let newcomer = strangers.admit();
        assert!(places[0].evicted.is_cancelled());
        assert!(places[1..].iter().all(|p| !p.evicted.is_cancelled()));
        assert_eq!(strangers.len(), MAX_STRANGERS);
        // Leaving (a hello) frees a place: the next newcomer closes no one.
        places.remove(5);
        drop(strangers.admit());
        assert!(!places[1].evicted.is_cancelled());
        drop(places);
        drop(newcomer);
        assert_eq!(strangers.len(), 0);
    }

    #[tokio::test]
    async fn a_stranger_reads_its_budget_and_no_more_until_trusted() {
        let (mut peer, ours) = tokio::io::duplex(1 << 20);
        let budget = Arc::new(Budget::default());
        let mut metered = Metered::new(ours, Arc::clone(&budget));
        peer.write_all(&vec![b'x'; PRE_HELLO_BYTES + 100])
            .await
            .unwrap();
        let mut got = vec![0u8; PRE_HELLO_BYTES];
        metered.read_exact(&mut got).await.unwrap();
        let mut more = [0u8; 1];
        let spent = metered.read(&mut more).await.unwrap_err();
        assert!(Budget::spent(&spent), "{spent}");
        // Trusted (a hello accepted): the rest is read.
        budget.trust();
        let mut rest = vec![0u8; 100];
        metered.read_exact(&mut rest).await.unwrap();
    }
}
