//! One WebSocket connection to the gateway: the handshake (wait for
//! `connect.challenge`, send `connect`, read `hello-ok` or the refusal),
//! then typed frames in and out.
//!
//! Reconnecting, backoff and what a refusal means are the caller's business
//! (the node loop): this module only reports precisely what happened. Every
//! wait in the handshake is bounded.

use std::time::Duration;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;

use super::Endpoint;
use super::frames::{Challenge, ConnectParams, ErrorShape, Event, Frame, HelloOk, Request};
use super::transport::{self, Fingerprint, WireError, Ws};

/// OpenClaw's defaults, used until `hello-ok` says otherwise.
const DEFAULT_MAX_PAYLOAD: usize = 25 * 1024 * 1024;
const DEFAULT_TICK: Duration = Duration::from_secs(30);
/// One frame that takes longer than this to send means a stuck peer.
const SEND_LIMIT: Duration = Duration::from_secs(10);

/// The one reading of what the wire said.
impl From<WireError> for ConnectError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Refused(why) => ConnectError::Refused(why),
            // The server's own answer proves the URL wrong.
            e @ (WireError::Scheme(_) | WireError::NotTls(_)) => {
                ConnectError::Refused(e.to_string())
            }
            WireError::Untrusted(why) => ConnectError::Untrusted(why),
            WireError::Transport(why) => ConnectError::Transport(why),
            // A proxy whose gateway is down, or one that sheds load: a
            // hiccup. Any other answer: something that is not a gateway.
            e @ WireError::NotWebSocket(status, _)
                if status >= 500 || status == 408 || status == 429 =>
            {
                ConnectError::Transport(e.to_string())
            }
            e @ WireError::NotWebSocket(..) => ConnectError::NotGateway(e.to_string()),
        }
    }
}

/// Why a connection attempt ended without `hello-ok`.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot reach the gateway: {0}")]
    Transport(String),
    /// A setting to change, not worth retrying: refused before connecting
    /// (a bad URL, plaintext to a public host), or a scheme the server
    /// proved wrong (`ws://` to TLS, `wss://` to plaintext) — no
    /// credential was sent either way.
    #[error("{0}")]
    Refused(String),
    /// The gateway's certificate was not accepted (one line: host,
    /// expected and presented fingerprint, or why the chain failed).
    #[error("{0}")]
    Untrusted(String),
    #[error("the gateway did not complete the handshake within {0:?}")]
    Timeout(Duration),
    #[error("the gateway closed the connection during the handshake")]
    Closed,
    #[error("the gateway refused the connection: {}: {}", .0.code, .0.message)]
    Rejected(ErrorShape),
    #[error("the gateway answered connect with something that is not hello-ok: {0}")]
    Protocol(String),
    /// The server answered, but not as an OpenClaw gateway does.
    #[error("this is not an OpenClaw gateway: {0}")]
    NotGateway(String),
}

/// An OpenClaw gateway sends `connect.challenge` as soon as the WebSocket
/// opens; a server that has not after this long is likely something else.
const CHALLENGE_LIMIT: Duration = Duration::from_secs(10);

/// Why [`Connection::call`] has no answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{}: {}", .0.detail_code(), .0.message)]
    Refused(ErrorShape),
    #[error("{0}")]
    Lost(String),
    #[error("no answer within {0:?}")]
    NoAnswer(Duration),
}

/// An open, authenticated connection.
pub struct Connection {
    ws: Ws,
    pub hello: HelloOk,
    counter: u64,
    /// The certificate a `wss://` gateway presented (and we accepted).
    pub certificate: Option<Fingerprint>,
}

/// Opens `url` and performs the handshake; `build` turns the challenge into
/// the connect params (it signs the nonce).
pub async fn open(
    endpoint: &Endpoint,
    limit: Duration,
    build: impl FnOnce(&Challenge) -> ConnectParams,
) -> Result<Connection, ConnectError> {
    tokio::time::timeout(limit, handshake(endpoint, build))
        .await
        .map_err(|_| ConnectError::Timeout(limit))?
}

