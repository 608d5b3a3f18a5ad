//! A browser a user started (for the node's attach mode,
//! `--browser-cdp-url`): Debian's Chromium with a DevTools port on
//! loopback and a page of the user's own, and a plain client of its
//! DevTools HTTP endpoint.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::browser::chromium;

/// The user's own browser: DevTools on a loopback port, one tab open.
pub struct UserBrowser {
    child: Child,
    pub port: u16,
    /// Its user's home (where its Downloads go).
    pub home: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl UserBrowser {
    pub fn start(first_page: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home/Downloads")).unwrap();
        let child = Command::new(chromium())
            .args([
                "--headless=new",
                "--no-sandbox",
                "--no-first-run",
                "--disable-dev-shm-usage",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("profile").display()
            ))
            .arg(first_page)
            .env("HOME", dir.path().join("home"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let active = dir.path().join("profile/DevToolsActivePort");
        // Owned (stopped on drop) before anything can fail.
        let mut user = UserBrowser {
            child,
            port: 0,
            home: dir.path().join("home"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        user.port = loop {
            if let Some(port) = std::fs::read_to_string(&active)
                .ok()
                .and_then(|t| t.lines().next().and_then(|l| l.parse().ok()))
            {
                break port;
            }
            assert!(
                Instant::now() < deadline,
                "the user's browser never started"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        user
    }

    /// Its pages as its own DevTools HTTP endpoint lists them: (url, title).
    pub fn pages(&self) -> Vec<(String, String)> {
        let list: Value = serde_json::from_str(&http(self.port, "GET", "/json/list")).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .filter(|t| t["type"] == "page")
            .map(|t| {
                (
                    t["url"].as_str().unwrap().to_owned(),
                    t["title"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for UserBrowser {
    fn drop(&mut self) {
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// One request to a DevTools HTTP endpoint; the body (it keeps the
/// connection open: read to its Content-Length).
pub fn http(port: u16, method: &str, path: &str) -> String {
    use std::io::{BufRead, Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reader = std::io::BufReader::new(s);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    String::from_utf8(body).unwrap()
}

/// Waits (15 s at most) until `done`.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
