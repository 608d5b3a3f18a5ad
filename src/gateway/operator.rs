//! The operator side of the gateway: connect as `openclaw agent` does on
//! the wire (client `cli`, role operator, scope `operator.write`, the shared
//! token) and run agent turns — send `agent`, follow the run's streamed
//! events, take the final answer, abort the run when we give up.
//!
//! Used by the router (`--via gateway`) and the node's doctor session; both
//! run one turn at a time on their connection, so the connection is read
//! directly here, not split.

use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::client::{self, ConnectError, Connection};
use super::frames::{
    Auth, ClientInfo, ConnectParams, ErrorShape, Event, Frame, MAX_PROTOCOL, MIN_PROTOCOL, Response,
};

/// What `openclaw agent` presents (shared/openclaw/README.md §2).
const CLIENT_ID: &str = "cli";
const SCOPE: &str = "operator.write";
const ADMIN_SCOPE: &str = "operator.admin";
/// How long an abort gets to be acknowledged before we close anyway.
const ABORT_WAIT: Duration = Duration::from_millis(1500);
/// The gateway's tick default; silence for twice the tick is a dead link.
const MIN_TICK: Duration = Duration::from_secs(1);

/// The scope an operator connection asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// What `openclaw agent` asks for: run turns, abort its own.
    Write,
    /// What `openclaw agent` falls back to for an abort: OpenClaw lets a
    /// device-less operator abort only runs its own connection started, so
    /// a connection that resumes a run after a drop needs it (granted to
    /// `cli` clients on loopback, like `Write`).
    Admin,
    /// Reading and renaming nodes (`node.list`, `node.rename`): what a node
    /// needs to make the gateway show the name it was given.
    Pairing,
}

/// How an operator connection proves itself.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    /// The gateway's shared token.
    pub token: Option<String>,
    /// Where this operator's device identity and tokens live. Used only
    /// away from loopback, where OpenClaw grants a device-less operator no
    /// scopes (on loopback we connect as `openclaw agent` does there:
    /// device-less, with the shared token).
    pub device_dir: Option<std::path::PathBuf>,
}

/// Opens an operator connection.
pub async fn connect(
    endpoint: &super::Endpoint,
    credentials: &Credentials,
    limit: Duration,
    scope: Scope,
) -> Result<Connection, ConnectError> {
    // Refusals that need no socket come first: no key is made for a URL
    // that could never be used.
    let target = super::transport::precheck(&endpoint.url, &endpoint.trust)?;
    // CLAWBOT_ROUTER_OPERATOR_DEVICE=always|never overrides the rule (a
    // gateway that treats loopback as remote, or one that wants no device).
    let wanted = match std::env::var("CLAWBOT_ROUTER_OPERATOR_DEVICE").as_deref() {
        Ok("always") => true,
        Ok("never") => false,
        _ => !super::transport::is_loopback(&target.host),
    };
    let device = match (&credentials.device_dir, wanted) {
        (Some(dir), true) => Some(Device::load(dir).map_err(ConnectError::Refused)?),
        _ => None,
    };
    // A device asks for what it was approved for; an upgrade (admin on a
    // reconnect) would mean another approval, so remote connections stay
    // with write.
    let scopes: Vec<String> = match (scope, device.is_some()) {
        (Scope::Write, _) | (Scope::Admin, true) => vec![SCOPE.into()],
        (Scope::Admin, false) => vec![ADMIN_SCOPE.into()],
        (Scope::Pairing, _) => vec!["operator.read".into(), "operator.pairing".into()],
    };
    // The shared token when we have one; else the device token this device
    // was issued by that gateway (as `auth.deviceToken`, as OpenClaw's CLI
    // sends it). A device token the gateway no longer takes is forgotten
    // and the connect tried once more without it (a fresh pairing request).
    let mut saved = match (&credentials.token, &device) {
        (None, Some(d)) => d.tokens.get(&endpoint.url),
        _ => None,
    };
    loop {
        let attempt = open_operator(
            endpoint,
            credentials.token.as_deref(),
            saved.as_deref(),
            device.as_ref(),
            &scopes,
            limit,
        )
        .await;
        match attempt {
            Err(ConnectError::Rejected(error))
                if saved.is_some()
                    && matches!(
                        error.detail_code(),
                        "AUTH_TOKEN_MISMATCH"
                            | "AUTH_DEVICE_TOKEN_MISMATCH"
                            | "DEVICE_TOKEN_REVOKED"
                    ) =>
            {
                if let Some(device) = &device {
                    let _ = device.tokens.set(&endpoint.url, None);
                }
                saved = None;
            }
            Ok(conn) => {
                if let (Some(device), Some(issued)) = (&device, conn.device_token()) {
                    // Best effort: without it the next call presents the shared token.
                    let _ = device.tokens.set(&endpoint.url, Some(issued));
                }
                return Ok(conn);
            }
            Err(e) => return Err(e),
        }
    }
}

