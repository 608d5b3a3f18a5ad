//! Unix half of the runner: the child leads a new process group, and the
//! tree is everything in that group plus, on Linux, every descendant that
//! left it — found two ways:
//! - the router is a *child subreaper* (`PR_SET_CHILD_SUBREAPER`), so an
//!   orphaned descendant (a `setsid` daemon whose parent exited, even one
//!   that cleared its environment and closed its pipes) becomes our child
//!   and shows up in `/proc/self/task/*/children`;
//! - descendants that escaped while their parent still lives carry the
//!   run's tag in their inherited environment.
//!
//! process-wrap is not used here: its process-group `wait` blocks until the
//! whole group has been reaped, and with a subreaper that means waiting on
//! exactly the leftovers this module exists to stop.
//!
//! Must never signal a process that is not ours: the group is only
//! signalled while the run is armed, orphans adopted from another run still
//! in progress (recognised by that run's tag) are left to it, and zombies
//! we adopt are reaped so a long-running node does not collect them.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::process::ExitStatus;
use std::sync::{Mutex, Once};

use tokio::net::unix::pipe;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

/// Runs in progress in this process: leader pid → tag.
static ACTIVE: Mutex<Option<HashMap<libc::pid_t, String>>> = Mutex::new(None);

/// The spawned child and everything it starts.
pub struct Tree {
    child: tokio::process::Child,
    pgid: libc::pid_t,
    tag: String,
    armed: bool,
}