async fn handshake(
    endpoint: &Endpoint,
    build: impl FnOnce(&Challenge) -> ConnectParams,
) -> Result<Connection, ConnectError> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20));
    let (ws, seen) = transport::open(&endpoint.url, &endpoint.trust, config).await;
    let ws = ws?;
    let mut conn = Connection {
        ws,
        hello: HelloOk {
            kind: String::new(),
            protocol: 0,
            auth: None,
            policy: None,
        },
        counter: 0,
        certificate: seen.fingerprint(),
    };
    let challenge = tokio::time::timeout(CHALLENGE_LIMIT, challenge(&mut conn.ws))
        .await
        .map_err(|_| {
            ConnectError::NotGateway(format!(
                "the WebSocket opened but no connect.challenge came within {}s",
                CHALLENGE_LIMIT.as_secs()
            ))
        })??;
    let params = build(&challenge);
    let id = conn
        .request("connect", serde_json::to_value(params).expect("plain data"))
        .await
        .map_err(|e| ConnectError::Transport(e.to_string()))?;
    loop {
        match conn.recv().await {
            Some(Frame::Res(res)) if res.id == id => {
                if !res.ok {
                    return Err(ConnectError::Rejected(res.error.unwrap_or(ErrorShape {
                        code: "UNKNOWN".into(),
                        message: "connect failed without an error".into(),
                        details: None,
                        retryable: None,
                    })));
                }
                let payload = res.payload.unwrap_or_default();
                let hello: HelloOk = serde_json::from_value(payload)
                    .map_err(|e| ConnectError::Protocol(e.to_string()))?;
                if hello.kind != "hello-ok" {
                    return Err(ConnectError::Protocol(format!("type {:?}", hello.kind)));
                }
                conn.hello = hello;
                return Ok(conn);
            }
            Some(_) => continue,
            None => return Err(ConnectError::Closed),
        }
    }
}

/// The first thing an OpenClaw gateway says. Anything else first is taken
/// as proof that the server is something else.
async fn challenge(ws: &mut Ws) -> Result<Challenge, ConnectError> {
    loop {
        let text = match ws.next().await {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                return Err(ConnectError::NotGateway("it sent binary data".into()));
            }
            Some(Ok(Message::Close(_)) | Err(_)) | None => return Err(ConnectError::Closed),
            Some(Ok(_)) => continue, // ping, pong
        };
        match serde_json::from_str::<Frame>(&text) {
            Ok(Frame::Event(Event { event, payload, .. })) if event == "connect.challenge" => {
                return serde_json::from_value::<Challenge>(payload)
                    .map_err(|e| ConnectError::Protocol(format!("bad challenge: {e}")));
            }
            Ok(Frame::Event(_)) => continue,
            _ => {
                let shown: String = text.chars().take(80).collect();
                return Err(ConnectError::NotGateway(format!(
                    "its first message was not OpenClaw's connect.challenge: {shown:?}"
                )));
            }
        }
    }
}

impl Connection {
    /// Sends a request; its response arrives through [`Connection::recv`]
    /// with the returned id. Ids look like OpenClaw's own: `N:uuid`.
    pub async fn request(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<String, tokio_tungstenite::tungstenite::Error> {
        self.counter += 1;
        let id = format!("{}:{}", self.counter, uuid::Uuid::new_v4());
        let frame = Frame::Req(Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        });
        self.send_text(serde_json::to_string(&frame).expect("plain data"))
            .await?;
        Ok(id)
    }

