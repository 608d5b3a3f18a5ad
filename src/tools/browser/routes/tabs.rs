//! Tabs and where they go: list, open, focus, close, the tab actions,
//! navigation (checked first by the guard, then waited for).

use std::time::Instant;

use serde_json::{Value, json};

use super::{Ctx, Failure, Request};
use crate::tools::browser::{PROFILE, state};

pub fn list(state: &state::State) -> Vec<Value> {
    state
        .tabs
        .iter()
        .filter(|t| !internal(&t.url))
        .map(state::Tab::json)
        .collect()
}

/// Browser-internal pages, never listed.
fn internal(url: &str) -> bool {
    [
        "chrome://",
        "chrome-untrusted://",
        "devtools://",
        "edge://",
        "brave://",
    ]
    .iter()
    .any(|p| url.starts_with(p))
}

/// Tabs a managed profile keeps at most: the oldest beyond it are closed.
const MAX_TABS: usize = 8;

/// A URL the agent asked for, checked (the guard's one check) before the
/// browser is asked.
async fn preflight(ctx: &Ctx<'_>, url: &str) -> Result<(), Failure> {
    let url = url.trim();
    if url.is_empty() {
        return Err(Failure::new(400, "url is required"));
    }
    ctx.browser
        .options()
        .reach
        .navigable(url, ctx.left())
        .await
        .map_err(|why| Failure::new(400, why).reason("navigation_blocked"))
}

pub async fn open(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let url = request.body["url"].as_str().unwrap_or_default();
    preflight(ctx, url).await?;
    let label = request.body["label"].as_str();
    if let Some(label) = label
        && !valid_label(label)
    {
        return Err(Failure::new(500, BAD_LABEL));
    }
    let tab = ctx.new_tab().await?;
    if url != "about:blank"
        && let Err(e) = go(ctx, &tab, url).await
    {
        // A page that could not load is not left open (OpenClaw closes it).
        let _ = ctx.close_tab(&tab).await;
        return Err(e);
    }
    ctx.with_tab(&tab, |t| t.label = label.map(str::to_owned));
    ctx.set_current(&tab);
    prune_tabs(ctx, &tab).await;
    let mut json = ctx
        .with_tab(&tab, |t| t.json())
        .unwrap_or_else(|| json!({ "targetId": tab }));
    json["resolvedProfile"] = json!(PROFILE);
    Ok(json)
}

/// OpenClaw's words for a label [`valid_label`] refuses.
const BAD_LABEL: &str =
    "Error: tab label must be 1-64 chars and use only letters, numbers, _, ., :, or -";

