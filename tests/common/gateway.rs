//! A fake OpenClaw gateway (protocol v4) for the node's tests: it speaks the
//! frames recorded in shared/openclaw/frames — challenge, connect checks
//! (client id, token, device signature, pairing), hello-ok, ticks, pings,
//! invoke requests and cancels — and can drop, fall silent and restart.
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
const ALLOWED_CLIENT_IDS: &[&str] = &["node-host", "openclaw-linux"];

#[derive(Clone, Debug)]
pub struct Config {
    pub token: Option<String>,
    /// Devices need `approve_device` before they may connect.
    pub manual_pairing: bool,
    /// The command surface awaits `approve_surface`.
    pub surface_pending: bool,
    pub tick_ms: u64,
    pub max_payload: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            token: Some(TOKEN.into()),
            manual_pairing: false,
            surface_pending: false,
            tick_ms: 30_000,
            max_payload: 26_214_400,
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
}

pub struct FakeGateway {
    pub addr: SocketAddr,
    config: Config,
    state: Arc<Mutex<State>>,
    /// Frames to push to the connected node.
    to_node: broadcast::Sender<Outgoing>,
    results: broadcast::Sender<Value>,
    stop: Option<oneshot::Sender<()>>,
}

#[derive(Clone, Debug)]
enum Outgoing {
    Text(String),
    Ping,
    Drop,
}

impl FakeGateway {
    pub async fn start(config: Config) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State {
            surface_pending: config.surface_pending,
            ..Default::default()
        }));
        let (to_node, _) = broadcast::channel(64);
        let (results, _) = broadcast::channel(64);
        let mut gw = Self {
            addr,
            config,
            state,
            to_node,
            results,
            stop: None,
        };
        gw.serve(listener);
        gw
    }

    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    fn serve(&mut self, listener: TcpListener) {
        let (stop, mut stopped) = oneshot::channel();
        self.stop = Some(stop);
        let (config, state, to_node, results) = (
            self.config.clone(),
            self.state.clone(),
            self.to_node.clone(),
            self.results.clone(),
        );
        tokio::spawn(async move {
            let mut conns = Vec::new();
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let (config, state, to_node, results) = (config.clone(), state.clone(), to_node.subscribe(), results.clone());
                        conns.push(tokio::spawn(connection(stream, config, state, to_node, results)));
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
        let id = uuid::Uuid::new_v4().to_string();
        self.send_event(
            "node.invoke.request",
            json!({"id": id, "nodeId": "node", "command": command, "paramsJSON": params,
                   "timeoutMs": timeout_ms, "idempotencyKey": uuid::Uuid::new_v4().to_string()}),
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
        s(&params["auth"]["token"]),
        s(&device["nonce"]),
        s(&params["client"]["platform"]).to_lowercase(),
        s(&params["client"]["deviceFamily"]).to_lowercase(),
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

async fn connection(
    stream: tokio::net::TcpStream,
    config: Config,
    state: Arc<Mutex<State>>,
    mut to_node: broadcast::Receiver<Outgoing>,
    results: broadcast::Sender<Value>,
) {
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
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
    let verdict = {
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
            let request = s
                .pair_requests
                .entry(device_id.clone())
                .or_insert_with(|| uuid::Uuid::new_v4().to_string())
                .clone();
            Err(error(
                id,
                "NOT_PAIRED",
                "pairing required: device is not approved yet",
                json!({"code": "PAIRING_REQUIRED", "reason": "not-paired", "requestId": request, "deviceId": device_id, "requestedRole": "node"}),
            ))
        } else {
            let token = s
                .device_tokens
                .entry(device_id.clone())
                .or_insert_with(|| uuid::Uuid::new_v4().simple().to_string())
                .clone();
            s.hello_count += 1;
            Ok(json!({"type": "res", "id": id, "ok": true, "payload": {
                "type": "hello-ok", "protocol": 4,
                "server": {"version": "2026.9.6-fake"},
                "features": {"methods": [], "events": []},
                "auth": {"method": "token", "role": "node", "scopes": [], "deviceToken": token, "issuedAtMs": now_ms()},
                "policy": {"maxPayload": config.max_payload, "maxBufferedBytes": 52428800, "tickIntervalMs": config.tick_ms}}}).to_string())
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
    let (answers_tx, mut answers) = mpsc::unbounded_channel::<String>();
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if state.lock().unwrap().silent { continue; }
                seq += 1;
                let frame = json!({"type": "event", "event": "tick", "payload": {"ts": now_ms()}, "seq": seq});
                if tx.send(Message::text(frame.to_string())).await.is_err() { return; }
            }
            out = to_node.recv() => match out {
                Ok(Outgoing::Text(text)) => { if tx.send(Message::text(text)).await.is_err() { return; } }
                Ok(Outgoing::Ping) => { if tx.send(Message::Ping(vec![1, 2, 3].into())).await.is_err() { return; } }
                Ok(Outgoing::Drop) | Err(broadcast::error::RecvError::Closed) => return,
                Err(_) => {}
            },
            Some(answer) = answers.recv() => { if tx.send(Message::text(answer)).await.is_err() { return; } }
            msg = rx.next(), if !state.lock().unwrap().deaf => match msg {
                Some(Ok(Message::Text(text))) => {
                    let Ok(frame) = serde_json::from_str::<Value>(&text) else { continue };
                    let answer = handle_request(&frame, &state, &results);
                    if let Some(answer) = answer { let _ = answers_tx.send(answer); }
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
