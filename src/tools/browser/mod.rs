//! `browser.proxy` and `browser.proxy.upload.v1`: the routes OpenClaw's
//! agent `browser` tool uses (`../shared/openclaw/node-commands.md` §1),
//! served over CDP by a Chromium-family browser this node launches and
//! owns — a profile of its own under the state directory, DevTools on a
//! pipe only ours, its process tree stopped with us (even when we are
//! SIGKILLed: the runner's parent-death signal and sentinel), restarted on
//! the next call after a crash, with the reason in `GET /`.
//!
//! This file holds the browser's life; `routes` the route table and its
//! shapes, `act` the page actions, `snapshot` the page as text, `state`
//! what the browser reports, `guard` where it may go, `files` what travels
//! in and out as files, `cdp` the protocol, `launch` the process.

mod act;
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

pub use guard::Reach;
pub use launch::{find as find_browser, running_as_root};
pub use routes::{Request, classify};

use super::ToolError;
use crate::runner::Resident;
use cdp::{Cdp, CdpError};
use state::State;

/// The profile OpenClaw's managed browser is called by.
pub const PROFILE: &str = "openclaw";
/// A proxy call's time when the gateway names none (OpenClaw's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
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

/// One launched browser.
pub struct Running {
    cdp: Arc<Cdp>,
    state: Arc<Mutex<State>>,
    resident: Resident,
    chatter: launch::Chatter,
    version: String,
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
            && (running.cdp.is_closed() || running.resident.has_exited())
        {
            let gone = slot.take().expect("checked above");
            let status = gone.resident.stop(Duration::from_secs(2)).await;
            let words = gone.chatter.lines();
            let why = format!(
                "the browser stopped ({}){}",
                status.map_or_else(|| "no status".to_owned(), |s| s.to_string()),
                words
                    .last()
                    .map(|w| format!("; it said: {w}"))
                    .unwrap_or_default()
            );
            crate::shared::log::warn(&format!("{why}; starting it again"));
            *self.seen() = Seen {
                live: None,
                last_exit: Some(why),
            };
        }
        if slot.is_none() {
            let running = self.start().await?;
            self.seen().live = Some(Live {
                pid: running.resident.pid(),
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

    /// Stops the browser (its whole tree); whether one was running.
    async fn stop(&self) -> bool {
        let gone = self.running.lock().await.take();
        self.seen().live = None;
        match gone {
            Some(running) => {
                // Asked nicely first, so the profile is written whole.
                let _ = running
                    .cdp
                    .call(None, "Browser.close", json!({}), Duration::from_secs(2))
                    .await;
                running.resident.stop(Duration::from_secs(3)).await;
                true
            }
            None => false,
        }
    }

    async fn start(&self) -> Result<Running, String> {
        let started = launch::start(&launch::Start {
            executable: &self.options.executable,
            user_data_dir: &self.user_data_dir(),
            headless: self.options.headless,
            no_sandbox: self.options.no_sandbox,
        })?;
        let mut state = State::default();
        state.downloads_dir = Some(self.downloads_dir());
        let state = Arc::new(Mutex::new(state));
        let hook_state = Arc::clone(&state);
        let reach = self.options.reach.clone();
        let cdp = Cdp::start(
            started.from_browser,
            started.to_browser,
            Box::new(move |cdp, event| {
                if event.method == "Fetch.requestPaused" {
                    guard::on_paused(&reach, cdp, event);
                    return;
                }
                state::observe(&hook_state, cdp, event);
                if event.method == "Target.attachedToTarget" {
                    let (cdp, reach) = (Arc::clone(cdp), reach.clone());
                    let (event, state) = (Arc::clone(event), Arc::clone(&hook_state));
                    tokio::spawn(async move {
                        prepare_target(&cdp, &reach, &event.params, &state).await
                    });
                }
            }),
        );
        let running = Running {
            cdp,
            state,
            resident: started.resident,
            chatter: started.chatter,
            version: String::new(),
        };
        match self.connect(running).await {
            Ok(running) => Ok(running),
            Err((running, e)) => {
                let words = running.chatter.lines();
                running.resident.stop(Duration::from_secs(2)).await;
                Err(format!(
                    "the browser {} did not start: {e}{}",
                    self.options.executable.display(),
                    words
                        .last()
                        .map(|w| format!("; it said: {w}"))
                        .unwrap_or_default()
                ))
            }
        }
    }

    /// The first exchange: version, targets followed and attached (each
    /// new page waits for us before it loads anything), downloads here.
    async fn connect(&self, mut running: Running) -> Result<Running, (Running, CdpError)> {
        let cdp = Arc::clone(&running.cdp);
        let t = START_TIMEOUT;
        let steps = async {
            let version = cdp.call(None, "Browser.getVersion", json!({}), t).await?;
            running.version = version["product"].as_str().unwrap_or_default().to_owned();
            // Downloads live here only until they travel: what an earlier
            // browser left (it died mid-download) goes.
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
                t,
            )
            .await?;
            cdp.call(
                None,
                "Target.setDiscoverTargets",
                json!({ "discover": true }),
                t,
            )
            .await?;
            cdp.call(
                None,
                "Target.setAutoAttach",
                json!({ "autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true }),
                t,
            )
            .await?;
            // Pages that were there before auto-attach (the first blank
            // tab) are attached by hand.
            let targets = cdp.call(None, "Target.getTargets", json!({}), t).await?;
            for info in targets["targetInfos"].as_array().into_iter().flatten() {
                if info["type"] == "page" && info["attached"] != true {
                    let _ = cdp
                        .call(
                            None,
                            "Target.attachToTarget",
                            json!({ "targetId": info["targetId"], "flatten": true }),
                            t,
                        )
                        .await;
                }
            }
            Ok::<(), CdpError>(())
        };
        match steps.await {
            Ok(()) => Ok(running),
            Err(e) => Err((running, e)),
        }
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
