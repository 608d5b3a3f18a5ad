//! `clawbot_router node install|uninstall|status|start|stop|restart` on
//! Linux. These machines run no systemd, so the manager is
//! `tests/fixtures/fake-systemd/systemctl`: it reads the unit file as
//! systemd does and runs its ExecStart= with only the unit's environment,
//! so what is proven is that the written unit, its env file and the node
//! together reach a gateway. The unit's syntax is checked by systemd's own
//! `systemd-analyze verify`.

#![cfg(target_os = "linux")]

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::gateway::{Config, FakeGateway, TOKEN};
use common::systemd::{FakeSystemd, UNIT};
use serde_json::Value;

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn install_status_stop_start_uninstall_round_trip() {
    let gw = FakeGateway::start(Config::default()).await;
    let m = FakeSystemd::new();
    let out = m.install(&gw.url(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains(&format!("installed {UNIT}")), "{said}");
    assert!(said.contains("node: connected to"), "{said}");
    assert!(
        said.contains("warning: systemd lingering is disabled")
            && said.contains("sudo loginctl enable-linger"),
        "{said}"
    );
    assert!(
        m.calls().starts_with(&format!(
            "--user show-environment\n--user daemon-reload\n--user enable {UNIT}\n--user restart {UNIT}\n"
        )),
        "{}",
        m.calls()
    );
    // The secret is in the 0600 env file only: not in the unit, not on the
    // node's command line.
    let unit = std::fs::read_to_string(m.unit()).unwrap();
    assert!(!unit.contains(TOKEN), "{unit}");
    let argv = std::fs::read_to_string(m.path("systemd/argv")).unwrap();
    assert!(!argv.contains(TOKEN), "{argv}");
    assert!(
        argv.contains("svc \"node\" $HOME"),
        "the unit's quoting, read back by systemd's grammar (as the fake implements it), gives the node its argument unchanged: {argv:?}"
    );
    let env = std::fs::read_to_string(m.env_file()).unwrap();
    assert!(env.contains(&format!("OPENCLAW_GATEWAY_TOKEN={TOKEN}")));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(m.env_file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // The node the manager started reached the gateway with that token.
    let connect = gw
        .connects()
        .last()
        .cloned()
        .expect("the service connected");
    assert_eq!(
        connect["client"]["displayName"], "svc \"node\" $HOME",
        "{connect}"
    );

    let (status, code) = m.status();
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["runtime"]["running"], true, "{status}");
    assert_eq!(status["runtime"]["enabled"], true, "{status}");
    assert_eq!(status["node"]["connected"], true, "{status}");
    assert_eq!(
        status["node"]["pid"].as_i64(),
        m.service_pid().map(i64::from)
    );

    let out = m.node(&["stop"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (status, code) = m.status();
    assert_eq!(code, 3, "stopped: {status}");
    assert_eq!(status["node"]["connected"], false);
    assert_eq!(
        status["node"]["stopped"], true,
        "the node said so as it stopped"
    );

    let out = m.node(&["start"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("node: connected to"), "{}", text(&out));

    // The same settings again: rewritten, restarted. Other settings: refused
    // without --force, replaced with it (the old unit kept as .bak).
    assert_eq!(m.install(&gw.url(), &[]).status.code(), Some(0));
    let other = m.install(&gw.url(), &["--deny-command", "rm"]);
    assert_eq!(other.status.code(), Some(1), "{}", text(&other));
    assert!(text(&other).contains("--force"), "{}", text(&other));
    let forced = m.install(&gw.url(), &["--deny-command", "rm", "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced));
    assert!(
        std::fs::read_to_string(m.unit())
            .unwrap()
            .contains("--deny-command rm")
    );
    assert!(m.unit().with_extension("service.bak").exists());

    // A replacement the manager refuses to start leaves the service as it
    // was: its unit and its token.
    let unit_before = std::fs::read(m.unit()).unwrap();
    let env_before = std::fs::read(m.env_file()).unwrap();
    std::fs::write(m.path("systemd/refuse"), "").unwrap();
    let refused = m.node(
        &[
            "install",
            "--gateway",
            &gw.url(),
            "--state-dir",
            m.path("state").to_str().unwrap(),
            "--force",
        ],
        &[("OPENCLAW_GATEWAY_TOKEN", "another-token")],
    );
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(text(&refused).contains("failed"), "{}", text(&refused));
    assert_eq!(
        std::fs::read(m.unit()).unwrap(),
        unit_before,
        "the old unit is back"
    );
    assert_eq!(
        std::fs::read(m.env_file()).unwrap(),
        env_before,
        "and its token"
    );
    std::fs::remove_file(m.path("systemd/refuse")).unwrap();
    assert_eq!(m.node(&["restart"], &[]).status.code(), Some(0));

    let pid = m.service_pid().unwrap();
    let out = m.node(&["uninstall"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!m.unit().exists() && !m.env_file().exists());
    assert!(!m.unit().with_extension("service.bak").exists());
    common::assert_all_gone(&[pid]);
    assert!(m.journal().contains("connected to"), "{}", m.journal());
    let (status, code) = m.status();
    assert_eq!(
        (code, &status["runtime"]["installed"]),
        (3, &Value::Bool(false))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_systemd_every_action_says_so_and_writes_nothing() {
    let m = FakeSystemd::new();
    m.systemd_down();
    let out = m.install("ws://127.0.0.1:18789", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("systemd is not available"), "{said}");
    assert!(
        said.contains("System has not been booted with systemd"),
        "{said}"
    );
    assert!(said.contains("under your own supervisor: "), "{said}");
    assert!(
        said.contains("node --gateway ws://127.0.0.1:18789 --display-name 'svc \"node\" $HOME'"),
        "the exact command line, quoted for a shell: {said}"
    );
    assert!(!said.contains(TOKEN), "{said}");
    assert!(!m.unit().exists() && !m.env_file().exists());
    for (action, code) in [("start", 1), ("restart", 1), ("stop", 0), ("uninstall", 0)] {
        let out = m.node(&[action, "--json"], &[]);
        assert_eq!(out.status.code(), Some(code), "{action}: {}", text(&out));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["action"], action);
        assert_eq!(json["ok"], code == 0, "{json}");
    }
    let (status, code) = m.status();
    assert_eq!(code, 3);
    assert_eq!(status["service"]["available"], false);
    assert!(
        status["service"]["unavailableReason"]
            .as_str()
            .unwrap()
            .contains("System has not been booted"),
        "{status}"
    );
}

#[test]
fn bad_settings_are_refused_before_anything_is_written() {
    let m = FakeSystemd::new();
    let missing = m.path("no-such-dir");
    let out = m.node(
        &[
            "install",
            "--gateway",
            "ws://127.0.0.1:18789",
            "--workspace",
            missing.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no-such-dir"), "{}", text(&out));
    let out = m.node(
        &["install", "--gateway", "ws://127.0.0.1:18789", "--doctor"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("a service cannot hold one"),
        "{}",
        text(&out)
    );
    // Plaintext to a public host is refused here too.
    let out = m.node(&["install", "--gateway", "ws://203.0.113.9:18789"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(m.calls().is_empty(), "systemctl never ran: {}", m.calls());
    assert!(!m.unit().exists());
}

#[test]
fn a_system_service_runs_as_the_account_that_ran_sudo_never_as_root() {
    let m = FakeSystemd::new();
    let root = unsafe { libc::geteuid() } == 0;
    let plain = m.node(
        &[
            "install",
            "--system",
            "--gateway",
            "ws://127.0.0.1:18789",
            "--print",
        ],
        &[("SUDO_USER", "")],
    );
    assert_eq!(plain.status.code(), Some(2), "{}", text(&plain));
    let expected = if root {
        "would run agents' commands as root"
    } else {
        "run it with sudo"
    };
    assert!(text(&plain).contains(expected), "{}", text(&plain));
    if !root {
        return;
    }
    // As sudo leaves it: root, with the caller's name in SUDO_USER.
    let unit = m.node(
        &[
            "install",
            "--system",
            "--gateway",
            "ws://127.0.0.1:18789",
            "--print",
        ],
        &[("SUDO_USER", "nobody")],
    );
    assert_eq!(unit.status.code(), Some(0), "{}", text(&unit));
    let unit = String::from_utf8(unit.stdout).unwrap();
    assert!(unit.contains("User=nobody\n"), "{unit}");
    assert!(unit.contains("WantedBy=multi-user.target"), "{unit}");
}

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    let m = FakeSystemd::new();
    let mcp_config = m.path("mcp servers.json");
    std::fs::write(
        &mcp_config,
        r#"{"mcpServers": {"db": {"command": "db-mcp", "env": {"DB_PASSWORD": "in-the-file-only"}}}}"#,
    )
    .unwrap();
    let out = m.node(
        &[
            "install",
            "--mcp-server",
            "fs=npx -y '@scope/server x' \"$HOME\" 100%",
            "--mcp-config",
            mcp_config.to_str().unwrap(),
            "--gateway",
            "wss://gw.example.test:18789/open%20claw",
            "--tls-fingerprint",
            &"ab".repeat(32),
            "--display-name",
            "a \"quoted\" $name; 100%",
            "--allow-command",
            "read_file",
            "--commands",
            "system.run,read_file",
            "--print",
        ],
        &[("OPENCLAW_GATEWAY_TOKEN", TOKEN)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let unit = String::from_utf8(out.stdout).unwrap();
    assert!(!unit.contains(TOKEN));
    // The MCP servers as given; a config file's secrets stay in the file.
    assert!(
        unit.contains("--mcp-server \"fs=npx -y '@scope/server x' \\\"$$HOME\\\" 100%%\""),
        "{unit}"
    );
    assert!(
        unit.contains("--mcp-config \"/") && !unit.contains("in-the-file-only"),
        "{unit}"
    );
    assert!(
        m.calls().is_empty() && !m.unit().exists(),
        "--print writes nothing"
    );
    let file = m.path(UNIT);
    std::fs::write(&file, &unit).unwrap();
    let Ok(verify) = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&file)
        .output()
    else {
        // CI installs it (.ci/run); elsewhere say it was not checked.
        assert!(
            std::env::var_os("CI").is_none(),
            "systemd-analyze is missing in CI"
        );
        eprintln!("systemd-analyze not installed (apt-get install systemd): unit not verified");
        return;
    };
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "{}\n{unit}",
        text(&verify)
    );
    // And it fails on a broken unit, so the check above means something.
    std::fs::write(&file, unit.replace("ExecStart=/", "ExecStart=")).unwrap();
    let broken = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!broken.status.success(), "{}", text(&broken));
}

#[tokio::test(flavor = "multi_thread")]
async fn status_finds_a_node_run_by_hand() {
    let gw = FakeGateway::start(Config::default()).await;
    let m = FakeSystemd::new();
    let xdg = m.dir.path().to_str().unwrap().to_owned();
    let _node = common::KillOnDrop(
        common::router()
            .args(["node", "--gateway", &gw.url()])
            .env("OPENCLAW_GATEWAY_TOKEN", TOKEN)
            .env("XDG_STATE_HOME", &xdg)
            .env("HOME", m.path("home"))
            .current_dir(m.path("ws"))
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // No service installed: status reads the default state directory.
    let deadline = Instant::now() + Duration::from_secs(15);
    let said = loop {
        let out = m.node(&["status"], &[("XDG_STATE_HOME", &xdg)]);
        if out.status.code() == Some(0) && text(&out).contains("node: connected to") {
            break text(&out);
        }
        assert!(Instant::now() < deadline, "never connected: {}", text(&out));
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(said.contains("service: not installed"), "{said}");
    // --state-dir names another directory: nothing runs there.
    let elsewhere = m.path("elsewhere");
    let out = m.node(&["status", "--state-dir", elsewhere.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
}

/// The log flags given to `node install` are the service's: a service
/// manager's log shipper gets the JSON lines it was asked for.
#[tokio::test(flavor = "multi_thread")]
async fn the_service_keeps_the_log_flags_it_was_installed_with() {
    let gw = FakeGateway::start(Config::default()).await;
    let m = FakeSystemd::new();
    let out = m.install(&gw.url(), &["--log-format", "json", "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let unit = std::fs::read_to_string(m.unit()).unwrap();
    let exec = unit
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .unwrap_or_else(|| panic!("{unit}"));
    assert!(exec.contains(" --log-format json"), "{exec}");
    assert!(exec.contains(" --log-level warn"), "{exec}");
    // Defaults are not written: a plain install says nothing of the log.
    let plain = FakeSystemd::new();
    let out = plain.install(&gw.url(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let unit = std::fs::read_to_string(plain.unit()).unwrap();
    assert!(!unit.contains("--log-"), "{unit}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_service_keeps_sharing_claude_sessions_only_if_installed_so() {
    let gw = FakeGateway::start(Config::default()).await;
    let exec_of = |args: &[&str]| {
        let m = FakeSystemd::new();
        let out = m.install(&gw.url(), args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let unit = std::fs::read_to_string(m.unit()).unwrap();
        unit.lines()
            .find(|l| l.starts_with("ExecStart="))
            .unwrap_or_else(|| panic!("{unit}"))
            .to_owned()
    };
    assert!(exec_of(&["--claude-sessions"]).contains(" --claude-sessions"));
    assert!(!exec_of(&[]).contains("--claude-sessions"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_service_keeps_its_file_roots_as_absolute_paths() {
    let gw = FakeGateway::start(Config::default()).await;
    let root = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(root.path()).unwrap();
    let m = FakeSystemd::new();
    let out = m.install(&gw.url(), &["--file-root", root.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let unit = std::fs::read_to_string(m.unit()).unwrap();
    assert!(
        unit.contains(&format!(" --file-root {}", real.display())),
        "{unit}"
    );
    let missing = FakeSystemd::new();
    let out = missing.install(&gw.url(), &["--file-root", "/nonexistent/root"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("--file-root"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_service_keeps_the_browser_and_sensor_flags_it_was_installed_with() {
    let gw = FakeGateway::start(Config::default()).await;
    // A browser named by path (a stand-in: install only checks it is there).
    let dir = tempfile::tempdir().unwrap();
    let chrome = dir.path().join("chrome");
    std::fs::write(&chrome, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&chrome, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let m = FakeSystemd::new();
    let out = m.install(
        &gw.url(),
        &[
            "--browser",
            chrome.to_str().unwrap(),
            "--browser-private-network",
            "--browser-allow-host",
            "intranet.example",
            "--browser-evaluate",
            "--browser-headed",
            "--camera",
            "--camera-audio",
            "--location",
            "--screen",
            "--computer",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let unit = std::fs::read_to_string(m.unit()).unwrap();
    let exec = unit
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .unwrap_or_else(|| panic!("{unit}"));
    let named = format!(" --browser {}", chrome.display());
    for flag in [
        named.as_str(),
        " --browser-private-network",
        " --browser-allow-host intranet.example",
        " --browser-evaluate",
        " --browser-headed",
        " --camera --camera-audio --location --screen --computer",
    ] {
        assert!(exec.contains(flag), "{flag}: {exec}");
    }
    // The defaults (auto, headless, no private network, no script) are
    // not written.
    let plain = FakeSystemd::new();
    let out = plain.install(&gw.url(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let unit = std::fs::read_to_string(plain.unit()).unwrap();
    assert!(!unit.contains("--browser"), "{unit}");
    assert!(
        !unit.contains("--camera") && !unit.contains("--location") && !unit.contains("--screen"),
        "{unit}"
    );
    // An attached browser's address may carry a token: it is kept with
    // the secrets (the private env file), never on the command line.
    let attached = FakeSystemd::new();
    let url = "ws://user:s3cret@127.0.0.1:9222/devtools/browser/x?token=s3cret";
    let out = attached.install(&gw.url(), &["--browser-cdp-url", url]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let unit = std::fs::read_to_string(attached.unit()).unwrap();
    assert!(
        !unit.contains("s3cret") && unit.contains("--env-file"),
        "{unit}"
    );
    let env = std::fs::read_to_string(attached.env_file()).unwrap();
    assert!(
        env.contains(&format!("CLAWBOT_BROWSER_CDP_URL={url}")),
        "{env}"
    );
    let bad = FakeSystemd::new();
    let out = bad.install(&gw.url(), &["--browser-cdp-url", "ftp://h/x"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    // A browser that is not there is refused at install, not found
    // missing by the service later.
    let missing = FakeSystemd::new();
    let out = missing.install(&gw.url(), &["--browser", "no-such-browser-here"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("--browser no-such-browser-here"),
        "{}",
        text(&out)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_service_keeps_no_ollama() {
    let gw = FakeGateway::start(Config::default()).await;
    let m = FakeSystemd::new();
    let out = m.install(&gw.url(), &["--no-ollama"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let unit = std::fs::read_to_string(m.unit()).unwrap();
    let exec = unit
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .unwrap_or_else(|| panic!("{unit}"));
    assert!(exec.contains(" --no-ollama"), "{exec}");
    let plain = FakeSystemd::new();
    let out = plain.install(&gw.url(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        !std::fs::read_to_string(plain.unit())
            .unwrap()
            .contains("--no-ollama")
    );
}
