//! The node as a systemd unit: a user unit (`~/.config/systemd/user`,
//! started at login, or at boot with lingering), or with `--system` a
//! system unit (`/etc/systemd/system`) that runs as the installing user.

use std::path::PathBuf;

use super::{Manager, Plan, Runtime, Scope, marker, must, tool};

pub const UNIT: &str = "clawbot-router-node.service";

pub struct Systemd {
    scope: Scope,
}

impl Systemd {
    pub fn new(scope: Scope) -> Self {
        Self { scope }
    }

    /// `systemctl [--user] ARGS…`
    fn args<'a>(&self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = Vec::with_capacity(args.len() + 1);
        if !self.scope.system {
            all.push("--user");
        }
        all.extend_from_slice(args);
        all
    }

    async fn systemctl(&self, args: &[&str]) -> Result<String, String> {
        must("systemctl", &self.args(args)).await
    }
}

impl Manager for Systemd {
    fn name(&self) -> &'static str {
        "systemd"
    }

    fn id(&self) -> String {
        UNIT.into()
    }

    fn path(&self) -> PathBuf {
        if self.scope.system {
            return PathBuf::from("/etc/systemd/system").join(UNIT);
        }
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| self.scope.home.join(".config"));
        config.join("systemd/user").join(UNIT)
    }

    fn definition(&self, plan: &Plan) -> Result<String, String> {
        unit(plan)
    }

    async fn available(&self) -> Result<(), String> {
        match tool("systemctl", &self.args(&["show-environment"])).await {
            Ok((0, _)) => Ok(()),
            Ok((_, out)) => Err(first_line(&out)),
            Err(e) => Err(e),
        }
    }

    async fn activate(&self) -> Result<(), String> {
        self.systemctl(&["daemon-reload"]).await?;
        self.systemctl(&["enable", UNIT]).await?;
        self.systemctl(&["restart", UNIT]).await.map(drop)
    }

    async fn deactivate(&self) -> Result<(), String> {
        // A unit already stopped or disabled is fine; a manager that
        // refuses is not.
        self.systemctl(&["disable", "--now", UNIT]).await?;
        // The file goes next; reload afterwards so systemd forgets it.
        let path = self.path();
        let _ = std::fs::remove_file(&path);
        self.systemctl(&["daemon-reload"]).await.map(drop)
    }

    async fn start(&self) -> Result<(), String> {
        self.systemctl(&["start", UNIT]).await.map(drop)
    }

    async fn stop(&self) -> Result<(), String> {
        self.systemctl(&["stop", UNIT]).await.map(drop)
    }

    async fn restart(&self) -> Result<(), String> {
        self.systemctl(&["restart", UNIT]).await.map(drop)
    }

    async fn runtime(&self) -> Runtime {
        let installed = self.path().exists();
        let properties =
            "LoadState,ActiveState,SubState,MainPID,NRestarts,UnitFileState,ExecMainStatus";
        let Ok(out) = self
            .systemctl(&["show", UNIT, &format!("--property={properties}")])
            .await
        else {
            return Runtime::unknown(installed);
        };
        parse_show(&out, installed)
    }

    async fn warnings(&self) -> Vec<String> {
        if self.scope.system {
            return Vec::new();
        }
        let user = &self.scope.user;
        match tool("loginctl", &["show-user", user, "--property=Linger"]).await {
            Ok((0, out)) if out.trim() == "Linger=no" => vec![format!(
                "systemd lingering is disabled for {user}: the node service stops when you log out and starts only at your next login. Run: sudo loginctl enable-linger {user}"
            )],
            _ => Vec::new(),
        }
    }

    fn log_hint(&self) -> String {
        format!(
            "its log: journalctl {}-u {UNIT} -e",
            if self.scope.system { "" } else { "--user " }
        )
    }
}

/// `systemctl show --property=…` output.
fn parse_show(out: &str, installed: bool) -> Runtime {
    let get = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
            .unwrap_or("")
            .to_owned()
    };
    let active = get("ActiveState");
    let sub = get("SubState");
    let pid = get("MainPID").parse::<u32>().ok().filter(|p| *p > 0);
    Runtime {
        installed: installed || get("LoadState") == "loaded",
        enabled: get("UnitFileState") == "enabled",
        running: active == "active",
        pid,
        state: if active.is_empty() {
            super::UNKNOWN_STATE.into()
        } else if sub.is_empty() {
            active
        } else {
            format!("{active} ({sub})")
        },
        restarts: get("NRestarts").parse().ok(),
        last_exit: get("ExecMainStatus").parse().ok(),
    }
}

fn first_line(out: &str) -> String {
    out.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no answer")
        .trim()
        .to_owned()
}

/// The unit file's text.
pub fn unit(plan: &Plan) -> Result<String, String> {
    let mut exec = vec![quote(&plan.program.to_string_lossy())?];
    for arg in &plan.args {
        exec.push(quote(arg)?);
    }
    let mut env = String::new();
    for (key, value) in &plan.env {
        env.push_str(&format!(
            "Environment={}\n",
            quote_env(&format!("{key}={value}"))?
        ));
    }
    let user = if plan.system {
        format!("User={}\n", plain(&plan.user)?)
    } else {
        String::new()
    };
    let workspace = plain(&plan.workspace.to_string_lossy())?;
    Ok(format!(
        "# Written by `clawbot_router node install`; `clawbot_router node uninstall` removes it.\n\
         # The gateway token is not here: the node reads it from --env-file (0600).\n\
         # {marker}\n\
         [Unit]\n\
         Description=clawbot_router node: this machine's tools for the OpenClaw gateway at {gateway}\n\
         {network}\
         StartLimitIntervalSec=300\n\
         StartLimitBurst=10\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={exec}\n\
         WorkingDirectory={workspace}\n\
         {env}{user}\
         Restart=always\n\
         RestartSec=5\n\
         # 2: the command line itself is wrong; restarting cannot help.\n\
         RestartPreventExitStatus=2\n\
         # The node stops its commands' process trees on SIGTERM.\n\
         KillMode=mixed\n\
         TimeoutStopSec=15\n\
         UMask=0077\n\
         NoNewPrivileges=yes\n\
         \n\
         [Install]\n\
         WantedBy={wanted}\n",
        marker = marker(&plan.state_dir),
        gateway = specifiers(&plan.gateway),
        exec = exec.join(" "),
        // A user manager has no network-online.target: only the system
        // one can order the start after the network.
        network = if plan.system {
            "After=network-online.target\nWants=network-online.target\n"
        } else {
            ""
        },
        wanted = if plan.system {
            "multi-user.target"
        } else {
            "default.target"
        },
    ))
}

