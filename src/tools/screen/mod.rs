//! The screen and the pointer of a Linux X11 desktop, for OpenClaw's
//! computer use: `screen.snapshot` (cap `screen`) and `computer.act` (cap
//! `computer`), the command pair its node hosts register through its
//! computer-use contract (`registerComputerUseProvider`), and the
//! `computerUse` descriptor a node sends in `connect` so the agent's
//! `computer` tool can drive it. Pictures are FFmpeg's `x11grab`
//! (`capture`), input is xdotool (`act`), who may drive and in which
//! coordinates is `executions`, what agents may send is `params`.
//!
//! Off unless the node's owner turns them on (`--screen`, `--computer`),
//! on the X display the node was started on (its `DISPLAY`).
//! Must never: act for two executions at once or while a picture is being
//! taken (one lock serialises every call), outlive the caller's time, or
//! leave a program, a picture file, a pressed key or a held button behind
//! (programs run through the one process runner, which stops their trees;
//! each action's release runs even when the call is abandoned).

pub mod act;
pub mod capture;
pub mod executions;
pub mod params;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ToolError;
use super::sensors::{Job, failure};
use act::Step;
use executions::Executions;
use params::{Act, Asked, Snapshot};

/// A failure as OpenClaw's node host answers a computer-use command's
/// throw: `INVALID_REQUEST`, `Error: CODE: …`.
fn error(text: impl std::fmt::Display) -> ToolError {
    failure(text)
}

/// Whether these commands can be offered on this operating system (X11
/// through xdotool and x11grab: Linux only, in this version).
pub const SUPPORTED: bool = cfg!(target_os = "linux");

/// The programs a desktop needs, found on PATH.
pub fn ffmpeg() -> Option<PathBuf> {
    super::sensors::find("ffmpeg", &[])
}

pub fn ffprobe() -> Option<PathBuf> {
    super::sensors::find("ffprobe", &[])
}

pub fn xdotool() -> Option<PathBuf> {
    super::sensors::find("xdotool", &[])
}

/// The X display the node was started on (`DISPLAY`), when it names one.
pub fn display() -> Option<String> {
    std::env::var("DISPLAY")
        .ok()
        .filter(|d| !d.is_empty() && d.contains(':') && !d.starts_with('-'))
}

/// One X display, its programs, and who drives it.
pub struct Desktop {
    /// Leaked once: a desktop lives as long as the node.
    display: &'static str,
    /// `DISPLAY=<display>` for every program we run.
    env: [(&'static str, &'static str); 1],
    ffmpeg: PathBuf,
    ffprobe: PathBuf,
    /// Found when `--computer` is on (and used then for the geometry).
    xdotool: Option<PathBuf>,
    /// This node process, for frame ids and the descriptor.
    generation: String,
    /// Held for a whole call: pictures and actions one at a time.
    executions: tokio::sync::Mutex<Executions>,
}

/// What the owner turned on and this machine can serve.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offer {
    /// The display `--screen` captures.
    pub display: String,
    /// `--computer`, with xdotool found.
    pub computer: bool,
}

impl Desktop {
    /// `None` when a program the offer needs is missing.
    pub fn new(offer: &Offer) -> Option<Arc<Self>> {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let display: &'static str = Box::leak(offer.display.clone().into_boxed_str());
        Some(Arc::new(Desktop {
            display,
            env: [("DISPLAY", display)],
            ffmpeg: ffmpeg()?,
            ffprobe: ffprobe().unwrap_or_else(|| "ffprobe".into()),
            xdotool: if offer.computer {
                Some(xdotool()?)
            } else {
                xdotool()
            },
            generation: format!("{}-{started}", std::process::id()),
            executions: Default::default(),
        }))
    }

    /// A helper program's run on our display.
    fn job<'a>(&'a self, program: &'a Path, args: Vec<OsString>, budget: Duration) -> Job<'a> {
        let mut job = Job::new("COMPUTER_DRIVER_UNAVAILABLE", program, args, budget);
        job.keep = 16 * 1024;
        job.env = &self.env;
        job
    }

