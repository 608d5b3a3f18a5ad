//! The way in for the fuzz targets of `fuzz/` (run by `scripts/fuzz.sh`);
//! hidden, not an API, free to change with the code it reaches.
//!
//! One entry per decoder a peer feeds: each takes the bytes a stranger
//! could send, reads them with the very code the program reads them with,
//! and panics only where a promise is broken — a panic of the decoder
//! itself, or an invariant asserted here (a resolved path outside the
//! workspace, a plan this node issued that its own approval check would
//! refuse, a setup code's token in a message). Time and memory are
//! libFuzzer's to bound (`-timeout`, `-rss_limit_mb`).
//!
//! Inputs are plain bytes, so a corpus file reads as what it is: JSON where
//! the peer sends JSON, a path as text, an argv as words separated by NUL
//! bytes. The files a target needs (a workspace with links in and out, a
//! state directory) are made once per process under the temporary
//! directory; `scripts/fuzz.sh` points that at a directory it removes.
//!
//! The tests below replay every committed corpus file through its entry,
//! so what the fuzzer once learnt stays checked by `cargo test`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use crate::gateway::frames::{Challenge, Frame, HelloOk, NodeEvent};
use crate::tools::approvals::{self, Verdict};
use crate::tools::exec;
use crate::tools::plans::{self, Plans};
use crate::tools::policy::{Call, Exec, Mode, Policy, Risk, Stance};
use crate::tools::sandbox::Workspace;

/// A time limit for parsed runs; nothing is run.
const LIMIT: Duration = Duration::from_secs(60);

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Words separated by NUL bytes (what no argument can hold).
fn words(data: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(data)
        .split('\0')
        .map(str::to_owned)
        .collect()
}

/// A gateway's WebSocket text frame, read as the node's connection reads
/// it: the frame, the event it carries, a `connect` answer, an invoke's
/// parameters.
pub fn gateway_frame(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(frame) = serde_json::from_str::<Frame>(text) else {
        return;
    };
    match frame {
        Frame::Event(event) => {
            if event.event == "connect.challenge" {
                let _ = serde_json::from_value::<Challenge>(event.payload.clone());
            }
            if let NodeEvent::Invoke(request) = NodeEvent::from(event)
                && let Some(params) = request.params_json
            {
                invoke_params(params.as_bytes());
            }
        }
        Frame::Res(response) => {
            if let Some(payload) = response.payload {
                let _ = serde_json::from_value::<HelloOk>(payload);
            }
            if let Some(error) = response.error {
                let _ = error.detail_code();
            }
        }
        Frame::Req(_) | Frame::Unknown => {}
    }
}

/// A `node.invoke.request`'s `paramsJSON` for `system.run` /
/// `system.run.prepare` / `run_command`: parsed and resolved (nothing
/// runs), and a plan this node prepares must pass its own approval check
/// when the gateway hands it back approved.
pub fn invoke_params(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(params @ Value::Object(_)) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let fixture = fixture();
    let root = fixture.root.as_path();
    let _ = plans::gateway_grant(&params);
    let _ = exec::parse_run_command(params.clone(), root, LIMIT);
    let call = exec::parse_system_run(params.clone(), root, LIMIT)
        .ok()
        .map(|request| request.call("system.run"));
    let stance = fixture.policy.stance_for(call.as_ref());
    let rules = fixture.policy.document().rules();
    let Ok((prepared, binding)) = exec::prepare(params, root, stance, rules) else {
        return;
    };
    let plan = &prepared["plan"];
    let approved = json!({
        "command": plan["argv"],
        "cwd": plan["cwd"],
        "agentId": plan["agentId"],
        "sessionKey": plan["sessionKey"],
        "approved": true,
        "systemRunPlan": plan,
    });
    let grant = plans::gateway_grant(&approved);
    assert!(
        matches!(grant, Ok(Some(_))),
        "a plan this node prepared is refused by its own approval check: {plan}"
    );
    // ... and is known again after its trip through the gateway, once.
    let prepared_here = Plans::default();
    prepared_here.remember(plan, binding.clone());
    let back: Value = serde_json::from_str(&plan.to_string()).expect("a plan is JSON");
    assert!(
        prepared_here.redeem(&back, &binding).is_ok(),
        "a plan is not known again: {plan}"
    );
    assert!(
        prepared_here.redeem(&back, &binding).is_err(),
        "a plan's approval was spent twice: {plan}"
    );
}

