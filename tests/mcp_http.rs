//! `clawbot_router mcp --http` on the wire, byte by byte: the flags, the
//! gate (path, token, `Host` and `Origin`), and what strangers and careless
//! clients do to it — connections held idle, standing SSE streams, sessions
//! by the hundred, calls by the dozen, a client hanging up mid-call. The
//! official clients drive the same server end to end in
//! tests/mcp_client.rs.

#![cfg(unix)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{FAKE, assert_all_gone, router, wait_for_pids};
use serde_json::{Value, json};

/// The bounds README.md documents ("Limits" of `mcp --http`).
const PER_ADDRESS: usize = 64;
const REQUESTS_PER_SESSION: usize = 16;
/// How many connections the server served at once before it had bounds
/// per address: anything a test needs past this once locked everyone out.
const SERVED_BEFORE: usize = 128;

/// How long an answer may take before the test calls it missing.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

#[test]
fn http_addresses_and_tokens_are_checked_before_listening() {
    common::assert_usage_errors(
        ("CLAWBOT_ROUTER_UNUSED", ""),
        &[
            (&["mcp", "--http", "10.1.2.3:8931"], "needs a bearer token"),
            (
                &["mcp", "--http", "127.0.0.1:8931", "--http-token", "t"],
                "visible to every user",
            ),
            (&["mcp", "--http", "nowhere"], "not an address"),
        ],
    );
    common::assert_usage_errors(
        ("CLAWBOT_ROUTER_MCP_TOKEN", "a-token"),
        &[
            (&["mcp", "--http", "0.0.0.0:8931"], "every interface"),
            (&["mcp", "--http", "8.8.8.8:8931"], "public address"),
        ],
    );
}

/// `mcp --http` on a port of its own with the fake openclaw in `scenario`,
/// stopped when the test ends, however it ends.
struct HttpServer {
    child: Child,
    port: u16,
    /// What the server wrote on stderr.
    log: tempfile::NamedTempFile,
}

impl HttpServer {
    fn start(env: &[(&str, &str)]) -> Self {
        Self::with(&["--scenario", "reply"], &[], env)
    }

    fn with(scenario: &[&str], args: &[&str], env: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut words = vec![FAKE];
        words.extend(scenario);
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = router()
            .env("OPENCLAW_BIN", shell_words::join(&words))
            .envs(env.iter().copied())
            .args(["mcp", "--lang", "en", "--grace", "0.5"])
            .args(args)
            .args(["--http", &format!("127.0.0.1:{port}")])
            .stderr(Stdio::from(log.reopen().unwrap()))
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "mcp --http did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        HttpServer { child, port, log }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap()
    }
}

impl Drop for HttpServer {
    /// SIGTERM first, so that calls still running stop their trees; KILL
    /// if that takes too long.
    fn drop(&mut self) {
        // SAFETY: a plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP connection to the server from `source`, a loopback address of its
/// own (`[127, 0, 0, 2]`), so that one test can be several peers.
fn connect_from(source: [u8; 4], port: u16) -> TcpStream {
    use std::os::fd::FromRawFd;
    let address = |ip: [u8; 4], port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor this function owns until
    // it becomes the TcpStream's.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        let from = address(source, 0);
        let to = address([127, 0, 0, 1], port);
        assert_eq!(
            libc::bind(fd, (&raw const from).cast(), len),
            0,
            "bind {source:?}: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(
            libc::connect(fd, (&raw const to).cast(), len),
            0,
            "connect: {}",
            std::io::Error::last_os_error()
        );
        stream
    }
}

/// A response as it came: status, headers (names lowercase), and the body
/// read so far (all of it unless it streams).
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 connection spoken to by hand, kept open between requests.
struct Conn {
    tcp: TcpStream,
    read: Vec<u8>,
    port: u16,
}

const JSON_AND_SSE: &str = "application/json, text/event-stream";

impl Conn {
    fn open(port: u16) -> Conn {
        Self::open_from([127, 0, 0, 1], port)
    }

