//! The route table behind `browser.proxy` (node-commands.md §1.2–1.3):
//! method and path in, OpenClaw's JSON out, its error bodies
//! (`{error, code?, reason?}` with an HTTP status) when a route fails.
//! Also how risky each call is, for the one policy.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

pub use super::page::Ctx;
use super::{Browser, PROFILE, act, files, guard, snapshot};
use crate::tools::ToolError;
use crate::tools::policy::Risk;

/// A route that failed: an HTTP status and OpenClaw's error body.
#[derive(Debug, Clone)]
pub struct Failure {
    pub status: u16,
    pub error: String,
    pub code: Option<&'static str>,
    pub reason: Option<&'static str>,
}

impl Failure {
    pub fn new(status: u16, error: impl Into<String>) -> Self {
        Self {
            status,
            error: error.into(),
            code: None,
            reason: None,
        }
    }
    pub fn code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }
    fn reason(mut self, reason: &'static str) -> Self {
        self.reason = Some(reason);
        self
    }
    fn body(&self) -> Value {
        let mut body = json!({ "error": self.error });
        if let Some(code) = self.code {
            body["code"] = json!(code);
        }
        if let Some(reason) = self.reason {
            body["reason"] = json!(reason);
        }
        body
    }
}

/// One call's parameters, as the gateway sends them.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Map<String, Value>,
    pub body: Value,
    pub timeout: Option<Duration>,
    pub envelope: bool,
    pub upload: Option<files::Upload>,
}

impl Request {
    /// Reads `browser.proxy` (`upload_command`: `.upload.v1`) params,
    /// with the node-side checks of §1.1 in their order.
    pub fn parse(params: &Value, upload_command: bool) -> Result<Self, ToolError> {
        let invalid = |m: &str| ToolError::new("INVALID_REQUEST", format!("INVALID_REQUEST: {m}"));
        let upload = params.get("upload").filter(|u| !u.is_null());
        if upload_command != upload.is_some() {
            return Err(invalid(if upload_command {
                "browser.proxy.upload.v1 requires upload"
            } else {
                "browser.proxy does not accept upload; use browser.proxy.upload.v1"
            }));
        }
        let raw_path = params["path"].as_str().map(str::trim).unwrap_or_default();
        if raw_path.is_empty() {
            return Err(invalid("path required"));
        }
        let method = params["method"]
            .as_str()
            .unwrap_or("GET")
            .trim()
            .to_ascii_uppercase();
        if !["GET", "POST", "DELETE"].contains(&method.as_str()) {
            return Err(invalid("method must be GET, POST, or DELETE"));
        }
        let path = format!("/{}", raw_path.trim_matches('/'));
        let mut query = Map::new();
        for (k, v) in params["query"].as_object().into_iter().flatten() {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Null => continue,
                other => other.to_string(),
            };
            query.insert(k.clone(), Value::String(text));
        }
        if let Some(profile) = params["profile"].as_str() {
            query.insert("profile".into(), json!(profile));
        }
        let upload = match upload {
            Some(u) => Some(
                serde_json::from_value::<files::Upload>(u.clone())
                    .map_err(|e| invalid(&format!("upload: {e}")))?,
            ),
            None => None,
        };
        let request = Self {
            method,
            path,
            query,
            body: params.get("body").cloned().unwrap_or(Value::Null),
            timeout: params["timeoutMs"]
                .as_u64()
                .filter(|t| *t > 0)
                .map(Duration::from_millis),
            envelope: params["errorEnvelope"] == "browser-v1",
            upload,
        };
        if request.upload.is_some() {
            if request.path != "/hooks/file-chooser" {
                return Err(invalid("upload is only for POST /hooks/file-chooser"));
            }
            if request.body.get("paths").is_some() {
                return Err(invalid("an upload's body must not carry paths"));
            }
        }
        let route = format!("{} {}", request.method, request.path);
        if matches!(
            route.as_str(),
            "POST /profiles/create" | "POST /profiles/import" | "POST /reset-profile"
        ) || (request.method == "DELETE" && request.path.starts_with("/profiles/"))
        {
            return Err(invalid(&format!(
                "{route} changes a persistent browser profile, which a node does not allow"
            )));
        }
        if matches!(
            route.as_str(),
            "GET /system-profiles"
                | "GET /system-profile-import/status"
                | "POST /system-profile-import/dismiss"
        ) {
            return Err(invalid(&format!(
                "{route} is host-local and not served by a node"
            )));
        }
        if let Some(profile) = request.query.get("profile").and_then(Value::as_str)
            && profile != PROFILE
        {
            return Err(invalid("browser profile not allowed"));
        }
        Ok(request)
    }

    fn q(&self, key: &str) -> Option<&str> {
        self.query.get(key).and_then(Value::as_str)
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.q(key), Some("true" | "1" | "yes"))
    }

    fn number(&self, key: &str) -> Option<u64> {
        self.q(key)
            .and_then(|v| v.trim().trim_start_matches('+').parse().ok())
    }

    /// `targetId` of the body, else of the query.
    fn target(&self) -> Option<&str> {
        self.body["targetId"]
            .as_str()
            .or_else(|| self.q("targetId"))
            .filter(|t| !t.trim().is_empty())
    }
}

