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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start the async runtime");
    let code = runtime.block_on(app::run(std::env::args_os().collect()));
    // A blocking read that can never finish (stdin nobody writes, a pipe an
    // escaped process holds) must not keep the process alive.
    runtime.shutdown_background();
    std::process::ExitCode::from(code)
}
