//! A browser the node owner started and named (`--browser-cdp-url`), as
//! OpenClaw's `attachOnly` profiles with a `cdpUrl`: `http://HOST:PORT`
//! (its DevTools HTTP endpoint tells the browser's WebSocket, as
//! `/json/version`), or that WebSocket itself (`ws://…`, `wss://…`).
//!
//! Not ours: we never start or stop it. Its DevTools port is reachable by
//! whatever can reach that address, which is the owner's choice when they
//! name it (a pipe, as for the browsers we launch, cannot be attached to).
//! What we read from the endpoint is bounded (64 KiB of HTTP, messages of
//! [`MAX_MESSAGE`]) and its credentials (`user:pass@`, `?token=`) never
//! appear in a status, a log line or an error.

use std::time::Duration;

use hyper::Uri;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::cdp::{MAX_MESSAGE, Socket};

/// The most of the `/json/version` answer read.
const MAX_DISCOVERY: usize = 64 * 1024;

/// Checks a `--browser-cdp-url` as the owner wrote it.
pub fn check(url: &str) -> Result<(), String> {
    let uri: Uri = url
        .parse()
        .map_err(|_| format!("--browser-cdp-url {}: not a URL", shown(url)))?;
    match uri.scheme_str() {
        Some("http" | "ws" | "wss") => {}
        Some("https") => {
            return Err(format!(
                "--browser-cdp-url {}: name the browser's wss:// WebSocket instead (https discovery is not supported)",
                shown(url)
            ));
        }
        _ => {
            return Err(format!(
                "--browser-cdp-url {}: use http://HOST:PORT, ws://… or wss://…",
                shown(url)
            ));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("--browser-cdp-url {}: no host", shown(url)));
    }
    Ok(())
}

/// Whether the address is this machine's (OpenClaw's `isRemote` is not).
pub fn is_loopback(url: &str) -> bool {
    let Ok(uri) = url.parse::<Uri>() else {
        return false;
    };
    let host = uri.host().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The URL as it may be shown: no credentials, no query.
pub fn shown(url: &str) -> String {
    let Ok(uri) = url.parse::<Uri>() else {
        return "(not a URL)".into();
    };
    let host = uri.host().unwrap_or_default();
    let port = uri.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    let path = Some(uri.path()).filter(|p| *p != "/").unwrap_or("");
    format!("{}://{host}{port}{path}", uri.scheme_str().unwrap_or(""))
}

/// Opens the browser's DevTools WebSocket (`user:pass@` in the address
/// is sent as Basic authorisation, as OpenClaw sends it, to the HTTP
/// endpoint and the WebSocket both).
pub async fn connect(url: &str) -> Result<Socket, String> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let uri: Uri = url.parse().map_err(|_| "not a URL".to_owned())?;
    let socket_url = match uri.scheme_str() {
        Some("http") => discover(&uri).await?,
        _ => without_userinfo(&uri),
    };
    let mut request = socket_url.into_client_request().map_err(|_| {
        format!(
            "the browser at {} named a WebSocket that is no URL",
            shown(url)
        )
    })?;
    if let Some(basic) = basic_auth(&uri) {
        request
            .headers_mut()
            .insert(hyper::header::AUTHORIZATION, basic);
    }
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let (socket, _) = tokio_tungstenite::connect_async_with_config(request, Some(config), false)
        .await
        .map_err(|e| {
            format!(
                "the browser at {} did not open its DevTools WebSocket: {}",
                shown(url),
                scrub(&e.to_string(), url)
            )
        })?;
    Ok(socket)
}

/// The WebSocket `GET /json/version` names, pointed at the host and port
/// we reached (a browser reports its own loopback address, which is not
/// ours to reach through a port proxy, as from WSL to Windows), with the
/// owner's query (a token) kept.
async fn discover(uri: &Uri) -> Result<String, String> {
    let host = uri.host().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(80);
    let at = format!("{}://{host}:{port}", uri.scheme_str().unwrap_or("http"));
    let mut stream = tokio::net::TcpStream::connect((bare, port))
        .await
        .map_err(|e| format!("the browser at {at} is not reachable: {e}"))?;
    let base = uri.path().trim_end_matches('/');
    let authorization = basic_auth(uri)
        .and_then(|v| v.to_str().ok().map(|v| format!("Authorization: {v}\r\n")))
        .unwrap_or_default();
    let request = format!(
        "GET {base}/json/version HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n{authorization}Connection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("the browser at {at} is not reachable: {e}"))?;
    // Read to the body's Content-Length (Chromium keeps the connection
    // open), to the end, or to 64 KiB, whichever comes first.
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while answer.len() < MAX_DISCOVERY && !whole(&answer) {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("the browser at {at} did not answer: {e}"))?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..n]);
    }
    answer.truncate(MAX_DISCOVERY);
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!(
            "the browser at {at} answered /json/version with {}",
            if status.is_empty() { "no HTTP" } else { status }
        ));
    }
    let socket = serde_json::from_str::<Value>(body.trim())
        .ok()
        .and_then(|v| v["webSocketDebuggerUrl"].as_str().map(str::to_owned))
        .ok_or_else(|| format!("the browser at {at} named no webSocketDebuggerUrl"))?;
    let reported: Uri = socket
        .parse()
        .map_err(|_| format!("the browser at {at} named a WebSocket that is no URL"))?;
    if reported.scheme_str() != Some("ws") {
        return Err(format!("the browser at {at} named no ws:// WebSocket"));
    }
    let mut path = reported.path().to_owned();
    if let Some(query) = uri.query() {
        path = format!("{path}?{query}");
    }
    Ok(format!("ws://{host}:{port}{path}"))
}

