//! `clawbot_router mcp --http ADDR`: the same server over MCP's Streamable
//! HTTP transport (spec 2025-11-25: POST/GET/DELETE on one endpoint,
//! `Mcp-Session-Id`, SSE for progress, `notifications/cancelled`), built
//! on the official SDK's server transport (rmcp's `StreamableHttpService`),
//! for hosts that speak only HTTP — and for a Windows host reaching a
//! router inside WSL without a `wsl.exe` start per call.
//!
//! What sits in front of rmcp here: where it may listen (loopback; a
//! private address only with a bearer token, since the token crosses the
//! wire in plaintext; never every interface or a public address), the
//! bearer token itself (constant-time), and the limits. `Host` and
//! `Origin` are checked by rmcp against DNS rebinding, with the names this
//! server answers as and the origins [`allowed_origins`] gives it. Request
//! bodies are bounded, and read here: a POST's call is known, so that a
//! client hanging up before its answer has that call cancelled (rmcp keeps
//! a session's call running for a resumption we do not offer). What each
//! connection and session holds is [`budget`]'s to bound: no peer can hold
//! everything and lock a new client out.

mod budget;

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::{Server, say};
use budget::{Budget, Limits, Refusal, Ticket, Victim};

/// The one endpoint.
pub const PATH: &str = "/mcp";
/// The largest request body (a 4 MiB message, escaped, and then some).
const MAX_BODY: usize = 16 << 20;
/// Request bodies held at once, all connections together: four of the
/// largest. Past it a body gets 503 (retry in a second) instead of memory:
/// 256 connections each sending 16 MiB would otherwise hold 4 GiB.
const BODIES_AT_ONCE: usize = 64 << 20;
/// A connection that sends no complete request head within this is closed.
const HEADER_WITHIN: Duration = Duration::from_secs(30);
/// A request body must keep coming: this long at most between its pieces,
/// and [`BODY_WITHIN`] in all.
const BODY_GAP: Duration = Duration::from_secs(30);
const BODY_WITHIN: Duration = Duration::from_secs(120);
/// What the server holds at once; README.md ("Limits") says why.
const LIMITS: Limits = Limits {
    connections: 256,
    connections_per_address: 64,
    sessions: 256,
    sessions_per_address: 64,
    streams_per_session: 1,
    requests_per_session: 16,
};
/// Connections turned away (503 and a reason) at once; past this a
/// connection that finds no room is closed without a word.
const TURNING_AWAY: usize = 32;
/// How long a connection turned away may take to send its request.
const TURN_AWAY_WITHIN: Duration = Duration::from_secs(5);
/// The loopback names a page on this machine is served from.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Where and how the server listens.
pub struct Http {
    pub listen: SocketAddr,
    pub token: Option<String>,
    pub origins: Vec<String>,
}

impl Http {
    /// Checks `--http` and its token: loopback alone, or a private address
    /// with a token.
    pub fn new(listen: &str, token: Option<String>, origins: Vec<String>) -> Result<Self, String> {
        let listen = crate::shared::net::listen_address(listen, true, "the bearer token")
            .map_err(|e| format!("--http: {e}"))?;
        if token.is_none() && !listen.ip().is_loopback() {
            return Err(format!(
                "--http {listen}: anything but loopback needs a bearer token (CLAWBOT_ROUTER_MCP_TOKEN or --http-token-file)"
            ));
        }
        for origin in &origins {
            if !(origin.starts_with("http://") || origin.starts_with("https://")) {
                return Err(format!(
                    "--http-allow-origin {origin:?}: an origin is scheme://host[:port]"
                ));
            }
        }
        Ok(Self {
            listen,
            token,
            origins,
        })
    }
}

/// The browser origins a request may carry. On loopback: a page served
/// from this machine's own loopback names (any port), which could reach
/// the server anyway — what DNS rebinding needs is a foreign name, and
/// that is refused. On a private address: none by default, because
/// "localhost" in a browser's `Origin` is the browser's machine, not this
/// one. Anywhere: those named with `--http-allow-origin`.
fn allowed_origins(loopback: bool, named: &[String]) -> Vec<String> {
    let mut origins = Vec::new();
    if loopback {
        for host in LOOPBACK_NAMES {
            for scheme in ["http", "https"] {
                origins.push(format!("{scheme}://{host}:*"));
            }
        }
    }
    origins.extend(named.iter().cloned());
    origins
}

type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;
type Service = StreamableHttpService<Server, LocalSessionManager>;

