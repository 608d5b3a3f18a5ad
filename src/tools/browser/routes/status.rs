//! The browser's life as the status routes report it: `GET /`,
//! `/profiles` (never waiting for a route in progress) and `/doctor`.

use serde_json::{Value, json};

use super::{Ctx, Failure, Request};
use crate::tools::browser::{Browser, PROFILE};

/// `GET /`: OpenClaw's status fields, from what the browser is now.
pub fn status(browser: &Browser) -> Value {
    let options = browser.options();
    let (live, last_exit) = browser.live();
    let running = live.is_some();
    let mut status = json!({
        "enabled": true,
        "profile": PROFILE,
        "driver": "openclaw",
        "transport": "cdp",
        "running": running,
        "cdpReady": running,
        "cdpHttp": false,
        "pageReady": running,
        "pid": live.as_ref().and_then(|l| l.pid),
        "version": live.as_ref().map(|l| l.version.clone()),
        "lastExit": last_exit,
        "cdpPort": null,
        "cdpUrl": null,
        "chosenBrowser": running.then(|| browser_kind(&options.executable)),
        "detectedBrowser": browser_kind(&options.executable),
        "detectedExecutablePath": options.executable,
        "detectError": null,
        "userDataDir": browser.user_data_dir(),
        "color": "#FF4500",
        "headless": options.headless,
        "headlessSource": "config",
        "noSandbox": options.no_sandbox,
        "executablePath": options.executable,
        "attachOnly": false,
        "graphics": null,
        "evaluateEnabled": options.evaluate,
        "privateNetwork": options.reach.private_network,
    });
    // A browser started elsewhere: its address (no secrets), nothing of
    // ours about its process or profile.
    if let Some(url) = &options.attach {
        for key in [
            "chosenBrowser",
            "detectedBrowser",
            "detectedExecutablePath",
            "userDataDir",
            "headless",
            "headlessSource",
            "noSandbox",
            "executablePath",
        ] {
            status[key] = Value::Null;
        }
        status["cdpUrl"] = json!(crate::tools::browser::shown_cdp_url(url));
        status["cdpHttp"] = json!(url.starts_with("http"));
        status["attachOnly"] = json!(true);
    }
    status
}

fn browser_kind(executable: &std::path::Path) -> &'static str {
    let name = executable
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.contains("chromium") {
        "chromium"
    } else if name.contains("chrome") {
        "chrome"
    } else if name.contains("edge") {
        "edge"
    } else if name.contains("brave") {
        "brave"
    } else {
        "custom"
    }
}

/// `GET /profiles`: the one profile a node serves.
pub fn profiles(browser: &Browser) -> Value {
    let (live, _) = browser.live();
    let tabs = live.as_ref().map_or(0, |l| {
        l.state.lock().unwrap_or_else(|e| e.into_inner()).tabs.len()
    });
    json!({ "profiles": [{
        "name": PROFILE,
        "transport": "cdp",
        "cdpPort": null,
        "cdpUrl": browser.options().attach.as_deref().map(crate::tools::browser::shown_cdp_url),
        "color": "#FF4500",
        "driver": "openclaw",
        "running": live.is_some(),
        "tabCount": tabs,
        "isDefault": true,
        "isRemote": browser
            .options()
            .attach
            .as_deref()
            .is_some_and(|u| !crate::tools::browser::is_loopback_cdp_url(u)),
        "reconcileReason": null,
    }]})
}

/// `GET /doctor`: what it can tell without a browser; with `deep` (or
/// `live`, which start one) a live accessibility snapshot too.
pub async fn doctor(
    browser: &Browser,
    live: Option<&Ctx<'_>>,
    request: &Request,
) -> Result<Value, Failure> {
    let version = browser.live().0.map(|l| l.version);
    let mut checks = vec![
        json!({ "id": "profile", "label": "Profile", "status": "pass", "summary": "openclaw via cdp" }),
        match &browser.options().attach {
            Some(url) => json!({ "id": "attach-only", "label": "Browser", "status": "pass",
                "summary": format!("attached to {} (not launched by this node)", crate::tools::browser::shown_cdp_url(url)) }),
            None => {
                json!({ "id": "managed-executable", "label": "Browser executable", "status": "pass",
                "summary": browser.options().executable.display().to_string() })
            }
        },
        match version {
            Some(v) if browser.options().attach.is_some() => {
                json!({ "id": "cdp-pipe", "label": "DevTools", "status": "pass",
                               "summary": format!("{v} over its DevTools WebSocket") })
            }
            Some(v) => json!({ "id": "cdp-pipe", "label": "DevTools", "status": "pass",
                               "summary": format!("{v} over a private pipe") }),
            None => json!({ "id": "cdp-pipe", "label": "DevTools", "status": "info",
                            "summary": "not running (the next call starts it)" }),
        },
    ];
    if let Some(ctx) = live.filter(|_| deep(request)) {
        let tab = ctx.tab_or_new(None).await?;
        let check = match ctx
            .call(&tab, "Accessibility.getFullAXTree", json!({ "depth": 25 }))
            .await
        {
            Ok(tree) => json!({ "id": "live-snapshot", "label": "Live snapshot", "status": "pass",
                "summary": format!("CDP accessibility snapshot returned {} nodes on {}",
                    tree["nodes"].as_array().map_or(0, Vec::len),
                    ctx.with_tab(&tab, |t| t.tab_id.clone()).unwrap_or_default()) }),
            Err(e) => {
                json!({ "id": "live-snapshot", "label": "Live snapshot", "status": "fail", "summary": e.error })
            }
        };
        checks.push(check);
    }
    let ok = !checks.iter().any(|c| c["status"] == "fail");
    Ok(
        json!({ "ok": ok, "profile": PROFILE, "transport": "cdp", "checks": checks, "status": status(browser) }),
    )
}

/// Whether `/doctor` asks for a live check (which starts the browser).
pub fn deep(request: &Request) -> bool {
    request.flag("deep") || request.flag("live")
}
