//! clawbot_router: forwards a host LLM's tool call to OpenClaw and prints one
//! JSON result. See README.md.

mod app;
mod cli;
mod gateway;
mod mcp;
mod node;
mod router;
mod runner;
mod schema;
mod tools;
mod ui;

fn main() -> std::process::ExitCode {
    // The work runs on a thread whose stack we size: a caller may have
    // shrunk the main thread's (`ulimit -s`, which is also how ARG_MAX is
    // made small), and a debug build's frames are large.
    let worker = std::thread::Builder::new()
        .name("clawbot_router".into())
        .stack_size(8 << 20)
        .spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cannot start the async runtime");
            let code = runtime.block_on(app::run(std::env::args_os().collect()));
            // A blocking read that can never finish (stdin nobody writes, a
            // pipe an escaped process holds) must not keep the process alive.
            runtime.shutdown_background();
            code
        })
        .expect("cannot start the main thread");
    std::process::ExitCode::from(worker.join().unwrap_or(101))
}
