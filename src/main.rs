//! `clawbot_router`: a router call through the openclaw CLI runs here; any
//! other command line is handed to `clawbot_router-full` (see `lib.rs`).
//! On Unix a C `main`: std's own start-up is the library's to trim.
#![cfg_attr(unix, no_main)]

#[cfg(unix)]
#[unsafe(no_mangle)]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: the C runtime's argc and argv.
    unsafe { clawbot_router::front_from_c_main(argc, argv) }
}

#[cfg(not(unix))]
fn main() -> std::process::ExitCode {
    clawbot_router::front()
}
