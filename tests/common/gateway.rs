//! A fake OpenClaw gateway (protocol v4) for the node's tests: it speaks the
//! frames recorded in shared/openclaw/frames — challenge, connect checks
//! (client id, token, device signature, pairing), hello-ok, ticks, pings,
//! invoke requests and cancels — and can drop, fall silent and restart.
//!
//! Operators (`client.id: "cli"`, role operator, as `openclaw agent`
//! connects) get `agent` turns: `accepted`, streamed `agent`/`chat`
//! events broadcast to every operator, the final answer to the owner;
//! `chat.abort` / `sessions.abort` (owner only), `agent.wait`, and the
//! idempotency-key dedupe (`in_flight`, then the cached answer). Messages
//! steer the fake model: `[[delay:SECS]]`, `[[fail]]`, `[[drop]]` (drop
//! the owner's connection mid-turn), `[[drop-early]]` (drop it before the
//! acceptance), `[[invoke:COMMAND JSON]]` (call the
//! node and report its answer), `[[rewrite]]`.
//!
//! The `v3` signature check is written here independently of the node's
//! code, so the two cross-check each other.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

pub const TOKEN: &str = "peer-test-token-0123456789";
const ALLOWED_CLIENT_IDS: &[&str] = &["node-host", "openclaw-linux", "cli"];

#[derive(Clone, Debug)]
pub struct Config {
    pub token: Option<String>,
    /// Devices need `approve_device` before they may connect.
    pub manual_pairing: bool,
    /// The command surface awaits `approve_surface`.
    pub surface_pending: bool,
    pub tick_ms: u64,
    pub max_payload: usize,
    /// Agent ids `agent` accepts.
    pub agents: Vec<String>,
    /// Serve `wss://` with this certificate.
    pub tls: Option<TestCert>,
}

/// A self-signed certificate for a `wss://` fake gateway.
#[derive(Clone)]
pub struct TestCert {
    pub cert: Vec<u8>,
    key: Vec<u8>,
}

impl std::fmt::Debug for TestCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TestCert({})", self.fingerprint())
    }
}

impl TestCert {
    pub fn self_signed() -> Self {
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
            .unwrap();
        Self {
            cert: cert.cert.der().to_vec(),
            key: cert.signing_key.serialize_der(),
        }
    }

    /// `AB:CD:…`, as `openssl x509 -fingerprint -sha256` prints it.
    pub fn fingerprint(&self) -> String {
        Sha256::digest(&self.cert)
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":")
    }

    fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(self.cert.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone())),
            )
            .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            token: Some(TOKEN.into()),
            manual_pairing: false,
            surface_pending: false,
            tick_ms: 30_000,
            max_payload: 26_214_400,
            agents: vec!["main".into(), "doctor".into()],
            tls: None,
        }
    }
}

#[derive(Default)]
struct State {
    connects: Vec<Value>,
    signature_ok: Vec<bool>,
    device_tokens: HashMap<String, String>,
    approved_devices: HashSet<String>,
    pair_requests: HashMap<String, String>,
    surface_pending: bool,
    results: HashMap<String, Value>,
    node_requests: Vec<Value>,
    pongs: usize,
    silent: bool,
    deaf: bool,
    hello_count: usize,
    operator_connects: Vec<Value>,
    operator_hellos: usize,
    agent_requests: Vec<Value>,
    aborts: Vec<Value>,
    runs: HashMap<String, Run>,
    conn_counter: u64,
    /// The name `node.list` shows per node id.
    node_names: HashMap<String, String>,
    renames: Vec<Value>,
    accepted: usize,
    bootstrap_tokens: HashSet<String>,
    bootstrap_used: usize,
    /// `node.pluginTools.update` answers still to refuse as transient.
    publish_failures: usize,
}

struct Run {
    owner: u64,
    session_key: String,
    agent_id: String,
    /// The final `res` payload once the run is over.
    done: Option<Value>,
    aborted: bool,
    abort: Arc<tokio::sync::Notify>,
}

pub struct FakeGateway {
    pub addr: SocketAddr,
    config: Config,
    state: Arc<Mutex<State>>,
    /// Frames to push to the connected node.
    to_node: broadcast::Sender<Outgoing>,
    results: broadcast::Sender<Value>,
    /// Run events, for every operator.
    to_operators: broadcast::Sender<(Option<u64>, String)>,
    stop: Option<oneshot::Sender<()>>,
    attach_tx: mpsc::UnboundedSender<Attach>,
    attaches: tokio::sync::Mutex<mpsc::UnboundedReceiver<Attach>>,
}

/// A stream a connection runs on (TCP, or TLS over it).
pub trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// A socket a node opened on `/node-desktop/attach?…` (`desktop.stream`),
/// handed to the test as accepted: the gateway does nothing else with it.
pub struct Attach {
    /// The request's path and query.
    pub uri: String,
    pub ws: tokio_tungstenite::WebSocketStream<Box<dyn Io>>,
}

#[derive(Clone, Debug)]
enum Outgoing {
    Text(String),
    Ping,
    Drop,
}

impl FakeGateway {
    pub async fn start(config: Config) -> Self {
        Self::start_at("127.0.0.1:0".parse().unwrap(), config).await
    }

