//! Shared helpers for the integration tests: run the real binaries with a
//! clean environment and a watchdog, and read what they printed.
#![allow(dead_code)]

#[cfg(target_os = "linux")]
pub mod browser;
#[cfg(unix)]
pub mod claude;
pub mod claude_pages;
#[cfg(target_os = "linux")]
pub mod desktop;
#[cfg(unix)]
pub mod e2e;
pub mod gateway;
#[cfg(unix)]
pub mod node;
#[cfg(unix)]
pub mod ollama;
#[cfg(target_os = "linux")]
pub mod sensors;
#[cfg(unix)]
pub mod systemd;
#[cfg(target_os = "linux")]
pub mod user_browser;
#[cfg(target_os = "linux")]
pub mod vnc;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const ROUTER: &str = env!("CARGO_BIN_EXE_clawbot_router");
pub const FAKE: &str = env!("CARGO_BIN_EXE_fake-openclaw");

/// No test may take longer than this; a hung router fails instead of hanging.
const WATCHDOG: Duration = Duration::from_secs(60);

/// The router with an environment free of the user's settings.
pub fn router() -> Command {
    // A benchmark may measure another build (a release one, an older one).
    program(&std::env::var_os("CLAWBOT_BENCH_ROUTER").map_or(ROUTER.into(), PathBuf::from))
}

/// `program` (a build of ours) with that same clean environment.
pub fn program(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    without_our_settings(&mut cmd);
    cmd.stdin(Stdio::null());
    cmd
}

/// Removes every variable of ours, the fake's and OpenClaw's the test
/// process inherited.
pub fn without_our_settings(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CLAWBOT_ROUTER_")
            || key.starts_with("FAKE_OPENCLAW_")
            || key.starts_with("OPENCLAW_")
        {
            cmd.env_remove(&key);
        }
    }
}

/// The router wired to the fake openclaw with `scenario` and extra fake flags.
pub fn router_with(scenario: &str, fake_flags: &[&str]) -> Command {
    let mut words = vec![FAKE.to_owned(), "--scenario".into(), scenario.into()];
    words.extend(fake_flags.iter().map(|s| s.to_string()));
    let mut cmd = router();
    cmd.env("OPENCLAW_BIN", shell_words::join(&words));
    cmd
}

#[derive(Debug)]
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
    pub elapsed: Duration,
}

impl Run {
    /// The one JSON object on stdout (fails the test if there is anything else).
    pub fn json(&self) -> Value {
        let trimmed = self.stdout.strip_suffix('\n').unwrap_or(&self.stdout);
        assert!(
            !trimmed.contains('\n'),
            "stdout must hold exactly one line: {:?}",
            self.stdout
        );
        serde_json::from_str(trimmed)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", self.stdout))
    }

    pub fn content(&self) -> String {
        let json = self.json();
        assert_eq!(json["directTTS"], Value::Bool(false));
        assert_eq!(json["interruptMode"], Value::from(2));
        json["content"]
            .as_str()
            .expect("content is a string")
            .to_owned()
    }

    pub fn meta(&self) -> Value {
        self.json()["meta"].clone()
    }
}

/// Runs to completion under the watchdog.
pub fn run(cmd: &mut Command) -> Run {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn router");
    wait(child)
}

/// Runs with `input` on stdin (through a file, so nothing can block).
pub fn run_with_stdin(cmd: &mut Command, input: &[u8]) -> Run {
    let mut file = tempfile::tempfile().expect("stdin file");
    std::io::Write::write_all(&mut file, input).expect("write stdin");
    std::io::Seek::rewind(&mut file).expect("rewind stdin");
    run(cmd.stdin(file))
}

pub fn wait(child: Child) -> Run {
    let started = Instant::now();
    let pid = child.id() as i32;
    // Output is collected while waiting: a router blocked on a full stdout
    // pipe must not look like a hung router.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(WATCHDOG) {
        Ok(out) => out.expect("collect output"),
        Err(_) => {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            panic!("the router did not return within {WATCHDOG:?}");
        }
    };
    Run {
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
        elapsed: started.elapsed(),
    }
}

/// The exact JSON line the router must print for `content`.
pub fn expected_line(content: &str) -> String {
    let mut map = serde_json::Map::new();
    map.insert("content".into(), Value::from(content));
    map.insert("directTTS".into(), Value::Bool(false));
    map.insert("interruptMode".into(), Value::from(2));
    serde_json::to_string(&Value::Object(map)).unwrap() + "\n"
}