    fn open_from(source: [u8; 4], port: u16) -> Conn {
        let tcp = connect_from(source, port);
        tcp.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
        Conn {
            tcp,
            read: Vec::new(),
            port,
        }
    }

    fn send(&mut self, method: &str, headers: &[(&str, &str)], body: &str) {
        let mut request = format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: {JSON_AND_SSE}\r\n",
            self.port
        );
        for (name, value) in headers {
            request += &format!("{name}: {value}\r\n");
        }
        if method == "POST" {
            request += &format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            );
        }
        request += "\r\n";
        request += body;
        self.tcp.write_all(request.as_bytes()).unwrap();
    }

    /// More bytes; false at end of stream or when none came in time.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        match self.tcp.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.read.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// The next response's status and headers; None if none came.
    fn head(&mut self) -> Option<Response> {
        let end = loop {
            if let Some(i) = self.read.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            if !self.fill() {
                return None;
            }
        };
        let head = String::from_utf8_lossy(&self.read[..end]).into_owned();
        self.read.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Some(Response {
            status,
            headers,
            body: String::new(),
        })
    }

    /// A whole response (its body read to its end); None if it did not
    /// come in time.
    fn response(&mut self) -> Option<Response> {
        let mut response = self.head()?;
        if let Some(length) = response.header("content-length") {
            let length: usize = length.parse().ok()?;
            while self.read.len() < length {
                if !self.fill() {
                    return None;
                }
            }
            response.body = String::from_utf8_lossy(&self.read[..length]).into_owned();
            self.read.drain(..length);
        } else if response.header("transfer-encoding") == Some("chunked") {
            response.body = self.chunks_to_end()?;
        }
        Some(response)
    }

    /// A chunked body up to its last chunk; None if it did not end in time.
    fn chunks_to_end(&mut self) -> Option<String> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = self.read.windows(2).position(|w| w == b"\r\n") {
                    break i;
                }
                if !self.fill() {
                    return None;
                }
            };
            let size =
                usize::from_str_radix(String::from_utf8_lossy(&self.read[..line_end]).trim(), 16)
                    .ok()?;
            while self.read.len() < line_end + 2 + size + 2 {
                if !self.fill() {
                    return None;
                }
            }
            body.extend_from_slice(&self.read[line_end + 2..line_end + 2 + size]);
            self.read.drain(..line_end + 2 + size + 2);
            if size == 0 {
                return Some(String::from_utf8_lossy(&body).into_owned());
            }
        }
    }

    /// True once the server has ended what it was sending (the last chunk,
    /// or the connection closed); false if it still streams after `wait`.
    fn ended_within(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        self.tcp
            .set_read_timeout(Some(wait.min(Duration::from_millis(200))))
            .unwrap();
        let mut chunk = [0u8; 16 * 1024];
        while Instant::now() < deadline {
            if self.read.windows(5).any(|w| w == b"0\r\n\r\n") {
                return true;
            }
            match self.tcp.read(&mut chunk) {
                Ok(0) => return true,
                Ok(n) => self.read.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return true,
            }
        }
        false
    }

    /// True once the server has closed this connection (within
    /// [`ANSWER_WITHIN`]).
    fn closed(&mut self) -> bool {
        let deadline = Instant::now() + ANSWER_WITHIN;
        self.tcp
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut chunk = [0u8; 16 * 1024];
        while Instant::now() < deadline {
            match self.tcp.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return true,
            }
        }
        false
    }
}

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
}

/// A session begun from `source` on a connection of its own (closed after):
/// its id, or None if the server did not answer or refused.
fn try_session_from(source: [u8; 4], port: u16) -> Option<String> {
    let mut conn = Conn::open_from(source, port);
    conn.send("POST", &[("Connection", "close")], &initialize_body());
    let response = conn.response()?;
    if response.status != 200 {
        return None;
    }
    let session = response.header("mcp-session-id")?.to_owned();
    // The handshake's end, on the same terms.
    let mut conn = Conn::open_from(source, port);
    conn.send(
        "POST",
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Connection", "close"),
        ],
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    );
    (conn.response()?.status == 202).then_some(session)
}

