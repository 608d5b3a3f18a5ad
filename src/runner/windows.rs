//! Windows half of the runner: the child runs inside a Job Object, and
//! stopping the tree terminates the job (Windows has no polite signal a
//! console-less child would honour, so "terminate" and "kill" are one step).
//!
//! Run for real on every CI run: `scripts/windows.sh` cross-builds it and
//! `tests/windows.rs` drives it under Wine (the tree stop, kill-on-close,
//! Ctrl-C); the README's Windows section says what Wine cannot show.

use std::io;
use std::os::windows::io::OwnedHandle;
use std::process::ExitStatus;

use process_wrap::tokio::{ChildWrapper, CommandWrap, JobObject, KillOnDrop};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

pub struct Tree {
    child: Box<dyn ChildWrapper>,
    armed: bool,
    killed: bool,
}

impl Tree {
    pub fn spawn(cmd: tokio::process::Command, _tag: String) -> io::Result<Self> {
        let mut wrap = CommandWrap::from(cmd);
        // KillOnDrop makes the job JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: if the
        // router itself is ended outright (Task Manager, a host that kills
        // it), Windows closes the job's last handle and ends the tree too.
        wrap.wrap(JobObject).wrap(KillOnDrop);
        let child = wrap.spawn()?;
        drop(wrap);
        Ok(Self {
            child,
            armed: true,
            killed: false,
        })
    }

    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// The leader's status if it has exited, without waiting.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Windows reports an exit as it happens: nothing is dying unseen.
    pub fn leader_dying(&self) -> bool {
        false
    }

    /// The leader's piped stdin, stdout and stderr (a resident child's).
    pub fn take_pipes(&mut self) -> (Option<ChildStdin>, Option<ChildStdout>, Option<ChildStderr>) {
        (
            self.child.stdin().take(),
            self.child.stdout().take(),
            self.child.stderr().take(),
        )
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Job members are not listed here: until the job is terminated we
    /// assume members may remain, so every run ends with the job terminated
    /// (cheap, and it stops anything openclaw left behind).
    pub fn group_alive(&self) -> bool {
        !self.killed
    }

    pub fn anything_alive(&self) -> bool {
        !self.killed
    }

    pub fn terminate(&mut self) {
        self.kill();
    }

    pub fn kill(&mut self) {
        if self.armed && !self.killed {
            let _ = self.child.start_kill();
            self.killed = true;
        }
    }

    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Anonymous pipes cannot be registered with IOCP; tokio's file type reads
/// them on its blocking pool, and dropping it abandons a blocked read.
pub fn async_reader(reader: io::PipeReader) -> io::Result<tokio::fs::File> {
    Ok(tokio::fs::File::from_std(std::fs::File::from(
        OwnedHandle::from(reader),
    )))
}
