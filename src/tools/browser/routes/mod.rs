//! The route table behind `browser.proxy` (node-commands.md §1.2–1.3):
//! method and path read once into a [`Route`], how risky it is for the one
//! policy ([`classify`]), and its handler ([`serve`]) — OpenClaw's JSON
//! out, its error bodies (`{error, code?, reason?}` with an HTTP status)
//! when a route fails. The handlers: `status` (the browser's life), `tabs`
//! (tabs and where they go), `read` (what a page shows), `acts` (what is
//! done to it: actions, dialogs, files, downloads, emulation).

mod acts;
mod read;
mod status;
mod tabs;

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

pub use super::page::Ctx;
use super::{Browser, PROFILE, act, files};
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
    pub fn reason(mut self, reason: &'static str) -> Self {
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

/// What a method and path name. Read once, in [`Request::parse`]: the
/// policy classes and the handlers see the same route, and one nobody
/// knows starts no browser.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    Status,
    Doctor,
    Start,
    Stop,
    Profiles,
    Screencast,
    Tabs,
    TabsOpen,
    TabsFocus,
    TabsAction,
    TabClose(String),
    Navigate,
    Snapshot,
    Screenshot,
    Pdf,
    Console,
    Errors,
    Requests,
    Text,
    Dialogs,
    Act,
    Dialog,
    FileChooser,
    Download,
    WaitDownload,
    Set(Setting),
}

/// `POST /set/<setting>`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Setting {
    Offline,
    Headers,
    Media,
    Timezone,
    Locale,
    Geolocation,
    Device,
}

