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
//! bodies are bounded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::Server;

/// The one endpoint.
pub const PATH: &str = "/mcp";
/// The largest request body (a 4 MiB message, escaped, and then some).
const MAX_BODY: usize = 16 << 20;
/// A connection that sends no complete request head within this is closed.
const HEADER_WITHIN: Duration = Duration::from_secs(30);
/// A request body must keep coming: this long at most between its pieces,
/// and [`BODY_WITHIN`] in all.
const BODY_GAP: Duration = Duration::from_secs(30);
const BODY_WITHIN: Duration = Duration::from_secs(120);
/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 128;
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
        let listen = crate::links::listen_address(listen, true, "the bearer token")
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

/// Serves until `stop`; the exit status.
pub(super) async fn serve(
    server: Server,
    http: Http,
    stop: impl std::future::Future<Output = crate::router::Interrupt>,
) -> u8 {
    let listener = match TcpListener::bind(http.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("[clawbot_router mcp] cannot listen on {}: {e}", http.listen);
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
    let service =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::new(sessions), config);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let token = http.token.map(Arc::new);
    eprintln!(
        "[clawbot_router mcp] serving MCP over Streamable HTTP at http://{at}{PATH}{}",
        if token.is_some() {
            " (bearer token required)"
        } else {
            ""
        }
    );
    let connections = tokio_util::task::TaskTracker::new();
    tokio::pin!(stop);
    loop {
        let slot = tokio::select! {
            signal = &mut stop => {
                eprintln!("[clawbot_router mcp] {}: stopping", signal.name);
                break;
            }
            slot = Arc::clone(&slots).acquire_owned() => slot.expect("never closed"),
        };
        let (stream, _) = tokio::select! {
            signal = &mut stop => {
                eprintln!("[clawbot_router mcp] {}: stopping", signal.name);
                break;
            }
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("[clawbot_router mcp] accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (service, token, shutdown) = (service.clone(), token.clone(), shutdown.clone());
        connections.spawn(async move {
            let _slot = slot;
            let handler = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let mut service = service.clone();
                let token = token.clone();
                async move {
                    if let Some(refusal) = refuse(&request, token.as_deref().map(String::as_str)) {
                        return Ok::<_, std::convert::Infallible>(refusal);
                    }
                    use tower_service::Service;
                    let delete = request.method() == hyper::Method::DELETE;
                    let request = request.map(Deadline::new);
                    let mut response = service.call(request).await?;
                    // A session ended: 200, which both official clients
                    // take as success (rmcp says 202; Python's SDK warns).
                    if delete && response.status() == hyper::StatusCode::ACCEPTED {
                        *response.status_mut() = hyper::StatusCode::OK;
                    }
                    Ok(response)
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_WITHIN)
                .serve_connection(TokioIo::new(stream), handler);
            tokio::pin!(connection);
            tokio::select! {
                _ = &mut connection => {}
                _ = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(5), connection).await;
                }
            }
        });
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
    if crate::links::same_secret(given, expected) {
        return None;
    }
    Some(plain(
        401,
        "a bearer token is required (Authorization: Bearer …)",
        Some("Bearer"),
    ))
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
