//! One `node.invoke.request`, run: the tool (or a published tool's door)
//! within the caller's time, its output streamed while it runs, then its
//! `node.invoke.result`, shaped and fitted off the runtime thread.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::result::{Whole, content_budget, result_frame, send_result, transfer_budget};
use super::{Node, events, mcp_publish, progress};
use crate::gateway::client::Outbox;
use crate::gateway::frames::InvokeRequest;
use crate::shared::log::say;
use crate::tools::{self, Invocation};

/// Default for an invocation that names no timeout.
const DEFAULT_INVOKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Answer this long before the caller gives up, so the answer still counts.
const ANSWER_MARGIN: Duration = Duration::from_millis(250);
/// "No deadline", as a duration every deadline sum can still hold.
const UNBOUNDED: Duration = Duration::from_secs(365 * 24 * 3600);
/// How long a finished command's output stream may take to queue its
/// last chunks before the result goes without them.
const STREAM_FLUSH: Duration = Duration::from_secs(2);

impl Node {
    pub(super) fn spawn_invocation(
        &self,
        request: InvokeRequest,
        cancel: CancellationToken,
        max_payload: usize,
        outbox: Outbox,
        done: mpsc::UnboundedSender<String>,
        gateway: crate::gateway::Endpoint,
    ) {
        let tools = Arc::clone(&self.tools);
        let door = self.publishing().then(|| Arc::clone(&self.door));
        let node_id = if request.node_id.is_empty() {
            self.identity.device_id.clone()
        } else {
            request.node_id.clone()
        };
        // A file transfer's answer is a file: its own budget, never cut.
        let whole = tools::carries_files(&request.command);
        tokio::spawn(async move {
            let params_json = request.params_json.clone();
            // A program's output streams while it runs; the result follows
            // the last chunk.
            let (tap, streaming) = if tools::streams_output(&request.command) {
                let (tap, handle) = progress::start(
                    outbox.clone(),
                    request.id.clone(),
                    node_id.clone(),
                    cancel.clone(),
                );
                (Some(tap), Some(handle))
            } else {
                (None, None)
            };
            // A file transfer's slot, kept by the tool for its answer: let
            // go only once the answer is written to the gateway.
            let keep = tools::Keep::default();
            let invocation = Invocation {
                id: &request.id,
                command: &request.command,
                params_json: request.params_json.as_deref(),
                timeout: work_time(&request.command, request.timeout_ms),
                max_bytes: if whole {
                    transfer_budget(max_payload)
                } else {
                    content_budget(max_payload)
                },
                cancel,
                tap,
                // A published tool's call names its agent only in its
                // session (`agent:<id>:…`).
                agent: request
                    .session_key
                    .as_deref()
                    .and_then(|k| k.strip_prefix("agent:"))
                    .and_then(|k| k.split(':').next())
                    .filter(|a| !a.is_empty()),
                gate: tools::policy::Gate::Ours,
                gateway: Some(&gateway),
                keep: Some(&keep),
            };
            // An agent's call of a published tool: the same dispatch
            // (only where tools are published: the command is declared).
            let (outcome, decision, what, verdict) =
                if let Some(door) = door.filter(|_| request.command == mcp_publish::COMMAND) {
                    let called = mcp_publish::call(&door, invocation).await;
                    let verdict = called.verdict();
                    (called.result, called.decision, called.label, verdict)
                } else {
                    let (outcome, decision) = tools.invoke(invocation).await;
                    let verdict = match &outcome {
                        Ok(_) => "ok".to_owned(),
                        Err(e) => e.code.to_owned(),
                    };
                    (outcome, decision, request.command.clone(), verdict)
                };
            let streamed = match streaming {
                // Bounded: the tap is gone with the invocation, so the
                // stream only has its queue to flush.
                Some(mut handle) => match tokio::time::timeout(STREAM_FLUSH, &mut handle).await {
                    Ok(summary) => summary.ok(),
                    Err(_) => {
                        // Nothing of it may follow the result.
                        handle.abort();
                        None
                    }
                },
                None => None,
            };
            if let Some(s) = streamed.filter(|s| s.chunks > 0) {
                say(&format!(
                    "invoke {} streamed {} progress chunk(s), {} bytes{}",
                    short(&request.id),
                    s.chunks,
                    s.bytes,
                    if s.skipped > 0 {
                        format!(" ({} bytes not streamed)", s.skipped)
                    } else {
                        String::new()
                    }
                ));
            }
            say(&format!(
                "invoke {} {what} → {verdict} ({decision})",
                short(&request.id),
            ));
            // Serialising and fitting a result of megabytes is CPU work:
            // off the runtime thread, so signals and other invocations are
            // never kept waiting behind it.
            // The run's event goes first, as OpenClaw's node host sends it.
            if let Some(event) =
                events::exec_event(&request.command, params_json.as_deref(), &outcome)
            {
                outbox.request("node.event", event);
            }
            let id = request.id.clone();
            let shape = if whole {
                Whole::File
            } else if tools::carries_media(&request.command) {
                Whole::Media
            } else {
                Whole::No
            };
            let held = keep.lock().ok().and_then(|mut k| k.take());
            let _ = tokio::task::spawn_blocking(move || {
                send_result(
                    &outbox,
                    result_frame(id, node_id, outcome),
                    max_payload,
                    shape,
                    held,
                );
            })
            .await;
            let _ = done.send(request.id);
        });
    }
}

