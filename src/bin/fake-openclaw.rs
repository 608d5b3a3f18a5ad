//! `fake-openclaw`: a stand-in for the `openclaw` command-line interface, for
//! testing programs that drive OpenClaw agents (such as `clawbot_router`).
//!
//! The fake imitates `openclaw agent` from OpenClaw 2026.9.6 closely enough
//! for a caller that spawns `openclaw agent --agent A --message M` and
//! captures its output, and adds *scenarios* that misbehave on purpose: slow
//! replies, floods of output, invalid UTF-8, processes that ignore `SIGTERM`,
//! grandchildren that keep the output pipe open, and so on.
//!
//! # Usage
//!
//! ```text
//! fake-openclaw [FAKE OPTIONS] <openclaw args...>
//! ```
//!
//! Fake options must come first; the first argument that is not one of them
//! starts the OpenClaw arguments. Every fake option also has an environment
//! variable, which is used when the option is absent (an empty variable
//! counts as unset). Both `--opt VALUE` and `--opt=VALUE` are accepted.
//!
//! | Option            | Environment variable      | Default  | Meaning                                         |
//! |-------------------|---------------------------|----------|-------------------------------------------------|
//! | `--scenario NAME` | `FAKE_OPENCLAW_SCENARIO`  | `reply`  | behaviour of `agent` (see below)                |
//! | `--sleep SECS`    | `FAKE_OPENCLAW_SLEEP`     | `3600`   | seconds to sleep (fractions allowed)            |
//! | `--exit-code N`   | `FAKE_OPENCLAW_EXIT`      | `3`      | exit status of the `exit` scenario (0-255)      |
//! | `--bytes N`       | `FAKE_OPENCLAW_BYTES`     | `1G`     | size of the `flood`; suffixes `K`, `M`, `G`     |
//! | `--lines N`       | `FAKE_OPENCLAW_LINES`     | `6`      | number of lines of the `interleave` scenario    |
//! | `--pause-ms N`    | `FAKE_OPENCLAW_PAUSE_MS`  | `0`      | pause between `interleave` lines                |
//! | `--record PATH`   | `FAKE_OPENCLAW_RECORD`    | none     | append one JSON line per invocation to PATH     |
//! | `--pid-file PATH` | `FAKE_OPENCLAW_PID_FILE`  | none     | append process ids (one per line) to PATH       |
//!
//! Other environment variables:
//!
//! * `FAKE_OPENCLAW_AGENTS`: comma-separated list of known agent ids
//!   (default `main,ops,doctor`).
//! * `FAKE_OPENCLAW_HOLD_IGNORE_TERM=1`: the `hold-pipe` helper process
//!   ignores `SIGTERM`.
//! * `FAKE_OPENCLAW_HOLD_DEPTH=N`: a `hold-pipe` helper starts another one
//!   below it (its pid appended to `--pid-file`) until N levels of helpers
//!   run: with `grandchild`, N=2 makes a tree three levels deep.
//! * `FAKE_OPENCLAW_HEARTBEAT=PATH`: while a scenario sleeps, append the
//!   process's id to PATH every 100 ms (to see from outside, on any
//!   platform, whether it still runs).
//! * `FAKE_OPENCLAW_LOCAL=1`: answer as if `--local` were given.
//! * `CLAWBOT_ROUTER_RUN_ID`: copied into the record line.
//!
//! # Emulated OpenClaw CLI
//!
//! * `--version` (or `-V`) prints `OpenClaw 2026.9.6 (fake)`.
//! * `--help` (or `-h`) prints help; `agent --help` prints the agent options.
//! * `agent` accepts the options of the real command: `--agent <id>`,
//!   `-m/--message <text>`, `--message-file <path>`, `-t/--to <number>`,
//!   `--json`, `--timeout <seconds>`, `--local`, `--session-id <id>`,
//!   `--session-key <key>`, `--thinking <level>`, `--model <id>`,
//!   `--deliver`, `--channel <channel>`, `--verbose <on|off>`, and the global
//!   options `--no-color`, `--log-level <level>` and `--profile <name>`
//!   (globals are also accepted before the command).
//! * Parsing follows commander.js: an option that takes a value consumes the
//!   next argument unconditionally, even when it starts with `-` or is `--`;
//!   `--opt=value` and `-mvalue` work too; the last occurrence wins; `--`
//!   ends the options. Errors go to stderr with exit status 1:
//!   `error: unknown option '<opt>'`, `error: unknown command '<cmd>'`,
//!   `error: option '<flags>' argument missing`,
//!   `error: too many arguments for 'agent'. ...`.
//! * Message and agent validation (for the scenarios that validate, see
//!   below), all with exit status 1:
//!   * no message, or a message that is empty or whitespace only:
//!     `Missing message. Use openclaw agent --message "..." or --message-file <path>.`
//!   * `--message-file` unreadable, larger than 4 MiB (4194304 bytes) or not
//!     UTF-8, or given together with `--message`: a one-line explanation.
//!   * an agent id (`--agent`, default `main`; `--to` also means `main`)
//!     missing from `FAKE_OPENCLAW_AGENTS`:
//!     `Unknown agent id "<id>". Use "openclaw agents list" to see configured agents.`
//!
//!   Without `--json` the error is printed on stderr. With `--json`, stdout
//!   gets `{"ok":false,"error":{"type":"cli_error","message":"..."}}` and
//!   stderr gets `[openclaw] The CLI command failed.`.
//! * The reply to a message `M` is always `ECHO: M`. Plain output is the
//!   reply and a newline on stdout. `--json` output is the pretty-printed
//!   (two-space indent) result object of the real CLI:
//!
//!   ```text
//!   {
//!     "runId": "<uuid-like>",
//!     "status": "ok",
//!     "summary": "completed",
//!     "result": {
//!       "payloads": [
//!         {
//!           "text": "ECHO: M",
//!           "mediaUrl": null
//!         }
//!       ],
//!       "meta": {
//!         "durationMs": 1,
//!         "agentMeta": {
//!           "sessionId": "<--session-id or uuid-like>",
//!           "sessionFile": "agent:<agent>:main",
//!           "provider": "fakellm",
//!           "model": "fake-model"
//!         }
//!       }
//!     }
//!   }
//!   ```
//!
//! # Scenarios
//!
//! Scenarios only change what `agent` does. "Validates" means the message
//! and agent checks above run first (and their errors end the run); the
//! other scenarios ignore the message entirely.
//!
//! | Scenario          | Validates | Behaviour                                                                 |
//! |-------------------|-----------|---------------------------------------------------------------------------|
//! | `reply`           | yes       | reply like the real CLI (plain or `--json`), exit 0                       |
//! | `echo`            | yes       | write exactly the message bytes to stdout (no newline, even with `--json`), exit 0 |
//! | `interleave`      | no        | `--lines` lines: odd `i` → stdout `out i`, even `i` → stderr `err i`, one write each, `--pause-ms` between, exit 0 |
//! | `invalid-utf8`    | no        | invalid UTF-8 on stdout (`before \xff\xfe after \xe4\xbd\n`) and stderr (`stderr \xc3\x28 end\n`), exit 0 |
//! | `flood`           | no        | exactly `--bytes` bytes in 8 KiB writes alternating stdout/stderr: `BEGIN\n`, filler lines, `\nEND\n` (fewer than 11 bytes: all `x`), exit 0; exit 1 silently if a write fails |
//! | `exit`            | no        | stderr `fake-openclaw exiting with N`, exit `--exit-code`                 |
//! | `sleep`           | yes       | stdout `thinking...`, sleep `--sleep`, then reply, exit 0                 |
//! | `ignore-term`     | no        | ignore `SIGTERM`, append own pid to `--pid-file`, stdout `ignoring SIGTERM`, sleep, exit 0 |
//! | `grandchild`      | no        | spawn a `hold-pipe` child in the same process group, append its pid and own pid to `--pid-file`, stdout `spawned grandchild <pid>`, sleep, exit 0 |
//! | `escaped`         | no        | like `grandchild`, but the child calls `setsid`: it leaves the process group while this process still runs |
//! | `orphan`          | yes       | like `grandchild` (same pid-file lines), but print only the reply and exit 0 at once, leaving the child holding the pipe |
//! | `daemon`          | yes       | spawn a `hold-pipe` child in a new session (`setsid`), append its pid to `--pid-file`, reply and exit 0 at once |
//! | `detached`        | yes       | like `daemon`, but the child also gets `/dev/null` for stdio and an empty environment: a true daemon |
//! | `hold-pipe`       | no        | helper for the above: stderr `holding pipe`, sleep, exit 0 (ignores `SIGTERM` if `FAKE_OPENCLAW_HOLD_IGNORE_TERM=1`) |
//! | `gateway-timeout` | yes       | the real "request timed out" answer (plain on stdout, or `--json` with `"status": "timeout"`), exit 1 |
//! | `gateway-down`    | yes       | stderr: gateway connection closed / not reachable (ECONNREFUSED), exit 1 |
//! | `hang-after-reply` | yes      | reply (plain or `--json`), append own pid to `--pid-file`, then sleep `--sleep` without exiting (the known OpenClaw hang after a complete `--json` answer) |
//!
//! With `--local`, a `--json` reply has the embedded run's shape
//! (`{payloads, meta}`, no `runId`/`status`/`result` wrapper) and a log line
//! goes to stderr first, as the real `openclaw agent --local --json` does.
//!
//! Children inherit stdout and stderr (that is how they hold the pipe), get
//! `/dev/null` as stdin, and are started as
//! `<current exe> --scenario hold-pipe --sleep S [--pid-file P] agent --message hold`
//! with `FAKE_OPENCLAW_RECORD` removed from their environment, so they never
//! add record lines.
//!
//! # Recording
//!
//! When a record path is set, every invocation whose fake options are valid
//! appends one JSON line to it, after parsing and before any
//! scenario-specific work (so even rejected invocations are recorded):
//!
//! ```text
//! {"argv":[...],"message":"...","messageFile":null,"agent":"ops","to":null,"json":false,"pid":1234,"cwd":"/...","env":{"CLAWBOT_ROUTER_RUN_ID":null}}
//! ```
//!
//! `argv` holds every argument after the program name (fake options
//! included); `message` is the `--message` value or the `--message-file`
//! content (null if neither is available); `agent`, `to` and `messageFile` are
//! the values given on the command line (null when absent, and also when the
//! OpenClaw arguments could not be parsed). Non-UTF-8 text is converted
//! lossily. The line is written with a single append, so
//! concurrent invocations can share one record file. Pid files are appended
//! the same way.
//!
//! # Exit statuses
//!
//! * 0: success; 1: an emulated OpenClaw error (or a failed write to
//!   stdout/stderr, which is silent); other values: the `exit` scenario.
//! * 2: the fake itself was misused or failed (bad fake option, unwritable
//!   record or pid file, failed spawn); the reason is printed on stderr
//!   prefixed with `fake-openclaw:`.
//!
//! # Examples
//!
//! ```text
//! fake-openclaw agent --agent ops --message hi                 # ECHO: hi
//! fake-openclaw --scenario interleave --lines 4 agent -m x 2>&1
//! FAKE_OPENCLAW_SCENARIO=sleep FAKE_OPENCLAW_SLEEP=0.5 fake-openclaw agent -m hi
//! fake-openclaw --scenario flood --bytes 10M agent -m x 2>&1 | tail -c 5
//! ```

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const VERSION_LINE: &str = "OpenClaw 2026.9.6 (fake)";
const MAX_MESSAGE_FILE_BYTES: u64 = 4 * 1024 * 1024;
const DEFAULT_AGENT: &str = "main";
const DEFAULT_AGENTS: &str = "main,ops,doctor";
const DEFAULT_SLEEP: Duration = Duration::from_secs(3600);
const DEFAULT_EXIT_CODE: u8 = 3;
const DEFAULT_FLOOD_BYTES: u64 = 1 << 30;
const DEFAULT_LINES: u64 = 6;

