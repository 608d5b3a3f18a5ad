//! What a page shows: snapshots, screenshots, PDFs, text, its console,
//! errors, requests and dialogs.

use serde_json::{Value, json};

use super::{Ctx, Failure, Request};
use crate::tools::browser::{files, snapshot};

pub async fn snapshot(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let tab = ctx.tab_or_new(request.q("targetId")).await?;
    let format = request.q("format").unwrap_or("ai");
    let efficient = request.q("mode") == Some("efficient");
    if efficient && format != "ai" {
        return Err(Failure::new(400, "labels/mode=efficient require format=ai"));
    }
    let url = ctx.url(&tab);
    // A page behind a dialog is not read (it would not answer).
    if let Some(mut blocked) = ctx.blocked_by_dialog(&tab) {
        blocked["format"] = json!(format);
        if format == "aria" {
            blocked["nodes"] = json!([]);
        } else {
            blocked["snapshot"] = json!("");
            blocked["refs"] = json!({});
        }
        return Ok(blocked);
    }
    let root = match request.q("selector").filter(|s| !s.trim().is_empty()) {
        Some(selector) => Some(select(ctx, &tab, selector).await?),
        None => None,
    };
    let tree = ctx
        .call(&tab, "Accessibility.getFullAXTree", json!({}))
        .await?;
    let nodes = tree["nodes"].as_array().cloned().unwrap_or_default();
    let max_chars = match request.number("maxChars") {
        Some(0) => usize::MAX,
        Some(n) => n as usize,
        None if efficient => snapshot::EFFICIENT_MAX_CHARS,
        None => snapshot::DEFAULT_MAX_CHARS,
    };
    let options = snapshot::Options {
        interactive: efficient || request.flag("interactive"),
        compact: efficient || request.flag("compact"),
        depth: request
            .number("depth")
            .map(|d| d as usize)
            .or(efficient.then_some(6)),
        limit: if format == "aria" {
            request
                .number("limit")
                .map_or(500, |l| (l as usize).clamp(1, 2000))
        } else {
            snapshot::MAX_LIMIT
        },
        max_chars,
        root,
    };
    let shot = ctx
        .with_tab(&tab, |t| snapshot::render(&nodes, &mut t.refs, &options))
        .ok_or_else(|| crate::tools::browser::page::tab_not_found(Some(&tab)))?;
    let mut answer = json!({ "ok": true, "format": format, "targetId": tab, "url": url });
    if format == "aria" {
        answer["nodes"] = json!(shot.nodes);
        if shot.truncated {
            answer["truncated"] = json!(true);
        }
        return Ok(answer);
    }
    let mut text = shot.text;
    if text.is_empty() {
        text = if options.interactive {
            "(no interactive elements)"
        } else {
            "(empty page)"
        }
        .to_owned();
    }
    if shot.truncated {
        text.push_str("\n[...TRUNCATED - page too large]");
        answer["truncated"] = json!(true);
    }
    answer["stats"] = json!({
        "lines": text.lines().count(),
        "chars": text.chars().count(),
        "refs": shot.refs.len(),
        "interactive": shot.interactive,
    });
    answer["snapshot"] = json!(text);
    answer["refs"] = Value::Object(shot.refs);
    Ok(answer)
}

/// The backend node of the first element matching a CSS selector.
pub async fn select(ctx: &Ctx<'_>, tab: &str, selector: &str) -> Result<i64, Failure> {
    let document = ctx
        .call(tab, "DOM.getDocument", json!({ "depth": 0 }))
        .await?;
    let found = ctx
        .call(
            tab,
            "DOM.querySelector",
            json!({ "nodeId": document["root"]["nodeId"], "selector": selector }),
        )
        .await
        .map_err(|e| Failure::new(400, format!("invalid selector {selector:?}: {}", e.error)))?;
    let node = found["nodeId"]
        .as_i64()
        .filter(|n| *n > 0)
        .ok_or_else(|| Failure::new(404, format!("selector {selector:?} matched no element")))?;
    let described = ctx
        .call(tab, "DOM.describeNode", json!({ "nodeId": node }))
        .await?;
    described["node"]["backendNodeId"]
        .as_i64()
        .ok_or_else(|| Failure::new(500, "Error: the browser did not describe the element"))
}