async fn open_operator(
    endpoint: &super::Endpoint,
    shared: Option<&str>,
    device_token: Option<&str>,
    device: Option<&Device>,
    scopes: &[String],
    limit: Duration,
) -> Result<Connection, ConnectError> {
    let client = ClientInfo {
        id: CLIENT_ID.into(),
        display_name: String::new(),
        version: env!("CARGO_PKG_VERSION").into(),
        platform: super::platform().into(),
        device_family: super::device_family().into(),
        mode: "cli".into(),
        instance_id: uuid::Uuid::new_v4().to_string(),
    };
    client::open(endpoint, limit, |challenge| ConnectParams {
        min_protocol: MIN_PROTOCOL,
        max_protocol: MAX_PROTOCOL,
        device: device.map(|d| {
            d.identity.prove(&super::identity::SignedFields {
                client_id: &client.id,
                client_mode: &client.mode,
                role: "operator",
                scopes,
                signed_at: challenge.ts,
                token: shared.or(device_token),
                nonce: &challenge.nonce,
                platform: &client.platform,
                device_family: &client.device_family,
            })
        }),
        client: client.clone(),
        caps: Vec::new(),
        commands: Vec::new(),
        permissions: None,
        path_env: None,
        computer_use: None,
        auth: Auth {
            token: shared.map(str::to_owned),
            bootstrap_token: None,
            device_token: device_token.map(str::to_owned),
        },
        role: "operator".into(),
        scopes: scopes.to_vec(),
    })
    .await
}

/// An operator's device identity and the tokens gateways issued it.
struct Device {
    identity: super::identity::Identity,
    tokens: super::identity::TokenStore,
}

impl Device {
    fn load(dir: &std::path::Path) -> Result<Self, String> {
        let identity = super::identity::Identity::load_or_create(dir).map_err(|e| {
            format!(
                "cannot load the operator's device identity in {}: {e}",
                dir.display()
            )
        })?;
        Ok(Self {
            identity,
            tokens: super::identity::TokenStore::new(dir),
        })
    }
}

/// `req agent` params, as `openclaw agent` sends them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentParams {
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    pub deliver: bool,
    /// Seconds the gateway lets the run take.
    pub timeout: u64,
    /// Also the run id: sending it again reaches the same run.
    pub idempotency_key: String,
}

/// The first answer to `agent`: the run exists.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub run_id: String,
    #[serde(default)]
    pub session_key: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
}

/// The second answer: how the run ended.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    #[serde(default)]
    pub run_id: String,
    /// `ok`, `timeout`, `error`, ...
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub result: Option<RunResult>,
    /// The answer as it arrived (for `--format structured`).
    #[serde(skip)]
    pub raw: Value,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    #[serde(default)]
    pub payloads: Vec<Payload>,
    #[serde(default)]
    pub meta: Value,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub media_url: Option<String>,
    #[serde(default)]
    pub media_urls: Option<Vec<String>>,
    #[serde(default)]
    pub is_error: Option<bool>,
}

