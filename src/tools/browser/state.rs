//! What the browser told us, kept as it arrives: the tabs (OpenClaw's
//! `t1`, `t2`… names beside the raw target ids), each tab's session, its
//! console, errors, requests and dialogs (bounded rings), the refs of its
//! last snapshot, and what is armed for its next dialog or file chooser.
//!
//! Updated by the event hook on the reader's task: it never waits, and
//! answers what must be answered at once (an armed dialog answer, a file
//! chooser's armed files or none, a download nobody asked for cancelled).
//! A dialog nobody armed stays pending: routes report it
//! (`blockedByDialog`) instead of waiting on the page behind it.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use super::cdp::{Cdp, Event};

/// Entries a tab's console, error and request logs keep.
pub const RING: usize = 500;
/// Characters kept of one console message or error (OpenClaw's cut).
const TEXT: usize = 2048;

/// A bounded log: the newest [`RING`] entries.
#[derive(Default)]
pub struct Ring(VecDeque<Value>);

impl Ring {
    pub fn push(&mut self, entry: Value) {
        if self.0.len() == RING {
            self.0.pop_front();
        }
        self.0.push_back(entry);
    }
    pub fn entries(&self) -> Vec<Value> {
        self.0.iter().cloned().collect()
    }
    pub fn clear(&mut self) {
        self.0.clear();
    }
    fn find_mut(&mut self, id: &str) -> Option<&mut Value> {
        self.0.iter_mut().rev().find(|e| e["id"] == id)
    }
}

/// Element refs of a tab's current document.
#[derive(Default)]
pub struct Refs {
    /// The document they belong to (a new one forgets them).
    pub document: u32,
    /// The page's number in the refs' prefix: the tab's first page after
    /// its blank start is `e…` (as OpenClaw's first page is), each later
    /// one `f<page>e…`.
    pub page: u32,
    /// The document's URL as its navigation committed (the tab's `url`
    /// also follows the browser's target updates, which can come first).
    pub url: String,
    /// ref → backend DOM node id.
    pub nodes: HashMap<String, i64>,
    /// backend DOM node id → ref, so a ref stays the same across
    /// snapshots of one document.
    pub by_node: HashMap<i64, String>,
    pub next: u32,
}

impl Refs {
    /// The ref of a node, made on first sight: `e1`, `e2`… on the first
    /// document of a tab, `f2e1`… on the next ones (OpenClaw's shape).
    pub fn of(&mut self, node: i64) -> String {
        if let Some(r) = self.by_node.get(&node) {
            return r.clone();
        }
        self.next += 1;
        let r = if self.page <= 1 {
            format!("e{}", self.next)
        } else {
            format!("f{}e{}", self.page, self.next)
        };
        self.nodes.insert(r.clone(), node);
        self.by_node.insert(node, r.clone());
        r
    }
}

/// Files for the next file chooser of one document, until when: files
/// approved for a page never go to the next page, nor hours later.
pub struct ArmedFiles {
    pub paths: Vec<PathBuf>,
    pub until: std::time::Instant,
    pub document: u32,
}

/// What the next dialog gets, until when.
#[derive(Clone)]
pub struct DialogAnswer {
    pub accept: bool,
    pub prompt_text: Option<String>,
    pub until: std::time::Instant,
}

/// Answers the open dialog of `session`.
pub fn answer_dialog(cdp: &Cdp, session: Option<&str>, answer: &DialogAnswer) {
    let mut params = json!({ "accept": answer.accept });
    if let Some(text) = &answer.prompt_text {
        params["promptText"] = json!(text);
    }
    cdp.send(session, "Page.handleJavaScriptDialog", params);
}

pub struct Tab {
    pub target_id: String,
    pub tab_id: String,
    pub label: Option<String>,
    pub title: String,
    pub url: String,
    pub session: Option<String>,
    /// Its session is guarded and its domains on (`prepare_target` done):
    /// only then may a route send it anything.
    pub ready: bool,
    pub refs: Refs,
    pub console: Ring,
    pub errors: Ring,
    pub requests: Ring,
    /// Dialogs open now (the page waits on them), oldest first.
    pub pending_dialogs: Vec<Value>,
    /// The last 20 closed.
    pub recent_dialogs: VecDeque<Value>,
    dialog_seq: u32,
    pub armed_dialog: Option<DialogAnswer>,
    pub armed_files: Option<ArmedFiles>,
    /// File choosers the page has opened (a count).
    pub choosers: u32,
}

