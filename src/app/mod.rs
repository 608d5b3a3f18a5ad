//! The top: parse the command line once, run the router call or a mode,
//! print the answer once, and map every outcome to an exit code. This is
//! the only room that writes to stdout (`print`); `call.rs` builds a router
//! call from its flags and stdin and answers clap's errors inside the JSON,
//! `node_args.rs` builds the node's options (its gateway, setup code, service).

mod call;
mod node_args;

use std::ffi::OsString;
use std::io::Write;

use clap::ArgMatches;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command, NodeCommand};
use crate::shared::log::tell;
use crate::shared::signals::stopped;
use crate::{node, schema};

#[cfg(unix)]
pub use call::not_handed_over;
use call::{any_path, call_options, clap_error, router_call, well_formed_call};
pub use call::{cli_call, run_cli_call};
use node_args::{node_options, node_service};

/// Runs the program; returns the process exit code.
pub async fn run(args: Vec<OsString>) -> u8 {
    if let Some(call) = well_formed_call(&args) {
        return Box::pin(router_call(call, any_path)).await;
    }
    // Parsed in two steps: the matches also say where a value came from
    // (`node --gateway`, typed or not).
    let parsed = Cli::command()
        .try_get_matches_from(&args)
        .and_then(|matches| {
            let cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut Cli::command()))?;
            Ok((cli, matches))
        });
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return clap_error(e, &args),
    };
    if let Some(e) = chat_flag_for_memory(&matches) {
        return clap_error(e, &args);
    }
    match cli {
        Cli {
            command: Some(Command::Node(NodeCommand { service, run })),
            ..
        } => {
            let gateway_flag = node_gateway_typed(&matches);
            if let Some(service) = service {
                return Box::pin(node_service(service, gateway_flag)).await;
            }
            logging(run.log);
            match node_options(run, gateway_flag) {
                Ok(options) => Box::pin(node::run(options, print, stopped())).await,
                Err(problem) => {
                    tell("node", &problem);
                    2
                }
            }
        }
        Cli {
            command: Some(Command::Mcp(args)),
            ..
        } => {
            logging(args.log);
            match mcp_http(&args) {
                Ok(http) => {
                    let code = Box::pin(crate::mcp_server::serve(
                        call_options(&args.call, None),
                        http,
                    ))
                    .await;
                    crate::shared::log::flush_log();
                    code
                }
                Err(problem) => {
                    tell("mcp", &problem);
                    2
                }
            }
        }
        Cli {
            command: Some(Command::Bridge(command)),
            ..
        } => {
            if command.send.is_none() {
                logging(command.run.log);
            }
            Box::pin(crate::links::bridge::main(command, print, stopped())).await
        }
        Cli {
            command: Some(Command::Chat(command)),
            ..
        } => {
            logging(command.log());
            Box::pin(crate::links::agent_service::main(command, print, stopped())).await
        }
        Cli {
            command: Some(Command::Poll(args)),
            ..
        } => {
            logging(args.log);
            Box::pin(crate::links::command_queue::main(args, stopped())).await
        }
        Cli {
            command: Some(command),
            ..
        } => {
            let text = match command {
                Command::Schema { format } => schema::render(format),
                Command::Prompt { lang } => schema::prompt(lang).to_owned(),
                Command::Node(_)
                | Command::Mcp(_)
                | Command::Bridge(_)
                | Command::Chat(_)
                | Command::Poll(_) => {
                    unreachable!("handled above")
                }
            };
            print(&text);
            0
        }
        // Each mode's state machine is boxed: the runtime polls this one on
        // the main thread's stack, which a caller may have made small.
        Cli { call, .. } => Box::pin(router_call(call, any_path)).await,
    }
}

/// Whether `node` (or `node install`) was given `--gateway` on its command
/// line — not from `OPENCLAW_GATEWAY_URL`, not the default: a typed URL is
/// kept as typed (see `node_args::node_endpoint`).
fn node_gateway_typed(matches: &ArgMatches) -> bool {
    let typed = |m: &ArgMatches| m.value_source("url") == Some(ValueSource::CommandLine);
    matches
        .subcommand_matches("node")
        .is_some_and(|node| typed(node) || node.subcommand_matches("install").is_some_and(typed))
}

/// A conversation's flag given to `chat memory` (`chat --dead-after 5
/// memory search q`): clap's own conflict error rather than a flag
/// silently ignored. `--service` and `--allow-remote` belong to both.
fn chat_flag_for_memory(matches: &ArgMatches) -> Option<clap::Error> {
    let chat = matches.subcommand_matches("chat")?;
    chat.subcommand_matches("memory")?;
    let mut command = Cli::command();
    command.build();
    let chat_command = command.find_subcommand_mut("chat")?;
    let flag = chat_command.get_arguments().find(|a| {
        let id = a.get_id().as_str();
        !["service", "allow_remote"].contains(&id)
            && chat.value_source(id) == Some(ValueSource::CommandLine)
    })?;
    let shown = match flag.get_long() {
        Some(long) => format!("--{long}"),
        None => format!("[{}]", flag.get_id().as_str().to_uppercase()),
    };
    Some(chat_command.error(
        clap::error::ErrorKind::ArgumentConflict,
        format!(
            "{shown} before `memory` is a conversation's flag; `chat memory` takes its own after `memory write` or `memory search`"
        ),
    ))
}

/// `--log-format`, `--log-level`, `--quiet`: set before the mode's first line.
fn logging(args: crate::cli::LogArgs) {
    crate::shared::log::configure(args.log_format, args.least());
}

/// `mcp --http`'s address and token, checked; None: stdio.
pub(super) fn mcp_http(
    args: &crate::cli::McpArgs,
) -> Result<Option<crate::mcp_server::http::Http>, String> {
    let Some(listen) = &args.http else {
        if args.http_token.is_some() {
            return Err("--http-token is refused; and it needs --http".into());
        }
        return Ok(None);
    };
    let from_env = crate::shared::secrets::var("CLAWBOT_ROUTER_MCP_TOKEN")
        .is_some_and(|t| !t.trim().is_empty());
    let token = if args.http_token.is_some() || args.http_token_file.is_some() || from_env {
        Some(crate::shared::secrets::secret(
            &crate::shared::secrets::SecretSource {
                flag: args.http_token.as_deref(),
                file: args.http_token_file.as_deref(),
                file_flag: "--http-token-file",
                var: "CLAWBOT_ROUTER_MCP_TOKEN",
                what: "the bearer token",
            },
        )?)
    } else {
        None
    };
    crate::mcp_server::http::Http::new(listen, token, args.http_origins.clone()).map(Some)
}

pub(super) fn print_json(value: &impl serde::Serialize) {
    let line = serde_json::to_string(value).expect("results are plain data") + "\n";
    print(&line);
}

/// Writes to stdout; a closed stdout is the reader's choice, not a panic.
pub(super) fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}
