//! Hostile runs of `desktop.stream` against the real node binary: fake VNC
//! servers (small loopback listeners) that stall, lie or flood; a fake
//! gateway whose attach socket sends what it should not, never reads, or
//! goes; malformed parameters; cancels, kills and floods of invocations;
//! password files that are not files. The node must answer in OpenClaw's
//! words, close both sockets, keep its memory bounded, send frames of at
//! most 64 KiB and never print the password.

#![cfg(target_os = "linux")]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::gateway::{Attach, Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, payload};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

const V8: &[u8; 12] = b"RFB 003.008\n";
const PASSWORD: &str = "hunter2-desk-secret";
/// The gateway's attach socket limit; what the node sends must fit.
const MAX_OUT: usize = 64 * 1024;
const MAX_IN: usize = 1 << 20;

/// What the fake VNC server does with its next connections.
#[derive(Clone)]
enum Mode {
    /// Writes these bytes, then holds the connection until the node closes.
    Say(Vec<u8>),
    /// Writes these bytes, then closes.
    SayAndClose(Vec<u8>),
    /// A well-behaved 3.8 server: banner, checks the reply, offers these
    /// types, then hands the connection to the test.
    Offer(Vec<u8>),
}

struct Vnc {
    port: u16,
    mode: Arc<Mutex<Mode>>,
    accepted: Arc<Mutex<usize>>,
    /// When a held connection saw the node close it.
    closed: mpsc::UnboundedReceiver<Instant>,
    /// Connections past the offer.
    handed: mpsc::UnboundedReceiver<TcpStream>,
}

impl Vnc {
    async fn start(mode: Mode) -> Vnc {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(Mutex::new(mode));
        let accepted = Arc::new(Mutex::new(0));
        let (closed_tx, closed) = mpsc::unbounded_channel();
        let (handed_tx, handed) = mpsc::unbounded_channel();
        let (m, a) = (mode.clone(), accepted.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                *a.lock().unwrap() += 1;
                let mode = m.lock().unwrap().clone();
                let (closed_tx, handed_tx) = (closed_tx.clone(), handed_tx.clone());
                tokio::spawn(async move {
                    match mode {
                        Mode::Say(bytes) => {
                            let _ = s.write_all(&bytes).await;
                            drain(&mut s).await;
                            let _ = closed_tx.send(Instant::now());
                        }
                        Mode::SayAndClose(bytes) => {
                            let _ = s.write_all(&bytes).await;
                        }
                        Mode::Offer(types) => {
                            s.write_all(V8).await.unwrap();
                            let mut reply = [0u8; 12];
                            s.read_exact(&mut reply).await.unwrap();
                            assert_eq!(&reply, V8);
                            let mut offer = vec![types.len() as u8];
                            offer.extend(types);
                            s.write_all(&offer).await.unwrap();
                            let _ = handed_tx.send(s);
                        }
                    }
                });
            }
        });
        Vnc {
            port,
            mode,
            accepted,
            closed,
            handed,
        }
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn accepted(&self) -> usize {
        *self.accepted.lock().unwrap()
    }

    async fn wait_closed(&mut self, within: Duration) -> Instant {
        tokio::time::timeout(within, self.closed.recv())
            .await
            .expect("the node kept the VNC connection open")
            .unwrap()
    }

    async fn next(&mut self) -> TcpStream {
        tokio::time::timeout(LONG, self.handed.recv())
            .await
            .expect("no VNC connection got past the offer")
            .unwrap()
    }
}

/// Reads until the peer closes (or fails).
async fn drain(s: &mut TcpStream) -> usize {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n,
        }
    }
}

/// How long until `s` sees the node close it.
async fn closed_within(s: &mut TcpStream, within: Duration) -> Duration {
    let start = Instant::now();
    tokio::time::timeout(within, drain(s))
        .await
        .expect("the node kept the VNC connection open");
    start.elapsed()
}