impl Tree {
    /// The only place a child is made: a new process group led by the child.
    pub fn spawn(mut cmd: tokio::process::Command, tag: String) -> io::Result<Self> {
        become_subreaper();
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        die_with_us(&mut cmd);
        // The sentinel runs (and knows a spawn is under way) before the
        // leader exists: the leader's parent-death signal covers the leader
        // alone, and what it forks before its group is registered must not
        // outlive us either (it carries the run tag the sentinel sweeps).
        #[cfg(target_os = "linux")]
        let watched = super::sentinel::starting();
        // Spawned and registered under one lock: another run's orphan scan
        // (which holds it too) must never see this child before it is known
        // as a run's leader — it would look like an orphan to stop.
        let mut active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        let child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                #[cfg(target_os = "linux")]
                if watched {
                    super::sentinel::failed();
                }
                return Err(e);
            }
        };
        drop(cmd);
        let Some(pgid) = child.id().and_then(|id| libc::pid_t::try_from(id).ok()) else {
            #[cfg(target_os = "linux")]
            if watched {
                super::sentinel::failed();
            }
            return Err(io::Error::other("child has no pid"));
        };
        active
            .get_or_insert_with(HashMap::new)
            .insert(pgid, tag.clone());
        drop(active);
        #[cfg(target_os = "linux")]
        if watched {
            super::sentinel::watch(pgid);
        }
        Ok(Self {
            child,
            pgid,
            tag,
            armed: true,
        })
    }

    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// The leader's status if it has exited (reaped now), without waiting.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Whether the leader is dying or dead though it cannot be reaped yet:
    /// a killed leader whose other threads are still being torn down is a
    /// zombie `waitpid` does not report until the last of them is gone
    /// (measured: a SIGKILLed Chromium under load, for tens of ms).
    pub fn leader_dying(&self) -> bool {
        cfg!(target_os = "linux")
            && self
                .child
                .id()
                .and_then(stat)
                .is_some_and(|(state, _)| state == "Z" || state == "X")
    }

    /// The leader's piped stdin, stdout and stderr (a resident child's).
    pub fn take_pipes(&mut self) -> (Option<ChildStdin>, Option<ChildStdout>, Option<ChildStderr>) {
        (
            self.child.stdin.take(),
            self.child.stdout.take(),
            self.child.stderr.take(),
        )
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Something of the tree is still running: a live member of the group,
    /// or an orphan of this run that we adopted. Cheap: no full /proc scan
    /// unless the group seems alive.
    pub fn group_alive(&self) -> bool {
        // SAFETY: signal 0 only checks for existence and permission.
        let any = unsafe { libc::kill(-self.pgid, 0) == 0 };
        // Zombies count for kill(2) until reaped; ask /proc for live ones.
        let group = any && (!cfg!(target_os = "linux") || !self.live_members(false).is_empty());
        group || !self.adopted().is_empty()
    }

    /// As [`Tree::group_alive`], plus tagged descendants anywhere.
    pub fn anything_alive(&self) -> bool {
        self.group_alive() || !self.live_members(true).is_empty()
    }

    pub fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
        // A stopped process ignores TERM until continued (as timeout(1) does).
        self.signal(libc::SIGCONT);
    }

    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
    }

    /// The run is over and the tree was checked: never signal this group
    /// id again (the number may be reused by an unrelated process).
    pub fn disarm(&mut self) {
        if self.armed {
            #[cfg(target_os = "linux")]
            super::sentinel::unwatch(self.pgid);
        }
        self.armed = false;
    }

    fn signal(&self, sig: libc::c_int) {
        if !self.armed {
            return;
        }
        // SAFETY: plain syscalls on ids we own; errors (ESRCH) mean gone.
        unsafe {
            libc::kill(-self.pgid, sig);
        }
        let mut pids = self.live_members(true);
        pids.extend(self.adopted());
        for pid in pids {
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// Live orphans re-parented to us that belong to this run: not the
    /// leader of a run in progress, not tagged by another such run.
    /// Adopted zombies are reaped on the way.
    fn adopted(&self) -> Vec<libc::pid_t> {
        // Held while scanning: no run registers a new child meanwhile.
        let guard = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        let active = guard.clone().unwrap_or_default();
        #[cfg(target_os = "linux")]
        let sentinel = super::sentinel::pid();
        #[cfg(not(target_os = "linux"))]
        let sentinel = None;
        let found = children()
            .into_iter()
            .filter(|pid| !active.contains_key(pid) && Some(*pid) != sentinel)
            .filter(|pid| !reap_if_zombie(*pid))
            .filter(|pid| {
                let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                !active
                    .values()
                    .filter(|tag| **tag != self.tag)
                    .any(|tag| has_tag(&env, tag))
            })
            .collect();
        drop(guard);
        found
    }

    /// Live (not zombie) processes of this run found through /proc:
    /// members of the group, plus, with `escaped`, processes outside it
    /// carrying the run's tag.
    #[cfg(target_os = "linux")]
    fn live_members(&self, escaped: bool) -> Vec<libc::pid_t> {
        let me = std::process::id();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            if pid == me {
                return None;
            }
            let (state, pgrp) = stat(pid)?;
            if state == "Z" || state == "X" {
                return None;
            }
            let member = pgrp == self.pgid
                || escaped
                    && has_tag(
                        &std::fs::read(format!("/proc/{pid}/environ")).ok()?,
                        &self.tag,
                    );
            member.then(|| libc::pid_t::try_from(pid).ok()).flatten()
        })
        .collect()
    }

    /// Without /proc there is no cheap way to find escaped descendants; the
    /// process group still covers everything that did not call setsid.
    #[cfg(not(target_os = "linux"))]
    fn live_members(&self, _escaped: bool) -> Vec<libc::pid_t> {
        Vec::new()
    }
}

impl Drop for Tree {
    /// A run abandoned half-way (its future dropped) still leaves nothing.
    fn drop(&mut self) {
        self.kill();
        self.disarm();
        if let Ok(mut active) = ACTIVE.lock()
            && let Some(active) = active.as_mut()
        {
            active.remove(&self.pgid);
        }
    }
}

/// The read end of a pipe, non-blocking and registered with tokio.
pub fn async_reader(reader: io::PipeReader) -> io::Result<pipe::Receiver> {
    pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
}

/// The pipe pair a resident child may talk on besides stdio: it reads
/// what we write on its fd 3 and writes what we read on its fd 4 (the
/// convention of Chromium's `--remote-debugging-pipe`). A pipe reaches
/// only us, where a loopback port reaches every local user and every
/// program an agent runs.
pub struct SidePipes {
    pub to_child: pipe::Sender,
    pub from_child: pipe::Receiver,
}

