//! `chat memory write|search`: the service's memory from a script, one
//! request and one JSON object on stdout.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::super::http::Service;
use super::memory::{self, Problem};
use super::session_for;

/// `chat memory write|search`: one request, its answer as one JSON object
/// on stdout; 0 done, 1 the service (or the way to it) failed, 2 the
/// input was wrong (nothing was sent).
pub async fn main(
    command: crate::cli::MemoryCommand,
    on: &crate::cli::AgentService,
    print: fn(&str),
    stop: CancellationToken,
) -> u8 {
    let timeout = match &command {
        crate::cli::MemoryCommand::Write(args) => args.timeout.timeout,
        crate::cli::MemoryCommand::Search(args) => args.timeout.timeout,
    };
    let within = Duration::from_secs(timeout);
    // One deadline for it all, reading a note from stdin included.
    let work = memory::deadline(within, run(command, on, print, within));
    let done = tokio::select! {
        done = work => done,
        _ = stop.cancelled() => Err(Problem::ours("CANCELLED", "stopped by a signal before the service answered")),
    };
    let code = match done {
        Ok(()) => 0,
        Err(problem) => {
            crate::shared::log::tell("chat", &problem.shown());
            print_json(
                print,
                &Refused {
                    ok: false,
                    error: &problem,
                },
            );
            if problem.bad_input { 2 } else { 1 }
        }
    };
    crate::shared::log::flush_log();
    code
}

#[derive(serde::Serialize)]
struct Refused<'a> {
    ok: bool,
    error: &'a Problem,
}

/// One JSON line: what the service wrote may reach a terminal inside
/// it, so bidi and C1 controls are escaped too (the same value).
fn print_json(print: fn(&str), value: &impl serde::Serialize) {
    let text = serde_json::to_string(value).expect("plain data");
    print(&(crate::shared::escape::json(&text).into_owned() + "\n"));
}

async fn run(
    command: crate::cli::MemoryCommand,
    on: &crate::cli::AgentService,
    print: fn(&str),
    within: Duration,
) -> Result<(), Problem> {
    match command {
        crate::cli::MemoryCommand::Write(args) => {
            let state_dir = args
                .state_dir
                .clone()
                .unwrap_or_else(crate::shared::paths::default_state_dir);
            let session = session_for(on, &args.conversation, state_dir).map_err(Problem::input)?;
            let content = match args.content.as_str() {
                "-" => read_stdin_note().await?,
                _ => args.content,
            };
            let path = memory::write(&session, args.target, &content, within).await?;
            print_json(
                print,
                &memory::Written {
                    ok: true,
                    path,
                    target: args.target.name(),
                    general_session_id: session.id(),
                },
            );
        }
        crate::cli::MemoryCommand::Search(args) => {
            let service = Service::parse(&on.service, on.allow_remote).map_err(Problem::input)?;
            let search = memory::Search {
                query: args.query,
                kind: args.kind,
                limit: args.limit,
            };
            let results = memory::search(&service, &search, within).await?;
            print_json(
                print,
                &memory::Searched {
                    ok: true,
                    query: search.query,
                    results,
                },
            );
        }
    }
    Ok(())
}

/// `chat memory write -`: the note from stdin, whole, at most
/// [`memory::MAX_CONTENT`] bytes of UTF-8.
async fn read_stdin_note() -> Result<String, Problem> {
    use std::io::Read;
    let read = tokio::task::spawn_blocking(|| {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .take(memory::MAX_CONTENT as u64 + 1)
            .read_to_end(&mut bytes)
            .map(|_| bytes)
    })
    .await;
    let bytes = match read {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            return Err(Problem::input(format!(
                "cannot read the note from stdin: {e}"
            )));
        }
        Err(e) => {
            return Err(Problem::input(format!(
                "cannot read the note from stdin: {e}"
            )));
        }
    };
    if bytes.len() > memory::MAX_CONTENT {
        return Err(Problem::input(format!(
            "the note on stdin is larger than {} bytes",
            memory::MAX_CONTENT
        )));
    }
    String::from_utf8(bytes).map_err(|_| Problem::input("the note on stdin is not UTF-8 text"))
}