    /// One request and its answer within `limit`: the payload, or why not
    /// (the gateway's refusal, a dropped link, no answer in time).
    pub async fn call(
        &mut self,
        method: &str,
        params: serde_json::Value,
        limit: Duration,
    ) -> Result<serde_json::Value, CallError> {
        let exchange = async {
            let id = self
                .request(method, params)
                .await
                .map_err(|e| CallError::Lost(e.to_string()))?;
            loop {
                match self.recv().await {
                    Some(Frame::Res(res)) if res.id == id => {
                        return match (res.ok, res.error) {
                            (true, _) => Ok(res.payload.unwrap_or_default()),
                            (false, Some(error)) => Err(CallError::Refused(error)),
                            (false, None) => Err(CallError::Refused(ErrorShape {
                                code: "UNKNOWN".into(),
                                message: format!("{method} failed without an error"),
                                details: None,
                                retryable: None,
                            })),
                        };
                    }
                    Some(_) => continue,
                    None => {
                        return Err(CallError::Lost("the gateway closed the connection".into()));
                    }
                }
            }
        };
        tokio::time::timeout(limit, exchange)
            .await
            .unwrap_or(Err(CallError::NoAnswer(limit)))
    }

    /// Sends one frame; a peer that stops reading gets `SEND_LIMIT`, then
    /// the send fails (the socket buffer full is the only way a send waits).
    pub async fn send_text(
        &mut self,
        text: String,
    ) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        match tokio::time::timeout(SEND_LIMIT, self.ws.send(Message::text(text))).await {
            Ok(sent) => sent,
            Err(_) => Err(tokio_tungstenite::tungstenite::Error::Io(
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the gateway took no frame for {}s", SEND_LIMIT.as_secs()),
                ),
            )),
        }
    }

    /// The next frame; `None` once the connection is closed or broken.
    /// Pings are answered by the WebSocket layer as a side effect of reading.
    /// Text that is not a frame is skipped (the peer is not trusted to be
    /// well-formed).
    pub async fn recv(&mut self) -> Option<Frame> {
        next_frame(&mut self.ws).await
    }

    /// Splits the connection for serving: frames are read here, and sent
    /// by a writer task of their own, so a peer that stops reading can
    /// never stall the reader (or Ctrl-C). The writer gives up — and
    /// `Outbox::dead` fires — when one frame takes longer than `send_limit`.
    pub fn serve(self, send_limit: Duration) -> (Inbox, Outbox) {
        let (sink, stream) = self.ws.split();
        let (tx, rx) = mpsc::channel::<(Message, Option<Held>)>(OUTBOX_FRAMES);
        let dead = CancellationToken::new();
        let writer = tokio::spawn(write_frames(sink, rx, send_limit, dead.clone()));
        (
            Inbox { stream },
            Outbox {
                tx,
                counter: Arc::new(AtomicU64::new(self.counter)),
                asked: Arc::default(),
                dead,
                writer: Arc::new(std::sync::Mutex::new(Some(writer))),
            },
        )
    }

    /// The largest frame the gateway accepts.
    pub fn max_payload(&self) -> usize {
        self.hello
            .policy
            .as_ref()
            .and_then(|p| p.max_payload)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(DEFAULT_MAX_PAYLOAD)
    }

    /// The gateway's tick interval; silence for twice this long means the
    /// link is dead.
    pub fn tick_interval(&self) -> Duration {
        self.hello
            .policy
            .as_ref()
            .and_then(|p| p.tick_interval_ms)
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_TICK)
    }

    pub fn device_token(&self) -> Option<&str> {
        self.hello.auth.as_ref()?.device_token.as_deref()
    }
}

/// The next frame from `stream`; `None` once it is closed or broken.
/// Pings are answered by the WebSocket layer as a side effect of reading.
/// Text that is not a frame is skipped (the peer is not trusted to be
/// well-formed).
async fn next_frame<S>(stream: &mut S) -> Option<Frame>
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        match stream.next().await? {
            Ok(Message::Text(text)) => match serde_json::from_str::<Frame>(&text) {
                Ok(frame) => return Some(frame),
                Err(_) => continue,
            },
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue, // ping, pong, binary
        }
    }
}