/// How long until the attach socket ends (close frame, EOF or reset).
async fn ws_closed_within(attach: &mut Attach, within: Duration) -> Duration {
    let start = Instant::now();
    tokio::time::timeout(within, async {
        while let Some(Ok(m)) = attach.ws.next().await {
            if m.is_close() {
                break;
            }
        }
    })
    .await
    .expect("the node kept the attach socket open");
    start.elapsed()
}

fn ticket(n: u8) -> String {
    format!("{n:02x}").repeat(24)
}

fn params(n: u8) -> String {
    let t = ticket(n);
    json!({"ticket": t, "attachPath": format!("/node-desktop/attach?ticket={t}")}).to_string()
}

async fn node(vnc: &Vnc, password_file: Option<&std::path::Path>) -> (FakeGateway, Node) {
    let gw = FakeGateway::start(Config::default()).await;
    let port = vnc.port.to_string();
    let mut args = vec!["--token", TOKEN, "--desktop-vnc-port", port.as_str()];
    let file = password_file.map(|f| f.to_string_lossy().into_owned());
    if let Some(file) = &file {
        args.extend(["--desktop-password-file", file.as_str()]);
    }
    let node = Node::start(&gw.url(), &args);
    gw.wait_hellos(1, LONG).await;
    (gw, node)
}

fn unavailable(result: &Value) -> String {
    assert_eq!(result["ok"], false, "{result}");
    assert_eq!(result["error"]["code"], "UNAVAILABLE", "{result}");
    result["error"]["message"].as_str().unwrap().to_owned()
}

/// The metadata frame: the first the node sends on the attach socket.
async fn metadata(attach: &mut Attach) -> Value {
    match tokio::time::timeout(LONG, attach.ws.next()).await {
        Ok(Some(Ok(Message::Binary(b)))) => serde_json::from_slice(&b).unwrap(),
        other => panic!("no metadata frame: {other:?}"),
    }
}

/// The next binary frame's bytes.
async fn frame(attach: &mut Attach) -> Vec<u8> {
    loop {
        match tokio::time::timeout(LONG, attach.ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => return b.to_vec(),
            Ok(Some(Ok(Message::Pong(_) | Message::Ping(_)))) => continue,
            other => panic!("no frame: {other:?}"),
        }
    }
}

/// A relay under way: invoked, attached, metadata read, the prefix (banner
/// and offer) read; the VNC server's end of it.
async fn relay(gw: &FakeGateway, vnc: &mut Vnc, n: u8) -> (String, Attach, TcpStream) {
    let id = gw.request("desktop.stream", &params(n), 0);
    let mut attach = gw.attach(LONG).await;
    assert_eq!(
        attach.uri,
        format!("/node-desktop/attach?ticket={}", ticket(n))
    );
    let server = vnc.next().await;
    let meta = metadata(&mut attach).await;
    assert_eq!(meta["auth"], "vnc-password", "{meta}");
    let prefix = frame(&mut attach).await;
    assert_eq!(&prefix[..12], V8);
    (id, attach, server)
}

