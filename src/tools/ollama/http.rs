//! The one way to this machine's Ollama: HTTP/1.1 (hyper, as the links
//! use it) over plain TCP to 127.0.0.1:11434, the address OpenClaw's node
//! host always uses for `ollama.*` (it reads neither `OLLAMA_HOST` nor the
//! gateway's provider URL for them).
//!
//! Every exchange is bounded: one timeout over connecting, the answer's
//! head and its whole body; a body read at most to its cap (the rest is
//! never read); a body that stalls for 30 s counts as broken, as
//! OpenClaw's reader has it. Redirects are never followed (OpenClaw follows
//! up to three on the same host and refuses any other; Ollama itself never
//! redirects). When an exchange ends, early or not, its connection is
//! closed: nothing of a hanging Ollama outlives the call.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How OpenClaw names the endpoint in its messages.
pub const BASE: &str = "http://127.0.0.1:11434";
const ADDR: (&str, u16) = ("127.0.0.1", 11434);

/// A body that sends nothing for this long has stalled
/// (`readProviderResponseBytes`' `chunkTimeoutMs`).
pub const STALL: Duration = Duration::from_secs(30);

/// An answer: its status and what was read of its body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Body,
}

#[derive(Debug)]
pub enum Body {
    /// All of it (a success's body).
    Whole(Vec<u8>),
    /// Past its cap: not kept.
    TooLarge,
    /// Its first bytes only (an error's body, read to its cap).
    Prefix(Vec<u8>),
    /// It broke off midway: why.
    Broken(String),
    /// It sent nothing for [`STALL`].
    Stalled,
}

/// Why there is no answer.
#[derive(Debug)]
pub enum Failure {
    /// No connection, a broken exchange, or a redirect (not followed).
    Transport(String),
    /// The time given ran out.
    TimedOut,
}

/// How much of a body to read.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// A 2xx body: at most this, whole, else [`Body::TooLarge`].
    pub ok: usize,
    /// Another status's body: its first bytes, at most this.
    pub error: usize,
}

/// One request to Ollama, answer read within `within`.
pub async fn exchange(
    method: hyper::Method,
    path: &str,
    json: Option<String>,
    within: Duration,
    caps: Caps,
) -> Result<Reply, Failure> {
    tokio::time::timeout(within, exchange_on(method, path, json, caps))
        .await
        .unwrap_or(Err(Failure::TimedOut))
}

/// The connection's task, which holds the socket: ended with the
/// exchange, however it ends (a cancelled invocation drops it midway).
struct Connection(tokio::task::JoinHandle<()>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn exchange_on(
    method: hyper::Method,
    path: &str,
    json: Option<String>,
    caps: Caps,
) -> Result<Reply, Failure> {
    let stream = TcpStream::connect(ADDR)
        .await
        .map_err(|e| Failure::Transport(format!("connect: {e}")))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| Failure::Transport(e.to_string()))?;
    let _connection = Connection(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "127.0.0.1:11434")
        .header(hyper::header::ACCEPT, "*/*")
        .header(
            hyper::header::USER_AGENT,
            concat!("clawbot_router/", env!("CARGO_PKG_VERSION")),
        );
    if json.is_some() {
        request = request.header(hyper::header::CONTENT_TYPE, "application/json");
    }
    let request = request
        .body(Full::new(Bytes::from(json.unwrap_or_default())))
        .map_err(|e| Failure::Transport(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| Failure::Transport(e.to_string()))?;
    let status = response.status().as_u16();
    if (300..400).contains(&status) {
        return Err(Failure::Transport(format!(
            "redirect (HTTP {status}) not followed"
        )));
    }
    let success = (200..300).contains(&status);
    let cap = if success { caps.ok } else { caps.error };
    let body = read(response.into_body(), cap, success).await;
    Ok(Reply { status, body })
}

/// Reads a body: whole up to `cap` (`whole`), else its first `cap` bytes.
async fn read(mut body: hyper::body::Incoming, cap: usize, whole: bool) -> Body {
    let mut bytes = Vec::new();
    loop {
        if !whole && bytes.len() >= cap {
            bytes.truncate(cap);
            return Body::Prefix(bytes);
        }
        let frame = match tokio::time::timeout(STALL, body.frame()).await {
            Err(_) => return Body::Stalled,
            Ok(None) => break,
            Ok(Some(Err(e))) => return Body::Broken(e.to_string()),
            Ok(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            if whole && bytes.len() + data.len() > cap {
                return Body::TooLarge;
            }
            bytes.extend_from_slice(data);
        }
    }
    if whole {
        Body::Whole(bytes)
    } else {
        bytes.truncate(cap);
        Body::Prefix(bytes)
    }
}
