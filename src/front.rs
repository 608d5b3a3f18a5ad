//! The small executable's hand-over: a command line it does not run itself
//! becomes `clawbot_router-full`'s, the executable beside it.
//!
//! On Unix the full program replaces this process (`exec`): same pid, same
//! stdin, stdout, stderr and environment, so an MCP client, a service
//! manager or a shell sees one process, as before the split; `argv[0]` is
//! kept, so usage and help still say `clawbot_router`. Elsewhere there is
//! no `exec`, and the small executable links the full program instead.

use std::ffi::OsString;

/// The full program's file name, beside this executable.
#[cfg(unix)]
const FULL: &str = "clawbot_router-full";

#[cfg(unix)]
pub fn hand_over(args: Vec<OsString>) -> u8 {
    use std::os::unix::process::CommandExt;
    // Where this executable is: /proc's answer, else argv[0] when it names
    // a path (a sandbox without /proc).
    let me = std::env::current_exe().or_else(|error| {
        args.first()
            .map(std::path::PathBuf::from)
            .filter(|p| p.components().count() > 1)
            .ok_or(error)
    });
    let problem = match me {
        Ok(me) => {
            let full = me.with_file_name(FULL);
            let mut command = std::process::Command::new(&full);
            if let Some(arg0) = args.first() {
                command.arg0(arg0);
            }
            // Returns only if the program could not be started.
            let error = command.args(args.iter().skip(1)).exec();
            format!(
                "cannot start {} ({error}): `clawbot_router` runs router calls through the openclaw CLI itself and hands everything else to {FULL}, which must sit beside it (`cargo install --path .` installs both)",
                full.display()
            )
        }
        Err(error) => {
            format!("cannot tell where this program is, to start {FULL} beside it: {error}")
        }
    };
    crate::app::not_handed_over(&args, &problem)
}

#[cfg(not(unix))]
pub fn hand_over(args: Vec<OsString>) -> u8 {
    crate::run_full(args)
}