impl Tab {
    fn new(target_id: String, tab_id: String) -> Self {
        Self {
            target_id,
            tab_id,
            label: None,
            title: String::new(),
            url: String::new(),
            session: None,
            ready: false,
            refs: Refs {
                document: 1,
                page: 1,
                ..Refs::default()
            },
            console: Ring::default(),
            errors: Ring::default(),
            requests: Ring::default(),
            pending_dialogs: Vec::new(),
            recent_dialogs: VecDeque::new(),
            dialog_seq: 0,
            armed_dialog: None,
            armed_files: None,
            choosers: 0,
        }
    }

    /// A dialog closed (by `"agent"`, `"armed"` or `"remote"`).
    pub fn close_dialog(&mut self, mut dialog: Value, by: &str) {
        dialog["closedAt"] = json!(iso_time(None));
        dialog["closedBy"] = json!(by);
        if self.recent_dialogs.len() == 20 {
            self.recent_dialogs.pop_front();
        }
        self.recent_dialogs.push_back(dialog);
    }

    /// `browserState` as OpenClaw's routes report it.
    pub fn browser_state(&self) -> Value {
        json!({ "dialogs": {
            "pending": self.pending_dialogs,
            "recent": self.recent_dialogs.iter().collect::<Vec<_>>(),
        }})
    }

    /// The tab as `GET /tabs` lists it.
    pub fn json(&self) -> Value {
        let mut tab = json!({
            "suggestedTargetId": self.tab_id,
            "tabId": self.tab_id,
            "targetId": self.target_id,
            "title": self.title,
            "url": self.url,
            "type": "page",
        });
        if let Some(label) = &self.label {
            tab["label"] = json!(label);
        }
        tab
    }
}

/// A download the browser reported.
#[derive(Clone, Debug)]
pub struct Download {
    /// Its place among the downloads this browser began (1, 2, …).
    pub seq: u64,
    pub guid: String,
    pub url: String,
    pub suggested: String,
    /// `inProgress`, `completed` or `canceled`.
    pub state: String,
    pub bytes: u64,
    /// Cancelled for going over the 10 MiB a file may carry.
    pub too_large: bool,
}

#[derive(Default)]
pub struct State {
    pub tabs: Vec<Tab>,
    next_tab: u32,
    /// The tab calls without a `targetId` mean.
    pub current: Option<String>,
    /// The last 64 downloads.
    pub downloads: VecDeque<Download>,
    /// Downloads begun so far.
    pub downloads_begun: u64,
    /// Routes waiting for a download now: with none, a download a page
    /// starts is cancelled at once (no page fills this disk unasked).
    pub downloads_wanted: u32,
    /// Where the browser writes downloads (under their guid), so what
    /// nobody may take is removed.
    pub downloads_dir: Option<PathBuf>,
    /// An attached browser (its user's): only the pages we open, and the
    /// popups they open, are tabs of ours; the user's own are neither
    /// listed nor touched.
    pub only_ours: bool,
    /// In an attached browser, the marked blank address
    /// (`about:blank#clawbot-<uuid>`) of the page a route is creating
    /// now: the page that appears with it is ours, and no other.
    pub creating: Option<String>,
    /// Marked addresses of pages whose creation was given up before the
    /// browser named them (the call timed out): closed when they appear.
    pub abandoned: VecDeque<String>,
}

impl State {
    pub fn tab(&self, target_id: &str) -> Option<&Tab> {
        self.tabs.iter().find(|t| t.target_id == target_id)
    }
    pub fn tab_mut(&mut self, target_id: &str) -> Option<&mut Tab> {
        self.tabs.iter_mut().find(|t| t.target_id == target_id)
    }
    fn by_session(&mut self, session: &str) -> Option<&mut Tab> {
        self.tabs
            .iter_mut()
            .find(|t| t.session.as_deref() == Some(session))
    }