const MISSING_MESSAGE: &str =
    "Missing message. Use openclaw agent --message \"...\" or --message-file <path>.";
const CLI_FAILED: &str = "[openclaw] The CLI command failed.\n";
const TIMEOUT_TEXT: &str = "Request timed out before a response was generated. Please try again, or increase `agents.defaults.timeoutSeconds` in your config.";
const GATEWAY_DOWN: &str = "Gateway agent call connection closed; see openclaw logs.\n\
                            Gateway not reachable at ws://127.0.0.1:18789 (ECONNREFUSED).\n";

const ENV_AGENTS: &str = "FAKE_OPENCLAW_AGENTS";
const ENV_HOLD_IGNORE_TERM: &str = "FAKE_OPENCLAW_HOLD_IGNORE_TERM";
const ENV_HOLD_DEPTH: &str = "FAKE_OPENCLAW_HOLD_DEPTH";
const ENV_HEARTBEAT: &str = "FAKE_OPENCLAW_HEARTBEAT";
const ENV_RUN_ID: &str = "CLAWBOT_ROUTER_RUN_ID";

const FLOOD_CHUNK: usize = 8 * 1024;
const FLOOD_HEAD: &[u8] = b"BEGIN\n";
const FLOOD_TAIL: &[u8] = b"\nEND\n";
const FLOOD_LINE: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.\n";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(Failure::Fatal(reason)) => {
            // Nothing more can be done if stderr is gone too.
            let _ = emit(
                Stream::Stderr,
                format!("fake-openclaw: {reason}\n").as_bytes(),
            );
            ExitCode::from(2)
        }
        Err(Failure::Output) => ExitCode::from(1),
    }
}

/// Why the fake stopped without producing its intended output.
enum Failure {
    /// The fake itself was misused or failed; reported on stderr, exit 2.
    Fatal(String),
    /// stdout or stderr could not be written (e.g. a closed pipe); exit 1.
    Output,
}

type Outcome = Result<ExitCode, Failure>;