impl Finished {
    /// The reply exactly as `openclaw agent` prints it without `--json`:
    /// one line per payload text and media URL, each with its newline.
    pub fn text(&self) -> String {
        let mut lines = Vec::new();
        for payload in self.result.iter().flat_map(|r| &r.payloads) {
            if let Some(text) = payload.text.as_deref().filter(|t| !t.trim().is_empty()) {
                lines.push(text.trim_end().to_owned());
            }
            let media = payload
                .media_urls
                .iter()
                .flatten()
                .chain(payload.media_url.iter());
            for url in media.filter(|u| !u.is_empty()) {
                lines.push(format!("Attachment: {url}"));
            }
        }
        if lines.is_empty() && !self.ok() {
            // What `openclaw agent` prints for a failed run without payloads.
            let summary = self.summary.as_deref().filter(|s| !s.trim().is_empty());
            lines.push(summary.unwrap_or("No reply from agent.").to_owned());
        }
        lines.iter().map(|line| format!("{line}\n")).collect()
    }

    /// `ok` / `completed` exit 0 in `openclaw agent`; anything else 1.
    pub fn ok(&self) -> bool {
        matches!(self.status.as_str(), "ok" | "completed")
    }
}

/// What a running turn reports as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    Accepted(Accepted),
    /// New assistant text, to append to what came before.
    Text(String),
    /// The assistant rewrote text it had already sent; the final answer
    /// is authoritative.
    Rewritten,
    /// The agent started a tool: its name and OpenClaw's one-line title.
    Tool {
        name: String,
        title: String,
    },
    /// Something else happened on the run (a phase, usage, ...).
    Activity,
}

/// How a turn ended.
#[derive(Debug)]
pub enum TurnEnd {
    /// The gateway's final answer.
    Finished(Finished),
    /// The gateway refused the request; `accepted` says whether the run
    /// had started.
    Refused { error: ErrorShape, accepted: bool },
    /// We gave up (deadline, signal). A run that existed was aborted on
    /// the gateway; `aborted` says whether the gateway confirmed it.
    /// `partial` is the assistant's text so far.
    Cancelled {
        accepted: bool,
        aborted: bool,
        partial: String,
    },
    /// The connection ended before the final answer. `sent` says whether
    /// the request may have reached the gateway at all.
    Lost {
        accepted: Option<Accepted>,
        sent: bool,
        why: String,
        /// What the run had said so far; [`resume`] carries on from it.
        seen: Seen,
    },
}

/// The assistant's text per item, as the run's events last showed it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen(Vec<(String, String)>);

impl Seen {
    /// The text so far, item after item.
    pub fn text(&self) -> String {
        // Items with no text (a model that failed and was retried opens
        // one per attempt) say nothing: as `openclaw agent` prints nothing
        // for them, they add no empty lines either.
        let texts: Vec<&str> = self
            .0
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| !t.trim().is_empty())
            .collect();
        texts.join("\n\n")
    }
}

/// One agent turn on `conn`: the run's events feed `progress`, the final
/// answer ends it. `cancel` resolving means we give up: the run is aborted
/// on the gateway (`chat.abort`, as `openclaw agent` does on Ctrl-C), so no
/// turn keeps running after we stopped waiting for it.
pub async fn turn(
    conn: &mut Connection,
    params: &AgentParams,
    cancel: impl Future<Output = ()>,
    progress: impl FnMut(Progress),
) -> TurnEnd {
    let value = serde_json::to_value(params).expect("plain data");
    let id = match conn.request("agent", value).await {
        Ok(id) => id,
        Err(e) => {
            return TurnEnd::Lost {
                accepted: None,
                sent: false,
                why: e.to_string(),
                seen: Seen::default(),
            };
        }
    };
    let mut run = Run::new(params, progress);
    run.request = Some(id.clone());
    tokio::pin!(cancel);
    loop {
        let payload = match run.answer(conn, &id, &mut cancel).await {
            Ok(payload) => payload,
            Err(end) => return end,
        };
        match payload.get("status").and_then(Value::as_str) {
            Some("accepted") => run.accepted(payload),
            // The same key sent again (after a drop) while the run goes
            // on: no final answer will come on this request; follow it.
            Some("in_flight") => {
                run.accepted(payload);
                return follow(run, conn, &mut cancel).await;
            }
            _ => return TurnEnd::Finished(parse_finished(payload)),
        }
    }
}