    /// A page target seen for the first time gets the next `tN`.
    pub fn add(&mut self, target_id: &str, url: &str, title: &str) -> &mut Tab {
        if let Some(i) = self.tabs.iter().position(|t| t.target_id == target_id) {
            return &mut self.tabs[i];
        }
        self.next_tab += 1;
        let mut tab = Tab::new(target_id.to_owned(), format!("t{}", self.next_tab));
        tab.url = url.to_owned();
        tab.title = title.to_owned();
        self.tabs.push(tab);
        if self.current.is_none() {
            self.current = Some(target_id.to_owned());
        }
        self.tabs.last_mut().expect("just pushed")
    }

    /// The tab of a page target's info (made on first sight); none for
    /// targets that are not pages.
    fn seen(&mut self, info: &Value) -> Option<&mut Tab> {
        if info["type"] != "page" {
            return None;
        }
        let text = |k: &str| info[k].as_str().unwrap_or_default();
        if !self.ours(info) {
            return None;
        }
        Some(self.add(text("targetId"), text("url"), text("title")))
    }

    /// Whether a page target is ours to list and drive: always, in a
    /// browser we launched; in an attached one, a page we know, the one
    /// a route is creating (by its marked address), or a popup one of
    /// ours opened.
    pub fn ours(&self, info: &Value) -> bool {
        let text = |k: &str| info[k].as_str().unwrap_or_default();
        !self.only_ours
            || self.tab(text("targetId")).is_some()
            || self.tab(text("openerId")).is_some()
            || (!text("url").is_empty() && self.creating.as_deref() == Some(text("url")))
    }

    /// Removes what the browser wrote for a download (its guid is its
    /// file name until a route claims it).
    fn remove_download(&self, guid: &str) {
        if let Some(dir) = &self.downloads_dir
            && !guid.is_empty()
            && !guid.contains(['/', '\\'])
            && !guid.starts_with('.')
        {
            let _ = std::fs::remove_file(dir.join(guid));
        }
    }

    pub fn remove(&mut self, target_id: &str) {
        self.tabs.retain(|t| t.target_id != target_id);
        if self.current.as_deref() == Some(target_id) {
            self.current = self.tabs.last().map(|t| t.target_id.clone());
        }
    }

    /// A tab named as OpenClaw's routes accept it: `t1`, a label, a raw
    /// target id, or a unique prefix of one. None: the current tab.
    pub fn resolve(&self, name: Option<&str>) -> Result<String, String> {
        let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else {
            return self
                .current
                .clone()
                .or_else(|| self.tabs.last().map(|t| t.target_id.clone()))
                .ok_or_else(|| "no tab is open".to_owned());
        };
        if let Some(t) = self
            .tabs
            .iter()
            .find(|t| t.tab_id == name || t.target_id == name || t.label.as_deref() == Some(name))
        {
            return Ok(t.target_id.clone());
        }
        let upper = name.to_ascii_uppercase();
        let matches: Vec<&Tab> = self
            .tabs
            .iter()
            .filter(|t| t.target_id.starts_with(&upper))
            .collect();
        match matches.as_slice() {
            [one] => Ok(one.target_id.clone()),
            [] => Err(format!("tab not found: {name}")),
            _ => Err(format!("ambiguous target id prefix: {name}")),
        }
    }
}