/// A bridge client's text frame, read as the bridge reads it.
pub fn bridge_frame(data: &[u8]) {
    use crate::links::bridge;
    let Some(text) = text(data) else { return };
    if bridge::parse_frame(text).is_err()
        && let Some(id) = bridge::call_id_of(text)
    {
        assert!(id.chars().count() <= 128, "an echoed call id is bounded");
    }
    if let Ok(value) = serde_json::from_str::<Value>(text)
        && let Some(id) = value["request_id"].as_str()
    {
        let _ = bridge::is_request_id(id);
    }
}

/// An agent service's SSE stream (seed 001), cut into pieces where the
/// first byte says, and each event's data read as a turn reads it. The
/// reader holds at most one event.
pub fn sse_stream(data: &[u8]) {
    use crate::links::agent_service::{SseEvent, SseParser, read_tool_request};
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    let size = usize::from(cut).max(1);
    let mut parser = SseParser::default();
    let mut events: Vec<SseEvent> = Vec::new();
    for chunk in stream.chunks(size) {
        match parser.feed(chunk) {
            Ok(more) => events.extend(more),
            Err(_) => return,
        }
    }
    // Whole, the stream reads the same as in pieces.
    let mut whole = SseParser::default();
    assert_eq!(
        whole.feed(stream).ok().as_deref(),
        Some(events.as_slice()),
        "the events depend on how the stream was cut"
    );
    for event in events {
        if let Ok(data) = serde_json::from_str::<Value>(&event.data)
            && event.name == "tool.request"
        {
            let _ = read_tool_request(data);
        }
    }
}

/// A JSON body the `chat` link reads (seed 001): a `tool.request`'s data,
/// and the memory's answers, read with every kind of status.
pub fn agent_service_body(data: &[u8]) {
    use crate::links::agent_service::memory;
    use crate::links::agent_service::read_tool_request;
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    for status in [200, 404, 500] {
        if let Ok(path) = memory::read_write_answer(status, &value) {
            assert!(status == 200 && !path.is_empty(), "a path only from a 2xx");
        }
        match memory::read_search_answer(status, &value) {
            Ok(found) => {
                assert_eq!(status, 200, "results only from a 2xx");
                for f in found {
                    assert!(!f.path.is_empty(), "a result names its file");
                    if let (Some(start), Some(end)) = (f.line_start, f.line_end) {
                        assert!(1 <= start && start <= end, "{start}-{end}");
                    }
                }
            }
            Err(problem) => {
                // One line for the terminal, whatever the service said.
                let shown = problem.shown();
                assert!(!shown.contains(['\n', '\r', '\u{1b}']), "{shown:?}");
            }
        }
    }
    if let Ok((id, risk)) = read_tool_request(value) {
        let _ = (id.len(), risk.len());
    }
}

/// A JSON body the `poll` link reads: a heartbeat's answer and the
/// commands it brings (seed 003), each read for its id and its work.
pub fn command_queue_body(data: &[u8]) {
    use crate::links::command_queue::read_command;
    let Ok(answer) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let commands = match answer.get("pendingCommands").or(answer.get("commands")) {
        Some(Value::Array(list)) => list.clone(),
        _ => vec![answer],
    };
    for raw in commands {
        for headless in [false, true] {
            if let Ok((id, _work)) = read_command(raw.clone(), headless) {
                assert!(!id.is_empty() && id.len() <= 256, "an id in bounds");
                // One URL path segment, never a dot segment a URL would
                // remove or climb with.
                assert!(
                    id != "." && id != ".." && !id.contains(['/', '%', '?', '#']),
                    "{id:?}"
                );
            }
        }
    }
}

