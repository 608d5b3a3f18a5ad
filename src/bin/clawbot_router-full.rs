//! `clawbot_router-full`: the whole program — the router on every path, the
//! MCP server, the node and the links. `clawbot_router` hands it every
//! command line it does not run itself; it may also be run directly.

fn main() -> std::process::ExitCode {
    clawbot_router::full()
}