/// Collects what a child writes on `pipe`, as text, while the test goes on.
pub fn collect(
    mut pipe: impl std::io::Read + Send + 'static,
) -> std::sync::Arc<std::sync::Mutex<String>> {
    let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

/// Starts `argv` under `script`, so its stdin and stderr are a terminal:
/// the child (write its stdin) and what the terminal shows.
pub fn under_terminal(argv: &[&str]) -> (Child, std::sync::Arc<std::sync::Mutex<String>>) {
    let mut child = Command::new("script")
        .args(["-qfec", &shell_words::join(argv), "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn script");
    let screen = collect(child.stdout.take().expect("piped"));
    (child, screen)
}

/// Each `args` (with `var` set) is a usage error (exit 2) whose message
/// says `needle`.
pub fn assert_usage_errors(var: (&str, &str), cases: &[(&[&str], &str)]) {
    for (args, needle) in cases {
        let out = router().env(var.0, var.1).args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// What the fake's `interleave` scenario writes: odd lines on stdout, even
/// lines on stderr, in this order.
pub fn interleaved(lines: usize) -> String {
    (1..=lines)
        .map(|i| {
            if i % 2 == 1 {
                format!("out {i}\n")
            } else {
                format!("err {i}\n")
            }
        })
        .collect()
}

/// `content` is `total` bytes of the fake's flood cut to `max`: its head
/// and tail kept, one marker line between them naming what was left out.
pub fn assert_cut_in_the_middle(content: &str, total: u64, max: usize) {
    assert!(content.starts_with("BEGIN\n"), "{content:.40}");
    assert!(content.ends_with("\nEND\n"), "{content:.40}");
    let marker = format!(
        "[clawbot_router] ……输出过长，中间省略了 {} 字节……",
        total - max as u64
    );
    assert_eq!(
        content.matches("[clawbot_router]").count(),
        1,
        "one marker line"
    );
    assert!(content.contains(&format!("\n{marker}\n")), "{content}");
    assert_eq!(content.len(), max + marker.len() + 2);
}

/// A temporary directory that lives as long as the value.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// What the fake recorded, one entry per invocation.
pub fn records(path: &Path) -> Vec<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .lines()
            .map(|l| serde_json::from_str(l).expect("record line is JSON"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The openclaw arguments the fake received (its own options stripped).
pub fn argv(record: &Value) -> Vec<String> {
    record["argv"]
        .as_array()
        .expect("argv")
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .skip_while(|arg| arg != "agent")
        .collect()
}

/// Pids listed in a pid file.
pub fn pids(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// True while `pid` is a live process (zombies count as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or("");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// Waits until the pid file lists `n` pids.
pub fn wait_for_pids(path: &Path, n: usize) -> Vec<i32> {
    let started = Instant::now();
    loop {
        let found = pids(path);
        if found.len() >= n {
            return found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "pid file never listed {n} pids"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Asserts every pid is gone (allowing the kernel a moment to finish a kill).
pub fn assert_all_gone(pids: &[i32]) {
    let started = Instant::now();
    while pids.iter().any(|p| alive(*p)) && started.elapsed() < Duration::from_millis(500) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left: Vec<_> = pids.iter().filter(|p| alive(**p)).collect();
    for p in &left {
        unsafe {
            libc::kill(**p, libc::SIGKILL);
        }
    }
    assert!(left.is_empty(), "processes outlived the router: {left:?}");
}

/// Asserts every pid goes once its parent died outright: nothing of the
/// parent runs to stop them, so this waits for the parent-death machinery
/// (the time it takes is a benchmark figure, BENCHMARKS.md; this bound only
/// keeps a failure from hanging).
pub fn assert_gone_in_time(pids: &[i32], what: &str) {
    let started = Instant::now();
    while pids.iter().any(|p| alive(*p)) && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<_> = pids.iter().copied().filter(|p| alive(*p)).collect();
    for p in &left {
        unsafe {
            libc::kill(*p, libc::SIGKILL);
        }
    }
    assert!(
        left.is_empty(),
        "{what}: processes outlived their killed parent: {left:?} of {pids:?}"
    );
}

/// `pid` and every process below it (children of children, …).
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        all.extend(children_of(all[i]));
        i += 1;
    }
    all
}

/// The direct children of `pid` (every thread's list).
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut found: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// A directory holding a `wsl.exe` that behaves like the real one: with
/// `--exec` it runs argv as given; without, it joins the arguments with
/// spaces and hands them to a shell. It logs its argv to `wsl.log`.
pub fn fake_wsl_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempdir();
    let exe = dir.path().join("wsl.exe");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/wsl.exe"),
        &exe,
    )
    .expect("copy fake wsl.exe");
    let log = dir.path().join("wsl.log");
    (dir, log)
}

/// PATH with `dir` first.
pub fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

pub fn env_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A child that is killed (and reaped) when the test ends, however it ends.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port nobody listens on now (a moment later someone may).
#[allow(dead_code)] // not every test crate listens
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
