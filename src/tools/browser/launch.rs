//! Finding a Chromium-family browser and starting it as ours: a resident
//! child of the one runner (its own process group, dead with us even when
//! we are SIGKILLed), its own profile under the state directory, DevTools
//! on the pipe pair only (no port: see `cdp.rs`), its chatter kept as the
//! last few lines for the status of a browser that died.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[cfg(unix)]
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

#[cfg(unix)]
use crate::runner::Launch;
use crate::runner::Resident;

/// What `--browser auto` looks for on PATH, in order.
#[cfg_attr(not(unix), allow(dead_code))]
const CANDIDATES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
    "microsoft-edge",
    "brave-browser",
    "chromium-headless-shell",
];

/// Lines of the browser's own output kept for a status.
#[cfg_attr(not(unix), allow(dead_code))]
const KEPT_LINES: usize = 12;
const KEPT_LINE_BYTES: usize = 400;

/// The browser named (`--browser PATH`) or found on PATH. Unix only:
/// DevTools over a pipe needs the child's fds 3 and 4, which the runner
/// gives only there.
#[cfg(not(unix))]
pub fn find(_named: Option<&Path>) -> Result<PathBuf, String> {
    Err("the node's browser needs Linux or macOS for now (DevTools over a pipe)".into())
}

/// The browser named (`--browser PATH`) or found on PATH.
#[cfg(unix)]
pub fn find(named: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = named {
        let found = which::which(path).map_err(|_| {
            format!(
                "--browser {}: no such executable (name a Chromium-family browser, or `auto`)",
                path.display()
            )
        })?;
        return Ok(found);
    }
    CANDIDATES
        .iter()
        .find_map(|name| which::which(name).ok())
        .ok_or_else(|| {
            format!(
                "no Chromium-family browser on PATH (looked for {}); install one (Debian: apt install chromium) or name it with --browser PATH",
                CANDIDATES.join(", ")
            )
        })
}

/// How to start it.
pub struct Start<'a> {
    pub executable: &'a Path,
    pub user_data_dir: &'a Path,
    pub headless: bool,
    /// `--no-sandbox`: needed as root (Chromium refuses otherwise).
    pub no_sandbox: bool,
}

/// A started browser: its tree, its DevTools pipes, and what it said.
pub struct Started {
    pub resident: Resident,
    pub to_browser: Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
    pub from_browser: Box<dyn tokio::io::AsyncRead + Unpin + Send>,
    pub chatter: Chatter,
}

/// The last lines the browser wrote on stdout/stderr.
#[derive(Clone, Default)]
pub struct Chatter(Arc<Mutex<VecDeque<String>>>);

