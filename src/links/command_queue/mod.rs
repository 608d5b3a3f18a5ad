//! Seed 003: the desktop node of a cloud command queue (the rainy-mate
//! desktop's protocol). The node registers (`auth-context`, `register`),
//! heartbeats — each answer carries `pendingCommands`; a server that sends
//! none is polled with `GET …/commands` — and runs each command once:
//! `start`, a `progress` line, our tools under the airlock gate, then
//! `complete`. 401/404/409 re-register; other failures back off. This
//! module only translates.
//!
//! A queue may be hostile: it may offer commands without end while their
//! `start` answers slowly. A command is therefore taken only when one of
//! the [`PARALLEL`] slots is free to run it; the rest stay on the queue,
//! which offers them again, so what the node holds never grows with what
//! it is offered. Ids taken are kept in the link's replay memory
//! (`super::replay`), on disk, so none runs twice — not after a flood of
//! new ids, not after a restart.

mod command;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Value, json};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::http::{Failure, Service};
use super::replay::{Admit, Replay};
use crate::shared::backoff::jitter;
use crate::tools::{Invocation, Tools};
use command::Command;

/// A command as `serve` and `run` read it, for the fuzz targets
/// (`crate::fuzzing`): its usable id and the work it asks for.
#[doc(hidden)]
pub fn read_command(raw: Value, headless: bool) -> Result<(String, Result<(), String>), String> {
    let id = usable_id(&raw).ok_or("no usable id")?.to_owned();
    Ok((id, work_of(raw, headless).map(drop)))
}

/// A command's id, when it is one URL path segment (`take` skips others).
fn usable_id(raw: &Value) -> Option<&str> {
    raw["id"].as_str().filter(|id| is_segment(id))
}

/// The work a command asks for, or why it cannot be done (`run` completes
/// it as failed).
fn work_of(raw: Value, headless: bool) -> Result<command::Work, String> {
    let cmd: Command =
        serde_json::from_value(raw).map_err(|e| format!("malformed command: {e}"))?;
    cmd.work(headless)
}

/// Commands run at once; only as many are taken from the queue.
const PARALLEL: usize = 3;
/// Commands looked at in one answer.
const MAX_BATCH: usize = 100;
/// Tries of a `complete` that fails on the way (the network, 408, 429,
/// 5xx): 1 s between the first two, doubling (±20 %), about 30 s in all.
const COMPLETE_TRIES: u32 = 6;
/// Longest command id (it goes into URL paths).
const MAX_ID: usize = 256;
/// Unusable commands told about, one line each; past that, silence.
const MAX_TOLD: usize = 1024;
const REQUEST_WITHIN: Duration = Duration::from_secs(30);
const MAX_ANSWER: usize = 4 << 20;
/// Bytes of a command's output.
const MAX_OUTPUT: usize = 256 << 10;

fn say(message: &str) {
    crate::shared::log::say_as("poll", message);
}

/// Something went wrong and this link carries on.
fn warn(message: &str) {
    crate::shared::log::warn_as("poll", message);
}

/// Something this link was asked to do failed.
fn error(message: &str) {
    crate::shared::log::error_as("poll", message);
}

pub struct Options {
    pub api: Service,
    pub key: String,
    pub workspace_id: Option<String>,
    pub headless: bool,
    pub active: Duration,
    pub idle: Duration,
    pub fingerprint: String,
    /// The ids taken before, this run's and earlier runs'.
    pub replay: Replay,
}

struct Poller {
    options: Options,
    tools: Arc<Tools>,
    node: Mutex<Option<String>>,
    /// Unusable commands (by hash) and refusals already told about.
    told: Mutex<HashSet<String>>,
    slots: Arc<Semaphore>,
    /// A command ended: its slot is free for what the queue still offers.
    freed: Notify,
    completed: std::sync::atomic::AtomicU64,
    started: Instant,
}

/// A request's failure as the loop sees it.
enum Trouble {
    /// 401/404/409: the node is unknown now; register again.
    Unregistered(String),
    Other(String),
}

