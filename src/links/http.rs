//! The one HTTP client the links use (seeds 001 and 003): HTTP/1.1 over
//! TCP, or TLS with the gateway's trust rules (the system's roots), one
//! connection per request, every wait bounded, every body bounded.
//! Plaintext `http://` only where OpenClaw allows `ws://` — loopback and
//! private networks — so a key never crosses the internet unencrypted.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::MaybeTlsStream;

use crate::gateway::transport::{self, Target, Trust};

/// How long connecting (and TLS) may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);

/// A service's base URL, checked.
#[derive(Debug, Clone)]
pub struct Service {
    target: Target,
    /// The URL's path, without a trailing slash (`/api`), prefixed to
    /// every request's path.
    prefix: String,
    shown: String,
    /// Sent with every request of this service value.
    headers: Vec<(&'static str, String)>,
}

impl Service {
    /// `url` as a service: `http://` or `https://`; loopback only unless
    /// `remote`, and plaintext never to a public address.
    pub fn parse(url: &str, remote: bool) -> Result<Self, String> {
        let uri: hyper::Uri = url
            .trim()
            .parse()
            .map_err(|e| format!("{url:?} is not a URL ({e})"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(format!("{url:?} must start with http:// or https://")),
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("{url:?} names no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if !remote && !transport::is_loopback(&host) {
            return Err(format!(
                "{host} is not this machine: the service must be on loopback unless --allow-remote is given"
            ));
        }
        if !tls && !transport::plaintext_allowed_strictly(&host) {
            return Err(format!(
                "refusing plaintext http:// to {host}: it is not a loopback or private address; use https://"
            ));
        }
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        if uri.query().is_some() {
            return Err(format!("{url:?}: a service URL takes no query"));
        }
        Ok(Self {
            target: Target { tls, host, port },
            prefix: uri.path().trim_end_matches('/').to_owned(),
            shown: format!(
                "{}://{}{}",
                if tls { "https" } else { "http" },
                Target {
                    tls,
                    host: uri.host().unwrap_or_default().to_owned(),
                    port
                }
                .authority(),
                uri.path().trim_end_matches('/')
            ),
            headers: Vec::new(),
        })
    }

    /// The same service, with `headers` on every request.
    pub fn with_headers(&self, headers: Vec<(&'static str, String)>) -> Self {
        Self {
            headers,
            ..self.clone()
        }
    }

    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Sends one request; the status and the body, still streaming.
    /// `bearer` goes in `Authorization` (never in a log line).
    pub async fn send(
        &self,
        method: hyper::Method,
        path: &str,
        body: Option<&Value>,
        bearer: Option<&str>,
        accept: &str,
    ) -> Result<(u16, Incoming), String> {
        let io = tokio::time::timeout(CONNECT_WITHIN, self.connect())
            .await
            .map_err(|_| format!("{} did not answer within {CONNECT_WITHIN:?}", self.shown))??;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| format!("HTTP with {} failed: {e}", self.shown))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.prefix))
            .header(hyper::header::HOST, self.target.authority())
            .header(hyper::header::ACCEPT, accept)
            .header(
                hyper::header::USER_AGENT,
                concat!("clawbot_router/", env!("CARGO_PKG_VERSION")),
            );
        if body.is_some() {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        for (name, value) in &self.headers {
            request = request.header(*name, value);
        }
        if let Some(key) = bearer {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {key}"));
        }
        let request = request
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("{} {path} failed: {e}", self.shown))?;
        Ok((response.status().as_u16(), response.into_body()))
    }

    /// One JSON request and its JSON answer, whole, within `within` and
    /// `max` bytes; a non-2xx answer is an error naming the status and
    /// what the service said.
    pub async fn json(
        &self,
        method: hyper::Method,
        path: &str,
        body: Option<&Value>,
        bearer: Option<&str>,
        within: Duration,
        max: usize,
    ) -> Result<Value, Failure> {
        let (status, value) = self
            .exchange(method, path, body, bearer, within, max)
            .await?;
        if !(200..300).contains(&status) {
            return Err(Failure::Status(status, said(&value)));
        }
        Ok(value)
    }

