//! The sentinel: what stops our process trees when we die outright.
//!
//! Every stop path of the runner needs us alive: a deadline, a cancel, a
//! signal handler, the subreaper's adoption, the tag sweep. SIGKILL (a
//! host that gives up on us, `kill -9`, the OOM killer) runs none of it,
//! and every tree we started would live on. Two things cover that case:
//! - each leader gets the parent-death signal (`PR_SET_PDEATHSIG`, set in
//!   [`super::unix`] between fork and exec): the kernel TERMs it when we go;
//! - the sentinel, a small process forked from us on the first spawn,
//!   holds the read end of a pipe whose only write end is ours. The kernel
//!   closes that end however we die, and on end-of-file the sentinel stops
//!   every process group we registered and every process carrying one of
//!   our run tags: TERM (and CONT) at once, KILL from 400 ms on, done within
//!   a second (BENCHMARKS.md, item 13).
//!
//! Why a forked process and not an exec'd helper: it starts once per
//! process, on the router's hot path (a fork of the small executable costs
//! a fraction of an exec, measured in BENCHMARKS.md item 1), and needs no
//! executable of its own on disk.
//!
//! A command we run is ours to run as the same user, and may kill the
//! sentinel. Its death is noticed at the next spawn, the next scan for
//! orphans or the next record (whichever comes first), and a new sentinel
//! is given every group still watched. The price is that the forked child may
//! only make raw system calls: we are multi-threaded, so any lock another
//! thread held at the fork stays held for ever in the child. The code below
//! the fork allocates nothing, formats nothing, cannot panic, and touches
//! no state of ours but the few bytes prepared before the fork.
//!
//! It must never outlive us by more than its sweep, never hold a pipe or
//! file of ours (it closes every descriptor, so a host reading our stdout
//! to its end is not kept waiting), and never take a signal meant for us
//! (its own process group; terminal and job-control signals ignored). When
//! we exit normally every run has unregistered its group, and it exits at
//! once without scanning anything.
//!
//! What it cannot stop: a descendant that left its group *and* cleared its
//! environment (a true daemon) — while we live, adoption finds it; once we
//! are dead nothing names it. Linux only: elsewhere there is no parent-death
//! signal and no /proc to sweep (Windows' job object is kill-on-close).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

/// The running sentinel: its pid and our end of its life pipe.
struct Sentinel {
    pid: libc::pid_t,
    life: OwnedFd,
}

/// The sentinel, and the groups it watches: what a new one is given if
/// the last one was killed.
struct Watch {
    sentinel: Option<Sentinel>,
    groups: Vec<libc::pid_t>,
    /// Spawns under way.
    starting: usize,
}

static WATCH: Mutex<Watch> = Mutex::new(Watch {
    sentinel: None,
    groups: Vec::new(),
    starting: 0,
});

/// Groups the sentinel can hold at once. Beyond that, a run's group goes
/// unregistered: its tagged members are still swept.
const GROUPS: usize = 4096;
/// A message on the life pipe: `[op, pgid]` as native integers, written in
/// one `write` (far below PIPE_BUF, so never interleaved).
const RECORD: usize = 8;
const ADD: i32 = 1;
const REMOVE: i32 = 2;
/// A spawn is under way: until its group is added (or the spawn failed),
/// our death is swept for our run tags even with no group registered.
const STARTING: i32 = 3;
const FAILED: i32 = 4;
/// The sweep's timetable after we died: TERM at once, then KILL.
const FIRST_KILL_MS: i64 = 400;
const KILL_PASSES: usize = 5;
const BETWEEN_KILLS_MS: i64 = 100;

/// A spawn is about to happen: makes sure the sentinel runs (starting it
/// if need be) and tells it, so that our death from now on is swept for
/// our run tags — the leader's children, forked before its group is
/// registered, carry them. Whether a sentinel runs; if so, [`watch`] or
/// [`failed`] must follow.
pub fn starting() -> bool {
    let mut watch = WATCH.lock().unwrap_or_else(|e| e.into_inner());
    watch.revive();
    if watch.sentinel.is_none() {
        return false;
    }
    watch.starting += 1;
    watch.send(STARTING, 0);
    true
}