fn run() -> Outcome {
    let start = Instant::now();
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let (config, rest) = FakeConfig::parse(&argv)?;
    let invocation = parse_openclaw(rest);

    let agent_args = match &invocation {
        Ok(Invocation::Agent(args)) => Some(args),
        _ => None,
    };
    let message = agent_args.map(resolve_message);
    if let Some(path) = &config.record {
        let recorded = match (&message, agent_args) {
            (Some(Ok(resolved)), _) => resolved.clone(),
            (_, Some(args)) => args.message.as_deref().map(os_to_vec),
            _ => None,
        };
        append_record(path, &argv, agent_args, recorded.as_deref())?;
    }

    match invocation {
        Err(error) => {
            emit(Stream::Stderr, format!("error: {error}\n").as_bytes())?;
            Ok(ExitCode::from(1))
        }
        Ok(Invocation::Version) => {
            emit(Stream::Stdout, format!("{VERSION_LINE}\n").as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(Invocation::Help) => {
            emit(Stream::Stdout, main_help().as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(Invocation::AgentHelp) => {
            emit(Stream::Stdout, agent_help().as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(Invocation::NoCommand) => {
            emit(Stream::Stderr, main_help().as_bytes())?;
            Ok(ExitCode::from(1))
        }
        Ok(Invocation::Agent(args)) => {
            let message = message.unwrap_or(Ok(None));
            run_scenario(&config, &args, message, start)
        }
    }
}

// ---------------------------------------------------------------------------
// Fake options
// ---------------------------------------------------------------------------

/// What `agent` does; selected with `--scenario`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scenario {
    Reply,
    Echo,
    Interleave,
    InvalidUtf8,
    Flood,
    Exit,
    Sleep,
    IgnoreTerm,
    Grandchild,
    Escaped,
    Orphan,
    Daemon,
    Detached,
    HoldPipe,
    GatewayTimeout,
    GatewayDown,
    HangAfterReply,
}

impl Scenario {
    const ALL: [Scenario; 17] = [
        Scenario::Reply,
        Scenario::Echo,
        Scenario::Interleave,
        Scenario::InvalidUtf8,
        Scenario::Flood,
        Scenario::Exit,
        Scenario::Sleep,
        Scenario::IgnoreTerm,
        Scenario::Grandchild,
        Scenario::Escaped,
        Scenario::Orphan,
        Scenario::Daemon,
        Scenario::Detached,
        Scenario::HoldPipe,
        Scenario::GatewayTimeout,
        Scenario::GatewayDown,
        Scenario::HangAfterReply,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Reply => "reply",
            Scenario::Echo => "echo",
            Scenario::Interleave => "interleave",
            Scenario::InvalidUtf8 => "invalid-utf8",
            Scenario::Flood => "flood",
            Scenario::Exit => "exit",
            Scenario::Sleep => "sleep",
            Scenario::IgnoreTerm => "ignore-term",
            Scenario::Grandchild => "grandchild",
            Scenario::Escaped => "escaped",
            Scenario::Orphan => "orphan",
            Scenario::Daemon => "daemon",
            Scenario::Detached => "detached",
            Scenario::HoldPipe => "hold-pipe",
            Scenario::GatewayTimeout => "gateway-timeout",
            Scenario::GatewayDown => "gateway-down",
            Scenario::HangAfterReply => "hang-after-reply",
        }
    }

    fn summary(self) -> &'static str {
        match self {
            Scenario::Reply => "reply like the real CLI: `ECHO: <message>` (default)",
            Scenario::Echo => "write exactly the message bytes to stdout",
            Scenario::Interleave => "alternate --lines lines between stdout and stderr",
            Scenario::InvalidUtf8 => "write invalid UTF-8 to stdout and stderr",
            Scenario::Flood => "write --bytes bytes alternately to stdout and stderr",
            Scenario::Exit => "exit with --exit-code",
            Scenario::Sleep => "print `thinking...`, sleep --sleep seconds, then reply",
            Scenario::IgnoreTerm => "ignore SIGTERM and sleep",
            Scenario::Grandchild => "spawn a pipe-holding child, then sleep",
            Scenario::Escaped => "spawn a pipe-holding child in a new session, then sleep",
            Scenario::Orphan => "spawn a pipe-holding child, reply and exit",
            Scenario::Daemon => "spawn a pipe-holding child in a new session, reply and exit",
            Scenario::Detached => {
                "spawn a true daemon (new session, no stdio, empty environment), reply and exit"
            }
            Scenario::HoldPipe => "(internal) hold stdout/stderr open while sleeping",
            Scenario::GatewayTimeout => "answer like a model that timed out, exit 1",
            Scenario::GatewayDown => "fail like an unreachable gateway, exit 1",
            Scenario::HangAfterReply => {
                "reply (plain or --json), then sleep --sleep seconds without exiting"
            }
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The fake's own options, in the order they are documented.
#[derive(Clone, Copy)]
enum FakeFlag {
    Scenario,
    Sleep,
    ExitCode,
    Bytes,
    Lines,
    PauseMs,
    Record,
    PidFile,
}

impl FakeFlag {
    const ALL: [FakeFlag; 8] = [
        FakeFlag::Scenario,
        FakeFlag::Sleep,
        FakeFlag::ExitCode,
        FakeFlag::Bytes,
        FakeFlag::Lines,
        FakeFlag::PauseMs,
        FakeFlag::Record,
        FakeFlag::PidFile,
    ];

    fn flag(self) -> &'static str {
        match self {
            FakeFlag::Scenario => "--scenario",
            FakeFlag::Sleep => "--sleep",
            FakeFlag::ExitCode => "--exit-code",
            FakeFlag::Bytes => "--bytes",
            FakeFlag::Lines => "--lines",
            FakeFlag::PauseMs => "--pause-ms",
            FakeFlag::Record => "--record",
            FakeFlag::PidFile => "--pid-file",
        }
    }

    fn env(self) -> &'static str {
        match self {
            FakeFlag::Scenario => "FAKE_OPENCLAW_SCENARIO",
            FakeFlag::Sleep => "FAKE_OPENCLAW_SLEEP",
            FakeFlag::ExitCode => "FAKE_OPENCLAW_EXIT",
            FakeFlag::Bytes => "FAKE_OPENCLAW_BYTES",
            FakeFlag::Lines => "FAKE_OPENCLAW_LINES",
            FakeFlag::PauseMs => "FAKE_OPENCLAW_PAUSE_MS",
            FakeFlag::Record => "FAKE_OPENCLAW_RECORD",
            FakeFlag::PidFile => "FAKE_OPENCLAW_PID_FILE",
        }
    }

    fn metavar(self) -> &'static str {
        match self {
            FakeFlag::Scenario => "NAME",
            FakeFlag::Sleep => "SECS",
            FakeFlag::Record | FakeFlag::PidFile => "PATH",
            _ => "N",
        }
    }

    fn help(self) -> &'static str {
        match self {
            FakeFlag::Scenario => "behaviour of `agent` (default reply)",
            FakeFlag::Sleep => "seconds to sleep, fractions allowed (default 3600)",
            FakeFlag::ExitCode => "exit status of the `exit` scenario, 0-255 (default 3)",
            FakeFlag::Bytes => "bytes written by `flood`, suffixes K/M/G (default 1G)",
            FakeFlag::Lines => "lines written by `interleave` (default 6)",
            FakeFlag::PauseMs => "milliseconds between `interleave` lines (default 0)",
            FakeFlag::Record => "append a JSON line describing each invocation",
            FakeFlag::PidFile => "append process ids, one per line",
        }
    }

    /// Recognizes `--flag` and `--flag=value`, returning the flag and the
    /// inline value, if any.
    fn recognize(arg: &OsStr) -> Option<(FakeFlag, Option<OsString>)> {
        let arg = arg.to_str()?;
        Self::ALL.into_iter().find_map(|flag| {
            let rest = arg.strip_prefix(flag.flag())?;
            if rest.is_empty() {
                Some((flag, None))
            } else {
                rest.strip_prefix('=')
                    .map(|value| (flag, Some(OsString::from(value))))
            }
        })
    }
}

/// Settings of the fake, from its options and environment variables.
struct FakeConfig {
    scenario: Scenario,
    sleep: Duration,
    exit_code: u8,
    bytes: u64,
    lines: u64,
    pause: Duration,
    record: Option<PathBuf>,
    pid_file: Option<PathBuf>,
}

impl FakeConfig {
    /// Parses the leading fake options of `argv` and returns the settings
    /// together with the remaining (OpenClaw) arguments.
    fn parse(argv: &[OsString]) -> Result<(Self, &[OsString]), Failure> {
        let mut settings = FakeSettings::default();
        let mut rest = argv;
        while let Some((arg, tail)) = rest.split_first() {
            let Some((flag, inline)) = FakeFlag::recognize(arg) else {
                break;
            };
            rest = tail;
            let value = match inline {
                Some(value) => value,
                None => {
                    let (value, tail) = rest.split_first().ok_or_else(|| {
                        Failure::Fatal(format!("option '{}' requires a value", flag.flag()))
                    })?;
                    rest = tail;
                    value.clone()
                }
            };
            settings.flags[flag as usize] = Some(value);
        }

        let scenarios = Scenario::ALL.map(Scenario::name).join(", ");
        let integer = "a non-negative integer";
        let config = FakeConfig {
            scenario: settings.parse(
                FakeFlag::Scenario,
                Scenario::Reply,
                &format!("one of {scenarios}"),
                Scenario::from_name,
            )?,
            sleep: settings.parse(
                FakeFlag::Sleep,
                DEFAULT_SLEEP,
                "a non-negative number of seconds",
                parse_seconds,
            )?,
            exit_code: settings.parse(
                FakeFlag::ExitCode,
                DEFAULT_EXIT_CODE,
                "an integer from 0 to 255",
                |s| s.parse().ok(),
            )?,
            bytes: settings.parse(
                FakeFlag::Bytes,
                DEFAULT_FLOOD_BYTES,
                "a byte count such as 4096, 64K, 10M or 1G",
                parse_size,
            )?,
            lines: settings.parse(FakeFlag::Lines, DEFAULT_LINES, integer, |s| s.parse().ok())?,
            pause: settings.parse(FakeFlag::PauseMs, Duration::ZERO, integer, |s| {
                s.parse().ok().map(Duration::from_millis)
            })?,
            record: settings.path(FakeFlag::Record),
            pid_file: settings.path(FakeFlag::PidFile),
        };
        Ok((config, rest))
    }
}

/// Raw fake option values given on the command line, indexed by `FakeFlag`.
#[derive(Default)]
struct FakeSettings {
    flags: [Option<OsString>; FakeFlag::ALL.len()],
}

impl FakeSettings {
    /// The flag's value, else its non-empty environment variable, together
    /// with the name of where it came from.
    fn raw(&self, flag: FakeFlag) -> Option<(OsString, &'static str)> {
        match &self.flags[flag as usize] {
            Some(value) => Some((value.clone(), flag.flag())),
            None => std::env::var_os(flag.env())
                .filter(|value| !value.is_empty())
                .map(|value| (value, flag.env())),
        }
    }

    /// Parses the (trimmed) setting, or returns `default` if it is unset.
    fn parse<T>(
        &self,
        flag: FakeFlag,
        default: T,
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, Failure> {
        let Some((raw, source)) = self.raw(flag) else {
            return Ok(default);
        };
        raw.to_str().map(str::trim).and_then(parse).ok_or_else(|| {
            Failure::Fatal(format!(
                "invalid value '{}' for {source}: expected {expected}",
                raw.to_string_lossy()
            ))
        })
    }

    fn path(&self, flag: FakeFlag) -> Option<PathBuf> {
        self.raw(flag).map(|(raw, _)| PathBuf::from(raw))
    }
}

/// Parses a non-negative, finite number of seconds.
fn parse_seconds(text: &str) -> Option<Duration> {
    Duration::try_from_secs_f64(text.parse().ok()?).ok()
}

/// Parses a byte count with an optional `K`, `M` or `G` suffix (powers of
/// 1024, case-insensitive).
fn parse_size(text: &str) -> Option<u64> {
    let (digits, shift) = match text.as_bytes().last()?.to_ascii_uppercase() {
        b'K' => (&text[..text.len() - 1], 10),
        b'M' => (&text[..text.len() - 1], 20),
        b'G' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

// ---------------------------------------------------------------------------
// OpenClaw command line (commander.js style)
// ---------------------------------------------------------------------------

/// The OpenClaw options known to the fake.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OptId {
    Agent,
    Message,
    MessageFile,
    To,
    SessionId,
    SessionKey,
    Thinking,
    Model,
    Verbose,
    Channel,
    Local,
    Deliver,
    Json,
    Timeout,
    NoColor,
    LogLevel,
    Profile,
    Version,
    Help,
}

impl OptId {
    const ALL: [OptId; 19] = [
        OptId::Agent,
        OptId::Message,
        OptId::MessageFile,
        OptId::To,
        OptId::SessionId,
        OptId::SessionKey,
        OptId::Thinking,
        OptId::Model,
        OptId::Verbose,
        OptId::Channel,
        OptId::Local,
        OptId::Deliver,
        OptId::Json,
        OptId::Timeout,
        OptId::NoColor,
        OptId::LogLevel,
        OptId::Profile,
        OptId::Version,
        OptId::Help,
    ];

    /// The flags as commander declares and prints them; the short letter,
    /// long name and whether a value is required are all derived from this.
    fn flags(self) -> &'static str {
        match self {
            OptId::Agent => "--agent <id>",
            OptId::Message => "-m, --message <text>",
            OptId::MessageFile => "--message-file <path>",
            OptId::To => "-t, --to <number>",
            OptId::SessionId => "--session-id <id>",
            OptId::SessionKey => "--session-key <key>",
            OptId::Thinking => "--thinking <level>",
            OptId::Model => "--model <id>",
            OptId::Verbose => "--verbose <on|off>",
            OptId::Channel => "--channel <channel>",
            OptId::Local => "--local",
            OptId::Deliver => "--deliver",
            OptId::Json => "--json",
            OptId::Timeout => "--timeout <seconds>",
            OptId::NoColor => "--no-color",
            OptId::LogLevel => "--log-level <level>",
            OptId::Profile => "--profile <name>",
            OptId::Version => "-V, --version",
            OptId::Help => "-h, --help",
        }
    }

    fn help(self) -> &'static str {
        match self {
            OptId::Agent => "Agent id (default: main)",
            OptId::Message => "Message body for the agent",
            OptId::MessageFile => "Read the message body from a UTF-8 file (max 4 MiB)",
            OptId::To => "Recipient number (the fake uses agent main)",
            OptId::SessionId => "Session id reported in --json output",
            OptId::Json => "Output result as JSON",
            OptId::NoColor => "Disable ANSI colors",
            OptId::Version => "Output the version number",
            OptId::Help => "Display help",
            _ => "Accepted and ignored by the fake",
        }
    }

    /// Global options are also accepted before the command.
    fn global(self) -> bool {
        matches!(
            self,
            OptId::NoColor | OptId::LogLevel | OptId::Profile | OptId::Version | OptId::Help
        )
    }

    fn long(self) -> &'static str {
        self.flags()
            .split([',', ' '])
            .find_map(|part| part.strip_prefix("--"))
            .unwrap_or_default()
    }

    fn short(self) -> Option<u8> {
        let flags = self.flags();
        flags
            .strip_prefix('-')?
            .bytes()
            .next()
            .filter(|&b| b != b'-')
    }

    fn takes_value(self) -> bool {
        self.flags().contains('<')
    }

    fn find_long(arg: &str, agent_scope: bool) -> Option<Self> {
        let name = arg.strip_prefix("--")?;
        Self::ALL
            .into_iter()
            .find(|id| id.long() == name && (agent_scope || id.global()))
    }

    fn find_short(letter: u8, agent_scope: bool) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|id| id.short() == Some(letter) && (agent_scope || id.global()))
    }
}