/// Frames waiting for the writer; beyond this the peer is not keeping up.
const OUTBOX_FRAMES: usize = 256;

/// The reading half of a served connection.
pub struct Inbox {
    stream: SplitStream<Ws>,
}

impl Inbox {
    /// The next frame; `None` once the connection is closed or broken.
    /// Text that is not a frame is skipped.
    pub async fn recv(&mut self) -> Option<Frame> {
        next_frame(&mut self.stream).await
    }
}

/// What a queued frame keeps taken until it is written: a file
/// transfer's slot, so that at most that many transfers' bytes exist at
/// once — read, queued or being sent — however slowly the gateway reads.
pub type Held = tokio::sync::OwnedSemaphorePermit;

/// The sending half: cheap to clone, never blocks its caller.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<(Message, Option<Held>)>,
    counter: Arc<AtomicU64>,
    /// The method of each request still unanswered (the latest
    /// `OUTBOX_FRAMES * 4`), so an answer can be told by what it answers.
    asked: Arc<std::sync::Mutex<std::collections::VecDeque<(String, String)>>>,
    dead: CancellationToken,
    writer: Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl Outbox {
    /// Queues a request; its id (`N:uuid`, as OpenClaw's own) comes back.
    /// A full queue means the peer stopped reading: the link is declared
    /// dead rather than waited on.
    pub fn request(&self, method: &str, params: serde_json::Value) -> Option<String> {
        self.request_holding(method, params, None)
    }

    /// The same, keeping `held` until the frame is written.
    pub fn request_holding(
        &self,
        method: &str,
        params: serde_json::Value,
        held: Option<Held>,
    ) -> Option<String> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("{n}:{}", uuid::Uuid::new_v4());
        let frame = Frame::Req(Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        });
        let text = serde_json::to_string(&frame).expect("plain data");
        // Remembered before it can be answered.
        if let Ok(mut asked) = self.asked.lock() {
            if asked.len() >= OUTBOX_FRAMES * 4 {
                asked.pop_front();
            }
            asked.push_back((id.clone(), method.to_owned()));
        }
        match self.tx.try_send((Message::text(text), held)) {
            Ok(()) => Some(id),
            Err(_) => {
                let _ = self.answered(&id);
                self.dead.cancel();
                None
            }
        }
    }

    /// The method of the request `id` answers (once per id), if it was
    /// sent through this outbox and is recent enough to be remembered.
    pub fn answered(&self, id: &str) -> Option<String> {
        let mut asked = self.asked.lock().ok()?;
        let at = asked.iter().position(|(asked, _)| asked == id)?;
        asked.remove(at).map(|(_, method)| method)
    }

    /// Frames that can still be queued before the link counts as dead.
    pub fn room(&self) -> usize {
        self.tx.capacity()
    }

    /// Resolves when the writer gave up on the peer.
    pub async fn dead(&self) {
        self.dead.cancelled().await
    }

    /// Sends what is queued (within `limit`) and a close frame.
    pub async fn close(self, limit: Duration) {
        let _ = self.tx.try_send((Message::Close(None), None));
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        drop(self.tx);
        if let Some(writer) = writer
            && tokio::time::timeout(limit, writer).await.is_err()
        {
            self.dead.cancel();
        }
    }
}

async fn write_frames(
    mut sink: SplitSink<Ws, Message>,
    mut rx: mpsc::Receiver<(Message, Option<Held>)>,
    limit: Duration,
    dead: CancellationToken,
) {
    loop {
        let (message, held) = tokio::select! {
            _ = dead.cancelled() => break,
            message = rx.recv() => match message {
                Some(message) => message,
                None => break,
            },
        };
        let closing = matches!(message, Message::Close(_));
        let sent = tokio::time::timeout(limit, sink.send(message)).await;
        drop(held);
        match sent {
            Ok(Ok(())) if !closing => {}
            Ok(Ok(())) => break,
            _ => {
                dead.cancel();
                break;
            }
        }
    }
}