/// The spawn [`starting`] announced failed.
pub fn failed() {
    let mut watch = WATCH.lock().unwrap_or_else(|e| e.into_inner());
    watch.starting = watch.starting.saturating_sub(1);
    watch.send(FAILED, 0);
}

/// Registers a run's process group (the spawn [`starting`] announced):
/// if we die, it is stopped.
pub fn watch(pgid: libc::pid_t) {
    let mut watch = WATCH.lock().unwrap_or_else(|e| e.into_inner());
    watch.starting = watch.starting.saturating_sub(1);
    if watch.groups.len() < GROUPS {
        watch.groups.push(pgid);
    }
    watch.send(ADD, pgid);
}

/// The run is over and its group checked: forget it (the number may be
/// reused by an unrelated process).
pub fn unwatch(pgid: libc::pid_t) {
    let mut watch = WATCH.lock().unwrap_or_else(|e| e.into_inner());
    watch.groups.retain(|g| *g != pgid);
    watch.send(REMOVE, pgid);
}

/// The sentinel's pid (our child, but never one of a run's orphans),
/// after replacing one that was killed.
pub fn pid() -> Option<libc::pid_t> {
    let mut watch = WATCH.lock().unwrap_or_else(|e| e.into_inner());
    if watch.sentinel.is_some() {
        watch.revive();
    }
    watch.sentinel.as_ref().map(|s| s.pid)
}

impl Watch {
    /// Starts a sentinel when none runs or the last one is dead, and gives
    /// a new one every group still watched.
    fn revive(&mut self) {
        if let Some(sentinel) = &self.sentinel {
            // SAFETY: a non-blocking wait for our own child. 0: it runs;
            // its pid (reaped now) or an error (not our child any more):
            // it is gone.
            let waited =
                unsafe { libc::waitpid(sentinel.pid, std::ptr::null_mut(), libc::WNOHANG) };
            if waited == 0 && !stopped(sentinel.pid) {
                return;
            }
            if waited == 0 {
                // Stopped (`kill -STOP`): it would never sweep. Replaced;
                // adoption reaps it.
                // SAFETY: a signal to our own child.
                unsafe {
                    libc::kill(sentinel.pid, libc::SIGKILL);
                }
            }
            self.sentinel = None;
        }
        self.sentinel = start().ok();
        for _ in 0..self.starting {
            self.send(STARTING, 0);
        }
        for pgid in self.groups.clone() {
            self.send(ADD, pgid);
        }
    }

    fn send(&mut self, op: i32, pgid: libc::pid_t) {
        let Some(sentinel) = self.sentinel.as_ref() else {
            return;
        };
        let mut record = [0u8; RECORD];
        record[..4].copy_from_slice(&op.to_ne_bytes());
        record[4..].copy_from_slice(&pgid.to_ne_bytes());
        // SAFETY: a write of a local buffer to our own descriptor.
        unsafe { libc::write(sentinel.life.as_raw_fd(), record.as_ptr().cast(), RECORD) };
        // EPIPE: it died (someone killed it); `revive`, at the next spawn
        // or scan, starts another and gives it this group. EAGAIN: a
        // stopped sentinel with a full pipe; the record is lost, the tag
        // sweep still covers the group's tagged members.
    }
}

/// Whether process `pid` is stopped (its state in /proc is `T` or `t`).
fn stopped(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| matches!(rest.trim_start().chars().next(), Some('T' | 't')))
    })
}

