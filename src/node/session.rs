//! One connection, served: events in (invokes, cancels, pairing
//! decisions), answers out, the command surface and the published tools
//! kept current, until the link drops, falls silent or the user stops.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::invoke::short;
use super::result::{result_frame, send_result};
use super::surface::Surface;
use super::{Node, events, mcp_publish, name, status};
use crate::gateway::client::Connection;
use crate::gateway::frames::{Frame, NodeEvent};
use crate::shared::log::say;
use crate::tools::ToolError;

/// The shortest tick interval honoured, whatever the gateway says.
const MIN_TICK: Duration = Duration::from_secs(1);
/// One frame that takes longer than this to send means a stuck peer.
const SEND_LIMIT: Duration = Duration::from_secs(20);
/// How often to ask whether the command surface was approved.
const SURFACE_PROBE: Duration = Duration::from_secs(5);
/// On Ctrl-C, how long running invocations get to stop and report.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// How a session ended.
pub(super) enum End {
    Shutdown,
    Dropped(String),
}

impl Node {
    /// Serves one connection until it drops or the user stops the node.
    /// Nothing in this loop waits on the peer: frames go out through the
    /// outbox's own writer, results straight from the invocations.
    pub(super) async fn session(
        &self,
        conn: Connection,
        // The gateway as this connection reached it (its URL and the trust
        // it was verified by): what a command that opens a socket back to
        // it uses, read once, not per invocation.
        gateway: &crate::gateway::Endpoint,
        shutdown: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
        beacon: &mut status::Beacon,
    ) -> End {
        let max_payload = conn.max_payload();
        let silence_limit = conn.tick_interval().max(MIN_TICK) * 2;
        let (mut inbox, outbox) = conn.serve(SEND_LIMIT);
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<String>();
        let mut running: HashMap<String, CancellationToken> = HashMap::new();
        let mut last_heard = Instant::now();
        let mut watchdog = tokio::time::interval(Duration::from_secs(1));
        let mut surface = Surface::default();
        // Requests of ours the gateway refused, by method: told once.
        let mut refused: HashSet<String> = HashSet::new();
        surface.ask(&outbox);
        let mut publisher = mcp_publish::Publisher::new(Arc::clone(&self.door));
        publisher.publish(&outbox);
        let mut offered = self.door.changes();
        let mut surface_timer =
            tokio::time::interval_at(Instant::now() + SURFACE_PROBE, SURFACE_PROBE);
        // Host stats: once the commands are approved (before that the
        // gateway refuses node events: "node pairing changed"), then every
        // minute; not with a --commands surface, as OpenClaw's node host.
        let mut stats_timer = tokio::time::interval(events::STATS_EVERY);
        stats_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stats = self.options.commands.is_none();

        let end = loop {
            tokio::select! {
                _ = &mut *shutdown => break End::Shutdown,
                _ = outbox.dead() => break End::Dropped("the gateway stopped reading what the node sends".into()),
                frame = inbox.recv() => {
                    let Some(frame) = frame else { break End::Dropped("the gateway closed the connection".into()) };
                    last_heard = Instant::now();
                    match frame {
                        Frame::Event(event) => match NodeEvent::from(event) {
                            NodeEvent::Invoke(request) if running.contains_key(&request.id) => {
                                say(&format!("invoke {} is already running; duplicate ignored", short(&request.id)));
                            }
                            NodeEvent::Invoke(request) => {
                                let cancel = CancellationToken::new();
                                running.insert(request.id.clone(), cancel.clone());
                                self.spawn_invocation(request, cancel, max_payload, outbox.clone(), done_tx.clone(), gateway.clone());
                            }
                            NodeEvent::BadInvoke { id, node_id, problem } => {
                                say(&format!("malformed invoke request: {problem}"));
                                if let Some(id) = id {
                                    let node_id = node_id.unwrap_or_else(|| self.identity.device_id.clone());
                                    let error = ToolError::new("INVALID_REQUEST", format!("malformed node.invoke.request: {problem}"));
                                    send_result(&outbox, result_frame(id, node_id, Err(error)), max_payload, super::result::Whole::No, None);
                                }
                            }
                            NodeEvent::Cancel(cancel) => {
                                if let Some(token) = running.get(&cancel.invoke_id) {
                                    say(&format!("invoke {} cancelled by the gateway", short(&cancel.invoke_id)));
                                    token.cancel();
                                }
                            }
                            NodeEvent::PairResolved(resolved) => {
                                say(&format!("pairing request {} {}", resolved.request_id, resolved.decision));
                                surface.resolved(resolved.decision == "approved");
                                if surface.confirmed {
                                    beacon.approved();
                                }
                                publisher.approval(surface.confirmed, &outbox);
                                self.check_name();
                            }
                            NodeEvent::Other { event, problem: Some(problem) } => {
                                say(&format!("ignored a malformed {event} event: {problem}"));
                            }
                            _ => {}
                        },
                        Frame::Res(res) => {
                            let method = outbox.answered(&res.id);
                            if let (Some(method), Some(error)) = (method, res.error.as_ref().filter(|_| !res.ok))
                                && method != "node.runnerInventory.update"
                                && method != "node.pluginTools.update"
                                && refused.insert(method.clone())
                            {
                                say(&format!(
                                    "the gateway refused {method}: {}: {} (further refusals of {method} on this connection are not shown)",
                                    error.code, error.message
                                ));
                            }
                            surface.answered(&res.id, res.ok, res.error.as_ref());
                            let answer = mcp_publish::Answer { ok: res.ok, payload: res.payload.as_ref(), error: res.error.as_ref() };
                            publisher.answered(&res.id, answer, surface.confirmed);
                            publisher.approval(surface.confirmed, &outbox);
                            if surface.confirmed {
                                beacon.approved();
                            }
                            if surface.approved {
                                self.check_name();
                            }
                        }
                        Frame::Req(_) | Frame::Unknown => {}
                    }
                }
                Some(id) = done_rx.recv() => {
                    running.remove(&id);
                }
                _ = watchdog.tick() => {
                    if last_heard.elapsed() > silence_limit {
                        break End::Dropped(format!("no word from the gateway for {}s", silence_limit.as_secs()));
                    }
                }
                _ = surface_timer.tick(), if surface.pending() => surface.ask(&outbox),
                _ = tokio::time::sleep_until(publisher.retry_at().unwrap_or_else(Instant::now)), if publisher.retry_at().is_some() => {
                    publisher.publish(&outbox);
                }
                // The door holds its sender: this never ends.
                Ok(()) = offered.changed() => publisher.publish(&outbox),
                _ = stats_timer.tick(), if stats && surface.approved => {
                    if let Some(event) = events::host_stats() {
                        outbox.request("node.event", event);
                    }
                }
            }
        };

        for token in running.values() {
            token.cancel();
        }
        // A computer-use execution belongs to this connection (OpenClaw's
        // node host closes it on disconnect): what it held is let go.
        self.tools.disconnected().await;
        if matches!(end, End::Shutdown) {
            // Let stopped commands report, so the agent learns why; bounded.
            let deadline = Instant::now() + SHUTDOWN_GRACE;
            while !running.is_empty() {
                match tokio::time::timeout_at(deadline, done_rx.recv()).await {
                    Ok(Some(id)) => {
                        running.remove(&id);
                    }
                    _ => break,
                }
            }
            say("stopped");
            outbox.close(Duration::from_secs(2)).await;
        }
        end
    }

    /// Once per run, after the commands are approved: make the gateway
    /// list this node under the name it was given (see `name.rs`).
    pub(super) fn check_name(&self) {
        use std::sync::atomic::Ordering;
        if self.name_checked.swap(true, Ordering::Relaxed) {
            return;
        }
        let (endpoint, _) = self.endpoint();
        let token = self.options.token.clone();
        let node_id = self.identity.device_id.clone();
        let wanted = self.display_name.clone();
        let explicit = self.options.display_name.is_some();
        tokio::spawn(async move {
            let outcome =
                name::reconcile(&endpoint, token.as_deref(), &node_id, &wanted, explicit).await;
            if let Some(line) = outcome.describe(&node_id, &wanted, explicit) {
                say(&line);
            }
        });
    }
}
