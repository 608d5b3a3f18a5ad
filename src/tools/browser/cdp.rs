//! Our own thin Chrome DevTools Protocol client: JSON messages, each ended
//! by a NUL byte, over the pipe pair Chromium's `--remote-debugging-pipe`
//! reads and writes (any byte stream will do, so tests speak it over an
//! in-memory pipe), or one a WebSocket frame each, to a browser the node
//! owner told us to attach to. Commands carry an id and are answered
//! once; events are handed to the owner's hook as they arrive, in order.
//!
//! Why not a crate: `chromiumoxide` generates ~30 MB of protocol bindings
//! (minutes of build on two cores) and speaks only WebSocket, so the
//! browser would need a debugging port any local program can reach. What
//! the routes need is ~40 commands with JSON in and out: this file.
//!
//! Must never grow without bound on what a browser sends (a message over
//! [`MAX_MESSAGE`] is dropped, and fails its command when its id can be
//! read), never hang a caller (every call has a deadline, and a closed
//! pipe fails every call in flight), and never panic on malformed JSON.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// A DevTools WebSocket (an attached browser's).
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The largest message read whole (a full-page screenshot is a few MiB of
/// base64; our file limits stop far below this).
pub const MAX_MESSAGE: usize = 48 << 20;
/// Commands queued for the browser at most.
const QUEUE: usize = 1024;

/// One event from the browser.
#[derive(Debug, Clone)]
pub struct Event {
    pub method: String,
    pub params: Value,
    /// The session (attached target) it came from; none for the browser.
    pub session: Option<String>,
}

/// Why a command did not answer.
#[derive(Debug, Clone, PartialEq)]
pub enum CdpError {
    /// The browser answered with an error.
    Protocol(String),
    /// No answer within the deadline.
    Timeout(&'static str),
    /// The connection is gone (the browser exited or crashed).
    Closed,
}

impl std::fmt::Display for CdpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CdpError::Protocol(m) => write!(f, "{m}"),
            CdpError::Timeout(method) => write!(f, "the browser did not answer {method} in time"),
            CdpError::Closed => write!(f, "the browser closed its DevTools connection"),
        }
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, CdpError>>>>>;

/// A connection to one browser.
pub struct Cdp {
    out: mpsc::Sender<Vec<u8>>,
    pending: Pending,
    next: AtomicU64,
    events: broadcast::Sender<Arc<Event>>,
    closed: CancellationToken,
}

/// What the owner does with each event, in the reader's task (it must not
/// block; it may [`Cdp::send`]).
pub type Hook = Box<dyn Fn(&Arc<Cdp>, &Arc<Event>) + Send + Sync>;

impl Cdp {
    /// Starts the reader and writer over a byte stream pair.
    pub fn start<R, W>(reader: R, writer: W, hook: Hook) -> Arc<Self>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::run(
            Source::Pipe(Box::new(reader), Framer::default()),
            Sink::Pipe(Box::new(writer)),
            hook,
        )
    }

    /// Starts them over a DevTools WebSocket (its own limit on a message
    /// set where it was opened: one past it closes the connection).
    pub fn start_socket(socket: Socket, hook: Hook) -> Arc<Self> {
        let (sink, source) = socket.split();
        Self::run(Source::Socket(source), Sink::Socket(sink), hook)
    }

    fn run(reader: Source, writer: Sink, hook: Hook) -> Arc<Self> {
        let (out, queue) = mpsc::channel(QUEUE);
        let cdp = Arc::new(Self {
            out,
            pending: Arc::default(),
            next: AtomicU64::new(1),
            events: broadcast::channel(256).0,
            closed: CancellationToken::new(),
        });
        tokio::spawn(write_loop(writer, queue, cdp.closed.clone()));
        let weak = Arc::downgrade(&cdp);
        let pending = Arc::clone(&cdp.pending);
        let closed = cdp.closed.clone();
        tokio::spawn(async move {
            read_loop(reader, &weak, &pending, &hook, &closed).await;
            closed.cancel();
            // Every call in flight learns it at once.
            let waiting: Vec<_> = pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain()
                .collect();
            for (_, tx) in waiting {
                let _ = tx.send(Err(CdpError::Closed));
            }
        });
        cdp
    }

    /// Lets go of the browser: every call fails from now on.
    pub fn close(&self) {
        self.closed.cancel();
    }

    /// Whether the connection is gone.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Events from now on (a slow listener loses the oldest).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// One command, answered within `deadline`.
    pub async fn call(
        &self,
        session: Option<&str>,
        method: &'static str,
        params: Value,
        deadline: Duration,
    ) -> Result<Value, CdpError> {
        if self.is_closed() {
            return Err(CdpError::Closed);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        // However the call ends (answered, timed out, or its caller gone
        // mid-wait), its entry goes.
        struct Forget<'a>(&'a Cdp, u64);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0.lock().remove(&self.1);
            }
        }
        let _forget = Forget(self, id);
        let message = encode(id, session, method, params);
        let answer = tokio::time::timeout(deadline, async {
            if self.out.send(message).await.is_err() {
                return Err(CdpError::Closed);
            }
            rx.await.unwrap_or(Err(CdpError::Closed))
        })
        .await;
        answer.unwrap_or(Err(CdpError::Timeout(method)))
    }

    /// A command whose answer nobody waits for (a paused request's
    /// verdict, a download's cancel, sent from the event hook). Never
    /// dropped unseen: a browser that lets [`QUEUE`] commands pile up
    /// unread is cut off (the next call starts a new one), rather than
    /// left with a request unanswered or a download uncancelled.
    pub fn send(&self, session: Option<&str>, method: &'static str, params: Value) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if self
            .out
            .try_send(encode(id, session, method, params))
            .is_err()
            && !self.is_closed()
        {
            crate::shared::log::warn(&format!(
                "browser: {QUEUE} commands wait unread ({method} among them); closing the connection"
            ));
            self.closed.cancel();
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Result<Value, CdpError>>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn encode(id: u64, session: Option<&str>, method: &str, params: Value) -> Vec<u8> {
    let mut message = json!({ "id": id, "method": method, "params": params });
    if let Some(session) = session {
        message["sessionId"] = Value::String(session.to_owned());
    }
    let mut bytes = serde_json::to_vec(&message).unwrap_or_default();
    bytes.push(0);
    bytes
}

/// Where the browser's messages come from.
enum Source {
    Pipe(Box<dyn AsyncRead + Unpin + Send>, Framer),
    Socket(futures_util::stream::SplitStream<Socket>),
}

impl Source {
    /// The next messages; none when the browser is gone.
    async fn next(&mut self, chunk: &mut [u8]) -> Option<Vec<Frame>> {
        match self {
            Source::Pipe(reader, framer) => match reader.read(chunk).await {
                Ok(0) | Err(_) => None,
                Ok(n) => Some(framer.feed(&chunk[..n])),
            },
            Source::Socket(socket) => match socket.next().await? {
                Ok(Message::Text(text)) => Some(vec![Frame::Message(text.as_bytes().to_vec())]),
                Ok(Message::Binary(bytes)) => Some(vec![Frame::Message(bytes.to_vec())]),
                Ok(Message::Close(_)) | Err(_) => None,
                Ok(_) => Some(Vec::new()),
            },
        }
    }
}

/// Where our messages go (each as [`encode`] made it, NUL-ended).
enum Sink {
    Pipe(Box<dyn AsyncWrite + Unpin + Send>),
    Socket(futures_util::stream::SplitSink<Socket, Message>),
}

impl Sink {
    async fn send(&mut self, mut message: Vec<u8>) -> bool {
        match self {
            Sink::Pipe(writer) => {
                writer.write_all(&message).await.is_ok() && writer.flush().await.is_ok()
            }
            Sink::Socket(socket) => {
                message.pop();
                let text = String::from_utf8(message).unwrap_or_default();
                socket.send(Message::text(text)).await.is_ok()
            }
        }
    }
}

async fn write_loop(
    mut writer: Sink,
    mut queue: mpsc::Receiver<Vec<u8>>,
    closed: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            m = queue.recv() => m,
            _ = closed.cancelled() => None,
        };
        let Some(message) = message else { break };
        if !writer.send(message).await {
            closed.cancel();
            break;
        }
    }
    if let Sink::Socket(mut socket) = writer {
        let _ = socket.close().await;
    }
}