/// A setup code as pasted (`oc-pair://…` or bare): decoded, and its
/// gateway URL read. What is said of it — its `Debug`, an error — is the
/// same whatever its bootstrap token and its text: neither is told back.
pub fn setup_code(data: &[u8]) {
    use crate::gateway::setup_code::{SetupCode, decode};
    use crate::gateway::transport::Target;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let Some(text) = text(data) else { return };
    let now = 1_800_000_000_000;
    let message = match decode(text, now) {
        Ok(code) => {
            assert!(code.url.starts_with("ws://") || code.url.starts_with("wss://"));
            assert!(!code.bootstrap_token.trim().is_empty());
            assert!(code.expires_at_ms.is_none_or(|at| at > now));
            let other = SetupCode {
                bootstrap_token: "another token".into(),
                code: "another code".into(),
                ..code.clone()
            };
            assert_eq!(
                format!("{code:?}"),
                format!("{other:?}"),
                "the token or the code is shown"
            );
            let _ = Target::parse(&code.url);
            return;
        }
        Err(message) => message,
    };
    // The same payload with another token (and so another code) is told
    // the same — where encoding it again alone changes nothing.
    let trimmed = text.trim();
    let code = match trimmed.get(..10) {
        Some(prefix) if prefix.eq_ignore_ascii_case("oc-pair://") => &trimmed[10..],
        _ => trimmed,
    };
    let Some(mut payload) = URL_SAFE_NO_PAD
        .decode(code)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
    else {
        return;
    };
    let encode = |payload: &Value| URL_SAFE_NO_PAD.encode(payload.to_string());
    if decode(&encode(&payload), now) != Err(message.clone()) {
        return;
    }
    let Some(token) = payload
        .get_mut("bootstrapToken")
        .filter(|t| t.as_str().is_some_and(|t| !t.trim().is_empty()))
    else {
        return;
    };
    *token = json!("another token");
    assert_eq!(
        decode(&encode(&payload), now).err(),
        Some(message),
        "what is said depends on the token"
    );
}

/// `system.execApprovals.set` params as the gateway sends them: the
/// document normalised and stored, then what it says about a few calls
/// (and one the input names under `"argv"`).
pub fn exec_approvals(data: &[u8]) {
    let Ok(params) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let dir = &fixture().approvals;
    // A fresh store each time: the same input, the same run.
    let _ = std::fs::remove_file(dir.join("exec-approvals.json"));
    let store = approvals::Store::open(dir);
    let Ok(stored) = store.set(params.clone()) else {
        return;
    };
    let file = &stored["file"];
    assert_eq!(file["version"], 1, "the stored document reads back: {file}");
    // What it stored, sent back as it is, is taken (the gateway's
    // read-modify-write).
    let again = json!({"file": file, "baseHash": stored["hash"]});
    assert!(store.set(again).is_ok(), "its own document is refused");
    let mut execs = vec![
        exec_of(&["/bin/sh", "-c", "ls -la"], "/"),
        exec_of(&["/bin/ls", "-la"], "/tmp"),
    ];
    if let Some(argv) = params["argv"].as_array() {
        let argv: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
        if !argv.is_empty() {
            execs.push(exec_of(&argv, params["cwd"].as_str().unwrap_or("/")));
        }
    }
    let agent = params["agentId"].as_str();
    let denies = file["defaults"]["security"] == "deny";
    for exec in &execs {
        for who in [None, agent] {
            let verdict = store.verdict(exec, who);
            if denies {
                assert_eq!(verdict, Verdict::Denied, "security deny does not deny");
            }
        }
    }
    let _ = store.rules();
}

fn exec_of(argv: &[&str], cwd: &str) -> Exec {
    Exec {
        executable: PathBuf::from(argv[0]),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: PathBuf::from(cwd),
        env: Vec::new(),
        bound: None,
    }
}

/// An argv (words separated by NUL bytes) as the approvals read a shell
/// wrapper in it: the script, the command line OpenClaw would show, what
/// "allow always" would cover.
pub fn shell_wrapper(data: &[u8]) {
    let argv = words(data);
    if let Some(script) = exec::shell_payload(&argv) {
        assert!(argv.len() >= 3, "a wrapper has a shell, a flag, a script");
        assert_eq!(Some(script), argv.last().map(String::as_str));
    }
    let _ = exec::format_exec_command(&argv);
    if argv[0].trim().is_empty() {
        return; // what prepare refuses before coverage
    }
    let coverage = approvals::coverage(&argv, Path::new("/"));
    let bound = coverage["patterns"][0]["argPattern"].as_str().unwrap_or("");
    assert!(bound.starts_with("sha256:cwd-argv:v1:"), "{coverage}");
}