fn valid_label(label: &str) -> bool {
    (1..=64).contains(&label.len())
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

async fn prune_tabs(ctx: &Ctx<'_>, keep: &str) {
    let excess: Vec<String> = {
        let state = ctx.state();
        let n = state.tabs.len().saturating_sub(MAX_TABS);
        state
            .tabs
            .iter()
            .filter(|t| t.target_id != keep)
            .take(n)
            .map(|t| t.target_id.clone())
            .collect()
    };
    for tab in excess {
        let _ = ctx.close_tab(&tab).await;
    }
}

/// Navigates a tab and waits for its load (bounded by the route's time):
/// a blocked navigation is OpenClaw's `navigation_blocked`.
async fn go(ctx: &Ctx<'_>, tab: &str, url: &str) -> Result<(), Failure> {
    let mut events = ctx.run.cdp.subscribe();
    let session = ctx.with_tab(tab, |t| t.session.clone()).flatten();
    let navigated = ctx
        .call(tab, "Page.navigate", json!({ "url": url }))
        .await?;
    if let Some(error) = navigated["errorText"].as_str() {
        if error.contains("ERR_BLOCKED_BY_CLIENT") {
            return Err(Failure::new(400, "browser navigation blocked by policy")
                .reason("navigation_blocked"));
        }
        return Err(Failure::new(
            500,
            format!("Error: navigation to {url} failed: {error}"),
        ));
    }
    if navigated.get("loaderId").is_none() {
        return Ok(()); // same-document (a #fragment): nothing loads
    }
    let session = match session {
        Some(s) => Some(s),
        None => ctx.with_tab(tab, |t| t.session.clone()).flatten(),
    };
    // The load of this navigation's document (its loader id: never an
    // earlier one's), a dialog, or the route's time (a page that never
    // finishes loading is still a page to read). Events lost to a slow
    // reader end the wait too: the page is read as it is.
    let loader = navigated["loaderId"].clone();
    let until = ctx.deadline.min(Instant::now() + ctx.left().mul_f32(0.8));
    loop {
        let event = tokio::time::timeout_at(until.into(), events.recv()).await;
        match event {
            Ok(Ok(e))
                if e.session == session
                    && e.method == "Page.lifecycleEvent"
                    && e.params["name"] == "load"
                    && e.params["loaderId"] == loader =>
            {
                break;
            }
            Ok(Ok(e)) if e.method == "Page.javascriptDialogOpening" && e.session == session => {
                break;
            }
            Ok(Ok(_)) => {}
            _ => break,
        }
    }
    refresh(ctx, tab).await;
    Ok(())
}

/// The tab's title and URL as the browser has them now (its change
/// events may trail the load).
pub async fn refresh(ctx: &Ctx<'_>, tab: &str) {
    if let Ok(info) = ctx
        .browser_call("Target.getTargetInfo", json!({ "targetId": tab }))
        .await
    {
        let info = &info["targetInfo"];
        ctx.with_tab(tab, |t| {
            t.title = info["title"].as_str().unwrap_or_default().to_owned();
            t.url = info["url"].as_str().unwrap_or_default().to_owned();
        });
    }
}

pub async fn navigate(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let url = request.body["url"].as_str().unwrap_or_default();
    preflight(ctx, url).await?;
    let tab = ctx.tab_or_new(request.target()).await?;
    if let Some(blocked) = ctx.blocked_by_dialog(&tab) {
        return Ok(blocked);
    }
    go(ctx, &tab, url).await?;
    Ok(json!({ "ok": true, "targetId": tab, "url": ctx.url(&tab) }))
}

/// `POST /tabs/focus {targetId}`.
pub async fn focus(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let name = request.body["targetId"]
        .as_str()
        .ok_or_else(|| Failure::new(400, "targetId is required"))?;
    let tab = ctx.resolve(Some(name))?;
    ctx.browser_call("Target.activateTarget", json!({ "targetId": tab }))
        .await?;
    ctx.set_current(&tab);
    Ok(json!({ "ok": true, "targetId": tab }))
}

/// `DELETE /tabs/:targetId`.
pub async fn close(ctx: &Ctx<'_>, request: &Request, name: &str) -> Result<Value, Failure> {
    if request.q("targetIdMode").is_some_and(|m| m != "raw") {
        return Err(Failure::new(400, "targetIdMode must be \"raw\""));
    }
    let tab = ctx.resolve(Some(name))?;
    ctx.close_tab(&tab).await?;
    Ok(json!({ "ok": true, "targetId": tab }))
}

pub async fn action(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let body = &request.body;
    let index = || -> Result<Option<usize>, Failure> {
        match &body["index"] {
            Value::Null => Ok(None),
            v => v
                .as_u64()
                .map(|i| Some(i as usize))
                .ok_or_else(|| Failure::new(400, "index must be a non-negative integer")),
        }
    };
    let nth = |i: usize| -> Result<String, Failure> {
        let state = ctx.state();
        state
            .tabs
            .get(i)
            .map(|t| t.target_id.clone())
            .ok_or_else(|| Failure::new(404, "tab not found"))
    };
    match body["action"].as_str().unwrap_or("") {
        "list" => Ok(json!({ "ok": true, "tabs": list(&ctx.state()) })),
        "new" => {
            let mut open_request = request.clone();
            open_request.body = json!({ "url": "about:blank", "label": body["label"] });
            let tab = open(ctx, &open_request).await?;
            Ok(json!({ "ok": true, "tab": tab }))
        }
        "label" => {
            let name = body["targetId"]
                .as_str()
                .ok_or_else(|| Failure::new(400, "targetId is required"))?;
            let label = body["label"]
                .as_str()
                .ok_or_else(|| Failure::new(400, "label is required"))?;
            if !valid_label(label) {
                return Err(Failure::new(500, BAD_LABEL));
            }
            let tab = ctx.resolve(Some(name))?;
            let json = ctx.with_tab(&tab, |t| {
                t.label = Some(label.to_owned());
                t.json()
            });
            Ok(json!({ "ok": true, "tab": json }))
        }
        "close" => {
            let tab = nth(index()?.unwrap_or(0))?;
            ctx.close_tab(&tab).await?;
            Ok(json!({ "ok": true, "targetId": tab }))
        }
        "select" => {
            let tab = nth(index()?.ok_or_else(|| Failure::new(400, "index is required"))?)?;
            ctx.browser_call("Target.activateTarget", json!({ "targetId": tab }))
                .await?;
            ctx.set_current(&tab);
            Ok(json!({ "ok": true, "targetId": tab }))
        }
        _ => Err(Failure::new(400, "unknown tab action")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_openclaws() {
        assert!(valid_label("mail-1.x:y_z"));
        assert!(!valid_label(""));
        assert!(!valid_label("has space"));
        assert!(!valid_label(&"a".repeat(65)));
    }
}