/// The node's memory, kB: (VmRSS, VmHWM).
fn memory(node: &Node) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", node.child.id())).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap()
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_vnc_servers_are_refused_in_openclaws_words_and_let_go() {
    let mut vnc = Vnc::start(Mode::Say(Vec::new())).await;
    let (gw, node) = node(&vnc, None).await;
    let port = vnc.port;
    let unreachable = format!(
        "desktop stream loopback RFB server is unavailable on port {port}; start an authenticated loopback VNC server (for example x11vnc -localhost -rfbauth FILE)"
    );
    let not_rfb = format!(
        "desktop stream target 127.0.0.1:{port} is not an RFB server; set --desktop-vnc-port to the node's VNC server port"
    );
    let refused = "refusing unauthenticated loopback RFB server".to_owned();
    let unsupported = "loopback RFB server security is unsupported".to_owned();
    let with = |head: &[u8], tail: &[u8]| [head, tail].concat();
    let cases: Vec<(&str, Mode, &String)> = vec![
        ("never sends a banner", Mode::Say(vec![]), &unreachable),
        (
            "11 bytes, then stalls",
            Mode::Say(V8[..11].to_vec()),
            &unreachable,
        ),
        (
            "a non-RFB banner",
            Mode::Say(b"SSH-2.0-Open\n".to_vec()),
            &not_rfb,
        ),
        (
            "HTTP",
            Mode::Say(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec()),
            &not_rfb,
        ),
        ("RFB 004", Mode::Say(b"RFB 004.000\n".to_vec()), &not_rfb),
        (
            "count 255, then stalls",
            Mode::Say(with(V8, &[255, 2])),
            &unreachable,
        ),
        ("None only", Mode::Say(with(V8, &[1, 1])), &refused),
        ("None before VNC", Mode::Say(with(V8, &[2, 1, 2])), &refused),
        ("[16, 2]", Mode::Say(with(V8, &[2, 16, 2])), &unsupported),
        ("no types", Mode::Say(with(V8, &[0])), &unsupported),
        (
            "3.3, type 0",
            Mode::Say(with(b"RFB 003.003\n", &[0, 0, 0, 0])),
            &unsupported,
        ),
        (
            "3.3, type 1",
            Mode::Say(with(b"RFB 003.003\n", &[0, 0, 0, 1])),
            &refused,
        ),
        (
            "3.3, type 257",
            Mode::Say(with(b"RFB 003.003\n", &[0, 0, 1, 1])),
            &unsupported,
        ),
        (
            "closes after the banner",
            Mode::SayAndClose(V8.to_vec()),
            &unreachable,
        ),
        ("closes at once", Mode::SayAndClose(vec![]), &not_rfb),
    ];
    for (n, (what, mode, expected)) in cases.into_iter().enumerate() {
        let held = matches!(mode, Mode::Say(_));
        vnc.set(mode);
        let start = Instant::now();
        let id = gw.request("desktop.stream", &params(n as u8), 0);
        let result = gw.result(&id, Duration::from_secs(10)).await;
        let took = start.elapsed();
        assert_eq!(&unavailable(&result), expected, "{what}");
        assert!(
            took < Duration::from_secs(3),
            "{what}: answered after {took:?}"
        );
        assert!(gw.try_attach().is_none(), "{what}: attached anyway");
        if held {
            let at = vnc.wait_closed(Duration::from_secs(2)).await;
            assert!(at.elapsed() < Duration::from_secs(2), "{what}");
        }
        eprintln!("{what}: answered in {took:?}");
    }
    assert!(!node.stderr().contains("panicked"), "{}", node.stderr());
}