/// One classified command-line argument.
enum Token {
    /// A known option and its value (always present for value options).
    Opt(OptId, Option<OsString>),
    Unknown(String),
    Operand(OsString),
    /// `--`: everything after it is an operand.
    EndOfOptions,
}

/// Classifies `arg`, taking an option's value from `queue` when needed.
fn classify(
    arg: OsString,
    queue: &mut VecDeque<OsString>,
    agent_scope: bool,
) -> Result<Token, String> {
    let bytes = os_to_vec(&arg);
    if bytes == b"--" {
        return Ok(Token::EndOfOptions);
    }
    let (Some(&b'-'), Some(&second)) = (bytes.first(), bytes.get(1)) else {
        return Ok(Token::Operand(arg));
    };
    let lossy = arg.to_string_lossy().into_owned();

    if second == b'-' {
        if let Some(id) = OptId::find_long(&lossy, agent_scope) {
            return take_value(id, queue);
        }
        if let Some(eq) = bytes.iter().position(|&b| b == b'=') {
            let (name, value) = bytes.split_at(eq);
            let id = std::str::from_utf8(name)
                .ok()
                .and_then(|name| OptId::find_long(name, agent_scope))
                .filter(|id| id.takes_value());
            if let Some(id) = id {
                return Ok(Token::Opt(id, Some(os_from_bytes(&value[1..]))));
            }
        }
        return Ok(Token::Unknown(lossy));
    }

    let Some(id) = OptId::find_short(second, agent_scope) else {
        return Ok(Token::Unknown(lossy));
    };
    let attached = &bytes[2..];
    if attached.is_empty() {
        take_value(id, queue)
    } else if id.takes_value() {
        Ok(Token::Opt(id, Some(os_from_bytes(attached))))
    } else {
        // Combined short flags: handle the first, re-queue the others.
        let mut others = vec![b'-'];
        others.extend_from_slice(attached);
        queue.push_front(os_from_bytes(&others));
        Ok(Token::Opt(id, None))
    }
}

