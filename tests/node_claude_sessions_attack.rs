//! Hostile Claude directories and callers against the real node (fake
//! gateway): broken and huge JSONL, fields the gateway would reject,
//! links and index entries leading out of the projects root, a FIFO named
//! like a transcript, ten thousand and one files, hostile cursors, and a
//! transcript changing between pages. Every page the node answers goes
//! through the gateway's own checks: one bad row there fails the page.

#![cfg(unix)]

mod common;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use common::claude::{A, C, ClaudeDir, cursor};
use common::claude_pages::{check_catalog_page, check_transcript_page};
use common::gateway::{Config, FakeGateway, TOKEN};
use common::node::{LONG, Node, payload};
use serde_json::{Value, json};

const LIST: &str = "anthropic.claude.sessions.list.v1";
const READ: &str = "anthropic.claude.sessions.read.v1";

async fn node_on(claude: &Path) -> (FakeGateway, Node) {
    let gw = FakeGateway::start(Config::default()).await;
    let node = Node::start_with_env(
        &gw.url(),
        &["--token", TOKEN, "--claude-sessions"],
        &[("CLAUDE_CONFIG_DIR", claude)],
    );
    gw.wait_hellos(1, LONG).await;
    (gw, node)
}

async fn list(gw: &FakeGateway, params: Value) -> Value {
    let page = payload(&gw.invoke(LIST, params).await);
    check_catalog_page(&page).unwrap_or_else(|e| panic!("{e}\n{page}"));
    page
}

async fn read(gw: &FakeGateway, params: Value) -> Value {
    let page = payload(&gw.invoke(READ, params.clone()).await);
    check_transcript_page(&page, params["threadId"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    page
}

fn message(result: &Value) -> String {
    assert_eq!(result["ok"], false, "{result}");
    assert_eq!(result["error"]["code"], "INVALID_REQUEST", "{result}");
    result["error"]["message"].as_str().unwrap().to_owned()
}

fn rows(page: &Value) -> Vec<Value> {
    page["sessions"].as_array().unwrap().clone()
}

fn row<'a>(rows: &'a [Value], id: &str) -> Option<&'a Value> {
    rows.iter().find(|r| r["threadId"] == id)
}

/// A CLI session's first user line.
fn user(id: &str, extra: Value) -> String {
    let mut line = json!({"type": "user", "sessionId": id, "entrypoint": "cli",
        "cwd": "/w", "timestamp": "2025-01-01T00:00:00Z", "uuid": format!("{id}-u"),
        "message": {"role": "user", "content": "hello"}});
    for (k, v) in extra.as_object().unwrap() {
        line[k] = v.clone();
    }
    line.to_string()
}

