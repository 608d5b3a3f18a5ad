//! A file transfer's slot lasts until its answer is written to the
//! gateway: attacked as a slow or stalled gateway would, through a TCP
//! relay that can stop (or slow) reading what the node sends. The slots
//! must come free again once the gateway reads again, or once the link is
//! given up — never leak.

#![cfg(target_os = "linux")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::browser::peak_mib;
use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{Node, error_code, payload};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A relay between the node and the gateway; the node → gateway side can
/// be paused (the gateway stops reading) or limited to bytes per second.
struct Relay {
    url: String,
    paused: watch::Sender<bool>,
    rate: Arc<AtomicU64>,
}

impl Relay {
    async fn start(upstream: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let (paused, _) = watch::channel(false);
        let rate = Arc::new(AtomicU64::new(0));
        let (p, r) = (paused.clone(), rate.clone());
        tokio::spawn(async move {
            while let Ok((node, _)) = listener.accept().await {
                let Ok(gw) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let (mut node_r, mut node_w) = node.into_split();
                let (mut gw_r, mut gw_w) = gw.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut gw_r, &mut node_w).await;
                    let _ = node_w.shutdown().await;
                });
                let mut paused = p.subscribe();
                let rate = r.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 << 10];
                    loop {
                        if paused.wait_for(|p| !*p).await.is_err() {
                            break;
                        }
                        let n = match node_r.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if gw_w.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                        let bps = rate.load(Ordering::Relaxed);
                        if bps > 0 {
                            tokio::time::sleep(Duration::from_secs_f64(n as f64 / bps as f64))
                                .await;
                        }
                    }
                    let _ = gw_w.shutdown().await;
                });
            }
        });
        Relay { url, paused, rate }
    }

    fn pause(&self, on: bool) {
        self.paused.send_replace(on);
    }
}

async fn relayed() -> (FakeGateway, Relay, Node) {
    let gw = FakeGateway::start(Config::default()).await;
    let relay = Relay::start(gw.addr).await;
    let node = Node::start(&relay.url, &["--token", TOKEN]);
    gw.wait_hellos(1, Duration::from_secs(15)).await;
    (gw, relay, node)
}

fn fetch(gw: &FakeGateway, path: &std::path::Path, timeout_ms: u64) -> String {
    gw.request("file.fetch", &json!({"path": path}).to_string(), timeout_ms)
}

/// The two transfer slots are free: two fetches with a short time both
/// run whole.
async fn two_slots_serve(gw: &FakeGateway, path: &std::path::Path, when: &str) {
    let t = Instant::now();
    let ids = [fetch(gw, path, 5_000), fetch(gw, path, 5_000)];
    for id in &ids {
        let r = gw.result(id, Duration::from_secs(10)).await;
        assert_eq!(
            payload(&r)["size"],
            8 << 20,
            "{}",
            &r.to_string()[..300.min(r.to_string().len())]
        );
    }
    eprintln!("two fetches {when}: {:?}", t.elapsed());
}

fn outcome(r: &Value) -> String {
    if r["ok"] == true {
        "ok".into()
    } else {
        r["error"]["code"].as_str().unwrap_or("?").to_owned()
    }
}

