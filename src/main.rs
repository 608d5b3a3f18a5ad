//! clawbot_router: forwards a host LLM's tool call to OpenClaw and prints one
//! JSON result. See README.md.

mod app;
mod cli;
mod gateway;
mod links;
mod mcp;
mod node;
mod router;
mod runner;
mod schema;
mod tools;
mod ui;

fn main() -> std::process::ExitCode {
    // A caller may have shrunk the main thread's stack (`ulimit -s`, which
    // is also how ARG_MAX is made small) below what our frames need: then
    // the work runs on a thread whose stack we size. Otherwise it stays on
    // the main thread — a thread costs about 30,000 instructions a start.
    let code = if main_stack_is_small() {
        std::thread::Builder::new()
            .name("clawbot_router".into())
            .stack_size(STACK)
            .spawn(run)
            .expect("cannot start the main thread")
            .join()
            .unwrap_or(101)
    } else {
        run()
    };
    std::process::ExitCode::from(code)
}

const STACK: usize = 8 << 20;

fn run() -> u8 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start the async runtime");
    let code = runtime.block_on(app::run(std::env::args_os().collect()));
    // A blocking read that can never finish (stdin nobody writes, a pipe an
    // escaped process holds) must not keep the process alive.
    runtime.shutdown_background();
    code
}

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