impl Chatter {
    fn push(&self, line: &str) {
        // D-Bus complaints are noise on any machine without a session bus.
        if line.contains("dbus") || line.trim().is_empty() {
            return;
        }
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == KEPT_LINES {
            lines.pop_front();
        }
        let mut end = KEPT_LINE_BYTES.min(line.len());
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        lines.push_back(line[..end].to_owned());
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// The command line: DevTools on the pipe pair, a profile of its own, no
/// first-run questions, nothing of Google's background traffic.
pub fn arguments(start: &Start<'_>) -> Vec<String> {
    let mut args = vec![
        "--remote-debugging-pipe".to_owned(),
        format!("--user-data-dir={}", start.user_data_dir.display()),
        "--no-first-run".into(),
        "--no-default-browser-check".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--disable-default-apps".into(),
        "--disable-dev-shm-usage".into(),
        "--password-store=basic".into(),
        "--use-mock-keychain".into(),
        "--mute-audio".into(),
    ];
    if start.headless {
        args.push("--headless=new".into());
        args.push("--hide-scrollbars".into());
    }
    if start.no_sandbox {
        args.push("--no-sandbox".into());
    }
    // No tab of its own: the first one is the first a route opens (`t1`,
    // as OpenClaw's first tab is), not a blank page listed beside it.
    args.push("--no-startup-window".into());
    args
}

/// Where the browser writes beyond its profile (Chromium's crash reports
/// database, caches) stays beside the profile, in our state directory: by
/// default it would be the user's `~/.config/chromium`, a second home for
/// crash dumps of pages an agent opened.
pub fn environment(start: &Start<'_>) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let home = start.user_data_dir.parent().unwrap_or(start.user_data_dir);
    vec![
        ("XDG_CONFIG_HOME".into(), home.join("config").into()),
        ("XDG_CACHE_HOME".into(), home.join("cache").into()),
    ]
}

/// Starts the browser (never reached where [`find`] finds none).
#[cfg(not(unix))]
pub fn start(_start: &Start<'_>) -> Result<Started, String> {
    Err("the node's browser needs Linux or macOS for now (DevTools over a pipe)".into())
}

/// Starts the browser.
#[cfg(unix)]
pub fn start(start: &Start<'_>) -> Result<Started, String> {
    crate::shared::paths::create_private_dir(start.user_data_dir).map_err(|e| {
        format!(
            "cannot create the browser profile {}: {e}",
            start.user_data_dir.display()
        )
    })?;
    let launch = Launch {
        program: start.executable.into(),
        args: arguments(start).into_iter().map(Into::into).collect(),
        cwd: Some(start.user_data_dir.to_path_buf()),
        env: environment(start),
        env_remove: super::super::SECRET_VARS,
        side_pipes: true,
    };
    let (resident, pipes) = Resident::start(&launch).map_err(|e| {
        format!(
            "cannot start the browser {}: {}",
            start.executable.display(),
            e.source
        )
    })?;
    let Some(side) = pipes.side else {
        return Err("the browser's DevTools pipes are missing".into());
    };
    let chatter = Chatter::default();
    drop(pipes.stdin);
    for stream in [
        Box::new(pipes.stdout) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box::new(pipes.stderr),
    ] {
        let chatter = chatter.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stream);
            let mut line = Vec::new();
            // Bounded: a line is cut at 64 KiB, whatever the browser writes.
            loop {
                line.clear();
                match AsyncReadExt::take(&mut lines, 64 * 1024)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(0) | Err(_) => return,
                    Ok(_) => chatter.push(String::from_utf8_lossy(&line).trim_end()),
                }
            }
        });
    }
    Ok(Started {
        resident,
        to_browser: Box::new(side.to_child),
        from_browser: Box::new(side.from_child),
        chatter,
    })
}

/// Whether this process runs as root (Chromium's sandbox refuses root).
#[cfg(unix)]
pub fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(not(unix))]
pub fn running_as_root() -> bool {
    false
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn devtools_go_over_the_pipe_and_never_a_port() {
        let args = arguments(&Start {
            executable: Path::new("chromium"),
            user_data_dir: Path::new("/s/browser/openclaw/user-data"),
            headless: true,
            no_sandbox: false,
        });
        assert!(args.contains(&"--remote-debugging-pipe".to_owned()));
        assert!(!args.iter().any(|a| a.contains("remote-debugging-port")));
        assert!(args.contains(&"--user-data-dir=/s/browser/openclaw/user-data".to_owned()));
        assert!(args.contains(&"--headless=new".to_owned()));
        assert!(!args.contains(&"--no-sandbox".to_owned()));
        let env = environment(&Start {
            executable: Path::new("chromium"),
            user_data_dir: Path::new("/s/browser/openclaw/user-data"),
            headless: true,
            no_sandbox: false,
        });
        assert_eq!(
            env,
            [
                (
                    "XDG_CONFIG_HOME".into(),
                    "/s/browser/openclaw/config".into()
                ),
                ("XDG_CACHE_HOME".into(), "/s/browser/openclaw/cache".into())
            ]
        );
    }

    #[test]
    fn chatter_keeps_the_last_lines_short_and_drops_dbus() {
        let c = Chatter::default();
        for i in 0..20 {
            c.push(&format!("line {i}"));
        }
        c.push("ERROR:dbus/bus.cc:405] Failed to connect to the bus");
        c.push(&"é".repeat(1000));
        let lines = c.lines();
        assert_eq!(lines.len(), KEPT_LINES);
        assert_eq!(lines[0], "line 9");
        assert!(lines.last().unwrap().len() <= KEPT_LINE_BYTES);
    }

    #[test]
    fn a_named_browser_that_is_not_there_is_a_clear_error() {
        let e = find(Some(Path::new("/nonexistent/chromium"))).unwrap_err();
        assert!(e.contains("--browser /nonexistent/chromium"), "{e}");
    }
}