    /// `screen.snapshot`: `{format, base64, displayFrameId, screenIndex,
    /// width, height}`, the width and height of the picture sent.
    pub async fn snapshot(&self, params: Value, budget: Duration) -> Result<Value, ToolError> {
        let deadline = Instant::now() + budget;
        let execution = params::execution_id(&params)?;
        within(deadline, async {
            let mut executions = self.executions.lock().await;
            if let Some(id) = &execution {
                let expired = executions.enter(id)?;
                self.release(expired, deadline).await;
            }
            let p = Snapshot::parse(&params)?;
            primary(p.screen_index)?;
            let png = p.format == params::Format::Png;
            let max_width = p.max_width.unwrap_or(if png { 900.0 } else { 1600.0 });
            let quality = p.quality.unwrap_or(0.72);
            let native = capture::screen_size(self, left(deadline)).await?;
            let picture =
                capture::grab(self, native, png, max_width, quality, left(deadline)).await?;
            let frame = executions.issue(&self.generation, native, picture.size, max_width);
            let id = frame.id.clone();
            if execution.is_some()
                && let Some(open) = executions.current()
            {
                open.remember(frame);
            }
            Ok(json!({
                "format": p.format.name(),
                "base64": base64::engine::general_purpose::STANDARD.encode(&picture.bytes),
                "displayFrameId": id,
                "screenIndex": 0,
                "width": picture.size.width,
                "height": picture.size.height,
            }))
        })
        .await
    }

    /// `computer.act`. Runs as a task of its own so that what it pressed
    /// is released even when the caller stops waiting.
    pub async fn act(
        self: &Arc<Self>,
        params: Value,
        budget: Duration,
    ) -> Result<Value, ToolError> {
        let deadline = Instant::now() + budget;
        let stop = CancellationToken::new();
        let _stop_when_dropped = stop.clone().drop_guard();
        let desktop = Arc::clone(self);
        // Told to stop, it still releases what it pressed, and holds the
        // desktop until it has.
        let task = tokio::spawn(async move { desktop.act_now(params, deadline, stop).await });
        within(deadline, async {
            task.await
                .unwrap_or_else(|e| Err(error(format!("COMPUTER_DRIVER_ERROR: {e}"))))
        })
        .await
    }

    async fn act_now(
        &self,
        params: Value,
        deadline: Instant,
        stop: CancellationToken,
    ) -> Result<Value, ToolError> {
        let Some(id) = params::execution_id(&params)? else {
            return Err(params::execution_required());
        };
        let lock = || async {
            tokio::time::timeout_at(deadline.into(), self.executions.lock())
                .await
                .map_err(|_| error("COMPUTER_DRIVER_ERROR: command timed out"))
        };
        if params["action"] == "__close_execution" {
            let closed = lock().await?.close(Some(&id));
            self.release(closed, deadline).await;
            return Ok(json!({"ok": true}));
        }
        let asked = Act::parse(&params)?;
        let mut executions = lock().await?;
        let expired = executions.enter(&id)?;
        self.release(expired, deadline).await;
        let act = match asked {
            Asked::Unsupported(action) => {
                return Err(error(format!("COMPUTER_UNSUPPORTED_ACTION: {action}")));
            }
            Asked::Act(act) => act,
        };
        primary(act.screen_index)?;
        let open = executions.current().expect("entered above");
        if act.action == "left_mouse_up" && !open.button_held {
            return Err(error(
                "COMPUTER_INVALID_REQUEST: left button is not held by computer control",
            ));
        }
        // Modifiers and keys first: a refusal needs no screen.
        act::modifiers(act.modifiers.as_deref())?;
        let placed = matches!(
            act.action,
            "left_click"
                | "right_click"
                | "middle_click"
                | "double_click"
                | "triple_click"
                | "mouse_move"
                | "left_click_drag"
        );
        let (mut at, mut from) = (None, None);
        if placed || act.x.is_some() || act.y.is_some() {
            let screen = capture::screen_size(self, left(deadline)).await?;
            let frame = open.verify(act.display_frame_id.as_deref(), screen, act.ref_width)?;
            if act.action == "left_click_drag" {
                from = Some(frame.place(act.from_x, act.from_y, "drag start")?);
                at = Some(frame.place(act.x, act.y, "drag end")?);
            } else {
                at = Some(frame.place(act.x, act.y, act.action)?);
            }
        }
        let plan = act::plan(&act, at, from)?;
        self.perform(&plan, deadline, &stop).await?;
        match act.action {
            "left_mouse_down" => open.button_held = true,
            "left_mouse_up" => open.button_held = false,
            _ => {}
        }
        let mut details = json!({"scope": "desktop"});
        if act.delivery_mode {
            details["deliveryModeApplicable"] = false.into();
        }
        Ok(json!({"ok": true, "effect": "unverifiable", "details": details}))
    }