#[tokio::test(flavor = "multi_thread")]
async fn megabytes_after_the_offer_reach_the_gateway_in_frames_of_at_most_64_kib() {
    let mut vnc = Vnc::start(Mode::Offer(vec![2])).await;
    let (gw, _node) = node(&vnc, None).await;
    let (id, mut attach, mut server) = relay(&gw, &mut vnc, 1).await;
    const SENT: usize = 8 << 20;
    let writer = tokio::spawn(async move {
        let chunk = vec![0xA5u8; 256 * 1024];
        for _ in 0..SENT / chunk.len() {
            server.write_all(&chunk).await.unwrap();
        }
        server
    });
    let (mut got, mut largest, mut frames) = (0usize, 0usize, 0usize);
    while got < SENT {
        let f = frame(&mut attach).await;
        assert!(f.len() <= MAX_OUT, "a frame of {} bytes", f.len());
        assert!(f.iter().all(|&b| b == 0xA5));
        largest = largest.max(f.len());
        frames += 1;
        got += f.len();
    }
    assert_eq!(got, SENT);
    eprintln!("{SENT} bytes in {frames} frames, the largest {largest} bytes");
    let mut server = writer.await.unwrap();
    // The VNC server goes: the attach socket closes, the answer is OpenClaw's.
    server.shutdown().await.unwrap();
    drop(server);
    ws_closed_within(&mut attach, Duration::from_secs(2)).await;
    let result = gw.result(&id, LONG).await;
    assert_eq!(payload(&result), json!({"status": "closed"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_attach_side_ends_the_relay_and_both_sockets() {
    let mut vnc = Vnc::start(Mode::Offer(vec![2])).await;
    let (gw, node) = node(&vnc, None).await;

    // A text frame.
    let (id, mut attach, mut server) = relay(&gw, &mut vnc, 1).await;
    attach
        .ws
        .send(Message::text("RFB 003.008\n"))
        .await
        .unwrap();
    let result = gw.result(&id, LONG).await;
    assert_eq!(
        unavailable(&result),
        "gateway sent non-binary desktop stream data"
    );
    closed_within(&mut server, Duration::from_secs(1)).await;
    ws_closed_within(&mut attach, Duration::from_secs(1)).await;

    // Another version than the node's reply, split over two frames.
    let (id, mut attach, mut server) = relay(&gw, &mut vnc, 2).await;
    attach
        .ws
        .send(Message::binary(&b"RFB 003."[..]))
        .await
        .unwrap();
    attach
        .ws
        .send(Message::binary(&b"003\nxx"[..]))
        .await
        .unwrap();
    let result = gw.result(&id, LONG).await;
    assert_eq!(
        unavailable(&result),
        "RFB client changed the inspected protocol version"
    );
    closed_within(&mut server, Duration::from_secs(1)).await;
    ws_closed_within(&mut attach, Duration::from_secs(1)).await;

    // A frame of exactly 1 MiB is carried; one byte more ends the relay.
    let (id, mut attach, mut server) = relay(&gw, &mut vnc, 3).await;
    let mut big = V8.to_vec();
    big.resize(MAX_IN, 7);
    attach.ws.send(Message::binary(big)).await.unwrap();
    let mut buf = vec![0u8; MAX_IN - 12];
    server.read_exact(&mut buf).await.unwrap();
    assert!(buf.iter().all(|&b| b == 7));
    attach
        .ws
        .send(Message::binary(vec![8u8; MAX_IN + 1]))
        .await
        .unwrap();
    let result = gw.result(&id, LONG).await;
    let message = unavailable(&result);
    eprintln!("1 MiB + 1: {message}");
    assert_eq!(drain(&mut server).await, 0, "bytes of the big frame leaked");
    let _ = attach;

    // Abruptly: the TCP connection goes without a closing handshake.
    let (id, attach, mut server) = relay(&gw, &mut vnc, 4).await;
    drop(attach);
    let took = closed_within(&mut server, Duration::from_secs(1)).await;
    eprintln!("abrupt attach close: VNC socket closed in {took:?}");
    assert_eq!(
        payload(&gw.result(&id, LONG).await),
        json!({"status": "closed"})
    );

    // Pings are answered and the relay goes on; a close frame ends it.
    let (id, mut attach, mut server) = relay(&gw, &mut vnc, 5).await;
    attach
        .ws
        .send(Message::Ping(b"p1"[..].into()))
        .await
        .unwrap();
    let pong = tokio::time::timeout(LONG, attach.ws.next()).await.unwrap();
    assert!(
        matches!(pong, Some(Ok(Message::Pong(ref p))) if &p[..] == b"p1"),
        "{pong:?}"
    );
    attach.ws.send(Message::binary(V8.to_vec())).await.unwrap();
    attach
        .ws
        .send(Message::Ping(b"p2"[..].into()))
        .await
        .unwrap();
    attach
        .ws
        .send(Message::binary(&b"after"[..]))
        .await
        .unwrap();
    let mut got = [0u8; 5];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"after");
    server.write_all(b"back").await.unwrap();
    assert_eq!(frame(&mut attach).await, b"back");
    attach.ws.close(None).await.unwrap();
    closed_within(&mut server, Duration::from_secs(1)).await;
    assert_eq!(
        payload(&gw.result(&id, LONG).await),
        json!({"status": "closed"})
    );

    assert!(!node.stderr().contains("panicked"), "{}", node.stderr());
}

#[tokio::test(flavor = "multi_thread")]
async fn data_the_gateway_sends_before_reading_the_metadata_is_carried_after_it() {
    let mut vnc = Vnc::start(Mode::Offer(vec![2])).await;
    let (gw, _node) = node(&vnc, None).await;
    let id = gw.request("desktop.stream", &params(9), 0);
    let mut attach = gw.attach(LONG).await;
    // At once, before anything is read.
    attach.ws.send(Message::binary(V8.to_vec())).await.unwrap();
    attach
        .ws
        .send(Message::binary(&b"early"[..]))
        .await
        .unwrap();
    let mut server = vnc.next().await;
    let mut got = [0u8; 5];
    tokio::time::timeout(LONG, server.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&got, b"early");
    assert_eq!(metadata(&mut attach).await, json!({"auth": "vnc-password"}));
    assert_eq!(frame(&mut attach).await, [&V8[..], &[1, 2]].concat());
    gw.cancel(&id);
    closed_within(&mut server, Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_stays_bounded_when_the_gateway_never_reads_and_the_server_floods() {
    let mut vnc = Vnc::start(Mode::Offer(vec![2])).await;
    let (gw, node) = node(&vnc, None).await;
    let (id, mut attach, mut server) = relay(&gw, &mut vnc, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss0, hwm0) = memory(&node);
    // The server floods; the gateway reads nothing.
    let written = Arc::new(Mutex::new(0usize));
    let w = written.clone();
    let writer = tokio::spawn(async move {
        let chunk = vec![1u8; 64 * 1024];
        loop {
            if server.write_all(&chunk).await.is_err() {
                return;
            }
            *w.lock().unwrap() += chunk.len();
        }
    });
    // The gateway's side floods too, and the server reads nothing.
    attach.ws.send(Message::binary(V8.to_vec())).await.unwrap();
    let big = vec![3u8; MAX_IN];
    let mut sent_down = 0usize;
    let flood_down = async {
        loop {
            attach.ws.send(Message::binary(big.clone())).await.unwrap();
            sent_down += big.len();
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(4), flood_down).await;
    let stuck_at = *written.lock().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss1, hwm1) = memory(&node);
    let written = *written.lock().unwrap();
    eprintln!(
        "flood: server wrote {written} bytes (stuck at {stuck_at}), the gateway {sent_down}; \
         node VmRSS {rss0} → {rss1} kB, VmHWM {hwm0} → {hwm1} kB"
    );
    assert_eq!(written, stuck_at, "the node kept reading the server");
    assert!(written < 32 << 20, "the node took {written} bytes unread");
    assert!(
        sent_down < 32 << 20,
        "the node took {sent_down} bytes unread"
    );
    assert!(hwm1 < hwm0 + 16 * 1024, "VmHWM {hwm0} → {hwm1} kB");
    // Cancelled while both ways are stuck: both sockets close at once.
    writer.abort();
    let start = Instant::now();
    gw.cancel(&id);
    ws_closed_within(&mut attach, Duration::from_secs(1)).await;
    eprintln!("cancel while stuck: attach closed in {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_closes_both_sockets_at_once() {
    let mut vnc = Vnc::start(Mode::Offer(vec![2])).await;
    let (gw, node) = node(&vnc, None).await;
    let (id, mut attach, mut server) = relay(&gw, &mut vnc, 1).await;
    attach.ws.send(Message::binary(V8.to_vec())).await.unwrap();
    server.write_all(b"frame").await.unwrap();
    assert_eq!(frame(&mut attach).await, b"frame");
    let start = Instant::now();
    gw.cancel(&id);
    let (a, b) = tokio::join!(
        closed_within(&mut server, Duration::from_secs(1)),
        ws_closed_within(&mut attach, Duration::from_secs(1))
    );
    eprintln!(
        "cancel: VNC socket closed in {a:?}, attach socket in {b:?} (total {:?})",
        start.elapsed()
    );
    // The node goes on.
    let which = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    assert_eq!(which["ok"], true, "{which}");
    drop(node);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_killed_mid_stream_leaves_no_socket_open() {
    let mut vnc = Vnc::start(Mode::Offer(vec![2])).await;
    let (gw, node) = node(&vnc, None).await;
    let (_id, mut attach, mut server) = relay(&gw, &mut vnc, 1).await;
    node.signal(libc::SIGKILL);
    let (a, b) = tokio::join!(
        closed_within(&mut server, Duration::from_secs(1)),
        ws_closed_within(&mut attach, Duration::from_secs(1))
    );
    eprintln!("SIGKILL: VNC socket closed in {a:?}, attach in {b:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_streams_leaves_the_node_bounded_and_answering() {
    let mut vnc = Vnc::start(Mode::Offer(vec![2])).await;
    let (gw, node) = node(&vnc, None).await;
    let (_, hwm0) = memory(&node);
    const N: usize = 100;
    // What the node holds at once (src/tools/desktop/mod.rs MAX_STREAMS).
    const MAX: usize = 8;
    // Paced: the fake gateway's queue to the node holds 64 events.
    let mut ids = Vec::new();
    for n in 0..N {
        ids.push(gw.request("desktop.stream", &params(n as u8), 0));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Hold every attach socket that comes, reading nothing.
    let mut held = Vec::new();
    let mut servers = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && held.len() < MAX {
        if let Some(a) = gw.try_attach() {
            held.push(a);
            continue;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    while let Ok(s) = vnc.handed.try_recv() {
        servers.push(s);
    }
    let start = Instant::now();
    let which = gw.invoke("system.which", json!({"bins": ["sh"]})).await;
    let answered = start.elapsed();
    assert_eq!(which["ok"], true, "{which}");
    let (rss, hwm) = memory(&node);
    eprintln!(
        "flood of {N}: {} attached, {} VNC connections, system.which in {answered:?}; \
         node VmRSS {rss} kB, VmHWM {hwm0} → {hwm} kB",
        held.len(),
        vnc.accepted()
    );
    assert!(answered < Duration::from_secs(2));
    assert!(hwm < hwm0 + 64 * 1024, "VmHWM {hwm0} → {hwm} kB");
    assert_eq!(held.len(), MAX);
    // The rest are refused at once, in words an operator can act on.
    let mut refused = 0;
    for id in &ids {
        // Those held have no result yet.
        let answered = tokio::time::timeout(
            Duration::from_millis(50),
            gw.result(id, Duration::from_secs(60)),
        )
        .await;
        if let Ok(r) = answered {
            let said = r["error"]["message"].as_str().unwrap_or("").to_owned();
            assert!(said.contains("8 are already open on this node"), "{r}");
            refused += 1;
        }
    }
    assert_eq!(refused, N - MAX);
    assert_eq!(
        vnc.accepted(),
        MAX,
        "a refused stream never reached the VNC server"
    );
    for id in &ids {
        gw.cancel(id);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for s in servers.iter_mut() {
        closed_within(s, Duration::from_secs(2)).await;
    }
    // Their slots came back.
    let (_, _attach, _server) = relay(&gw, &mut vnc, 200).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_params_are_refused_in_openclaws_words_before_any_socket() {
    let vnc = Vnc::start(Mode::Offer(vec![2])).await;
    let (gw, node) = node(&vnc, None).await;
    let t = ticket(0xab);
    let path = format!("/node-desktop/attach?ticket={t}");
    let wrong = "INVALID_REQUEST: desktop stream ticket and attachPath required";
    let huge = "a".repeat(4 << 20);
    let cases: Vec<(String, &str)> = vec![
        (
            json!({"ticket": t, "attachPath": path, "port": 22}).to_string(),
            "INVALID_REQUEST: desktop stream params contain unsupported fields",
        ),
        (
            json!({"ticket": t.to_uppercase(), "attachPath": path.to_uppercase()}).to_string(),
            wrong,
        ),
        (
            json!({"ticket": t, "attachPath": format!("ws://evil.example/node-desktop/attach?ticket={t}")}).to_string(),
            wrong,
        ),
        (
            json!({"ticket": t, "attachPath": format!("/../node-desktop/attach?ticket={t}")}).to_string(),
            wrong,
        ),
        (
            json!({"ticket": t, "attachPath": format!("/node-desktop/attach?ticket={}", ticket(1))}).to_string(),
            wrong,
        ),
        (
            json!({"ticket": huge, "attachPath": format!("/node-desktop/attach?ticket={huge}")}).to_string(),
            wrong,
        ),
        (
            json!({"ticket": t, "attachPath": path, huge.as_str(): 1}).to_string(),
            "INVALID_REQUEST: desktop stream params contain unsupported fields",
        ),
        (
            json!({"ticket": t, "attachPath": path, "ticket2": t}).to_string(),
            "INVALID_REQUEST: desktop stream params contain unsupported fields",
        ),
        (
            format!(r#"{{"ticket":"{t}","attachPath":"{path}""#),
            "INVALID_REQUEST: desktop stream params malformed JSON",
        ),
        (
            "[1,2]".to_owned(),
            "INVALID_REQUEST: desktop stream params required",
        ),
        (
            "{}".to_owned(),
            wrong,
        ),
        (
            json!({"ticket": [t], "attachPath": path}).to_string(),
            wrong,
        ),
    ];
    for (params, expected) in cases {
        let id = gw.request("desktop.stream", &params, 0);
        let result = gw.result(&id, LONG).await;
        let shown: String = params.chars().take(120).collect();
        assert_eq!(unavailable(&result), expected, "{shown}");
    }
    // The same key twice: serde keeps the last.
    let id = gw.request(
        "desktop.stream",
        &format!(
            r#"{{"ticket":"{}","ticket":"{t}","attachPath":"{path}"}}"#,
            ticket(1)
        ),
        0,
    );
    let attach = gw.attach(LONG).await;
    assert_eq!(attach.uri, path, "the last key wins, as in JSON.parse");
    gw.cancel(&id);
    assert_eq!(vnc.accepted(), 1, "only the duplicate-key call may probe");
    assert!(!node.stderr().contains("panicked"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_password_file_is_read_each_call_and_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let mut vnc = Vnc::start(Mode::Offer(vec![2])).await;
    let (gw, node) = node(&vnc, Some(&file)).await;

    let id = gw.request("desktop.stream", &params(1), 0);
    let mut attach = gw.attach(LONG).await;
    let _server = vnc.next().await;
    assert_eq!(
        metadata(&mut attach).await,
        json!({"auth": "vnc-password", "vncPassword": PASSWORD})
    );
    // Ends with an error that might show something of it.
    attach
        .ws
        .send(Message::binary(&b"RFB 003.003\n"[..]))
        .await
        .unwrap();
    let _ = unavailable(&gw.result(&id, LONG).await);

    // Changed between calls: the new one goes.
    let second = format!("{PASSWORD}-2");
    std::fs::write(&file, format!("{second}\r\n")).unwrap();
    let id = gw.request("desktop.stream", &params(2), 0);
    let mut attach = gw.attach(LONG).await;
    let _server = vnc.next().await;
    assert_eq!(
        metadata(&mut attach).await,
        json!({"auth": "vnc-password", "vncPassword": second})
    );
    gw.cancel(&id);

    // An ARD server gets no password.
    vnc.set(Mode::Offer(vec![30]));
    let id = gw.request("desktop.stream", &params(3), 0);
    let mut attach = gw.attach(LONG).await;
    let _server = vnc.next().await;
    assert_eq!(metadata(&mut attach).await, json!({"auth": "ard-account"}));
    gw.cancel(&id);
    vnc.set(Mode::Offer(vec![2]));

    // Not a regular file: a FIFO (nobody writing), /dev/zero, a directory.
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let not_regular = "desktop password file must be a regular file";
    for (n, target) in [
        fifo.as_path(),
        std::path::Path::new("/dev/zero"),
        dir.path(),
    ]
    .into_iter()
    .enumerate()
    {
        let _ = std::fs::remove_file(&file);
        std::os::unix::fs::symlink(target, &file).unwrap();
        let start = Instant::now();
        let id = gw.request("desktop.stream", &params(10 + n as u8), 0);
        let result = gw.result(&id, Duration::from_secs(5)).await;
        assert_eq!(unavailable(&result), not_regular, "{target:?}");
        assert!(start.elapsed() < Duration::from_secs(3));
        assert!(gw.try_attach().is_none());
    }
    // Gone, empty, too large.
    let _ = std::fs::remove_file(&file);
    let id = gw.request("desktop.stream", &params(20), 0);
    let message = unavailable(&gw.result(&id, LONG).await);
    assert!(
        message.starts_with("desktop password file cannot be read"),
        "{message}"
    );
    std::fs::write(&file, "\n").unwrap();
    let id = gw.request("desktop.stream", &params(21), 0);
    assert_eq!(
        unavailable(&gw.result(&id, LONG).await),
        "desktop password file is empty"
    );
    std::fs::write(&file, format!("{PASSWORD}{}", "x".repeat(5000))).unwrap();
    let id = gw.request("desktop.stream", &params(22), 0);
    assert_eq!(
        unavailable(&gw.result(&id, LONG).await),
        "desktop password file is too large"
    );

    tokio::time::sleep(Duration::from_millis(300)).await;
    let printed = node.stderr();
    assert!(
        !printed.contains(PASSWORD),
        "the node printed the password:\n{printed}"
    );
    assert!(!printed.contains("hunter2"), "{printed}");
    // Nor the one-time tickets.
    for n in [1, 2, 3, 20, 21, 22] {
        assert!(!printed.contains(&ticket(n)), "{printed}");
    }
    eprintln!(
        "{}",
        printed
            .lines()
            .filter(|l| l.contains("desktop"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Every readable and writable mapping of `pid`, searched for `needle`.
fn memory_holds(pid: u32, needle: &[u8]) -> usize {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut found = 0;
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (range, perms) = (fields.next().unwrap(), fields.next().unwrap());
        if !perms.starts_with("rw") {
            continue;
        }
        let (a, b) = range.split_once('-').unwrap();
        let (a, b) = (
            u64::from_str_radix(a, 16).unwrap(),
            u64::from_str_radix(b, 16).unwrap(),
        );
        let mut buf = vec![0u8; (b - a) as usize];
        if mem.seek(SeekFrom::Start(a)).is_err() || mem.read_exact(&mut buf).is_err() {
            continue;
        }
        found += buf.windows(needle.len()).filter(|w| *w == needle).count();
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn the_password_is_not_kept_in_the_nodes_memory_once_sent() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    // Long enough that a freed block's free-list words cannot hide it.
    let secret = format!("{PASSWORD}-{}", "q7".repeat(40));
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    let mut vnc = Vnc::start(Mode::Offer(vec![2])).await;
    let (gw, node) = node(&vnc, Some(&file)).await;
    let pid = node.child.id();
    assert_eq!(memory_holds(pid, secret.as_bytes()), 0);
    let (id, mut attach, mut server) = relay(&gw, &mut vnc, 1).await;
    let _ = (&mut attach, &mut server);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let during = memory_holds(pid, secret.as_bytes());
    gw.cancel(&id);
    closed_within(&mut server, Duration::from_secs(1)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = memory_holds(pid, secret.as_bytes());
    // A piece of it too (a buffer that grew leaves its first part behind).
    let head = &secret.as_bytes()[..24];
    let pieces = memory_holds(pid, head);
    eprintln!(
        "password copies in the node's memory: {during} while relaying, {after} after, {pieces} of its head"
    );
    assert_eq!(
        (during, after, pieces),
        (0, 0, 0),
        "the node kept the password"
    );
}
