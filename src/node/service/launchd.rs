//! The node as a launchd job on macOS: a LaunchAgent of the user
//! (`~/Library/LaunchAgents`, domain `gui/<uid>`), or with `--system` a
//! LaunchDaemon (`/Library/LaunchDaemons`, domain `system`) run as the
//! installing user. Written and unit-tested here; run only on a Mac.

use std::path::PathBuf;

use super::{Manager, Plan, Runtime, Scope, marker, must, tool, xml_escape};

pub const LABEL: &str = "org.clawbot-router.node";

pub struct Launchd {
    scope: Scope,
}

impl Launchd {
    pub fn new(scope: Scope) -> Self {
        Self { scope }
    }

    fn domain(&self) -> String {
        if self.scope.system {
            "system".into()
        } else {
            #[cfg(unix)]
            let uid = unsafe { libc::getuid() };
            #[cfg(not(unix))]
            let uid = 0;
            format!("gui/{uid}")
        }
    }

    fn target(&self) -> String {
        format!("{}/{LABEL}", self.domain())
    }

    async fn loaded(&self) -> bool {
        matches!(
            tool("launchctl", &["print", &self.target()]).await,
            Ok((0, _))
        )
    }

    /// Loads the job (unless it is loaded and not `anew`). Right after a `bootout` launchd
    /// may still be tearing the old one down ("Bootstrap failed: 5"): a
    /// few tries, half a second apart.
    async fn bootstrap(&self, anew: bool) -> Result<(), String> {
        if !anew && self.loaded().await {
            return Ok(());
        }
        let path = self.path().to_string_lossy().into_owned();
        let mut last = String::new();
        for _ in 0..5 {
            match must("launchctl", &["bootstrap", &self.domain(), &path]).await {
                Ok(_) => return Ok(()),
                Err(e) => last = e,
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        Err(last)
    }
}

impl Manager for Launchd {
    fn name(&self) -> &'static str {
        "launchd"
    }

    fn id(&self) -> String {
        LABEL.into()
    }

    fn path(&self) -> PathBuf {
        let dir = if self.scope.system {
            PathBuf::from("/Library/LaunchDaemons")
        } else {
            self.scope.home.join("Library/LaunchAgents")
        };
        dir.join(format!("{LABEL}.plist"))
    }

    fn definition(&self, plan: &Plan) -> Result<String, String> {
        Ok(plist(plan, &self.scope.home))
    }

    async fn available(&self) -> Result<(), String> {
        match tool("launchctl", &["print", &self.domain()]).await {
            Ok((0, _)) => Ok(()),
            Ok((code, out)) => Err(format!(
                "launchctl print {} (exit {code}): {out}",
                self.domain()
            )),
            Err(e) => Err(e),
        }
    }

    async fn activate(&self) -> Result<(), String> {
        // launchd does not create the log's directory.
        let log = log_path(&self.scope.home);
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        // A job loaded from an older file is replaced: loaded anew even if
        // `print` still shows the old one being torn down.
        let _ = tool("launchctl", &["bootout", &self.target()]).await;
        self.bootstrap(true).await?;
        must("launchctl", &["kickstart", &self.target()])
            .await
            .map(drop)
    }

    async fn deactivate(&self) -> Result<(), String> {
        // Not loaded (exit 3 / 113) is already what we want.
        match tool("launchctl", &["bootout", &self.target()]).await? {
            (0 | 3 | 113, _) => Ok(()),
            (code, out) => Err(format!("launchctl bootout failed (exit {code}): {out}")),
        }
    }

    async fn start(&self) -> Result<(), String> {
        self.bootstrap(false).await?;
        must("launchctl", &["kickstart", &self.target()])
            .await
            .map(drop)
    }

    /// KeepAlive would start a killed job again: stopping unloads it
    /// (`start` loads it again), as `openclaw node stop` does.
    async fn stop(&self) -> Result<(), String> {
        self.deactivate().await
    }

    /// After `stop` the job is unloaded: loading it starts it (RunAtLoad);
    /// a loaded one is killed and started again.
    async fn restart(&self) -> Result<(), String> {
        if self.loaded().await {
            must("launchctl", &["kickstart", "-k", &self.target()])
                .await
                .map(drop)
        } else {
            self.bootstrap(true).await
        }
    }

    async fn runtime(&self) -> Runtime {
        let installed = self.path().exists();
        match tool("launchctl", &["print", &self.target()]).await {
            Ok((0, out)) => parse_print(&out, installed),
            _ => Runtime {
                installed,
                state: "not loaded".into(),
                ..Runtime::default()
            },
        }
    }

    fn log_hint(&self) -> String {
        format!("its log: {}", log_path(&self.scope.home).display())
    }
}

fn log_path(home: &std::path::Path) -> PathBuf {
    home.join("Library/Logs/clawbot_router/node.log")
}

/// `launchctl print <target>` output: `state = running`, `pid = 123`,
/// `runs = 4`, `last exit code = 0`.
fn parse_print(out: &str, installed: bool) -> Runtime {
    let get = |key: &str| {
        out.lines()
            .find_map(|l| {
                let (k, v) = l.trim().split_once(" = ")?;
                (k == key).then(|| v.trim().to_owned())
            })
            .unwrap_or_default()
    };
    let state = get("state");
    Runtime {
        installed,
        enabled: true,
        running: state == "running",
        pid: get("pid").parse().ok(),
        restarts: get("runs").parse::<u64>().ok().map(|n| n.saturating_sub(1)),
        last_exit: get("last exit code").parse().ok(),
        state,
    }
}

/// The property list.
pub fn plist(plan: &Plan, home: &std::path::Path) -> String {
    let mut arguments = format!(
        "    <string>{}</string>\n",
        xml_escape(&plan.program.to_string_lossy())
    );
    for arg in &plan.args {
        arguments.push_str(&format!("    <string>{}</string>\n", xml_escape(arg)));
    }
    let mut env = String::new();
    for (key, value) in &plan.env {
        env.push_str(&format!(
            "    <key>{}</key><string>{}</string>\n",
            xml_escape(key),
            xml_escape(value)
        ));
    }
    let user = if plan.system {
        format!(
            "  <key>UserName</key><string>{}</string>\n",
            xml_escape(&plan.user)
        )
    } else {
        String::new()
    };
    let log = xml_escape(&log_path(home).to_string_lossy());
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by `clawbot_router node install`; `clawbot_router node uninstall` removes it. -->
<!-- The gateway token is not here: the node reads it from its env file (0600). -->
<!-- {marker} -->
<plist version="1.0">
<dict>
  <key>Label</key><string>{LABEL}</string>
  <key>ProgramArguments</key>
  <array>
{arguments}  </array>
  <key>WorkingDirectory</key><string>{workspace}</string>
  <key>EnvironmentVariables</key>
  <dict>
{env}  </dict>
{user}  <key>RunAtLoad</key><true/>
  <key>KeepAlive</key><true/>
  <key>ThrottleInterval</key><integer>10</integer>
  <key>ExitTimeOut</key><integer>20</integer>
  <key>ProcessType</key><string>Background</string>
  <key>Umask</key><integer>63</integer>
  <key>StandardInPath</key><string>/dev/null</string>
  <key>StandardOutPath</key><string>{log}</string>
  <key>StandardErrorPath</key><string>{log}</string>
</dict>
</plist>
"#,
        marker = marker(&plan.state_dir),
        workspace = xml_escape(&plan.workspace.to_string_lossy()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plist_holds_the_command_line_escaped_and_no_secret() {
        let mut plan = super::super::systemd::tests::plan(false);
        plan.args.push("<&>".into());
        let text = plist(&plan, std::path::Path::new("/Users/alice"));
        assert!(!text.contains("s3cret"));
        assert!(text.contains(
            "<string>/opt/clawbot router/clawbot_router</string>\n    <string>node</string>"
        ));
        assert!(text.contains("<string>build &quot;box&quot; $HOME \\ ;</string>"));
        assert!(text.contains("<string>&lt;&amp;&gt;</string>"));
        assert!(text.contains("<key>PATH</key><string>/usr/bin:/bin</string>"));
        assert!(text.contains("/Users/alice/Library/Logs/clawbot_router/node.log"));
        assert!(!text.contains("UserName"));
        // Every comment is well formed: no `--` inside.
        for comment in text.split("<!--").skip(1) {
            let body = comment.split("-->").next().unwrap();
            assert!(!body.contains("--"), "{body}");
        }
        let system = plist(
            &super::super::systemd::tests::plan(true),
            std::path::Path::new("/Users/alice"),
        );
        assert!(system.contains("<key>UserName</key><string>alice</string>"));
    }

    #[test]
    fn launchctl_print_reads_as_a_runtime() {
        let r = parse_print(
            "gui/501/org.clawbot-router.node = {\n\tactive count = 1\n\tstate = running\n\tpid = 812\n\truns = 3\n\tlast exit code = 1\n}\n",
            true,
        );
        assert!(r.running);
        assert_eq!(r.pid, Some(812));
        assert_eq!(r.restarts, Some(2));
        assert_eq!(r.last_exit, Some(1));
    }
}
