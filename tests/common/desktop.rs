//! A desktop for the screen tests: an Xvfb of the test's own on one of
//! the displays :71–:79 (the first free one: Xvfb's own lock file decides,
//! so tests in parallel, in this binary or another, never share one),
//! stopped on drop; and what happened on it: the pointer
//! (`xdotool getmouselocation`) and the keys and buttons pressed (`xev`
//! listening on the root window: the X server's own account, no terminal
//! or window manager needed).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const DISPLAYS: std::ops::RangeInclusive<u32> = 71..=79;

/// Installs Xvfb, x11vnc, xdotool and FFmpeg when missing (as root).
pub fn install() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        let script =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/desktop.sh");
        let ok = Command::new("bash").arg(script).status().unwrap().success();
        assert!(
            ok,
            "scripts/desktop.sh could not install the desktop programs"
        );
    });
}

/// One Xvfb, `-noreset`: without it the server resets each time its last
/// client leaves, and the pointer jumps back to the centre.
pub struct Xvfb {
    child: Child,
    pub number: u32,
}

impl Xvfb {
    pub fn start(width: u32, height: u32) -> Xvfb {
        install();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            for number in DISPLAYS {
                if let Some(x) = Self::try_start(number, width, height) {
                    return x;
                }
            }
            assert!(Instant::now() < deadline, "no free display in :71–:79");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn try_start(number: u32, width: u32, height: u32) -> Option<Xvfb> {
        // Xvfb itself refuses a display whose lock names a live server
        // (and clears a dead one's).
        let lock = format!("/tmp/.X{number}-lock");
        if std::fs::read_to_string(&lock)
            .is_ok_and(|pid| Path::new("/proc").join(pid.trim()).exists())
        {
            return None;
        }
        let mut child = Command::new("Xvfb")
            .arg(format!(":{number}"))
            .args(["-screen", "0", &format!("{width}x{height}x24")])
            .args(["-noreset", "-nolisten", "tcp"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb (scripts/desktop.sh installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        let socket = format!("/tmp/.X11-unix/X{number}");
        loop {
            if child.try_wait().unwrap().is_some() {
                return None; // another server holds this display
            }
            let ours = std::fs::read_to_string(format!("/tmp/.X{number}-lock"))
                .is_ok_and(|pid| pid.trim() == child.id().to_string());
            if ours && std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                return Some(Xvfb { child, number });
            }
            if Instant::now() > deadline {
                let _ = Xvfb { child, number };
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn display(&self) -> String {
        format!(":{}", self.number)
    }

    /// xdotool on this display.
    pub fn xdotool(&self, args: &[&str]) -> String {
        let out = Command::new("xdotool")
            .env("DISPLAY", self.display())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "xdotool {args:?}: {:?}", out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Where the pointer is.
    pub fn pointer(&self) -> (u32, u32) {
        let said = self.xdotool(&["getmouselocation"]);
        let field = |name: &str| -> u32 {
            said.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .unwrap()
                .parse()
                .unwrap()
        };
        (field("x:"), field("y:"))
    }

    /// Stops the server (TERM, so that it removes its lock file): the
    /// display is gone.
    pub fn kill(&mut self) {
        if self.child.try_wait().is_ok_and(|s| s.is_none()) {
            unsafe {
                libc::kill(self.child.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.child.try_wait().is_ok_and(|s| s.is_none()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts listening to what is pressed on this display.
    pub fn listen(&self) -> Events {
        Events::start(self)
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One press or release, as xev reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: String,
    /// Where (root coordinates).
    pub at: (i32, i32),
    /// The keysym name of a key, or the button number.
    pub what: String,
    pub when: Instant,
}

/// `xev -root` on a display: every key and button event, in order.
pub struct Events {
    child: Child,
    seen: Arc<Mutex<Vec<Event>>>,
}

impl Events {
    fn start(x: &Xvfb) -> Events {
        let mut child = Command::new("xev")
            .env("DISPLAY", x.display())
            .args(["-root", "-event", "keyboard", "-event", "button"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("xev (x11-utils)");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let out = BufReader::new(child.stdout.take().unwrap());
        let into = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut current: Option<Event> = None;
            for line in out.lines().map_while(Result::ok) {
                let line = line.trim().to_owned();
                if let Some(kind) = ["KeyPress", "KeyRelease", "ButtonPress", "ButtonRelease"]
                    .iter()
                    .find(|k| line.starts_with(&format!("{k} event")))
                {
                    current = Some(Event {
                        kind: (*kind).to_owned(),
                        at: (0, 0),
                        what: String::new(),
                        when: Instant::now(),
                    });
                    continue;
                }
                let Some(event) = current.as_mut() else {
                    continue;
                };
                if let Some(rest) = line.split("root:(").nth(1) {
                    let xy: Vec<i32> = rest
                        .split(')')
                        .next()
                        .unwrap()
                        .split(',')
                        .map(|n| n.trim().parse().unwrap())
                        .collect();
                    event.at = (xy[0], xy[1]);
                }
                if event.kind.starts_with("Button")
                    && let Some(b) = line.split("button ").nth(1)
                {
                    event.what = b.split(',').next().unwrap().trim().to_owned();
                    into.lock().unwrap().push(current.take().unwrap());
                } else if let Some(k) = line.split("keysym 0x").nth(1) {
                    // "keysym 0x61, a), same_screen YES,"
                    event.what = k
                        .split(", ")
                        .nth(1)
                        .unwrap()
                        .split(')')
                        .next()
                        .unwrap()
                        .to_owned();
                    into.lock().unwrap().push(current.take().unwrap());
                }
            }
        });
        let events = Events { child, seen };
        // Listening once a probe key shows up (xev prints nothing before).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !events.all().iter().any(|e| e.what == "Shift_L") {
            assert!(Instant::now() < deadline, "xev never started listening");
            x.xdotool(&["key", "shift"]);
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(100));
        events.clear();
        events
    }

    pub fn all(&self) -> Vec<Event> {
        self.seen.lock().unwrap().clone()
    }

    pub fn clear(&self) {
        self.seen.lock().unwrap().clear();
    }

    /// Waits until `n` events were seen; all of them.
    pub fn wait(&self, n: usize) -> Vec<Event> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let all = self.all();
            if all.len() >= n {
                return all;
            }
            assert!(Instant::now() < deadline, "only {all:?}, not {n} events");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The presses seen so far, as `KeyPress a` / `ButtonPress 1 @ (x, y)`.
    pub fn presses(&self) -> Vec<String> {
        self.all().iter().map(Event::short).collect()
    }
}

impl Event {
    pub fn short(&self) -> String {
        if self.kind.starts_with("Button") {
            format!("{} {} @ {:?}", self.kind, self.what, self.at)
        } else {
            format!("{} {}", self.kind, self.what)
        }
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a program whose command line holds `needle` still runs.
pub fn running(needle: &str) -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
}
