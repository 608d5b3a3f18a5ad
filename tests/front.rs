//! The two executables: `clawbot_router` runs a router call through the
//! openclaw CLI itself and hands every other command line to
//! `clawbot_router-full` beside it, in the same process (Unix `exec`).
#![cfg(unix)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{FAKE, ROUTER, router, router_with, run};

const FULL: &str = env!("CARGO_BIN_EXE_clawbot_router-full");

/// What `look(pid)` sees once `ready(pid)` holds (within 10 s) for the
/// process `cmd` starts. The process is then stopped as a host stops it —
/// SIGTERM, on which the router stops its own tree — and reaped, so no
/// openclaw stand-in outlives the test.
#[cfg(target_os = "linux")]
fn while_running<T>(cmd: &mut Command, ready: impl Fn(u32) -> bool, look: impl Fn(u32) -> T) -> T {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen = look(pid);
    // SAFETY: our own child, not yet reaped.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let stopped = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > stopped {
            let _ = child.kill();
            panic!("{pid} ignored SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    seen
}

/// What `cmd` runs as once `ready(pid)` holds: the target of
/// `/proc/PID/exe`.
#[cfg(target_os = "linux")]
fn program_once(cmd: &mut Command, ready: impl Fn(u32) -> bool) -> std::path::PathBuf {
    while_running(cmd, ready, |pid| {
        std::fs::read_link(format!("/proc/{pid}/exe")).expect("the process runs")
    })
}

/// `pid` has started a child: a call is under way (openclaw runs).
#[cfg(target_os = "linux")]
fn has_a_child(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .is_ok_and(|list| !list.trim().is_empty())
}

#[test]
#[cfg(target_os = "linux")]
fn a_call_runs_in_the_front_and_anything_else_becomes_the_full_program_in_the_same_process() {
    let front = Path::new(ROUTER).canonicalize().unwrap();
    let full = Path::new(FULL).canonicalize().unwrap();
    let sleeping = || router_with("sleep", &["--sleep", "30"]);

    // A call through the CLI: the front itself runs openclaw and waits.
    let exe = program_once(sleeping().args(["-m", "hi"]), has_a_child);
    assert_eq!(exe, front, "a CLI call must not be handed over");

    // The MCP server: the same pid becomes the full program.
    let exe = program_once(router().arg("mcp"), |pid| {
        std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe != front)
    });
    assert_eq!(
        exe, full,
        "`mcp` must run as the full program, in the same process"
    );

    // So does a call through the gateway (the front does not link its
    // client): here the full program, in the same pid, finds the gateway
    // closed and runs openclaw itself.
    let exe = program_once(
        sleeping().args(["-m", "hi", "--via", "auto", "--gateway", "ws://127.0.0.1:9"]),
        has_a_child,
    );
    assert_eq!(exe, full, "--via auto must be the full program's");
}

#[test]
fn the_hand_over_keeps_arguments_environment_and_streams() {
    // Help and version, schema and a bad subcommand line come out as before.
    let version = run(router().arg("--version"));
    assert_eq!(version.code, Some(0));
    assert_eq!(
        version.stdout.trim(),
        format!(
            "clawbot_router {} ({}, commit {})",
            env!("CARGO_PKG_VERSION"),
            env!("CLAWBOT_BUILD_TARGET"),
            env!("CLAWBOT_BUILD_COMMIT")
        )
    );
    // The commit is the checkout's own when it is one.
    if let Ok(head) = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        && head.status.success()
    {
        assert_eq!(
            String::from_utf8_lossy(&head.stdout).trim(),
            env!("CLAWBOT_BUILD_COMMIT")
        );
    }
    if cfg!(all(
        target_os = "linux",
        target_env = "gnu",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )) {
        assert_eq!(
            env!("CLAWBOT_BUILD_TARGET"),
            format!("{}-unknown-linux-gnu", std::env::consts::ARCH),
            "the host's target"
        );
    }
    let schema = run(router().args(["schema", "--format", "mcp"]));
    assert_eq!(schema.code, Some(0), "{}", schema.stderr);
    assert!(
        schema.stdout.contains("\"inputSchema\""),
        "{}",
        schema.stdout
    );
    let bad = run(router().args(["node", "--no-such-flag"]));
    assert_eq!(bad.code, Some(2));
    assert!(bad.stderr.contains("--no-such-flag"), "{}", bad.stderr);

    // A call the full program answers, with an environment setting: the
    // gateway path (chosen by CLAWBOT_ROUTER_VIA) refuses a closed port.
    let closed = run(router_with("echo", &[])
        .env("CLAWBOT_ROUTER_VIA", "gateway")
        .args([
            "-m",
            "hi",
            "--lang",
            "en",
            "--gateway",
            "ws://127.0.0.1:9",
            "--exit-code",
        ]));
    let content = closed.content();
    assert!(
        content.contains("Could not reach the OpenClaw gateway"),
        "{content}"
    );
    assert_eq!(closed.code, Some(1));

    // A malformed call is answered by the full program, as JSON.
    let malformed = run(router().args(["-m", "hi", "--timeout", "soon", "--lang", "en"]));
    assert_eq!(malformed.code, Some(0));
    assert!(
        malformed.content().contains("Invalid arguments"),
        "{}",
        malformed.stdout
    );
}

