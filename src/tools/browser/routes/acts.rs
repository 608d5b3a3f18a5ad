//! What is done to a page: `/act`, answering dialogs, files handed to a
//! chooser, downloads saved, and emulation settings.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{Ctx, Failure, Request, Route, Setting};
use crate::tools::browser::{act, files, state};

pub async fn act(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let tab = ctx.tab_or_new(request.target()).await?;
    // Every targetId as the raw id it names (`t1`, a label, a prefix), so
    // the check compares tabs, not spellings.
    let mut body = request.body.clone();
    raw_targets(ctx, &mut body, 0);
    let body = &body;
    act::check(body, &tab, ctx.browser.options().evaluate, 0)?;
    // An action the page answers with a dialog does not finish until the
    // dialog is answered: the dialog ends the wait instead (listened for
    // before the check for an open one, so none slips between the two).
    let mut events = ctx.run.cdp.subscribe();
    if let Some(blocked) = ctx.blocked_by_dialog(&tab) {
        return Ok(blocked);
    }
    let session = ctx.with_tab(&tab, |t| t.session.clone()).flatten();
    let dialog = async {
        loop {
            match events.recv().await {
                Ok(e) if e.method == "Page.javascriptDialogOpening" && e.session == session => {
                    return;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    std::future::pending::<()>().await
                }
                _ => {}
            }
        }
    };
    let outcome = tokio::select! {
        outcome = act::run(ctx, &tab, body) => Some(outcome),
        () = dialog => None,
    };
    let closed = body["kind"] == "close";
    let extra = match outcome {
        None => {
            // The hook recorded the dialog before it told anyone
            // (`cdp.rs`, `deliver`).
            return Ok(ctx
                .blocked_by_dialog(&tab)
                .unwrap_or_else(|| json!({ "ok": true, "targetId": tab })));
        }
        Some(outcome) => outcome?,
    };
    let mut answer = json!({ "ok": true, "targetId": tab });
    if !closed {
        super::tabs::refresh(ctx, &tab).await;
        answer["url"] = json!(ctx.url(&tab));
    }
    for (k, v) in extra.as_object().into_iter().flatten() {
        answer[k] = v.clone();
    }
    Ok(answer)
}

pub async fn dialog(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let body = &request.body;
    let accept = super::accept_of(body).ok_or_else(|| Failure::new(400, "accept is required"))?;
    let tab = ctx.tab_or_new(request.target()).await?;
    let answer = state::DialogAnswer {
        accept,
        prompt_text: body["promptText"].as_str().map(str::to_owned),
        // The body's timeoutMs (OpenClaw's arming window), else 120 s.
        until: Instant::now()
            + body["timeoutMs"]
                .as_u64()
                .map_or(Duration::from_secs(120), Duration::from_millis),
    };
    let id = body["dialogId"].as_str();
    let session = ctx.with_tab(&tab, |t| t.session.clone()).flatten();
    let outcome = ctx.with_tab(&tab, |t| -> Result<bool, String> {
        let index = match id {
            Some(id) => t
                .pending_dialogs
                .iter()
                .position(|d| d["id"] == id)
                .ok_or_else(|| format!("Error: Dialog \"{id}\" is not pending."))
                .map(Some),
            None if t.pending_dialogs.len() > 1 => {
                Err("Error: Multiple dialogs are pending; pass dialogId.".to_owned())
            }
            None => Ok(t.pending_dialogs.first().map(|_| 0)),
        }?;
        match index {
            Some(i) => {
                let d = t.pending_dialogs.remove(i);
                t.close_dialog(d, "agent");
                Ok(true)
            }
            None => {
                t.armed_dialog = Some(answer.clone());
                Ok(false)
            }
        }
    });
    match outcome {
        Some(Ok(true)) => {
            state::answer_dialog(&ctx.run.cdp, session.as_deref(), &answer);
            Ok(json!({ "ok": true }))
        }
        Some(Ok(false)) => Ok(json!({ "ok": true })),
        Some(Err(e)) => Err(Failure::new(500, e)),
        None => Err(crate::tools::browser::page::tab_not_found(Some(&tab))),
    }
}