/// How risky a call is, and what the policy prompt and log say of it.
/// Reading a page — status, tabs, snapshots, screenshots, text, logs,
/// opening and navigating — is safe; changing it as its user would
/// (clicks, typing, forms, files in and out, accepting dialogs, request
/// headers and credentials) and running script is risky.
pub fn classify(request: &Request) -> (Risk, String) {
    let route = format!("{} {}", request.method, request.path);
    let body = &request.body;
    let safe = |what: String| (Risk::Safe, what);
    let risky = |what: String| (Risk::Risky, what);
    if request.method == "GET" {
        return safe(format!("browser: {route}"));
    }
    match request.path.as_str() {
        "/act" => {
            let kind = body["kind"].as_str().unwrap_or("?");
            let target = body["ref"]
                .as_str()
                .map(|r| format!(" {r}"))
                .unwrap_or_default();
            let what = format!("browser: {kind}{target}");
            if act::is_reading(kind, body) {
                safe(what)
            } else {
                risky(what)
            }
        }
        "/hooks/dialog" if body["accept"] == true || body["accept"] == "true" => {
            risky("browser: accept a dialog".into())
        }
        "/hooks/file-chooser" => risky(format!(
            "browser: give the page {} file(s)",
            body["paths"].as_array().map_or(
                request.upload.as_ref().map_or(0, |u| u.files.len()),
                Vec::len
            )
        )),
        "/download" | "/wait/download" => risky(format!("browser: save a download ({route})")),
        "/set/headers" | "/set/credentials" | "/set/geolocation" | "/permissions/grant"
        | "/cookies/set" | "/cookies/set-many" | "/cookies/clear" | "/response/body" => {
            risky(format!("browser: {route}"))
        }
        p if p.starts_with("/storage/") => risky(format!("browser: {route}")),
        "/navigate" | "/tabs/open" => safe(format!(
            "browser: open {}",
            body["url"].as_str().unwrap_or("?")
        )),
        _ => safe(format!("browser: {route}")),
    }
}