/// What every connection shares.
struct Front {
    service: Service,
    sessions: Arc<LocalSessionManager>,
    budget: Arc<Budget>,
    token: Option<String>,
    /// Bytes of request bodies that may be held at once ([`BODIES_AT_ONCE`]).
    bodies: Arc<tokio::sync::Semaphore>,
}

/// Serves until `stop`; the exit status.
pub(super) async fn serve(
    server: Server,
    http: Http,
    stop: impl std::future::Future<Output = crate::shared::signals::Interrupt>,
) -> u8 {
    let listener = match TcpListener::bind(http.listen).await {
        Ok(l) => l,
        Err(e) => {
            crate::shared::log::tell("mcp", &format!("cannot listen on {}: {e}", http.listen));
            return 1;
        }
    };
    let at = listener.local_addr().unwrap_or(http.listen);
    let shutdown = CancellationToken::new();
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    if !at.ip().is_loopback() {
        hosts.push(at.ip().to_string());
    }
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_max_request_body_bytes(MAX_BODY);
    let origins = allowed_origins(at.ip().is_loopback(), &http.origins);
    config = if origins.is_empty() {
        config.enforce_origin_validation()
    } else {
        config.with_allowed_origins(origins)
    };
    config.cancellation_token = shutdown.child_token();
    let server = Server {
        ending: "the server stopping",
        ..server
    };
    let (input_over, calls) = (server.input_over.clone(), server.calls.clone());
    let grace = server.options.grace;
    // A session whose call runs without progress reports is not idle: it
    // lives at least as long as the longest call may.
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(
        (server.options.timeout + grace + Duration::from_secs(60)).max(Duration::from_secs(300)),
    );
    let sessions = Arc::new(sessions);
    let front = Arc::new(Front {
        service: StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::clone(&sessions),
            config,
        ),
        sessions,
        budget: Budget::new(LIMITS),
        token: http.token,
        bodies: Arc::new(tokio::sync::Semaphore::new(BODIES_AT_ONCE)),
    });
    let turning_away = Arc::new(tokio::sync::Semaphore::new(TURNING_AWAY));
    say(&format!(
        "serving MCP over Streamable HTTP at http://{at}{PATH}{}",
        if front.token.is_some() {
            " (bearer token required)"
        } else {
            ""
        }
    ));
    let connections = tokio_util::task::TaskTracker::new();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            signal = &mut stop => {
                say(&format!("{}: stopping", signal.name));
                break;
            }
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    super::warn(&format!("accept failed: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        match front.budget.admit(peer.ip()) {
            Ok((ticket, victims)) => {
                victims.into_iter().for_each(Victim::go);
                let (front, shutdown) = (Arc::clone(&front), shutdown.clone());
                connections.spawn(connection(front, stream, ticket, shutdown));
            }
            Err(refusal) => {
                // Bounded: a flood of them must not become the lock-out.
                if let Ok(permit) = Arc::clone(&turning_away).try_acquire_owned() {
                    connections.spawn(async move {
                        turn_away(stream, refusal).await;
                        drop(permit);
                    });
                }
            }
        }
    }
    drop(listener);
    // Running calls stop first — their trees through TERM, grace, KILL —
    // and answer; then the sessions end and the connections close.
    input_over.cancel();
    calls.close();
    let _ = tokio::time::timeout(grace + Duration::from_secs(2), calls.wait()).await;
    shutdown.cancel();
    connections.close();
    let _ = tokio::time::timeout(super::DRAIN + Duration::from_secs(5), connections.wait()).await;
    0
}

/// Serves one connection until it ends, the server stops, or a newcomer
/// takes its place (then it finishes what it was answering, and closes).
async fn connection(
    front: Arc<Front>,
    stream: TcpStream,
    ticket: Ticket,
    shutdown: CancellationToken,
) {
    let ticket = Arc::new(ticket);
    let closed = ticket.closed.clone();
    let handler = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let (front, ticket) = (Arc::clone(&front), Arc::clone(&ticket));
        async move { Ok::<_, std::convert::Infallible>(answer(&front, &ticket, request).await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_WITHIN)
        .serve_connection(TokioIo::new(stream), handler);
    tokio::pin!(connection);
    tokio::select! {
        _ = &mut connection => {}
        _ = async { tokio::select! { _ = shutdown.cancelled() => {}, _ = closed.cancelled() => {} } } => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(5), connection).await;
        }
    }
}