/// Makes the side pipes and has `cmd`'s child put its ends on fds 3 and
/// 4; returns our ends and the child's (to drop once the child exists).
pub fn side_pipes(cmd: &mut tokio::process::Command) -> io::Result<(SidePipes, [OwnedFd; 2])> {
    let (child_reads, we_write) = io::pipe()?;
    let (we_read, child_writes) = io::pipe()?;
    // Above 3 and 4 in the parent (close-on-exec, as every fd of ours):
    // the child's dup2 onto 3 and 4 can then never overwrite the other
    // end, and always clears close-on-exec on the copy it makes.
    let high = |fd: OwnedFd| -> io::Result<OwnedFd> {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: duplicating an fd we own; the copy is owned below.
        let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
        if copy < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `copy` is a new fd nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(copy) })
    };
    let child_reads = high(OwnedFd::from(child_reads))?;
    let child_writes = high(OwnedFd::from(child_writes))?;
    let (r, w) = {
        use std::os::fd::AsRawFd;
        (child_reads.as_raw_fd(), child_writes.as_raw_fd())
    };
    // SAFETY: two dup2 calls between fork and exec (async-signal-safe).
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let ours = SidePipes {
        to_child: pipe::Sender::from_owned_fd(OwnedFd::from(we_write))?,
        from_child: pipe::Receiver::from_owned_fd(OwnedFd::from(we_read))?,
    };
    Ok((ours, [child_reads, child_writes]))
}

/// The leader dies with us, however we die: the kernel TERMs it when we
/// go (the parent-death signal, kept across exec), and the sentinel stops
/// the rest of its tree (see `sentinel.rs`). The signal is TERM, not KILL, so openclaw can still tell
/// its gateway; the sentinel KILLs what is left.
///
/// Linux sends it when the *thread* that forked the child ends, not the
/// process: every spawn happens on the one runtime thread, which lives as
/// long as the program (`lib.rs`, `on_runtime`).
#[cfg(target_os = "linux")]
fn die_with_us(cmd: &mut tokio::process::Command) {
    // SAFETY: getpid in the parent; the hook makes two async-signal-safe
    // system calls between fork and exec.
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(io::Error::last_os_error());
            }
            // We died between the fork and the prctl: nobody will send it.
            // (No allocation between fork and exec: a raw error code.)
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Orphaned descendants are re-parented to us instead of init.
fn become_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(target_os = "linux")]
        // SAFETY: prctl with an integer flag; failure only loses adoption.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    });
}

/// `VAR=tag` among the NUL-separated variables of an environ file.
fn has_tag(environ: &[u8], tag: &str) -> bool {
    let needle = format!("{}={}", super::RUN_TAG_VAR, tag);
    environ
        .split(|b| *b == 0)
        .any(|var| var == needle.as_bytes())
}

/// State letter and process group of `pid`, from /proc/PID/stat.
fn stat(pid: u32) -> Option<(String, libc::pid_t)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid pgrp ..."; comm may hold spaces and ')'.
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.to_owned();
    let pgrp = fields.nth(1)?.parse().ok()?;
    Some((state, pgrp))
}

/// Our direct children (every thread's list: an orphan is handed to any
/// live thread of the subreaper).
#[cfg(target_os = "linux")]
fn children() -> Vec<libc::pid_t> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut pids: Vec<libc::pid_t> = tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<_>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

#[cfg(not(target_os = "linux"))]
fn children() -> Vec<libc::pid_t> {
    Vec::new()
}

/// Reaps `pid` if it is a zombie child of ours; true if it was.
fn reap_if_zombie(pid: libc::pid_t) -> bool {
    let zombie = u32::try_from(pid)
        .ok()
        .and_then(stat)
        .is_none_or(|(state, _)| state == "Z" || state == "X");
    if zombie {
        let mut status = 0;
        // SAFETY: WNOHANG on a specific pid that is our (adopted) child and
        // not one tokio waits for (leaders of active runs are excluded).
        unsafe {
            libc::waitpid(pid, &mut status, libc::WNOHANG);
        }
    }
    zombie
}
