//! Building the openclaw command line (seed 002 §3.3): which program, which
//! arguments, directly or through WSL, and when the message goes through a
//! file instead of argv.
//!
//! The one rule here: no shell ever parses the message. It is one argv
//! element (or the content of a private file), whatever it contains. The
//! only shell on any path is the optional WSL login shell, and it receives
//! the command as positional parameters (`exec "$@"`), never as text to
//! parse.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::Path;

use tempfile::TempPath;

/// Where the turn goes: a named agent, or a destination OpenClaw derives a
/// session from (`--to`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Agent(String),
    To(String),
}

impl Route {
    /// The request's agent wins; else the configured destination; else the
    /// default agent `main`.
    pub fn choose(agent: Option<&str>, default_to: Option<&str>) -> Route {
        match (agent, default_to.map(str::trim).filter(|to| !to.is_empty())) {
            (Some(agent), _) => Route::Agent(agent.to_owned()),
            (None, Some(to)) => Route::To(to.to_owned()),
            (None, None) => Route::Agent("main".to_owned()),
        }
    }
}

/// How openclaw is reached on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// The openclaw command: a program and the arguments that come before
    /// `agent` (e.g. `["npx", "openclaw"]`).
    pub openclaw: Vec<String>,
    pub wsl: Option<Wsl>,
}

/// Launch through `wsl.exe --exec`, which hands argv to Linux untouched.
/// (Without `--exec`, wsl.exe joins the arguments and re-parses them with a
/// shell: a message like `$(rm -rf ~)` would run.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wsl {
    pub exe: OsString,
    pub distro: Option<String>,
    /// Run openclaw from a login shell so that a PATH set up in the user's
    /// profile (npm prefix, nvm) applies. Chosen when openclaw is not given
    /// as an absolute path.
    pub login_shell: bool,
}

/// Why openclaw could not be located; shown in the seed's spawn-failure line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocateError {
    #[error("OPENCLAW_BIN / --openclaw is empty")]
    Empty,
    #[error("OPENCLAW_BIN / --openclaw cannot be split into words: {0}")]
    Unparsable(String),
    #[error(
        "openclaw was not found on PATH (install it, or name it with --openclaw or OPENCLAW_BIN)"
    )]
    NotFound,
}

/// Finds openclaw from `--openclaw`/`OPENCLAW_BIN` (split into words as
/// the platform's users write command lines: `runner::split_words`), else
/// on PATH. On Windows without a native openclaw, WSL is used.
pub fn locate(
    openclaw: Option<&str>,
    wsl: bool,
    distro: Option<&str>,
) -> Result<Launcher, LocateError> {
    let words = match openclaw {
        Some(text) => {
            let words = crate::runner::split_words(text).map_err(LocateError::Unparsable)?;
            if words.is_empty() {
                return Err(LocateError::Empty);
            }
            Some(words)
        }
        None => None,
    };
    let distro = distro.map(str::trim).filter(|d| !d.is_empty());
    let mut want_wsl = wsl || distro.is_some();
    let words = match words {
        // Windows: `npx` or `openclaw` is an npm `.cmd` shim, which
        // CreateProcess does not find by that name (a `.cmd` found is then
        // known to need the message file).
        Some(mut words) if !want_wsl => {
            words[0] = crate::runner::find_program(&words[0], None);
            words
        }
        Some(words) => words,
        None if want_wsl => vec!["openclaw".to_owned()],
        None => match which::which("openclaw") {
            Ok(path) => vec![path.to_string_lossy().into_owned()],
            Err(_) if cfg!(windows) => {
                want_wsl = true;
                vec!["openclaw".to_owned()]
            }
            Err(_) => return Err(LocateError::NotFound),
        },
    };
    let wsl = want_wsl.then(|| Wsl {
        exe: which::which("wsl.exe")
            .map(OsString::from)
            .unwrap_or_else(|_| "wsl.exe".into()),
        distro: distro.map(str::to_owned),
        login_shell: !words[0].starts_with('/'),
    });
    Ok(Launcher {
        openclaw: words,
        wsl,
    })
}