    /// On a given address (another gateway where one was).
    pub async fn start_at(addr: SocketAddr, config: Config) -> Self {
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(addr).await {
                Ok(l) => break l,
                Err(_) if tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("bind {addr}: {e}"),
            }
        };
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State {
            surface_pending: config.surface_pending,
            ..Default::default()
        }));
        let (to_node, _) = broadcast::channel(64);
        let (results, _) = broadcast::channel(64);
        let (to_operators, _) = broadcast::channel(1024);
        let (attach_tx, attaches) = mpsc::unbounded_channel();
        let mut gw = Self {
            addr,
            config,
            state,
            to_node,
            results,
            to_operators,
            stop: None,
            attach_tx,
            attaches: tokio::sync::Mutex::new(attaches),
        };
        gw.serve(listener);
        gw
    }

    pub fn url(&self) -> String {
        let scheme = if self.config.tls.is_some() {
            "wss"
        } else {
            "ws"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// TCP connections accepted so far (TLS or not, handshake or not).
    pub fn accepted(&self) -> usize {
        self.state.lock().unwrap().accepted
    }

    fn serve(&mut self, listener: TcpListener) {
        let (stop, mut stopped) = oneshot::channel();
        self.stop = Some(stop);
        let hub = Hub {
            config: self.config.clone(),
            state: self.state.clone(),
            to_node: self.to_node.clone(),
            results: self.results.clone(),
            to_operators: self.to_operators.clone(),
            attaches: self.attach_tx.clone(),
        };
        let tls = self.config.tls.as_ref().map(TestCert::acceptor);
        tokio::spawn(async move {
            let mut conns = Vec::new();
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        hub.state.lock().unwrap().accepted += 1;
                        let hub = hub.clone();
                        conns.push(match tls.clone() {
                            None => tokio::spawn(connection(stream, hub)),
                            Some(tls) => tokio::spawn(async move {
                                // A client that rejects our certificate ends here.
                                if let Ok(stream) = tls.accept(stream).await {
                                    connection(stream, hub).await;
                                }
                            }),
                        });
                    }
                }
            }
            for c in conns {
                c.abort();
            }
        });
    }

    /// Stops listening and drops every connection (a gateway going down).
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Listens again on the same port (a gateway coming back).
    pub async fn restart(&mut self) {
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(_) if tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("rebind {}: {e}", self.addr),
            }
        };
        self.serve(listener);
    }

    /// The next attach socket a node opened, waiting up to `within`.
    pub async fn attach(&self, within: Duration) -> Attach {
        let mut rx = self.attaches.lock().await;
        tokio::time::timeout(within, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no attach socket within {within:?}"))
            .expect("attach channel closed")
    }

    /// An attach socket already opened, if any.
    pub fn try_attach(&self) -> Option<Attach> {
        self.attaches.try_lock().ok()?.try_recv().ok()
    }

    /// Waits until `n` hello-ok have been sent in total.
    pub async fn wait_hellos(&self, n: usize, within: Duration) {
        self.wait_until(within, |s| s.hello_count >= n).await;
    }

    async fn wait_until(&self, within: Duration, check: impl Fn(&State) -> bool) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if check(&self.state.lock().unwrap()) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting on the fake gateway"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn connects(&self) -> Vec<Value> {
        self.state.lock().unwrap().connects.clone()
    }

    pub fn signatures_ok(&self) -> Vec<bool> {
        self.state.lock().unwrap().signature_ok.clone()
    }

    pub fn device_token(&self, device_id: &str) -> Option<String> {
        self.state
            .lock()
            .unwrap()
            .device_tokens
            .get(device_id)
            .cloned()
    }

    /// Forgets every issued device token (as after `openclaw devices revoke`).
    pub fn revoke_device_tokens(&self) {
        self.state.lock().unwrap().device_tokens.clear();
    }

    /// The next `n` tool publications are answered as a gateway that just
    /// saw the node reconnect does (UNAVAILABLE, PAIRING_CHANGED).
    pub fn fail_publications(&self, n: usize) {
        self.state.lock().unwrap().publish_failures = n;
    }

    /// The `node.pluginTools.update` params the node sent, in order.
    pub fn publications(&self) -> Vec<Value> {
        self.node_requests()
            .into_iter()
            .filter(|r| r["method"] == "node.pluginTools.update")
            .map(|r| r["params"].clone())
            .collect()
    }

    pub fn node_requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().node_requests.clone()
    }

    pub fn pair_request(&self, device_id: &str) -> Option<String> {
        self.state
            .lock()
            .unwrap()
            .pair_requests
            .get(device_id)
            .cloned()
    }

    pub fn approve_device(&self, device_id: &str) {
        self.state
            .lock()
            .unwrap()
            .approved_devices
            .insert(device_id.to_owned());
    }

    /// Approves the command surface and tells the node, as `openclaw nodes approve` does.
    pub fn approve_surface(&self, node_id: &str) {
        self.state.lock().unwrap().surface_pending = false;
        self.send_event(
            "node.pair.resolved",
            json!({"requestId": "surface-req-1", "nodeId": node_id, "decision": "approved", "ts": now_ms()}),
        );
    }

    /// A setup code for this gateway (`openclaw qr --setup-code-only`),
    /// its bootstrap token good for one enrolment.
    pub fn setup_code(&self, fingerprint: Option<&str>) -> String {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let boot = uuid::Uuid::new_v4().simple().to_string();
        self.state
            .lock()
            .unwrap()
            .bootstrap_tokens
            .insert(boot.clone());
        let mut payload =
            json!({"url": self.url(), "bootstrapToken": boot, "expiresAtMs": now_ms() + 600_000});
        if let Some(fp) = fingerprint {
            payload["tlsFingerprint"] = json!(fp.replace(':', "").to_lowercase());
        }
        URL_SAFE_NO_PAD.encode(payload.to_string())
    }

    pub fn bootstrap_used(&self) -> usize {
        self.state.lock().unwrap().bootstrap_used
    }

    /// The name `node.list` shows for `node_id`.
    pub fn node_name(&self, node_id: &str) -> Option<String> {
        self.state.lock().unwrap().node_names.get(node_id).cloned()
    }

    /// What `openclaw nodes rename` would leave behind.
    pub fn set_node_name(&self, node_id: &str, name: &str) {
        let mut s = self.state.lock().unwrap();
        s.node_names.insert(node_id.to_owned(), name.to_owned());
    }

    pub fn renames(&self) -> Vec<Value> {
        self.state.lock().unwrap().renames.clone()
    }

    pub fn send_event(&self, event: &str, payload: Value) {
        let frame = json!({"type": "event", "event": event, "payload": payload});
        let _ = self.to_node.send(Outgoing::Text(frame.to_string()));
    }

    pub fn send_raw(&self, text: &str) {
        let _ = self.to_node.send(Outgoing::Text(text.to_owned()));
    }

    pub fn ping(&self) {
        let _ = self.to_node.send(Outgoing::Ping);
    }

    pub fn pongs(&self) -> usize {
        self.state.lock().unwrap().pongs
    }

    pub async fn wait_pongs(&self, n: usize, within: Duration) {
        self.wait_until(within, |s| s.pongs >= n).await;
    }

    /// Closes the node's connection without a close frame.
    pub fn drop_connection(&self) {
        let _ = self.to_node.send(Outgoing::Drop);
    }

    /// Stops ticks (the connection stays open but says nothing).
    pub fn fall_silent(&self) {
        self.state.lock().unwrap().silent = true;
    }

    /// Stops reading from the node (its frames pile up in the socket).
    pub fn stop_reading(&self) {
        self.state.lock().unwrap().deaf = true;
    }

    /// Sends `node.invoke.request` and returns its id.
    pub fn request(&self, command: &str, params: &str, timeout_ms: u64) -> String {
        self.request_keyed(
            command,
            params,
            timeout_ms,
            &uuid::Uuid::new_v4().to_string(),
        )
    }

    /// The same with an idempotency key of the caller's (OpenClaw's
    /// file-transfer policy sends its preflight and the real call with one).
    pub fn request_keyed(&self, command: &str, params: &str, timeout_ms: u64, key: &str) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        self.send_event(
            "node.invoke.request",
            json!({"id": id, "nodeId": "node", "command": command, "paramsJSON": params,
                   "timeoutMs": timeout_ms, "idempotencyKey": key}),
        );
        id
    }

    pub fn cancel(&self, invoke_id: &str) {
        self.send_event(
            "node.invoke.cancel",
            json!({"invokeId": invoke_id, "nodeId": "node"}),
        );
    }

    /// The `node.invoke.result` params for `id`, waiting up to `within`.
    pub async fn result(&self, id: &str, within: Duration) -> Value {
        let mut rx = self.results.subscribe();
        if let Some(r) = self.state.lock().unwrap().results.get(id) {
            return r.clone();
        }
        let wait = async {
            loop {
                match rx.recv().await {
                    Ok(r) if r["id"] == id => return r,
                    Ok(_) => continue,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => panic!("results channel closed"),
                }
            }
        };
        match tokio::time::timeout(within, wait).await {
            Ok(r) => r,
            Err(_) => self
                .state
                .lock()
                .unwrap()
                .results
                .get(id)
                .cloned()
                .unwrap_or_else(|| panic!("no result for {id} within {within:?}")),
        }
    }

    pub fn operator_connects(&self) -> Vec<Value> {
        self.state.lock().unwrap().operator_connects.clone()
    }

    pub async fn wait_operator_hellos(&self, n: usize, within: Duration) {
        self.wait_until(within, |s| s.operator_hellos >= n).await;
    }

    /// Every `agent` request's params, in arrival order (dedupes included).
    pub fn agent_requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().agent_requests.clone()
    }

    /// Every accepted `chat.abort` / `sessions.abort`, as `{method, params}`.
    pub fn aborts(&self) -> Vec<Value> {
        self.state.lock().unwrap().aborts.clone()
    }

    /// Waits until run `run_id` is over; whether it was aborted.
    pub async fn wait_run_over(&self, run_id: &str, within: Duration) -> bool {
        self.wait_until(within, |s| {
            s.runs.get(run_id).is_some_and(|r| r.done.is_some())
        })
        .await;
        self.state.lock().unwrap().runs[run_id].aborted
    }

    /// Invokes and waits: the result params.
    pub async fn invoke(&self, command: &str, params: Value) -> Value {
        let id = self.request(command, &params.to_string(), 15_000);
        self.result(&id, Duration::from_secs(15)).await
    }
}