/// A connection there is no room for hears why (503), then is closed.
async fn turn_away(stream: TcpStream, refusal: Refusal) {
    let text = refusal.to_string();
    let handler = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let text = text.clone();
        async move {
            // Read what the client sends first, so that closing does not
            // reset the connection under the answer.
            let _ = http_body_util::Limited::new(request.into_body(), 1 << 20)
                .collect()
                .await;
            Ok::<_, std::convert::Infallible>(busy(503, &text))
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(TURN_AWAY_WITHIN)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), handler);
    let _ = tokio::time::timeout(TURN_AWAY_WITHIN, connection).await;
}

/// One request: the gate (path, token), its body, the budget's say, then
/// rmcp.
async fn answer(
    front: &Front,
    ticket: &Ticket,
    request: hyper::Request<Incoming>,
) -> hyper::Response<Answer> {
    if let Some(refusal) = refuse(&request, front.token.as_deref()) {
        return Answer::plain(refusal);
    }
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let method = request.method().clone();
    let slot = Arc::new(Slot::default());
    let running = match (&method, session.clone()) {
        (&hyper::Method::GET, Some(session)) => budget::Request::Stream {
            session,
            stop: slot.clone(),
        },
        (_, Some(session)) => budget::Request::Posted { session },
        (_, None) => budget::Request::Plain,
    };
    let (parts, body) = request.into_parts();
    let _receiving = ticket.request(budget::Request::Receiving);
    // The body's bytes are counted while they are held (until rmcp has
    // answered), so that the connections together hold a bounded amount.
    let (body, _held) = match receive(body, &front.bodies).await {
        Ok(body) => body,
        Err(refusal) => return Answer::plain(refusal),
    };
    let (in_flight, victims) = match ticket.request(running) {
        Ok(granted) => granted,
        Err(refusal) => return Answer::plain(busy(refusal.status(), &refusal.to_string())),
    };
    // A stream this one replaces ends before rmcp sees the new one, which
    // then becomes the session's stream (rmcp gives a second one nothing).
    victims.into_iter().for_each(Victim::go);
    let request = hyper::Request::from_parts(parts, Full::new(body.clone()));
    let (response, dropped) = match method {
        hyper::Method::POST => post(front, ticket.peer, session, request, &body).await,
        hyper::Method::DELETE => {
            let mut response = front.service.handle(request).await;
            if response.status().is_success() {
                if let Some(session) = &session {
                    front.budget.session_closed(session);
                }
                // A session ended: 200, which both official clients take
                // as success (rmcp says 202; Python's SDK warns).
                *response.status_mut() = hyper::StatusCode::OK;
            }
            (response, None)
        }
        _ => (front.service.handle(request).await, None),
    };
    let (parts, body) = response.into_parts();
    slot.fill(body);
    hyper::Response::from_parts(
        parts,
        Answer {
            slot,
            in_flight: Some(in_flight),
            dropped,
        },
    )
}

/// A request's body, read in full here (bounded in size and in time, and
/// its bytes counted against what all connections may hold at once), so
/// that the call it carries is known before rmcp runs it.
async fn receive(
    body: Incoming,
    bodies: &Arc<tokio::sync::Semaphore>,
) -> Result<(Bytes, Option<tokio::sync::OwnedSemaphorePermit>), hyper::Response<Body>> {
    let mut body = Deadline::new(body);
    let mut collected = bytes::BytesMut::new();
    let mut held: Option<tokio::sync::OwnedSemaphorePermit> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| plain(400, &e.to_string(), None))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if collected.len() + data.len() > MAX_BODY {
            return Err(plain(
                413,
                &format!("the request body is larger than {} MiB", MAX_BODY >> 20),
                None,
            ));
        }
        let more = u32::try_from(data.len()).unwrap_or(u32::MAX);
        match bodies.clone().try_acquire_many_owned(more) {
            Ok(permit) => match &mut held {
                Some(held) => held.merge(permit),
                None => held = Some(permit),
            },
            Err(_) => {
                return Err(busy(
                    503,
                    "the server is receiving as much as it holds at once; retry",
                ));
            }
        }
        collected.extend_from_slice(&data);
    }
    Ok((collected.freeze(), held))
}

