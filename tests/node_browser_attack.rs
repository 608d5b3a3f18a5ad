//! `browser.proxy` against hostile pages: what a page loaded in the
//! node's Chromium may reach, write and make the node hold. Each page is
//! served by a small loopback server of the test's own that records every
//! request it gets, so a request the guard should have stopped shows up.

#![cfg(target_os = "linux")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::browser::{browser_node, chromium, html, peak_mib, route_in, serve};
use common::gateway::FakeGateway;
use common::node::payload;
use serde_json::{Value, json};

async fn route(gw: &FakeGateway, method: &str, path: &str, body: Value) -> Value {
    route_in(gw, method, path, body, 12_000).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_on_an_allowed_host_reaches_no_other_local_address() {
    // The secret: a service on 127.0.0.1 that only this machine reaches.
    let (secret, secret_hits) = serve("127.0.0.1", |_| html("secret".into()));
    let port = secret.rsplit(':').next().unwrap().to_owned();
    // The page: on 127.0.0.2, the one host the owner allowed.
    let page = format!(
        r#"<!doctype html><title>attack</title><body><script>
const S = {port};
const go = (u) => fetch(u, {{ mode: 'no-cors' }}).catch(() => {{}});
go('http://localhost.:' + S + '/fetch-localhost-dot');
go('http://a.localhost.:' + S + '/fetch-sub-localhost-dot');
go('http://127.0.0.1.:' + S + '/fetch-ip-dot');
go('/redirect?to=http://127.0.0.1:' + S + '/redirected');
go('http://[::ffff:7f00:1]:' + S + '/mapped-v6');
go('http://0:' + S + '/zero');
go('http://2130706433:' + S + '/decimal');
go('http://0x7f.1:' + S + '/hex');
new Image().src = 'http://localhost.:' + S + '/img-localhost-dot';
navigator.sendBeacon('http://localhost.:' + S + '/beacon-localhost-dot');
new Worker(URL.createObjectURL(new Blob(["fetch('http://127.0.0.1:" + S + "/worker').catch(()=>{{}}); fetch('http://localhost.:" + S + "/worker-localhost-dot').catch(()=>{{}})"])));
const f = document.createElement('iframe');
f.src = 'data:text/html,<script>fetch("http://127.0.0.1:' + S + '/data-frame").catch(()=>{{}})</scr' + 'ipt>';
document.body.appendChild(f);
const g = document.createElement('iframe');
g.src = 'http://127.0.0.1:' + S + '/frame';
document.body.appendChild(g);
window.open('http://127.0.0.1:' + S + '/popup');
window.open('http://localhost.:' + S + '/popup-localhost-dot');
</script>attack page</body>"#
    );
    let (site, _) = serve("127.0.0.2", move |target| {
        if let Some(to) = target.strip_prefix("/redirect?to=") {
            return ("302 Found", format!("Location: {to}\r\n"), Vec::new());
        }
        html(page.clone())
    });
    let (gw, _node) = browser_node(&["--browser-allow-host", "127.0.0.2"]).await;
    let opened = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/attack.html") }),
    )
    .await;
    assert!(opened.get("error").is_none(), "{opened}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let hits = secret_hits.lock().unwrap().clone();
    assert!(hits.is_empty(), "the page reached 127.0.0.1: {hits:?}");
    // Nor through the agent's own navigation.
    for url in [
        format!("http://localhost.:{port}/nav-localhost-dot"),
        format!("http://a.localhost.:{port}/nav-sub-localhost-dot"),
    ] {
        let b = route(&gw, "POST", "/navigate", json!({ "url": url })).await;
        assert_eq!(
            b["error"]["body"]["reason"], "navigation_blocked",
            "{url}: {b}"
        );
    }
    let hits = secret_hits.lock().unwrap().clone();
    assert!(hits.is_empty(), "the agent reached 127.0.0.1: {hits:?}");
}

/// Bytes of the files under `dir`, recursively.
fn tree_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_bytes(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_cannot_fill_the_disk_with_downloads_nobody_asked_for() {
    let big = Arc::new(vec![b'x'; 48 << 20]);
    let (site, hits) = serve("127.0.0.1", move |target| {
        if target.starts_with("/big") {
            return (
                "200 OK",
                "Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"big.bin\"\r\n".into(),
                big.to_vec(),
            );
        }
        html(
            r#"<!doctype html><title>dl</title><body><script>
for (let i = 0; i < 3; i++) {
  const a = document.createElement('a');
  a.href = '/big' + i; a.download = 'big' + i + '.bin';
  document.body.appendChild(a); a.click();
}
</script>downloads</body>"#
                .into(),
        )
    });
    let (gw, node) = browser_node(&["--browser-allow-host", "127.0.0.1"]).await;
    let opened = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/dl.html") }),
    )
    .await;
    assert!(opened.get("error").is_none(), "{opened}");
    let downloads = node.state().join("browser/downloads");
    let end = Instant::now() + Duration::from_secs(8);
    let mut most = 0;
    while Instant::now() < end {
        most = most.max(tree_bytes(&downloads));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left = tree_bytes(&downloads);
    eprintln!(
        "requests {:?}; downloads dir at most {most} bytes, {left} left",
        hits.lock().unwrap()
    );
    assert!(
        left <= 10 << 20,
        "{left} bytes of downloads nobody asked for stay in {}",
        downloads.display()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_shouting_into_its_console_does_not_swell_the_node() {
    let (site, _) = serve("127.0.0.1", |target| {
        if target.starts_with("/slow") {
            std::thread::sleep(Duration::from_secs(6));
            return html("<title>slow</title>finally".into());
        }
        html(
            r#"<!doctype html><title>loud</title><body><script>
const big = 'x'.repeat(8 << 20);
setInterval(() => { for (let i = 0; i < 4; i++) console.log(big + i); }, 20);
</script>loud</body>"#
                .into(),
        )
    });
    let (gw, node) = browser_node(&["--browser-allow-host", "127.0.0.1"]).await;
    let pid = node.child.id();
    let opened = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/loud.html") }),
    )
    .await;
    assert!(opened.get("error").is_none(), "{opened}");
    let before = peak_mib(pid);
    // While the next page is slow to answer, the loud one keeps talking
    // and the navigation's listener does not read yet.
    let slow = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/slow.html") }),
    )
    .await;
    let after = peak_mib(pid);
    let console = route(&gw, "GET", "/console", json!({})).await;
    eprintln!(
        "node peak RSS {before} MiB before, {after} MiB after; navigate: {}",
        slow.get("error").unwrap_or(&json!("ok"))
    );
    assert!(console.get("error").is_none(), "{console}");
    assert!(after < 600, "the node grew to {after} MiB");
}

/// Modes under `dir` that others than the owner may use.
fn open_modes(dir: &std::path::Path, out: &mut Vec<String>) {
    use std::os::unix::fs::PermissionsExt;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            out.push(format!("{:o} {}", mode, e.path().display()));
        }
        if meta.is_dir() {
            open_modes(&e.path(), out);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kills_at_the_worst_moment() {
    let (site, _) = serve("127.0.0.1", |_| {
        html("<!doctype html><title>calm</title><p>calm page</p>".into())
    });
    let (gw, mut node) = browser_node(&["--browser-allow-host", "127.0.0.1"]).await;
    let opened = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/calm.html") }),
    )
    .await;
    assert!(opened.get("error").is_none(), "{opened}");
    let status = route(&gw, "GET", "/", json!({})).await;
    let pid = status["result"]["pid"].as_u64().unwrap();
    // A call in flight when the browser dies ends at once, not at its time.
    let gw = Arc::new(gw);
    let waiting = {
        let gw = Arc::clone(&gw);
        tokio::spawn(async move {
            let start = Instant::now();
            let p = route(
                &gw,
                "POST",
                "/act",
                json!({ "kind": "wait", "text": "never on this page" }),
            )
            .await;
            (start.elapsed(), p)
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let killed = Instant::now();
    for p in common::descendants(pid as i32) {
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    let (took, answer) = waiting.await.unwrap();
    let after_kill = killed.elapsed();
    eprintln!("in-flight call ended {after_kill:?} after the kill ({took:?} in all): {answer}");
    assert!(
        after_kill < Duration::from_secs(5),
        "the call waited {after_kill:?} on a dead browser"
    );
    // The next call starts a new one.
    let again = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/calm.html") }),
    )
    .await;
    assert!(again.get("error").is_none(), "{again}");
    let shot = route(&gw, "POST", "/screenshot", json!({})).await;
    assert!(shot.get("error").is_none(), "{shot}");
    // No directory under the browser's is open to others, nor any file
    // of ours; Chromium writes a few of its profile's files 0644 (its own
    // umask), behind the profile's 0700.
    let mut open = Vec::new();
    open_modes(&node.state().join("browser"), &mut open);
    eprintln!("open to others under state/browser: {open:#?}");
    let ours: Vec<&String> = open
        .iter()
        .filter(|p| !p.contains("/browser/openclaw/user-data/") || !p.starts_with("6"))
        .collect();
    assert!(ours.is_empty(), "open to others: {ours:#?}");
    // The node SIGKILLed: no browser outlives it.
    let status = route(&gw, "GET", "/", json!({})).await;
    let pid = status["result"]["pid"].as_u64().unwrap();
    let tree = common::descendants(pid as i32);
    node.signal(libc::SIGKILL);
    common::assert_gone_in_time(&tree, "the browser of a SIGKILLed node");
    // Started again on the same state, its profile's lock left behind: a
    // SIGKILL of the browser leaves it, but the sentinel's TERM may reach
    // the browser first and let it clean up (seen under load), so a stale
    // one (a process that does not exist) is put in its place then.
    let lock = node
        .state()
        .join("browser/openclaw/user-data/SingletonLock");
    if lock.symlink_metadata().is_err() {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        std::os::unix::fs::symlink(format!("{}-4194303", host.trim()), &lock).unwrap();
    }
    node.restart(
        &gw.url(),
        &[
            "--token",
            common::gateway::TOKEN,
            "--browser",
            &chromium(),
            "--approval",
            "allow",
            "--browser-allow-host",
            "127.0.0.1",
        ],
    );
    gw.wait_hellos(2, common::node::LONG).await;
    let reopened = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/calm.html") }),
    )
    .await;
    assert!(reopened.get("error").is_none(), "{reopened}");
}

/// The wait is for the next download, whatever the page downloaded
/// before (and however many of those the node has forgotten).
#[tokio::test(flavor = "multi_thread")]
async fn a_page_that_downloaded_much_cannot_blind_the_download_wait() {
    let (site, hits) = serve("127.0.0.1", |target| {
        if let Some(name) = target.strip_prefix("/file/") {
            return (
                "200 OK",
                format!(
                    "Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"{name}\"\r\n"
                ),
                name.as_bytes().to_vec(),
            );
        }
        html(
            r#"<!doctype html><title>many</title><body><script>
const get = (name) => { const a = document.createElement('a'); a.href = '/file/' + name; a.download = name; document.body.appendChild(a); a.click(); };
for (let i = 0; i < 70; i++) get('early' + i + '.txt');
setTimeout(() => get('late.txt'), 4000);
</script>many</body>"#
                .into(),
        )
    });
    let (gw, node) = browser_node(&["--browser-allow-host", "127.0.0.1"]).await;
    let opened = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/many.html") }),
    )
    .await;
    assert!(opened.get("error").is_none(), "{opened}");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let early =
        std::fs::read_dir(node.state().join("browser/downloads")).map_or(0, Iterator::count);
    eprintln!(
        "{early} downloads before the wait; hits {:?}",
        hits.lock().unwrap().len()
    );
    let waited = route(&gw, "POST", "/wait/download", json!({})).await;
    assert_eq!(
        waited["result"]["download"]["suggestedFilename"], "late.txt",
        "{waited}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_stuck_in_a_loop_holds_no_call_past_its_time() {
    let (site, _) = serve("127.0.0.1", |target| {
        if target.starts_with("/stuck") {
            return html(
                "<!doctype html><title>stuck</title><p>stuck</p><script>setTimeout(() => { for (;;) {} }, 300)</script>".into(),
            );
        }
        html("<!doctype html><title>calm</title><p>calm</p>".into())
    });
    let (gw, _node) = browser_node(&[
        "--browser-allow-host",
        "127.0.0.1",
        "--browser-allow-host",
        "localhost",
    ])
    .await;
    let opened = route(
        &gw,
        "POST",
        "/navigate",
        json!({ "url": format!("{site}/stuck.html") }),
    )
    .await;
    assert!(opened.get("error").is_none(), "{opened}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    for (method, path, body) in [
        ("GET", "/text", json!(null)),
        ("GET", "/snapshot", json!(null)),
        ("POST", "/act", json!({ "kind": "wait", "text": "x" })),
        ("POST", "/screenshot", json!({})),
    ] {
        let start = Instant::now();
        let params = json!({ "method": method, "path": path, "body": body, "timeoutMs": 3000, "errorEnvelope": "browser-v1" });
        let p = payload(&gw.invoke("browser.proxy", params).await);
        let took = start.elapsed();
        eprintln!("{method} {path} on a stuck page: {took:?} {}", p["error"]);
        assert!(
            took < Duration::from_millis(4500),
            "{method} {path} took {took:?}"
        );
    }
    // Another site is another renderer: the agent can leave.
    let start = Instant::now();
    let left = route(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{}/calm.html", site.replace("127.0.0.1", "localhost")) }),
    )
    .await;
    eprintln!("open elsewhere: {:?} {}", start.elapsed(), left["error"]);
    assert!(left.get("error").is_none(), "{left}");
    let status = route(&gw, "GET", "/", json!({})).await;
    assert_eq!(status["result"]["running"], true, "{status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agents_endless_script_is_stopped_with_its_call_and_the_tab_lives_on() {
    let (site, _) = serve("127.0.0.1", |_| {
        html("<!doctype html><title>calm</title><p>calm text</p>".into())
    });
    let (gw, _node) =
        browser_node(&["--browser-allow-host", "127.0.0.1", "--browser-evaluate"]).await;
    let opened = route(
        &gw,
        "POST",
        "/tabs/open",
        json!({ "url": format!("{site}/") }),
    )
    .await;
    assert!(opened.get("error").is_none(), "{opened}");
    let start = Instant::now();
    let params = json!({ "method": "POST", "path": "/act", "timeoutMs": 3000, "errorEnvelope": "browser-v1",
                         "body": { "kind": "evaluate", "fn": "() => { for (;;) {} }" } });
    let looped = payload(&gw.invoke("browser.proxy", params).await);
    let took = start.elapsed();
    assert!(looped.get("error").is_some(), "{looped}");
    assert!(
        took < Duration::from_millis(4500),
        "the evaluate took {took:?}"
    );
    // Its script was stopped with it: the same tab answers the next call.
    let params = json!({ "method": "GET", "path": "/text", "timeoutMs": 3000, "errorEnvelope": "browser-v1" });
    let text = payload(&gw.invoke("browser.proxy", params).await);
    assert_eq!(text["result"]["text"], "calm text", "{text}");
}