#[test]
fn without_the_full_program_calls_still_run_and_the_rest_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("clawbot_router");
    std::fs::copy(ROUTER, &alone).unwrap();
    let lone = || {
        let mut cmd = Command::new(&alone);
        common::without_our_settings(&mut cmd);
        cmd.stdin(Stdio::null());
        cmd
    };
    // A file just written cannot be run while another test's fork still
    // holds it open for writing (ETXTBSY, until that child's exec): wait.
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(e) = lone()
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        assert!(
            e.raw_os_error() == Some(libc::ETXTBSY) && Instant::now() < deadline,
            "{e}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The front alone serves the call a host makes on every tool use.
    let echo = run(lone().env("OPENCLAW_BIN", FAKE).args(["-m", "hi"]));
    assert_eq!(echo.content(), "ECHO: hi\n");

    // A call it would hand over still gets its one JSON object.
    let gateway = run(lone().args([
        "-m",
        "hi",
        "--via",
        "gateway",
        "--lang",
        "en",
        "--exit-code",
    ]));
    let content = gateway.content();
    assert!(
        content.starts_with("[clawbot_router] Cannot run this call: cannot start")
            && content.contains("clawbot_router-full")
            && content.ends_with("OpenClaw was not called."),
        "{content}"
    );
    assert_eq!(gateway.code, Some(127));
    assert!(gateway.stderr.is_empty(), "{}", gateway.stderr);
    // In Chinese, one language: the sentence the README quotes, and the
    // (English) reason on stderr.
    let zh = run(lone().args(["-m", "hi", "--via", "gateway"]));
    assert_eq!(
        zh.content(),
        "[clawbot_router] 无法处理本次调用：无法启动完整程序 clawbot_router-full（它必须与 clawbot_router 放在同一目录）。未调用 OpenClaw。"
    );
    assert!(zh.stderr.contains("cannot start"), "{}", zh.stderr);

    // Anything else: one line on stderr, the shell's "cannot run" status.
    let node = run(lone().args(["node", "--help"]));
    assert_eq!(node.code, Some(127));
    assert!(node.stdout.is_empty(), "{}", node.stdout);
    assert!(
        node.stderr.contains("clawbot_router-full") && node.stderr.contains("cargo install"),
        "{}",
        node.stderr
    );
}

// The front's C `main` (src/main.rs, `front_from_c_main` in lib.rs) skips
// std's start-up and does by hand the part of it a router needs. Each
// test below fails when one piece of that stops being done.

/// A standard stream the caller closed is reopened on /dev/null: else the
/// router's first descriptor (its event loop, a pipe to openclaw) would
/// take its number, and openclaw or a write to stderr would reach it.
#[test]
#[cfg(target_os = "linux")]
fn a_closed_standard_stream_is_reopened_on_dev_null() {
    use std::os::unix::process::CommandExt;
    let mut call = router_with("sleep", &["--sleep", "30"]);
    call.args(["-m", "hi"]);
    // SAFETY: close is async-signal-safe.
    unsafe {
        call.pre_exec(|| {
            libc::close(0);
            libc::close(2);
            Ok(())
        })
    };
    let streams = while_running(&mut call, has_a_child, |pid| {
        [0, 2].map(|fd| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok())
    });
    let null = Some(std::path::PathBuf::from("/dev/null"));
    assert_eq!(streams, [null.clone(), null], "stdin and stderr");
}

/// A reader that went away makes writing the answer an error, not death
/// by SIGPIPE (std's `Command` starts the router with SIGPIPE's default
/// action, as a shell does).
#[test]
fn a_closed_stdout_does_not_kill_the_router() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = router_with("echo", &[])
        .args(["-m", "hi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), None, "{status}");
}

/// A panic ends the front with std's status 101, after unwinding (which
/// stops a running tree), and says why on stderr; not an abort at the C
/// boundary. One descriptor short of an event loop is such a panic.
#[test]
#[cfg(target_os = "linux")]
fn a_panic_in_the_front_exits_101_with_its_message() {
    use std::os::unix::process::CommandExt;
    let mut call = router_with("echo", &[]);
    call.args(["-m", "hi"]);
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        call.pre_exec(|| {
            let three = libc::rlimit {
                rlim_cur: 3,
                rlim_max: 3,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &three);
            Ok(())
        })
    };
    let panicked = run(&mut call);
    assert_eq!(panicked.code, Some(101), "{}", panicked.stderr);
    assert!(
        panicked.stderr.contains("cannot start the async runtime"),
        "{}",
        panicked.stderr
    );
}

/// An ELF executable's bytes, read as far as these tests need.
#[cfg(target_os = "linux")]
struct Elf(Vec<u8>);