/// A ready-to-spawn command. Keep it alive until the child is gone: the
/// message file is removed when it drops.
#[derive(Debug)]
pub struct Invocation {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Held for its `Drop`, which removes the file.
    pub message_file: Option<TempPath>,
}

/// Longest message passed as an argument. Linux caps one argv string at
/// 128 KiB (MAX_ARG_STRLEN, including the NUL); Windows caps the whole
/// command line at 32,767 UTF-16 units, and quoting may double a message.
const ARG_LIMIT_UNIX_BYTES: usize = 128 * 1024 - 1;
const ARG_LIMIT_WINDOWS_UNITS: usize = 8 * 1024;

impl Launcher {
    /// `openclaw agent (--agent A | --to D) (--message M | --message-file F)`,
    /// wrapped for WSL when needed.
    /// `through_file` forces `--message-file` whatever the message's size.
    pub fn build(
        &self,
        route: &Route,
        session: Option<&str>,
        message: &str,
        through_file: bool,
        json: bool,
    ) -> Result<Invocation, BuildError> {
        let mut argv: Vec<OsString> = self.openclaw.iter().map(OsString::from).collect();
        argv.push("agent".into());
        match route {
            Route::Agent(agent) => argv.extend(["--agent".into(), agent.into()]),
            Route::To(to) => argv.extend(["--to".into(), to.into()]),
        }
        if let Some(key) = session {
            argv.extend(["--session-key".into(), key.into()]);
        }
        if json {
            argv.push("--json".into());
        }
        let mut message_file = None;
        if through_file || self.message_needs_file(message) {
            let path = write_message_file(message).map_err(BuildError::MessageFile)?;
            argv.push("--message-file".into());
            argv.push(match self.wsl {
                Some(_) => wsl_path(&path).into(),
                None => path.as_os_str().to_owned(),
            });
            message_file = Some(path);
        } else {
            argv.extend(["--message".into(), message.into()]);
        }

        let Some(wsl) = &self.wsl else {
            // Through cmd.exe or PowerShell, which re-parse their arguments
            // (Rust quotes a .cmd's arguments for cmd.exe, but not for a
            // shell named as the program, and Wine's cmd.exe expanded %VAR%
            // despite it): the message is in a file, and the route must be
            // plain words.
            let route_value = match route {
                Route::Agent(value) | Route::To(value) => value,
            };
            if reparses_arguments(&self.openclaw[0]) && !is_plain(route_value) {
                return Err(BuildError::NotPlain {
                    arg: route_value.clone(),
                    program: self.openclaw[0].clone(),
                });
            }
            let program = argv.remove(0);
            return Ok(Invocation {
                program,
                args: argv,
                message_file,
            });
        };
        let mut args: Vec<OsString> = Vec::new();
        if let Some(distro) = &wsl.distro {
            args.extend(["--distribution".into(), distro.into()]);
        }
        args.push("--exec".into());
        if wsl.login_shell {
            // `$0` is a label; "$@" is argv, passed through untouched.
            args.extend([
                "bash".into(),
                "-lc".into(),
                r#"exec "$@""#.into(),
                "clawbot_router".into(),
            ]);
        }
        args.extend(argv);
        Ok(Invocation {
            program: wsl.exe.clone(),
            args,
            message_file,
        })
    }

    fn message_needs_file(&self, message: &str) -> bool {
        if message.contains('\0') {
            return true; // argv strings cannot carry NUL
        }
        let windows_command_line = self.wsl.is_some() || cfg!(windows);
        if windows_command_line {
            reparses_arguments(&self.openclaw[0])
                || message.encode_utf16().count() > ARG_LIMIT_WINDOWS_UNITS
        } else {
            message.len() > ARG_LIMIT_UNIX_BYTES
        }
    }
}

/// Why a command could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot write the temporary message file: {0}")]
    MessageFile(io::Error),
    /// The agent or destination holds what cmd.exe or PowerShell would act on.
    #[error(
        "{arg:?} holds characters cmd.exe or PowerShell would act on, and openclaw runs through {program} here (only letters, digits and ._:+@- can pass)"
    )]
    NotPlain { arg: String, program: String },
}