fn start() -> io::Result<Sentinel> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the array it is given. Both ends close on exec:
    // no child of ours may hold the write end (we would never look dead).
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors we own.
    let (read, life) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Everything the child needs, prepared while allocating is still safe.
    let needle = Needle::ours();
    // SAFETY: fork; the child runs only `sentinel`, which never returns
    // and makes only async-signal-safe system calls.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => unsafe { sentinel(read.as_raw_fd(), &needle) },
        pid => {
            drop(read);
            // A sentinel that cannot take a record at once is not waited
            // for: records are best-effort, the tag sweep is the backstop.
            // SAFETY: fcntl on our own descriptor.
            unsafe {
                let flags = libc::fcntl(life.as_raw_fd(), libc::F_GETFL);
                libc::fcntl(life.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
            Ok(Sentinel { pid, life })
        }
    }
}

/// `\0CLAWBOT_ROUTER_RUN_ID=<our pid>-`: how every run tag of ours begins in
/// a process's environment block (the leading NUL makes it a whole entry;
/// the scan puts one before the block's first entry too).
struct Needle {
    bytes: [u8; 64],
    len: usize,
}

impl Needle {
    fn ours() -> Self {
        let text = format!("\0{}={}-", super::RUN_TAG_VAR, std::process::id());
        let mut bytes = [0u8; 64];
        let len = text.len().min(bytes.len());
        bytes[..len].copy_from_slice(&text.as_bytes()[..len]);
        Self { bytes, len }
    }
}

/// The sentinel's whole life. Raw system calls only (see the module doc).
///
/// # Safety
/// Call only in a freshly forked child.
unsafe fn sentinel(read: libc::c_int, needle: &Needle) -> ! {
    unsafe {
        // Our own group: a kill of our parent's group (Ctrl-C on a terminal,
        // a supervisor's group kill) must leave the one that cleans up.
        libc::setpgid(0, 0);
        // Handlers inherited from the parent (its runtime's) must not run
        // here; terminal and job-control signals are not for us.
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        // The standard signals (real-time ones start at 32).
        for sig in 1..32 {
            libc::signal(sig, libc::SIG_DFL);
        }
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
        // Hold nothing of ours: the life pipe becomes fd 3, everything else
        // closes, and stdin/stdout/stderr point at /dev/null.
        let life = if read == 3 { 3 } else { libc::dup2(read, 3) };
        if life != 3 {
            libc::_exit(1);
        }
        close_from(4);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        if null > 2 {
            libc::close(null);
        }

        let mut groups = [0 as libc::pid_t; GROUPS];
        let mut count = 0usize;
        let mut starting = 0usize;
        let mut buf = [0u8; RECORD * 64];
        let mut have = 0usize;
        loop {
            let n = libc::read(3, buf.as_mut_ptr().add(have).cast(), buf.len() - have);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                break; // our parent is gone: its end of the pipe closed
            }
            have += n as usize;
            let whole = have - have % RECORD;
            let mut at = 0;
            while at < whole {
                let op = i32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
                let pgid = i32::from_ne_bytes([buf[at + 4], buf[at + 5], buf[at + 6], buf[at + 7]]);
                if op == STARTING {
                    starting += 1;
                } else if op == FAILED {
                    starting = starting.saturating_sub(1);
                } else if op == ADD && pgid > 1 {
                    starting = starting.saturating_sub(1);
                    if count < GROUPS {
                        groups[count] = pgid;
                        count += 1;
                    }
                } else if op == REMOVE {
                    let mut i = 0;
                    while i < count {
                        if groups[i] == pgid {
                            count -= 1;
                            groups[i] = groups[count];
                        } else {
                            i += 1;
                        }
                    }
                }
                at += RECORD;
            }
            // A partial record (never expected) waits for its rest.
            let mut i = 0;
            while whole + i < have {
                buf[i] = buf[whole + i];
                i += 1;
            }
            have -= whole;
        }
        // Nothing registered and no spawn under way: we exited normally,
        // every run ended cleanly.
        if count == 0 && starting == 0 {
            libc::_exit(0);
        }
        let groups = &groups[..count];
        sweep(groups, needle, libc::SIGTERM);
        sleep_ms(FIRST_KILL_MS);
        for _ in 0..KILL_PASSES {
            if sweep(groups, needle, libc::SIGKILL) == 0 {
                break;
            }
            sleep_ms(BETWEEN_KILLS_MS);
        }
        libc::_exit(0);
    }
}