/// Whether this node's forbidden rules refuse running `argv` in `cwd`,
/// whatever else allows it: the one entry the `forbidden` target calls,
/// to re-point if the rules move.
pub fn forbids(argv: &[String], cwd: &Path) -> bool {
    let Some(program) = argv.first() else {
        return false;
    };
    let executable = which::which_in(program, std::env::var_os("PATH"), cwd)
        .unwrap_or_else(|_| PathBuf::from(program));
    let call = Call {
        command: "system.run".into(),
        risk: Risk::Risky,
        summary: String::new(),
        exec: Some(Exec {
            executable,
            argv: argv.to_vec(),
            cwd: cwd.to_path_buf(),
            env: Vec::new(),
            bound: None,
        }),
        agent: None,
        upstream: false,
        one_shot: false,
    };
    // `--approval allow` and an empty document: only a forbidden rule
    // closes the door.
    fixture().policy.stance_for(Some(&call)) == Stance::Closed
}

/// A working directory and an argv (separated by NUL bytes), through the
/// forbidden rules. Programs that are never run stay refused by name.
pub fn forbidden(data: &[u8]) {
    let mut argv = words(data);
    let cwd = PathBuf::from(argv.remove(0));
    if argv.is_empty() {
        return;
    }
    let refused = forbids(&argv, &cwd);
    let name = argv[0].rsplit('/').next().unwrap_or_default();
    if [
        "sudo", "su", "doas", "pkexec", "shutdown", "reboot", "poweroff", "halt",
    ]
    .contains(&name)
    {
        assert!(refused, "{argv:?} is run");
    }
    // A rule judges what runs, not how it is wrapped: a wrapper, or a shell
    // given the same words, never opens what was refused.
    if refused {
        let wrapped = |front: &[&str]| {
            front
                .iter()
                .map(|w| w.to_string())
                .chain(argv.iter().cloned())
                .collect::<Vec<_>>()
        };
        // `env` and `nice` read a leading `-` as their own option and run
        // nothing (`env -h/x`: "invalid option"); `timeout` runs it. `env`
        // reads any word with a `=` as a variable to set, not a program.
        let option = argv[0].starts_with('-');
        let assignment = argv[0].contains('=');
        for front in [&["env"][..], &["nice", "-n", "5"], &["timeout", "5"]] {
            if (option && front[0] != "timeout") || (assignment && front[0] == "env") {
                continue;
            }
            let argv = wrapped(front);
            assert!(forbids(&argv, &cwd), "{argv:?} is run");
        }
        let script = shell_words::join(&argv);
        // A script starting with `-` is the shell's option unless `--`
        // comes first (`sh -c -h/x`: "illegal option").
        let mut shell = vec!["sh".to_owned(), "-c".to_owned()];
        if script.starts_with('-') {
            shell.push("--".to_owned());
        }
        shell.push(script);
        assert!(forbids(&shell, &cwd), "{shell:?} is run");
    }
}

/// A command line the user wrote, split as Windows splits it (and as this
/// platform does): words without quotes, and quoting them back gives the
/// same words.
pub fn windows_command_line(data: &[u8]) {
    use crate::runner::{split_windows, split_words};
    let Some(text) = text(data) else { return };
    match split_windows(text) {
        Ok(words) => {
            assert!(words.iter().all(|w| !w.contains('"')));
            if !text.contains('"') {
                let plain: Vec<&str> = text.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
                assert_eq!(words, plain);
            }
            let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
            assert_eq!(split_windows(&quoted.join(" ")).as_ref(), Ok(&words));
        }
        Err(_) => assert!(text.matches('"').count() % 2 == 1),
    }
    if let Ok(words) = split_words(text) {
        let _ = words.len();
    }
}

/// A path an agent sends, resolved for reading and for writing in a
/// workspace with links in and out and protected state inside: whatever
/// resolves is inside the root and not protected, as is what it leads to.
/// `@ROOT`, `@LINK` and `@OUT` stand for the root, a link to it, and a
/// directory beside it.
pub fn workspace_path(data: &[u8]) {
    let fixture = fixture();
    let text = String::from_utf8_lossy(data)
        .replace("@ROOT", &fixture.root.to_string_lossy())
        .replace("@LINK", &fixture.link.to_string_lossy())
        .replace("@OUT", &fixture.outside.to_string_lossy());
    let ws = &fixture.workspace;
    let held = |real: &Path| {
        assert!(
            real.starts_with(&fixture.root),
            "{text:?} resolved to {real:?}, outside"
        );
        assert!(
            !ws.is_protected(real),
            "{text:?} resolved to {real:?}, protected"
        );
    };
    if let Ok(real) = ws.resolve_existing(&text) {
        held(&real);
        assert_eq!(std::fs::canonicalize(&real).ok().as_ref(), Some(&real));
    }
    if let Ok(real) = ws.resolve_for_write(&text) {
        held(&real);
        held(&std::fs::canonicalize(&real).unwrap_or_else(|_| real.clone()));
        let parent = real.parent().expect("a file's parent");
        held(&std::fs::canonicalize(parent).expect("an existing parent"));
    }
}

