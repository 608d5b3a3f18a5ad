//! A VNC desktop for the node to relay: Debian's Xvfb on a display of its own
//! and x11vnc serving it on loopback (scripts/desktop.sh installs both).
//! Both stop with their process groups on drop.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The password the desktops' VNC servers ask.
pub const PASSWORD: &str = "pw-e2e-1";

pub struct VncDesktop {
    pub port: u16,
    pub display: u32,
    /// The password in a plain file, for the node.
    pub password_file: PathBuf,
    children: Vec<Child>,
    _dir: tempfile::TempDir,
}

pub use super::desktop::install;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap()
}

impl VncDesktop {
    /// Xvfb on `:display` (1024x768) and x11vnc on a free loopback port;
    /// `password`: asking [`PASSWORD`], else asking none.
    pub fn start(display: u32, password: bool) -> Self {
        install();
        let dir = tempfile::tempdir().unwrap();
        let lock = format!("/tmp/.X{display}-lock");
        let _ = std::fs::remove_file(&lock);
        let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{display}"));
        let xvfb = spawn(Command::new("Xvfb").arg(format!(":{display}")).args([
            "-screen",
            "0",
            "1024x768x24",
            "-nolisten",
            "tcp",
        ]));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::path::Path::new(&format!("/tmp/.X11-unix/X{display}")).exists() {
            assert!(Instant::now() < deadline, "Xvfb :{display} never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        let password_file = dir.path().join("vnc-password");
        std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
        let port = free_port();
        let mut x11vnc = Command::new("x11vnc");
        x11vnc
            .args([
                "-display",
                &format!(":{display}"),
                "-localhost",
                "-forever",
                "-shared",
            ])
            .args(["-rfbport", &port.to_string(), "-quiet"]);
        if password {
            let stored = dir.path().join("passwd");
            let ok = Command::new("x11vnc")
                .args(["-storepasswd", PASSWORD])
                .arg(&stored)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "x11vnc -storepasswd failed");
            x11vnc.arg("-rfbauth").arg(&stored);
        } else {
            x11vnc.arg("-nopw");
        }
        let vnc = spawn(&mut x11vnc);
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "x11vnc never listened on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        VncDesktop {
            port,
            display,
            password_file,
            children: vec![vnc, xvfb],
            _dir: dir,
        }
    }
}

impl Drop for VncDesktop {
    fn drop(&mut self) {
        for child in &mut self.children {
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.wait();
        }
    }
}

/// What `scripts/desktop-viewer.mjs` saw of `node`'s desktop through the
/// gateway (or its error).
pub fn view(node: &str, password: Option<&str>) -> serde_json::Value {
    let out = Command::new("node")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/desktop-viewer.mjs"
        ))
        .arg(node)
        .args(password)
        .envs(super::e2e::sandbox())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("node on PATH (the sandbox's)");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|_| panic!("no JSON from the viewer: {text}"))
}
