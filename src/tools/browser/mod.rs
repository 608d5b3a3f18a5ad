//! `browser.proxy` and `browser.proxy.upload.v1`: the routes OpenClaw's
//! agent `browser` tool uses (`../shared/openclaw/node-commands.md` §1),
//! served over CDP by a Chromium-family browser this node launches and
//! owns — a profile of its own under the state directory, DevTools on a
//! pipe only ours, its process tree stopped with us (even when we are
//! SIGKILLed: the runner's parent-death signal and sentinel), restarted on
//! the next call after a crash, with the reason in `GET /` — or one the
//! node owner started and named (`--browser-cdp-url`), attached to, never
//! stopped, in which we list and drive only the tabs we open.
//!
//! This file holds the browser's life; `routes` the route table and its
//! shapes, `act` the page actions, `snapshot` the page as text, `state`
//! what the browser reports, `guard` where it may go, `files` what travels
//! in and out as files, `cdp` the protocol, `launch` the process, `attach`
//! the way to a browser started elsewhere.

mod act;
mod attach;
mod cdp;
mod files;
mod guard;
#[cfg_attr(not(unix), allow(dead_code))]
mod launch;
mod page;
mod routes;
mod snapshot;
mod state;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use attach::{
    check as check_cdp_url, is_loopback as is_loopback_cdp_url, shown as shown_cdp_url,
};
pub use guard::Reach;
pub use launch::{find as find_browser, running_as_root};
pub use routes::{Request, classify};

use super::ToolError;
use crate::runner::Resident;
use cdp::{Cdp, CdpError};
use state::State;

/// What `crate::fuzzing` reaches (hidden, not an API).
#[doc(hidden)]
pub mod fuzz {
    pub use super::act::{check as check_act, is_reading};
    pub use super::routes::Route;
    pub use super::snapshot::{Options as SnapshotOptions, render as render_snapshot};
    pub use super::state::Refs;
}

/// The profile OpenClaw's managed browser is called by.
pub const PROFILE: &str = "openclaw";
/// A proxy call's time when the gateway names none (OpenClaw's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// New targets being prepared at once, at most; one more stays paused
/// (never runs) until the browser ends it.
const MAX_PREPARING: usize = 256;
/// The time a browser has to start and answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The node owner's choices.
#[derive(Clone, Debug)]
pub struct Options {
    pub executable: PathBuf,
    /// `<state-dir>/browser`: the profile, screenshots, downloads, uploads.
    pub dir: PathBuf,
    pub headless: bool,
    pub no_sandbox: bool,
    pub reach: Reach,
    /// `act` kind `evaluate` (and `wait` with `fn`) allowed.
    pub evaluate: bool,
    /// A browser started elsewhere, attached to instead of launching
    /// one: its DevTools address (see `attach`).
    pub attach: Option<String>,
}

/// The browser this node owns.
pub struct Browser {
    options: Options,
    /// The running browser; held by one route at a time (routes act on
    /// pages in order, as the agent sends them).
    running: tokio::sync::Mutex<Option<Running>>,
    /// What `GET /` and `/profiles` report, readable while a route holds
    /// the browser (a status call never waits behind a 20 s action).
    seen: Mutex<Seen>,
}

/// The browser as the status routes see it.
#[derive(Default)]
struct Seen {
    /// The running one: its pid, version, connection and tabs.
    live: Option<Live>,
    /// Why the last browser stopped.
    last_exit: Option<String>,
}

#[derive(Clone)]
struct Live {
    pid: Option<u32>,
    version: String,
    cdp: Arc<Cdp>,
    state: Arc<Mutex<State>>,
}

/// The browser we drive now.
pub struct Running {
    cdp: Arc<Cdp>,
    state: Arc<Mutex<State>>,
    /// The process, when we launched it (none when attached).
    launched: Option<Launched>,
    version: String,
}

struct Launched {
    resident: Resident,
    chatter: launch::Chatter,
}

impl Launched {
    /// Stops the process; why it stopped, in words.
    async fn stop(self, grace: Duration) -> String {
        let status = self.resident.stop(grace).await;
        let words = self.chatter.lines();
        format!(
            "the browser stopped ({}){}",
            status.map_or_else(|| "no status".to_owned(), |s| s.to_string()),
            words
                .last()
                .map(|w| format!("; it said: {w}"))
                .unwrap_or_default()
        )
    }
}

