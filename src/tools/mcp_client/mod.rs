//! Local MCP servers brought to OpenClaw's agents: each configured server
//! (`--mcp-server`, `--mcp-config`) runs as a resident child of the one
//! runner, an rmcp client lists its tools, and the node's door publishes
//! them beside its own; an agent's call comes back through the one policy
//! (`Tools::invoke_upstream`) and is forwarded here, with MCP's
//! cancellation when the gateway cancels.
//!
//! A server is supervised: one that exits, closes its pipe, or fails to
//! list its tools after a change is stopped (its whole tree), its tools
//! withdrawn, and started again after a backoff (1 s doubling to 60 s,
//! reset once it served for a minute). One that cannot start at all is
//! reported, left out, and tried again on the same schedule — the node
//! never stops for it. `notifications/tools/list_changed` re-lists and
//! republishes.

mod config;
mod shape;

pub use config::{ServerConfig, Setup, gather};
pub use shape::{Offered, SERVER};

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams,
};
use rmcp::service::{MaybeSendFuture, NotificationContext, Peer, RoleClient, ServiceError};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::process::ChildStderr;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

use crate::runner::{Launch, Resident};
use crate::shared::backoff::Backoff;
use crate::shared::log::say;
use crate::tools::policy::Risk;
use crate::tools::upstream::{Reply, Upstream};
use crate::tools::{SECRET_VARS, ToolError};
use shape::Listed;

/// How long a server may take to answer `initialize`.
const INIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long listing its tools may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// Pages and tools a listing may have (OpenClaw's node host's bounds).
const MAX_PAGES: usize = 128;
const MAX_LISTED: usize = 16_384;
/// The longest a call may take (OpenClaw's agent waits 120 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Between closing a server's stdin (or TERM) and stopping it harder.
const GRACE: Duration = Duration::from_secs(2);
/// Served this long, a server's next failure starts the backoff afresh.
const STABLE: Duration = Duration::from_secs(60);
/// Lines of a server's stderr logged per start, and bytes of each.
const STDERR_LINES: usize = 200;
const STDERR_LINE: usize = 500;
/// An error message from a server is cut to this many characters.
const MAX_MESSAGE: usize = 1024;

/// The configured servers and what each offers now.
pub struct Servers {
    slots: Vec<Arc<Slot>>,
    changed: watch::Sender<u64>,
    stop: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

struct Slot {
    name: String,
    launch: Launch,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Set while the server serves.
    peer: Option<Peer<RoleClient>>,
    tools: Vec<Listed>,
    /// Why it does not serve, once it stopped or could not start.
    down: Option<String>,
}

impl Slot {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Servers {
    /// Starts supervising every server (within a tokio runtime). A server
    /// runs in its `cwd`, else in `workspace`.
    pub fn start(configs: Vec<ServerConfig>, workspace: &Path) -> Arc<Self> {
        let slots: Vec<Arc<Slot>> = configs
            .into_iter()
            .map(|c| {
                let cwd = c
                    .cwd
                    .map_or_else(|| workspace.to_path_buf(), |d| workspace.join(d));
                Arc::new(Slot {
                    launch: Launch {
                        program: crate::runner::find_program(&c.program, Some(&cwd)).into(),
                        args: c.args.into_iter().map(Into::into).collect(),
                        cwd: Some(cwd),
                        env: c
                            .env
                            .into_iter()
                            .map(|(k, v)| (k.into(), v.into()))
                            .collect(),
                        env_remove: SECRET_VARS,
                        side_pipes: false,
                    },
                    name: c.name,
                    state: Mutex::default(),
                })
            })
            .collect();
        let servers = Arc::new(Self {
            slots,
            changed: watch::channel(0).0,
            stop: CancellationToken::new(),
            tasks: Mutex::default(),
        });
        let tasks = servers
            .slots
            .iter()
            .map(|slot| {
                tokio::spawn(supervise(
                    Arc::clone(slot),
                    servers.changed.clone(),
                    servers.stop.clone(),
                ))
            })
            .collect();
        *servers.tasks.lock().unwrap_or_else(|e| e.into_inner()) = tasks;
        servers
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().map(|s| s.name.as_str())
    }