/// A JSON-RPC message as the MCP server reads it (an HTTP request's body,
/// or a stdio line): our framing's checks and answer, rmcp's decoding
/// (what its HTTP transport does with a body), and a call's arguments and
/// a prompt's `lang` as the server reads them.
pub fn mcp_message(data: &[u8]) {
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        let (answer, _key) = crate::mcp_server::read_message(&value);
        if let Some(answer) = answer {
            let answer: Value = serde_json::from_str(&answer).expect("our answer is JSON");
            assert_eq!(answer["error"]["code"], -32600);
            assert!(matches!(
                answer["id"],
                Value::Null | Value::String(_) | Value::Number(_)
            ));
        }
    }
    let Ok(message) = serde_json::from_slice::<ClientJsonRpcMessage>(data) else {
        return;
    };
    if let JsonRpcMessage::Request(request) = &message {
        match &request.request {
            ClientRequest::CallToolRequest(call) => {
                let arguments = Value::Object(call.params.arguments.clone().unwrap_or_default());
                let _ = crate::router::request::from_json(&arguments.to_string());
            }
            ClientRequest::GetPromptRequest(get) => {
                let _ = crate::mcp_server::read_prompt_lang(get.params.arguments.as_ref());
            }
            _ => {}
        }
    }
    let _ = serde_json::to_vec(&message);
}

/// What the targets share, made once per process.
struct Fixture {
    /// The workspace's canonical root.
    root: PathBuf,
    /// A symlink to the root: the workspace was configured through it.
    link: PathBuf,
    /// A directory beside the root, with a secret in it.
    outside: PathBuf,
    workspace: Workspace,
    /// A state directory for the approvals document.
    approvals: PathBuf,
    /// `--approval allow`, no allow or deny list, no document.
    policy: Policy,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        // Kept for the process's life; the fuzz script removes the
        // temporary directory it points TMPDIR at.
        let base = tempfile::Builder::new()
            .prefix("clawbot_router-fuzz-")
            .tempdir()
            .expect("a temporary directory")
            .keep();
        Fixture::make(&base).expect("the fuzzing fixture")
    })
}

impl Fixture {
    fn make(base: &Path) -> std::io::Result<Self> {
        use std::fs;
        let base = fs::canonicalize(base)?;
        let root = base.join("ws");
        let outside = base.join("outside");
        for dir in ["ws/sub/deeper", "ws/.state", "outside"] {
            fs::create_dir_all(base.join(dir))?;
        }
        fs::write(root.join("sub/file.txt"), "hi")?;
        fs::write(root.join(".state/key"), "k")?;
        fs::write(root.join("token"), "t")?;
        fs::write(outside.join("secret"), "s")?;
        let link = base.join("ws-link");
        #[cfg(unix)]
        {
            use std::os::unix::fs::symlink;
            symlink(&root, &link)?;
            for (name, target) in [
                ("in", "sub"),
                ("up", "sub/.."),
                ("out", "../outside"),
                ("out-file", "../outside/secret"),
                ("dangling", "/nonexistent/x"),
                ("loop", "loop"),
                ("state-link", ".state"),
                ("key-link", ".state/key"),
                ("token-link", "token"),
                ("sub/back", ".."),
                ("sub/escape", "../.."),
                ("sub/deeper/abs-out", "/"),
            ] {
                symlink(target, root.join(name))?;
            }
        }
        let mut workspace = Workspace::new(if cfg!(unix) { &link } else { &root })?;
        workspace.protect(&root.join(".state"));
        workspace.protect(&root.join("token"));
        let approvals = base.join("approvals");
        fs::create_dir_all(&approvals)?;
        let policy = Policy::new(
            Mode::Allow,
            Vec::new(),
            Vec::new(),
            &base.join("state"),
            None,
        );
        Ok(Self {
            root: fs::canonicalize(&root)?,
            link,
            outside,
            workspace,
            approvals,
            policy,
        })
    }
}