/// The gateway's default agent (`agents.list`'s `defaultId`), as
/// `openclaw agent` looks it up before a `--to` turn; `None` when the
/// gateway does not say within a few seconds.
pub async fn default_agent(conn: &mut Connection) -> Option<String> {
    let payload = conn
        .call("agents.list", serde_json::json!({}), ABORT_WAIT * 2)
        .await
        .ok()?;
    payload
        .get("defaultId")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// Follows a run that was accepted on a connection since lost: waits for
/// it with `agent.wait`, then asks for its answer by sending the same
/// `agent` request again (the gateway keeps finished runs' answers by
/// idempotency key for five minutes and starts nothing new).
pub async fn resume(
    conn: &mut Connection,
    params: &AgentParams,
    accepted: Accepted,
    seen: Seen,
    cancel: impl Future<Output = ()>,
    progress: impl FnMut(Progress),
) -> TurnEnd {
    let mut run = Run::new(params, progress);
    run.accepted = Some(accepted);
    run.items = seen;
    tokio::pin!(cancel);
    follow(run, conn, &mut cancel).await
}

/// Waits for an accepted run to end, then fetches its answer.
async fn follow<P: FnMut(Progress)>(
    mut run: Run<'_, P>,
    conn: &mut Connection,
    cancel: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> TurnEnd {
    let params = run.params;
    let run_id = run.run_id().to_owned();
    // Until the run is over.
    loop {
        let wait = serde_json::json!({"runId": run_id, "timeoutMs": WAIT_SLICE_MS});
        let Ok(id) = conn.request("agent.wait", wait).await else {
            return run.lost("the gateway closed the connection");
        };
        let res = match run.next_response(conn, &id, cancel).await {
            Ok(res) => res,
            Err(end) => return end,
        };
        let status = res
            .payload
            .as_ref()
            .and_then(|p| p.get("status"))
            .and_then(Value::as_str);
        if !(res.ok && matches!(status, Some("timeout" | "pending"))) {
            break;
        }
    }
    // Its answer: "in_flight" for a moment after the wait ends.
    let value = serde_json::to_value(params).expect("plain data");
    for _ in 0..IN_FLIGHT_RETRIES {
        let Ok(id) = conn.request("agent", value.clone()).await else {
            return run.lost("the gateway closed the connection");
        };
        run.request = Some(id.clone());
        let payload = match run.answer(conn, &id, cancel).await {
            Ok(payload) => payload,
            Err(end) => return end,
        };
        if payload.get("status").and_then(Value::as_str) != Some("in_flight") {
            return TurnEnd::Finished(parse_finished(payload));
        }
        let pause = tokio::time::sleep(IN_FLIGHT_PAUSE);
        tokio::select! {
            _ = pause => {}
            _ = cancel.as_mut() => return run.cancel(conn).await,
        }
    }
    run.lost("the gateway finished the run but kept answering \"in_flight\"")
}

/// Whether an abort's answer says `run_id` was stopped: `chat.abort`
/// answers `{aborted: true, runIds: [...]}`, `sessions.abort`
/// `{status: "aborted", abortedRunId}`.
fn stopped(answer: &Value, run_id: &str) -> bool {
    let listed = answer
        .get("runIds")
        .and_then(Value::as_array)
        .is_some_and(|ids| ids.iter().any(|id| id == run_id));
    (answer.get("aborted") == Some(&Value::Bool(true)) && listed)
        || (answer.get("status").and_then(Value::as_str) == Some("aborted")
            && answer.get("abortedRunId").and_then(Value::as_str) == Some(run_id))
}

/// `agent.wait` slices: short enough to notice a dead link between them.
const WAIT_SLICE_MS: u64 = 10_000;
const IN_FLIGHT_RETRIES: usize = 10;
const IN_FLIGHT_PAUSE: Duration = Duration::from_millis(500);

fn parse_finished(payload: Value) -> Finished {
    let mut finished = serde_json::from_value::<Finished>(payload.clone()).unwrap_or_default();
    finished.raw = payload;
    finished
}

/// One run being followed on one connection.
struct Run<'a, P> {
    params: &'a AgentParams,
    accepted: Option<Accepted>,
    progress: P,
    /// Assistant text per item, as the `agent` stream last showed it.
    items: Seen,
    /// The id of the `agent` request whose final answer ends the run.
    request: Option<String>,
}

impl<'a, P: FnMut(Progress)> Run<'a, P> {
    fn new(params: &'a AgentParams, progress: P) -> Self {
        Self {
            params,
            accepted: None,
            progress,
            items: Seen::default(),
            request: None,
        }
    }

    /// The run id: the gateway uses our idempotency key.
    fn run_id(&self) -> &str {
        self.accepted
            .as_ref()
            .map_or(&self.params.idempotency_key, |a| &a.run_id)
    }

    fn accepted(&mut self, payload: Value) {
        let run = serde_json::from_value::<Accepted>(payload).unwrap_or_else(|_| Accepted {
            run_id: self.params.idempotency_key.clone(),
            session_key: None,
            agent_id: None,
        });
        self.accepted = Some(run.clone());
        (self.progress)(Progress::Accepted(run));
    }

    fn refused(&self, error: Option<ErrorShape>, payload: &Value) -> TurnEnd {
        let error = error.unwrap_or_else(|| ErrorShape {
            code: "UNKNOWN".into(),
            message: payload
                .get("summary")
                .and_then(Value::as_str)
                .unwrap_or("the gateway refused the request without saying why")
                .to_owned(),
            details: None,
            retryable: None,
        });
        TurnEnd::Refused {
            error,
            accepted: self.accepted.is_some(),
        }
    }

    fn lost(&self, why: &str) -> TurnEnd {
        TurnEnd::Lost {
            accepted: self.accepted.clone(),
            sent: true,
            why: why.to_owned(),
            seen: self.items.clone(),
        }
    }

    /// Reads until the response to `id`, following the run's events;
    /// `Err` is how the turn ended instead (cancelled, lost).
    async fn next_response(
        &mut self,
        conn: &mut Connection,
        id: &str,
        cancel: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Result<Response, TurnEnd> {
        let silence = conn.tick_interval().max(MIN_TICK) * 2;
        loop {
            let frame = tokio::select! {
                biased;
                _ = cancel.as_mut() => return Err(self.cancel(conn).await),
                frame = tokio::time::timeout(silence, conn.recv()) => frame,
            };
            match frame {
                Ok(Some(Frame::Res(res))) if res.id == id => return Ok(res),
                Ok(Some(Frame::Event(event))) => self.on_event(&event),
                Ok(Some(_)) => {}
                Ok(None) => return Err(self.lost("the gateway closed the connection")),
                Err(_) => {
                    return Err(self.lost(&format!(
                        "the gateway said nothing for {}s",
                        silence.as_secs()
                    )));
                }
            }
        }
    }

    /// The payload of a successful response to `id`; a refusal, or how the
    /// turn ended instead, as `Err`.
    async fn answer(
        &mut self,
        conn: &mut Connection,
        id: &str,
        cancel: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Result<Value, TurnEnd> {
        let res = self.next_response(conn, id, cancel).await?;
        let payload = res.payload.unwrap_or_default();
        if res.ok {
            Ok(payload)
        } else {
            Err(self.refused(res.error, &payload))
        }
    }

    /// Aborts the run (if it may exist) and reports the cancellation.
    async fn cancel(&mut self, conn: &mut Connection) -> TurnEnd {
        let accepted = self.accepted.is_some();
        let session_key = self
            .accepted
            .as_ref()
            .and_then(|a| a.session_key.clone())
            .or_else(|| self.params.session_key.clone());
        // Before the acceptance the run may exist already; without its
        // session key `sessions.abort` finds it by run id alone.
        let (method, params) = match session_key {
            Some(key) => (
                "chat.abort",
                serde_json::json!({"sessionKey": key, "runId": self.run_id(),
                                   "agentId": self.accepted.as_ref().and_then(|a| a.agent_id.clone())
                                       .or_else(|| self.params.agent_id.clone())}),
            ),
            None => (
                "sessions.abort",
                serde_json::json!({"runId": self.run_id()}),
            ),
        };
        let run_id = self.run_id().to_owned();
        let request = self.request.clone();
        let Ok(id) = conn.request(method, params).await else {
            return self.cancelled(accepted, false);
        };
        // Confirmed only when the gateway says it stopped *this* run; the
        // run's own final answer may also arrive meanwhile, and then wins.
        let wait = async {
            loop {
                match conn.recv().await {
                    Some(Frame::Res(res)) if res.id == id => {
                        return Err(
                            res.ok && res.payload.as_ref().is_some_and(|p| stopped(p, &run_id))
                        );
                    }
                    Some(Frame::Res(res)) if Some(&res.id) == request.as_ref() && res.ok => {
                        let payload = res.payload.unwrap_or_default();
                        if !matches!(
                            payload.get("status").and_then(Value::as_str),
                            Some("accepted" | "in_flight")
                        ) {
                            return Ok(payload);
                        }
                    }
                    Some(_) => {}
                    None => return Err(false),
                }
            }
        };
        match tokio::time::timeout(ABORT_WAIT, wait).await {
            Ok(Ok(answer)) if answer.get("stopReason").and_then(Value::as_str) != Some("rpc") => {
                TurnEnd::Finished(parse_finished(answer))
            }
            Ok(Ok(_)) => self.cancelled(accepted, true),
            Ok(Err(aborted)) => self.cancelled(accepted, aborted),
            Err(_) => self.cancelled(accepted, false),
        }
    }

    fn cancelled(&self, accepted: bool, aborted: bool) -> TurnEnd {
        TurnEnd::Cancelled {
            accepted,
            aborted,
            partial: self.text(),
        }
    }

    fn text(&self) -> String {
        self.items.text()
    }

    /// Turns one event into progress, if it belongs to this run.
    fn on_event(&mut self, event: &Event) {
        let payload = &event.payload;
        if payload.get("runId").and_then(Value::as_str) != Some(self.run_id()) {
            return; // events are broadcast to every operator
        }
        let progress = match (
            event.event.as_str(),
            payload.get("stream").and_then(Value::as_str),
        ) {
            ("agent", Some("assistant")) => {
                let data = &payload["data"];
                let item = data.get("itemId").and_then(Value::as_str).unwrap_or("");
                let Some(text) = data.get("text").and_then(Value::as_str) else {
                    return;
                };
                self.assistant(item, text)
            }
            ("agent", Some("item")) => {
                let data = &payload["data"];
                let field = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("");
                if field("kind") == "tool" && field("phase") == "start" {
                    Progress::Tool {
                        name: field("name").to_owned(),
                        title: field("title").to_owned(),
                    }
                } else {
                    Progress::Activity
                }
            }
            ("agent" | "chat", _) => Progress::Activity,
            _ => return,
        };
        (self.progress)(progress);
    }

    /// `text` is the item's whole text so far: what extends the previous
    /// text is new; anything else is a rewrite.
    fn assistant(&mut self, item: &str, text: &str) -> Progress {
        let slot = match self.items.0.iter().position(|(id, _)| id == item) {
            Some(i) => i,
            None => {
                let separator = if self.items.0.is_empty() { "" } else { "\n\n" };
                self.items.0.push((item.to_owned(), String::new()));
                let i = self.items.0.len() - 1;
                self.items.0[i].1 = text.to_owned();
                return Progress::Text(format!("{separator}{text}"));
            }
        };
        let before = std::mem::replace(&mut self.items.0[slot].1, text.to_owned());
        match text.strip_prefix(before.as_str()) {
            Some(added) if slot + 1 == self.items.0.len() => Progress::Text(added.to_owned()),
            _ if before == text => Progress::Activity,
            _ => Progress::Rewritten,
        }
    }
}