/// Cuts `text` to [`TEXT`] characters.
fn cut(text: &str) -> String {
    match text.char_indices().nth(TEXT) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// The event hook's work: record, and answer what cannot wait.
pub fn observe(state: &std::sync::Mutex<State>, cdp: &Arc<Cdp>, event: &Event) {
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    let p = &event.params;
    let session = event.session.as_deref();
    match event.method.as_str() {
        "Target.targetCreated" | "Target.targetInfoChanged" => {
            let url = p["targetInfo"]["url"].as_str().unwrap_or_default();
            if let Some(i) = state.abandoned.iter().position(|a| a == url) {
                state.abandoned.remove(i);
                cdp.send(
                    None,
                    "Target.closeTarget",
                    json!({ "targetId": p["targetInfo"]["targetId"] }),
                );
                return;
            }
            if let Some(tab) = state.seen(&p["targetInfo"]) {
                tab.url = p["targetInfo"]["url"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                tab.title = p["targetInfo"]["title"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
            }
        }
        "Target.targetDestroyed" => {
            if let Some(id) = p["targetId"].as_str() {
                state.remove(id);
            }
        }
        "Target.attachedToTarget" => {
            // One session a tab: a second (a late hand attach racing the
            // automatic one) is let go, not swapped in half prepared.
            let new = p["sessionId"].as_str().map(str::to_owned);
            if let Some(tab) = state.seen(&p["targetInfo"]) {
                match &tab.session {
                    None => tab.session = new,
                    Some(kept) if Some(kept) != new.as_ref() => {
                        cdp.send(None, "Target.detachFromTarget", json!({ "sessionId": new }));
                    }
                    Some(_) => {}
                }
            }
        }
        "Page.frameNavigated" => {
            // The main frame's new document: its refs are gone.
            let frame = &p["frame"];
            if frame.get("parentId").is_none()
                && let Some(tab) = session.and_then(|s| state.by_session(s))
            {
                // A blank start whose refs nobody took does not count as
                // a page of its own.
                let blank = tab.refs.nodes.is_empty()
                    && (tab.refs.url.is_empty() || tab.refs.url.starts_with("about:blank"));
                tab.refs = Refs {
                    document: tab.refs.document + 1,
                    page: tab.refs.page + u32::from(!blank),
                    url: frame["url"].as_str().unwrap_or_default().to_owned(),
                    ..Refs::default()
                };
                tab.url = frame["url"].as_str().unwrap_or_default().to_owned();
            }
        }
        "Runtime.consoleAPICalled" => {
            if let Some(tab) = session.and_then(|s| state.by_session(s)) {
                let text = p["args"]
                    .as_array()
                    .map(|args| args.iter().map(remote_text).collect::<Vec<_>>().join(" "))
                    .unwrap_or_default();
                let frame = &p["stackTrace"]["callFrames"][0];
                let mut entry = json!({
                    "type": p["type"],
                    "text": cut(&text),
                    "timestamp": iso_time(p["timestamp"].as_f64()),
                });
                if frame.is_object() {
                    entry["location"] = json!({
                        "url": frame["url"],
                        "lineNumber": frame["lineNumber"],
                        "columnNumber": frame["columnNumber"],
                    });
                }
                tab.console.push(entry);
            }
        }
        "Runtime.exceptionThrown" => {
            if let Some(tab) = session.and_then(|s| state.by_session(s)) {
                let details = &p["exceptionDetails"];
                let exception = &details["exception"];
                let message = exception["description"]
                    .as_str()
                    .or(details["text"].as_str())
                    .unwrap_or("error");
                let first_line = message.lines().next().unwrap_or(message);
                let (name, text) = match first_line.split_once(": ") {
                    Some((name, text)) if !name.contains(' ') => (Some(name), text),
                    _ => (exception["className"].as_str(), first_line),
                };
                tab.errors.push(json!({
                    "message": cut(text),
                    "name": name,
                    "stack": cut(message),
                    "timestamp": iso_time(p["timestamp"].as_f64()),
                }));
            }
        }
        "Network.requestWillBeSent" => {
            if let Some(tab) = session.and_then(|s| state.by_session(s)) {
                let request = &p["request"];
                tab.requests.push(json!({
                    "id": p["requestId"],
                    "timestamp": iso_time(p["wallTime"].as_f64().map(|s| s * 1000.0)),
                    "method": request["method"],
                    "url": cut(request["url"].as_str().unwrap_or_default()),
                    "resourceType": p["type"].as_str().map(str::to_lowercase),
                }));
            }
        }
        "Network.responseReceived" => {
            if let Some(tab) = session.and_then(|s| state.by_session(s)) {
                let id = p["requestId"].as_str().unwrap_or_default().to_owned();
                if let Some(entry) = tab.requests.find_mut(&id) {
                    let status = p["response"]["status"].as_u64().unwrap_or(0);
                    entry["status"] = json!(status);
                    entry["ok"] = json!((200..400).contains(&status));
                }
            }
        }
        "Network.loadingFailed" => {
            if let Some(tab) = session.and_then(|s| state.by_session(s)) {
                let id = p["requestId"].as_str().unwrap_or_default().to_owned();
                if let Some(entry) = tab.requests.find_mut(&id) {
                    entry["failureText"] = p["errorText"].clone();
                    entry["ok"] = json!(false);
                }
            }
        }
        "Page.javascriptDialogOpening" => {
            if let Some(tab) = session.and_then(|s| state.by_session(s)) {
                tab.dialog_seq += 1;
                let mut dialog = json!({
                    "id": format!("d{}", tab.dialog_seq),
                    "type": p["type"],
                    "message": cut(p["message"].as_str().unwrap_or_default()),
                    "openedAt": iso_time(None),
                });
                if p["type"] == "prompt" {
                    dialog["defaultValue"] = p["defaultPrompt"].clone();
                }
                // Armed (and not expired): answered at once. Not: it stays
                // pending for the agent to see and answer (`/hooks/dialog`);
                // no action waits on a page behind it.
                match tab
                    .armed_dialog
                    .take()
                    .filter(|a| a.until > std::time::Instant::now())
                {
                    Some(answer) => {
                        answer_dialog(cdp, session, &answer);
                        tab.close_dialog(dialog, "armed");
                    }
                    None => tab.pending_dialogs.push(dialog),
                }
            }
        }
        "Page.javascriptDialogClosed" => {
            if let Some(tab) = session.and_then(|s| state.by_session(s))
                && !tab.pending_dialogs.is_empty()
            {
                let dialog = tab.pending_dialogs.remove(0);
                tab.close_dialog(dialog, "remote");
            }
        }
        "Page.fileChooserOpened" => {
            if let Some(tab) = session.and_then(|s| state.by_session(s)) {
                tab.choosers += 1;
                let document = tab.refs.document;
                let armed = tab
                    .armed_files
                    .take()
                    .filter(|a| a.document == document && a.until > std::time::Instant::now());
                if let (Some(armed), Some(node)) = (armed, p["backendNodeId"].as_i64()) {
                    let files: Vec<String> = armed
                        .paths
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect();
                    cdp.send(
                        session,
                        "DOM.setFileInputFiles",
                        json!({ "files": files, "backendNodeId": node }),
                    );
                }
            }
        }
        "Browser.downloadWillBegin" => {
            state.downloads_begun += 1;
            let seq = state.downloads_begun;
            let wanted = state.downloads_wanted > 0;
            let guid = p["guid"].as_str().unwrap_or_default().to_owned();
            if !wanted {
                cdp.send(None, "Browser.cancelDownload", json!({ "guid": guid }));
                state.remove_download(&guid);
            }
            state.downloads.push_back(Download {
                seq,
                guid,
                url: p["url"].as_str().unwrap_or_default().to_owned(),
                suggested: p["suggestedFilename"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                state: if wanted { "inProgress" } else { "canceled" }.into(),
                bytes: 0,
                too_large: false,
            });
            if state.downloads.len() > 64
                && let Some(forgotten) = state.downloads.pop_front()
            {
                if forgotten.state == "inProgress" {
                    cdp.send(
                        None,
                        "Browser.cancelDownload",
                        json!({ "guid": forgotten.guid }),
                    );
                }
                state.remove_download(&forgotten.guid);
            }
        }
        "Browser.downloadProgress" => {
            let guid = p["guid"].as_str().unwrap_or_default().to_owned();
            let mut gone = false;
            if let Some(d) = state.downloads.iter_mut().find(|d| d.guid == guid) {
                if d.state == "inProgress" {
                    d.state = p["state"].as_str().unwrap_or("inProgress").to_owned();
                    d.bytes = p["receivedBytes"].as_u64().unwrap_or(d.bytes);
                    // Over what a file may carry: stopped while it comes in
                    // (or, on a fast link, removed once it came whole).
                    if d.bytes > super::files::MAX_FILE as u64 {
                        if d.state == "inProgress" {
                            cdp.send(None, "Browser.cancelDownload", json!({ "guid": guid }));
                        }
                        d.state = "canceled".into();
                        d.too_large = true;
                    }
                }
                // Whatever the browser still writes of a cancelled one
                // (it may come after the cancel) goes as it is reported.
                gone = d.state == "canceled";
            }
            if gone {
                state.remove_download(&guid);
            }
        }
        _ => {}
    }
}

/// A console argument as text.
fn remote_text(arg: &Value) -> String {
    match arg.get("value") {
        Some(Value::String(s)) => s.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => arg["description"]
            .as_str()
            .or(arg["unserializableValue"].as_str())
            .unwrap_or(arg["type"].as_str().unwrap_or(""))
            .to_owned(),
    }
}

/// Milliseconds since the epoch as an ISO time (now when absent).
fn iso_time(ms: Option<f64>) -> String {
    crate::shared::clock::iso(ms.unwrap_or_else(|| crate::shared::clock::now_ms() as f64) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_times_are_utc() {
        assert_eq!(iso_time(Some(0.0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            iso_time(Some(1_795_651_200_123.0)),
            "2026-11-26T00:00:00.123Z"
        );
        assert_eq!(
            iso_time(Some(951_782_400_000.0)),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn tabs_resolve_by_name_label_id_and_unique_prefix() {
        let mut s = State::default();
        s.add("ABCDEF01", "about:blank", "");
        s.add("ABC99999", "about:blank", "").label = Some("mail".into());
        assert_eq!(s.resolve(Some("t1")).unwrap(), "ABCDEF01");
        assert_eq!(s.resolve(Some("mail")).unwrap(), "ABC99999");
        assert_eq!(s.resolve(Some("abcd")).unwrap(), "ABCDEF01");
        assert!(s.resolve(Some("ABC")).unwrap_err().contains("ambiguous"));
        assert!(s.resolve(Some("t9")).unwrap_err().contains("not found"));
        assert_eq!(s.resolve(None).unwrap(), "ABCDEF01");
        s.remove("ABCDEF01");
        assert_eq!(s.resolve(None).unwrap(), "ABC99999");
        // A new tab takes the next name, never a closed one's.
        assert_eq!(s.add("NEW", "", "").tab_id, "t3");
    }

    #[test]
    fn refs_are_stable_in_a_document_and_prefixed_after_it() {
        let mut r = Refs {
            document: 1,
            ..Refs::default()
        };
        assert_eq!(r.of(40), "e1");
        assert_eq!(r.of(41), "e2");
        assert_eq!(r.of(40), "e1");
        let mut next = Refs {
            document: 3,
            page: 2,
            ..Refs::default()
        };
        assert_eq!(next.of(40), "f2e1");
        assert_eq!(next.nodes["f2e1"], 40);
    }

    fn event(method: &str, params: Value) -> Event {
        Event {
            method: method.into(),
            params,
            session: None,
        }
    }

    #[tokio::test]
    async fn downloads_are_counted_kept_only_when_wanted_and_cut_when_too_large() {
        let (ours, _browser) = tokio::io::duplex(1 << 20);
        let (r, w) = tokio::io::split(ours);
        let cdp = Cdp::start(r, w, Box::new(|_, _| {}));
        let state = std::sync::Mutex::new(State::default());
        let begin = |guid: &str| {
            event(
                "Browser.downloadWillBegin",
                json!({ "guid": guid, "url": "http://x/", "suggestedFilename": "a" }),
            )
        };
        // Nobody waits: cancelled at once.
        observe(&state, &cdp, &begin("g0"));
        assert_eq!(state.lock().unwrap().downloads[0].state, "canceled");
        state.lock().unwrap().downloads_wanted = 1;
        for i in 1..=70 {
            observe(&state, &cdp, &begin(&format!("g{i}")));
        }
        {
            let s = state.lock().unwrap();
            assert_eq!(s.downloads.len(), 64);
            // The newest is still found past the kept window's size.
            assert_eq!(s.downloads.iter().find(|d| d.seq > 70).unwrap().guid, "g70");
            assert_eq!(s.downloads.back().unwrap().state, "inProgress");
        }
        let progress = |bytes: u64| {
            event(
                "Browser.downloadProgress",
                json!({ "guid": "g70", "state": "inProgress", "receivedBytes": bytes }),
            )
        };
        observe(&state, &cdp, &progress(1 << 20));
        assert_eq!(
            state.lock().unwrap().downloads.back().unwrap().state,
            "inProgress"
        );
        observe(&state, &cdp, &progress((10 << 20) + 1));
        let s = state.lock().unwrap();
        let last = s.downloads.back().unwrap();
        assert!(last.too_large && last.state == "canceled");
    }

    #[tokio::test]
    async fn a_tabs_blank_start_is_not_a_page_of_its_own() {
        let (ours, _browser) = tokio::io::duplex(1 << 20);
        let (r, w) = tokio::io::split(ours);
        let cdp = Cdp::start(r, w, Box::new(|_, _| {}));
        let state = std::sync::Mutex::new(State::default());
        state.lock().unwrap().add("T", "about:blank", "").session = Some("S".into());
        let navigated = |url: &str| Event {
            method: "Page.frameNavigated".into(),
            params: json!({ "frame": { "id": "T", "url": url } }),
            session: Some("S".into()),
        };
        let first_ref = |state: &std::sync::Mutex<State>| {
            let mut s = state.lock().unwrap();
            let tab = s.tab_mut("T").unwrap();
            (tab.refs.document, tab.refs.of(7))
        };
        observe(&state, &cdp, &navigated("about:blank"));
        // The browser's own word of the new URL may come before the
        // navigation's.
        let changed = Event {
            method: "Target.targetInfoChanged".into(),
            params: json!({ "targetInfo": { "targetId": "T", "type": "page", "url": "http://a/" } }),
            session: None,
        };
        observe(&state, &cdp, &changed);
        observe(&state, &cdp, &navigated("http://a/"));
        // Two new documents, but the first page a model sees is `e…`.
        assert_eq!(first_ref(&state), (3, "e1".into()));
        observe(&state, &cdp, &navigated("http://a/next"));
        assert_eq!(first_ref(&state), (4, "f2e1".into()));
        // A blank page whose refs were handed out counts.
        observe(&state, &cdp, &navigated("about:blank"));
        first_ref(&state);
        observe(&state, &cdp, &navigated("http://a/"));
        assert_eq!(first_ref(&state), (6, "f4e1".into()));
    }

    #[tokio::test]
    async fn armed_files_go_only_to_their_own_document_in_time() {
        let (ours, mut browser) = tokio::io::duplex(1 << 20);
        let (r, w) = tokio::io::split(ours);
        let cdp = Cdp::start(r, w, Box::new(|_, _| {}));
        let state = std::sync::Mutex::new(State::default());
        {
            let mut s = state.lock().unwrap();
            let tab = s.add("T", "http://a/", "");
            tab.session = Some("S".into());
            tab.refs.document = 2;
        }
        let chooser = Event {
            method: "Page.fileChooserOpened".into(),
            params: json!({ "backendNodeId": 7, "frameId": "T", "mode": "selectSingle" }),
            session: Some("S".into()),
        };
        let arm = |document: u32, within: u64| {
            state.lock().unwrap().tab_mut("T").unwrap().armed_files = Some(ArmedFiles {
                paths: vec!["/staged/a.txt".into()],
                until: std::time::Instant::now() + std::time::Duration::from_secs(within),
                document,
            });
        };
        // Armed for the page before this one: not handed over, and gone.
        arm(1, 60);
        observe(&state, &cdp, &chooser);
        assert_eq!(sent(&mut browser).await, "");
        assert!(
            state
                .lock()
                .unwrap()
                .tab("T")
                .unwrap()
                .armed_files
                .is_none()
        );
        // Armed, but its time is up: the same.
        arm(2, 0);
        observe(&state, &cdp, &chooser);
        assert_eq!(sent(&mut browser).await, "");
        // Armed for this page, in time: handed to the chooser.
        arm(2, 60);
        observe(&state, &cdp, &chooser);
        let message = sent(&mut browser).await;
        assert!(
            message.contains("DOM.setFileInputFiles") && message.contains("/staged/a.txt"),
            "{message}"
        );
    }

    #[test]
    fn rings_keep_the_newest() {
        let mut r = Ring::default();
        for i in 0..(RING + 5) {
            r.push(json!(i));
        }
        let e = r.entries();
        assert_eq!(e.len(), RING);
        assert_eq!(e[0], json!(5));
    }

    /// What the browser side of a test pipe got within 200 ms.
    async fn sent(browser: &mut tokio::io::DuplexStream) -> String {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; 4096];
        match tokio::time::timeout(
            std::time::Duration::from_millis(200),
            browser.read(&mut buf),
        )
        .await
        {
            Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            _ => String::new(),
        }
    }
}