fn session(port: u16) -> String {
    try_session_from([127, 0, 0, 1], port).expect("the server begins a session")
}

fn session_headers(session: &str) -> [(&str, &str); 2] {
    [
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ]
}

/// The session's standing SSE stream (GET) on a connection of its own,
/// from `source`; None if the server did not open it.
fn stream_from(source: [u8; 4], port: u16, session: &str) -> Option<Conn> {
    let mut conn = Conn::open_from(source, port);
    conn.send("GET", &session_headers(session), "");
    let head = conn.head()?;
    (head.status == 200).then_some(conn)
}

/// A `tools/call` sent on `conn` (its answer not read).
fn send_call(conn: &mut Conn, session: &str, id: u64, message: &str) {
    conn.send(
        "POST",
        &session_headers(session),
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "clawbot_router", "arguments": {"message": message}}})
        .to_string(),
    );
}

/// The JSON-RPC answer in an SSE body.
fn sse_answer(body: &str) -> Value {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC answer in {body:?}"))
}

/// A call that answers, on a connection from `source` — proof that the
/// server serves this client.
fn assert_served(source: [u8; 4], port: u16, why: &str) {
    let session = try_session_from(source, port)
        .unwrap_or_else(|| panic!("a new client from {source:?} was locked out: {why}"));
    let mut conn = Conn::open_from(source, port);
    send_call(&mut conn, &session, 7, "still served");
    let response = conn
        .response()
        .unwrap_or_else(|| panic!("a call from {source:?} got no answer: {why}"));
    assert_eq!(response.status, 200, "{response:?}");
    let answer = sse_answer(&response.body);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
}

// ---- the gate ---------------------------------------------------------------

#[test]
fn http_answers_initialize_and_refuses_browsers_strangers_and_other_paths() {
    let mut http = HttpServer::start(&[]);
    let port = http.port;
    let mut conn = Conn::open(port);
    conn.send("POST", &[], &initialize_body());
    let response = conn.response().expect("an answer");
    assert_eq!(response.status, 200, "{response:?}");
    assert!(response.header("mcp-session-id").is_some(), "{response:?}");
    assert!(response.body.contains("clawbot_router"), "{response:?}");
    let status = |request: String| {
        let mut conn = Conn::open(port);
        conn.tcp.write_all(request.as_bytes()).unwrap();
        conn.response().expect("an answer").status
    };
    let body = initialize_body();
    let post = |path: &str, host: &str, extra: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: {JSON_AND_SSE}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let here = format!("127.0.0.1:{port}");
    assert_eq!(
        status(post("/mcp", &here, "Origin: http://evil.example\r\n")),
        403
    );
    assert_eq!(status(post("/mcp", "evil.example", "")), 403);
    assert_eq!(status(post("/elsewhere", &here, "")), 404);
    // SIGTERM: stops, exit 0.
    unsafe {
        libc::kill(http.child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    let code = loop {
        if let Some(status) = http.child.try_wait().unwrap() {
            break status.code();
        }
        assert!(Instant::now() < deadline, "mcp --http did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
}

#[test]
fn http_a_request_without_a_session_is_told_to_send_initialize_first() {
    let http = HttpServer::start(&[]);
    let mut conn = Conn::open(http.port);
    conn.send(
        "POST",
        &[("Connection", "close")],
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}).to_string(),
    );
    let response = conn.response().expect("an answer");
    assert_eq!(response.status, 400, "{response:?}");
    let error: Value = serde_json::from_str(response.body.trim()).expect("a JSON-RPC error");
    assert_eq!(error["id"], 7, "{error}");
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("send initialize first")),
        "{error}"
    );
    // initialize still opens a session.
    session(http.port);
}