/// A POST to rmcp: a session `initialize` opened gets its room (or is
/// ended again), and a call gets what cancels it if its client goes first.
async fn post(
    front: &Front,
    peer: IpAddr,
    session: Option<String>,
    request: hyper::Request<Full<Bytes>>,
    body: &[u8],
) -> (hyper::Response<Body>, Option<DroppedCall>) {
    /// All a POST's body says about the call it carries.
    #[derive(serde::Deserialize)]
    struct Head {
        method: Option<String>,
        id: Option<Value>,
    }
    let head = serde_json::from_slice::<Head>(body).ok();
    // Without a session, only `initialize` opens one: anything else gets
    // JSON-RPC's error saying so (rmcp's own answer names no remedy).
    if session.is_none()
        && let Some(Head {
            method: Some(method),
            id,
        }) = &head
        && method != "initialize"
    {
        // As over stdio: an id JSON-RPC does not allow is not echoed, and a
        // ping is answered (MCP allows it before initialize).
        let message = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
        let (status, answer) = match super::not_json_rpc(&message) {
            Some(problem) => (400, super::invalid_request(id.as_ref(), problem)),
            None if method == "ping" => (200, super::pong(id.as_ref())),
            None => (400, super::not_initialized(id.as_ref())),
        };
        let response = hyper::Response::builder()
            .status(status)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(answer)).boxed())
            .expect("a JSON response");
        return (response, None);
    }
    let mut response = front.service.handle(request).await;
    let streaming = response.status() == hyper::StatusCode::OK
        && response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let Some(session) = session else {
        let opened = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(opened) = opened {
            match front.budget.session_opened(&opened, peer) {
                Ok(ending) => {
                    for id in ending {
                        let _ = front.sessions.close_session(&id.into()).await;
                    }
                }
                Err(refusal) => {
                    let _ = front.sessions.close_session(&opened.into()).await;
                    response = busy(refusal.status(), &refusal.to_string());
                }
            }
        }
        return (response, None);
    };
    let call = match head {
        Some(Head {
            method: Some(_),
            id: Some(id),
        }) if streaming => Some(DroppedCall {
            sessions: Arc::clone(&front.sessions),
            session,
            id,
        }),
        _ => None,
    };
    (response, call)
}

/// A request a client sent and stopped waiting for.
struct DroppedCall {
    sessions: Arc<LocalSessionManager>,
    session: String,
    id: Value,
}

impl DroppedCall {
    /// Cancels it as the client's own `notifications/cancelled` would: the
    /// call's process tree stops now, not at `--timeout`.
    fn cancel(self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let message = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": self.id, "reason": "the client closed its connection"},
        });
        let Ok(message) = serde_json::from_value::<ClientJsonRpcMessage>(message) else {
            return;
        };
        runtime.spawn(async move {
            let session = self.session.as_str().into();
            // A session already gone took its calls with it.
            let _ = self.sessions.accept_message(&session, message).await;
        });
    }
}

/// A response body the budget can end from outside: a standing stream a
/// newcomer displaces.
#[derive(Default)]
struct Slot {
    body: Mutex<Filled>,
    waker: futures_util::task::AtomicWaker,
}

#[derive(Default)]
enum Filled {
    #[default]
    Waiting,
    Body(Body),
    Ended,
}

impl Slot {
    fn fill(&self, body: Body) {
        let mut filled = self.body.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*filled, Filled::Waiting) {
            *filled = Filled::Body(body);
        }
    }
}

impl budget::Stop for Slot {
    fn stop(&self) {
        let old = std::mem::replace(
            &mut *self.body.lock().unwrap_or_else(|e| e.into_inner()),
            Filled::Ended,
        );
        // rmcp's end of the stream is gone before this returns.
        drop(old);
        self.waker.wake();
    }
}

/// What goes back to the client: rmcp's response (or ours), holding its
/// connection busy until it has ended, and cancelling the call it answers
/// if the client goes first.
struct Answer {
    slot: Arc<Slot>,
    in_flight: Option<budget::InFlight>,
    dropped: Option<DroppedCall>,
}

impl Answer {
    fn plain(response: hyper::Response<Body>) -> hyper::Response<Answer> {
        let slot = Arc::new(Slot::default());
        response.map(|body| {
            slot.fill(body);
            Answer {
                slot,
                in_flight: None,
                dropped: None,
            }
        })
    }
}

