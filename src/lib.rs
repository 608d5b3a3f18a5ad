//! clawbot_router: forwards a host LLM's tool call to OpenClaw and prints one
//! JSON result; and, as a node or a link, serves other agents' tool calls
//! on this machine. See README.md.
//!
//! Two executables share this library. `clawbot_router-full` ([`full`]) is
//! the whole program. `clawbot_router` ([`front`]) runs a router call
//! through the openclaw CLI itself — the call a host makes per tool use,
//! whose start-up cost is measured against GNU `timeout` — and hands any
//! other command line to the full program. It links only what that call
//! needs: a fifth of the code, so it maps and touches far fewer pages
//! (BENCHMARKS.md, item 1).

mod app;
mod cli;
mod front;
/// For the fuzz targets in `fuzz/` only: not an API.
#[doc(hidden)]
pub mod fuzzing;
mod gateway;
mod links;
mod mcp_server;
mod node;
mod router;
mod runner;
mod schema;
mod shared;
mod tools;
mod ui;

use std::future::Future;
use std::process::ExitCode;

/// The whole program: every mode and every path of a call.
pub fn full() -> ExitCode {
    ExitCode::from(run_full(std::env::args_os().collect()))
}

/// The whole program on `args`, its secrets sealed away first.
fn run_full(args: Vec<std::ffi::OsString>) -> u8 {
    shared::secrets::seal(&args);
    on_runtime(move || app::run(args))
}

/// The small executable: a router call through the CLI runs here; any
/// other command line becomes the full program's (on Unix, by `exec`, so
/// it keeps this process; elsewhere this executable is the full program).
pub fn front() -> ExitCode {
    ExitCode::from(front_code(std::env::args_os().collect()))
}

fn front_code(args: Vec<std::ffi::OsString>) -> u8 {
    match app::cli_call(&args) {
        Some(call) => {
            shared::secrets::seal(&args);
            on_runtime(|| app::run_cli_call(call))
        }
        // Sealed by the full program: the hand-over passes the secrets on.
        None => front::hand_over(args),
    }
}

/// [`front`] for a C `main` (`#![no_main]`), which skips std's start-up:
/// its stack-overflow handler costs a read of `/proc/self/maps`, a
/// signal stack and four signal handlers on every call. What else std does
/// there is done here: a closed stdin, stdout or stderr is reopened on
/// `/dev/null` (so no pipe or file of ours takes its number), and SIGPIPE
/// is ignored (a closed stdout is an error to handle, not death). The
/// arguments come from `argv` (std fills its own list without its start-up
/// on glibc only), and a panic ends the program with std's 101 after
/// unwinding — which stops a running tree — instead of aborting at the C
/// boundary. It saves about 0.1 ms a call (BENCHMARKS.md, item 1);
/// tests/front.rs fails if any of that work stops being done.
///
/// # Safety
/// `argv` must hold `argc` valid C strings, as `main`'s do.
#[cfg(unix)]
pub unsafe fn front_from_c_main(argc: libc::c_int, argv: *const *const libc::c_char) -> i32 {
    use std::os::unix::ffi::OsStrExt;
    let args = (0..usize::try_from(argc).unwrap_or(0))
        // SAFETY: the caller's promise.
        .map(|i| unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) })
        .map(|arg| std::ffi::OsStr::from_bytes(arg.to_bytes()).to_owned())
        .collect();
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: plain syscalls on the three standard descriptors.
    unsafe {
        if libc::poll(fds.as_mut_ptr(), 3, 0) != -1 {
            for fd in fds.iter().filter(|fd| fd.revents & libc::POLLNVAL != 0) {
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                if null != fd.fd {
                    return 254; // as std: nothing sane to run with
                }
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    std::panic::catch_unwind(|| front_code(args)).map_or(101, i32::from)
}

/// Runs the work on a current-thread runtime and returns its exit code.
fn on_runtime<F, W>(work: W) -> u8
where
    W: FnOnce() -> F + Send + 'static,
    F: Future<Output = u8>,
{
    let run = move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("cannot start the async runtime");
        let code = runtime.block_on(work());
        // A blocking read that can never finish (stdin nobody writes, a pipe an
        // escaped process holds) must not keep the process alive.
        runtime.shutdown_background();
        code
    };
    // A caller may have shrunk the main thread's stack (`ulimit -s`, which
    // is also how ARG_MAX is made small) below what our frames need: then
    // the work runs on a thread whose stack we size. Otherwise it stays on
    // the main thread — a thread costs about 30,000 instructions a start.
    if main_stack_is_small() {
        std::thread::Builder::new()
            .name("clawbot_router".into())
            .stack_size(STACK)
            .spawn(run)
            .expect("cannot start the main thread")
            .join()
            .unwrap_or(101)
    } else {
        run()
    }
}

const STACK: usize = 8 << 20;
#[cfg(unix)]
fn main_stack_is_small() -> bool {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut limit) } == 0;
    ok && limit.rlim_cur != libc::RLIM_INFINITY && limit.rlim_cur < STACK as libc::rlim_t
}

/// Windows gives the main thread 1 MiB: always the sized thread there.
#[cfg(not(unix))]
fn main_stack_is_small() -> bool {
    true
}