impl Drop for FakeGateway {
    fn drop(&mut self) {
        self.stop();
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The signed string, written from the protocol notes, not from the node.
fn v3(params: &Value, device: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
    let scopes: Vec<String> = params["scopes"]
        .as_array()
        .map(|a| a.iter().map(s).collect())
        .unwrap_or_default();
    format!(
        "v3|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
        s(&device["id"]),
        s(&params["client"]["id"]),
        s(&params["client"]["mode"]),
        s(&params["role"]),
        scopes.join(","),
        device["signedAt"].as_u64().unwrap_or(0),
        // The token slot carries whichever token was presented.
        s(params["auth"]
            .get("token")
            .or(params["auth"].get("bootstrapToken"))
            .unwrap_or(&params["auth"]["deviceToken"])),
        s(&device["nonce"]),
        s(&params["client"]["platform"]).to_lowercase(),
        s(&params["client"]["deviceFamily"]).to_lowercase(),
    )
}

/// `hello-ok` with `auth` and this gateway's policy.
fn hello_ok(id: &Value, config: &Config, auth: Value) -> String {
    json!({"type": "res", "id": id, "ok": true, "payload": {
        "type": "hello-ok", "protocol": 4,
        "server": {"version": "2026.9.6-fake"},
        "features": {"methods": [], "events": []},
        "auth": auth,
        "policy": {"maxPayload": config.max_payload, "maxBufferedBytes": 52428800, "tickIntervalMs": config.tick_ms}}})
    .to_string()
}

/// The device's token, issued on its first hello and kept.
fn issue_device_token(s: &mut State, device_id: &str) -> String {
    s.device_tokens
        .entry(device_id.to_owned())
        .or_insert_with(|| uuid::Uuid::new_v4().simple().to_string())
        .clone()
}

/// OpenClaw's answer to a device that awaits approval (one request per device).
fn pairing_required(s: &mut State, id: &Value, device_id: &str, role: &str) -> String {
    let request = s
        .pair_requests
        .entry(device_id.to_owned())
        .or_insert_with(|| uuid::Uuid::new_v4().to_string())
        .clone();
    error(
        id,
        "NOT_PAIRED",
        "pairing required: device is not approved yet",
        json!({"code": "PAIRING_REQUIRED", "reason": "not-paired", "requestId": request, "deviceId": device_id, "requestedRole": role}),
    )
}

fn signature_valid(params: &Value, device: &Value, nonce: &str, ts: u64) -> bool {
    let decode = |v: &Value| URL_SAFE_NO_PAD.decode(v.as_str().unwrap_or("")).ok();
    let (Some(public), Some(signature)) =
        (decode(&device["publicKey"]), decode(&device["signature"]))
    else {
        return false;
    };
    let Ok(public): Result<[u8; 32], _> = public.try_into() else {
        return false;
    };
    let Ok(signature): Result<[u8; 64], _> = signature.try_into() else {
        return false;
    };
    let id: String = Sha256::digest(public)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let Ok(key) = VerifyingKey::from_bytes(&public) else {
        return false;
    };
    id == device["id"].as_str().unwrap_or("")
        && device["nonce"] == nonce
        && device["signedAt"].as_u64() == Some(ts)
        && key
            .verify(
                v3(params, device).as_bytes(),
                &Signature::from_bytes(&signature),
            )
            .is_ok()
}

fn error(id: &Value, code: &str, message: &str, details: Value) -> String {
    json!({"type": "res", "id": id, "ok": false, "error": {"code": code, "message": message, "details": details}}).to_string()
}

/// What every connection shares.
#[derive(Clone)]
struct Hub {
    config: Config,
    state: Arc<Mutex<State>>,
    to_node: broadcast::Sender<Outgoing>,
    results: broadcast::Sender<Value>,
    to_operators: broadcast::Sender<(Option<u64>, String)>,
    attaches: mpsc::UnboundedSender<Attach>,
}

async fn connection<S>(stream: S, hub: Hub)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Hub {
        config,
        state,
        to_node,
        results,
        to_operators,
        attaches,
    } = hub.clone();
    let mut to_node = to_node.subscribe();
    let mut run_events = to_operators.subscribe();
    // OpenClaw's gateway takes frames up to its maxPayload (25 MiB): a
    // 16 MiB file as base64 is one frame of about 22 MB.
    let limits = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20));
    let stream: Box<dyn Io> = Box::new(stream);
    let mut uri = String::new();
    // The callback's type is tungstenite's.
    #[allow(clippy::result_large_err)]
    let seen = |req: &tokio_tungstenite::tungstenite::handshake::server::Request, res| {
        uri = req.uri().to_string();
        Ok(res)
    };
    let Ok(ws) = tokio_tungstenite::accept_hdr_async_with_config(stream, seen, Some(limits)).await
    else {
        return;
    };
    // A desktop relay's socket: the test's.
    if uri.starts_with("/node-desktop/attach") {
        let _ = attaches.send(Attach { uri, ws });
        return;
    }
    let (mut tx, mut rx) = ws.split();
    let nonce = uuid::Uuid::new_v4().to_string();
    let ts = now_ms();
    let challenge = json!({"type": "event", "event": "connect.challenge",
        "payload": {"nonce": nonce, "ts": ts, "capabilities": ["model-catalog-snapshot"]}});
    if tx.send(Message::text(challenge.to_string())).await.is_err() {
        return;
    }
    // The handshake.
    let connect: Value = loop {
        match rx.next().await {
            Some(Ok(Message::Text(t))) => match serde_json::from_str::<Value>(&t) {
                Ok(v) if v["method"] == "connect" => break v,
                _ => continue,
            },
            Some(Ok(_)) => continue,
            _ => return,
        }
    };
    let id = &connect["id"];
    let params = &connect["params"];
    let device = &params["device"];
    let device_id = device["id"].as_str().unwrap_or("").to_owned();
    let operator = params["role"] == "operator";
    let conn_id = {
        let mut s = state.lock().unwrap();
        s.conn_counter += 1;
        s.conn_counter
    };
    let verdict = if operator {
        let mut s = state.lock().unwrap();
        s.operator_connects.push(params.clone());
        if params["client"]["id"] != "cli" {
            Err(error(
                id,
                "INVALID_REQUEST",
                "invalid connect params: at /client/id: must be equal to one of the allowed values",
                Value::Null,
            ))
        } else if device.is_object() {
            // An operator with a device identity (away from loopback).
            let sig_ok = signature_valid(params, device, &nonce, ts);
            let token = params["auth"]["token"]
                .as_str()
                .or(params["auth"]["deviceToken"].as_str());
            let issued = s.device_tokens.get(&device_id).cloned();
            if !sig_ok {
                Err(error(
                    id,
                    "INVALID_REQUEST",
                    "device signature invalid",
                    json!({"code": "DEVICE_AUTH_INVALID"}),
                ))
            } else if config.token.is_some()
                && token != config.token.as_deref()
                && (token.is_none() || token != issued.as_deref())
            {
                Err(error(
                    id,
                    "INVALID_REQUEST",
                    "unauthorized: gateway token mismatch (use this gateway's gateway.auth.token or pair the device)",
                    json!({"code": "AUTH_TOKEN_MISMATCH", "canRetryWithDeviceToken": false}),
                ))
            } else if config.manual_pairing && !s.approved_devices.contains(&device_id) {
                Err(pairing_required(&mut s, id, &device_id, "operator"))
            } else {
                let token = issue_device_token(&mut s, &device_id);
                s.operator_hellos += 1;
                Ok(hello_ok(
                    id,
                    &config,
                    json!({"method": "device-token", "role": "operator", "scopes": params["scopes"], "deviceToken": token, "issuedAtMs": now_ms()}),
                ))
            }
        } else if config.token.is_some() && params["auth"]["token"].as_str().is_none() {
            // OpenClaw 2026.9.6: a device-less operator without a token is
            // told about the device, not the token.
            Err(error(
                id,
                "NOT_PAIRED",
                "device identity required",
                json!({"code": "DEVICE_IDENTITY_REQUIRED"}),
            ))
        } else if config.token.is_some()
            && params["auth"]["token"].as_str() != config.token.as_deref()
        {
            Err(error(
                id,
                "INVALID_REQUEST",
                "unauthorized: gateway token mismatch (use this gateway's gateway.auth.token or pair the device)",
                json!({"code": "AUTH_TOKEN_MISMATCH", "canRetryWithDeviceToken": false}),
            ))
        } else {
            s.operator_hellos += 1;
            Ok(hello_ok(
                id,
                &config,
                json!({"method": "token", "role": "operator", "scopes": params["scopes"]}),
            ))
        }
    } else {
        let mut s = state.lock().unwrap();
        s.connects.push(params.clone());
        let sig_ok = device.is_object() && signature_valid(params, device, &nonce, ts);
        s.signature_ok.push(sig_ok);
        let token = params["auth"]["token"].as_str();
        let issued = s.device_tokens.get(&device_id).cloned();
        if !ALLOWED_CLIENT_IDS.contains(&params["client"]["id"].as_str().unwrap_or("")) {
            Err(error(
                id,
                "INVALID_REQUEST",
                "invalid connect params: at /client/id: must be equal to one of the allowed values",
                Value::Null,
            ))
        } else if !device.is_object() {
            Err(error(
                id,
                "NOT_PAIRED",
                "device identity required",
                json!({"code": "DEVICE_IDENTITY_REQUIRED"}),
            ))
        } else if !sig_ok {
            Err(error(
                id,
                "INVALID_REQUEST",
                "device signature invalid",
                json!({"code": "DEVICE_AUTH_INVALID"}),
            ))
        } else if let Some(boot) = params["auth"]["bootstrapToken"].as_str() {
            // A setup code: good once, and it pairs the device.
            if s.bootstrap_tokens.remove(boot) {
                s.approved_devices.insert(device_id.clone());
                s.bootstrap_used += 1;
                let token = issue_device_token(&mut s, &device_id);
                s.hello_count += 1;
                Ok(hello_ok(
                    id,
                    &config,
                    json!({"method": "bootstrap-token", "role": "node", "scopes": [], "deviceToken": token, "issuedAtMs": now_ms()}),
                ))
            } else {
                Err(error(
                    id,
                    "INVALID_REQUEST",
                    "unauthorized: setup code invalid, expired, revoked, or already used (create a new code; review `openclaw devices list`)",
                    json!({"code": "AUTH_BOOTSTRAP_TOKEN_INVALID", "authReason": "bootstrap_token_invalid", "canRetryWithDeviceToken": false}),
                ))
            }
        } else if config.token.is_some() && token.is_none() {
            Err(error(
                id,
                "INVALID_REQUEST",
                "unauthorized: gateway token missing (provide gateway auth token)",
                json!({"code": "AUTH_TOKEN_MISSING", "canRetryWithDeviceToken": false}),
            ))
        } else if config.token.is_some()
            && token != config.token.as_deref()
            && token != issued.as_deref()
        {
            Err(error(
                id,
                "INVALID_REQUEST",
                "unauthorized: gateway token mismatch (provide gateway auth token)",
                json!({"code": "AUTH_TOKEN_MISMATCH", "canRetryWithDeviceToken": true, "recommendedNextStep": "retry_with_device_token"}),
            ))
        } else if config.manual_pairing && !s.approved_devices.contains(&device_id) {
            Err(pairing_required(&mut s, id, &device_id, "node"))
        } else {
            let token = issue_device_token(&mut s, &device_id);
            s.hello_count += 1;
            // As OpenClaw: the name of the first approval stays.
            let name = params["client"]["displayName"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            s.node_names.entry(device_id.clone()).or_insert(name);
            Ok(hello_ok(
                id,
                &config,
                json!({"method": "token", "role": "node", "scopes": [], "deviceToken": token, "issuedAtMs": now_ms()}),
            ))
        }
    };
    match verdict {
        Err(refusal) => {
            let _ = tx.send(Message::text(refusal)).await;
            let _ = tx
                .send(Message::Close(Some(
                    tokio_tungstenite::tungstenite::protocol::CloseFrame {
                        code: 1008.into(),
                        reason: "refused".into(),
                    },
                )))
                .await;
            return;
        }
        Ok(hello) => {
            if tx.send(Message::text(hello)).await.is_err() {
                return;
            }
        }
    }
    // Served: ticks, frames from the test, and the node's requests.
    let mut tick = tokio::time::interval(Duration::from_millis(config.tick_ms));
    let mut seq = 0u64;
    let (answers_tx, mut answers) = mpsc::unbounded_channel::<Outgoing>();
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if state.lock().unwrap().silent { continue; }
                seq += 1;
                let frame = json!({"type": "event", "event": "tick", "payload": {"ts": now_ms()}, "seq": seq});
                if tx.send(Message::text(frame.to_string())).await.is_err() { return; }
            }
            // Run events go to every operator; a run's final answer, on the
            // same channel so it never overtakes them, to its owner only.
            event = run_events.recv(), if operator => match event {
                Ok((None, text)) => { if tx.send(Message::text(text)).await.is_err() { return; } }
                Ok((Some(to), text)) if to == conn_id => { if tx.send(Message::text(text)).await.is_err() { return; } }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Closed) => return,
                Err(_) => {}
            },
            out = to_node.recv(), if !operator => match out {
                Ok(Outgoing::Text(text)) => { if tx.send(Message::text(text)).await.is_err() { return; } }
                Ok(Outgoing::Ping) => { if tx.send(Message::Ping(vec![1, 2, 3].into())).await.is_err() { return; } }
                Ok(Outgoing::Drop) | Err(broadcast::error::RecvError::Closed) => return,
                Err(_) => {}
            },
            Some(answer) = answers.recv() => match answer {
                Outgoing::Text(text) => { if tx.send(Message::text(text)).await.is_err() { return; } }
                Outgoing::Ping => {}
                Outgoing::Drop => return,
            },
            msg = rx.next(), if !state.lock().unwrap().deaf => match msg {
                Some(Ok(Message::Text(text))) => {
                    let Ok(frame) = serde_json::from_str::<Value>(&text) else { continue };
                    if operator {
                        let admin = params["scopes"].as_array().is_some_and(|s| s.iter().any(|s| s == "operator.admin"));
                        operator_request(&frame, &hub, conn_id, admin, &answers_tx);
                        continue;
                    }
                    let answer = handle_request(&frame, &state, &results);
                    if let Some(answer) = answer { let _ = answers_tx.send(Outgoing::Text(answer)); }
                }
                Some(Ok(Message::Pong(_))) => state.lock().unwrap().pongs += 1,
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
}