impl hyper::body::Body for Answer {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        self.slot.waker.register(cx.waker());
        let frame = {
            let mut filled = self.slot.body.lock().unwrap_or_else(|e| e.into_inner());
            match &mut *filled {
                Filled::Body(body) => std::pin::Pin::new(body).poll_frame(cx),
                Filled::Waiting | Filled::Ended => Poll::Ready(None),
            }
        };
        if let Poll::Ready(None) = frame {
            // Answered in full: nothing to cancel, and the connection is
            // free for its next request.
            self.dropped = None;
            self.in_flight = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        match &*self.slot.body.lock().unwrap_or_else(|e| e.into_inner()) {
            Filled::Body(body) => body.is_end_stream(),
            Filled::Waiting | Filled::Ended => true,
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match &*self.slot.body.lock().unwrap_or_else(|e| e.into_inner()) {
            Filled::Body(body) => body.size_hint(),
            Filled::Waiting | Filled::Ended => hyper::body::SizeHint::with_exact(0),
        }
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        if let Some(call) = self.dropped.take() {
            // The id is the client's text: escaped as every log line is.
            say(&format!(
                "a client closed its connection before request {} was answered: cancelling it",
                call.id
            ));
            call.cancel();
        }
    }
}

/// A request body that must keep coming: [`BODY_GAP`] at most between its
/// pieces, [`BODY_WITHIN`] in all (the head has its own timeout in hyper).
struct Deadline {
    body: Incoming,
    gap: std::pin::Pin<Box<tokio::time::Sleep>>,
    all: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl Deadline {
    fn new(body: Incoming) -> Self {
        Self {
            body,
            gap: Box::pin(tokio::time::sleep(BODY_GAP)),
            all: Box::pin(tokio::time::sleep(BODY_WITHIN)),
        }
    }
}

impl hyper::body::Body for Deadline {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        let this = &mut *self;
        match std::pin::Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.gap
                    .as_mut()
                    .reset(tokio::time::Instant::now() + BODY_GAP);
                return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
            }
            Poll::Pending => {}
        }
        if this.gap.as_mut().poll(cx).is_ready() || this.all.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err("the request body stopped coming".into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The answer to a request that may not reach the server: the wrong path,
/// or a missing or wrong bearer token.
fn refuse(
    request: &hyper::Request<Incoming>,
    token: Option<&str>,
) -> Option<hyper::Response<Body>> {
    if request.uri().path() != PATH {
        return Some(plain(404, &format!("the MCP endpoint is {PATH}"), None));
    }
    let expected = token?;
    // The scheme's name is case-insensitive (RFC 9110 §11.1).
    let given = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Bearer"))
        .map_or("", |(_, token)| token.trim());
    if crate::shared::secrets::same_secret(given, expected) {
        return None;
    }
    Some(plain(
        401,
        "a bearer token is required (Authorization: Bearer …)",
        Some("Bearer"),
    ))
}

/// A refusal for want of room: come back in a moment.
fn busy(status: u16, text: &str) -> hyper::Response<Body> {
    let mut response = plain(status, text, None);
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    response
}

fn plain(status: u16, text: &str, challenge: Option<&str>) -> hyper::Response<Body> {
    let mut response = hyper::Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8");
    if let Some(scheme) = challenge {
        response = response.header(hyper::header::WWW_AUTHENTICATE, scheme);
    }
    response
        .body(Full::new(Bytes::from(format!("{text}\n"))).boxed())
        .expect("a plain response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_alone_or_a_private_address_with_a_token() {
        assert!(Http::new("127.0.0.1:8931", None, vec![]).is_ok());
        assert!(Http::new("[::1]:8931", None, vec![]).is_ok());
        let e = Http::new("172.22.0.5:8931", None, vec![]).err().unwrap();
        assert!(e.contains("needs a bearer token"), "{e}");
        assert!(Http::new("172.22.0.5:8931", Some("t".into()), vec![]).is_ok());
        let e = Http::new("0.0.0.0:8931", Some("t".into()), vec![])
            .err()
            .unwrap();
        assert!(e.contains("every interface"), "{e}");
        let e = Http::new("8.8.8.8:8931", Some("t".into()), vec![])
            .err()
            .unwrap();
        assert!(e.contains("public address"), "{e}");
        assert!(Http::new("nowhere", None, vec![]).is_err());
        assert!(Http::new("127.0.0.1:1", None, vec!["evil.example".into()]).is_err());
        assert!(Http::new("127.0.0.1:1", None, vec!["http://localhost:3000".into()]).is_ok());
    }

    #[test]
    fn loopback_takes_its_own_names_as_origins_a_private_address_only_those_named() {
        let loopback = allowed_origins(true, &["https://app.example:443".into()]);
        for origin in [
            "http://localhost:*",
            "https://127.0.0.1:*",
            "http://[::1]:*",
        ] {
            assert!(loopback.contains(&origin.to_owned()), "{loopback:?}");
        }
        assert!(loopback.contains(&"https://app.example:443".to_owned()));
        // A browser's "localhost" is the browser's machine, not a private
        // address's: nothing unless named.
        assert!(allowed_origins(false, &[]).is_empty());
        assert_eq!(
            allowed_origins(false, &["http://172.22.0.1:3000".into()]),
            ["http://172.22.0.1:3000"]
        );
    }
}