/// Before a session, HTTP answers as stdio does: a `ping` its empty result
/// (MCP allows pings before `initialize`), and an id JSON-RPC does not
/// allow (an object) is an invalid request, not echoed back.
#[test]
fn http_before_a_session_a_ping_is_answered_and_an_odd_id_refused() {
    let http = HttpServer::start(&[]);
    let post = |body: Value| {
        let mut conn = Conn::open(http.port);
        conn.send("POST", &[("Connection", "close")], &body.to_string());
        conn.response().expect("an answer")
    };
    let pong = post(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert_eq!(pong.status, 200, "{pong:?}");
    let pong: Value = serde_json::from_str(pong.body.trim()).expect("a JSON-RPC answer");
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    let odd = post(json!({"jsonrpc": "2.0", "id": {"x": [1]}, "method": "tools/list"}));
    assert_eq!(odd.status, 400, "{odd:?}");
    let odd: Value = serde_json::from_str(odd.body.trim()).expect("a JSON-RPC error");
    assert_eq!(odd["id"], Value::Null, "{odd}");
    assert_eq!(odd["error"]["code"], -32600, "{odd}");
}

#[test]
fn http_with_a_token_takes_no_request_without_it() {
    let http = HttpServer::start(&[("CLAWBOT_ROUTER_MCP_TOKEN", "raw-http-token-7")]);
    let post = |auth: &[(&str, &str)]| {
        let mut conn = Conn::open(http.port);
        conn.send("POST", auth, &initialize_body());
        conn.response().expect("an answer")
    };
    let response = post(&[]);
    assert_eq!(response.status, 401);
    assert_eq!(response.header("www-authenticate"), Some("Bearer"));
    assert_eq!(post(&[("Authorization", "Bearer wrong")]).status, 401);
    assert_eq!(post(&[("Authorization", "raw-http-token-7")]).status, 401);
    assert_eq!(
        post(&[("Authorization", "Bearer raw-http-token-7")]).status,
        200
    );
    // The scheme's name is case-insensitive.
    assert_eq!(
        post(&[("Authorization", "bearer raw-http-token-7")]).status,
        200
    );
}

/// The DNS-rebinding rule on loopback (the official conformance suite's
/// `dns-rebinding-protection`, and more): a page this machine serves from
/// its own loopback names may reach it, on any port and either scheme; a
/// foreign name, in `Host` or `Origin`, may not.
#[test]
fn a_loopback_server_takes_its_own_loopback_names_in_host_and_origin() {
    let http = HttpServer::start(&[]);
    let port = http.port;
    let status = |host: &str, origin: Option<&str>| {
        let body = initialize_body();
        let origin = origin.map_or(String::new(), |o| format!("Origin: {o}\r\n"));
        let mut conn = Conn::open(port);
        conn.tcp
            .write_all(
                format!(
                    "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\nAccept: {JSON_AND_SSE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .unwrap();
        conn.response().expect("an answer").status
    };
    let here = format!("127.0.0.1:{port}");
    for (host, origin) in [
        (here.clone(), Some(format!("http://{here}"))),
        (
            format!("localhost:{port}"),
            Some(format!("http://localhost:{port}")),
        ),
        (
            format!("[::1]:{port}"),
            Some(format!("http://[::1]:{port}")),
        ),
        (here.clone(), Some("http://localhost:5173".to_owned())),
        (here.clone(), Some("https://localhost".to_owned())),
        (here.clone(), Some("http://[::1]:3000".to_owned())),
        (here.clone(), Some("http://127.0.0.1".to_owned())),
        ("localhost".to_owned(), None),
    ] {
        assert_eq!(
            status(&host, origin.as_deref()),
            200,
            "Host {host}, Origin {origin:?}"
        );
    }
    for (host, origin) in [
        (
            "evil.example.com".to_owned(),
            Some("http://evil.example.com"),
        ),
        ("evil.example.com".to_owned(), None),
        (format!("evil.example.com:{port}"), None),
        (here.clone(), Some("http://evil.example.com")),
        (here.clone(), Some("http://localhost.evil.example")),
        (here.clone(), Some("http://127.0.0.2:8080")),
        (here.clone(), Some("null")),
        (here.clone(), Some("file://")),
        (here.clone(), Some("not an origin")),
    ] {
        assert_eq!(status(&host, origin), 403, "Host {host}, Origin {origin:?}");
    }
}

// ---- hostile and careless peers ------------------------------------------

#[test]
fn idle_keep_alive_connections_cannot_lock_a_new_client_out() {
    let http = HttpServer::start(&[]);
    let port = http.port;
    // More connections than the server ever served at once, each served
    // one request and then held open doing nothing.
    let mut held = Vec::new();
    for n in 0..SERVED_BEFORE + 2 {
        let mut conn = Conn::open(port);
        conn.tcp
            .write_all(
                format!("GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
            )
            .unwrap();
        let response = conn.response();
        assert!(
            response.as_ref().is_some_and(|r| r.status == 404),
            "connection {n} was not served while {n} idle ones were held: {response:?}"
        );
        held.push(conn);
    }
    // The oldest went to make room, those of the last bound stay.
    assert!(held[0].closed(), "the least recently used went first");
    let kept = held.split_off(held.len() - (PER_ADDRESS - 1));
    drop(held);
    assert_served([127, 0, 0, 1], port, "idle connections held the server");
    drop(kept);
}

#[test]
fn request_bodies_trickling_in_cannot_lock_a_new_client_out() {
    let http = HttpServer::start(&[]);
    let port = http.port;
    // Each sends a request head and a few bytes of the body it announced,
    // then nothing (the server would wait 30 s for the next piece).
    let mut held = Vec::new();
    for _ in 0..SERVED_BEFORE + 2 {
        let mut conn = Conn::open(port);
        conn.tcp
            .write_all(
                format!(
                    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: {JSON_AND_SSE}\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\""
                )
                .as_bytes(),
            )
            .unwrap();
        held.push(conn);
        // The server has read that head once it has answered a request
        // sent after it (from an address of its own, to take no place
        // from these).
        let mut probe = Conn::open_from([127, 0, 0, 9], port);
        probe
            .tcp
            .write_all(
                format!(
                    "GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
        assert!(probe.response().is_some_and(|r| r.status == 404));
    }
    assert_served(
        [127, 0, 0, 1],
        port,
        "request bodies trickling in held the server",
    );
    assert!(held[0].closed(), "the one trickling longest went");
}

/// Bodies held at once, all connections together, are bounded: four
/// nearly whole 16 MiB bodies fill the 64 MiB, and the next body is told
/// to come back rather than held. Once they go, it is served.
#[test]
fn the_request_bodies_held_at_once_are_bounded() {
    let http = HttpServer::start(&[]);
    let port = http.port;
    let announced = 16 << 20;
    let sent = announced - 10;
    let mut held = Vec::new();
    for source in 2..6u8 {
        let mut conn = Conn::open_from([127, 0, 0, source], port);
        conn.tcp
            .write_all(
                format!(
                    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: {JSON_AND_SSE}\r\nContent-Length: {announced}\r\n\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
        conn.tcp.write_all(&vec![b' '; sent]).unwrap();
        held.push(conn);
    }
    // Once the server has read what they sent (bodies are read as they
    // come), a small body more is refused.
    let deadline = std::time::Instant::now() + ANSWER_WITHIN;
    let response = loop {
        let mut probe = Conn::open_from([127, 0, 0, 9], port);
        probe.send("POST", &[], &initialize_body());
        let response = probe.response().expect("an answer");
        if response.status == 503 || std::time::Instant::now() > deadline {
            break response;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        response.status, 503,
        "a body was taken while 4 x 16 MiB were held: {response:?}"
    );
    assert_eq!(response.header("retry-after"), Some("1"));
    drop(held);
    let deadline = std::time::Instant::now() + ANSWER_WITHIN;
    while try_session_from([127, 0, 0, 9], port).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "what the gone bodies held was not given back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn standing_streams_of_one_address_cannot_lock_another_out() {
    let http = HttpServer::start(&[]);
    let port = http.port;
    let stranger = [127, 0, 0, 2];
    let mut streams = Vec::new();
    for _ in 0..SERVED_BEFORE + 2 {
        let Some(session) = try_session_from(stranger, port) else {
            break;
        };
        let Some(stream) = stream_from(stranger, port, &session) else {
            break;
        };
        streams.push(stream);
    }
    assert_served(
        [127, 0, 0, 1],
        port,
        &format!("another address held {} standing streams", streams.len()),
    );
    // A standing stream counts against its address: at most its bound of
    // them still stream.
    // (Those that ended did so as the newer ones opened: their end is in
    // the socket, or on its way on a loaded machine.)
    let mut ended = vec![false; streams.len()];
    let deadline = Instant::now() + ANSWER_WITHIN;
    let open = loop {
        for (stream, ended) in streams.iter_mut().zip(&mut ended) {
            *ended = *ended || stream.ended_within(Duration::from_millis(10));
        }
        let open = ended.iter().filter(|e| !**e).count();
        if open <= PER_ADDRESS || Instant::now() > deadline {
            break open;
        }
    };
    assert!(open <= PER_ADDRESS, "{open} streams of one address");
    assert!(open > 0, "the newest streams stay");
}

#[test]
fn a_session_keeps_one_standing_stream_the_newest() {
    let http = HttpServer::start(&[]);
    let port = http.port;
    let session = session(port);
    let mut first = stream_from([127, 0, 0, 1], port, &session).expect("a stream");
    let mut second = stream_from([127, 0, 0, 1], port, &session).expect("a second stream");
    assert!(
        first.ended_within(ANSWER_WITHIN),
        "the older stream of the session ends"
    );
    assert!(
        !second.ended_within(Duration::from_secs(1)),
        "the newer stream stays"
    );
    // And the first's connection serves the next request.
    let mut conn = first;
    conn.read.clear();
    conn.send(
        "POST",
        &session_headers(&session),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}).to_string(),
    );
    let response = conn.response().expect("an answer");
    assert_eq!(sse_answer(&response.body)["result"], json!({}));
}

#[test]
fn a_session_runs_a_bounded_number_of_requests_at_once() {
    let http = HttpServer::with(&["--scenario", "sleep", "--sleep", "30"], &[], &[]);
    let port = http.port;
    let session = session(port);
    let mut calls: Vec<Conn> = (0..REQUESTS_PER_SESSION)
        .map(|i| {
            let mut conn = Conn::open(port);
            send_call(&mut conn, &session, 10 + i as u64, "slow");
            let head = conn.head().expect("the call's stream opens");
            assert_eq!(head.status, 200);
            conn
        })
        .collect();
    let mut one_more = Conn::open(port);
    send_call(&mut one_more, &session, 99, "one too many");
    let refused = one_more.response().expect("an answer");
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(
        refused.body.contains(&format!(
            "this session has {REQUESTS_PER_SESSION} requests in flight"
        )),
        "{refused:?}"
    );
    // Another session is not held back by it.
    let other = self::session(port);
    let mut conn = Conn::open(port);
    conn.send(
        "POST",
        &session_headers(&other),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    );
    assert_eq!(conn.response().expect("an answer").status, 200);
    // One of its calls answered (here: its client gone): room for one more.
    drop(calls.pop());
    let deadline = Instant::now() + ANSWER_WITHIN;
    loop {
        let mut again = Conn::open(port);
        send_call(&mut again, &session, 100, "room again");
        let head = again.head().expect("an answer");
        if head.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no room after a call ended");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_call_whose_client_hangs_up_is_cancelled_and_its_tree_stopped() {
    let dir = common::tempdir();
    let pid_file = dir.path().join("pids");
    let http = HttpServer::with(
        &[
            "--scenario",
            "grandchild",
            "--pid-file",
            pid_file.to_str().unwrap(),
        ],
        &["--timeout", "300"],
        &[],
    );
    let session = session(http.port);
    let mut conn = Conn::open(http.port);
    // Its id is the client's text, told on stderr when it hangs up.
    conn.send(
        "POST",
        &session_headers(&session),
        &json!({"jsonrpc": "2.0", "id": "a\u{1b}[2Jb\u{9b}31mc\u{202e}d", "method": "tools/call",
                "params": {"name": "clawbot_router", "arguments": {"message": "hang"}}})
        .to_string(),
    );
    assert_eq!(conn.head().expect("the call's stream opens").status, 200);
    let tree = wait_for_pids(&pid_file, 2);
    drop(conn);
    // Within --grace (0.5 s) and a moment, not --timeout's 300 s.
    let deadline = Instant::now() + ANSWER_WITHIN;
    while tree.iter().any(|p| common::alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_all_gone(&tree);
    // The line follows the stop (under load, a moment later).
    let told = |log: &str| log.contains("b\\u{9b}31mc\\u{202e}d\" was answered");
    let deadline = Instant::now() + ANSWER_WITHIN;
    while !told(&http.stderr()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = http.stderr();
    assert!(
        told(&log) && !log.contains(['\u{1b}', '\u{9b}', '\u{202e}']),
        "told escaped: {log:?}"
    );
    // The session lives on.
    let mut conn = Conn::open(http.port);
    conn.send(
        "POST",
        &session_headers(&session),
        &json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}).to_string(),
    );
    assert_eq!(conn.response().expect("an answer").status, 200);
}

#[test]
fn sessions_by_the_hundred_end_the_least_recently_used_not_the_newest() {
    let http = HttpServer::start(&[]);
    let port = http.port;
    let sessions: Vec<String> = (0..PER_ADDRESS + 1).map(|_| session(port)).collect();
    let ping = |session: &str| {
        let mut conn = Conn::open(port);
        conn.send(
            "POST",
            &session_headers(session),
            &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string(),
        );
        conn.response().expect("an answer").status
    };
    // The first, unused since, made room for the last.
    assert_eq!(ping(&sessions[0]), 404, "the least recently used ended");
    assert_eq!(ping(&sessions[PER_ADDRESS]), 200);
    assert_eq!(ping(&sessions[1]), 200);
}

#[test]
fn an_address_whose_every_connection_runs_a_call_is_told_so_and_others_still_get_in() {
    let http = HttpServer::with(&["--scenario", "sleep", "--sleep", "30"], &[], &[]);
    let port = http.port;
    let busy = [127, 0, 0, 3];
    let sessions: Vec<String> = (0..PER_ADDRESS.div_ceil(REQUESTS_PER_SESSION))
        .map(|_| try_session_from(busy, port).expect("a session"))
        .collect();
    let _calls: Vec<Conn> = (0..PER_ADDRESS)
        .map(|i| {
            let mut conn = Conn::open_from(busy, port);
            send_call(
                &mut conn,
                &sessions[i / REQUESTS_PER_SESSION],
                i as u64,
                "slow",
            );
            assert_eq!(conn.head().expect("the call's stream opens").status, 200);
            conn
        })
        .collect();
    let mut one_more = Conn::open_from(busy, port);
    one_more.send("POST", &[], &initialize_body());
    let refused = one_more.response().expect("an answer");
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(
        refused.body.contains(&format!(
            "this address holds {PER_ADDRESS} connections to the server already, each running a request"
        )),
        "{refused:?}"
    );
    assert!(one_more.closed());
    let session = try_session_from([127, 0, 0, 4], port)
        .expect("another address is served while this one is full");
    let mut conn = Conn::open_from([127, 0, 0, 4], port);
    conn.send(
        "POST",
        &session_headers(&session),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    );
    assert_eq!(conn.response().expect("an answer").status, 200);
}
