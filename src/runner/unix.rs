//! Unix half of the runner: the child leads a new process group, signals go
//! to the whole group, and (on Linux) to descendants that left the group but
//! still carry the run's tag in their environment.
//!
//! Must never signal a process that is not ours: the group is only signalled
//! while the run is armed, and the tag is unique per run.

use std::io;
use std::os::fd::OwnedFd;
use std::process::ExitStatus;

use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
use tokio::net::unix::pipe;

/// The spawned child and everything it starts.
pub struct Tree {
    child: Box<dyn ChildWrapper>,
    pgid: libc::pid_t,
    tag: String,
    armed: bool,
}

impl Tree {
    /// The only place a child is made: a new process group led by the child.
    pub fn spawn(cmd: tokio::process::Command, tag: String) -> io::Result<Self> {
        let mut wrap = CommandWrap::from(cmd);
        wrap.wrap(ProcessGroup::leader());
        let child = wrap.spawn()?;
        drop(wrap);
        let pgid = child
            .id()
            .and_then(|id| libc::pid_t::try_from(id).ok())
            .ok_or_else(|| io::Error::other("child has no pid"))?;
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

    /// Some member of the child's process group is still running.
    pub fn group_alive(&self) -> bool {
        // SAFETY: signal 0 only checks for existence and permission.
        let any = unsafe { libc::kill(-self.pgid, 0) == 0 };
        // Zombies count for kill(2) until their new parent reaps them; ask
        // /proc whether a live member remains.
        any && (!cfg!(target_os = "linux") || !self.live_members(false).is_empty())
    }

    /// The group, or a tagged descendant that escaped it, is still running.
    pub fn anything_alive(&self) -> bool {
        self.group_alive() || !self.live_members(true).is_empty()
    }

    pub fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
    }

    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
    }

    /// The run is over and the tree was checked: never signal this group
    /// id again (the number may be reused by an unrelated process).
    pub fn disarm(&mut self) {
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
        for pid in self.live_members(true) {
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }
}

impl Drop for Tree {
    /// A run abandoned half-way (its future dropped) still leaves nothing.
    fn drop(&mut self) {
        self.kill();
    }
}

/// The read end of the merged pipe, non-blocking and registered with tokio.
pub fn async_reader(reader: io::PipeReader) -> io::Result<pipe::Receiver> {
    pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
}

impl Tree {
    /// Live (not zombie) processes of this run: members of the group, plus,
    /// with `escaped`, processes outside it carrying the run's tag.
    #[cfg(target_os = "linux")]
    fn live_members(&self, escaped: bool) -> Vec<libc::pid_t> {
        let needle = format!("{}={}", super::RUN_TAG_VAR, self.tag).into_bytes();
        let me = std::process::id();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            if pid == me {
                return None;
            }
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // "pid (comm) state ppid pgrp ..."; comm may hold spaces and ')'.
            let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
            let state = fields.next()?;
            let pgrp: libc::pid_t = fields.nth(1)?.parse().ok()?;
            if state == "Z" || state == "X" {
                return None;
            }
            let member = pgrp == self.pgid
                || escaped
                    && std::fs::read(format!("/proc/{pid}/environ"))
                        .ok()?
                        .split(|b| *b == 0)
                        .any(|var| var == needle.as_slice());
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
