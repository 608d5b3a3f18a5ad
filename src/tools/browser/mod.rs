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
    /// Why the last browser stopped, for `GET /` and the next start.
    last_exit: Mutex<Option<String>>,
    /// The running browser's pid, readable without waiting for a route.
    pid: Mutex<Option<u32>>,
}

/// One launched browser.
pub struct Running {
    cdp: Arc<Cdp>,
    state: Arc<Mutex<State>>,
    resident: Resident,
    chatter: launch::Chatter,
    version: String,
}

impl Running {
    /// Whether the browser's first process still runs (its pipe may not
    /// have told us yet that it died).
    #[cfg(not(target_os = "linux"))]
    fn leader_alive(&self) -> bool {
        true
    }

    /// Whether the browser's first process still runs (its pipe may not
    /// have told us yet that it died).
    #[cfg(target_os = "linux")]
    fn leader_alive(&self) -> bool {
        self.resident.pid().is_some_and(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !matches!(
                    stat.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .chars()
                        .next(),
                    Some('Z' | 'X')
                )
            })
        })
    }
}

impl Browser {
    pub fn new(options: Options) -> Self {
        Self {
            options,
            running: tokio::sync::Mutex::new(None),
            last_exit: Mutex::new(None),
            pid: Mutex::new(None),
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
        let deadline = Instant::now() + request.timeout.unwrap_or(DEFAULT_TIMEOUT).min(budget);
        let staged = match &request.upload {
            Some(upload) => Some(files::stage(&self.uploads_dir(), upload)?),
            None => None,
        };
        let mut request = request;
        if let Some(staged) = &staged {
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
                            request
                                .timeout
                                .unwrap_or(DEFAULT_TIMEOUT)
                                .min(budget)
                                .as_millis()
                        ),
                    ))
                });
        drop(staged);
        routes::envelope(&request, answer, &[self.media_dir(), self.downloads_dir()])
    }

    /// The running browser, started (or restarted after a crash) first.
    async fn running(&self) -> Result<tokio::sync::MappedMutexGuard<'_, Running>, String> {
        let mut slot = self.running.lock().await;
        if let Some(running) = slot.as_ref()
            && (running.cdp.is_closed() || !running.leader_alive())
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
            *self.lock_exit() = Some(why);
            *self.lock_pid() = None;
        }
        if slot.is_none() {
            let running = self.start().await?;
            *self.lock_pid() = running.resident.pid();
            *slot = Some(running);
        }
        Ok(tokio::sync::MutexGuard::map(slot, |s| {
            s.as_mut().expect("started above")
        }))
    }

    /// The running browser if there is one (status reads), never starting it.
    async fn if_running(&self) -> Option<tokio::sync::MappedMutexGuard<'_, Running>> {
        let slot = self.running.lock().await;
        tokio::sync::MutexGuard::try_map(slot, |s| {
            s.as_mut()
                .filter(|r| !r.cdp.is_closed() && r.leader_alive())
        })
        .ok()
    }

    /// Stops the browser (its whole tree); whether one was running.
    async fn stop(&self) -> bool {
        let gone = self.running.lock().await.take();
        *self.lock_pid() = None;
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
        let state = Arc::new(Mutex::new(State::default()));
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
                if event.method == "Target.attachedToTarget" {
                    let (cdp, reach) = (Arc::clone(cdp), reach.clone());
                    let event = Arc::clone(event);
                    tokio::spawn(async move { prepare_target(&cdp, &reach, &event.params).await });
                }
                state::observe(&hook_state, cdp, event);
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
            let downloads = self.downloads_dir();
            let _ = crate::shared::paths::create_private_dir(&downloads);
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

    fn lock_exit(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.last_exit.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_pid(&self) -> std::sync::MutexGuard<'_, Option<u32>> {
        self.pid.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A target just attached: its domains on, requests guarded, then let
/// run. A page's first request happens only after this.
async fn prepare_target(cdp: &Cdp, reach: &Reach, params: &Value) {
    let Some(session) = params["sessionId"].as_str() else {
        return;
    };
    let kind = params["targetInfo"]["type"].as_str().unwrap_or_default();
    let t = Duration::from_secs(10);
    let s = Some(session);
    if reach.guarding() {
        let _ = cdp
            .call(
                s,
                "Fetch.enable",
                json!({ "patterns": [{ "urlPattern": "*", "requestStage": "Request" }] }),
                t,
            )
            .await;
    }
    if kind == "page" || kind == "iframe" {
        for (method, params) in [
            ("Page.enable", json!({})),
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
}

/// The browser section of `GET /` when nothing runs.
fn idle_status(browser: &Browser) -> Value {
    json!({
        "running": false,
        "cdpReady": false,
        "cdpHttp": false,
        "pageReady": false,
        "pid": null,
        "lastExit": *browser.lock_exit(),
    })
}

/// A file path the route results may name, inside `dir`.
fn new_file(dir: &Path, stem: &str, extension: &str) -> Result<PathBuf, String> {
    crate::shared::paths::create_private_dir(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir.join(format!(
        "{stem}-{}.{extension}",
        uuid::Uuid::new_v4().simple()
    )))
}