/// Signals every registered group and every tagged process; how many were
/// still there.
unsafe fn sweep(groups: &[libc::pid_t], needle: &Needle, sig: libc::c_int) -> usize {
    let mut found = 0;
    unsafe {
        for &pgid in groups {
            if libc::kill(-pgid, sig) == 0 {
                found += 1;
                if sig == libc::SIGTERM {
                    libc::kill(-pgid, libc::SIGCONT);
                }
            }
        }
        let me = libc::getpid();
        let proc_dir = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if proc_dir < 0 {
            return found;
        }
        let mut entries = [0u8; 4096];
        loop {
            let n = libc::syscall(
                libc::SYS_getdents64,
                proc_dir,
                entries.as_mut_ptr(),
                entries.len(),
            );
            if n <= 0 {
                break;
            }
            let mut at = 0usize;
            while at + 19 < n as usize {
                // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name.
                let reclen = u16::from_ne_bytes([entries[at + 16], entries[at + 17]]) as usize;
                if reclen < 20 {
                    break;
                }
                let pid = parse_pid(&entries[at + 19..(at + reclen).min(n as usize)]);
                if pid > 1 && pid != me && tagged(pid, needle) && libc::kill(pid, sig) == 0 {
                    found += 1;
                    if sig == libc::SIGTERM {
                        libc::kill(pid, libc::SIGCONT);
                    }
                }
                at += reclen;
            }
        }
        libc::close(proc_dir);
    }
    found
}

/// The number a NUL-terminated directory name spells, or 0.
fn parse_pid(name: &[u8]) -> libc::pid_t {
    let mut pid: libc::pid_t = 0;
    for &b in name {
        match b {
            0 => break,
            b'0'..=b'9' if pid < 100_000_000 => pid = pid * 10 + (b - b'0') as libc::pid_t,
            _ => return 0,
        }
    }
    pid
}

/// Whether `/proc/PID/environ` holds one of our tags.
unsafe fn tagged(pid: libc::pid_t, needle: &Needle) -> bool {
    // "/proc/" + up to 10 digits + "/environ" + NUL.
    let mut path = [0u8; 32];
    path[..6].copy_from_slice(b"/proc/");
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut rest = pid;
    while rest > 0 && n < digits.len() {
        digits[n] = b'0' + (rest % 10) as u8;
        rest /= 10;
        n += 1;
    }
    let mut at = 6;
    while n > 0 {
        n -= 1;
        path[at] = digits[n];
        at += 1;
    }
    path[at..at + 8].copy_from_slice(b"/environ");
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let needle = &needle.bytes[..needle.len];
        // The block as one stream: a NUL before its first entry, and the
        // last bytes of each read kept so a tag cut by a read is still seen.
        let mut window = [0u8; 4096 + 64];
        window[0] = 0;
        let mut kept = 1usize;
        let mut hit = false;
        loop {
            let n = libc::read(
                fd,
                window.as_mut_ptr().add(kept).cast(),
                window.len() - kept,
            );
            if n <= 0 {
                break;
            }
            let len = kept + n as usize;
            if contains(&window[..len], needle) {
                hit = true;
                break;
            }
            let keep = (needle.len() - 1).min(len);
            let mut i = 0;
            while i < keep {
                window[i] = window[len - keep + i];
                i += 1;
            }
            kept = keep;
        }
        libc::close(fd);
        hit
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// Closes every descriptor from `first` on.
unsafe fn close_from(first: libc::c_int) {
    unsafe {
        // close_range(2) (Linux 5.9); older kernels: one by one.
        if libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, 0) == 0 {
            return;
        }
        let mut limit: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(1 << 20) as libc::c_int
        } else {
            1024
        };
        for fd in first..max {
            libc::close(fd);
        }
    }
}

