//! `POST /act`: what a model does to a page, on the elements its last
//! snapshot named (refs), with CDP's input events — a click is a real
//! mouse press at the element's centre, typing is real text input, so the
//! page sees what a person's actions make it see. Kinds, bodies and error
//! texts as OpenClaw's (`/work/notes` shapes §7): click, clickCoords,
//! type, press, hover, scrollIntoView, drag, select, fill, resize, wait,
//! evaluate (only when the owner allows it), close, batch.

use std::time::Duration;

use serde_json::{Value, json};

use super::routes::{Ctx, Failure};

/// Actions a batch holds at most, and how deep batches nest.
const MAX_BATCH: usize = 100;
const MAX_NESTING: usize = 5;

/// Every kind `/act` knows.
pub const KINDS: &[&str] = &[
    "batch",
    "click",
    "clickCoords",
    "type",
    "press",
    "hover",
    "scrollIntoView",
    "drag",
    "select",
    "fill",
    "resize",
    "wait",
    "evaluate",
    "close",
];

/// Kinds that only look or move the view: everything else changes the
/// page as its user would (submits, types, chooses) or runs script.
pub fn is_reading(kind: &str, body: &Value) -> bool {
    match kind {
        "hover" | "scrollIntoView" | "resize" | "close" => true,
        "wait" => body.get("fn").is_none(),
        "batch" => body["actions"].as_array().is_some_and(|actions| {
            actions
                .iter()
                .all(|a| is_reading(a["kind"].as_str().unwrap_or(""), a))
        }),
        _ => false,
    }
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure::new(400, message).code("ACT_INVALID_REQUEST")
}

fn failed(message: impl Into<String>) -> Failure {
    Failure::new(500, message).code("ACT_OPERATION_FAILED")
}

pub const EVALUATE_DISABLED: &str = "act:evaluate is disabled by config (browser.evaluateEnabled=false).\nDocs: /tools/browser/configuration#configuration";

/// Checks a body before anything runs (OpenClaw's order of checks).
pub fn check(body: &Value, tab: &str, evaluate: bool, depth: usize) -> Result<(), Failure> {
    let kind = body["kind"].as_str().unwrap_or("");
    if !KINDS.contains(&kind) {
        return Err(Failure::new(400, "kind is required").code("ACT_KIND_REQUIRED"));
    }
    if body.get("selector").is_some()
        && ![
            "click",
            "type",
            "hover",
            "scrollIntoView",
            "drag",
            "select",
            "wait",
            "batch",
        ]
        .contains(&kind)
    {
        return Err(Failure::new(
            400,
            "Error: 'selector' is not supported. Use 'ref' from snapshot instead.\n\nExample workflow:\n1. snapshot action to get page state with refs\n2. act with ref: \"e123\" to interact with element\n\nThis is more reliable for modern SPAs.",
        )
        .code("ACT_SELECTOR_UNSUPPORTED"));
    }
    if !evaluate && kind == "evaluate" {
        return Err(Failure::new(403, EVALUATE_DISABLED).code("ACT_EVALUATE_DISABLED"));
    }
    if !evaluate && kind == "wait" && body.get("fn").is_some() {
        return Err(Failure::new(
            403,
            "wait --fn is disabled by config (browser.evaluateEnabled=false).\nDocs: /tools/browser/configuration#configuration",
        )
        .code("ACT_EVALUATE_DISABLED"));
    }
    if let Some(target) = body["targetId"].as_str()
        && target != tab
    {
        let message = if depth > 0 {
            "batched action targetId must match request targetId"
        } else {
            "action targetId must match request targetId"
        };
        return Err(Failure::new(403, message).code("ACT_TARGET_ID_MISMATCH"));
    }
    if kind == "batch" {
        let Some(actions) = body["actions"].as_array().filter(|a| !a.is_empty()) else {
            return Err(invalid(if depth == 0 {
                "actions are required"
            } else {
                "batch requires actions"
            }));
        };
        if depth + 1 > MAX_NESTING {
            return Err(invalid("batch nesting exceeds maximum of depth 5"));
        }
        if count(body) > MAX_BATCH {
            return Err(invalid("batch exceeds maximum of 100 actions"));
        }
        for action in actions {
            if !action.is_object() {
                return Err(invalid("batch actions must be objects"));
            }
            check(action, tab, evaluate, depth + 1)?;
        }
    }
    Ok(())
}