pub async fn file_chooser(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let body = &request.body;
    let paths: Vec<String> = body["paths"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if paths.is_empty() {
        return Err(Failure::new(400, "paths are required"));
    }
    // Only files staged from the gateway are handed to a page: never a
    // path of this machine a model names.
    let uploads = ctx.browser.uploads_dir().join(".proxy-uploads");
    let mut files = Vec::new();
    for p in &paths {
        let path = std::path::Path::new(p);
        let real = std::fs::canonicalize(path).ok();
        let meta = std::fs::symlink_metadata(path).ok();
        let inside = real
            .as_ref()
            .is_some_and(|r| std::fs::canonicalize(&uploads).is_ok_and(|u| r.starts_with(u)));
        if !inside || !meta.is_some_and(|m| m.file_type().is_file()) {
            return Err(Failure::new(
                400,
                format!(
                    "Invalid path: must stay within uploads directory ({})",
                    uploads.display()
                ),
            ));
        }
        files.push(real.unwrap_or_default().display().to_string());
    }
    let tab = ctx.tab_or_new(request.target()).await?;
    let input = body["inputRef"].as_str().or(body["element"].as_str());
    let clicked = body["ref"].as_str();
    if input.is_some() && clicked.is_some() {
        return Err(Failure::new(
            400,
            "ref cannot be combined with inputRef/element",
        ));
    }
    if let Some(r) = input {
        let node = match body["inputRef"].as_str() {
            Some(r) => ctx.node_of(&tab, r)?,
            None => super::read::select(ctx, &tab, r).await?,
        };
        ctx.call(
            &tab,
            "DOM.setFileInputFiles",
            json!({ "files": files, "backendNodeId": node }),
        )
        .await?;
        return Ok(json!({ "ok": true }));
    }
    let paths: Vec<std::path::PathBuf> = files.iter().map(Into::into).collect();
    let arm = |paths: Vec<std::path::PathBuf>, within: Duration| {
        ctx.with_tab(&tab, |t| {
            t.armed_files = Some(state::ArmedFiles {
                paths,
                until: Instant::now() + within,
                document: t.refs.document,
            });
            t.choosers
        })
    };
    let Some(r) = clicked else {
        // Armed for the next chooser this page opens, for the call's
        // time (120 s unless it names one), as OpenClaw's waiter.
        arm(
            paths,
            body["timeoutMs"]
                .as_u64()
                .map_or(Duration::from_secs(120), Duration::from_millis),
        );
        return Ok(json!({ "ok": true }));
    };
    let node = ctx.node_of(&tab, r)?;
    // A file input named by its ref takes the files directly; anything
    // else is clicked and the chooser it opens gets them.
    let is_input = ctx
        .on_element(
            &tab,
            node,
            "function() { return this instanceof HTMLInputElement && this.type === 'file'; }",
            json!([]),
        )
        .await?;
    if is_input == json!(true) {
        ctx.call(
            &tab,
            "DOM.setFileInputFiles",
            json!({ "files": files, "backendNodeId": node }),
        )
        .await?;
        return Ok(json!({ "ok": true }));
    }
    let before = arm(paths, ctx.left());
    // However this ends (an error, the call dropped), nothing stays armed.
    struct Disarm<'a>(&'a Ctx<'a>, &'a str);
    impl Drop for Disarm<'_> {
        fn drop(&mut self) {
            self.0.with_tab(self.1, |t| t.armed_files = None);
        }
    }
    let _disarm = Disarm(ctx, &tab);
    let (x, y) = ctx.centre(&tab, &node, Some(r)).await?;
    ctx.click(&tab, x, y, "left", 1, 0).await?;
    while ctx.with_tab(&tab, |t| t.choosers) == before {
        if ctx.left() < Duration::from_millis(100) {
            return Err(Failure::new(
                500,
                format!(
                    "Timeout {}ms exceeded while completing file upload",
                    request
                        .timeout
                        .unwrap_or(crate::tools::browser::DEFAULT_TIMEOUT)
                        .as_millis()
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(json!({ "ok": true }))
}

pub async fn download(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let body = &request.body;
    if ctx.state().only_ours {
        // Its downloads are its user's: never redirected, cancelled or
        // handed to an agent.
        return Err(Failure::new(
            501,
            "downloads are not available on an attached browser (--browser-cdp-url): its downloads are its user's",
        ));
    }
    let tab = ctx.tab_or_new(request.target()).await?;
    let clicking = request.route == Some(Route::Download);
    if clicking && body["ref"].as_str().is_none() {
        return Err(Failure::new(400, "ref is required"));
    }
    let name = body["path"].as_str().map(files::sanitise);
    // Wanted while this route waits (however it ends): a download the
    // page starts then is kept, any other is cancelled.
    let _wanted = Wanted::new(ctx);
    let seen = ctx.state().downloads_begun;
    if clicking {
        let node = ctx.node_of(&tab, body["ref"].as_str().unwrap_or_default())?;
        let (x, y) = ctx.centre(&tab, &node, body["ref"].as_str()).await?;
        ctx.click(&tab, x, y, "left", 1, 0).await?;
    }
    loop {
        let next = ctx.state().downloads.iter().find(|d| d.seq > seen).cloned();
        match next {
            Some(d) if d.too_large => {
                return Err(Failure::new(
                    500,
                    "Error: the download is over the 10 MiB a file may carry; it was cancelled",
                ));
            }
            Some(d) if d.state == "completed" => {
                let dir = ctx.browser.downloads_dir();
                let suggested = if d.suggested.is_empty() {
                    "download.bin"
                } else {
                    &d.suggested
                };
                let file = format!(
                    "{}-{}",
                    uuid::Uuid::new_v4().simple(),
                    name.clone().unwrap_or_else(|| files::sanitise(suggested))
                );
                let path = dir.join(file);
                std::fs::rename(dir.join(&d.guid), &path).map_err(|e| {
                    Failure::new(500, format!("Error: the download is missing: {e}"))
                })?;
                return Ok(json!({
                    "ok": true,
                    "targetId": tab,
                    "download": { "url": d.url, "suggestedFilename": d.suggested, "path": path },
                }));
            }
            Some(d) if d.state == "canceled" => {
                return Err(Failure::new(500, "Error: the download was cancelled"));
            }
            Some(d) if ctx.left() < Duration::from_millis(100) => {
                // Out of time mid-download: nothing half-written stays.
                let _ = ctx
                    .browser_call("Browser.cancelDownload", json!({ "guid": d.guid }))
                    .await;
                return Err(Failure::new(500, "Timeout waiting for download"));
            }
            None if ctx.left() < Duration::from_millis(100) => {
                return Err(Failure::new(500, "Timeout waiting for download"));
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// A route waiting for a download, counted while it lives.
struct Wanted<'a>(&'a Ctx<'a>);

impl<'a> Wanted<'a> {
    fn new(ctx: &'a Ctx<'a>) -> Self {
        ctx.state().downloads_wanted += 1;
        Self(ctx)
    }
}

impl Drop for Wanted<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.downloads_wanted = state.downloads_wanted.saturating_sub(1);
    }
}

/// `scheme://host[:port]` of an http(s) URL.
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    Some(format!("{scheme}://{authority}"))
}

/// Replaces each `targetId` of an act body (and of its batch's actions,
/// as deep as a batch may nest) by the raw id it resolves to; one that
/// names no tab stays as written (and fails the check).
fn raw_targets(ctx: &Ctx<'_>, body: &mut Value, depth: usize) {
    if let Some(name) = body["targetId"].as_str()
        && let Ok(raw) = ctx.resolve(Some(name))
    {
        body["targetId"] = json!(raw);
    }
    if depth < 8
        && let Some(actions) = body.get_mut("actions").and_then(Value::as_array_mut)
    {
        for action in actions.iter_mut().filter(|a| a.is_object()) {
            raw_targets(ctx, action, depth + 1);
        }
    }
}

/// `POST /set/<setting>`: emulation on the tab.
pub async fn emulate(ctx: &Ctx<'_>, request: &Request, setting: Setting) -> Result<Value, Failure> {
    let body = &request.body;
    let tab = ctx.tab_or_new(request.target()).await?;
    match setting {
        Setting::Offline => {
            let offline = body["offline"]
                .as_bool()
                .ok_or_else(|| Failure::new(400, "offline is required"))?;
            ctx.call(&tab, "Network.emulateNetworkConditions", json!({ "offline": offline, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1 })).await?;
        }
        Setting::Headers => {
            let headers = body["headers"]
                .as_object()
                .ok_or_else(|| Failure::new(400, "headers is required"))?;
            let headers: Map<String, Value> = headers
                .iter()
                .filter(|(_, v)| v.is_string())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            ctx.call(
                &tab,
                "Network.setExtraHTTPHeaders",
                json!({ "headers": headers }),
            )
            .await?;
        }
        Setting::Media => {
            let scheme = body["colorScheme"].as_str().unwrap_or("");
            if !["dark", "light", "no-preference", "none"].contains(&scheme) {
                return Err(Failure::new(
                    400,
                    "colorScheme must be dark|light|no-preference|none",
                ));
            }
            let features = if scheme == "none" {
                json!([])
            } else {
                json!([{ "name": "prefers-color-scheme", "value": scheme }])
            };
            ctx.call(
                &tab,
                "Emulation.setEmulatedMedia",
                json!({ "features": features }),
            )
            .await?;
        }
        Setting::Timezone => {
            let id = body["timezoneId"]
                .as_str()
                .ok_or_else(|| Failure::new(400, "timezoneId is required"))?;
            ctx.call(
                &tab,
                "Emulation.setTimezoneOverride",
                json!({ "timezoneId": id }),
            )
            .await
            .map_err(|_| Failure::new(500, format!("Error: Invalid timezone ID: {id}")))?;
        }
        Setting::Locale => {
            let locale = body["locale"]
                .as_str()
                .ok_or_else(|| Failure::new(400, "locale is required"))?;
            ctx.call(
                &tab,
                "Emulation.setLocaleOverride",
                json!({ "locale": locale }),
            )
            .await?;
        }
        Setting::Geolocation => {
            // Permissions are the whole profile's: in an attached browser
            // (the user's) we neither grant nor reset them.
            let profile_ours = !ctx.state().only_ours;
            if body["clear"] == true {
                ctx.call(&tab, "Emulation.clearGeolocationOverride", json!({}))
                    .await?;
                if profile_ours {
                    ctx.browser_call("Browser.resetPermissions", json!({}))
                        .await?;
                }
            } else {
                let (Some(lat), Some(lon)) =
                    (body["latitude"].as_f64(), body["longitude"].as_f64())
                else {
                    return Err(Failure::new(
                        400,
                        "latitude and longitude are required (or set clear=true)",
                    ));
                };
                if !(-90.0..=90.0).contains(&lat) {
                    return Err(Failure::new(400, "latitude must be between -90 and 90."));
                }
                if !(-180.0..=180.0).contains(&lon) {
                    return Err(Failure::new(400, "longitude must be between -180 and 180."));
                }
                let accuracy = body["accuracy"].as_f64().unwrap_or(0.0);
                if accuracy < 0.0 {
                    return Err(Failure::new(400, "accuracy must be non-negative."));
                }
                ctx.call(
                    &tab,
                    "Emulation.setGeolocationOverride",
                    json!({ "latitude": lat, "longitude": lon, "accuracy": accuracy }),
                )
                .await?;
                // A position the page may not read is no position: the
                // origin (given, else the page's) is granted geolocation.
                let url = ctx.url(&tab);
                let origin = match body["origin"].as_str() {
                    Some(o) if o.starts_with("http://") || o.starts_with("https://") => {
                        o.to_owned()
                    }
                    Some(_) => return Err(Failure::new(400, "origin must be an http(s) origin")),
                    None => origin_of(&url).unwrap_or_default(),
                };
                if profile_ours && !origin.is_empty() {
                    ctx.browser_call(
                        "Browser.grantPermissions",
                        json!({ "permissions": ["geolocation"], "origin": origin }),
                    )
                    .await?;
                }
            }
        }
        Setting::Device => {
            let name = body["name"]
                .as_str()
                .ok_or_else(|| Failure::new(400, "name is required"))?;
            let (w, h, scale, mobile, agent) = device(name)
                .ok_or_else(|| Failure::new(500, format!("Error: Unknown device \"{name}\".")))?;
            ctx.call(
                &tab,
                "Emulation.setDeviceMetricsOverride",
                json!({ "width": w, "height": h, "deviceScaleFactor": scale, "mobile": mobile }),
            )
            .await?;
            ctx.call(
                &tab,
                "Emulation.setTouchEmulationEnabled",
                json!({ "enabled": mobile }),
            )
            .await?;
            ctx.call(
                &tab,
                "Network.setUserAgentOverride",
                json!({ "userAgent": agent }),
            )
            .await?;
        }
    }
    Ok(json!({ "ok": true, "targetId": tab }))
}

/// A few of Playwright's device descriptors: width, height, scale,
/// mobile, user agent.
fn device(name: &str) -> Option<(u32, u32, f64, bool, &'static str)> {
    const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 16_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.0 Mobile/15E148 Safari/604.1";
    const PIXEL: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36";
    const IPAD: &str = "Mozilla/5.0 (iPad; CPU OS 16_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.0 Mobile/15E148 Safari/604.1";
    const DESKTOP: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
    Some(match name {
        "iPhone 14" | "iPhone 13" | "iPhone 12" => (390, 844, 3.0, true, IPHONE),
        "iPhone 14 Pro Max" => (430, 932, 3.0, true, IPHONE),
        "iPhone SE" => (375, 667, 2.0, true, IPHONE),
        "Pixel 7" | "Pixel 5" => (412, 915, 2.625, true, PIXEL),
        "iPad Mini" => (768, 1024, 2.0, true, IPAD),
        "iPad Pro 11" => (834, 1194, 2.0, true, IPAD),
        "Desktop Chrome" => (1280, 720, 1.0, false, DESKTOP),
        _ => return None,
    })
}
