//! The node's browser in tests: Debian's Chromium (installed when missing)
//! and the test page (tests/fixtures/browser) served on loopback.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use super::gateway::{Config, FakeGateway};
use super::node::{Node, connected, payload};
use serde_json::{Value, json};

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

/// What a handler answers: status line, content type, body.
pub type Answer = (&'static str, String, Vec<u8>);

/// A loopback HTTP/1.0 server on `ip`; its base URL and every request
/// target it saw.
pub fn serve(
    ip: &str,
    handler: impl Fn(&str) -> Answer + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&hits);
    let handler = Arc::new(handler);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (seen, handler) = (Arc::clone(&seen), Arc::clone(&handler));
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
                let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                seen.lock().unwrap().push(target.clone());
                let (status, head, body) = handler(&target);
                let mut out = &stream;
                let _ = write!(
                    out,
                    "HTTP/1.0 {status}\r\n{head}Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = out.write_all(&body);
            });
        }
    });
    (format!("http://{ip}:{port}"), hits)
}

/// Serves tests/fixtures/browser on a loopback port; its base URL.
pub fn serve_fixtures() -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/browser");
    serve("127.0.0.1", move |target| {
        let path = target
            .split('?')
            .next()
            .unwrap_or("/")
            .trim_start_matches('/');
        let path = if path.is_empty() { "index.html" } else { path };
        match std::fs::read(root.join(path)) {
            Ok(body) if !path.contains("..") => {
                let kind = if path.ends_with(".html") {
                    "text/html; charset=utf-8"
                } else {
                    "text/plain"
                };
                ("200 OK", format!("Content-Type: {kind}\r\n"), body)
            }
            _ => ("404 Not Found", String::new(), b"not found".to_vec()),
        }
    })
    .0
}

/// A node connected to a fake gateway, driving Debian's Chromium, its
/// risky calls allowed, with `extra` flags.
pub async fn browser_node(extra: &[&str]) -> (FakeGateway, Node) {
    let browser = chromium();
    let mut args = vec!["--browser", browser.as_str(), "--approval", "allow"];
    args.extend(extra);
    connected(Config::default(), &args).await
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

/// One proxied route; the node's payload.
pub async fn route(gw: &FakeGateway, method: &str, path: &str, body: Value) -> Value {
    route_in(gw, method, path, body, 20_000).await
}

/// The same with the agent's own `timeoutMs`.
pub async fn route_in(gw: &FakeGateway, method: &str, path: &str, body: Value, ms: u64) -> Value {
    let params = json!({ "method": method, "path": path, "body": body, "timeoutMs": ms, "errorEnvelope": "browser-v1" });
    payload(&gw.invoke("browser.proxy", params).await)
}

/// A page's answer for [`serve`].
pub fn html(body: String) -> Answer {
    (
        "200 OK",
        "Content-Type: text/html; charset=utf-8\r\n".into(),
        body.into_bytes(),
    )
}

/// A process's peak resident memory so far, in MiB.
pub fn peak_mib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        >> 10
}

/// A route that must succeed; its result.
pub async fn ok(gw: &FakeGateway, method: &str, path: &str, body: Value) -> Value {
    let p = route(gw, method, path, body).await;
    assert!(p.get("error").is_none(), "{method} {path}: {p}");
    p["result"].clone()
}

pub async fn get(gw: &FakeGateway, path: &str, query: Value) -> Value {
    let params = json!({ "method": "GET", "path": path, "query": query, "timeoutMs": 20000, "errorEnvelope": "browser-v1" });
    let p = payload(&gw.invoke("browser.proxy", params).await);
    assert!(p.get("error").is_none(), "GET {path}: {p}");
    p["result"].clone()
}

pub async fn snapshot(gw: &FakeGateway) -> String {
    let s = get(gw, "/snapshot", json!({ "format": "ai" })).await;
    s["snapshot"].as_str().unwrap().to_owned()
}

/// Opens `url` as the browser's first tab: `t1` and the only one listed
/// (no blank tab of the browser's own beside it, as OpenClaw's first is
/// `t1`), the browser running after it. The tab.
pub async fn open_first_tab(gw: &FakeGateway, url: &str) -> Value {
    let tab = ok(gw, "POST", "/tabs/open", json!({ "url": url })).await;
    assert_eq!(tab["tabId"], "t1", "{tab}");
    let tabs = get(gw, "/tabs", json!({})).await;
    assert_eq!(tabs["tabs"].as_array().unwrap().len(), 1, "{tabs}");
    assert_eq!(get(gw, "/", json!({})).await["running"], true);
    tab
}