fn count(body: &Value) -> usize {
    body["actions"]
        .as_array()
        .map(|a| a.iter().map(|x| 1 + count(x)).sum())
        .unwrap_or(0)
}

/// The ref a body names under `field`, without a leading `@` or `ref=`.
fn reference<'a>(body: &'a Value, field: &str) -> Option<&'a str> {
    let r = body[field].as_str()?.trim();
    let r = r.strip_prefix('@').unwrap_or(r);
    Some(r.strip_prefix("ref=").unwrap_or(r)).filter(|r| !r.is_empty())
}

/// Runs one action (a batch runs its actions in order); the extra fields
/// of its answer.
pub async fn run(ctx: &Ctx<'_>, tab: &str, body: &Value) -> Result<Value, Failure> {
    let kind = body["kind"].as_str().unwrap_or("");
    let node = |field: &str| -> Result<i64, Failure> {
        let Some(r) = reference(body, field) else {
            return Err(invalid(match (kind, field) {
                ("drag", "startRef") => "drag requires startRef or startSelector".to_owned(),
                ("drag", _) => "drag requires endRef or endSelector".to_owned(),
                _ => format!("{kind} requires ref or selector"),
            }));
        };
        ctx.node_of(tab, r)
    };
    match kind {
        "click" => {
            let button = body["button"].as_str().unwrap_or("left");
            if !["left", "right", "middle"].contains(&button) {
                return Err(invalid("click button must be left|right|middle"));
            }
            let modifiers = modifiers(&body["modifiers"])?;
            let delay = body["delayMs"].as_u64().unwrap_or(0);
            if delay > 5000 {
                return Err(invalid("click delayMs exceeds maximum of 5000ms"));
            }
            let (x, y) = ctx
                .centre(tab, &node("ref")?, reference(body, "ref"))
                .await?;
            if delay > 0 {
                ctx.mouse(tab, "mouseMoved", x, y, "none", 0, modifiers)
                    .await?;
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            let clicks = if body["doubleClick"] == true { 2 } else { 1 };
            ctx.click(tab, x, y, button, clicks, modifiers).await?;
        }
        "clickCoords" => {
            let (Some(x), Some(y)) = (body["x"].as_f64(), body["y"].as_f64()) else {
                return Err(invalid("x must be a finite number."));
            };
            if x < 0.0 || y < 0.0 {
                return Err(invalid("clickCoords requires non-negative x and y"));
            }
            let button = body["button"].as_str().unwrap_or("left");
            let clicks = if body["doubleClick"] == true { 2 } else { 1 };
            ctx.click(tab, x, y, button, clicks, 0).await?;
        }
        "type" => {
            let Some(text) = body["text"].as_str() else {
                return Err(invalid("type requires text"));
            };
            let n = node("ref")?;
            ctx.replace_text(tab, n, text, body["slowly"] == true)
                .await?;
            if body["submit"] == true {
                ctx.press(tab, "Enter").await?;
            }
        }
        "press" => {
            let Some(key) = body["key"].as_str().filter(|k| !k.is_empty()) else {
                return Err(invalid("press requires key"));
            };
            ctx.press(tab, key).await?;
        }
        "hover" => {
            let (x, y) = ctx
                .centre(tab, &node("ref")?, reference(body, "ref"))
                .await?;
            ctx.mouse(tab, "mouseMoved", x, y, "none", 0, 0).await?;
        }
        "scrollIntoView" => {
            let n = node("ref")?;
            ctx.call(
                tab,
                "DOM.scrollIntoViewIfNeeded",
                json!({ "backendNodeId": n }),
            )
            .await?;
        }
        "drag" => {
            let (from, to) = (node("startRef")?, node("endRef")?);
            let (x1, y1) = ctx.centre(tab, &from, reference(body, "startRef")).await?;
            let (x2, y2) = ctx.centre(tab, &to, reference(body, "endRef")).await?;
            ctx.mouse(tab, "mouseMoved", x1, y1, "none", 0, 0).await?;
            ctx.mouse(tab, "mousePressed", x1, y1, "left", 1, 0).await?;
            for step in 1..=8 {
                let f = f64::from(step) / 8.0;
                ctx.mouse(
                    tab,
                    "mouseMoved",
                    x1 + (x2 - x1) * f,
                    y1 + (y2 - y1) * f,
                    "left",
                    0,
                    0,
                )
                .await?;
            }
            ctx.mouse(tab, "mouseReleased", x2, y2, "left", 1, 0)
                .await?;
        }
        "select" => {
            let values: Vec<&str> = body["values"]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if values.is_empty() || reference(body, "ref").is_none() {
                return Err(invalid("select requires ref/selector and values"));
            }
            let n = node("ref")?;
            let chosen = ctx.on_element(tab, n, SELECT, json!([values])).await?;
            if chosen == json!(-1) {
                return Err(failed("Element is not a <select> element."));
            }
            if chosen == json!(0) {
                return Err(failed(format!(
                    "None of the values {values:?} matches an option of the <select>."
                )));
            }
        }
        "fill" => {
            let Some(fields) = body["fields"].as_array().filter(|f| !f.is_empty()) else {
                return Err(invalid("fill requires fields"));
            };
            for (i, field) in fields.iter().enumerate() {
                let Some(object) = field.as_object() else {
                    return Err(invalid(format!("fields[{i}] must be an object")));
                };
                if let Some(k) = object
                    .keys()
                    .find(|k| !["ref", "type", "value"].contains(&k.as_str()))
                {
                    return Err(invalid(format!(
                        "fields[{i}] unsupported field key \"{k}\"; supported keys are ref, type, value"
                    )));
                }
                let Some(r) = reference(field, "ref") else {
                    return Err(invalid(format!("fields[{i}] must include ref")));
                };
                let value = match &field["value"] {
                    Value::Null => String::new(),
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => {
                        return Err(invalid(format!(
                            "fields[{i}] value must be a string, number, boolean, or null"
                        )));
                    }
                };
                let n = ctx.node_of(tab, r)?;
                match field["type"].as_str().unwrap_or("text") {
                    "checkbox" | "radio" => {
                        let want = ["true", "1"].contains(&value.as_str());
                        let checked = ctx
                            .on_element(tab, n, "function() { return !!this.checked; }", json!([]))
                            .await?;
                        if checked != json!(want) {
                            let (x, y) = ctx.centre(tab, &n, Some(r)).await?;
                            ctx.click(tab, x, y, "left", 1, 0).await?;
                        }
                    }
                    _ => ctx.replace_text(tab, n, &value, false).await?,
                }
            }
        }
        "resize" => {
            let (w, h) = (body["width"].as_u64(), body["height"].as_u64());
            let (Some(w), Some(h)) = (w.filter(|w| *w > 0), h.filter(|h| *h > 0)) else {
                return Err(invalid("resize requires positive width and height"));
            };
            if w > 8192 || h > 8192 {
                return Err(invalid("resize width and height must not exceed 8192"));
            }
            ctx.call(
                tab,
                "Emulation.setDeviceMetricsOverride",
                json!({ "width": w, "height": h, "deviceScaleFactor": 0, "mobile": false }),
            )
            .await?;
        }
        "wait" => wait(ctx, tab, body).await?,
        "evaluate" => {
            let Some(source) = body["fn"].as_str().filter(|f| !f.trim().is_empty()) else {
                return Err(invalid("evaluate requires fn"));
            };
            let element = match reference(body, "ref") {
                Some(r) => Some(ctx.node_of(tab, r)?),
                None => None,
            };
            let value = ctx.evaluate(tab, source, element).await?;
            return Ok(match value {
                Some(v) => json!({ "result": v }),
                None => json!({}),
            });
        }
        "close" => {
            ctx.close_tab(tab).await?;
        }
        "batch" => return batch(ctx, tab, body).await,
        _ => return Err(Failure::new(400, "kind is required").code("ACT_KIND_REQUIRED")),
    }
    Ok(json!({}))
}

/// A batch: its actions in order, one result each; stops at the first
/// error unless `stopOnError` is false, and after a navigation or close.
async fn batch(ctx: &Ctx<'_>, tab: &str, body: &Value) -> Result<Value, Failure> {
    let actions = body["actions"].as_array().cloned().unwrap_or_default();
    let stop_on_error = body["stopOnError"] != false;
    let mut results = Vec::new();
    let start_document = ctx.document(tab);
    for (i, action) in actions.iter().enumerate() {
        let outcome = Box::pin(run(ctx, tab, action)).await;
        let failed = outcome.is_err();
        results.push(match outcome {
            Ok(_) => json!({ "ok": true }),
            Err(e) => json!({ "ok": false, "error": e.error }),
        });
        let closed = action["kind"] == "close";
        let navigated = !closed && ctx.document(tab) != start_document;
        let skipped = actions.len() - i - 1;
        if (navigated || closed) && skipped > 0 {
            if navigated && let Some(last) = results.last_mut() {
                last["navigated"] = json!(true);
                last["url"] = json!(ctx.url(tab));
            }
            return Ok(json!({
                "results": results,
                "aborted": {
                    "reason": if closed { "closed" } else { "navigation" },
                    "afterAction": i,
                    "url": ctx.url(tab),
                    "skipped": skipped,
                },
            }));
        }
        if failed && stop_on_error {
            break;
        }
    }
    Ok(json!({ "results": results }))
}

/// `wait`: its conditions in OpenClaw's order, each polled until true or
/// the call's time is up.
async fn wait(ctx: &Ctx<'_>, tab: &str, body: &Value) -> Result<(), Failure> {
    let keys = [
        "timeMs",
        "text",
        "textGone",
        "selector",
        "url",
        "loadState",
        "fn",
    ];
    if !keys
        .iter()
        .any(|k| body.get(*k).is_some_and(|v| !v.is_null()))
    {
        return Err(invalid(
            "wait requires at least one of: timeMs, text, textGone, selector, url, loadState, fn",
        ));
    }
    if let Some(ms) = body["timeMs"].as_u64() {
        if ms > 30_000 {
            return Err(invalid("wait timeMs exceeds maximum of 30000ms"));
        }
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let mut conditions: Vec<(String, String)> = Vec::new();
    if let Some(t) = body["text"].as_str() {
        conditions.push((
            format!(
                "document.body && document.body.innerText.includes({})",
                js(t)
            ),
            format!("text {t:?} to appear"),
        ));
    }
    if let Some(t) = body["textGone"].as_str() {
        conditions.push((
            format!(
                "!(document.body && document.body.innerText.includes({}))",
                js(t)
            ),
            format!("text {t:?} to disappear"),
        ));
    }
    if let Some(s) = body["selector"].as_str() {
        conditions.push((
            format!(
                "(() => {{ const e = document.querySelector({}); if (!e) return false; const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; }})()",
                js(s)
            ),
            format!("selector {s:?} to be visible"),
        ));
    }
    if let Some(u) = body["url"].as_str() {
        conditions.push((
            format!(
                "(() => {{ const g = {}; const re = new RegExp('^' + g.split('**').map(p => p.split('*').map(s => s.replace(/[.+?^${{}}()|[\\]\\\\]/g, '\\\\$&')).join('[^/]*')).join('.*') + '$'); return re.test(location.href) || location.href === g; }})()",
                js(u)
            ),
            format!("the URL to match {u:?}"),
        ));
    }
    if let Some(state) = body["loadState"].as_str() {
        let ready = match state {
            "domcontentloaded" => Some("document.readyState !== 'loading'"),
            "load" | "networkidle" => Some("document.readyState === 'complete'"),
            _ => None,
        };
        if let Some(ready) = ready {
            conditions.push((ready.to_owned(), format!("load state {state}")));
        }
    }
    if let Some(f) = body["fn"].as_str() {
        conditions.push((
            format!("(async () => {{ const f = ({f}); return !!(typeof f === 'function' ? await f() : f); }})()"),
            "fn to return true".to_owned(),
        ));
    }
    for (expression, what) in conditions {
        loop {
            let value = ctx
                .call(
                    tab,
                    "Runtime.evaluate",
                    json!({ "expression": expression, "returnByValue": true, "awaitPromise": true,
                            "timeout": ctx.left().as_millis() as u64 }),
                )
                .await?;
            if value["result"]["value"] == true {
                break;
            }
            if ctx.left() < Duration::from_millis(150) {
                return Err(Failure::new(
                    500,
                    format!("TimeoutError: waiting for {what} timed out"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// A string as a JavaScript literal.
pub fn js(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// CDP's modifier bits of `["Alt", "Control", "Meta", "Shift"]`.
fn modifiers(list: &Value) -> Result<u8, Failure> {
    let mut bits = 0;
    for m in list.as_array().into_iter().flatten() {
        bits |= match m.as_str().unwrap_or("") {
            "Alt" => 1,
            "Control" | "ControlOrMeta" => 2,
            "Meta" => 4,
            "Shift" => 8,
            _ => {
                return Err(invalid(
                    "modifiers must be Alt|Control|ControlOrMeta|Meta|Shift",
                ));
            }
        };
    }
    Ok(bits)
}

/// Picks the options of a `<select>` whose value or label is among the
/// given ones: -1 when it is no select, else how many were chosen.
const SELECT: &str = "function(values) {
  if (!(this instanceof HTMLSelectElement)) return -1;
  let n = 0;
  for (const o of this.options) {
    const on = values.includes(o.value) || values.includes(o.label) || values.includes(o.text);
    if (on && (this.multiple || n === 0)) { o.selected = true; n++; } else if (this.multiple) { o.selected = false; }
  }
  if (n) { this.dispatchEvent(new Event('input', {bubbles: true})); this.dispatchEvent(new Event('change', {bubbles: true})); }
  return n;
}";

/// A key as CDP's key events name it: (key, code, keyCode, text).
pub fn key(name: &str) -> Option<(String, String, u32, Option<String>)> {
    let named = |key: &str, code: &str, kc: u32, text: Option<&str>| {
        Some((key.to_owned(), code.to_owned(), kc, text.map(str::to_owned)))
    };
    match name {
        "Enter" | "Return" | "return" | "enter" => named("Enter", "Enter", 13, Some("\r")),
        "Tab" | "tab" => named("Tab", "Tab", 9, None),
        "Escape" | "Esc" | "esc" | "escape" => named("Escape", "Escape", 27, None),
        "Backspace" | "backspace" => named("Backspace", "Backspace", 8, None),
        "Delete" | "Del" | "del" | "delete" => named("Delete", "Delete", 46, None),
        "Space" | " " | "space" => named(" ", "Space", 32, Some(" ")),
        "ArrowUp" => named("ArrowUp", "ArrowUp", 38, None),
        "ArrowDown" => named("ArrowDown", "ArrowDown", 40, None),
        "ArrowLeft" => named("ArrowLeft", "ArrowLeft", 37, None),
        "ArrowRight" => named("ArrowRight", "ArrowRight", 39, None),
        "Home" => named("Home", "Home", 36, None),
        "End" => named("End", "End", 35, None),
        "PageUp" => named("PageUp", "PageUp", 33, None),
        "PageDown" => named("PageDown", "PageDown", 34, None),
        "Control" | "Ctrl" | "ctrl" => named("Control", "ControlLeft", 17, None),
        "Shift" => named("Shift", "ShiftLeft", 16, None),
        "Alt" => named("Alt", "AltLeft", 18, None),
        "Meta" | "Cmd" | "cmd" => named("Meta", "MetaLeft", 91, None),
        _ => {
            let mut chars = name.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else {
                if let Some(n) = name.strip_prefix('F').and_then(|n| n.parse::<u32>().ok())
                    && (1..=12).contains(&n)
                {
                    return named(name, name, 111 + n, None);
                }
                return None;
            };
            let upper = c.to_ascii_uppercase();
            let (code, kc) = if c.is_ascii_alphabetic() {
                (format!("Key{upper}"), upper as u32)
            } else if c.is_ascii_digit() {
                (format!("Digit{c}"), c as u32)
            } else {
                (String::new(), 0)
            };
            Some((c.to_string(), code, kc, Some(c.to_string())))
        }
    }
}

/// `Control+a` → the modifier bits and the key.
pub fn chord(text: &str) -> Result<(u8, String), Failure> {
    let parts: Vec<&str> = text.split('+').collect();
    let (last, mods) = match parts.split_last() {
        // "Control++" names the plus key.
        Some((last, mods)) if last.is_empty() && text.ends_with("++") => {
            ("+", &mods[..mods.len().saturating_sub(1)])
        }
        Some((last, mods)) => (*last, mods),
        None => return Err(invalid("press requires key")),
    };
    let mut bits = 0;
    for m in mods {
        bits |= match *m {
            "Alt" => 1,
            "Control" | "Ctrl" | "ctrl" | "ControlOrMeta" => 2,
            "Meta" | "Cmd" | "cmd" => 4,
            "Shift" => 8,
            other => {
                return Err(failed(format!(
                    "Unknown modifier \"{other}\" in \"{text}\""
                )));
            }
        };
    }
    let last = if text == " " { " " } else { last };
    Ok((bits, last.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_kinds_are_told_from_acting_ones() {
        assert!(is_reading("hover", &json!({})));
        assert!(is_reading("wait", &json!({"text": "x"})));
        assert!(!is_reading("wait", &json!({"fn": "() => true"})));
        assert!(!is_reading("click", &json!({})));
        assert!(!is_reading("type", &json!({})));
        assert!(!is_reading("evaluate", &json!({})));
        assert!(is_reading(
            "batch",
            &json!({"actions": [{"kind": "hover"}, {"kind": "wait", "timeMs": 1}]})
        ));
        assert!(!is_reading(
            "batch",
            &json!({"actions": [{"kind": "hover"}, {"kind": "click"}]})
        ));
        assert!(!is_reading(
            "batch",
            &json!({"actions": [{"kind": "batch", "actions": [{"kind": "fill"}]}]})
        ));
    }

    #[test]
    fn checks_come_in_openclaws_order_with_its_codes() {
        let code = |body: Value, evaluate: bool| check(&body, "T1", evaluate, 0).unwrap_err().code;
        assert_eq!(code(json!({}), true), Some("ACT_KIND_REQUIRED"));
        assert_eq!(
            code(json!({"kind": "dance"}), true),
            Some("ACT_KIND_REQUIRED")
        );
        assert_eq!(
            code(json!({"kind": "press", "selector": "#a"}), true),
            Some("ACT_SELECTOR_UNSUPPORTED")
        );
        assert_eq!(
            code(json!({"kind": "evaluate", "fn": "1"}), false),
            Some("ACT_EVALUATE_DISABLED")
        );
        assert_eq!(
            code(json!({"kind": "wait", "fn": "1"}), false),
            Some("ACT_EVALUATE_DISABLED")
        );
        assert_eq!(
            code(json!({"kind": "click", "targetId": "T2"}), true),
            Some("ACT_TARGET_ID_MISMATCH")
        );
        assert_eq!(
            code(json!({"kind": "batch", "actions": []}), true),
            Some("ACT_INVALID_REQUEST")
        );
        // An evaluate hidden in a batch is refused all the same.
        assert_eq!(
            code(
                json!({"kind": "batch", "actions": [{"kind": "evaluate", "fn": "1"}]}),
                false
            ),
            Some("ACT_EVALUATE_DISABLED")
        );
        let e = check(&json!({"kind": "evaluate"}), "T1", false, 0).unwrap_err();
        assert_eq!(e.status, 403);
        assert!(
            e.error.starts_with(
                "act:evaluate is disabled by config (browser.evaluateEnabled=false).\n"
            )
        );
    }

    #[test]
    fn batches_are_bounded_in_size_and_depth() {
        let many =
            json!({"kind": "batch", "actions": vec![json!({"kind": "hover", "ref": "e1"}); 101]});
        assert!(
            check(&many, "T", true, 0)
                .unwrap_err()
                .error
                .contains("100 actions")
        );
        let mut deep = json!({"kind": "hover", "ref": "e1"});
        for _ in 0..6 {
            deep = json!({"kind": "batch", "actions": [deep]});
        }
        assert!(
            check(&deep, "T", true, 0)
                .unwrap_err()
                .error
                .contains("depth 5")
        );
        let fine = json!({"kind": "batch", "actions": [{"kind": "batch", "actions": [{"kind": "hover", "ref": "e1"}]}]});
        assert!(check(&fine, "T", true, 0).is_ok());
    }

    #[test]
    fn keys_and_chords_are_named_as_cdp_wants() {
        assert_eq!(key("Enter").unwrap().2, 13);
        assert_eq!(
            key("a").unwrap(),
            ("a".into(), "KeyA".into(), 65, Some("a".into()))
        );
        assert_eq!(key("F5").unwrap().2, 116);
        assert!(key("NoSuchKey").is_none());
        assert_eq!(chord("Control+a").unwrap(), (2, "a".into()));
        assert_eq!(
            chord("Control+Shift+ArrowLeft").unwrap(),
            (10, "ArrowLeft".into())
        );
        assert_eq!(chord("Control++").unwrap(), (2, "+".into()));
        assert_eq!(chord(" ").unwrap(), (0, " ".into()));
        assert!(chord("Hyper+a").is_err());
        assert_eq!(modifiers(&json!(["Shift", "Alt"])).unwrap(), 9);
        assert!(modifiers(&json!(["Super"])).is_err());
    }

    #[test]
    fn refs_lose_their_decorations() {
        assert_eq!(reference(&json!({"ref": "@e5"}), "ref"), Some("e5"));
        assert_eq!(reference(&json!({"ref": "ref=f2e1"}), "ref"), Some("f2e1"));
        assert_eq!(reference(&json!({"ref": " "}), "ref"), None);
        assert_eq!(reference(&json!({"ref": 5}), "ref"), None);
    }
}