fn handle_request(
    frame: &Value,
    state: &Arc<Mutex<State>>,
    results: &broadcast::Sender<Value>,
) -> Option<String> {
    if frame["type"] != "req" {
        return None;
    }
    let id = &frame["id"];
    let mut s = state.lock().unwrap();
    s.node_requests.push(frame.clone());
    let answer = match frame["method"].as_str().unwrap_or("") {
        "node.invoke.result" => {
            let params = frame["params"].clone();
            let key = params["id"].as_str().unwrap_or("").to_owned();
            let late = s.results.contains_key(&key);
            s.results.insert(key, params.clone());
            let _ = results.send(params);
            json!({"type": "res", "id": id, "ok": true, "payload": if late { json!({"ok": true, "ignored": true}) } else { json!({"ok": true}) }})
        }
        // As the real gateway (`nodes.handlers.invoke-progress.ts`): a
        // closed schema, chunks of at most 16384 bytes, the caller's own
        // node id; a chunk for an invoke that is over is `ignored`.
        "node.invoke.progress" => {
            let p = &frame["params"];
            let closed = p.as_object().is_some_and(|o| {
                o.len() == 4
                    && o.keys()
                        .all(|k| ["invokeId", "nodeId", "seq", "chunk"].contains(&k.as_str()))
            });
            let valid = closed
                && p["invokeId"].as_str().is_some_and(|s| !s.is_empty())
                && p["nodeId"].as_str().is_some_and(|s| !s.is_empty())
                && p["seq"].as_u64().is_some()
                && p["chunk"].is_string();
            if !valid {
                json!({"type": "res", "id": id, "ok": false, "error": {"code": "INVALID_REQUEST", "message": "invalid node.invoke.progress params"}})
            } else if p["chunk"].as_str().unwrap().len() > 16384 {
                json!({"type": "res", "id": id, "ok": false, "error": {"code": "INVALID_REQUEST", "message": "progress chunk too large"}})
            } else {
                let over = s.results.contains_key(p["invokeId"].as_str().unwrap());
                json!({"type": "res", "id": id, "ok": true, "payload": {"ok": true, "ignored": over}})
            }
        }
        // As the real gateway (`nodes.read` handler, the closed schema in
        // `nodes-*.mjs`, `node-plugin-tool-snapshot`): schema errors are
        // refused; a descriptor whose command the node's surface lacks is
        // dropped; the answer is the effective list (empty while the
        // surface awaits approval).
        "node.pluginTools.update" if s.publish_failures > 0 => {
            s.publish_failures -= 1;
            json!({"type": "res", "id": id, "ok": false, "error": {"code": "UNAVAILABLE", "message": "node pairing changed before request dispatch", "retryable": true, "details": {"code": "PAIRING_CHANGED"}}})
        }
        "node.pluginTools.update" => match plugin_tools_problem(&frame["params"]) {
            Some(problem) => {
                json!({"type": "res", "id": id, "ok": false, "error": {"code": "INVALID_REQUEST", "message": format!("invalid node.pluginTools.update params: {problem}")}})
            }
            None => {
                let declared: Vec<Value> = s
                    .connects
                    .last()
                    .and_then(|c| c["commands"].as_array().cloned())
                    .unwrap_or_default();
                let effective: Vec<Value> = if s.surface_pending {
                    Vec::new()
                } else {
                    frame["params"]["tools"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|t| declared.contains(&t["command"]))
                        .filter(|t| {
                            t["pluginId"] != "node-mcp"
                                || (t["command"] == "mcp.tools.call.v1"
                                    && t["mcp"]["server"].is_string()
                                    && t["mcp"]["tool"].is_string())
                        })
                        .take(128)
                        .cloned()
                        .collect()
                };
                json!({"type": "res", "id": id, "ok": true, "payload": {"nodeId": "node", "tools": effective}})
            }
        },
        // As the real gateway: an empty feature list is refused.
        "node.runnerInventory.update"
            if frame["params"]["protocolFeatures"]
                .as_array()
                .is_none_or(|f| f.is_empty()) =>
        {
            json!({"type": "res", "id": id, "ok": false, "error": {"code": "INVALID_REQUEST", "message": "invalid node runner inventory"}})
        }
        "node.runnerInventory.update" if s.surface_pending => {
            json!({"type": "res", "id": id, "ok": false, "error": {
            "code": "UNAVAILABLE",
            "message": "node capability surface is awaiting operator approval; run `openclaw nodes approve surface-req-1` (see `openclaw nodes pending`), then this node retries automatically"}})
        }
        _ => json!({"type": "res", "id": id, "ok": true, "payload": {"ok": true}}),
    };
    Some(answer.to_string())
}