async fn read_loop(
    mut reader: Source,
    cdp: &std::sync::Weak<Cdp>,
    pending: &Pending,
    hook: &Hook,
    closed: &CancellationToken,
) {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let frames = tokio::select! {
            frames = reader.next(&mut chunk) => frames,
            _ = closed.cancelled() => return,
        };
        let Some(frames) = frames else { return };
        for frame in frames {
            let Some(cdp) = cdp.upgrade() else { return };
            match frame {
                Frame::Message(bytes) => deliver(&cdp, pending, hook, &bytes),
                Frame::TooLarge(Some(id)) => answer(
                    pending,
                    id,
                    Err(CdpError::Protocol(format!(
                        "the browser's answer exceeds {} MiB",
                        MAX_MESSAGE >> 20
                    ))),
                ),
                Frame::TooLarge(None) => {}
            }
        }
    }
}

fn answer(pending: &Pending, id: u64, result: Result<Value, CdpError>) {
    let tx = pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
    if let Some(tx) = tx {
        let _ = tx.send(result);
    }
}

fn deliver(cdp: &Arc<Cdp>, pending: &Pending, hook: &Hook, bytes: &[u8]) {
    let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(bytes) else {
        return; // not a message: nothing waits on it
    };
    if let Some(id) = message.get("id").and_then(Value::as_u64) {
        let result = match message.remove("error") {
            Some(error) => Err(CdpError::Protocol(
                error["message"]
                    .as_str()
                    .unwrap_or("the browser refused the command")
                    .to_owned(),
            )),
            None => Ok(message.remove("result").unwrap_or(Value::Null)),
        };
        answer(pending, id, result);
        return;
    }
    let Some(Value::String(method)) = message.remove("method") else {
        return;
    };
    let event = Arc::new(Event {
        method,
        params: message.remove("params").unwrap_or(Value::Null),
        session: match message.remove("sessionId") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        },
    });
    hook(cdp, &event);
    let _ = cdp.events.send(event);
}