/// Two slots' worth of fetches, both answers stuck behind a gateway that
/// stopped reading: once it reads again, every answer arrives and the two
/// slots serve new fetches at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_reader_holds_the_slots_only_until_it_reads_again() {
    let (gw, relay, node) = relayed().await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    std::fs::write(ws.join("big.bin"), vec![0x5au8; 8 << 20]).unwrap();
    std::fs::write(ws.join("small.txt"), "x").unwrap();
    relay.pause(true);
    let t0 = Instant::now();
    let bigs = [
        fetch(&gw, &ws.join("big.bin"), 60_000),
        fetch(&gw, &ws.join("big.bin"), 60_000),
    ];
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // A third waits for a slot; small calls only queue behind the bytes.
    let third = fetch(&gw, &ws.join("big.bin"), 4_000);
    let which = gw.request("system.which", r#"{"bins":["sh"]}"#, 5_000);
    let stat = gw.request(
        "file.stat",
        &json!({"path": ws.join("small.txt")}).to_string(),
        5_000,
    );
    let pre = gw.request(
        "file.fetch",
        &json!({"path": ws.join("big.bin"), "preflightOnly": true}).to_string(),
        5_000,
    );
    tokio::time::sleep(Duration::from_secs(8)).await;
    relay.pause(false);
    let resumed = t0.elapsed();
    for (name, id) in [
        ("big1", &bigs[0]),
        ("big2", &bigs[1]),
        ("third", &third),
        ("which", &which),
        ("stat", &stat),
        ("preflight", &pre),
    ] {
        let r = gw.result(id, Duration::from_secs(60)).await;
        eprintln!("{name}: {} at {:?}", outcome(&r), t0.elapsed());
        match name {
            "big1" | "big2" => {
                assert_eq!(payload(&r)["size"], 8 << 20, "{}", &r.to_string()[..300])
            }
            "third" => assert_eq!(error_code(&r), "TIMEOUT", "{r}"),
            _ => assert_eq!(r["ok"], true, "{name}: {r}"),
        }
    }
    eprintln!("resumed at {resumed:?}");
    two_slots_serve(&gw, &ws.join("big.bin"), "after the stall").await;
    assert_eq!(gw.connects().len(), 1, "no reconnect needed");
    eprintln!("peak resident memory: {} MiB", peak_mib(node.child.id()));
}

/// A gateway that never reads again: the node gives the link up (its
/// 20 s send limit), reconnects, and the slots the stuck answers held are
/// free on the new link.
#[tokio::test(flavor = "multi_thread")]
async fn a_link_given_up_frees_the_slots_its_answers_held() {
    let (gw, relay, node) = relayed().await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    std::fs::write(ws.join("big.bin"), vec![0x5au8; 8 << 20]).unwrap();
    relay.pause(true);
    let t0 = Instant::now();
    for _ in 0..2 {
        fetch(&gw, &ws.join("big.bin"), 120_000);
    }
    // Waits for a slot, then is cancelled by the gateway.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let cancelled = fetch(&gw, &ws.join("big.bin"), 120_000);
    tokio::time::sleep(Duration::from_millis(500)).await;
    gw.cancel(&cancelled);
    // Past the node's send limit, the gateway reads again (the old link's
    // bytes flow, then its end; the node is already on its way back).
    tokio::time::sleep(Duration::from_secs(24)).await;
    relay.pause(false);
    for _ in 0..60 {
        if gw.connects().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "accepted {} connects {} log:\n{}",
        gw.accepted(),
        gw.connects().len(),
        node.stderr.lock().unwrap()
    );
    gw.wait_hellos(2, Duration::from_secs(1)).await;
    eprintln!("reconnected at {:?}", t0.elapsed());
    two_slots_serve(&gw, &ws.join("big.bin"), "on the new link").await;
    let log = node.stderr.lock().unwrap().clone();
    assert!(
        log.contains("the gateway stopped reading"),
        "the node gave the link up for its reason: {log}"
    );
    eprintln!("peak resident memory: {} MiB", peak_mib(node.child.id()));
}

/// Many fetches against a gateway reading 24 MB/s: all answered, memory
/// bounded by the two slots.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_against_a_slow_reader_keeps_memory_bounded() {
    let (gw, relay, node) = relayed().await;
    let ws = std::fs::canonicalize(node.ws()).unwrap();
    std::fs::write(ws.join("eight.bin"), vec![0x5au8; 8 << 20]).unwrap();
    relay.rate.store(24 << 20, Ordering::Relaxed);
    let t0 = Instant::now();
    let ids: Vec<String> = (0..20)
        .map(|_| fetch(&gw, &ws.join("eight.bin"), 120_000))
        .collect();
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    for id in &ids {
        let r = gw.result(id, Duration::from_secs(120)).await;
        *codes.entry(outcome(&r)).or_default() += 1;
    }
    let peak = peak_mib(node.child.id());
    eprintln!(
        "20 × 8 MiB at 24 MB/s: {codes:?} in {:?}, peak {peak} MiB",
        t0.elapsed()
    );
    assert!(peak < 400, "peak resident memory {peak} MiB");
    let which = gw.request("system.which", r#"{"bins":["sh"]}"#, 5_000);
    assert_eq!(gw.result(&which, Duration::from_secs(10)).await["ok"], true);
}