/// `%` starts a specifier in every unit setting.
fn specifiers(text: &str) -> String {
    text.replace('%', "%%")
}

/// A value for a setting that takes the rest of the line as is.
fn plain(text: &str) -> Result<String, String> {
    if text.chars().any(char::is_control) {
        return Err(format!(
            "{text:?} has a control character; a unit file cannot hold it"
        ));
    }
    Ok(specifiers(text))
}

/// One word of `ExecStart=`: double-quoted unless plain, with `\` and
/// `"` escaped, `%` and `$` doubled (systemd expands both there).
fn quote(word: &str) -> Result<String, String> {
    quote_with(word, true)
}

/// One `Environment=` assignment: as `quote`, but `$` stays (systemd
/// expands no variables in `Environment=`).
fn quote_env(word: &str) -> Result<String, String> {
    quote_with(word, false)
}

fn quote_with(word: &str, dollars: bool) -> Result<String, String> {
    if word.chars().any(char::is_control) {
        return Err(format!(
            "{word:?} has a control character; a unit file cannot hold it"
        ));
    }
    let escaped = if dollars {
        specifiers(word).replace('$', "$$")
    } else {
        specifiers(word)
    };
    let simple = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:,=@+%$".contains(c));
    if simple {
        return Ok(escaped);
    }
    Ok(format!(
        "\"{}\"",
        escaped.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub fn plan(system: bool) -> Plan {
        Plan {
            program: PathBuf::from("/opt/clawbot router/clawbot_router"),
            args: vec![
                "node".into(),
                "--gateway".into(),
                "wss://gw.example:18789/a%20b".into(),
                "--display-name".into(),
                "build \"box\" $HOME \\ ;".into(),
                "--state-dir".into(),
                "/home/alice/.local/state/clawbot_router".into(),
            ],
            state_dir: PathBuf::from("/home/alice/.local/state/clawbot_router"),
            workspace: PathBuf::from("/home/alice/work space"),
            gateway: "wss://gw.example:18789/a%20b".into(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("CLAWBOT_ROUTER_LANG".into(), "cost $5 100%".into()),
            ],
            secrets: vec![("OPENCLAW_GATEWAY_TOKEN".into(), "s3cret".into())],
            system,
            user: "alice".into(),
            owner: None,
        }
    }

    #[test]
    fn the_unit_quotes_what_systemd_would_expand_and_holds_no_secret() {
        let text = unit(&plan(false)).unwrap();
        assert!(!text.contains("s3cret"));
        assert!(text.contains(
            "ExecStart=\"/opt/clawbot router/clawbot_router\" node --gateway wss://gw.example:18789/a%%20b --display-name \"build \\\"box\\\" $$HOME \\\\ ;\" --state-dir /home/alice/.local/state/clawbot_router\n"
        ), "{text}");
        assert!(text.contains("WorkingDirectory=/home/alice/work space\n"));
        assert!(text.contains("Environment=PATH=/usr/bin:/bin\n"));
        assert!(
            text.contains("Environment=\"CLAWBOT_ROUTER_LANG=cost $5 100%%\"\n"),
            "no variables are expanded in Environment=: {text}"
        );
        assert!(!text.contains("network-online"), "a user manager has none");
        assert!(text.contains("WantedBy=default.target"));
        assert!(!text.contains("User="));
        let system = unit(&plan(true)).unwrap();
        assert!(system.contains("User=alice\n") && system.contains("WantedBy=multi-user.target"));
        assert!(system.contains("After=network-online.target\n"));
    }

    #[test]
    fn control_characters_are_refused_not_written() {
        let mut p = plan(false);
        p.args.push("two\nlines".into());
        assert!(unit(&p).unwrap_err().contains("control character"));
    }

    #[test]
    fn systemctl_show_reads_as_a_runtime() {
        let r = parse_show(
            "LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=2\nUnitFileState=enabled\nExecMainStatus=0\n",
            true,
        );
        assert!(r.installed && r.enabled && r.running);
        assert_eq!(r.pid, Some(4242));
        assert_eq!(r.state, "active (running)");
        assert_eq!(r.restarts, Some(2));
        let gone = parse_show(
            "LoadState=not-found\nActiveState=inactive\nSubState=dead\nMainPID=0\n",
            false,
        );
        assert!(!gone.installed && !gone.running && gone.pid.is_none());
    }

    /// Issue 24: `runtime.state` was `""` when systemctl said nothing.
    #[test]
    fn a_state_systemd_does_not_give_is_unknown_not_empty() {
        assert_eq!(parse_show("", true).state, "unknown");
        let stopped = parse_show("ActiveState=inactive\nSubState=dead\n", true);
        assert_eq!(stopped.state, "inactive (dead)");
    }
}