/// A whole message, or one that was too large (with its id when the
/// browser wrote it first, as Chromium does: `{"id":N,…`).
#[derive(Debug, PartialEq)]
enum Frame {
    Message(Vec<u8>),
    TooLarge(Option<u64>),
}

/// Splits the stream at NUL bytes, holding at most [`MAX_MESSAGE`].
#[derive(Default)]
struct Framer {
    buffer: Vec<u8>,
    /// Skipping the rest of an oversized message.
    skipping: bool,
}

impl Framer {
    fn feed(&mut self, mut bytes: &[u8]) -> Vec<Frame> {
        let mut frames = Vec::new();
        while !bytes.is_empty() {
            let end = bytes.iter().position(|b| *b == 0);
            let part = &bytes[..end.unwrap_or(bytes.len())];
            if !self.skipping {
                if self.buffer.len() + part.len() > MAX_MESSAGE {
                    self.buffer.extend_from_slice(&part[..part.len().min(32)]);
                    frames.push(Frame::TooLarge(leading_id(&self.buffer)));
                    self.buffer = Vec::new();
                    self.skipping = true;
                } else {
                    self.buffer.extend_from_slice(part);
                }
            }
            match end {
                Some(end) => {
                    if !self.skipping {
                        frames.push(Frame::Message(std::mem::take(&mut self.buffer)));
                    }
                    self.skipping = false;
                    bytes = &bytes[end + 1..];
                }
                None => bytes = &[],
            }
        }
        frames
    }
}