pub async fn screenshot(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let body = &request.body;
    let tab = ctx.tab_or_new(request.target()).await?;
    let full_page = body["fullPage"] == true;
    let element = body["ref"].as_str().or(body["element"].as_str());
    if full_page && element.is_some() {
        return Err(Failure::new(
            400,
            "fullPage is not supported for element screenshots",
        ));
    }
    let jpeg = body["type"] == "jpeg";
    let mut params = json!({ "format": if jpeg { "jpeg" } else { "png" } });
    if jpeg {
        params["quality"] = json!(85);
    }
    // An element (its ref, or a CSS selector) is shot alone.
    let node = match (body["ref"].as_str(), body["element"].as_str()) {
        (Some(r), _) => Some(ctx.node_of(&tab, r)?),
        (None, Some(selector)) => Some(select(ctx, &tab, selector).await?),
        (None, None) => None,
    };
    if let Some(node) = node {
        ctx.call(
            &tab,
            "DOM.scrollIntoViewIfNeeded",
            json!({ "backendNodeId": node }),
        )
        .await?;
        let model = ctx
            .call(&tab, "DOM.getBoxModel", json!({ "backendNodeId": node }))
            .await?;
        let border: Vec<f64> = model["model"]["border"]
            .as_array()
            .map(|q| q.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        if border.len() == 8 {
            let xs = [border[0], border[2], border[4], border[6]];
            let ys = [border[1], border[3], border[5], border[7]];
            let (x, y) = (
                xs.iter().cloned().fold(f64::MAX, f64::min),
                ys.iter().cloned().fold(f64::MAX, f64::min),
            );
            let (w, h) = (
                xs.iter().cloned().fold(f64::MIN, f64::max) - x,
                ys.iter().cloned().fold(f64::MIN, f64::max) - y,
            );
            let metrics = ctx.call(&tab, "Page.getLayoutMetrics", json!({})).await?;
            let viewport = &metrics["cssVisualViewport"];
            params["clip"] = json!({
                "x": x + viewport["pageX"].as_f64().unwrap_or(0.0),
                "y": y + viewport["pageY"].as_f64().unwrap_or(0.0),
                "width": w.max(1.0), "height": h.max(1.0), "scale": 1,
            });
            params["captureBeyondViewport"] = json!(true);
        }
    } else if full_page {
        let metrics = ctx.call(&tab, "Page.getLayoutMetrics", json!({})).await?;
        let size = &metrics["cssContentSize"];
        params["clip"] = json!({
            "x": 0, "y": 0,
            "width": size["width"].as_f64().unwrap_or(800.0).clamp(1.0, 8192.0),
            "height": size["height"].as_f64().unwrap_or(600.0).clamp(1.0, 16384.0),
            "scale": 1,
        });
        params["captureBeyondViewport"] = json!(true);
    }
    let shot = ctx.call(&tab, "Page.captureScreenshot", params).await?;
    let path = write_media(ctx, &shot["data"], if jpeg { "jpg" } else { "png" })?;
    Ok(json!({ "ok": true, "path": path, "targetId": tab, "url": ctx.url(&tab) }))
}

pub async fn pdf(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let tab = ctx.tab_or_new(request.target()).await?;
    let printed = ctx
        .call(&tab, "Page.printToPDF", json!({ "printBackground": true }))
        .await?;
    let path = write_media(ctx, &printed["data"], "pdf")?;
    Ok(json!({ "ok": true, "path": path, "targetId": tab, "url": ctx.url(&tab) }))
}

/// Writes base64 `data` from the browser as a new file in the media
/// directory; its path.
fn write_media(ctx: &Ctx<'_>, data: &Value, extension: &str) -> Result<String, Failure> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.as_str().unwrap_or_default())
        .map_err(|e| Failure::new(500, format!("Error: the browser sent no image: {e}")))?;
    if bytes.len() > files::MAX_FILE {
        return Err(Failure::new(
            500,
            format!(
                "Error: the capture is {:.1} MiB, over the 10 MiB a file may carry; try type jpeg or a smaller page",
                bytes.len() as f64 / (1 << 20) as f64
            ),
        ));
    }
    let path = crate::tools::browser::new_file(&ctx.browser.media_dir(), extension)
        .map_err(|e| Failure::new(500, e))?;
    crate::shared::paths::write_private(&path, &bytes)
        .map_err(|e| Failure::new(500, format!("Error: {e}")))?;
    Ok(path.display().to_string())
}

pub async fn logs(ctx: &Ctx<'_>, request: &Request, key: &str) -> Result<Value, Failure> {
    let tab = ctx.tab_or_new(request.q("targetId")).await?;
    let clear = request.flag("clear");
    let level = request.q("level").map(level_rank).unwrap_or(0);
    let filter = request.q("filter").map(str::to_owned);
    let entries = ctx
        .with_tab(&tab, |t| {
            let ring = match key {
                "messages" => &mut t.console,
                "errors" => &mut t.errors,
                _ => &mut t.requests,
            };
            let entries = ring.entries();
            if clear && key != "messages" {
                ring.clear();
            }
            entries
        })
        .unwrap_or_default();
    let entries: Vec<Value> = entries
        .into_iter()
        .filter(|e| key != "messages" || level_rank(e["type"].as_str().unwrap_or("log")) >= level)
        .filter(|e| {
            filter.as_deref().is_none_or(|f| {
                e["url"].as_str().is_some_and(|u| u.contains(f))
                    || e["resourceType"].as_str().is_some_and(|r| r.contains(f))
            })
        })
        .collect();
    Ok(json!({ "ok": true, "targetId": tab, "url": ctx.url(&tab), key: entries }))
}

fn level_rank(level: &str) -> u8 {
    match level {
        "debug" => 0,
        "warn" | "warning" => 2,
        "error" => 3,
        _ => 1,
    }
}

pub async fn text(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let tab = ctx.tab_or_new(request.q("targetId")).await?;
    let max = match request.q("maxChars") {
        None => 40_000,
        Some(_) => match request.number("maxChars") {
            Some(n) if n > 0 => (n as usize).min(40_000),
            _ => return Err(Failure::new(400, "maxChars must be a positive integer.")),
        },
    };
    let selector = request.q("selector").unwrap_or("");
    let expression = format!(
        "(() => {{ const s = {}; const e = (s && document.querySelector(s)) || document.querySelector('article') || document.querySelector('main') || document.body; return e ? e.innerText : ''; }})()",
        crate::tools::browser::act::js(selector)
    );
    let value = ctx
        .call(
            &tab,
            "Runtime.evaluate",
            // The page's own script cannot hold it past the call's time.
            json!({ "expression": expression, "returnByValue": true,
                    "timeout": ctx.left().as_millis() as u64 }),
        )
        .await?;
    let full = value["result"]["value"].as_str().unwrap_or_default();
    let (text, truncated) = match full.char_indices().nth(max) {
        Some((i, _)) => (&full[..i], true),
        None => (full, false),
    };
    Ok(
        json!({ "ok": true, "targetId": tab, "url": ctx.url(&tab), "text": text, "truncated": truncated }),
    )
}

/// `GET /dialogs`.
pub async fn dialogs(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let tab = ctx.tab_or_new(request.target()).await?;
    let state = ctx
        .with_tab(&tab, |t| t.browser_state())
        .unwrap_or(Value::Null);
    Ok(json!({ "ok": true, "targetId": tab, "url": ctx.url(&tab), "browserState": state }))
}