/// The time a tool may take: the caller's timeout minus room to stop a
/// process tree (SIGTERM, grace) and still answer before the caller gives up.
/// A lifecycle the gateway holds open (`timeoutMs: 0` on `desktop.stream`)
/// has none: it ends when either side lets go.
fn work_time(command: &str, timeout_ms: Option<u64>) -> Duration {
    if timeout_ms == Some(0) && tools::without_deadline(command) {
        return UNBOUNDED;
    }
    let total = timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_INVOKE_TIMEOUT);
    let margin = (total / 4).clamp(ANSWER_MARGIN, Duration::from_secs(3));
    total.saturating_sub(margin).max(Duration::from_millis(500))
}

/// The first 8 characters of an id, for log lines.
pub(super) fn short(id: &str) -> &str {
    id.char_indices().nth(8).map_or(id, |(i, _)| &id[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_without_a_timeout_gets_the_default_less_its_margin() {
        assert_eq!(work_time("x", None), Duration::from_secs(27));
    }

    #[test]
    fn the_margin_is_a_quarter_between_a_quarter_second_and_three_seconds() {
        assert_eq!(work_time("x", Some(2_000)), Duration::from_millis(1_500));
        assert_eq!(work_time("x", Some(800)), Duration::from_millis(550));
        assert_eq!(work_time("x", Some(60_000)), Duration::from_secs(57));
    }

    #[test]
    fn only_desktop_stream_reads_a_zero_timeout_as_no_deadline() {
        assert_eq!(work_time("desktop.stream", Some(0)), UNBOUNDED);
        assert_eq!(
            work_time("desktop.stream", Some(2_000)),
            Duration::from_millis(1_500)
        );
        assert_eq!(work_time("system.run", Some(0)), Duration::from_millis(500));
    }

    #[test]
    fn a_tiny_timeout_still_leaves_half_a_second_of_work() {
        assert_eq!(work_time("x", Some(100)), Duration::from_millis(500));
        assert_eq!(work_time("x", Some(0)), Duration::from_millis(500));
    }

    #[test]
    fn short_ids_are_eight_characters_and_never_split_one() {
        assert_eq!(short("0123456789abcdef"), "01234567");
        assert_eq!(short("abc"), "abc");
        assert_eq!(short("ééééééééé"), "éééééééé");
    }
}
