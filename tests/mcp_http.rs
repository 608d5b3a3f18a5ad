//! `clawbot_router mcp --http` on the wire, byte by byte: the flags and
//! the gate (path, token, `Host` and `Origin`). The official clients drive
//! the same server end to end in tests/mcp_client.rs.

#![cfg(unix)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{FAKE, router};
use serde_json::json;

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
        let child = router()
            .env("OPENCLAW_BIN", shell_words::join(&words))
            .envs(env.iter().copied())
            .args(["mcp", "--lang", "en", "--grace", "0.5"])
            .args(args)
            .args(["--http", &format!("127.0.0.1:{port}")])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "mcp --http did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        HttpServer { child, port }
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
}

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
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