fn take_value(id: OptId, queue: &mut VecDeque<OsString>) -> Result<Token, String> {
    if !id.takes_value() {
        return Ok(Token::Opt(id, None));
    }
    match queue.pop_front() {
        Some(value) => Ok(Token::Opt(id, Some(value))),
        None => Err(format!("option '{}' argument missing", id.flags())),
    }
}

/// What the OpenClaw part of the command line asks for.
enum Invocation {
    Version,
    Help,
    AgentHelp,
    NoCommand,
    Agent(AgentArgs),
}

/// The `agent` options the fake acts on; the others are accepted and ignored.
#[derive(Default)]
struct AgentArgs {
    agent: Option<String>,
    message: Option<OsString>,
    message_file: Option<PathBuf>,
    to: Option<String>,
    session_id: Option<String>,
    json: bool,
    local: bool,
}

/// Parses the OpenClaw arguments; `Err` holds a commander-style error
/// message (printed as `error: <message>`).
fn parse_openclaw(args: &[OsString]) -> Result<Invocation, String> {
    let mut queue: VecDeque<OsString> = args.iter().cloned().collect();
    while let Some(arg) = queue.pop_front() {
        let command = match classify(arg, &mut queue, false)? {
            Token::Opt(id, _) => match id {
                OptId::Version => return Ok(Invocation::Version),
                OptId::Help => return Ok(Invocation::Help),
                _ => continue,
            },
            Token::Unknown(name) => return Err(format!("unknown option '{name}'")),
            Token::Operand(command) => command,
            Token::EndOfOptions => match queue.pop_front() {
                Some(command) => command,
                None => break,
            },
        };
        return if command == "agent" {
            parse_agent(queue)
        } else {
            Err(format!("unknown command '{}'", command.to_string_lossy()))
        };
    }
    Ok(Invocation::NoCommand)
}

fn parse_agent(mut queue: VecDeque<OsString>) -> Result<Invocation, String> {
    let mut args = AgentArgs::default();
    let mut unknown: Option<String> = None;
    let mut operands = 0usize;
    while let Some(arg) = queue.pop_front() {
        match classify(arg, &mut queue, true)? {
            Token::Opt(id, value) => match (id, value) {
                (OptId::Version, _) => return Ok(Invocation::Version),
                (OptId::Help, _) => return Ok(Invocation::AgentHelp),
                (OptId::Json, _) => args.json = true,
                (OptId::Local, _) => args.local = true,
                (OptId::Agent, Some(value)) => args.agent = Some(lossy(value)),
                (OptId::Message, Some(value)) => args.message = Some(value),
                (OptId::MessageFile, Some(value)) => args.message_file = Some(value.into()),
                (OptId::To, Some(value)) => args.to = Some(lossy(value)),
                (OptId::SessionId, Some(value)) => args.session_id = Some(lossy(value)),
                _ => {}
            },
            Token::Unknown(name) => {
                unknown.get_or_insert(name);
            }
            Token::Operand(_) => operands += 1,
            Token::EndOfOptions => operands += queue.drain(..).count(),
        }
    }
    if let Some(name) = unknown {
        return Err(format!("unknown option '{name}'"));
    }
    if operands > 0 {
        return Err(format!(
            "too many arguments for 'agent'. Expected 0 arguments but got {operands}."
        ));
    }
    Ok(Invocation::Agent(args))
}

fn main_help() -> String {
    let mut help = String::from(
        "Usage: fake-openclaw [FAKE OPTIONS] [options] [command]\n\n\
         A fake OpenClaw CLI for tests (imitates OpenClaw 2026.9.6).\n\n\
         Fake options (must come first; environment variable in brackets):\n",
    );
    for flag in FakeFlag::ALL {
        let name = format!("{} {}", flag.flag(), flag.metavar());
        let _ = writeln!(help, "  {name:<20}{} [{}]", flag.help(), flag.env());
    }
    help.push_str("\nScenarios:\n");
    for scenario in Scenario::ALL {
        let _ = writeln!(help, "  {:<20}{}", scenario.name(), scenario.summary());
    }
    help.push_str("\nOptions:\n");
    for id in OptId::ALL.into_iter().filter(|id| id.global()) {
        let _ = writeln!(help, "  {:<28}{}", id.flags(), id.help());
    }
    help.push_str("\nCommands:\n  agent [options]             Run an agent turn\n");
    help
}

fn agent_help() -> String {
    let mut help = String::from(
        "Usage: openclaw agent [options]\n\n\
         Run an agent turn (fake: the reply is `ECHO: <message>`).\n\nOptions:\n",
    );
    for id in OptId::ALL {
        let _ = writeln!(help, "  {:<28}{}", id.flags(), id.help());
    }
    help
}

// ---------------------------------------------------------------------------
// Message resolution, validation and recording
// ---------------------------------------------------------------------------

/// The resolved message: `Ok(None)` if none was given, `Err` with a
/// user-facing explanation if it could not be obtained.
type Message = Result<Option<Vec<u8>>, String>;

fn resolve_message(args: &AgentArgs) -> Message {
    match (&args.message, &args.message_file) {
        (Some(_), Some(_)) => Err("Use either --message or --message-file, not both.".into()),
        (Some(message), None) => Ok(Some(os_to_vec(message))),
        (None, Some(path)) => read_message_file(path).map(|text| Some(text.into_bytes())),
        (None, None) => Ok(None),
    }
}