impl Browser {
    pub fn new(options: Options) -> Self {
        Self {
            options,
            running: tokio::sync::Mutex::new(None),
            seen: Mutex::new(Seen::default()),
        }
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    fn user_data_dir(&self) -> PathBuf {
        self.options.dir.join(PROFILE).join("user-data")
    }

    /// Where screenshots and PDFs are written before they travel.
    fn media_dir(&self) -> PathBuf {
        self.options.dir.join("media")
    }

    fn downloads_dir(&self) -> PathBuf {
        self.options.dir.join("downloads")
    }

    /// Where uploads are staged (`browser.proxy.upload.v1`).
    fn uploads_dir(&self) -> PathBuf {
        self.options.dir.join("uploads")
    }

    /// One proxied route call: its result as OpenClaw's node returns it
    /// (`{result, files?, route}`, or the `browser-v1` error envelope).
    pub async fn proxy(&self, request: Request, budget: Duration) -> Result<Value, ToolError> {
        let limit = request.timeout.unwrap_or(DEFAULT_TIMEOUT).min(budget);
        let deadline = Instant::now() + limit;
        let mut request = request;
        if let Some(upload) = &request.upload {
            let staged = files::stage(&self.uploads_dir(), upload)?;
            request.body["paths"] = json!(staged.paths());
        }
        let answer =
            tokio::time::timeout_at(deadline.into(), routes::serve(self, &request, deadline))
                .await
                .unwrap_or_else(|_| {
                    Err(routes::Failure::new(
                        504,
                        format!(
                            "browser proxy timed out for {} {} after {}ms",
                            request.method,
                            request.path,
                            limit.as_millis()
                        ),
                    ))
                });
        routes::envelope(&request, answer, &[self.media_dir(), self.downloads_dir()])
    }

    /// The running browser, started (or restarted after a crash) first.
    async fn running(&self) -> Result<tokio::sync::MappedMutexGuard<'_, Running>, String> {
        let mut slot = self.running.lock().await;
        if let Some(running) = slot.as_mut()
            && (running.cdp.is_closed()
                || running
                    .launched
                    .as_mut()
                    .is_some_and(|l| l.resident.has_exited()))
        {
            let gone = slot.take().expect("checked above");
            let why = match gone.launched {
                Some(launched) => launched.stop(Duration::from_secs(2)).await,
                None => format!(
                    "the connection to the browser at {} closed",
                    self.options
                        .attach
                        .as_deref()
                        .map(attach::shown)
                        .unwrap_or_default()
                ),
            };
            crate::shared::log::warn(&format!("{why}; starting it again"));
            *self.seen() = Seen {
                live: None,
                last_exit: Some(why),
            };
        }
        if slot.is_none() {
            let running = self.start().await?;
            self.seen().live = Some(Live {
                pid: running.launched.as_ref().and_then(|l| l.resident.pid()),
                version: running.version.clone(),
                cdp: Arc::clone(&running.cdp),
                state: Arc::clone(&running.state),
            });
            *slot = Some(running);
        }
        Ok(tokio::sync::MutexGuard::map(slot, |s| {
            s.as_mut().expect("started above")
        }))
    }