#[cfg(target_os = "linux")]
impl Elf {
    fn read(path: &str) -> Self {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(&bytes[..5], b"\x7fELF\x02", "{path}: a 64-bit ELF file");
        Elf(bytes)
    }
    fn u16_at(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.0[at..at + 2].try_into().unwrap())
    }
    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.0[at..at + 4].try_into().unwrap())
    }
    fn u64_at(&self, at: usize) -> usize {
        u64::from_le_bytes(self.0[at..at + 8].try_into().unwrap()) as usize
    }
    /// (type, file offset, file size) of each program header.
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    fn segments(&self) -> Vec<(u32, usize, usize)> {
        let (at, size, count) = (self.u64_at(32), self.u16_at(54), self.u16_at(56));
        (0..count as usize)
            .map(|i| at + i * size as usize)
            .map(|h| (self.u32_at(h), self.u64_at(h + 8), self.u64_at(h + 32)))
            .collect()
    }
    /// The tags of the dynamic section, up to its end (`DT_NULL`).
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    fn dynamic_tags(&self) -> Vec<usize> {
        const PT_DYNAMIC: u32 = 2;
        self.segments()
            .into_iter()
            .filter(|&(kind, ..)| kind == PT_DYNAMIC)
            .flat_map(|(_, at, size)| (at..at + size).step_by(16))
            .map(|entry| self.u64_at(entry))
            .take_while(|&tag| tag != 0)
            .collect()
    }
    /// The names of the functions and data the link kept (its symbol
    /// table; not the input files' names, which stay for files whose
    /// every section was dropped).
    fn symbols(&self) -> Vec<&str> {
        const SHT_SYMTAB: u32 = 2;
        const STT_OBJECT: u8 = 1;
        const STT_FUNC: u8 = 2;
        let (at, size, count) = (self.u64_at(40), self.u16_at(58), self.u16_at(60));
        let header = |i: usize| at + i * size as usize;
        let Some(symtab) = (0..count as usize)
            .map(header)
            .find(|&h| self.u32_at(h + 4) == SHT_SYMTAB)
        else {
            return Vec::new();
        };
        let strtab = self.u64_at(header(self.u32_at(symtab + 40) as usize) + 24);
        let (from, len) = (self.u64_at(symtab + 24), self.u64_at(symtab + 32));
        (from..from + len)
            .step_by(24)
            .filter(|&sym| matches!(self.0[sym + 4] & 0xf, STT_OBJECT | STT_FUNC))
            .filter(|&sym| self.u16_at(sym + 6) != 0) // defined here
            .filter_map(|sym| {
                let name = &self.0[strtab + self.u32_at(sym) as usize..];
                let end = name.iter().position(|&b| b == 0)?;
                std::str::from_utf8(&name[..end]).ok()
            })
            .collect()
    }
}

/// The gateway client is not linked into the front: its symbols, and
/// those of the WebSocket and TLS crates it is built on, are in the full
/// program and not in the front. A front that called into it (ran a call
/// through the gateway itself, say) would link it all, and start slower.
#[test]
#[cfg(target_os = "linux")]
fn the_gateway_client_is_not_linked_into_the_front() {
    // The client's module and its two crates (the links' too), as they
    // appear in mangled names (legacy and v0 alike).
    const CLIENT: [&str; 3] = ["7gateway6client", "tungstenite", "rustls"];
    let full = Elf::read(FULL);
    let front = Elf::read(ROUTER);
    let (full, front) = (full.symbols(), front.symbols());
    for part in CLIENT {
        assert!(
            full.iter().any(|name| name.contains(part)),
            "no `{part}` among {FULL}'s symbols: the test builds are stripped, \
             or the gateway client moved (update this test)"
        );
        let linked: Vec<_> = front.iter().filter(|name| name.contains(part)).collect();
        assert!(
            linked.is_empty(),
            "the front links the gateway client ({} symbols with `{part}`, such as {:?}): \
             a call through the gateway belongs to clawbot_router-full",
            linked.len(),
            &linked[..linked.len().min(3)]
        );
    }
}

/// On x86_64 Linux with glibc the front is a static PIE (build.rs): no
/// program interpreter and no shared library, still position-independent,
/// still full RELRO. A Rust release that names another library, or a
/// machine without a static glibc, gives a dynamic front, which works but
/// starts slower: this fails then.
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
fn the_front_is_a_static_pie() {
    let elf = Elf::read(ROUTER);
    const ET_DYN: u16 = 3;
    assert_eq!(elf.u16_at(16), ET_DYN, "position-independent (ASLR)");
    let types: Vec<u32> = elf.segments().into_iter().map(|(kind, ..)| kind).collect();
    const PT_INTERP: u32 = 3;
    const PT_GNU_RELRO: u32 = 0x6474_e552;
    assert!(
        !types.contains(&PT_INTERP),
        "{ROUTER} asks for a dynamic loader: build.rs did not make it static \
         (its warning says why, e.g. no libc.a: install libc6-dev)"
    );
    const DT_NEEDED: usize = 1;
    assert!(
        !elf.dynamic_tags().contains(&DT_NEEDED),
        "{ROUTER} names a shared library but has no loader to load it: \
         rustc linked a library build.rs does not know (`cargo build -vv` shows the link line)"
    );
    assert!(types.contains(&PT_GNU_RELRO), "RELRO kept");
}