fn read_message_file(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let mut content = Vec::new();
    File::open(path)
        .and_then(|file| {
            file.take(MAX_MESSAGE_FILE_BYTES + 1)
                .read_to_end(&mut content)
        })
        .map_err(|error| format!("Failed to read message file {shown}: {error}"))?;
    if content.len() as u64 > MAX_MESSAGE_FILE_BYTES {
        return Err(format!(
            "Message file {shown} is too large (max {MAX_MESSAGE_FILE_BYTES} bytes)."
        ));
    }
    String::from_utf8(content).map_err(|error| {
        format!(
            "Message file {shown} is not valid UTF-8 (invalid byte at offset {}).",
            error.utf8_error().valid_up_to()
        )
    })
}

/// A validated request: a non-blank message for a known agent.
struct Request {
    message: Vec<u8>,
    agent: String,
}

fn validate(args: &AgentArgs, message: Message) -> Result<Request, String> {
    let message = message?
        .filter(|m| !String::from_utf8_lossy(m).trim().is_empty())
        .ok_or_else(|| MISSING_MESSAGE.to_string())?;
    let agent = args.agent.as_deref().unwrap_or(DEFAULT_AGENT);
    let agents = std::env::var(ENV_AGENTS)
        .ok()
        .filter(|list| !list.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_AGENTS.to_string());
    if !agents.split(',').any(|known| known.trim() == agent) {
        return Err(format!(
            "Unknown agent id \"{agent}\". Use \"openclaw agents list\" to see configured agents."
        ));
    }
    Ok(Request {
        message,
        agent: agent.to_string(),
    })
}

fn append_record(
    path: &Path,
    argv: &[OsString],
    args: Option<&AgentArgs>,
    message: Option<&[u8]>,
) -> Result<(), Failure> {
    let text = |value: Option<&str>| value.map_or(Json::Null, Json::str);
    let cwd = std::env::current_dir()
        .map(|dir| Json::str(dir.to_string_lossy()))
        .unwrap_or(Json::Null);
    let run_id =
        std::env::var_os(ENV_RUN_ID).map_or(Json::Null, |v| Json::str(v.to_string_lossy()));
    let record = Json::Obj(vec![
        (
            "argv",
            Json::Arr(
                argv.iter()
                    .map(|a| Json::str(a.to_string_lossy()))
                    .collect(),
            ),
        ),
        (
            "message",
            message.map_or(Json::Null, |m| Json::str(String::from_utf8_lossy(m))),
        ),
        (
            "messageFile",
            args.and_then(|a| a.message_file.as_deref())
                .map_or(Json::Null, |p| Json::str(p.to_string_lossy())),
        ),
        ("agent", text(args.and_then(|a| a.agent.as_deref()))),
        ("to", text(args.and_then(|a| a.to.as_deref()))),
        ("json", Json::Bool(args.is_some_and(|a| a.json))),
        ("pid", Json::Num(u64::from(std::process::id()))),
        ("cwd", cwd),
        ("env", Json::Obj(vec![(ENV_RUN_ID, run_id)])),
    ]);
    let mut line = record.compact();
    line.push('\n');
    append_line(path, &line).map_err(|error| {
        Failure::Fatal(format!(
            "cannot append to record file {}: {error}",
            path.display()
        ))
    })
}

/// Appends `text` to `path` with one write, so concurrent appends do not
/// interleave.
fn append_line(path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(text.as_bytes())?;
    file.flush()
}

/// Appends one line per pid to the pid file, if one is configured.
fn append_pids(config: &FakeConfig, pids: &[u32]) -> Result<(), Failure> {
    let Some(path) = &config.pid_file else {
        return Ok(());
    };
    let text = pids.iter().fold(String::new(), |mut text, pid| {
        let _ = writeln!(text, "{pid}");
        text
    });
    append_line(path, &text).map_err(|error| {
        Failure::Fatal(format!(
            "cannot append to pid file {}: {error}",
            path.display()
        ))
    })
}

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