/// `Basic …` of an address's `user:pass@`, if it has one.
fn basic_auth(uri: &Uri) -> Option<hyper::header::HeaderValue> {
    use base64::Engine;
    let (userinfo, _) = uri.authority()?.as_str().rsplit_once('@')?;
    let encoded = base64::engine::general_purpose::STANDARD.encode(userinfo);
    let mut value = hyper::header::HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// The address without its `user:pass@`.
fn without_userinfo(uri: &Uri) -> String {
    let authority = uri.authority().map_or("", |a| a.as_str());
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    format!("{}://{host}{path}", uri.scheme_str().unwrap_or("ws"))
}

/// Whether an HTTP answer holds its whole body (by its Content-Length).
fn whole(answer: &[u8]) -> bool {
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&answer[..end]);
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .is_some_and(|length| answer.len() >= (end + 4).saturating_add(length))
}

/// An error's words without the URL's secrets.
fn scrub(words: &str, url: &str) -> String {
    let mut out = words.replace(url, &shown(url));
    if let Ok(uri) = url.parse::<Uri>() {
        for secret in [
            uri.authority()
                .and_then(|a| a.as_str().rsplit_once('@'))
                .map(|(user, _)| user.to_owned()),
            uri.query().map(str::to_owned),
        ]
        .into_iter()
        .flatten()
        .filter(|s| !s.is_empty())
        {
            out = out.replace(&secret, "…");
        }
    }
    out
}

/// How long discovery and the handshake may take together.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_shown_without_secrets() {
        assert!(check("http://127.0.0.1:9222").is_ok());
        assert!(check("ws://h:9222/devtools/browser/x").is_ok());
        assert!(check("wss://u:p@cdp.example/?token=s").is_ok());
        assert!(check("https://h:9222").unwrap_err().contains("wss://"));
        assert!(is_loopback("http://127.0.0.1:9222") && is_loopback("ws://[::1]:1/x"));
        assert!(is_loopback("http://localhost:9222") && !is_loopback("http://10.0.0.2:9222"));
        assert!(check("ftp://h/x").unwrap_err().contains("http://HOST:PORT"));
        assert!(check("not a url at all").is_err());
        let shown = shown("wss://user:secret@cdp.example:443/chromium?token=s3cret");
        assert_eq!(shown, "wss://cdp.example:443/chromium");
        let e = scrub(
            "failed: wss://user:secret@cdp.example/x?token=s3cret refused user:secret",
            "wss://user:secret@cdp.example/x?token=s3cret",
        );
        assert!(!e.contains("secret") && !e.contains("s3cret"), "{e}");
    }

    #[test]
    fn an_answer_is_whole_at_its_content_length_not_at_the_end() {
        // Chromium keeps the connection open after its answer.
        assert!(whole(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"));
        assert!(!whole(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\n{}"));
        assert!(!whole(b"HTTP/1.1 200 OK\r\n\r\n{}"));
        assert!(!whole(b"HTTP/1.1 200 OK\r\nContent-Length: 2"));
        // A lying length is no panic, only an answer never whole.
        assert!(!whole(
            b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n{}"
        ));
    }

    /// A DevTools HTTP endpoint that answers `reply` once.
    async fn endpoint(reply: &'static [u8]) -> (u16, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 4096];
            let n = s.read(&mut request).await.unwrap();
            let _ = s.write_all(reply).await;
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        (port, task)
    }

    #[tokio::test]
    async fn discovery_points_the_socket_at_the_address_we_reached() {
        let (port, asked) = endpoint(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"webSocketDebuggerUrl\": \"ws://127.0.0.1:9222/devtools/browser/abc\"}",
        )
        .await;
        let uri: Uri = format!("http://me:pw@localhost:{port}/?token=t")
            .parse()
            .unwrap();
        let socket = discover(&uri).await.unwrap();
        assert_eq!(
            socket,
            format!("ws://localhost:{port}/devtools/browser/abc?token=t")
        );
        let asked = asked.await.unwrap();
        assert!(
            asked.starts_with("GET /json/version HTTP/1.1\r\n"),
            "{asked}"
        );
        // me:pw, as Basic authorisation.
        assert!(
            asked.contains("\r\nAuthorization: Basic bWU6cHc=\r\n"),
            "{asked}"
        );
        assert_eq!(
            without_userinfo(&"wss://me:pw@h:1/x?t=1".parse().unwrap()),
            "wss://h:1/x?t=1"
        );
    }

    #[tokio::test]
    async fn a_bad_endpoint_gets_a_clear_refusal() {
        let (port, _) = endpoint(b"HTTP/1.1 404 Not Found\r\n\r\n").await;
        let e = discover(&format!("http://127.0.0.1:{port}").parse().unwrap())
            .await
            .unwrap_err();
        assert!(e.contains("answered /json/version with 404"), "{e}");
        let (port, _) =
            endpoint(b"HTTP/1.1 200 OK\r\n\r\n{\"webSocketDebuggerUrl\": \"http://evil/\"}").await;
        let e = discover(&format!("http://127.0.0.1:{port}").parse().unwrap())
            .await
            .unwrap_err();
        assert!(e.contains("no ws:// WebSocket"), "{e}");
        // An endless answer is read to 64 KiB and refused, not held.
        static HUGE: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
            let mut v = b"HTTP/1.1 200 OK\r\n\r\n{\"webSocketDebuggerUrl\": \"".to_vec();
            v.resize(1 << 20, b'a');
            v
        });
        let (port, _) = endpoint(HUGE.as_slice()).await;
        let e = discover(&format!("http://127.0.0.1:{port}").parse().unwrap())
            .await
            .unwrap_err();
        assert!(e.contains("named no webSocketDebuggerUrl"), "{e}");
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let e = connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_err();
        assert!(e.contains("is not reachable"), "{e}");
    }
}