/// What the real gateway's closed schema refuses in
/// `node.pluginTools.update` params, if anything.
fn plugin_tools_problem(params: &Value) -> Option<String> {
    let only = |v: &Value, keys: &[&str]| {
        v.as_object()
            .is_some_and(|o| o.keys().all(|k| keys.contains(&k.as_str())))
    };
    if !only(params, &["tools"]) {
        return Some("at root: unexpected property".into());
    }
    let Some(tools) = params["tools"].as_array() else {
        return Some("must have required property 'tools'".into());
    };
    for (i, t) in tools.iter().enumerate() {
        if !only(
            t,
            &[
                "pluginId",
                "name",
                "description",
                "parameters",
                "command",
                "mcp",
            ],
        ) {
            return Some(format!("at /tools/{i}: unexpected property"));
        }
        let name = t["name"].as_str().unwrap_or("");
        let mut chars = name.chars();
        let good_name = name.len() <= 64
            && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !good_name {
            return Some(format!("at /tools/{i}/name: must match pattern"));
        }
        for key in ["pluginId", "description"] {
            if t[key].as_str().is_none_or(str::is_empty) {
                return Some(format!(
                    "at /tools/{i}/{key}: must not have fewer than 1 characters"
                ));
            }
        }
        if !t["parameters"].is_null() && !t["parameters"].is_object() {
            return Some(format!("at /tools/{i}/parameters: must be object"));
        }
        if !t["mcp"].is_null() && !only(&t["mcp"], &["server", "tool"]) {
            return Some(format!("at /tools/{i}/mcp: unexpected property"));
        }
    }
    None
}

