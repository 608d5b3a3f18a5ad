//! A stand-in Ollama on 127.0.0.1:11434 (no Ollama server is packaged
//! here): the four endpoints OpenClaw's node inference reads (`/api/tags`,
//! `/api/ps`, `/api/show`, `/api/chat`) with the fields it reads, every
//! request recorded, and misbehaviour on demand (hang, a status, an
//! endless or stalled body, a redirect, 10,000 models).
//!
//! The port is fixed (the node never asks another), so a stand-in, or a
//! test that needs Ollama *not* running, first takes [`PortLock`]: an
//! exclusive `flock` shared by every test process, so such tests never
//! overlap, within a test binary or across them.

use std::collections::HashMap;
use std::convert::Infallible;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

pub const PORT: u16 = 11434;

/// Holds port 11434 for one test: released on drop.
pub struct PortLock(std::fs::File);

impl PortLock {
    pub fn take() -> Self {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(std::env::temp_dir().join("clawbot-test-ollama-11434.lock"))
            .unwrap();
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock");
        PortLock(file)
    }
}

/// How one path misbehaves.
#[derive(Debug, Clone)]
pub enum Misbehave {
    /// Never answers (the connection stays open).
    Hang,
    /// This status and body.
    Status(u16, String),
    /// 200, then bytes forever.
    Endless,
    /// 200, one chunk, then nothing.
    Stall,
    /// A redirect to this location.
    Redirect(String),
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub body: String,
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    misbehave: HashMap<String, Misbehave>,
    /// `/api/tags` lists this many generated models instead of the fixture.
    many: Option<(usize, Vec<&'static str>)>,
    /// `/api/show` of one model misbehaves (the fixture's `broken:1b`
    /// answers 500 always).
    chat_reply: Option<Value>,
}

/// The running stand-in: stopped (and the port freed) on drop.
pub struct StandIn {
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _lock: PortLock,
}

impl StandIn {
    pub fn start() -> Self {
        let lock = PortLock::take();
        let state = Arc::new(Mutex::new(State::default()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let shared = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = bind().await;
                ready_tx.send(()).unwrap();
                let accept = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        let state = Arc::clone(&shared);
                        tokio::spawn(async move {
                            let service = hyper::service::service_fn(move |req| {
                                let state = Arc::clone(&state);
                                async move { Ok::<_, Infallible>(answer(req, state).await) }
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
            // Dropping the runtime ends every connection it holds.
        });
        ready.recv().unwrap();
        StandIn {
            state,
            stop: Some(stop),
            thread: Some(thread),
            _lock: lock,
        }
    }

    /// Makes `path` misbehave from now on.
    pub fn misbehave(&self, path: &str, how: Misbehave) {
        self.state
            .lock()
            .unwrap()
            .misbehave
            .insert(path.to_owned(), how);
    }

    /// `/api/tags` lists `n` models `m00000`… whose `/api/show` says
    /// `capabilities`.
    pub fn many(&self, n: usize, capabilities: Vec<&'static str>) {
        self.state.lock().unwrap().many = Some((n, capabilities));
    }

    /// `/api/chat` answers this instead of its usual "pong".
    pub fn chat_reply(&self, reply: Value) {
        self.state.lock().unwrap().chat_reply = Some(reply);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    pub fn seen_at(&self, path: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.path == path).collect()
    }

    /// Stops serving; the port stays ours (a test of Ollama gone).
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn bind() -> tokio::net::TcpListener {
    // A port another process just freed may linger a moment.
    for _ in 0..100 {
        if let Ok(l) = tokio::net::TcpListener::bind(("127.0.0.1", PORT)).await {
            return l;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("cannot bind 127.0.0.1:{PORT}: is an Ollama running here?");
}

type Body = BoxBody<Bytes, Infallible>;

fn full(status: u16, body: impl Into<Bytes>) -> hyper::Response<Body> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json; charset=utf-8")
        .body(Full::new(body.into()).boxed())
        .unwrap()
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    state: Arc<Mutex<State>>,
) -> hyper::Response<Body> {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
        .unwrap_or_default();
    let (misbehave, many, chat_reply) = {
        let mut s = state.lock().unwrap();
        s.seen.push(Seen {
            method: method.clone(),
            path: path.clone(),
            body: body.clone(),
        });
        (
            s.misbehave.get(&path).cloned(),
            s.many.clone(),
            s.chat_reply.clone(),
        )
    };
    match misbehave {
        Some(Misbehave::Hang) => {
            std::future::pending::<()>().await;
            unreachable!()
        }
        Some(Misbehave::Status(status, body)) => return full(status, body),
        Some(Misbehave::Redirect(to)) => {
            return hyper::Response::builder()
                .status(302)
                .header("location", to)
                .body(Full::new(Bytes::new()).boxed())
                .unwrap();
        }
        Some(Misbehave::Endless) => {
            let chunk = Bytes::from(vec![b' '; 64 * 1024]);
            let stream = futures_util::stream::repeat_with(move || {
                Ok::<_, Infallible>(Frame::data(chunk.clone()))
            });
            return hyper::Response::builder()
                .status(200)
                .body(BodyExt::boxed(StreamBody::new(stream)))
                .unwrap();
        }
        Some(Misbehave::Stall) => {
            let first = futures_util::stream::once(async {
                Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"{\"model\":")))
            });
            let stream = futures_util::StreamExt::chain(first, futures_util::stream::pending());
            return hyper::Response::builder()
                .status(200)
                .body(BodyExt::boxed(StreamBody::new(stream)))
                .unwrap();
        }
        None => {}
    }
    let asked: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    match (method.as_str(), path.as_str()) {
        ("GET", "/api/tags") => match many {
            Some((n, _)) => {
                let models: Vec<Value> = (0..n)
                    .map(|i| json!({"name": format!("m{i:05}"), "size": 1000 + i}))
                    .collect();
                full(200, json!({ "models": models }).to_string())
            }
            None => full(200, tags().to_string()),
        },
        ("GET", "/api/ps") => full(
            200,
            json!({"models": [{"name": "llama3.2:1b", "model": "llama3.2:1b", "size": 1}]})
                .to_string(),
        ),
        ("POST", "/api/show") => {
            let name = asked["model"].as_str().unwrap_or("");
            if let Some((_, caps)) = many {
                return full(200, json!({ "capabilities": caps }).to_string());
            }
            match show(name) {
                Some(v) => full(200, v.to_string()),
                None if name == "broken:1b" => full(500, r#"{"error":"boom"}"#),
                None => full(404, format!(r#"{{"error":"model '{name}' not found"}}"#)),
            }
        }
        ("POST", "/api/chat") => {
            let reply = chat_reply.unwrap_or_else(|| {
                json!({
                    "model": asked["model"],
                    "created_at": "2026-11-26T10:00:00Z",
                    "message": {"role": "assistant", "content": "pong"},
                    "done": true,
                    "done_reason": "stop",
                    "prompt_eval_count": 12,
                    "eval_count": 2,
                    "load_duration": 1_500_000,
                    "total_duration": 25_000_000
                })
            });
            full(200, reply.to_string())
        }
        _ => full(404, "404 page not found"),
    }
}

/// The fixture's `/api/tags`: two chat models and one loaded, an
/// embedding model, a remote one, a cloud ref, one whose `/api/show`
/// lacks `completion`, one whose `/api/show` fails, two of one size
/// (their names decide), and a name with `/../` in it (only echoed).
pub fn tags() -> Value {
    let details = |family: &str, size: &str| json!({"format": "gguf", "family": family, "families": [family], "parameter_size": size, "quantization_level": "Q4_K_M"});
    json!({"models": [
        {"name": "qwen3:0.6b", "model": "qwen3:0.6b", "modified_at": "2026-11-20T09:00:00.123456789Z", "size": 522_653_767u64, "digest": "7df6b6e09427", "details": details("qwen3", "751.63M")},
        {"name": "nomic-embed-text:latest", "model": "nomic-embed-text:latest", "modified_at": "2026-11-19T09:00:00Z", "size": 274_302_450u64, "digest": "0a109f422b47", "details": details("nomic-bert", "137M")},
        {"name": "remote-llama:70b", "model": "remote-llama:70b", "remote_host": "https://ollama.com:443", "remote_model": "llama:70b", "size": 384, "details": details("llama", "70B")},
        {"name": "kimi-k2:1t-cloud", "model": "kimi-k2:1t-cloud", "size": 340, "details": details("kimi", "1T")},
        {"name": "nocomplete:1b", "model": "nocomplete:1b", "size": 900_000_000u64, "details": details("bert", "1B")},
        {"name": "broken:1b", "model": "broken:1b", "size": 800_000_000u64, "details": {"context_length": 2048}},
        {"name": "llama3.2:1b", "model": "llama3.2:1b", "modified_at": "2026-11-21T09:00:00Z", "size": 1_321_098_329u64, "details": details("llama", "1.2B")},
        {"name": "llama3.1:8b", "model": "llama3.1:8b", "size": 4_920_753_328u64, "details": details("llama", "8.0B")},
        {"name": "llama3:8b", "model": "llama3:8b", "size": 4_920_753_328u64, "details": details("llama", "8.0B")},
        {"name": "evil/../../etc/passwd:latest", "model": "evil", "size": 10, "details": {}},
        {"name": "", "size": 1},
        {"size": 2}
    ]})
}

/// The fixture's `/api/show` answers.
fn show(name: &str) -> Option<Value> {
    let chat = |info: Value, parameters: &str, caps: Value| json!({"license": "…", "modelfile": "# Modelfile", "parameters": parameters, "template": "{{ .Prompt }}", "details": {}, "model_info": info, "capabilities": caps});
    Some(match name {
        "qwen3:0.6b" => chat(
            json!({"general.architecture": "qwen3", "qwen3.context_length": 40960}),
            "temperature 0.6\nstop \"<|im_end|>\"",
            json!(["completion", "tools", "thinking"]),
        ),
        "nomic-embed-text:latest" => chat(
            json!({"nomic-bert.context_length": 2048}),
            "",
            json!(["embedding"]),
        ),
        "nocomplete:1b" => chat(json!({}), "", json!(["vision"])),
        "llama3.2:1b" => chat(
            json!({"general.architecture": "llama", "llama.context_length": 8192}),
            "num_ctx 16384\nstop \"<|eot_id|>\"",
            json!(["completion", "tools"]),
        ),
        "llama3.1:8b" | "llama3:8b" => chat(
            json!({"llama.context_length": 131072}),
            "",
            json!(["completion"]),
        ),
        "evil/../../etc/passwd:latest" => chat(json!({}), "", json!(["completion"])),
        _ => return None,
    })
}
