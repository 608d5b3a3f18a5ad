//! A resident child: a program that lives as long as its user wants (a
//! local MCP server the node proxies), talked to over piped stdin and
//! stdout, its stderr handed over too. It is spawned as every run is — its
//! own process group (a Job Object on Windows), the run tag in its
//! environment, our secrets removed — so the same tree guarantees hold:
//! [`Resident::stop`] stops everything it started, escapees included, and
//! dropping a `Resident` kills the tree.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use super::{SpawnError, command, new_tag, platform, stop_tree};

/// What to start.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    /// Variables set for the child on top of the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// Inherited variables the child must not see (secrets of ours).
    pub env_remove: &'static [&'static str],
    /// A second pipe pair on the child's fds 3 and 4 (Unix only; see
    /// [`SidePipes`]).
    pub side_pipes: bool,
}

/// The child's three pipes.
pub struct Pipes {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
    /// Present when [`Launch::side_pipes`] asked for it.
    #[cfg(unix)]
    pub side: Option<SidePipes>,
}

#[cfg(unix)]
pub use super::platform::SidePipes;

/// A running resident child and its tree.
pub struct Resident {
    tree: platform::Tree,
    status: Option<ExitStatus>,
}

impl Resident {
    pub fn start(launch: &Launch) -> Result<(Self, Pipes), SpawnError> {
        let spawn_error = |source| SpawnError {
            program: launch.program.clone(),
            source,
        };
        let tag = new_tag();
        let mut cmd = command(
            &launch.program,
            &launch.args,
            launch.cwd.as_deref(),
            &launch.env,
            launch.env_remove,
            &tag,
        );
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(unix)]
        let (side, child_ends) = if launch.side_pipes {
            let (ours, theirs) = super::platform::side_pipes(&mut cmd).map_err(spawn_error)?;
            (Some(ours), Some(theirs))
        } else {
            (None, None)
        };
        #[cfg(not(unix))]
        if launch.side_pipes {
            return Err(spawn_error(std::io::Error::other(
                "side pipes are not supported on this platform",
            )));
        }
        let mut tree = platform::Tree::spawn(cmd, tag).map_err(spawn_error)?;
        // The child has its copies: ours must go, or its reads never end.
        #[cfg(unix)]
        drop(child_ends);
        let (Some(stdin), Some(stdout), Some(stderr)) = tree.take_pipes() else {
            return Err(spawn_error(std::io::Error::other(
                "the child's pipes are missing",
            )));
        };
        Ok((
            Self { tree, status: None },
            Pipes {
                stdin,
                stdout,
                stderr,
                #[cfg(unix)]
                side,
            },
        ))
    }

    pub fn pid(&self) -> Option<u32> {
        self.tree.pid()
    }

    /// Whether the leader has exited (or is past saving: a zombie not yet
    /// reapable), without waiting; a status is kept for [`Resident::stop`].
    pub fn has_exited(&mut self) -> bool {
        if self.status.is_none() {
            self.status = self.tree.try_wait();
        }
        self.status.is_some() || self.tree.leader_dying()
    }

    /// Resolves when the leader exits (cancel-safe); its descendants may
    /// live on until [`Resident::stop`].
    pub async fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.tree.wait().await.ok();
        }
        self.status
    }

    /// Stops the whole tree (TERM, `grace`, KILL; on Windows the job at
    /// once) and returns the leader's status when it could be reaped.
    /// After the leader exited on its own this still stops what it left.
    pub async fn stop(mut self, grace: Duration) -> Option<ExitStatus> {
        let status = if self.status.is_some() && !self.tree.anything_alive() {
            self.status
        } else {
            stop_tree(&mut self.tree, self.status, None, grace).await
        };
        self.tree.disarm();
        status
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    fn sh(script: &str) -> Launch {
        Launch {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: None,
            env: vec![],
            env_remove: &[],
            side_pipes: false,
        }
    }

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    }

    #[tokio::test]
    async fn talks_over_its_pipes_and_stops_with_its_whole_tree() {
        // A server that answers each line, with a grandchild that ignores
        // TERM and one that left the group.
        let (resident, pipes) = Resident::start(&sh(
            "trap '' TERM; (trap '' TERM; sleep 60) & echo $! >&2; setsid sleep 60 & echo $! >&2; \
             while read l; do echo \"got $l\"; done",
        ))
        .unwrap();
        let mut stdin = pipes.stdin;
        let mut out = BufReader::new(pipes.stdout).lines();
        let mut err = BufReader::new(pipes.stderr).lines();
        let grandchildren: Vec<i32> = vec![
            err.next_line().await.unwrap().unwrap().parse().unwrap(),
            err.next_line().await.unwrap().unwrap().parse().unwrap(),
        ];
        stdin.write_all(b"ping\n").await.unwrap();
        assert_eq!(out.next_line().await.unwrap().unwrap(), "got ping");
        let leader = resident.pid().unwrap() as i32;
        let started = std::time::Instant::now();
        resident.stop(Duration::from_millis(200)).await;
        assert!(started.elapsed() < Duration::from_secs(3));
        for pid in grandchildren.iter().chain([&leader]) {
            assert!(!alive(*pid), "{pid} outlived the stop");
        }
    }

    #[tokio::test]
    async fn an_exit_is_seen_and_leftovers_are_stopped() {
        let (mut resident, pipes) = Resident::start(&sh("sleep 60 & echo $! >&2; exit 3")).unwrap();
        let mut err = BufReader::new(pipes.stderr).lines();
        let left: i32 = err.next_line().await.unwrap().unwrap().parse().unwrap();
        let status = resident.exited().await.unwrap();
        assert_eq!(status.code(), Some(3));
        assert!(alive(left));
        assert_eq!(
            resident
                .stop(Duration::from_millis(200))
                .await
                .unwrap()
                .code(),
            Some(3)
        );
        assert!(!alive(left));
    }

    #[tokio::test]
    async fn an_exit_is_seen_without_waiting_and_its_status_kept() {
        let (mut resident, _pipes) = Resident::start(&sh("read x; exit 4")).unwrap();
        assert!(!resident.has_exited());
        drop(_pipes); // its stdin closes: it exits
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while !resident.has_exited() {
            assert!(std::time::Instant::now() < end, "the exit was never seen");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let status = resident.stop(Duration::from_millis(200)).await.unwrap();
        assert_eq!(status.code(), Some(4));
    }

    #[tokio::test]
    async fn dropping_it_kills_the_tree() {
        let (resident, pipes) = Resident::start(&sh("sleep 60 & echo $! >&2; sleep 60")).unwrap();
        let mut err = BufReader::new(pipes.stderr).lines();
        let child: i32 = err.next_line().await.unwrap().unwrap().parse().unwrap();
        drop(resident);
        for _ in 0..100 {
            if !alive(child) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{child} outlived the drop");
    }

    #[tokio::test]
    async fn side_pipes_are_the_childs_fd_3_and_4_and_end_with_it() {
        use tokio::io::AsyncReadExt;
        // The child echoes what it reads on fd 3 to fd 4, upper-cased.
        let mut launch = sh("tr a-z A-Z <&3 >&4");
        launch.side_pipes = true;
        let (resident, pipes) = Resident::start(&launch).unwrap();
        let side = pipes.side.unwrap();
        let mut to_child = side.to_child;
        to_child.write_all(b"cdp\0").await.unwrap();
        // Our write end closed: the child's read ends, so it exits and
        // its fd 4 closes (no copy of the child's ends stayed with us).
        drop(to_child);
        let mut got = Vec::new();
        let mut from_child = side.from_child;
        tokio::time::timeout(Duration::from_secs(5), from_child.read_to_end(&mut got))
            .await
            .expect("the child's fd 4 never closed")
            .unwrap();
        assert_eq!(got, b"CDP\0");
        resident.stop(Duration::from_millis(200)).await;
    }
}
