//! A route's hold on the running browser until its deadline: commands to a
//! tab's session, the tab's element refs resolved to DOM nodes, and the
//! input primitives actions are made of. Every command gets only the time
//! the route has left.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Running;
use super::cdp::CdpError;
use super::routes::Failure;

pub struct Ctx<'a> {
    pub browser: &'a super::Browser,
    pub run: &'a Running,
    pub deadline: Instant,
}

impl Ctx<'_> {
    /// Time left before the route's deadline.
    pub fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    pub fn state(&self) -> std::sync::MutexGuard<'_, super::state::State> {
        self.run.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A browser-wide command.
    pub async fn browser_call(
        &self,
        method: &'static str,
        params: Value,
    ) -> Result<Value, Failure> {
        self.run
            .cdp
            .call(None, method, params, self.left())
            .await
            .map_err(cdp_failure)
    }

    /// A command to a tab's page, attaching to it first when needed.
    pub async fn call(
        &self,
        tab: &str,
        method: &'static str,
        params: Value,
    ) -> Result<Value, Failure> {
        let session = self.session(tab).await?;
        self.run
            .cdp
            .call(Some(&session), method, params, self.left())
            .await
            .map_err(cdp_failure)
    }

    /// The tab's session once it is ready (guarded, domains on): pages
    /// are attached as they appear (`Target.setAutoAttach`); one that was
    /// not within a second is attached here, and waited for all the same.
    async fn session(&self, tab: &str) -> Result<String, Failure> {
        let asked_at = Instant::now() + Duration::from_secs(1);
        let mut asked = false;
        loop {
            match self.state().tab(tab).map(|t| (t.ready, t.session.clone())) {
                Some((true, Some(session))) => return Ok(session),
                None => return Err(tab_not_found(Some(tab))),
                Some(_) => {}
            }
            if !asked && Instant::now() >= asked_at {
                asked = true;
                self.browser_call(
                    "Target.attachToTarget",
                    json!({ "targetId": tab, "flatten": true }),
                )
                .await?;
            }
            if self.left() < Duration::from_millis(20) {
                return Err(Failure::new(
                    504,
                    "TimeoutError: the tab never became ready",
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The tab a route means (`targetId` as OpenClaw accepts it).
    pub fn resolve(&self, name: Option<&str>) -> Result<String, Failure> {
        self.state().resolve(name).map_err(|e| {
            if e.starts_with("ambiguous") {
                Failure::new(409, "ambiguous browser tab reference")
            } else {
                tab_not_found(name)
            }
        })
    }

    /// The tab a route means; with none named and none open, a blank one.
    pub async fn tab_or_new(&self, name: Option<&str>) -> Result<String, Failure> {
        match self.resolve(name) {
            Ok(tab) => Ok(tab),
            Err(e) if name.is_some() => Err(e),
            Err(_) => self.new_tab().await,
        }
    }

    /// A new blank tab of ours. In an attached browser it is made at a
    /// marked address, so that of the pages appearing meanwhile (the
    /// user's too) only it is taken for ours; if the call is given up
    /// before the browser names it, it is closed when it appears.
    pub async fn new_tab(&self) -> Result<String, Failure> {
        struct Creating<'a, 'b>(&'a Ctx<'b>, Option<String>, bool);
        impl Drop for Creating<'_, '_> {
            fn drop(&mut self) {
                let mut state = self.0.state();
                state.creating = None;
                if let Some(marked) = self.1.take()
                    && !self.2
                {
                    if state.abandoned.len() >= 16 {
                        state.abandoned.pop_front();
                    }
                    state.abandoned.push_back(marked);
                }
            }
        }
        let marked = self
            .state()
            .only_ours
            .then(|| format!("about:blank#clawbot-{}", uuid::Uuid::new_v4()));
        self.state().creating = marked.clone();
        let mut creating = Creating(self, marked.clone(), false);
        let created = self
            .browser_call(
                "Target.createTarget",
                json!({ "url": marked.as_deref().unwrap_or("about:blank") }),
            )
            .await?;
        creating.2 = true;
        drop(creating);
        let id = created["targetId"].as_str().unwrap_or_default().to_owned();
        self.state()
            .add(&id, marked.as_deref().unwrap_or("about:blank"), "");
        Ok(id)
    }

    pub fn with_tab<T>(&self, tab: &str, f: impl FnOnce(&mut super::state::Tab) -> T) -> Option<T> {
        self.state().tab_mut(tab).map(f)
    }

    pub fn set_current(&self, tab: &str) {
        self.state().current = Some(tab.to_owned());
    }

    /// The tab's current URL.
    pub fn url(&self, tab: &str) -> String {
        self.state()
            .tab(tab)
            .map(|t| t.url.clone())
            .unwrap_or_default()
    }

    /// Which document the tab shows (changes on each main-frame navigation).
    pub fn document(&self, tab: &str) -> u32 {
        self.state().tab(tab).map_or(0, |t| t.refs.document)
    }

    /// The answer of a route that cannot run on the tab: a dialog is
    /// open, and the page waits on it.
    pub fn blocked_by_dialog(&self, tab: &str) -> Option<Value> {
        let state = self.with_tab(tab, |t| {
            (!t.pending_dialogs.is_empty()).then(|| t.browser_state())
        })??;
        Some(json!({
            "ok": true,
            "targetId": tab,
            "url": self.url(tab),
            "blockedByDialog": true,
            "browserState": state,
        }))
    }

    /// The DOM node a ref of the tab's last snapshot names.
    pub fn node_of(&self, tab: &str, reference: &str) -> Result<i64, Failure> {
        self.state()
            .tab(tab)
            .and_then(|t| t.refs.nodes.get(reference).copied())
            .ok_or_else(|| unknown_ref(reference))
    }

    /// The centre of an element in the viewport, scrolled into view.
    pub async fn centre(
        &self,
        tab: &str,
        node: &i64,
        name: Option<&str>,
    ) -> Result<(f64, f64), Failure> {
        let gone = || {
            Failure::new(
                500,
                format!(
                    "Element \"{}\" not found or not visible. Run a new snapshot to see current page elements.",
                    name.unwrap_or("?")
                ),
            )
            .code("ACT_OPERATION_FAILED")
        };
        self.call(
            tab,
            "DOM.scrollIntoViewIfNeeded",
            json!({ "backendNodeId": node }),
        )
        .await
        .map_err(|_| gone())?;
        let quads = self
            .call(tab, "DOM.getContentQuads", json!({ "backendNodeId": node }))
            .await
            .map_err(|_| gone())?;
        let quad: Vec<f64> = quads["quads"][0]
            .as_array()
            .map(|q| q.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        if quad.len() != 8 {
            return Err(gone());
        }
        let x = (quad[0] + quad[2] + quad[4] + quad[6]) / 4.0;
        let y = (quad[1] + quad[3] + quad[5] + quad[7]) / 4.0;
        Ok((x, y))
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn mouse(
        &self,
        tab: &str,
        kind: &'static str,
        x: f64,
        y: f64,
        button: &str,
        clicks: u32,
        modifiers: u8,
    ) -> Result<(), Failure> {
        // The buttons held while it happens (a drag's moves hold the left
        // one: pointer-based drag code reads `buttons`, not `button`).
        let held = match (kind, button) {
            ("mouseReleased", _) | (_, "none") => 0,
            (_, "right") => 2,
            (_, "middle") => 4,
            _ => 1,
        };
        self.call(
            tab,
            "Input.dispatchMouseEvent",
            json!({ "type": kind, "x": x, "y": y, "button": button, "buttons": held,
                    "clickCount": clicks, "modifiers": modifiers }),
        )
        .await
        .map(drop)
    }

    pub async fn click(
        &self,
        tab: &str,
        x: f64,
        y: f64,
        button: &str,
        clicks: u32,
        modifiers: u8,
    ) -> Result<(), Failure> {
        self.mouse(tab, "mouseMoved", x, y, "none", 0, modifiers)
            .await?;
        for n in 1..=clicks {
            self.mouse(tab, "mousePressed", x, y, button, n, modifiers)
                .await?;
            self.mouse(tab, "mouseReleased", x, y, button, n, modifiers)
                .await?;
        }
        Ok(())
    }

    /// A key or chord (`Control+a`) pressed on the focused element.
    pub async fn press(&self, tab: &str, text: &str) -> Result<(), Failure> {
        let (modifiers, name) = super::act::chord(text)?;
        let Some((key, code, key_code, typed)) = super::act::key(&name) else {
            return Err(Failure::new(500, format!("Error: Unknown key: \"{name}\"")));
        };
        let mut down = json!({
            "type": if typed.is_some() && modifiers & 0b110 == 0 { "keyDown" } else { "rawKeyDown" },
            "key": key, "code": code, "windowsVirtualKeyCode": key_code, "modifiers": modifiers,
        });
        if let Some(text) = typed.filter(|_| modifiers & 0b110 == 0) {
            down["text"] = json!(text);
        }
        self.call(tab, "Input.dispatchKeyEvent", down).await?;
        self.call(
            tab,
            "Input.dispatchKeyEvent",
            json!({ "type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": key_code, "modifiers": modifiers }),
        )
        .await
        .map(drop)
    }

    /// Replaces what an editable element holds with `text`, as typing it
    /// would (the page sees input events).
    pub async fn replace_text(
        &self,
        tab: &str,
        node: i64,
        text: &str,
        slowly: bool,
    ) -> Result<(), Failure> {
        let editable = self
            .on_element(
                tab,
                node,
                "function() {
                  const tag = this.tagName;
                  const ok = this.isContentEditable || tag === 'TEXTAREA' ||
                    (tag === 'INPUT' && !['checkbox','radio','file','submit','button','image','reset','range','color'].includes(this.type));
                  if (!ok) return false;
                  this.focus();
                  if (this.select) this.select(); else { const r = document.createRange(); r.selectNodeContents(this); const s = getSelection(); s.removeAllRanges(); s.addRange(r); }
                  return true;
                }",
                json!([]),
            )
            .await?;
        if editable != json!(true) {
            return Err(Failure::new(
                500,
                "Element is not editable: this control does not support text input. Use select, fill with type checkbox, or click instead.",
            )
            .code("ACT_OPERATION_FAILED"));
        }
        if text.is_empty() {
            return self.press(tab, "Delete").await;
        }
        if slowly {
            for c in text.chars() {
                self.call(tab, "Input.insertText", json!({ "text": c.to_string() }))
                    .await?;
                tokio::time::sleep(Duration::from_millis(75)).await;
            }
            return Ok(());
        }
        self.call(tab, "Input.insertText", json!({ "text": text }))
            .await
            .map(drop)
    }

    /// Runs `function` with the element as `this` and `args`; its value.
    pub async fn on_element(
        &self,
        tab: &str,
        node: i64,
        function: &str,
        args: Value,
    ) -> Result<Value, Failure> {
        let resolved = self
            .call(tab, "DOM.resolveNode", json!({ "backendNodeId": node }))
            .await
            .map_err(|_| {
                Failure::new(500, "Element is gone from the page. Run a new snapshot to see current page elements.")
                    .code("ACT_OPERATION_FAILED")
            })?;
        let object = resolved["object"]["objectId"].clone();
        let arguments: Vec<Value> = args
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| json!({ "value": a }))
            .collect();
        let value = self
            .call(
                tab,
                "Runtime.callFunctionOn",
                json!({ "objectId": object, "functionDeclaration": function, "arguments": arguments, "returnByValue": true, "awaitPromise": true }),
            )
            .await?;
        if let Some(e) = value.get("exceptionDetails") {
            return Err(Failure::new(500, format!("Error: {}", exception_text(e))));
        }
        Ok(value["result"]["value"].clone())
    }

    /// `evaluate`: a function's source (called, with the element when a
    /// ref is given), an expression, or a statement body; its value.
    pub async fn evaluate(
        &self,
        tab: &str,
        source: &str,
        element: Option<i64>,
    ) -> Result<Option<Value>, Failure> {
        let bodies = [
            format!(
                "async function() {{ const __f = ({source}\n); return typeof __f === 'function' ? await __f(this === window ? undefined : this) : __f; }}"
            ),
            format!(
                "async function() {{ const el = this === window ? undefined : this; {source}\n}}"
            ),
        ];
        let mut last = String::new();
        for function in &bodies {
            let value = match element {
                Some(node) => {
                    let resolved = self.call(tab, "DOM.resolveNode", json!({ "backendNodeId": node })).await?;
                    self.call(
                        tab,
                        "Runtime.callFunctionOn",
                        json!({ "objectId": resolved["object"]["objectId"], "functionDeclaration": function, "returnByValue": true, "awaitPromise": true }),
                    )
                    .await?
                }
                None => {
                    self.call(
                        tab,
                        "Runtime.evaluate",
                        json!({ "expression": format!("({function}).call(window)"), "returnByValue": true, "awaitPromise": true,
                                "timeout": self.left().as_millis() as u64 }),
                    )
                    .await?
                }
            };
            match value.get("exceptionDetails") {
                Some(e) => {
                    last = exception_text(e);
                    // Not an expression: try it as a statement body.
                    if !last.contains("SyntaxError") {
                        break;
                    }
                }
                None => {
                    let result = &value["result"];
                    return Ok((result["type"] != "undefined").then(|| result["value"].clone()));
                }
            }
        }
        Err(Failure::new(
            500,
            format!("Error: Invalid evaluate function: {last}"),
        ))
    }

    pub async fn close_tab(&self, tab: &str) -> Result<(), Failure> {
        self.browser_call("Target.closeTarget", json!({ "targetId": tab }))
            .await?;
        Ok(())
    }
}

fn exception_text(details: &Value) -> String {
    details["exception"]["description"]
        .as_str()
        .or(details["text"].as_str())
        .unwrap_or("the page threw")
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// OpenClaw's words for a ref the tab's snapshots never gave (what its
/// `ai` snapshots' refs answer: Playwright finds no such element).
pub fn unknown_ref(reference: &str) -> Failure {
    Failure::new(
        500,
        format!(
            "Element \"{reference}\" not found or not visible. Run a new snapshot to see current page elements."
        ),
    )
    .code("ACT_OPERATION_FAILED")
}

/// OpenClaw's words for a tab reference that names nothing.
pub fn tab_not_found(name: Option<&str>) -> Failure {
    match name {
        None => Failure::new(404, "tab not found"),
        Some(n) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => Failure::new(
            404,
            format!(
                "tab not found: browser tab \"{n}\" not found. Numeric values are not tab targets; use a stable tab id like \"t1\", a label, or a raw targetId."
            ),
        ),
        Some(n) => Failure::new(
            404,
            format!(
                "tab not found: browser tab \"{n}\" not found. Use action=tabs and pass suggestedTargetId, tabId, label, or raw targetId."
            ),
        ),
    }
}

pub fn cdp_failure(e: CdpError) -> Failure {
    match e {
        CdpError::Closed => Failure::new(503, format!("Error: {e}; the next call starts it again")),
        CdpError::Timeout(_) => Failure::new(504, format!("TimeoutError: {e}")),
        CdpError::Protocol(m) => Failure::new(500, format!("Error: {m}")),
    }
}