impl From<Failure> for Trouble {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Status(401 | 404 | 409, _) => Trouble::Unregistered(f.to_string()),
            f => Trouble::Other(f.to_string()),
        }
    }
}

impl Poller {
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Failure> {
        self.call_on(&self.options.api, method, path, body).await
    }

    async fn call_on(
        &self,
        api: &Service,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Failure> {
        api.json(
            method,
            path,
            body,
            Some(&self.options.key),
            REQUEST_WITHIN,
            MAX_ANSWER,
        )
        .await
    }

    fn node(&self) -> Option<String> {
        self.node.lock().unwrap().clone()
    }

    /// auth-context, then register: the node id.
    async fn register(&self) -> Result<String, Trouble> {
        let context = self
            .call(Method::GET, "/v1/nodes/auth-context", None)
            .await?;
        let workspace = match &self.options.workspace_id {
            Some(id) => id.clone(),
            None => context["workspaceId"]
                .as_str()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    Trouble::Other(format!("auth-context names no workspaceId: {context}"))
                })?
                .to_owned(),
        };
        let body = json!({
            "workspaceId": workspace,
            "hostname": crate::tools::system::hostname().unwrap_or_else(|| "unknown-host".into()),
            "platform": std::env::consts::OS,
            "skills": command::manifest(),
            "allowedPaths": [self.tools.workspace().root().display().to_string()],
            "fingerprint": self.options.fingerprint,
        });
        // As the real desktop registers: its fingerprint, and the skills
        // signed with the key (HMAC-SHA256 over the canonical JSON).
        let api = self.options.api.with_headers(vec![
            ("x-device-fingerprint", self.options.fingerprint.clone()),
            (
                "x-skills-signature",
                command::signature(&self.options.key, &body["skills"]),
            ),
        ]);
        let answer = self
            .call_on(&api, Method::POST, "/v1/nodes/register", Some(&body))
            .await?;
        let id = answer["nodeId"]
            .as_str()
            .filter(|s| is_segment(s))
            .ok_or_else(|| {
                Trouble::Other(format!(
                    "register answered no usable nodeId: {}",
                    answer["message"].as_str().unwrap_or(&answer.to_string())
                ))
            })?
            .to_owned();
        say(&format!(
            "registered as node {id} in workspace {} ({})",
            workspace,
            context["workspaceName"].as_str().unwrap_or("-")
        ));
        *self.node.lock().unwrap() = Some(id.clone());
        Ok(id)
    }

    /// One heartbeat; the commands it brought (or a poll's, when the
    /// server's answer carries none).
    async fn beat(&self, node: &str, first: bool) -> Result<Vec<Value>, Trouble> {
        use std::sync::atomic::Ordering::Relaxed;
        let running = self.running();
        let mut body = json!({
            "status": if running > 0 { "busy" } else { "online" },
            "runtimeStats": {
                "runningCommands": running,
                "completedCommands": self.completed.load(Relaxed),
                "uptimeMs": self.started.elapsed().as_millis() as u64,
            },
        });
        let mut api = self.options.api.clone();
        if first {
            body["skills"] = command::manifest();
            api = api.with_headers(vec![(
                "x-skills-signature",
                command::signature(&self.options.key, &body["skills"]),
            )]);
        }
        let answer = self
            .call_on(
                &api,
                Method::POST,
                &format!("/v1/nodes/{node}/heartbeat"),
                Some(&body),
            )
            .await?;
        let commands = match answer.get("pendingCommands") {
            Some(list) => list.clone(),
            None => self
                .call(Method::GET, &format!("/v1/nodes/{node}/commands"), None)
                .await?["commands"]
                .clone(),
        };
        match commands {
            Value::Array(list) => Ok(list.into_iter().take(MAX_BATCH).collect()),
            Value::Null => Ok(Vec::new()),
            other => Err(Trouble::Other(format!(
                "pendingCommands is not a list: {other}"
            ))),
        }
    }

    /// Says `message` the first time `about` comes up (a bounded number
    /// of times in all: a flood of distinct offenders is not a flood of
    /// lines).
    fn tell_once(&self, about: &str, message: &str) {
        let mut told = self.told.lock().unwrap();
        if told.len() < MAX_TOLD && told.insert(about.to_owned()) {
            say(message);
            if told.len() == MAX_TOLD {
                say("more such commands are skipped without a word");
            }
        }
    }

    /// Reports a command's end, trying again while the failure is on the
    /// way rather than an answer (401/404/409 forget the node): the queue
    /// must learn the result, or it offers the command again for nothing.
    async fn complete(&self, node: &str, id: &str, body: Value, stop: &CancellationToken) {
        let path = format!("/v1/nodes/{node}/commands/{id}/complete");
        let mut wait = Duration::from_secs(1);
        for tries in 1..=COMPLETE_TRIES {
            let e = match self.call(Method::POST, &path, Some(&body)).await {
                Ok(_) | Err(Failure::Status(200..=299, _)) => {
                    if tries > 1 {
                        say(&format!("command {id} completed at try {tries}"));
                    }
                    return;
                }
                Err(e) => e,
            };
            let transient = matches!(
                e,
                Failure::Network(_) | Failure::Status(408 | 429 | 500..=599, _)
            );
            if !transient || tries == COMPLETE_TRIES {
                error(&format!(
                    "cannot complete command {id}: {e}{}",
                    if tries > 1 {
                        format!(" (after {tries} tries; its result is given up)")
                    } else {
                        String::new()
                    }
                ));
                if let Trouble::Unregistered(_) = Trouble::from(e) {
                    self.forget(node);
                }
                return;
            }
            if tries == 1 {
                warn(&format!(
                    "cannot complete command {id} ({e}); trying again, up to {COMPLETE_TRIES} tries"
                ));
            }
            tokio::select! {
                _ = tokio::time::sleep(jitter(wait, 20)) => {}
                _ = stop.cancelled() => {
                    error(&format!("stopping: the result of command {id} is not delivered"));
                    return;
                }
            }
            wait *= 2;
        }
    }

    fn forget(&self, node: &str) {
        let mut held = self.node.lock().unwrap();
        if held.as_deref() == Some(node) {
            *held = None;
        }
    }

    /// One command `id`, start to complete, in the slot it was taken for.
    async fn run(
        self: Arc<Self>,
        node: String,
        id: String,
        raw: Value,
        _slot: OwnedSemaphorePermit,
        stop: CancellationToken,
    ) {
        use std::sync::atomic::Ordering::Relaxed;
        let body = match work_of(raw, self.options.headless) {
            Err(why) => command::failed(&why),
            Ok(work) => match self.execute(&node, &id, work, &stop).await {
                Some(body) => body,
                None => return,
            },
        };
        self.complete(&node, &id, body, &stop).await;
        self.completed.fetch_add(1, Relaxed);
    }

    /// Takes what `commands` offers while a slot is free: each new id is
    /// recorded, then run. True when some were left for a later answer.
    fn take(
        self: &Arc<Self>,
        node: &str,
        commands: Vec<Value>,
        tasks: &tokio_util::task::TaskTracker,
        stop: &CancellationToken,
    ) -> bool {
        for raw in commands {
            let Some(id) = usable_id(&raw) else {
                use sha2::{Digest, Sha256};
                let offender = crate::shared::hex::hex(&Sha256::digest(raw.to_string().as_bytes()));
                self.tell_once(
                    &offender,
                    &format!(
                        "a command without a usable id is skipped: {} (an id is one URL path segment: up to {MAX_ID} letters, digits, '-', '_', '.' or ':', and not '.' or '..')",
                        match &raw["id"] {
                            Value::String(id) => {
                                format!("{:?}", id.chars().take(80).collect::<String>())
                            }
                            Value::Null => "it has none".into(),
                            _ => "it is not text".into(),
                        }
                    ),
                );
                continue;
            };
            if self.options.replay.seen(id) {
                continue; // never the same command twice
            }
            let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
                return true;
            };
            match self.options.replay.admit(id) {
                Ok(Admit::New) => {}
                Ok(Admit::Again) => continue,
                Ok(Admit::Full { first }) => {
                    if first {
                        say(&format!(
                            "{} command ids were taken within the last {} h: new commands are not taken until the oldest expire (none taken is forgotten early, so none can run twice)",
                            super::replay::CAP,
                            super::replay::KEEP.as_secs() / 3600
                        ));
                    }
                    return false;
                }
                Err(why) => {
                    self.tell_once(
                        &why,
                        &format!("command {id} is not taken: {why}; it must not run unrecorded"),
                    );
                    return false;
                }
            }
            let poller = Arc::clone(self);
            let (node, id) = (node.to_owned(), id.to_owned());
            let stop = stop.child_token();
            tasks.spawn(async move {
                Arc::clone(&poller).run(node, id, raw, slot, stop).await;
                poller.freed.notify_one();
            });
        }
        false
    }

    /// start, a progress line, our tool: the body of `complete`, or None
    /// when the command is not ours to run after all.
    async fn execute(
        &self,
        node: &str,
        id: &str,
        work: command::Work,
        stop: &CancellationToken,
    ) -> Option<Value> {
        let base = format!("/v1/nodes/{node}/commands/{id}");
        match self
            .call(Method::POST, &format!("{base}/start"), None)
            .await
        {
            // Gone, taken elsewhere, or the node unknown: not ours to run.
            Err(e @ Failure::Status(401 | 404 | 409, _)) => {
                warn(&format!("command {id} cannot be started ({e}); skipped"));
                if let Failure::Status(401, _) = e {
                    self.forget(node);
                }
                return None;
            }
            Err(e) => warn(&format!(
                "command {id}: start not acknowledged ({e}); running it anyway"
            )),
            Ok(_) => {}
        }
        let progress = json!({"level": "info", "message": format!("Started filesystem.{}", work.tool), "data": null});
        let _ = self
            .call(Method::POST, &format!("{base}/progress"), Some(&progress))
            .await;
        let params = work.params.to_string();
        let (outcome, decision) = self
            .tools
            .invoke(Invocation {
                keep: None,
                id,
                command: work.tool,
                params_json: Some(&params),
                // The seed's approval timeout; the file work is quick.
                timeout: work.approval_wait,
                max_bytes: MAX_OUTPUT,
                cancel: stop.child_token(),
                tap: None,
                agent: None,
                gate: work.gate,
                gateway: None,
            })
            .await;
        say(&format!("command {id} ({}) → {decision}", work.tool));
        Some(command::completion(work.tool, outcome))
    }

    /// Commands running now: the slots taken.
    fn running(&self) -> usize {
        PARALLEL - self.slots.available_permits()
    }
}