/// Whether Windows runs `program` through cmd.exe or PowerShell, which
/// re-parse what they are given: `.cmd`/`.bat` files (npm's shims), or the
/// shells themselves named as the program. The message must never be one
/// of their arguments.
fn reparses_arguments(program: &str) -> bool {
    cfg!(windows) && is_shell_like(program)
}

fn is_shell_like(program: &str) -> bool {
    // Either separator, whatever the platform the code is tested on.
    let name = program
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(program)
        .to_ascii_lowercase();
    let (stem, ext) = name.rsplit_once('.').unwrap_or((&name, ""));
    matches!(ext, "cmd" | "bat") || matches!(stem, "cmd" | "powershell" | "pwsh")
}

/// A word no shell acts on (an agent id, a destination, a session key).
pub(crate) fn is_plain(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | ':' | '+' | '@' | '-'))
}

/// A private (0600 on Unix) temporary file holding the message.
fn write_message_file(message: &str) -> io::Result<TempPath> {
    let mut file = tempfile::Builder::new()
        .prefix("clawbot_router-message-")
        .suffix(".txt")
        .tempfile()?;
    file.write_all(message.as_bytes())?;
    file.flush()?;
    Ok(file.into_temp_path())
}

/// The Linux path WSL sees for a Windows path (`C:\Users\me\x` →
/// `/mnt/c/Users/me/x`, the default automount root). Paths that are not
/// drive paths are passed as they are.
fn wsl_path(path: &Path) -> String {
    let text = path.to_string_lossy();
    let bytes = text.as_bytes();
    if bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && bytes[2] == b'\\' {
        let drive = (bytes[0] as char).to_ascii_lowercase();
        format!("/mnt/{drive}/{}", text[3..].replace('\\', "/"))
    } else {
        text.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(words: &[&str]) -> Launcher {
        Launcher {
            openclaw: words.iter().map(|w| w.to_string()).collect(),
            wsl: None,
        }
    }

    fn strings(v: &[OsString]) -> Vec<String> {
        v.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn shells_and_batch_files_are_known_and_routes_must_be_plain_for_them() {
        for shell in [
            r"C:\nodejs\npx.CMD",
            "openclaw.bat",
            "cmd",
            r"C:\Windows\System32\cmd.exe",
            "pwsh",
            "powershell.exe",
        ] {
            assert!(is_shell_like(shell), "{shell}");
        }
        for program in ["node", r"C:\nodejs\node.exe", "openclaw", "cmdtool.exe"] {
            assert!(!is_shell_like(program), "{program}");
        }
        assert!(
            is_plain("main")
                && is_plain("agent:main:s-1.2")
                && is_plain("+15551234567")
                && is_plain("助手")
        );
        for bad in ["a&b", "%PATH%", "a b", "x\"y", "a^b", "$(x)", "a|b", "a;b"] {
            assert!(!is_plain(bad), "{bad}");
        }
    }

    #[test]
    fn route_prefers_agent_then_destination_then_main() {
        assert_eq!(
            Route::choose(Some("ops"), Some("+1")),
            Route::Agent("ops".into())
        );
        assert_eq!(Route::choose(None, Some("+1")), Route::To("+1".into()));
        assert_eq!(Route::choose(None, Some("  ")), Route::Agent("main".into()));
        assert_eq!(Route::choose(None, None), Route::Agent("main".into()));
    }

    #[test]
    fn direct_command_keeps_the_message_as_one_argument() {
        let msg = "--help $(rm -rf ~) `x` \"q\" 'q'\n🦀";
        let inv = direct(&["npx", "openclaw"])
            .build(&Route::Agent("ops".into()), None, msg, false, false)
            .unwrap();
        assert_eq!(inv.program, "npx");
        assert_eq!(
            strings(&inv.args),
            ["openclaw", "agent", "--agent", "ops", "--message", msg]
        );
        assert!(inv.message_file.is_none());
    }

    #[test]
    fn messages_over_the_argv_limit_go_through_a_private_file() {
        let msg = "x".repeat(ARG_LIMIT_UNIX_BYTES + 1);
        let inv = direct(&["openclaw"])
            .build(&Route::To("+1".into()), None, &msg, false, false)
            .unwrap();
        let args = strings(&inv.args);
        assert_eq!(&args[..4], ["agent", "--to", "+1", "--message-file"]);
        let path = inv.message_file.as_ref().unwrap();
        assert_eq!(args[4], path.to_string_lossy());
        assert_eq!(std::fs::read_to_string(path).unwrap(), msg);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let kept = path.to_path_buf();
        drop(inv);
        assert!(!kept.exists(), "the message file outlived the invocation");
    }

    #[test]
    fn a_message_at_the_argv_limit_stays_an_argument() {
        let msg = "x".repeat(ARG_LIMIT_UNIX_BYTES);
        let inv = direct(&["openclaw"])
            .build(&Route::Agent("main".into()), None, &msg, false, false)
            .unwrap();
        assert!(inv.message_file.is_none());
    }

    #[test]
    fn nul_bytes_go_through_a_file() {
        let inv = direct(&["openclaw"])
            .build(&Route::Agent("main".into()), None, "a\0b", false, false)
            .unwrap();
        assert!(inv.message_file.is_some());
    }

    #[test]
    fn wsl_uses_exec_and_a_login_shell_that_parses_nothing() {
        let launcher = Launcher {
            openclaw: vec!["openclaw".into()],
            wsl: Some(Wsl {
                exe: "wsl.exe".into(),
                distro: Some("Ubuntu".into()),
                login_shell: true,
            }),
        };
        let inv = launcher
            .build(&Route::Agent("ops".into()), None, "$(id)", false, false)
            .unwrap();
        assert_eq!(inv.program, "wsl.exe");
        assert_eq!(
            strings(&inv.args),
            [
                "--distribution",
                "Ubuntu",
                "--exec",
                "bash",
                "-lc",
                "exec \"$@\"",
                "clawbot_router",
                "openclaw",
                "agent",
                "--agent",
                "ops",
                "--message",
                "$(id)"
            ]
        );
    }

    #[test]
    fn wsl_with_an_absolute_openclaw_needs_no_shell() {
        let launcher = locate(Some("/opt/openclaw/bin/openclaw"), true, None).unwrap();
        let wsl = launcher.wsl.as_ref().unwrap();
        assert!(!wsl.login_shell);
        assert_eq!(wsl.distro, None);
        let inv = launcher
            .build(&Route::Agent("main".into()), None, "hi", false, false)
            .unwrap();
        assert_eq!(
            strings(&inv.args)[..2],
            ["--exec", "/opt/openclaw/bin/openclaw"]
        );
    }

    #[test]
    fn wsl_moves_long_messages_to_a_file_sooner() {
        let launcher = locate(Some("openclaw"), false, Some("Debian")).unwrap();
        let msg = "x".repeat(ARG_LIMIT_WINDOWS_UNITS + 1);
        let inv = launcher
            .build(&Route::Agent("main".into()), None, &msg, false, false)
            .unwrap();
        assert!(inv.message_file.is_some());
    }

    #[test]
    fn windows_paths_become_wsl_mount_paths() {
        assert_eq!(
            wsl_path(Path::new(r"C:\Users\me\AppData\Local\Temp\m.txt")),
            "/mnt/c/Users/me/AppData/Local/Temp/m.txt"
        );
        assert_eq!(wsl_path(Path::new("/tmp/m.txt")), "/tmp/m.txt");
    }

    #[test]
    fn openclaw_bin_is_split_like_a_shell_would() {
        let l = locate(Some("npx 'open claw'"), false, None).unwrap();
        assert_eq!(l.openclaw, ["npx", "open claw"]);
        assert_eq!(locate(Some("  "), false, None), Err(LocateError::Empty));
        assert!(matches!(
            locate(Some("npx 'openclaw"), false, None),
            Err(LocateError::Unparsable(_))
        ));
    }
}