    /// As [`Self::json`], but any status is an answer: the status and the
    /// body read as JSON (`null` when empty; an error answer that is not
    /// JSON as a string of its first 500 characters), for a caller that
    /// reads the service's error model itself.
    pub async fn exchange(
        &self,
        method: hyper::Method,
        path: &str,
        body: Option<&Value>,
        bearer: Option<&str>,
        within: Duration,
        max: usize,
    ) -> Result<(u16, Value), Failure> {
        let work = async {
            let (status, body) = self
                .send(method, path, body, bearer, "application/json")
                .await
                .map_err(Failure::Network)?;
            // Too large is the service's answer (its fault); broken, the way.
            let bytes = read_all(body, max).await.map_err(|e| match e {
                Unread::Broken(why) => Failure::Network(why),
                Unread::TooLarge(why) => Failure::Status(status, why),
            })?;
            let value: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
                Value::Null
            } else {
                match serde_json::from_slice(&bytes) {
                    Ok(value) => value,
                    // An error answer in plain text keeps its words.
                    Err(_) if !(200..300).contains(&status) => {
                        Value::String(String::from_utf8_lossy(&bytes).chars().take(500).collect())
                    }
                    Err(e) => {
                        return Err(Failure::Status(
                            status,
                            format!("the answer is not JSON ({e})"),
                        ));
                    }
                }
            };
            Ok((status, value))
        };
        tokio::time::timeout(within, work)
            .await
            .unwrap_or_else(|_| {
                Err(Failure::Network(format!(
                    "{} {path} took longer than {within:?}",
                    self.shown
                )))
            })
    }

    async fn connect(&self) -> Result<TokioIo<MaybeTlsStream<TcpStream>>, String> {
        let seen = transport::Seen::default();
        let stream = transport::open_stream(&self.target, &Trust::default(), &seen)
            .await
            .map_err(|e| match e.to_string() {
                // The gateway's hint names a flag the links do not have.
                m if m.contains("--tls-fingerprint") => format!(
                    "TLS: this system has no trusted certificates to verify {} with (install the CA certificates)",
                    self.shown
                ),
                m => m,
            })?;
        Ok(TokioIo::new(stream))
    }
}

/// Why a request failed: the network (worth retrying), or the service's
/// answer (its status and what it said).
#[derive(Debug, Clone)]
pub enum Failure {
    Network(String),
    Status(u16, String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Network(why) => f.write_str(why),
            Failure::Status(status, said) => write!(f, "HTTP {status}: {said}"),
        }
    }
}

/// What an error answer says: seed 001's `{error: {code, message}}`, a
/// plain `{error: "…"}`, or the body itself, cut short.
fn said(value: &Value) -> String {
    let error = &value["error"];
    let text = match (
        error["code"].as_str(),
        error["message"].as_str(),
        error.as_str(),
    ) {
        (Some(code), Some(message), _) => format!("{code}: {message}"),
        (None, Some(message), _) => message.to_owned(),
        (_, _, Some(text)) => text.to_owned(),
        _ => match value {
            Value::String(text) => text.clone(),
            _ => value.to_string(),
        },
    };
    crate::shared::escape::line(&text.chars().take(500).collect::<String>()).into_owned()
}

/// `text` as one URL query component: unreserved characters as they
/// are, every other byte of its UTF-8 as `%XX`.
pub fn query_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Why a body was not read whole.
pub enum Unread {
    /// The connection broke off.
    Broken(String),
    /// The service answered more than it may.
    TooLarge(String),
}

/// The whole body, or an error past `max` bytes.
pub async fn read_all(mut body: Incoming, max: usize) -> Result<Vec<u8>, Unread> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Unread::Broken(format!("the answer broke off: {e}")))?;
        if let Some(data) = frame.data_ref() {
            if bytes.len() + data.len() > max {
                return Err(Unread::TooLarge(format!(
                    "the answer is larger than {max} bytes"
                )));
            }
            bytes.extend_from_slice(data);
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_are_local_unless_allowed_and_never_plaintext_to_the_internet() {
        let s = Service::parse("http://127.0.0.1:8765/", false).unwrap();
        assert_eq!(s.shown(), "http://127.0.0.1:8765");
        assert_eq!(
            Service::parse("http://localhost:1/api/", false)
                .unwrap()
                .prefix,
            "/api"
        );
        assert!(
            Service::parse("http://10.0.0.5:80", false)
                .unwrap_err()
                .contains("--allow-remote")
        );
        assert!(Service::parse("http://10.0.0.5:80", true).is_ok());
        assert!(
            Service::parse("http://example.com", true)
                .unwrap_err()
                .contains("plaintext")
        );
        assert!(Service::parse("https://example.com", true).is_ok());
        assert!(Service::parse("ftp://x", true).is_err());
        assert!(Service::parse("http://127.0.0.1/?a=1", false).is_err());
    }

    #[test]
    fn query_components_escape_everything_but_unreserved() {
        assert_eq!(query_component("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(
            query_component("x&kind=daily#/é %"),
            "x%26kind%3Ddaily%23%2F%C3%A9%20%25"
        );
    }

    #[test]
    fn error_answers_are_told_in_a_line() {
        let v = serde_json::json!({"error": {"code": "NOT_FOUND", "message": "no such session", "details": {}}});
        assert_eq!(said(&v), "NOT_FOUND: no such session");
        assert_eq!(
            said(&serde_json::json!({"error": "bad\u{1b}[2J"})),
            "bad\\u{1b}[2J"
        );
    }
}