fn sleep_ms(ms: i64) {
    let time = libc::timespec {
        // 32 bits on armv7 (glibc's time_t and long): a sleep of a few
        // hundred milliseconds fits either.
        tv_sec: (ms / 1000) as libc::time_t,
        tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
    };
    // SAFETY: nanosleep reads the struct it is given; an early wake-up
    // only shortens the wait.
    unsafe {
        libc::nanosleep(&time, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run in a process of its own by the test below (this test binary,
    /// again): announces a spawn, starts a tagged tree the way a leader
    /// would fork one, and is killed before the group is registered.
    #[test]
    #[ignore = "a helper process for the test below, not a test"]
    fn helper_killed_between_spawn_and_watch() {
        let Some(pid_file) = std::env::var_os("CLAWBOT_SENTINEL_HELPER") else {
            return;
        };
        assert!(starting());
        let tag = format!("{}-1", std::process::id());
        let mut tree = std::process::Command::new("sh")
            .args(["-c", "sleep 60 & echo $! > \"$0\"; wait"])
            .arg(&pid_file)
            .env(crate::runner::RUN_TAG_VAR, tag)
            .spawn()
            .unwrap();
        // Killed meanwhile by the test, never coming back here.
        let _ = tree.wait();
    }

    /// Killed outright after the leader was spawned but before its group
    /// reached the sentinel (a loaded machine makes that moment long): what
    /// the leader forked meanwhile still goes, by its run tag. Before, the
    /// sentinel, knowing no group, left at once.
    #[test]
    fn a_tree_started_before_its_group_was_watched_still_goes() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "runner::sentinel::tests::helper_killed_between_spawn_and_watch",
                "--ignored",
                "--nocapture",
            ])
            .env("CLAWBOT_SENTINEL_HELPER", &pid_file)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let sleeper: libc::pid_t = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the helper never started its tree"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        helper.kill().unwrap();
        helper.wait().unwrap();
        let gone = |pid: libc::pid_t| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !gone(sleeper) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let left = !gone(sleeper);
        // SAFETY: a plain kill of a pid this test started.
        unsafe {
            libc::kill(sleeper, libc::SIGKILL);
        }
        assert!(!left, "the tree outlived its killed parent");
    }

    #[test]
    fn a_tag_is_found_at_the_start_in_the_middle_and_across_reads() {
        let needle = Needle::ours();
        let tag = &needle.bytes[1..needle.len];
        assert!(contains(b"\0A=1\0", b"\0A=1"));
        let mut block = b"\0".to_vec();
        block.extend_from_slice(tag);
        block.extend_from_slice(b"7-0-1\0");
        assert!(contains(&block, &needle.bytes[..needle.len]));
        // A variable whose value merely ends with our tag is not ours.
        let mut fake = b"\0X=".to_vec();
        fake.extend_from_slice(tag);
        assert!(!contains(&fake, &needle.bytes[..needle.len]));
        assert_eq!(parse_pid(b"1234\0\0\0"), 1234);
        assert_eq!(parse_pid(b"self\0"), 0);
        assert_eq!(parse_pid(b"12a\0"), 0);
    }

    #[test]
    fn a_process_carrying_our_tag_is_recognised_through_proc() {
        let needle = Needle::ours();
        // A tag longer than one read's worth of other variables before it.
        let filler = "x".repeat(5000);
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("FILLER", &filler)
            .env(
                super::super::RUN_TAG_VAR,
                format!("{}-9-9", std::process::id()),
            )
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .env(
                super::super::RUN_TAG_VAR,
                format!("1{}-9-9", std::process::id()),
            )
            .spawn()
            .unwrap();
        // SAFETY: reads of /proc files.
        let (ours, theirs) = unsafe {
            (
                tagged(child.id() as i32, &needle),
                tagged(other.id() as i32, &needle),
            )
        };
        child.kill().unwrap();
        other.kill().unwrap();
        let _ = (child.wait(), other.wait());
        assert!(ours, "our tag was not found");
        assert!(!theirs, "another process's tag was taken for ours");
    }
}