/// Serves one route.
pub async fn serve(
    browser: &Browser,
    request: &Request,
    deadline: Instant,
) -> Result<Value, Failure> {
    let route = (request.method.as_str(), request.path.as_str());
    // Routes that never start the browser.
    match route {
        ("GET", "/") => return Ok(status(browser).await),
        ("GET", "/profiles") => return Ok(profiles(browser).await),
        ("POST", "/stop") => {
            let stopped = browser.stop().await;
            return Ok(json!({ "ok": true, "stopped": stopped, "profile": PROFILE }));
        }
        ("POST", "/screencast") => {
            return Err(Failure::new(501, "screencast is not supported over a node")
                .code("SCREENCAST_UNSUPPORTED"));
        }
        ("GET", "/tabs") if browser.if_running().await.is_none() => {
            return Ok(json!({ "running": false, "tabs": [] }));
        }
        _ => {}
    }
    let run = browser.running().await.map_err(|e| Failure::new(503, e))?;
    let ctx = Ctx {
        browser,
        run: &run,
        deadline,
    };
    match route {
        ("POST", "/start") => Ok(json!({ "ok": true, "profile": PROFILE })),
        ("GET", "/doctor") => doctor(&ctx, request).await,
        ("GET", "/tabs") => Ok(json!({ "running": true, "tabs": tabs(&ctx) })),
        ("POST", "/tabs/open") => open(&ctx, request).await,
        ("POST", "/tabs/focus") => {
            let name = request.body["targetId"]
                .as_str()
                .ok_or_else(|| Failure::new(400, "targetId is required"))?;
            let tab = ctx.resolve(Some(name))?;
            ctx.browser_call("Target.activateTarget", json!({ "targetId": tab }))
                .await?;
            ctx.set_current(&tab);
            Ok(json!({ "ok": true, "targetId": tab }))
        }
        ("POST", "/tabs/action") => tab_action(&ctx, request).await,
        ("DELETE", path) if path.starts_with("/tabs/") => {
            if request.q("targetIdMode").is_some_and(|m| m != "raw") {
                return Err(Failure::new(400, "targetIdMode must be \"raw\""));
            }
            let name = &path["/tabs/".len()..];
            let tab = ctx.resolve(Some(name))?;
            ctx.close_tab(&tab).await?;
            Ok(json!({ "ok": true, "targetId": tab }))
        }
        ("GET", "/snapshot") => take_snapshot(&ctx, request).await,
        ("POST", "/screenshot") => screenshot(&ctx, request).await,
        ("POST", "/navigate") => navigate(&ctx, request).await,
        ("POST", "/act") => act_route(&ctx, request).await,
        ("POST", "/pdf") => pdf(&ctx, request).await,
        ("GET", "/console") => logs(&ctx, request, "messages").await,
        ("GET", "/errors") => logs(&ctx, request, "errors").await,
        ("GET", "/requests") => logs(&ctx, request, "requests").await,
        ("GET", "/text") => text(&ctx, request).await,
        ("GET", "/dialogs") => {
            let tab = ctx.tab_or_new(request.target()).await?;
            let state = ctx
                .with_tab(&tab, |t| t.browser_state())
                .unwrap_or(Value::Null);
            Ok(json!({ "ok": true, "targetId": tab, "url": ctx.url(&tab), "browserState": state }))
        }
        ("POST", "/hooks/dialog") => dialog(&ctx, request).await,
        ("POST", "/hooks/file-chooser") => file_chooser(&ctx, request).await,
        ("POST", "/download") | ("POST", "/wait/download") => download(&ctx, request).await,
        ("POST", path) if path.starts_with("/set/") => emulate(&ctx, request, &path[5..]).await,
        _ => Err(Failure::new(404, "Not Found")),
    }
}

/// The payload of a call: `{result, files?, route}`, or the `browser-v1`
/// error envelope, or (without it) an error.
pub fn envelope(
    request: &Request,
    answer: Result<Value, Failure>,
    ours: &[std::path::PathBuf],
) -> Result<Value, ToolError> {
    let route = json!({ "status": "resolved", "profile": PROFILE, "driver": "openclaw" });
    let result = match answer {
        Ok(result) => result,
        Err(failure) if request.envelope => {
            return Ok(json!({
                "error": { "status": failure.status, "body": failure.body() },
                "route": route,
            }));
        }
        Err(failure) => {
            return Err(ToolError::new(
                "INVALID_REQUEST",
                format!("{}: {}", failure.status, failure.error),
            ));
        }
    };
    let files = files::envelope(&result, ours)
        .map_err(|e| ToolError::new("INVALID_REQUEST", format!("Error: {e}")))?;
    let mut payload = json!({ "result": result });
    if !files.is_empty() {
        payload["files"] = json!(files);
    }
    if request.envelope {
        payload["route"] = route;
    }
    let size = serde_json::to_vec(&payload).map_or(0, |v| v.len());
    if size > files::MAX_PAYLOAD {
        return Err(ToolError::new(
            "INVALID_REQUEST",
            "Error: browser proxy payload exceeds 24 MiB encoded limit",
        ));
    }
    Ok(payload)
}