fn res(id: &Value, payload: Value) -> Outgoing {
    Outgoing::Text(json!({"type": "res", "id": id, "ok": true, "payload": payload}).to_string())
}

fn refusal(id: &Value, code: &str, message: &str) -> Outgoing {
    Outgoing::Text(error(id, code, message, Value::Null))
}

/// An operator's request: `agent`, the aborts, `agent.wait`.
fn operator_request(
    frame: &Value,
    hub: &Hub,
    conn: u64,
    admin: bool,
    answers: &mpsc::UnboundedSender<Outgoing>,
) {
    if frame["type"] != "req" {
        return;
    }
    let id = frame["id"].clone();
    let params = &frame["params"];
    let run_id = params["runId"].as_str().unwrap_or("").to_owned();
    match frame["method"].as_str().unwrap_or("") {
        "agent" => agent_request(&id, params, hub, conn, answers),
        "agents.list" => {
            let agents: Vec<Value> = hub.config.agents.iter().map(|a| json!({"id": a})).collect();
            let _ = answers.send(res(&id, json!({"defaultId": hub.config.agents[0], "mainKey": "main", "scope": "per-sender", "agents": agents})));
        }
        method @ ("chat.abort" | "sessions.abort") => {
            let mut s = hub.state.lock().unwrap();
            let answer = match s.runs.get(&run_id) {
                // As OpenClaw: only the starting connection, or an admin.
                Some(run) if run.owner != conn && !admin => {
                    refusal(&id, "INVALID_REQUEST", "unauthorized")
                }
                Some(run) if run.done.is_none() => {
                    run.abort.notify_one();
                    s.aborts.push(json!({"method": method, "params": params}));
                    res(
                        &id,
                        json!({"ok": true, "aborted": true, "runIds": [run_id]}),
                    )
                }
                _ => res(&id, json!({"ok": true, "aborted": false, "runIds": []})),
            };
            let _ = answers.send(answer);
        }
        "agent.wait" => {
            let (state, answers) = (hub.state.clone(), answers.clone());
            let slice = Duration::from_millis(params["timeoutMs"].as_u64().unwrap_or(30_000));
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + slice;
                let status = loop {
                    let over = state
                        .lock()
                        .unwrap()
                        .runs
                        .get(&run_id)
                        .and_then(|r| r.done.as_ref().map(|_| r.aborted));
                    match over {
                        Some(false) => break json!({"runId": run_id, "status": "ok"}),
                        Some(true) => {
                            break json!({"runId": run_id, "status": "error", "stopReason": "rpc"});
                        }
                        None if tokio::time::Instant::now() >= deadline => {
                            break json!({"runId": run_id, "status": "timeout"});
                        }
                        None => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                };
                let _ = answers.send(res(&id, status));
            });
        }
        "node.list" => {
            let s = hub.state.lock().unwrap();
            let state = if s.surface_pending {
                "pending-approval"
            } else {
                "approved"
            };
            let nodes: Vec<Value> = s
                .node_names
                .iter()
                .map(|(node, name)| json!({"nodeId": node, "displayName": name, "approvalState": state, "paired": true, "connected": true}))
                .collect();
            let _ = answers.send(res(&id, json!({"ts": now_ms(), "nodes": nodes})));
        }
        "node.rename" => {
            let mut s = hub.state.lock().unwrap();
            s.renames.push(params.clone());
            let node = params["nodeId"].as_str().unwrap_or("").to_owned();
            let name = params["displayName"]
                .as_str()
                .unwrap_or("")
                .trim()
                .to_owned();
            let answer = match s.node_names.get_mut(&node) {
                Some(stored) if !name.is_empty() => {
                    *stored = name.clone();
                    res(&id, json!({"nodeId": node, "displayName": name}))
                }
                Some(_) => refusal(&id, "INVALID_REQUEST", "displayName required"),
                None => refusal(&id, "INVALID_REQUEST", "unknown nodeId"),
            };
            let _ = answers.send(answer);
        }
        _ => {
            let _ = answers.send(res(&id, json!({"ok": true})));
        }
    }
}