fn write(dir: &Path, rel: &str, body: impl AsRef<[u8]>) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_jsonl_never_yields_a_row_the_gateway_rejects() {
    let claude = tempfile::tempdir().unwrap();
    let p = claude.path().join("projects/-w");
    let long = "x".repeat(501);
    write(&p, "empty.jsonl", "");
    write(&p, "nonl.jsonl", user("nonl", json!({})));
    write(&p, "crlf.jsonl", format!("{}\r\n", user("crlf", json!({}))));
    let mut bad_utf8 = b"\xff\xfe\n".to_vec();
    bad_utf8.extend(user("utf8", json!({"cwd": "/w/\u{fffd}"})).as_bytes());
    bad_utf8.extend(b"\n\xc3\n");
    write(&p, "utf8.jsonl", bad_utf8);
    write(
        &p,
        "garbage.jsonl",
        format!("{{\n[1,2]\nnull\n\"s\"\n{}\n", user("garbage", json!({}))),
    );
    write(
        &p,
        "stem.jsonl",
        format!("{}\n", user("other-id", json!({}))),
    );
    write(
        &p,
        "role.jsonl",
        format!(
            "{}\n",
            user(
                "role",
                json!({"message": {"role": "assistant", "content": "x"}})
            )
        ),
    );
    write(
        &p,
        "meta.jsonl",
        format!("{}\n", user("meta", json!({"isMeta": true}))),
    );
    write(
        &p,
        "side.jsonl",
        format!("{}\n", user("side", json!({"isSidechain": true}))),
    );
    write(
        &p,
        "sdk.jsonl",
        format!("{}\n", user("sdk", json!({"entrypoint": "sdk-ts"}))),
    );
    // Fields over their bounds or blank: left out, never sent as they are.
    write(
        &p,
        "fields.jsonl",
        format!(
            "{}\n",
            user(
                "fields",
                json!({"cwd": "  ", "gitBranch": long, "version": "v".repeat(257),
                       "timestamp": "NaN", "message": {"role": "user", "content": long}})
            )
        ),
    );
    write(
        &p,
        "titles.jsonl",
        format!(
            "{}\n{}\n{}\n",
            user("titles", json!({})),
            json!({"type": "ai-title", "aiTitle": long, "sessionId": "titles"}),
            json!({"type": "agent-color", "agentColor": "", "sessionId": "titles"})
        ),
    );
    std::fs::create_dir_all(p.join("dir.jsonl")).unwrap();
    mkfifo(&p.join("fifo.jsonl"));
    // An index whose entries are hostile in every field.
    write(
        &p,
        "sessions-index.json",
        json!({"entries": [
            {"sessionId": "crlf", "summary": long, "firstPrompt": "from the index",
             "projectPath": "", "gitBranch": long, "created": "not a date", "modified": "2025-13-45"},
            {"sessionId": "fifo", "summary": "a fifo"},
            {"sessionId": "dir", "summary": "a directory"},
            {"sessionId": "../../x", "summary": "a path for an id"},
            {"sessionId": "", "summary": "blank"},
            {"sessionId": 5},
            "not an entry",
        ]})
        .to_string(),
    );
    let (gw, _node) = node_on(claude.path()).await;
    let started = Instant::now();
    let page = list(&gw, json!({})).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a FIFO blocked the list"
    );
    let rows = rows(&page);
    let mut ids: Vec<&str> = rows
        .iter()
        .map(|r| r["threadId"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["crlf", "fields", "garbage", "nonl", "titles", "utf8"]);
    let crlf = row(&rows, "crlf").unwrap();
    assert_eq!(
        crlf["name"], "from the index",
        "a 501-unit summary falls back"
    );
    assert!(crlf.get("cwd").is_none() && crlf.get("gitBranch").is_none());
    assert!(crlf.get("createdAt").is_none() && crlf.get("updatedAt").is_none());
    let fields = row(&rows, "fields").unwrap();
    assert_eq!(fields["name"], Value::Null);
    for absent in ["cwd", "gitBranch", "cliVersion", "createdAt"] {
        assert!(fields.get(absent).is_none(), "{absent}: {fields}");
    }
    let titles = row(&rows, "titles").unwrap();
    assert_eq!(titles["name"], "hello");
    assert!(titles.get("color").is_none());
    assert_eq!(row(&rows, "utf8").unwrap()["cwd"], "/w/\u{fffd}");
    // What is not listed cannot be read.
    for id in ["fifo", "dir", "sdk", "side", "stem", "empty"] {
        assert_eq!(
            message(&gw.invoke(READ, json!({"threadId": id})).await),
            "Error: Claude session is unavailable",
            "{id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_outside_the_projects_root_is_read() {
    let claude = tempfile::tempdir().unwrap();
    let projects = claude.path().join("projects");
    let outside = claude.path().join("outside");
    write(
        &outside,
        "esc.jsonl",
        format!("{}\n", user("esc", json!({}))),
    );
    write(
        &outside,
        "far.jsonl",
        format!("{}\n", user("far", json!({}))),
    );
    write(
        &outside,
        "idx.jsonl",
        format!("{}\n", user("idx", json!({}))),
    );
    write(
        &outside,
        "proj/dirlink.jsonl",
        format!("{}\n", user("dirlink", json!({}))),
    );
    // An index outside naming a file inside: OpenClaw follows a linked
    // index anywhere; we read none whose real path is outside.
    write(
        &outside,
        "sessions-index.json",
        json!({"entries": [{"sessionId": "inq", "summary": "via a linked index"}]}).to_string(),
    );
    write(&projects, "q/inq.jsonl", "");
    std::fs::create_dir_all(projects.join("p")).unwrap();
    // A transcript that is a link out, a project directory that is one,
    // a linked index, and index entries naming files outside.
    std::os::unix::fs::symlink(outside.join("esc.jsonl"), projects.join("p/esc.jsonl")).unwrap();
    std::os::unix::fs::symlink(outside.join("proj"), projects.join("linked")).unwrap();
    std::os::unix::fs::symlink(
        outside.join("sessions-index.json"),
        projects.join("q/sessions-index.json"),
    )
    .unwrap();
    write(
        &projects,
        "p/sessions-index.json",
        json!({"entries": [
            {"sessionId": "idx", "fullPath": outside.join("idx.jsonl"), "summary": "outside"},
            {"sessionId": "idx", "fullPath": projects.join("p/../../outside/idx.jsonl"), "summary": "dot-dot"},
            {"sessionId": "dirlink", "fullPath": projects.join("linked/dirlink.jsonl"), "summary": "through a link"},
            {"sessionId": "esc", "summary": "a linked file"},
        ]})
        .to_string(),
    );
    let (gw, _node) = node_on(claude.path()).await;
    let page = list(&gw, json!({})).await;
    assert_eq!(rows(&page), Vec::<Value>::new(), "{page}");
    for id in ["esc", "far", "idx", "dirlink", "inq"] {
        assert_eq!(
            message(&gw.invoke(READ, json!({"threadId": id})).await),
            "Error: Claude session is unavailable"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_thousand_and_one_files() {
    let claude = tempfile::tempdir().unwrap();
    let p = claude.path().join("projects/-w");
    std::fs::create_dir_all(&p).unwrap();
    for i in 0..10_001 {
        let id = format!("s{i:05}");
        std::fs::write(
            p.join(format!("{id}.jsonl")),
            format!("{}\n", user(&id, json!({}))),
        )
        .unwrap();
    }
    write(
        &claude.path().join("projects/-x"),
        "late.jsonl",
        format!("{}\n", user("late", json!({}))),
    );
    let (gw, _node) = node_on(claude.path()).await;
    let started = Instant::now();
    let first = list(&gw, json!({"limit": 100})).await;
    assert_eq!(first["nextCursor"], cursor(100));
    // 10,000 files at most are scanned: `-w` (before `-x`) gives them
    // all, its last in byte order left out, and `-x` none.
    let last = list(&gw, json!({"limit": 100, "cursor": cursor(9_950)})).await;
    assert_eq!(rows(&last).len(), 50);
    assert!(last.get("nextCursor").is_none());
    for id in ["s10000", "late"] {
        let found = list(&gw, json!({"searchTerm": id})).await;
        assert!(rows(&found).is_empty(), "{id}");
    }
    let found = list(&gw, json!({"searchTerm": "s09999"})).await;
    assert_eq!(rows(&found).len(), 1);
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_huge_sparse_file_is_listed_from_its_head() {
    let claude = tempfile::tempdir().unwrap();
    let p = claude.path().join("projects/-w");
    std::fs::create_dir_all(&p).unwrap();
    let mut huge = std::fs::File::create(p.join("big.jsonl")).unwrap();
    writeln!(huge, "{}", user("big", json!({}))).unwrap();
    huge.set_len(100_000_000).unwrap();
    let (gw, _node) = node_on(claude.path()).await;
    let started = Instant::now();
    let page = list(&gw, json!({})).await;
    assert_eq!(rows(&page)[0]["threadId"], "big");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Read from the end: 64 MiB of a hole without a line is too far.
    assert_eq!(
        message(&gw.invoke(READ, json!({"threadId": "big"})).await),
        "Error: Claude transcript page exceeded the safe scan limit"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_items_are_cut_and_pages_stay_valid() {
    let claude = tempfile::tempdir().unwrap();
    let p = claude.path().join("projects/-w");
    let big = "y".repeat(5 << 20);
    let body = format!(
        "{}\n{}\n{}\n",
        user("big", json!({})),
        json!({"type": "assistant", "sessionId": "big", "uuid": "huge",
               "message": {"role": "assistant", "content": [{"type": "text", "text": big}]}}),
        json!({"type": "user", "sessionId": "big", "uuid": "last", "timestamp": " 2025 ",
               "message": {"role": "user", "content": "after", "model": "m".repeat(257)}})
    );
    write(&p, "big.jsonl", body);
    let (gw, _node) = node_on(claude.path()).await;
    let page = read(&gw, json!({"threadId": "big"})).await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["timestamp"], "2025", "trimmed");
    assert!(items[0].get("model").is_none(), "over 256: left out");
    assert_eq!(items[1]["truncated"], true);
    assert!(items[1].get("content").is_none());
    assert_eq!(
        items[1]["text"].as_str().unwrap().len(),
        1_000_000 + "\n\n[oversized Claude item truncated]".len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_cursors_and_params() {
    let claude = ClaudeDir::fixture();
    let (gw, _node) = node_on(claude.path()).await;
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    for bad in [
        json!("not base64!"),
        json!(b64(r#"{"offset":-1}"#)),
        json!(b64(r#"{"offset":1.5}"#)),
        json!(b64(r#"{"offset":"2"}"#)),
        json!("a".repeat(257)),
        json!(" eyJvZmZzZXQiOjJ9"),
        json!(""),
        json!(null),
        json!(2),
    ] {
        assert_eq!(
            message(&gw.invoke(LIST, json!({"cursor": bad})).await),
            "Error: catalog cursor is invalid",
            "{bad}"
        );
        assert_eq!(
            message(&gw.invoke(READ, json!({"threadId": A, "cursor": bad})).await),
            "Error: transcript cursor is invalid",
            "{bad}"
        );
    }
    // Spaces inside are skipped, as Node's decoder skips them.
    let page = list(&gw, json!({"cursor": "eyJvZmZz ZXQiOjJ9", "limit": 1})).await;
    assert_eq!(page["nextCursor"], cursor(3));
    for (raw, want) in [
        ("{", "Error: Claude session parameters must be valid JSON"),
        (
            "[]",
            "Error: Claude session catalog parameters must be an object",
        ),
        (
            r#"{"limit":5,"hostIds":[]}"#,
            "Error: unknown Claude session catalog parameter: hostIds",
        ),
    ] {
        let id = gw.request(LIST, raw, 15_000);
        assert_eq!(message(&gw.result(&id, LONG).await), want, "{raw}");
    }
    for (raw, want) in [
        (
            "null",
            "Error: Claude session read parameters must be an object",
        ),
        (
            r#"{"threadId":"../etc/passwd"}"#,
            "Error: threadId is invalid",
        ),
        (r#"{"threadId":"a/b"}"#, "Error: threadId is invalid"),
        (r#"{"threadId":"a\u0000b"}"#, "Error: threadId is invalid"),
    ] {
        let id = gw.request(READ, raw, 15_000);
        assert_eq!(message(&gw.result(&id, LONG).await), want, "{raw}");
    }
    // A cursor in the middle of a line: parsed from there, as OpenClaw does.
    let page = read(
        &gw,
        json!({"threadId": A, "cursor": cursor(200), "limit": 5}),
    )
    .await;
    assert!(page["items"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transcript_appended_or_truncated_between_pages() {
    let claude = ClaudeDir::fixture();
    let (gw, _node) = node_on(claude.path()).await;
    let first = read(&gw, json!({"threadId": C, "limit": 10})).await;
    let next = first["nextCursor"].clone();
    let second = read(&gw, json!({"threadId": C, "limit": 10, "cursor": next})).await;
    // Appended: the cursor counts from the start, so the older page is
    // the same, and the new line heads a fresh first page.
    let path = claude.projects().join(format!("-tmp-proj/{C}.jsonl"));
    let mut file = std::fs::File::options().append(true).open(&path).unwrap();
    writeln!(
        file,
        "{}",
        json!({"type": "user", "sessionId": C, "uuid": "appended",
               "message": {"role": "user", "content": "one more"}})
    )
    .unwrap();
    let again = read(&gw, json!({"threadId": C, "limit": 10, "cursor": next})).await;
    assert_eq!(again, second);
    let fresh = read(&gw, json!({"threadId": C, "limit": 1})).await;
    assert_eq!(fresh["items"][0]["uuid"], "appended");
    // Truncated below the cursor: the cursor is past the end.
    file.set_len(100).unwrap();
    assert_eq!(
        message(
            &gw.invoke(READ, json!({"threadId": C, "cursor": next}))
                .await
        ),
        "Error: transcript cursor is invalid"
    );
    // Cut to nothing, then removed: still valid answers, never a hang.
    file.set_len(0).unwrap();
    let empty = read(&gw, json!({"threadId": C})).await;
    assert_eq!(empty["items"], json!([]));
    std::fs::remove_file(&path).unwrap();
    let listed = list(&gw, json!({})).await;
    assert!(
        row(&rows(&listed), C).is_none(),
        "an index entry without its file is no session"
    );
    assert_eq!(
        message(&gw.invoke(READ, json!({"threadId": C})).await),
        "Error: Claude session is unavailable"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_validator_refuses_what_the_gateway_refuses() {
    let row = || {
        json!({"threadId":"a","name":null,"status":"stored","source":"claude-cli",
               "modelProvider":"anthropic","archived":false})
    };
    assert!(check_catalog_page(&json!({"sessions":[row()]})).is_ok());
    for (key, bad) in [
        ("cwd", json!("")),
        ("cwd", json!("  ")),
        ("gitBranch", json!("x".repeat(501))),
        ("name", json!(5)),
        ("createdAt", json!("1")),
        ("archived", json!(true)),
        ("status", json!("active")),
    ] {
        let mut r = row();
        r[key] = bad;
        assert!(
            check_catalog_page(&json!({"sessions":[r]})).is_err(),
            "{key}"
        );
    }
    assert!(check_catalog_page(&json!({"sessions":[row()],"nextCursor":""})).is_err());
    assert!(check_transcript_page(&json!({"threadId":"t","items":[{"type":1}]}), "t").is_err());
    assert!(check_transcript_page(&json!({"threadId":"t","items":[]}), "u").is_err());
}