impl Route {
    fn parse(method: &str, path: &str) -> Option<Self> {
        use Route::*;
        Some(match (method, path) {
            ("GET", "/") => Status,
            ("GET", "/doctor") => Doctor,
            ("POST", "/start") => Start,
            ("POST", "/stop") => Stop,
            ("GET", "/profiles") => Profiles,
            ("POST", "/screencast") => Screencast,
            ("GET", "/tabs") => Tabs,
            ("POST", "/tabs/open") => TabsOpen,
            ("POST", "/tabs/focus") => TabsFocus,
            ("POST", "/tabs/action") => TabsAction,
            ("DELETE", p) if p.len() > "/tabs/".len() && p.starts_with("/tabs/") => {
                TabClose(p["/tabs/".len()..].to_owned())
            }
            ("POST", "/navigate") => Navigate,
            ("GET", "/snapshot") => Snapshot,
            ("POST", "/screenshot") => Screenshot,
            ("POST", "/pdf") => Pdf,
            ("GET", "/console") => Console,
            ("GET", "/errors") => Errors,
            ("GET", "/requests") => Requests,
            ("GET", "/text") => Text,
            ("GET", "/dialogs") => Dialogs,
            ("POST", "/act") => Act,
            ("POST", "/hooks/dialog") => Dialog,
            ("POST", "/hooks/file-chooser") => FileChooser,
            ("POST", "/download") => Download,
            ("POST", "/wait/download") => WaitDownload,
            ("POST", p) => Set(match p.strip_prefix("/set/")? {
                "offline" => Setting::Offline,
                "headers" => Setting::Headers,
                "media" => Setting::Media,
                "timezone" => Setting::Timezone,
                "locale" => Setting::Locale,
                "geolocation" => Setting::Geolocation,
                "device" => Setting::Device,
                _ => return None,
            }),
            _ => return None,
        })
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
    /// The route the method and path name; none: OpenClaw's 404.
    pub route: Option<Route>,
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
            query,
            body: params.get("body").cloned().unwrap_or(Value::Null),
            timeout: params["timeoutMs"]
                .as_u64()
                .filter(|t| *t > 0)
                .map(Duration::from_millis),
            envelope: params["errorEnvelope"] == "browser-v1",
            upload,
            route: Route::parse(&method, &path),
            method,
            path,
        };
        if request.upload.is_some() {
            if request.route != Some(Route::FileChooser) {
                return Err(invalid("upload is only for POST /hooks/file-chooser"));
            }
            if request.body.get("paths").is_some() {
                return Err(invalid("an upload's body must not carry paths"));
            }
            if !(request.body.is_object() || request.body.is_null()) {
                return Err(invalid("an upload's body must be an object"));
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

    pub fn q(&self, key: &str) -> Option<&str> {
        self.query.get(key).and_then(Value::as_str)
    }

    pub fn flag(&self, key: &str) -> bool {
        matches!(self.q(key), Some("true" | "1" | "yes"))
    }

    pub fn number(&self, key: &str) -> Option<u64> {
        self.q(key)
            .and_then(|v| v.trim().trim_start_matches('+').parse().ok())
    }

    /// `targetId` of the body, else of the query.
    pub fn target(&self) -> Option<&str> {
        self.body["targetId"]
            .as_str()
            .or_else(|| self.q("targetId"))
            .filter(|t| !t.trim().is_empty())
    }
}

/// `accept` of `/hooks/dialog` as the route reads it (a boolean, or
/// `"true"`/`"1"`/`"false"`/`"0"`): the one reading the policy and the
/// handler share.
pub fn accept_of(body: &Value) -> Option<bool> {
    match &body["accept"] {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s == "true" || s == "1" => Some(true),
        Value::String(s) if s == "false" || s == "0" => Some(false),
        _ => None,
    }
}

/// How risky a call is, and what the policy prompt and log say of it.
/// Reading a page — status, tabs, snapshots, screenshots, text, logs,
/// opening and navigating — is safe; changing it as its user would
/// (clicks, typing, forms, files in and out, accepting dialogs, request
/// headers, a made-up position) and running script is risky. Every route
/// is named here (no default), so a new one must be classed.
pub fn classify(request: &Request) -> (Risk, String) {
    let route = format!("{} {}", request.method, request.path);
    let body = &request.body;
    let safe = |what: String| (Risk::Safe, what);
    let risky = |what: String| (Risk::Risky, what);
    let Some(known) = &request.route else {
        return safe(format!("browser: {route} (no such route)"));
    };
    match known {
        Route::Status
        | Route::Doctor
        | Route::Start
        | Route::Stop
        | Route::Profiles
        | Route::Screencast
        | Route::Tabs
        | Route::TabsFocus
        | Route::TabsAction
        | Route::TabClose(_)
        | Route::Snapshot
        | Route::Screenshot
        | Route::Pdf
        | Route::Console
        | Route::Errors
        | Route::Requests
        | Route::Text
        | Route::Dialogs
        | Route::Set(
            Setting::Offline
            | Setting::Media
            | Setting::Timezone
            | Setting::Locale
            | Setting::Device,
        ) => safe(format!("browser: {route}")),
        Route::TabsOpen | Route::Navigate => safe(format!(
            "browser: open {}",
            body["url"].as_str().unwrap_or("?")
        )),
        Route::Act => {
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
        Route::Dialog if accept_of(body) == Some(true) => risky("browser: accept a dialog".into()),
        Route::Dialog => safe("browser: dismiss a dialog".into()),
        Route::FileChooser => risky(format!(
            "browser: give the page {} file(s)",
            body["paths"].as_array().map_or(
                request.upload.as_ref().map_or(0, |u| u.files.len()),
                Vec::len
            )
        )),
        Route::Download | Route::WaitDownload => {
            risky(format!("browser: save a download ({route})"))
        }
        Route::Set(Setting::Headers | Setting::Geolocation) => risky(format!("browser: {route}")),
    }
}

/// Serves one route.
pub async fn serve(
    browser: &Browser,
    request: &Request,
    deadline: Instant,
) -> Result<Value, Failure> {
    let Some(route) = &request.route else {
        return Err(Failure::new(404, "Not Found"));
    };
    // Routes that never start the browser (nor wait for one in use).
    match route {
        Route::Status => return Ok(status::status(browser)),
        Route::Profiles => return Ok(status::profiles(browser)),
        Route::Stop => {
            let stopped = browser.stop().await;
            return Ok(json!({ "ok": true, "stopped": stopped, "profile": PROFILE }));
        }
        Route::Screencast => {
            return Err(Failure::new(501, "screencast is not supported over a node")
                .code("SCREENCAST_UNSUPPORTED"));
        }
        Route::Tabs => {
            return Ok(match browser.live().0 {
                Some(live) => {
                    let state = live.state.lock().unwrap_or_else(|e| e.into_inner());
                    json!({ "running": true, "tabs": tabs::list(&state) })
                }
                None => json!({ "running": false, "tabs": [] }),
            });
        }
        Route::Doctor if !status::deep(request) => {
            return status::doctor(browser, None, request).await;
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
        Route::Status | Route::Profiles | Route::Stop | Route::Screencast | Route::Tabs => {
            unreachable!("served above")
        }
        Route::Start => Ok(json!({ "ok": true, "profile": PROFILE })),
        Route::Doctor => status::doctor(browser, Some(&ctx), request).await,
        Route::TabsOpen => tabs::open(&ctx, request).await,
        Route::TabsFocus => tabs::focus(&ctx, request).await,
        Route::TabsAction => tabs::action(&ctx, request).await,
        Route::TabClose(name) => tabs::close(&ctx, request, name).await,
        Route::Navigate => tabs::navigate(&ctx, request).await,
        Route::Snapshot => read::snapshot(&ctx, request).await,
        Route::Screenshot => read::screenshot(&ctx, request).await,
        Route::Pdf => read::pdf(&ctx, request).await,
        Route::Console => read::logs(&ctx, request, "messages").await,
        Route::Errors => read::logs(&ctx, request, "errors").await,
        Route::Requests => read::logs(&ctx, request, "requests").await,
        Route::Text => read::text(&ctx, request).await,
        Route::Dialogs => read::dialogs(&ctx, request).await,
        Route::Act => acts::act(&ctx, request).await,
        Route::Dialog => acts::dialog(&ctx, request).await,
        Route::FileChooser => acts::file_chooser(&ctx, request).await,
        Route::Download | Route::WaitDownload => acts::download(&ctx, request).await,
        Route::Set(setting) => acts::emulate(&ctx, request, *setting).await,
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
        // An upload with a body that is no object is refused, not staged.
        let upload = json!({"envelope": "browser-upload-v1", "files": [{"name": "a", "contentBase64": "eA=="}]});
        for body in [json!("x"), json!([1]), json!(5)] {
            let e = Request::parse(
                &json!({"method": "POST", "path": "/hooks/file-chooser", "body": body, "upload": upload}),
                true,
            )
            .unwrap_err();
            assert!(e.message.contains("must be an object"), "{body}");
        }
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
        // Every spelling of "accept" the dialog route takes is risky.
        for accept in [json!(true), json!("true"), json!("1")] {
            assert_eq!(
                risk("POST", "/hooks/dialog", json!({ "accept": accept })),
                Risk::Risky,
                "{accept}"
            );
        }
        // A route nobody knows runs nothing (404 before the browser).
        assert_eq!(risk("POST", "/ACT", json!({"kind": "click"})), Risk::Safe);
        assert_eq!(
            parse(json!({"method": "POST", "path": "/ACT"}))
                .unwrap()
                .route,
            None
        );
    }

    #[test]
    fn routes_are_read_once_from_method_and_path() {
        let route = |m: &str, p: &str| parse(json!({"method": m, "path": p})).unwrap().route;
        assert_eq!(route("POST", "//act/"), Some(Route::Act));
        assert_eq!(route("GET", "/act"), None);
        assert_eq!(route("POST", "/act?x=1"), None);
        assert_eq!(
            route("DELETE", "/tabs/t1"),
            Some(Route::TabClose("t1".into()))
        );
        assert_eq!(route("DELETE", "/tabs/"), None);
        assert_eq!(
            route("POST", "/set/timezone"),
            Some(Route::Set(Setting::Timezone))
        );
        assert_eq!(route("POST", "/set/cookies"), None);
        assert_eq!(route("POST", "/wait/download"), Some(Route::WaitDownload));
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
}