    /// Runs a plan's steps; whatever stops them part way (a failure, the
    /// time, the caller gone) runs its release.
    async fn perform(
        &self,
        plan: &act::Plan,
        deadline: Instant,
        stop: &CancellationToken,
    ) -> Result<(), ToolError> {
        let xdotool = self
            .xdotool
            .as_deref()
            .ok_or_else(|| error("COMPUTER_DRIVER_UNAVAILABLE: xdotool not found"))?;
        let mut done = Ok(());
        for step in &plan.steps {
            done = match step {
                Step::Xdo(words) if words.is_empty() => Ok(()),
                Step::Xdo(words) => self.xdo(xdotool, words, left(deadline), stop).await,
                Step::Sleep(time) => tokio::select! {
                    _ = tokio::time::sleep((*time).min(left(deadline))) => Ok(()),
                    _ = stop.cancelled() => Err(error("COMPUTER_DRIVER_ERROR: cancelled")),
                },
            };
            if done.is_err() {
                break;
            }
        }
        if done.is_err() && !plan.release.is_empty() {
            let _ = self
                .xdo(
                    xdotool,
                    &plan.release,
                    RELEASE_TIME,
                    &CancellationToken::new(),
                )
                .await;
        }
        done
    }

    async fn xdo(
        &self,
        xdotool: &Path,
        words: &[String],
        time: Duration,
        stop: &CancellationToken,
    ) -> Result<(), ToolError> {
        let args = words.iter().map(Into::into).collect();
        let outcome = self.job(xdotool, args, time).run(stop.cancelled()).await?;
        if outcome.end == crate::runner::End::Cancelled {
            return Err(error("COMPUTER_DRIVER_ERROR: cancelled"));
        }
        let said = outcome
            .stderr
            .as_ref()
            .map(|c| format!("{}{}", c.head, c.tail));
        if said.is_some_and(|s| s.contains("Can't open display")) {
            return Err(error(format!(
                "COMPUTER_DRIVER_UNAVAILABLE: cannot open the X display {}",
                self.display
            )));
        }
        super::sensors::check(&outcome, "COMPUTER_DRIVER_ERROR")
    }

    /// Lets go of what a closed execution still held.
    async fn release(&self, closed: Option<executions::Execution>, deadline: Instant) {
        let Some(closed) = closed.filter(|c| c.button_held) else {
            return;
        };
        if let Some(xdotool) = &self.xdotool {
            let words = ["mouseup".to_owned(), "1".to_owned()];
            let time = left(deadline)
                .min(RELEASE_TIME)
                .max(Duration::from_millis(500));
            let _ = self
                .xdo(xdotool, &words, time, &CancellationToken::new())
                .await;
        }
        drop(closed);
    }

    /// The gateway connection is gone: so is its execution (OpenClaw's
    /// `onDisconnect`).
    pub async fn disconnected(&self) {
        let closed = self.executions.lock().await.close(None);
        self.release(closed, Instant::now() + RELEASE_TIME).await;
    }

    /// The `computerUse` descriptor for `connect`.
    pub fn descriptor(&self) -> Descriptor {
        descriptor(&self.generation)
    }
}

/// Time a release (a key up, a button up) may take.
const RELEASE_TIME: Duration = Duration::from_secs(2);

fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// Only the primary display exists here.
fn primary(screen_index: Option<f64>) -> Result<(), ToolError> {
    match screen_index {
        Some(i) if i != 0.0 => Err(error(
            "COMPUTER_UNSUPPORTED_DISPLAY: this node controls only the primary display (screenIndex 0)",
        )),
        _ => Ok(()),
    }
}

/// The caller's time: past it, the call is over (and the runner stops
/// whatever it started when its future is dropped).
async fn within(
    deadline: Instant,
    work: impl std::future::Future<Output = Result<Value, ToolError>>,
) -> Result<Value, ToolError> {
    tokio::time::timeout_at(deadline.into(), work)
        .await
        .unwrap_or_else(|_| Err(error("COMPUTER_DRIVER_ERROR: command timed out")))
}

/// How the node's policy sees a `computer.act` call: closing an execution
/// is safe; every action is risky, described for the person asked. Bad
/// parameters are refused here, before anyone is asked.
pub fn classify(params: &Value) -> Result<(super::policy::Risk, String), ToolError> {
    use super::policy::Risk;
    if params::execution_id(params)?.is_none() {
        return Err(params::execution_required());
    }
    if params["action"] == "__close_execution" {
        return Ok((Risk::Safe, "computer.act: __close_execution".into()));
    }
    let act = match Act::parse(params)? {
        Asked::Unsupported(action) => return Ok((Risk::Safe, format!("computer.act: {action}"))),
        Asked::Act(act) => act,
    };
    let at = match (act.x, act.y) {
        (Some(x), Some(y)) => format!(" at ({x}, {y})"),
        _ => String::new(),
    };
    let what = match act.action {
        "type" => {
            let text = act.text.as_deref().unwrap_or("");
            let shown: String = text.chars().take(200).collect();
            let more = if shown.len() < text.len() { "…" } else { "" };
            format!("type {shown:?}{more} ({} characters)", text.chars().count())
        }
        "key" | "hold_key" => {
            let keys: String = act.keys.as_deref().unwrap_or("").chars().take(64).collect();
            format!("{} {keys:?}", act.action)
        }
        action => format!("{action}{at}"),
    };
    Ok((Risk::Risky, format!("computer.act: {what}")))
}