    /// The running browser as the status routes see it (never waiting
    /// for a route, never starting one); why the last one stopped.
    fn live(&self) -> (Option<Live>, Option<String>) {
        let seen = self.seen();
        let live = seen.live.clone().filter(|l| !l.cdp.is_closed());
        (live, seen.last_exit.clone())
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// At the node's exit: the tabs we opened in an attached browser are
    /// closed (within 3 s); a launched one stops with our process tree.
    pub async fn let_go(&self) {
        if self.options.attach.is_some() {
            let _ = tokio::time::timeout(Duration::from_secs(3), self.stop()).await;
        }
    }

    /// Stops the browser (its whole tree); whether one was running. An
    /// attached browser is not ours to stop: the tabs we opened in it
    /// are closed and we let go of it.
    async fn stop(&self) -> bool {
        let gone = self.running.lock().await.take();
        self.seen().live = None;
        let Some(running) = gone else { return false };
        let t = Duration::from_secs(2);
        match running.launched {
            Some(launched) => {
                // Asked nicely first, so the profile is written whole.
                let _ = running.cdp.call(None, "Browser.close", json!({}), t).await;
                launched.stop(Duration::from_secs(3)).await;
            }
            None => {
                let ours: Vec<String> = running
                    .state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .tabs
                    .iter()
                    .map(|t| t.target_id.clone())
                    .collect();
                futures_util::future::join_all(ours.iter().map(|target| {
                    running
                        .cdp
                        .call(None, "Target.closeTarget", json!({ "targetId": target }), t)
                }))
                .await;
                running.cdp.close();
            }
        }
        true
    }

    async fn start(&self) -> Result<Running, String> {
        if let Some(url) = &self.options.attach {
            return self.attach(url).await;
        }
        let started = launch::start(&launch::Start {
            executable: &self.options.executable,
            user_data_dir: &self.user_data_dir(),
            headless: self.options.headless,
            no_sandbox: self.options.no_sandbox,
        })?;
        let mut state = State::default();
        state.downloads_dir = Some(self.downloads_dir());
        let state = Arc::new(Mutex::new(state));
        let cdp = Cdp::start(started.from_browser, started.to_browser, self.hook(&state));
        let running = Running {
            cdp,
            state,
            launched: Some(Launched {
                resident: started.resident,
                chatter: started.chatter,
            }),
            version: String::new(),
        };
        match self.connect(running).await {
            Ok(running) => Ok(running),
            Err((running, e)) => {
                let mut said = String::new();
                if let Some(launched) = running.launched {
                    if let Some(w) = launched.chatter.lines().last() {
                        said = format!("; it said: {w}");
                    }
                    launched.resident.stop(Duration::from_secs(2)).await;
                }
                Err(format!(
                    "the browser {} did not start: {e}{said}",
                    self.options.executable.display(),
                ))
            }
        }
    }

    /// Attaches to the browser the owner named.
    async fn attach(&self, url: &str) -> Result<Running, String> {
        let socket = tokio::time::timeout(attach::CONNECT_TIMEOUT, attach::connect(url))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "the browser at {} did not answer in {} s",
                    attach::shown(url),
                    attach::CONNECT_TIMEOUT.as_secs()
                ))
            })?;
        let mut state = State::default();
        state.only_ours = true;
        let state = Arc::new(Mutex::new(state));
        let running = Running {
            cdp: Cdp::start_socket(socket, self.hook(&state)),
            state,
            launched: None,
            version: String::new(),
        };
        self.connect(running).await.map_err(|(running, e)| {
            running.cdp.close();
            format!("the browser at {} refused us: {e}", attach::shown(url))
        })
    }

    /// What the reader does with each event: the guard's verdicts, the
    /// state, each new target prepared.
    fn hook(&self, state: &Arc<Mutex<State>>) -> cdp::Hook {
        let hook_state = Arc::clone(state);
        let reach = self.options.reach.clone();
        let preparing = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        Box::new(move |cdp, event| {
            if event.method == "Fetch.requestPaused" {
                guard::on_paused(&reach, cdp, event);
                return;
            }
            state::observe(&hook_state, cdp, event);
            if event.method == "Target.attachedToTarget" {
                // Each new target is prepared by a task of its own, up to
                // MAX_PREPARING at once. One more (a page adding frames of
                // a site that hangs, an endpoint flooding attach events)
                // is left as the browser gave it: paused before its first
                // instruction, so it runs nothing and needs no guard, and
                // holds nothing of ours. The agent's session goes on.
                use std::sync::atomic::Ordering;
                if preparing.fetch_add(1, Ordering::Relaxed) >= MAX_PREPARING {
                    preparing.fetch_sub(1, Ordering::Relaxed);
                    // At debug level: a page can do this any number of times.
                    crate::shared::log::log_as(
                        crate::shared::log::Level::Debug,
                        "",
                        &format!(
                            "browser: {MAX_PREPARING} new targets being prepared; one more stays paused"
                        ),
                    );
                    return;
                }
                let (cdp, reach) = (Arc::clone(cdp), reach.clone());
                let (event, state) = (Arc::clone(event), Arc::clone(&hook_state));
                let preparing = Arc::clone(&preparing);
                tokio::spawn(async move {
                    prepare_target(&cdp, &reach, &event.params, &state).await;
                    preparing.fetch_sub(1, Ordering::Relaxed);
                });
            }
        })
    }

    /// The first exchange: version, targets followed and attached (each
    /// new page waits for us before it loads anything), downloads here —
    /// but not an attached browser's: its downloads are its user's.
    async fn connect(&self, mut running: Running) -> Result<Running, (Running, CdpError)> {
        let cdp = Arc::clone(&running.cdp);
        let t = START_TIMEOUT;
        let launched = running.launched.is_some();
        let steps = async {
            let version = cdp.call(None, "Browser.getVersion", json!({}), t).await?;
            running.version = version["product"].as_str().unwrap_or_default().to_owned();
            if launched {
                self.downloads_here(&cdp).await?;
            }
            cdp.call(
                None,
                "Target.setDiscoverTargets",
                json!({ "discover": true }),
                t,
            )
            .await?;
            let mut auto =
                json!({ "autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true });
            if !launched {
                // Of an attached browser only pages are followed from the
                // top: its service and shared workers are its user's (our
                // pages' own frames and workers attach through them).
                auto["filter"] = json!([{ "type": "page" }]);
            }
            // (Auto-attach takes the pages already there too: none in a
            // browser we launch, which opens no window of its own.)
            cdp.call(None, "Target.setAutoAttach", auto, t).await?;
            Ok::<(), CdpError>(())
        };
        match steps.await {
            Ok(()) => Ok(running),
            Err(e) => Err((running, e)),
        }
    }
}

impl Browser {
    /// Downloads of a browser we launched go to our directory, and live
    /// there only until they travel: what an earlier browser left (it
    /// died mid-download) goes.
    async fn downloads_here(&self, cdp: &Cdp) -> Result<(), CdpError> {
        let downloads = self.downloads_dir();
        let _ = crate::shared::paths::create_private_dir(&downloads);
        for entry in std::fs::read_dir(&downloads)
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        cdp.call(
            None,
            "Browser.setDownloadBehavior",
            json!({ "behavior": "allowAndName", "downloadPath": downloads, "eventsEnabled": true }),
            START_TIMEOUT,
        )
        .await
        .map(|_| ())
    }
}

/// A target just attached: requests guarded, its domains on, then let
/// run, and (a page) marked ready for routes. A page's first request, and
/// a route's first command to it, happen only after this.
async fn prepare_target(cdp: &Cdp, reach: &Reach, params: &Value, state: &Mutex<State>) {
    let Some(session) = params["sessionId"].as_str() else {
        return;
    };
    let kind = params["targetInfo"]["type"].as_str().unwrap_or_default();
    let t = Duration::from_secs(10);
    let s = Some(session);
    let (attached, ours) = {
        let state = state.lock().unwrap_or_else(|e| e.into_inner());
        (state.only_ours, state.ours(&params["targetInfo"]))
    };
    // An attached browser's own pages (its user's) are let go untouched.
    if kind == "page" && !ours {
        if params["waitingForDebugger"] == true {
            let _ = cdp
                .call(s, "Runtime.runIfWaitingForDebugger", json!({}), t)
                .await;
        }
        let _ = cdp
            .call(
                None,
                "Target.detachFromTarget",
                json!({ "sessionId": session }),
                t,
            )
            .await;
        return;
    }
    if reach.guarding() {
        let guarded = cdp
            .call(
                s,
                "Fetch.enable",
                json!({ "patterns": [{ "urlPattern": "*", "requestStage": "Request" }] }),
                t,
            )
            .await;
        // Unguarded, it never runs: a target the guard cannot hold is
        // closed, not let go.
        if let Err(e) = guarded {
            crate::shared::log::warn(&format!(
                "browser: a {kind} could not be guarded ({e}); closing it"
            ));
            let target = params["targetInfo"]["targetId"].clone();
            let _ = cdp
                .call(None, "Target.closeTarget", json!({ "targetId": target }), t)
                .await;
            return;
        }
    }
    if kind == "page" || kind == "iframe" {
        for (method, params) in [
            ("Page.enable", json!({})),
            ("Page.setLifecycleEventsEnabled", json!({ "enabled": true })),
            ("Runtime.enable", json!({})),
            (
                "Network.enable",
                json!({ "maxTotalBufferSize": 0, "maxResourceBufferSize": 0 }),
            ),
            (
                "Page.setInterceptFileChooserDialog",
                json!({ "enabled": true }),
            ),
            (
                "Target.setAutoAttach",
                json!({ "autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true }),
            ),
        ] {
            let _ = cdp.call(s, method, params, t).await;
        }
    }
    if attached && kind == "page" {
        // Our pages in the user's browser: their downloads would land in
        // the user's Downloads unbounded (we keep none of its downloads),
        // and the profile's service workers (the user's, unguarded) do
        // not answer for them.
        for (method, params) in [
            ("Page.setDownloadBehavior", json!({ "behavior": "deny" })),
            ("Network.setBypassServiceWorker", json!({ "bypass": true })),
        ] {
            let _ = cdp.call(s, method, params, t).await;
        }
    }
    if params["waitingForDebugger"] == true {
        let _ = cdp
            .call(s, "Runtime.runIfWaitingForDebugger", json!({}), t)
            .await;
    }
    if kind == "page"
        && let Some(target) = params["targetInfo"]["targetId"].as_str()
        && let Some(tab) = state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .tab_mut(target)
        && tab.session.as_deref() == Some(session)
    {
        tab.ready = true;
    }
}

/// A new file's path in `dir` (made private first): `<uuid>.<extension>`.
fn new_file(dir: &Path, extension: &str) -> Result<PathBuf, String> {
    crate::shared::paths::create_private_dir(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir.join(format!("{}.{extension}", uuid::Uuid::new_v4())))
}