/// `browser.proxy` parameters as the gateway forwards an agent's
/// `browser` call: parsed, classed by the policy, and an `/act` body
/// checked. A body the check lets through without `--browser-evaluate`
/// runs no script anywhere in it; one the policy calls safe only reads.
pub fn browser_proxy_params(data: &[u8]) {
    use crate::tools::browser::fuzz::{Route, check_act, is_reading};
    let Some(text) = text(data) else { return };
    let Ok(params) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let upload = params.get("upload").is_some_and(|u| !u.is_null());
    let Ok(request) = crate::tools::browser::Request::parse(&params, upload) else {
        return;
    };
    let (risk, _) = crate::tools::browser::classify(&request);
    if request.route != Some(Route::Act) {
        return;
    }
    let body = &request.body;
    let kind = body["kind"].as_str().unwrap_or("");
    if risk == Risk::Safe {
        assert!(is_reading(kind, body), "a safe act that acts: {body}");
    }
    let tab = body["targetId"].as_str().unwrap_or("T");
    if check_act(body, tab, false, 0).is_ok() {
        // What the executor would run: only a batch runs its `actions`
        // (an `actions` list on a hover is a field nothing reads).
        fn scripts(body: &Value) -> bool {
            body["kind"] == "evaluate"
                || (body["kind"] == "wait" && body.get("fn").is_some())
                || (body["kind"] == "batch"
                    && body["actions"]
                        .as_array()
                        .is_some_and(|a| a.iter().any(scripts)))
        }
        assert!(!scripts(body), "script let through: {body}");
    }
}

/// A page's accessibility tree as a browser (or a page shaping it)
/// sends it, rendered as the `ai` snapshot. The first byte picks the
/// options; the rest is the tree. The text keeps to its limit, and every
/// ref it issues is shown and is one `act` can resolve.
pub fn browser_snapshot(data: &[u8]) {
    use crate::tools::browser::fuzz::{Refs, SnapshotOptions, render_snapshot};
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(Value::Array(nodes)) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let options = SnapshotOptions {
        interactive: pick & 1 != 0,
        compact: pick & 2 != 0,
        depth: (pick & 4 != 0).then_some(usize::from(pick >> 5)),
        limit: if pick & 8 != 0 { 3 } else { 200 },
        max_chars: if pick & 16 != 0 { 64 } else { 40_000 },
        root: None,
    };
    let mut refs = Refs {
        document: 1,
        page: 1,
        ..Refs::default()
    };
    let shot = render_snapshot(&nodes, &mut refs, &options);
    assert!(
        shot.text.len() <= options.max_chars,
        "{} chars",
        shot.text.len()
    );
    assert!(shot.refs.len() <= options.limit, "{} refs", shot.refs.len());
    // (A page's own text may spell `[ref=…]`: the model reads page text
    // anyway; what must hold is that every ref we issue resolves, and is
    // shown unless the text was cut.)
    for issued in shot.refs.keys() {
        assert!(
            refs.nodes.contains_key(issued),
            "ref {issued} not resolvable"
        );
        assert!(
            shot.truncated || shot.text.contains(&format!("[ref={issued}]")),
            "ref {issued} issued but not shown"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every committed corpus file, through its target's entry.
    #[test]
    fn the_corpora_replay_cleanly() {
        type Entry = fn(&[u8]);
        let targets: &[(&str, Entry)] = &[
            ("gateway_frame", gateway_frame),
            ("invoke_params", invoke_params),
            ("bridge_frame", bridge_frame),
            ("sse_stream", sse_stream),
            ("agent_service_body", agent_service_body),
            ("command_queue_body", command_queue_body),
            ("setup_code", setup_code),
            ("exec_approvals", exec_approvals),
            ("shell_wrapper", shell_wrapper),
            ("forbidden", forbidden),
            ("windows_command_line", windows_command_line),
            ("workspace_path", workspace_path),
            ("mcp_message", mcp_message),
            ("browser_proxy_params", browser_proxy_params),
            ("browser_snapshot", browser_snapshot),
        ];
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
        for (name, entry) in targets {
            let dir = corpus.join(name);
            let files: Vec<_> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|f| f.unwrap().path())
                .collect();
            assert!(!files.is_empty(), "{name} has no corpus");
            for file in files {
                entry(&std::fs::read(&file).unwrap());
            }
        }
        let base = fixture().root.parent().expect("the fixture's directory");
        let _ = std::fs::remove_dir_all(base);
    }
}