/// `N` of a message that starts `{"id":N`.
fn leading_id(start: &[u8]) -> Option<u64> {
    let rest = start.strip_prefix(b"{\"id\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, BufReader};

    #[test]
    fn frames_split_at_nul_whatever_the_chunks() {
        let mut f = Framer::default();
        assert!(f.feed(b"{\"a\"").is_empty());
        assert_eq!(
            f.feed(b":1}\0{}\0{"),
            vec![
                Frame::Message(b"{\"a\":1}".to_vec()),
                Frame::Message(b"{}".to_vec())
            ]
        );
        assert_eq!(f.feed(b"}\0"), vec![Frame::Message(b"{}".to_vec())]);
    }

    #[test]
    fn an_oversized_message_is_dropped_and_names_its_id() {
        let mut f = Framer::default();
        let mut big = b"{\"id\":42,\"result\":\"".to_vec();
        big.resize(MAX_MESSAGE + 10, b'x');
        let mut frames = Vec::new();
        for chunk in big.chunks(1 << 20) {
            frames.extend(f.feed(chunk));
        }
        assert_eq!(frames, vec![Frame::TooLarge(Some(42))]);
        // Held no more than the limit, and the next message is whole.
        assert!(f.buffer.capacity() <= MAX_MESSAGE + (1 << 20));
        assert_eq!(
            f.feed(b"\"}\0{\"id\":1}\0"),
            vec![Frame::Message(b"{\"id\":1}".to_vec())]
        );
    }

    /// A browser stand-in on an in-memory pipe: answers each command as
    /// `respond` says (None: never).
    fn fake(respond: fn(&Value) -> Option<String>) -> Arc<Cdp> {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (our_read, our_write) = tokio::io::split(ours);
        let (their_read, mut their_write) = tokio::io::split(theirs);
        tokio::spawn(async move {
            let mut lines = BufReader::new(their_read);
            let mut message = Vec::new();
            while lines.read_until(0, &mut message).await.unwrap_or(0) > 0 {
                message.pop();
                let command: Value = serde_json::from_slice(&message).unwrap();
                message.clear();
                if let Some(reply) = respond(&command)
                    && their_write.write_all(reply.as_bytes()).await.is_err()
                {
                    return;
                }
            }
        });
        Cdp::start(our_read, our_write, Box::new(|_, _| {}))
    }

    #[tokio::test]
    async fn answers_find_their_calls_and_events_reach_listeners() {
        let cdp = fake(|c| {
            Some(format!(
                "{{\"method\":\"Page.loadEventFired\",\"params\":{{}},\"sessionId\":\"S\"}}\0{{\"id\":{},\"result\":{{\"echo\":\"{}\"}}}}\0",
                c["id"],
                c["method"].as_str().unwrap()
            ))
        });
        let mut events = cdp.subscribe();
        let got = cdp
            .call(
                Some("S"),
                "Page.navigate",
                json!({}),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(got["echo"], "Page.navigate");
        let event = events.recv().await.unwrap();
        assert_eq!(event.method, "Page.loadEventFired");
        assert_eq!(event.session.as_deref(), Some("S"));
    }

    #[tokio::test]
    async fn an_error_answer_is_the_browsers_words() {
        let cdp = fake(|c| {
            Some(format!(
                "{{\"id\":{},\"error\":{{\"code\":-32000,\"message\":\"No node with given id\"}}}}\0",
                c["id"]
            ))
        });
        let got = cdp
            .call(None, "DOM.focus", json!({}), Duration::from_secs(5))
            .await;
        assert_eq!(got, Err(CdpError::Protocol("No node with given id".into())));
    }

    #[tokio::test]
    async fn a_silent_browser_times_out_and_garbage_is_ignored() {
        let cdp = fake(|_| Some("not json\0[1,2]\0{\"id\":\"x\"}\0".into()));
        let got = cdp
            .call(
                None,
                "Browser.getVersion",
                json!({}),
                Duration::from_millis(200),
            )
            .await;
        assert_eq!(got, Err(CdpError::Timeout("Browser.getVersion")));
        assert!(cdp.pending.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn an_abandoned_call_leaves_nothing_behind() {
        let cdp = fake(|_| None);
        let call = cdp.call(None, "Page.navigate", json!({}), Duration::from_secs(30));
        let _ = tokio::time::timeout(Duration::from_millis(50), call).await;
        assert!(cdp.pending.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_closed_pipe_fails_every_call_at_once() {
        let (ours, theirs) = tokio::io::duplex(1024);
        let (r, w) = tokio::io::split(ours);
        let cdp = Cdp::start(r, w, Box::new(|_, _| {}));
        let c2 = Arc::clone(&cdp);
        let call = tokio::spawn(async move {
            c2.call(
                None,
                "Browser.getVersion",
                json!({}),
                Duration::from_secs(30),
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(theirs);
        let got = tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .expect("the call outlived the pipe")
            .unwrap();
        assert_eq!(got, Err(CdpError::Closed));
        assert!(cdp.is_closed());
        assert_eq!(
            cdp.call(
                None,
                "Browser.getVersion",
                json!({}),
                Duration::from_secs(1)
            )
            .await,
            Err(CdpError::Closed)
        );
    }
}