/// OpenClaw's `ComputerUseCapabilityDescriptor` (contract version 2).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    contract_version: u8,
    provider: Provider,
    actions: Vec<&'static str>,
    targets: [&'static str; 1],
    delivery_modes: [&'static str; 1],
    observations: [&'static str; 1],
    features: Features,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
struct Provider {
    id: &'static str,
    label: &'static str,
    generation: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Features {
    recording: bool,
    agent_cursor: bool,
    multi_display: bool,
}

/// What this node offers the `computer` tool: the v1 desktop actions,
/// with `screenshot` and `wait` (the tool's own, on `screen.snapshot`).
fn descriptor(generation: &str) -> Descriptor {
    let mut actions = vec!["screenshot"];
    actions.extend(params::V1_ACTIONS);
    actions.push("wait");
    Descriptor {
        contract_version: 2,
        provider: Provider {
            id: "clawbot-x11",
            label: "clawbot_router X11 (xdotool)",
            generation: format!("clawbot-x11:{generation}"),
        },
        actions,
        targets: ["screen"],
        delivery_modes: ["foreground"],
        observations: ["image"],
        features: Features {
            recording: false,
            agent_cursor: false,
            multi_display: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::policy::Risk;

    const ID: &str = "0b5c3f0e-8d1a-4c2b-9e7f-1a2b3c4d5e6f";

    #[test]
    fn the_descriptor_is_the_contracts_v2_shape_in_its_action_order() {
        let d = serde_json::to_value(descriptor("1-2")).unwrap();
        assert_eq!(
            d,
            json!({
                "contractVersion": 2,
                "provider": {"id": "clawbot-x11", "label": "clawbot_router X11 (xdotool)",
                             "generation": "clawbot-x11:1-2"},
                "actions": ["screenshot", "left_click", "right_click", "middle_click", "double_click",
                            "triple_click", "mouse_move", "left_click_drag", "left_mouse_down",
                            "left_mouse_up", "scroll", "type", "key", "hold_key", "wait"],
                "targets": ["screen"], "deliveryModes": ["foreground"], "observations": ["image"],
                "features": {"recording": false, "agentCursor": false, "multiDisplay": false}
            })
        );
    }

    #[test]
    fn closing_is_safe_acting_is_risky_and_bad_params_ask_nobody() {
        let (risk, _) =
            classify(&json!({"action": "__close_execution", "executionId": ID})).unwrap();
        assert_eq!(risk, Risk::Safe);
        let (risk, summary) =
            classify(&json!({"action": "left_click", "executionId": ID, "x": 3, "y": 4})).unwrap();
        assert_eq!(risk, Risk::Risky);
        assert_eq!(summary, "computer.act: left_click at (3, 4)");
        let (_, typed) = classify(&json!({"action": "type", "executionId": ID,
                                          "text": "a\u{1b}[2J".to_owned() + &"x".repeat(300)}))
        .unwrap();
        assert!(
            typed.starts_with("computer.act: type \"a\\u{1b}[2Jxxx"),
            "{typed}"
        );
        assert!(
            typed.ends_with("…\" (305 characters)") || typed.ends_with("\"… (305 characters)"),
            "{typed}"
        );
        assert_eq!(
            classify(&json!({"action": "left_click"}))
                .unwrap_err()
                .message,
            "Error: COMPUTER_INVALID_REQUEST: executionId is required"
        );
        assert_eq!(
            classify(&json!({"action": "left_click", "executionId": ID, "bogus": 1}))
                .unwrap_err()
                .message,
            "Error: COMPUTER_INVALID_REQUEST: invalid params"
        );
    }

    #[test]
    fn only_the_primary_display_exists() {
        assert!(primary(None).is_ok());
        assert!(primary(Some(0.0)).is_ok());
        assert_eq!(
            primary(Some(1.0)).unwrap_err().message,
            "Error: COMPUTER_UNSUPPORTED_DISPLAY: this node controls only the primary display (screenIndex 0)"
        );
    }
}