fn agent_request(
    id: &Value,
    params: &Value,
    hub: &Hub,
    conn: u64,
    answers: &mpsc::UnboundedSender<Outgoing>,
) {
    let message = params["message"].as_str().unwrap_or("").to_owned();
    let key = params["idempotencyKey"].as_str().unwrap_or("").to_owned();
    let agent_id = params["agentId"].as_str().unwrap_or("main").to_owned();
    let mut s = hub.state.lock().unwrap();
    s.agent_requests.push(params.clone());
    if let Some(run) = s.runs.get(&key) {
        let answer = match &run.done {
            Some(done) => res(id, done.clone()),
            None => res(
                id,
                json!({"runId": key, "status": "in_flight", "sessionKey": run.session_key, "agentId": run.agent_id}),
            ),
        };
        let _ = answers.send(answer);
        return;
    }
    if message.is_empty() {
        let _ = answers.send(refusal(
            id,
            "INVALID_REQUEST",
            "invalid agent params: at /message: must not have fewer than 1 characters",
        ));
        return;
    }
    if params.get("to").is_some()
        && params.get("agentId").is_none()
        && params.get("sessionKey").is_none()
    {
        // What OpenClaw 2026.9.6 answers a bare destination.
        let _ = answers.send(refusal(id, "UNAVAILABLE", "Session \"agent:main:main\" changed while starting work. Retry. | SESSION_WORK_START_CHANGED"));
        return;
    }
    if !hub.config.agents.contains(&agent_id) {
        let _ = answers.send(refusal(
            id,
            "INVALID_REQUEST",
            &format!("invalid agent params: unknown agent id \"{agent_id}\""),
        ));
        return;
    }
    let session_key = params["sessionKey"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("agent:{agent_id}:main"));
    let abort = Arc::new(tokio::sync::Notify::new());
    s.runs.insert(
        key.clone(),
        Run {
            owner: conn,
            session_key: session_key.clone(),
            agent_id: agent_id.clone(),
            done: None,
            aborted: false,
            abort: abort.clone(),
        },
    );
    drop(s);
    if message.contains("[[drop-early]]") {
        // The run starts, but the link goes before the acceptance.
        let _ = answers.send(Outgoing::Drop);
    } else {
        let _ = answers.send(res(id, json!({"runId": key, "sessionKey": session_key, "agentId": agent_id, "status": "accepted", "acceptedAt": now_ms()})));
    }
    tokio::spawn(fake_turn(
        id.clone(),
        key,
        session_key,
        message,
        hub.clone(),
        (answers.clone(), conn),
        abort,
    ));
}