/// Whether `id` can be one segment of a URL path as it is: plain
/// characters only (no `/`, `%`, `?`, `#`, spaces or controls), neither
/// empty nor too long, and not a dot segment (`.`, `..`), which a URL's
/// path resolution would remove or climb with.
fn is_segment(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Polls until `stop`; then cancels what runs, says `disconnect`, exits 0.
pub async fn serve(options: Options, tools: Arc<Tools>, stop: CancellationToken) -> u8 {
    let poller = Arc::new(Poller {
        options,
        tools,
        node: Mutex::new(None),
        told: Mutex::new(HashSet::new()),
        slots: Arc::new(Semaphore::new(PARALLEL)),
        freed: Notify::new(),
        completed: Default::default(),
        started: Instant::now(),
    });
    say(&format!("polling {}", poller.options.api.shown()));
    let tasks = tokio_util::task::TaskTracker::new();
    let mut failures = 0u32;
    let mut told = String::new();
    loop {
        let step = async {
            let (node, first) = match poller.node() {
                Some(node) => (node, false),
                None => (poller.register().await?, true),
            };
            let commands = poller.beat(&node, first).await.inspect_err(|t| {
                if let Trouble::Unregistered(_) = t {
                    poller.forget(&node);
                }
            })?;
            Ok::<_, Trouble>((node, commands))
        };
        let wait = match tokio::select! { r = step => r, _ = stop.cancelled() => break } {
            Ok((node, commands)) => {
                failures = 0;
                told.clear();
                let busy = !commands.is_empty() || poller.running() > 0;
                let left = poller.take(&node, commands, &tasks, &stop);
                let wait = jitter(
                    if busy {
                        poller.options.active
                    } else {
                        poller.options.idle
                    },
                    10,
                );
                if left {
                    // Commands wait for a slot: ask again as soon as one is free.
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = poller.freed.notified() => {}
                        _ = stop.cancelled() => break,
                    }
                    continue;
                }
                wait
            }
            Err(trouble) => {
                let (Trouble::Unregistered(why) | Trouble::Other(why)) = &trouble;
                if *why != told {
                    warn(&match trouble {
                        Trouble::Unregistered(_) => format!(
                            "the service no longer knows this node ({why}); registering again"
                        ),
                        Trouble::Other(_) => format!("{why}; retrying with backoff"),
                    });
                    told = why.clone();
                }
                failures += 1;
                let base = Duration::from_secs(2) * 2u32.pow(failures.min(5));
                jitter(base.min(Duration::from_secs(60)), 20)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => break,
        }
    }
    say("stopping: running commands are cancelled");
    tasks.close();
    let _ = tokio::time::timeout(Duration::from_secs(10), tasks.wait()).await;
    if let Some(node) = poller.node() {
        match poller
            .call(Method::POST, &format!("/v1/nodes/{node}/disconnect"), None)
            .await
        {
            Ok(_) => say(&format!("node {node} disconnected")),
            Err(e) => warn(&format!("disconnect failed: {e}")),
        }
    }
    crate::shared::log::flush_log();
    0
}

/// `clawbot_router poll …`; the exit code.
pub async fn main(args: crate::cli::PollArgs, stop: CancellationToken) -> u8 {
    let usage = |why: String| {
        crate::shared::log::tell("poll", &why);
        2
    };
    let api = match Service::parse(&args.api, true) {
        Ok(api) => api,
        Err(why) => return usage(why),
    };
    let key = match crate::shared::secrets::secret(&crate::shared::secrets::SecretSource {
        flag: args.key.as_deref(),
        file: args.key_file.as_deref(),
        file_flag: "--key-file",
        var: "CLAWBOT_ROUTER_POLL_KEY",
        what: "the API key",
    }) {
        Ok(key) => key,
        Err(why) => return usage(why),
    };
    let tools = match super::link_tools(&args.hands, "The cloud command queue") {
        Ok(hands) => hands,
        Err(why) => return usage(why),
    };
    let state_dir = args.hands.state_dir();
    let options = Options {
        key,
        workspace_id: args.workspace_id.filter(|w| !w.trim().is_empty()),
        headless: args.headless,
        active: Duration::from_millis(args.active_ms),
        idle: Duration::from_millis(args.idle_ms),
        fingerprint: fingerprint(&state_dir),
        replay: match Replay::open(&state_dir, "poll", api.shown()) {
            Ok(replay) => replay,
            Err(why) => {
                crate::shared::log::tell("poll", &why);
                return 1;
            }
        },
        api,
    };
    serve(options, tools, stop).await
}

/// This node's fingerprint: a random id kept in the state directory,
/// hashed (nothing about the machine leaves it).
fn fingerprint(state_dir: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    let path = state_dir.join("poll-node-id");
    let id = std::fs::read_to_string(&path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            let id = uuid::Uuid::new_v4().to_string();
            let _ = crate::shared::paths::write_private(&path, id.as_bytes());
            id
        });
    crate::shared::hex::hex(&Sha256::digest(id.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_could_bend_a_url_are_refused() {
        assert!(is_segment("cmd_abc-123.x:y"));
        assert!(is_segment("a..b") && is_segment("...") && is_segment(".hidden"));
        assert!(is_segment(&"x".repeat(MAX_ID)));
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            "a?b",
            "a#b",
            "a%2Fb",
            "%2e%2e",
            "a b",
            "a\u{0}b",
            "a\nb",
            "a\u{7f}",
            "é",
            &"x".repeat(MAX_ID + 1),
        ] {
            assert!(!is_segment(bad), "{bad:?}");
        }
    }
}
