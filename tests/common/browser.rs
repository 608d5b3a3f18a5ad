//! The node's browser in tests: Debian's Chromium (installed when missing)
//! and the test page (tests/fixtures/browser) served on loopback.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The browser the tests drive, installed by scripts/chromium.sh when
/// missing (once per test binary): a missing one fails them, never skips.
pub fn chromium() -> String {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/chromium.sh");
        let out = std::process::Command::new("bash")
            .arg(script)
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("scripts/chromium.sh runs");
        assert!(
            out.status.success(),
            "scripts/chromium.sh found and installed no Chromium"
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
    .clone()
}

/// Serves tests/fixtures/browser on a loopback port (HTTP/1.0, one
/// request per connection); its base URL.
pub fn serve_fixtures() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/browser");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let root = root.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(&stream);
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) <= 2 {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/");
                let path = path
                    .split('?')
                    .next()
                    .unwrap_or("/")
                    .trim_start_matches('/');
                let path = if path.is_empty() { "index.html" } else { path };
                let (status, body) = match std::fs::read(root.join(path)) {
                    Ok(b) if !path.contains("..") => ("200 OK", b),
                    _ => ("404 Not Found", b"not found".to_vec()),
                };
                let kind = if path.ends_with(".html") {
                    "text/html; charset=utf-8"
                } else {
                    "text/plain"
                };
                let mut out = &stream;
                let _ = write!(
                    out,
                    "HTTP/1.0 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                let _ = out.write_all(&body);
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// The ref right after `needle` in a snapshot's text (raw, or inside an
/// agent's JSON-escaped result).
pub fn ref_after(snapshot: &str, needle: &str) -> String {
    let at = snapshot
        .find(needle)
        .unwrap_or_else(|| panic!("no {needle:?} in\n{snapshot}"));
    let rest = &snapshot[at..];
    let start = rest.find("[ref=").expect("a ref") + 5;
    rest[start..].split(']').next().unwrap().to_owned()
}