/// `[[name:arg]]` directives in the message.
fn directive<'a>(message: &'a str, name: &str) -> Option<&'a str> {
    let start = message.find(&format!("[[{name}"))? + name.len() + 2;
    let end = start + message[start..].find("]]")?;
    Some(message[start..end].trim_start_matches(':'))
}

async fn fake_turn(
    id: Value,
    run_id: String,
    session_key: String,
    message: String,
    hub: Hub,
    (owner, owner_conn): (mpsc::UnboundedSender<Outgoing>, u64),
    abort: Arc<tokio::sync::Notify>,
) {
    let seq = std::sync::atomic::AtomicU64::new(0);
    let event = |event: &str, payload: Value| {
        let mut payload = payload;
        payload["runId"] = json!(run_id);
        payload["sessionKey"] = json!(session_key);
        let n = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = hub.to_operators.send((
            None,
            json!({"type": "event", "event": event, "payload": payload, "seq": n}).to_string(),
        ));
    };
    let finish = |payload: Value, aborted: bool| {
        let mut s = hub.state.lock().unwrap();
        if let Some(run) = s.runs.get_mut(&run_id) {
            run.done = Some(payload.clone());
            run.aborted = aborted;
        }
        drop(s);
        let answer = json!({"type": "res", "id": id, "ok": true, "payload": payload});
        let _ = hub
            .to_operators
            .send((Some(owner_conn), answer.to_string()));
    };
    event(
        "agent",
        json!({"stream": "lifecycle", "data": {"phase": "start"}}),
    );
    let mut text = format!("ECHO: {message}");
    let item = format!("{run_id}:1");
    let say = |text: &str, delta: &str, replace: bool| {
        let mut data = json!({"text": text, "delta": delta, "itemId": item});
        if replace {
            data["replace"] = json!(true);
        }
        event("agent", json!({"stream": "assistant", "data": data}));
        event(
            "chat",
            json!({"state": "delta", "deltaText": delta, "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}),
        );
    };
    if let Some(n) = directive(&message, "empty-items").and_then(|n| n.parse::<usize>().ok()) {
        // A failing model retried: each attempt opens an item that never
        // says anything (what OpenClaw streams for `[[fail:500]]`).
        for i in 0..n {
            let data = json!({"text": "", "delta": "", "itemId": format!("{run_id}:empty{i}")});
            event("agent", json!({"stream": "assistant", "data": data}));
        }
    } else {
        say("ECHO:", "ECHO:", false);
    }
    if message.contains("[[drop]]") {
        let _ = owner.send(Outgoing::Drop);
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    if let Some(invoke) = directive(&message, "invoke") {
        let (command, params) = invoke.split_once(' ').unwrap_or((invoke, "{}"));
        event(
            "agent",
            json!({"stream": "item", "data": {"itemId": "tool:call_1", "toolCallId": "call_1", "name": "nodes", "kind": "tool", "phase": "start", "title": format!("Invoke {command} on node"), "status": "running"}}),
        );
        let invoke_id = uuid::Uuid::new_v4().to_string();
        let mut results = hub.results.subscribe();
        let frame = json!({"type": "event", "event": "node.invoke.request", "payload": {"id": invoke_id, "nodeId": "node", "command": command, "paramsJSON": params, "timeoutMs": 15000, "idempotencyKey": uuid::Uuid::new_v4().to_string()}});
        let _ = hub.to_node.send(Outgoing::Text(frame.to_string()));
        let answer = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match results.recv().await {
                    Ok(r) if r["id"] == invoke_id => return r,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return json!({"ok": false, "error": {"code": "GONE"}}),
                }
            }
        })
        .await
        .unwrap_or_else(|_| json!({"ok": false, "error": {"code": "TIMEOUT", "message": "node invoke timed out"}}));
        event(
            "agent",
            json!({"stream": "item", "data": {"itemId": "tool:call_1", "kind": "tool", "phase": "end", "name": "nodes", "status": "completed"}}),
        );
        let seen = if answer["ok"] == true {
            answer["payloadJSON"].as_str().unwrap_or("").to_owned()
        } else {
            format!(
                "{}: {}",
                answer["error"]["code"].as_str().unwrap_or(""),
                answer["error"]["message"].as_str().unwrap_or("")
            )
        };
        text = format!("{text}\nnode said: {seen}");
    }
    let delay = directive(&message, "delay")
        .and_then(|d| d.parse::<f64>().ok())
        .unwrap_or(0.0);
    let aborted = tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs_f64(delay)) => false,
        _ = abort.notified() => true,
    };
    if aborted {
        event("chat", json!({"state": "aborted", "stopReason": "rpc"}));
        event(
            "agent",
            json!({"stream": "lifecycle", "data": {"phase": "end", "status": "cancelled", "aborted": true}}),
        );
        finish(
            json!({"runId": run_id, "status": "timeout", "summary": "aborted", "stopReason": "rpc"}),
            true,
        );
        return;
    }
    if message.contains("[[fail]]") {
        let mut s = hub.state.lock().unwrap();
        if let Some(run) = s.runs.get_mut(&run_id) {
            run.done = Some(json!({"runId": run_id, "status": "error"}));
        }
        drop(s);
        let _ = hub.to_operators.send((Some(owner_conn), json!({"type": "res", "id": id, "ok": false,
            "payload": {"runId": run_id, "status": "error", "summary": "LLM request failed"},
            "error": {"code": "UNAVAILABLE", "message": "LLM request failed: provider rejected the request schema or tool payload."}}).to_string()));
        return;
    }
    if message.contains("[[rewrite]]") {
        say("(draft)", "", true);
    }
    say(&text, text.strip_prefix("ECHO:").unwrap_or(""), false);
    event(
        "agent",
        json!({"stream": "lifecycle", "data": {"phase": "end", "aborted": false}}),
    );
    event(
        "chat",
        json!({"state": "final", "stopReason": "stop", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}),
    );
    finish(
        json!({"runId": run_id, "status": "ok", "summary": "completed",
        "result": {"payloads": [{"text": text, "mediaUrl": null}], "meta": {"durationMs": 1}}}),
        false,
    );
}