async fn status(browser: &Browser) -> Value {
    let options = browser.options();
    let mut status = json!({
        "enabled": true,
        "profile": PROFILE,
        "driver": "openclaw",
        "transport": "cdp",
        "cdpPort": null,
        "cdpUrl": null,
        "chosenBrowser": null,
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
    let running = browser.if_running().await;
    let facts = match running {
        Some(run) => json!({
            "running": true,
            "cdpReady": true,
            "cdpHttp": false,
            "pageReady": true,
            "pid": *browser.lock_pid(),
            "chosenBrowser": browser_kind(&options.executable),
            "version": run.version,
            "lastExit": *browser.lock_exit(),
        }),
        None => super::idle_status(browser),
    };
    if let (Some(status), Some(facts)) = (status.as_object_mut(), facts.as_object()) {
        for (k, v) in facts {
            status.insert(k.clone(), v.clone());
        }
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

async fn profiles(browser: &Browser) -> Value {
    let running = browser.if_running().await;
    let tabs = running
        .as_ref()
        .map_or(0, |r| r.state.lock().map_or(0, |s| s.tabs.len()));
    json!({ "profiles": [{
        "name": PROFILE,
        "transport": "cdp",
        "cdpPort": null,
        "cdpUrl": null,
        "color": "#FF4500",
        "driver": "openclaw",
        "running": running.is_some(),
        "tabCount": tabs,
        "isDefault": true,
        "isRemote": false,
        "reconcileReason": null,
    }]})
}

async fn doctor(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let mut checks = vec![
        json!({ "id": "profile", "label": "Profile", "status": "pass", "summary": "openclaw via cdp" }),
        json!({ "id": "managed-executable", "label": "Browser executable", "status": "pass",
                "summary": ctx.browser.options().executable.display().to_string() }),
        json!({ "id": "cdp-pipe", "label": "DevTools", "status": "pass",
                "summary": format!("{} over a private pipe", ctx.run.version) }),
    ];
    if request.flag("deep") || request.flag("live") {
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
        json!({ "ok": ok, "profile": PROFILE, "transport": "cdp", "checks": checks, "status": status(ctx.browser).await }),
    )
}

fn tabs(ctx: &Ctx<'_>) -> Vec<Value> {
    let state = ctx.run.state.lock().unwrap_or_else(|e| e.into_inner());
    state
        .tabs
        .iter()
        .filter(|t| !internal(&t.url))
        .map(super::state::Tab::json)
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

/// A URL the agent asked for, checked before the browser is asked.
async fn preflight(ctx: &Ctx<'_>, url: &str) -> Result<(), Failure> {
    let blocked = |why: String| Failure::new(400, why).reason("navigation_blocked");
    let url = url.trim();
    if url.is_empty() {
        return Err(Failure::new(400, "url is required"));
    }
    if url == "about:blank" {
        return Ok(());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(blocked(format!("Invalid URL: {url}")));
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(blocked(format!(
            "Navigation blocked: unsupported protocol \"{scheme}:\""
        )));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(blocked(
            "Navigation blocked: URL-embedded credentials are not supported for page navigation."
                .into(),
        ));
    }
    match ctx.browser.options().reach.judge(url) {
        guard::Verdict::Allow => Ok(()),
        guard::Verdict::Block(why) => Err(blocked(format!(
            "browser navigation blocked by policy: {why}"
        ))),
        guard::Verdict::Resolve { host, port } => {
            let addresses: Vec<std::net::IpAddr> =
                tokio::time::timeout(ctx.left(), tokio::net::lookup_host((host.as_str(), port)))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .map(|a| a.map(|s| s.ip()).collect())
                    .unwrap_or_default();
            if addresses.is_empty() {
                return Err(blocked(format!(
                    "browser navigation blocked by policy: Unable to resolve hostname: {host}"
                )));
            }
            match ctx
                .browser
                .options()
                .reach
                .judge_resolved(&host, &addresses)
            {
                guard::Verdict::Block(why) => Err(blocked(format!(
                    "browser navigation blocked by policy: {why}"
                ))),
                _ => Ok(()),
            }
        }
    }
}

async fn open(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let url = request.body["url"].as_str().unwrap_or_default();
    preflight(ctx, url).await?;
    let label = request.body["label"].as_str();
    if let Some(label) = label
        && !valid_label(label)
    {
        return Err(Failure::new(
            500,
            "Error: tab label must be 1-64 chars and use only letters, numbers, _, ., :, or -",
        ));
    }
    let created = ctx
        .browser_call("Target.createTarget", json!({ "url": "about:blank" }))
        .await?;
    let tab = created["targetId"].as_str().unwrap_or_default().to_owned();
    ctx.run
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .add(&tab, "about:blank", "");
    if url != "about:blank" {
        go(ctx, &tab, url).await?;
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

fn valid_label(label: &str) -> bool {
    (1..=64).contains(&label.len())
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

async fn prune_tabs(ctx: &Ctx<'_>, keep: &str) {
    let excess: Vec<String> = {
        let state = ctx.run.state.lock().unwrap_or_else(|e| e.into_inner());
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
    // The load event, or the route's time (a page that never finishes
    // loading is still a page to read).
    let until = ctx.deadline.min(Instant::now() + ctx.left().mul_f32(0.8));
    loop {
        let event = tokio::time::timeout_at(until.into(), events.recv()).await;
        match event {
            Ok(Ok(e)) if e.method == "Page.loadEventFired" && e.session == session => break,
            Ok(Ok(e)) if e.method == "Page.javascriptDialogOpening" && e.session == session => {
                break;
            }
            Ok(Ok(_)) | Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {}
            _ => break,
        }
    }
    refresh(ctx, tab).await;
    Ok(())
}

/// The tab's title and URL as the browser has them now (its change
/// events may trail the load).
async fn refresh(ctx: &Ctx<'_>, tab: &str) {
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

async fn navigate(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let url = request.body["url"].as_str().unwrap_or_default();
    preflight(ctx, url).await?;
    let tab = ctx.tab_or_new(request.target()).await?;
    if let Some(blocked) = blocked_by_dialog(ctx, &tab) {
        return Ok(blocked);
    }
    go(ctx, &tab, url).await?;
    Ok(json!({ "ok": true, "targetId": tab, "url": ctx.url(&tab) }))
}

/// The answer of an action that cannot run: a dialog is open.
fn blocked_by_dialog(ctx: &Ctx<'_>, tab: &str) -> Option<Value> {
    let state = ctx.with_tab(tab, |t| {
        (!t.pending_dialogs.is_empty()).then(|| t.browser_state())
    })??;
    Some(
        json!({ "ok": true, "targetId": tab, "url": ctx.url(tab), "blockedByDialog": true, "browserState": state }),
    )
}

async fn act_route(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let body = &request.body;
    let tab = ctx.tab_or_new(request.target()).await?;
    act::check(body, &tab, ctx.browser.options().evaluate, 0)?;
    if let Some(blocked) = blocked_by_dialog(ctx, &tab) {
        return Ok(blocked);
    }
    // An action the page answers with a dialog does not finish until the
    // dialog is answered: the dialog ends the wait instead.
    let mut events = ctx.run.cdp.subscribe();
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
            // Let the state record it before it is reported.
            tokio::time::sleep(Duration::from_millis(20)).await;
            return Ok(blocked_by_dialog(ctx, &tab)
                .unwrap_or_else(|| json!({ "ok": true, "targetId": tab })));
        }
        Some(outcome) => outcome?,
    };
    let mut answer = json!({ "ok": true, "targetId": tab });
    if !closed {
        refresh(ctx, &tab).await;
        answer["url"] = json!(ctx.url(&tab));
    }
    for (k, v) in extra.as_object().into_iter().flatten() {
        answer[k] = v.clone();
    }
    Ok(answer)
}

async fn take_snapshot(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let tab = ctx.tab_or_new(request.q("targetId")).await?;
    let format = request.q("format").unwrap_or("ai");
    let efficient = request.q("mode") == Some("efficient");
    if efficient && format != "ai" {
        return Err(Failure::new(400, "labels/mode=efficient require format=ai"));
    }
    let url = ctx.url(&tab);
    if let Some(state) = ctx
        .with_tab(&tab, |t| {
            (!t.pending_dialogs.is_empty()).then(|| t.browser_state())
        })
        .flatten()
    {
        let mut blocked = json!({ "ok": true, "format": format, "targetId": tab, "url": url, "blockedByDialog": true, "browserState": state });
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
        None if efficient => 8_000,
        None => 40_000,
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
        .ok_or_else(|| super::page::tab_not_found(Some(&tab)))?;
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
async fn select(ctx: &Ctx<'_>, tab: &str, selector: &str) -> Result<i64, Failure> {
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

async fn screenshot(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
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
    if let Some(r) = body["ref"].as_str() {
        let node = ctx.node_of(&tab, r)?;
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

async fn pdf(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
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
    let path = super::new_file(&ctx.browser.media_dir(), extension, extension)
        .map_err(|e| Failure::new(500, e))?;
    crate::shared::paths::write_private(&path, &bytes)
        .map_err(|e| Failure::new(500, format!("Error: {e}")))?;
    Ok(path.display().to_string())
}

async fn logs(ctx: &Ctx<'_>, request: &Request, key: &str) -> Result<Value, Failure> {
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

async fn text(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
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
        act::js(selector)
    );
    let value = ctx
        .call(
            &tab,
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
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

async fn dialog(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let body = &request.body;
    let accept = match &body["accept"] {
        Value::Bool(b) => *b,
        Value::String(s) if s == "true" || s == "1" => true,
        Value::String(s) if s == "false" || s == "0" => false,
        _ => return Err(Failure::new(400, "accept is required")),
    };
    let tab = ctx.tab_or_new(request.target()).await?;
    let answer = super::state::DialogAnswer {
        accept,
        prompt_text: body["promptText"].as_str().map(str::to_owned),
        until: Instant::now() + request.timeout.unwrap_or(Duration::from_secs(120)),
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
            super::state::answer_dialog(&ctx.run.cdp, session.as_deref(), &answer);
            Ok(json!({ "ok": true }))
        }
        Some(Ok(false)) => Ok(json!({ "ok": true })),
        Some(Err(e)) => Err(Failure::new(500, e)),
        None => Err(super::page::tab_not_found(Some(&tab))),
    }
}

async fn file_chooser(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
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
            None => select(ctx, &tab, r).await?,
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
    let Some(r) = clicked else {
        // Armed for the next chooser the page opens.
        ctx.with_tab(&tab, |t| t.armed_files = Some(paths));
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
    let before = ctx.with_tab(&tab, |t| {
        t.armed_files = Some(paths);
        t.choosers
    });
    let (x, y) = ctx.centre(&tab, &node, Some(r)).await?;
    ctx.click(&tab, x, y, "left", 1, 0).await?;
    while ctx.with_tab(&tab, |t| t.choosers) == before {
        if ctx.left() < Duration::from_millis(100) {
            ctx.with_tab(&tab, |t| t.armed_files = None);
            return Err(Failure::new(
                500,
                format!(
                    "Timeout {}ms exceeded while completing file upload",
                    request
                        .timeout
                        .unwrap_or(super::DEFAULT_TIMEOUT)
                        .as_millis()
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(json!({ "ok": true }))
}

async fn download(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
    let body = &request.body;
    let tab = ctx.tab_or_new(request.target()).await?;
    let clicking = request.path == "/download";
    if clicking && body["ref"].as_str().is_none() {
        return Err(Failure::new(400, "ref is required"));
    }
    let name = body["path"].as_str().map(files::sanitise);
    let seen = ctx
        .run
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .downloads
        .len();
    if clicking {
        let node = ctx.node_of(&tab, body["ref"].as_str().unwrap_or_default())?;
        let (x, y) = ctx.centre(&tab, &node, body["ref"].as_str()).await?;
        ctx.click(&tab, x, y, "left", 1, 0).await?;
    }
    loop {
        let latest = {
            let state = ctx.run.state.lock().unwrap_or_else(|e| e.into_inner());
            state.downloads.get(seen).cloned()
        };
        if let Some(d) = latest {
            if d.bytes > files::MAX_FILE as u64 {
                ctx.browser_call("Browser.cancelDownload", json!({ "guid": d.guid }))
                    .await
                    .ok();
                return Err(Failure::new(
                    500,
                    "Error: the download is over the 10 MiB a file may carry; it was cancelled",
                ));
            }
            match d.state.as_str() {
                "completed" => {
                    let dir = ctx.browser.downloads_dir();
                    let file = format!(
                        "{}-{}",
                        uuid::Uuid::new_v4().simple(),
                        name.clone().unwrap_or_else(|| files::sanitise(
                            if d.suggested.is_empty() {
                                "download.bin"
                            } else {
                                &d.suggested
                            }
                        ))
                    );
                    let path = dir.join(file);
                    std::fs::rename(dir.join(&d.guid), &path).map_err(|e| {
                        Failure::new(500, format!("Error: the download is missing: {e}"))
                    })?;
                    return Ok(
                        json!({ "ok": true, "targetId": tab, "download": { "url": d.url, "suggestedFilename": d.suggested, "path": path } }),
                    );
                }
                "canceled" => return Err(Failure::new(500, "Error: the download was cancelled")),
                _ => {}
            }
        }
        if ctx.left() < Duration::from_millis(100) {
            return Err(Failure::new(500, "Timeout waiting for download"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn tab_action(ctx: &Ctx<'_>, request: &Request) -> Result<Value, Failure> {
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
        let state = ctx.run.state.lock().unwrap_or_else(|e| e.into_inner());
        state
            .tabs
            .get(i)
            .map(|t| t.target_id.clone())
            .ok_or_else(|| Failure::new(404, "tab not found"))
    };
    match body["action"].as_str().unwrap_or("") {
        "list" => Ok(json!({ "ok": true, "tabs": tabs(ctx) })),
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
                return Err(Failure::new(
                    500,
                    "Error: tab label must be 1-64 chars and use only letters, numbers, _, ., :, or -",
                ));
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

async fn emulate(ctx: &Ctx<'_>, request: &Request, setting: &str) -> Result<Value, Failure> {
    let body = &request.body;
    let tab = ctx.tab_or_new(request.target()).await?;
    match setting {
        "offline" => {
            let offline = body["offline"]
                .as_bool()
                .ok_or_else(|| Failure::new(400, "offline is required"))?;
            ctx.call(&tab, "Network.emulateNetworkConditions", json!({ "offline": offline, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1 })).await?;
        }
        "headers" => {
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
        "media" => {
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
        "timezone" => {
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
        "locale" => {
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
        "geolocation" => {
            if body["clear"] == true {
                ctx.call(&tab, "Emulation.clearGeolocationOverride", json!({}))
                    .await?;
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
            }
        }
        "device" => {
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
        _ => return Err(Failure::new(404, "Not Found")),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(params: Value) -> Result<Request, ToolError> {
        Request::parse(&params, false)
    }

    #[test]
    fn the_node_side_checks_come_in_openclaws_order() {
        let e = parse(json!({"method": "GET"})).unwrap_err();
        assert_eq!(e.message, "INVALID_REQUEST: path required");
        assert!(parse(json!({"method": "PUT", "path": "/"})).is_err());
        let e =
            parse(json!({"path": "/", "upload": {"envelope": "browser-upload-v1", "files": []}}))
                .unwrap_err();
        assert!(e.message.contains("does not accept upload"));
        let e = Request::parse(
            &json!({"path": "/hooks/file-chooser", "method": "POST"}),
            true,
        )
        .unwrap_err();
        assert!(e.message.contains("requires upload"));
        for (method, path) in [
            ("POST", "/profiles/create"),
            ("POST", "/reset-profile"),
            ("DELETE", "/profiles/work"),
            ("GET", "/system-profiles"),
        ] {
            assert!(
                parse(json!({"method": method, "path": path})).is_err(),
                "{method} {path}"
            );
        }
        assert!(
            parse(json!({"path": "/", "profile": "chrome"}))
                .unwrap_err()
                .message
                .contains("profile not allowed")
        );
        let r = parse(json!({"method": "get", "path": "tabs/", "query": {"limit": 5, "x": null}, "timeoutMs": 1500})).unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/tabs"));
        assert_eq!(r.query["limit"], "5");
        assert!(!r.query.contains_key("x"));
        assert_eq!(r.timeout, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn reading_is_safe_and_acting_is_risky() {
        let risk = |method: &str, path: &str, body: Value| {
            classify(&parse(json!({"method": method, "path": path, "body": body})).unwrap()).0
        };
        assert_eq!(risk("GET", "/snapshot", json!(null)), Risk::Safe);
        assert_eq!(
            risk("POST", "/navigate", json!({"url": "https://a"})),
            Risk::Safe
        );
        assert_eq!(risk("POST", "/screenshot", json!({})), Risk::Safe);
        assert_eq!(
            risk("POST", "/act", json!({"kind": "hover", "ref": "e1"})),
            Risk::Safe
        );
        assert_eq!(
            risk("POST", "/act", json!({"kind": "click", "ref": "e1"})),
            Risk::Risky
        );
        assert_eq!(
            risk("POST", "/act", json!({"kind": "evaluate", "fn": "1"})),
            Risk::Risky
        );
        assert_eq!(
            risk("POST", "/hooks/dialog", json!({"accept": false})),
            Risk::Safe
        );
        assert_eq!(
            risk("POST", "/hooks/dialog", json!({"accept": true})),
            Risk::Risky
        );
        assert_eq!(
            risk("POST", "/hooks/file-chooser", json!({"paths": ["a"]})),
            Risk::Risky
        );
        assert_eq!(risk("POST", "/download", json!({"ref": "e1"})), Risk::Risky);
        assert_eq!(risk("POST", "/set/headers", json!({})), Risk::Risky);
        assert_eq!(risk("POST", "/set/media", json!({})), Risk::Safe);
    }

    #[test]
    fn errors_travel_in_the_envelope_or_as_status_and_text() {
        let mut r = parse(json!({"path": "/act", "method": "POST", "errorEnvelope": "browser-v1"}))
            .unwrap();
        let failure = Failure::new(403, "no").code("ACT_EVALUATE_DISABLED");
        let payload = envelope(&r, Err(failure.clone()), &[]).unwrap();
        assert_eq!(payload["error"]["status"], 403);
        assert_eq!(
            payload["error"]["body"],
            json!({"error": "no", "code": "ACT_EVALUATE_DISABLED"})
        );
        assert_eq!(payload["route"]["status"], "resolved");
        r.envelope = false;
        let e = envelope(&r, Err(failure), &[]).unwrap_err();
        assert_eq!(e.message, "403: no");
        let ok = envelope(&r, Ok(json!({"ok": true})), &[]).unwrap();
        assert_eq!(ok, json!({"result": {"ok": true}}));
    }

    #[test]
    fn labels_are_openclaws() {
        assert!(valid_label("mail-1.x:y_z"));
        assert!(!valid_label(""));
        assert!(!valid_label("has space"));
        assert!(!valid_label(&"a".repeat(65)));
    }
}