    /// What the servers that serve now offer, server by server.
    pub fn offered(&self) -> Vec<Offered> {
        self.slots
            .iter()
            .flat_map(|slot| {
                let state = slot.state();
                state
                    .tools
                    .iter()
                    .map(|l| l.offered.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Changes whenever a server's tools come, go or change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Stops every server: stdin closed, then its tree stopped (bounded).
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        let _ = timeout(GRACE * 3, futures_util::future::join_all(tasks)).await;
    }

    fn slot(&self, server: &str) -> Option<&Arc<Slot>> {
        self.slots.iter().find(|s| s.name == server)
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        // Supervisors end; their residents' trees are killed as they drop.
        self.stop.cancel();
    }
}

fn server_unavailable(server: &str, down: Option<&str>) -> ToolError {
    ToolError::new(
        "MCP_SERVER_UNAVAILABLE",
        match down {
            Some(why) => format!("MCP server {server:?} is unavailable: it {why}"),
            None => format!("MCP server {server:?} is unavailable"),
        },
    )
}

impl Upstream for Servers {
    fn lookup(&self, server: &str, tool: &str) -> Result<Risk, ToolError> {
        let slot = self
            .slot(server)
            .ok_or_else(|| server_unavailable(server, None))?;
        let state = slot.state();
        if state.peer.is_none() {
            return Err(server_unavailable(server, state.down.as_deref()));
        }
        state
            .tools
            .iter()
            .find(|l| l.offered.tool == tool)
            .map(|l| l.risk)
            .ok_or_else(|| {
                ToolError::new(
                    "MCP_TOOL_UNAVAILABLE",
                    format!("MCP tool {tool:?} is unavailable on server {server:?}"),
                )
            })
    }

    fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        wait: Duration,
        max_bytes: usize,
        cancel: CancellationToken,
    ) -> Reply {
        let peer = self.slot(server).map(|s| {
            let state = s.state();
            (state.peer.clone(), state.down.clone())
        });
        let (server, tool) = (server.to_owned(), tool.to_owned());
        Box::pin(async move {
            let Some((Some(peer), _)) = peer else {
                let down = peer.and_then(|(_, down)| down);
                return Err(server_unavailable(&server, down.as_deref()));
            };
            let mut params = CallToolRequestParams::new(tool.clone());
            if let Value::Object(arguments) = arguments {
                params = params.with_arguments(arguments);
            }
            let wait = wait.min(CALL_TIMEOUT);
            // Dropping the call (a cancel, the deadline) sends the server
            // notifications/cancelled for it.
            let answer = tokio::select! {
                answer = timeout(wait, peer.call_tool_once(params)) => answer,
                _ = cancel.cancelled() => {
                    return Err(ToolError::new("CANCELLED", "the invocation was cancelled"));
                }
            };
            let error = |code, message: String| {
                Err(ToolError::new(
                    code,
                    message.chars().take(MAX_MESSAGE).collect::<String>(),
                ))
            };
            match answer {
                Err(_) => error(
                    "MCP_TOOL_TIMEOUT",
                    format!(
                        "MCP tool {tool:?} on server {server:?} did not answer within {}s (the call was cancelled)",
                        wait.as_secs()
                    ),
                ),
                // Shaping megabytes is CPU work: off the runtime thread.
                Ok(Ok(CallToolResponse::Complete(result))) => {
                    tokio::task::spawn_blocking(move || {
                        let raw = serde_json::to_value(result).unwrap_or_default();
                        shape::result(raw, max_bytes)
                    })
                    .await
                    .map_err(|e| {
                        ToolError::new("MCP_TOOL_ERROR", format!("shaping the result failed: {e}"))
                    })
                }
                Ok(Ok(_)) => error(
                    "MCP_TOOL_ERROR",
                    format!(
                        "MCP tool {tool:?} asked for input or started a task, which this node does not support"
                    ),
                ),
                Ok(Err(ServiceError::McpError(e))) => {
                    error("MCP_TOOL_ERROR", e.message.into_owned())
                }
                Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => error(
                    "MCP_SERVER_UNAVAILABLE",
                    format!("MCP server {server:?} disconnected"),
                ),
                Ok(Err(e)) => error("MCP_TOOL_ERROR", e.to_string()),
            }
        })
    }
}

/// How one start of a server ended.
enum Ended {
    /// The node is stopping.
    Stopped,
    /// `why` it stopped serving; `served`: it had listed its tools.
    Failed { why: String, served: bool },
}

/// Starts `slot`'s server, and again after each failure, until `stop`.
async fn supervise(slot: Arc<Slot>, changed: watch::Sender<u64>, stop: CancellationToken) {
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    let mut told = String::new();
    loop {
        let started = Instant::now();
        let (why, served) = match serve(&slot, &changed, &stop).await {
            Ended::Stopped => return,
            Ended::Failed { why, served } => (why, served),
        };
        let withdrawn = {
            let mut state = slot.state();
            state.peer = None;
            state.down = Some(why.clone());
            !std::mem::take(&mut state.tools).is_empty()
        };
        if withdrawn {
            changed.send_modify(|n| *n += 1);
        }
        if started.elapsed() >= STABLE {
            backoff.reset();
        }
        let wait = backoff.next();
        // A server that keeps failing the same way is told about once.
        if served || why != told {
            crate::shared::log::warn(&format!(
                "MCP server {} {why}; starting it again in {:.1}s{}",
                slot.name,
                wait.as_secs_f32(),
                if withdrawn {
                    " (its tools are withdrawn meanwhile)"
                } else {
                    ""
                }
            ));
        }
        told = if served { String::new() } else { why };
        tokio::select! {
            _ = sleep(wait) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// One start: spawn, initialize, list, then serve until it fails or the
/// node stops; its tree is stopped whichever way it ends.
async fn serve(slot: &Slot, changed: &watch::Sender<u64>, stop: &CancellationToken) -> Ended {
    let (mut resident, pipes) = match Resident::start(&slot.launch) {
        Ok(started) => started,
        Err(e) => {
            return Ended::Failed {
                why: format!("cannot start ({:?}: {})", e.program, e.source),
                served: false,
            };
        }
    };
    let relay = tokio::spawn(relay_stderr(slot.name.clone(), pipes.stderr));
    let list_changed = Arc::new(Notify::new());
    let handler = Handler {
        list_changed: Arc::clone(&list_changed),
    };
    let pid = resident.pid().unwrap_or_default();
    let ended = async {
        let failed = |why: String, served| Ended::Failed { why, served };
        let service = tokio::select! {
            started = timeout(INIT_TIMEOUT, handler.serve((pipes.stdout, pipes.stdin))) => match started {
                Ok(Ok(service)) => service,
                Ok(Err(e)) => return failed(format!("failed to initialize MCP: {e}"), false),
                Err(_) => return failed(format!("did not answer MCP initialize within {}s", INIT_TIMEOUT.as_secs()), false),
            },
            status = resident.exited() => return failed(format!("exited ({}) before it answered MCP initialize", exit(status)), false),
            _ = stop.cancelled() => return Ended::Stopped,
        };
        let peer = service.peer().clone();
        let mut listed = tokio::select! {
            listed = list(&slot.name, &peer) => match listed {
                Ok(listed) => listed,
                Err(why) => return failed(why, false),
            },
            _ = stop.cancelled() => return Ended::Stopped,
        };
        say(&format!(
            "MCP server {} (pid {pid}) serves {} tool(s): {}",
            slot.name,
            listed.len(),
            names(&listed)
        ));
        {
            let mut state = slot.state();
            state.peer = Some(peer.clone());
            state.tools = listed.clone();
            state.down = None;
        }
        changed.send_modify(|n| *n += 1);
        let mut pipe_check = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                status = resident.exited() => return failed(format!("exited ({})", exit(status)), true),
                _ = list_changed.notified() => {
                    say(&format!("MCP server {} announced a tool list change; listing again", slot.name));
                    let fresh = match list(&slot.name, &peer).await {
                        Ok(fresh) => fresh,
                        Err(why) => return failed(format!("changed its tools and then {why}"), true),
                    };
                    if fresh != listed {
                        say(&format!("MCP server {} changed its tools: {} tool(s): {}", slot.name, fresh.len(), names(&fresh)));
                        slot.state().tools = fresh.clone();
                        listed = fresh;
                        changed.send_modify(|n| *n += 1);
                    }
                }
                _ = pipe_check.tick() => if service.is_transport_closed() {
                    return failed("closed its MCP connection".into(), true);
                },
                _ = stop.cancelled() => {
                    // MCP's stdio shutdown: close its stdin, let it exit.
                    let _ = timeout(GRACE, service.cancel()).await;
                    let _ = timeout(GRACE, resident.exited()).await;
                    return Ended::Stopped;
                }
            }
        }
    }
    .await;
    slot.state().peer = None;
    resident.stop(GRACE).await;
    relay.abort();
    ended
}

/// Every tool a server lists (all pages, bounded), as offered.
async fn list(server: &str, peer: &Peer<RoleClient>) -> Result<Vec<Listed>, String> {
    let all = async {
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_PAGES {
            let page = peer
                .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
                .await
                .map_err(|e| format!("failed to list its tools: {e}"))?;
            tools.extend(page.tools);
            if tools.len() > MAX_LISTED {
                return Err(format!("listed more than {MAX_LISTED} tools"));
            }
            cursor = page.next_cursor;
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(format!("listed more than {MAX_PAGES} pages of tools"))
    };
    let tools = timeout(LIST_TIMEOUT, all)
        .await
        .map_err(|_| format!("did not list its tools within {}s", LIST_TIMEOUT.as_secs()))??;
    let (listed, notes) = shape::listed(server, tools);
    for note in notes {
        say(&note);
    }
    Ok(listed)
}

fn names(listed: &[Listed]) -> String {
    let names: Vec<&str> = listed.iter().map(|l| l.offered.tool.as_str()).collect();
    names.join(", ")
}

fn exit(status: Option<std::process::ExitStatus>) -> String {
    status.map_or_else(|| "status unknown".into(), |s| s.to_string())
}

/// A server's stderr, line by line into the node's log, a bounded number
/// of lines per start; the rest is read and dropped (a full pipe would
/// stall the server).
async fn relay_stderr(server: String, mut stderr: ChildStderr) {
    let mut buf = vec![0u8; 8192];
    let mut line = Vec::new();
    let mut shown = 0;
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b != b'\n' {
                if line.len() < STDERR_LINE {
                    line.push(b);
                }
                continue;
            }
            shown += 1;
            if shown <= STDERR_LINES {
                say(&format!(
                    "MCP server {server}: {}",
                    String::from_utf8_lossy(&line).trim_end()
                ));
            } else if shown == STDERR_LINES + 1 {
                say(&format!(
                    "MCP server {server}: further stderr lines are not shown"
                ));
            }
            line.clear();
        }
    }
}

/// Our side of each server's MCP session: it hears tool list changes.
struct Handler {
    list_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.list_changed.notify_one();
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("clawbot_router", env!("CARGO_PKG_VERSION")),
        )
    }
}