fn run_scenario(
    config: &FakeConfig,
    args: &AgentArgs,
    message: Message,
    start: Instant,
) -> Outcome {
    let pid = std::process::id();
    match config.scenario {
        Scenario::Reply => answer(args, message, |request| reply(args, &request, start)),
        Scenario::Echo => answer(args, message, |request| {
            emit(Stream::Stdout, &request.message)?;
            Ok(ExitCode::SUCCESS)
        }),
        Scenario::Sleep => answer(args, message, |request| {
            emit(Stream::Stdout, b"thinking...\n")?;
            linger(config);
            reply(args, &request, start)
        }),
        Scenario::Orphan => answer(args, message, |request| {
            let child = spawn_hold_pipe(config, false, false)?;
            append_pids(config, &[child, pid])?;
            reply(args, &request, start)
        }),
        Scenario::Daemon => answer(args, message, |request| {
            let child = spawn_hold_pipe(config, true, false)?;
            append_pids(config, &[child])?;
            reply(args, &request, start)
        }),
        Scenario::Detached => answer(args, message, |request| {
            let child = spawn_hold_pipe(config, true, true)?;
            append_pids(config, &[child])?;
            reply(args, &request, start)
        }),
        Scenario::GatewayTimeout => answer(args, message, |_| gateway_timeout(args.json, start)),
        Scenario::HangAfterReply => answer(args, message, |request| {
            reply(args, &request, start)?;
            append_pids(config, &[pid])?;
            linger(config);
            Ok(ExitCode::SUCCESS)
        }),
        Scenario::GatewayDown => answer(args, message, |_| {
            emit(Stream::Stderr, GATEWAY_DOWN.as_bytes())?;
            Ok(ExitCode::from(1))
        }),
        Scenario::Interleave => {
            interleave(config.lines, config.pause)?;
            Ok(ExitCode::SUCCESS)
        }
        Scenario::InvalidUtf8 => {
            emit(Stream::Stdout, b"before \xff\xfe after \xe4\xbd\n")?;
            emit(Stream::Stderr, b"stderr \xc3\x28 end\n")?;
            Ok(ExitCode::SUCCESS)
        }
        Scenario::Flood => {
            flood(config.bytes)?;
            Ok(ExitCode::SUCCESS)
        }
        Scenario::Exit => {
            let line = format!("fake-openclaw exiting with {}\n", config.exit_code);
            emit(Stream::Stderr, line.as_bytes())?;
            Ok(ExitCode::from(config.exit_code))
        }
        Scenario::IgnoreTerm => {
            ignore_sigterm()?;
            append_pids(config, &[pid])?;
            emit(Stream::Stdout, b"ignoring SIGTERM\n")?;
            linger(config);
            Ok(ExitCode::SUCCESS)
        }
        Scenario::Grandchild => {
            let child = spawn_hold_pipe(config, false, false)?;
            append_pids(config, &[child, pid])?;
            emit(
                Stream::Stdout,
                format!("spawned grandchild {child}\n").as_bytes(),
            )?;
            linger(config);
            Ok(ExitCode::SUCCESS)
        }
        Scenario::Escaped => {
            let child = spawn_hold_pipe(config, true, false)?;
            append_pids(config, &[child, pid])?;
            emit(
                Stream::Stdout,
                format!("spawned escaped child {child}\n").as_bytes(),
            )?;
            linger(config);
            Ok(ExitCode::SUCCESS)
        }
        Scenario::HoldPipe => {
            if std::env::var_os(ENV_HOLD_IGNORE_TERM).is_some_and(|v| v == "1") {
                ignore_sigterm()?;
            }
            emit(Stream::Stderr, b"holding pipe\n")?;
            // One more level below, if asked (a deeper tree to stop).
            let depth: u32 = std::env::var(ENV_HOLD_DEPTH)
                .ok()
                .and_then(|d| d.parse().ok())
                .unwrap_or(1);
            if depth > 1 {
                let child = spawn_hold_pipe(config, false, false)?;
                append_pids(config, &[child])?;
            }
            linger(config);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Sleeps `--sleep`; with `FAKE_OPENCLAW_HEARTBEAT=PATH`, appends this
/// process's id to PATH every 100 ms meanwhile, so a test can see from
/// outside, on any platform, whether the process still runs.
fn linger(config: &FakeConfig) {
    let Some(path) = std::env::var_os(ENV_HEARTBEAT).filter(|p| !p.is_empty()) else {
        std::thread::sleep(config.sleep);
        return;
    };
    let until = Instant::now() + config.sleep;
    let beat = format!("{}\n", std::process::id());
    while Instant::now() < until {
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        {
            let _ = file.write_all(beat.as_bytes());
        }
        std::thread::sleep(
            Duration::from_millis(100).min(until.saturating_duration_since(Instant::now())),
        );
    }
}

/// Validates the request like the real CLI (reporting a failure as a CLI
/// error), then lets `respond` answer it.
fn answer(args: &AgentArgs, message: Message, respond: impl FnOnce(Request) -> Outcome) -> Outcome {
    match validate(args, message) {
        Ok(request) => respond(request),
        Err(reason) => cli_error(args.json, &reason),
    }
}

/// Prints an OpenClaw command error (exit 1), as a JSON envelope with `--json`.
fn cli_error(json: bool, reason: &str) -> Outcome {
    if json {
        let envelope = Json::Obj(vec![
            ("ok", Json::Bool(false)),
            (
                "error",
                Json::Obj(vec![
                    ("type", Json::str("cli_error")),
                    ("message", Json::str(reason)),
                ]),
            ),
        ]);
        emit(
            Stream::Stdout,
            format!("{}\n", envelope.compact()).as_bytes(),
        )?;
        emit(Stream::Stderr, CLI_FAILED.as_bytes())?;
    } else {
        emit(Stream::Stderr, format!("{reason}\n").as_bytes())?;
    }
    Ok(ExitCode::from(1))
}

/// Prints the successful answer `ECHO: <message>`, plain or as JSON.
fn reply(args: &AgentArgs, request: &Request, start: Instant) -> Outcome {
    let mut text = b"ECHO: ".to_vec();
    text.extend_from_slice(&request.message);
    if !args.json {
        text.push(b'\n');
        emit(Stream::Stdout, &text)?;
        return Ok(ExitCode::SUCCESS);
    }
    let session_id = args.session_id.clone().unwrap_or_else(|| pseudo_uuid(1));
    let result = Json::Obj(vec![
        ("runId", Json::str(pseudo_uuid(0))),
        ("status", Json::str("ok")),
        ("summary", Json::str("completed")),
        (
            "result",
            Json::Obj(vec![
                (
                    "payloads",
                    Json::Arr(vec![Json::Obj(vec![
                        ("text", Json::str(String::from_utf8_lossy(&text))),
                        ("mediaUrl", Json::Null),
                    ])]),
                ),
                (
                    "meta",
                    Json::Obj(vec![
                        ("durationMs", Json::Num(elapsed_ms(start))),
                        (
                            "agentMeta",
                            Json::Obj(vec![
                                ("sessionId", Json::str(session_id)),
                                (
                                    "sessionFile",
                                    Json::str(format!("agent:{}:main", request.agent)),
                                ),
                                ("provider", Json::str("fakellm")),
                                ("model", Json::str("fake-model")),
                            ]),
                        ),
                    ]),
                ),
            ]),
        ),
    ]);
    // `--local` runs embedded: no gateway wrapper, and log lines on stderr.
    let result = match result {
        Json::Obj(mut fields)
            if args.local || std::env::var_os("FAKE_OPENCLAW_LOCAL").is_some_and(|v| v == "1") =>
        {
            emit(Stream::Stderr, LOCAL_LOG.as_bytes())?;
            match fields.pop() {
                Some(("result", inner)) => inner,
                other => Json::Obj(other.into_iter().collect()),
            }
        }
        other => other,
    };
    emit(Stream::Stdout, format!("{}\n", result.pretty()).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// What an embedded (`--local`) run says on stderr before its answer.
const LOCAL_LOG: &str = "[memory] sqlite store opened (embedded run, no gateway)\n";

fn gateway_timeout(json: bool, start: Instant) -> Outcome {
    if !json {
        emit(Stream::Stdout, format!("{TIMEOUT_TEXT}\n").as_bytes())?;
        return Ok(ExitCode::from(1));
    }
    let result = Json::Obj(vec![
        ("runId", Json::str(pseudo_uuid(0))),
        ("status", Json::str("timeout")),
        ("summary", Json::str("aborted")),
        ("timeoutPhase", Json::str("provider")),
        ("providerStarted", Json::Bool(true)),
        (
            "result",
            Json::Obj(vec![
                (
                    "payloads",
                    Json::Arr(vec![Json::Obj(vec![
                        ("text", Json::str(TIMEOUT_TEXT)),
                        ("isError", Json::Bool(true)),
                        ("mediaUrl", Json::Null),
                    ])]),
                ),
                (
                    "meta",
                    Json::Obj(vec![("durationMs", Json::Num(elapsed_ms(start)))]),
                ),
            ]),
        ),
    ]);
    emit(Stream::Stdout, format!("{}\n", result.pretty()).as_bytes())?;
    Ok(ExitCode::from(1))
}

fn interleave(lines: u64, pause: Duration) -> Result<(), Failure> {
    for i in 1..=lines {
        if i > 1 && !pause.is_zero() {
            std::thread::sleep(pause);
        }
        if i % 2 == 1 {
            emit(Stream::Stdout, format!("out {i}\n").as_bytes())?;
        } else {
            emit(Stream::Stderr, format!("err {i}\n").as_bytes())?;
        }
    }
    Ok(())
}

/// Writes exactly `total` bytes, alternating stdout and stderr every 8 KiB:
/// `BEGIN\n`, filler lines, then `\nEND\n`.
fn flood(total: u64) -> Result<(), Failure> {
    let frame = (FLOOD_HEAD.len() + FLOOD_TAIL.len()) as u64;
    let line_len = FLOOD_LINE.len() as u64;
    let head_end = FLOOD_HEAD.len() as u64;
    let tail_start = total.saturating_sub(FLOOD_TAIL.len() as u64);
    // Filler repeated so that any chunk-sized window at any line offset fits.
    let filler: Vec<u8> = FLOOD_LINE
        .iter()
        .copied()
        .cycle()
        .take(FLOOD_CHUNK + FLOOD_LINE.len())
        .collect();
    let mut scratch = vec![0u8; FLOOD_CHUNK];
    let byte_at = |pos: u64| -> u8 {
        if total < frame {
            b'x'
        } else if pos < head_end {
            FLOOD_HEAD[pos as usize]
        } else if pos >= tail_start {
            FLOOD_TAIL[(pos - tail_start) as usize]
        } else {
            FLOOD_LINE[((pos - head_end) % line_len) as usize]
        }
    };

    let mut pos = 0u64;
    let mut stream = Stream::Stdout;
    while pos < total {
        let len = (total - pos).min(FLOOD_CHUNK as u64) as usize;
        let end = pos + len as u64;
        let chunk: &[u8] = if total >= frame && pos >= head_end && end <= tail_start {
            let offset = ((pos - head_end) % line_len) as usize;
            &filler[offset..offset + len]
        } else {
            for (i, byte) in scratch[..len].iter_mut().enumerate() {
                *byte = byte_at(pos + i as u64);
            }
            &scratch[..len]
        };
        emit(stream, chunk)?;
        stream = stream.other();
        pos = end;
    }
    Ok(())
}

/// Starts `<current exe> --scenario hold-pipe ...`, inheriting stdout and
/// stderr; with `new_session` the child calls `setsid()` so it leaves the
/// process group and session; with `detached` it also gets no stdio and an
/// empty environment, like a real daemon (nothing links it to its parent).
/// Returns the child's pid.
fn spawn_hold_pipe(config: &FakeConfig, new_session: bool, detached: bool) -> Result<u32, Failure> {
    let exe = std::env::current_exe()
        .map_err(|error| Failure::Fatal(format!("cannot locate own executable: {error}")))?;
    let mut command = Command::new(&exe);
    command
        .arg(FakeFlag::Scenario.flag())
        .arg(Scenario::HoldPipe.name())
        .arg(FakeFlag::Sleep.flag())
        .arg(config.sleep.as_secs_f64().to_string());
    if let Some(path) = &config.pid_file {
        command.arg(FakeFlag::PidFile.flag()).arg(path);
    }
    let depth: u32 = std::env::var(ENV_HOLD_DEPTH)
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(1);
    if config.scenario == Scenario::HoldPipe {
        command.env(ENV_HOLD_DEPTH, depth.saturating_sub(1).to_string());
    }
    command
        .args(["agent", "--message", "hold"])
        .env_remove(FakeFlag::Record.env())
        .stdin(Stdio::null());
    if new_session {
        detach_into_new_session(&mut command)?;
    }
    if detached {
        command
            .env_clear()
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    }
    let child = command
        .spawn()
        .map_err(|error| Failure::Fatal(format!("cannot spawn {}: {error}", exe.display())))?;
    // The child is deliberately neither waited for nor killed.
    Ok(child.id())
}

#[cfg(unix)]
fn detach_into_new_session(command: &mut Command) -> Result<(), Failure> {
    use std::os::unix::process::CommandExt;

    fn new_session() -> std::io::Result<()> {
        // SAFETY: setsid() is async-signal-safe and touches no memory.
        if unsafe { libc::setsid() } == -1 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    // SAFETY: the hook only calls setsid(), which is safe between fork and exec.
    unsafe {
        command.pre_exec(new_session);
    }
    Ok(())
}

#[cfg(not(unix))]
fn detach_into_new_session(_command: &mut Command) -> Result<(), Failure> {
    Err(Failure::Fatal(
        "the daemon scenario needs a Unix system".into(),
    ))
}

#[cfg(unix)]
fn ignore_sigterm() -> Result<(), Failure> {
    // SAFETY: installing SIG_IGN involves no handler code.
    let previous = unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    if previous == libc::SIG_ERR {
        let error = std::io::Error::last_os_error();
        return Err(Failure::Fatal(format!("cannot ignore SIGTERM: {error}")));
    }
    Ok(())
}

#[cfg(not(unix))]
fn ignore_sigterm() -> Result<(), Failure> {
    // There is no SIGTERM to ignore.
    Ok(())
}

// ---------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn other(self) -> Self {
        match self {
            Stream::Stdout => Stream::Stderr,
            Stream::Stderr => Stream::Stdout,
        }
    }
}

/// Writes `bytes` straight to the stream's file descriptor, bypassing any
/// buffering, so that output reaches the reader in exactly this order.
#[cfg(unix)]
fn emit(stream: Stream, bytes: &[u8]) -> Result<(), Failure> {
    let fd = match stream {
        Stream::Stdout => libc::STDOUT_FILENO,
        Stream::Stderr => libc::STDERR_FILENO,
    };
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: the pointer and length describe the live slice `rest`.
        let written = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if written > 0 {
            rest = rest.get(written.unsigned_abs()..).unwrap_or_default();
        } else if written == 0
            || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
        {
            return Err(Failure::Output);
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn emit(stream: Stream, bytes: &[u8]) -> Result<(), Failure> {
    fn write_all(mut sink: impl Write, bytes: &[u8]) -> std::io::Result<()> {
        sink.write_all(bytes)?;
        sink.flush()
    }
    match stream {
        Stream::Stdout => write_all(std::io::stdout().lock(), bytes),
        Stream::Stderr => write_all(std::io::stderr().lock(), bytes),
    }
    .map_err(|_| Failure::Output)
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A JSON value that keeps object keys in insertion order, printed either
/// compactly or like `JSON.stringify(value, null, 2)`.
enum Json {
    Null,
    Bool(bool),
    Num(u64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    fn str(text: impl Into<String>) -> Self {
        Json::Str(text.into())
    }

    fn compact(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, None);
        out
    }

    fn pretty(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, Some(0));
        out
    }

    /// `indent` is the current nesting level when pretty-printing.
    fn write(&self, out: &mut String, indent: Option<usize>) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(value) => out.push_str(if *value { "true" } else { "false" }),
            Json::Num(value) => {
                let _ = write!(out, "{value}");
            }
            Json::Str(text) => write_json_string(out, text),
            Json::Arr(items) => {
                Self::write_container(out, indent, ('[', ']'), items.iter().map(|v| (None, v)))
            }
            Json::Obj(fields) => Self::write_container(
                out,
                indent,
                ('{', '}'),
                fields.iter().map(|(key, value)| (Some(*key), value)),
            ),
        }
    }

    fn write_container<'a>(
        out: &mut String,
        indent: Option<usize>,
        (open, close): (char, char),
        entries: impl ExactSizeIterator<Item = (Option<&'a str>, &'a Json)>,
    ) {
        out.push(open);
        if entries.len() == 0 {
            out.push(close);
            return;
        }
        let inner = indent.map(|level| level + 1);
        for (i, (key, value)) in entries.enumerate() {
            if i > 0 {
                out.push(',');
            }
            if let Some(level) = inner {
                out.push('\n');
                out.push_str(&"  ".repeat(level));
            }
            if let Some(key) = key {
                write_json_string(out, key);
                out.push_str(if inner.is_some() { ": " } else { ":" });
            }
            value.write(out, inner);
        }
        if let Some(level) = indent {
            out.push('\n');
            out.push_str(&"  ".repeat(level));
        }
        out.push(close);
    }
}

fn write_json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A random-looking version-4 UUID string (not cryptographically random).
fn pseudo_uuid(salt: u64) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64);
    let mut state = nanos ^ (u64::from(std::process::id()) << 32) ^ salt.wrapping_mul(0x9e37_79b9);
    let mut next = || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let (a, b) = (next(), next());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

fn elapsed_ms(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn lossy(value: OsString) -> String {
    value
        .into_string()
        .unwrap_or_else(|value| value.to_string_lossy().into_owned())
}

/// The raw bytes of an OS string (lossily converted to UTF-8 off Unix).
fn os_to_vec(value: &OsStr) -> Vec<u8> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        value.as_bytes().to_vec()
    }
    #[cfg(not(unix))]
    {
        value.to_string_lossy().into_owned().into_bytes()
    }
}

fn os_from_bytes(bytes: &[u8]) -> OsString {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        OsStr::from_bytes(bytes).to_os_string()
    }
    #[cfg(not(unix))]
    {
        OsString::from(String::from_utf8_lossy(bytes).into_owned())
    }
}
