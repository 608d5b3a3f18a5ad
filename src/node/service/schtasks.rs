//! The node as a Windows Task Scheduler task, started at logon (or with
//! `--system` at boot) and restarted when it fails. Task Scheduler runs a
//! console program in a visible window, so the task starts a small VBScript
//! that runs the node hidden and hands back its exit code (what OpenClaw's
//! node service does too); the node writes its log with `--log-file`.
//! Written and unit-tested here; run only on Windows.

use std::path::PathBuf;

use super::{Manager, Plan, Runtime, Scope, marker, must, tool, xml_escape};

pub const TASK: &str = "clawbot_router node";

pub struct Schtasks {
    scope: Scope,
}

impl Schtasks {
    pub fn new(scope: Scope) -> Self {
        Self { scope }
    }

    fn dir(&self) -> PathBuf {
        std::env::var_os("LOCALAPPDATA")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| self.scope.home.join("AppData").join("Local"))
            .join("clawbot_router")
    }

    fn launcher(&self) -> PathBuf {
        self.dir().join("node-service.vbs")
    }
}

impl Manager for Schtasks {
    fn name(&self) -> &'static str {
        "Task Scheduler"
    }

    fn id(&self) -> String {
        TASK.into()
    }

    fn path(&self) -> PathBuf {
        self.dir().join("node-service.xml")
    }

    fn definition(&self, plan: &Plan) -> Result<String, String> {
        launcher(plan)?; // refused here, before anything is written
        Ok(task_xml(plan, &self.launcher().to_string_lossy()))
    }

    fn extra_files(&self, plan: &Plan) -> Vec<(PathBuf, String)> {
        launcher(plan)
            .map(|text| vec![(self.launcher(), text)])
            .unwrap_or_default()
    }

    async fn available(&self) -> Result<(), String> {
        match tool("schtasks", &["/Query", "/FO", "LIST"]).await {
            Ok((0, _)) => Ok(()),
            Ok((code, out)) => Err(format!("schtasks /Query (exit {code}): {out}")),
            Err(e) => Err(e),
        }
    }

    async fn activate(&self) -> Result<(), String> {
        let xml = self.path().to_string_lossy().into_owned();
        must("schtasks", &["/Create", "/F", "/TN", TASK, "/XML", &xml]).await?;
        must("schtasks", &["/Run", "/TN", TASK]).await.map(drop)
    }

    async fn deactivate(&self) -> Result<(), String> {
        let _ = tool("schtasks", &["/End", "/TN", TASK]).await;
        let _ = std::fs::remove_file(self.launcher());
        must("schtasks", &["/Delete", "/F", "/TN", TASK])
            .await
            .map(drop)
    }

    async fn start(&self) -> Result<(), String> {
        must("schtasks", &["/Run", "/TN", TASK]).await.map(drop)
    }

    async fn stop(&self) -> Result<(), String> {
        must("schtasks", &["/End", "/TN", TASK]).await.map(drop)
    }

    async fn restart(&self) -> Result<(), String> {
        let _ = tool("schtasks", &["/End", "/TN", TASK]).await;
        self.start().await
    }

    async fn runtime(&self) -> Runtime {
        let installed = self.path().exists();
        match tool("schtasks", &["/Query", "/TN", TASK, "/FO", "LIST", "/V"]).await {
            Ok((0, out)) => parse_query(&out, installed),
            _ => Runtime::unknown(installed),
        }
    }

    fn log_hint(&self) -> String {
        "its log: node.log in the node's state directory".into()
    }
}

/// `schtasks /Query /FO LIST /V` output (English).
fn parse_query(out: &str, installed: bool) -> Runtime {
    let get = |key: &str| {
        out.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_owned())
            })
            .unwrap_or_default()
    };
    let status = get("Status");
    Runtime {
        installed: true,
        enabled: get("Scheduled Task State") != "Disabled",
        running: status == "Running",
        pid: None,
        state: if status.is_empty() {
            super::UNKNOWN_STATE.into()
        } else {
            status
        },
        restarts: None,
        last_exit: get("Last Result").parse().ok(),
    }
    .with_installed(installed)
}

impl Runtime {
    fn with_installed(mut self, file: bool) -> Self {
        self.installed = self.installed || file;
        self
    }
}

/// The task definition (written as UTF-16, as `schtasks /XML` wants it).
pub fn task_xml(plan: &Plan, launcher: &str) -> String {
    let user = xml_escape(&plan.user);
    let trigger = if plan.system {
        "<BootTrigger><Enabled>true</Enabled></BootTrigger>".to_owned()
    } else {
        format!("<LogonTrigger><Enabled>true</Enabled><UserId>{user}</UserId></LogonTrigger>")
    };
    let logon = if plan.system {
        "S4U"
    } else {
        "InteractiveToken"
    };
    format!(
        r#"<?xml version="1.0" encoding="UTF-16"?>
<!-- Written by `clawbot_router node install`; `clawbot_router node uninstall` removes it. -->
<!-- The gateway token is not here: the node reads it from its env file. -->
<!-- {marker} -->
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo>
    <Description>clawbot_router node: this machine's tools for the OpenClaw gateway at {gateway}</Description>
  </RegistrationInfo>
  <Triggers>
    {trigger}
  </Triggers>
  <Principals>
    <Principal id="Author">
      <UserId>{user}</UserId>
      <LogonType>{logon}</LogonType>
      <RunLevel>LeastPrivilege</RunLevel>
    </Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <StartWhenAvailable>true</StartWhenAvailable>
    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>
    <RestartOnFailure>
      <Interval>PT1M</Interval>
      <Count>999</Count>
    </RestartOnFailure>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>wscript.exe</Command>
      <Arguments>//B //Nologo {launcher}</Arguments>
      <WorkingDirectory>{workspace}</WorkingDirectory>
    </Exec>
  </Actions>
</Task>
"#,
        marker = marker(&plan.state_dir),
        gateway = xml_escape(&plan.gateway),
        launcher = xml_escape(&windows_quote(launcher)),
        workspace = xml_escape(&plan.workspace.to_string_lossy()),
    )
}

/// The hidden launcher: runs the node's command line without a window and
/// exits with its exit code. `WshShell.Run` expands `%VAR%` in the line
/// it is given and a VBScript string cannot hold a line break: words with
/// either are refused.
pub fn launcher(plan: &Plan) -> Result<String, String> {
    // Run's command line is expanded (%VAR%); the environment values set
    // through WshShell.Environment are not.
    let words = std::iter::once(plan.program.to_string_lossy().into_owned())
        .chain(plan.args.iter().cloned());
    for word in words {
        if word.contains('%') || word.chars().any(char::is_control) {
            return Err(format!(
                "{word:?} holds a % or a control character, which the Windows launcher cannot pass on unchanged"
            ));
        }
    }
    for (key, value) in &plan.env {
        if key.contains('=') || format!("{key}{value}").chars().any(char::is_control) {
            return Err(format!(
                "the variable {key:?} cannot be set by the Windows launcher"
            ));
        }
    }
    let mut line = windows_quote(&plan.program.to_string_lossy());
    for arg in &plan.args {
        line.push(' ');
        line.push_str(&windows_quote(arg));
    }
    let mut env = String::new();
    for (key, value) in &plan.env {
        env.push_str(&format!(
            "shell.Environment(\"PROCESS\")(\"{}\") = \"{}\"\r\n",
            key.replace('"', "\"\""),
            value.replace('"', "\"\"")
        ));
    }
    Ok(format!(
        "' Written by `clawbot_router node install`: starts the node without a console window.\r\n\
         Set shell = CreateObject(\"WScript.Shell\")\r\n\
         {env}WScript.Quit shell.Run(\"{}\", 0, True)\r\n",
        line.replace('"', "\"\""),
    ))
}

/// One argument as `CommandLineToArgvW` and the C runtime read it back.
pub fn windows_quote(arg: &str) -> String {
    if !arg.is_empty() && !arg.contains([' ', '\t', '\n', '\u{b}', '"']) {
        return arg.to_owned();
    }
    let mut out = String::from('"');
    let mut backslashes = 0;
    for c in arg.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                out.push_str(&"\\".repeat(backslashes * 2 + 1));
                out.push('"');
                backslashes = 0;
            }
            _ => {
                out.push_str(&"\\".repeat(backslashes));
                out.push(c);
                backslashes = 0;
            }
        }
    }
    out.push_str(&"\\".repeat(backslashes * 2));
    out.push('"');
    out
}

/// UTF-16 LE with a byte-order mark.
pub fn utf16(text: &str) -> Vec<u8> {
    let mut bytes = vec![0xff, 0xfe];
    for unit in text.encode_utf16() {
        bytes.extend_from_slice(&unit.to_le_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_quoting_round_trips_through_the_c_runtime_rules() {
        assert_eq!(windows_quote("plain"), "plain");
        assert_eq!(windows_quote(""), "\"\"");
        assert_eq!(windows_quote("a b"), "\"a b\"");
        assert_eq!(windows_quote("say \"hi\""), "\"say \\\"hi\\\"\"");
        assert_eq!(
            windows_quote("C:\\dir with space\\"),
            "\"C:\\dir with space\\\\\""
        );
        assert_eq!(windows_quote("a\\\\\"b"), "\"a\\\\\\\\\\\"b\"");
    }

    #[test]
    fn the_task_and_its_launcher_hold_the_command_line_and_no_secret() {
        let mut plan = super::super::systemd::tests::plan(false);
        plan.program = PathBuf::from("C:\\Program Files\\clawbot\\clawbot_router.exe");
        let xml = task_xml(
            &plan,
            "C:\\Users\\alice\\AppData\\Local\\clawbot_router\\node-service.vbs",
        );
        assert!(!xml.contains("s3cret"));
        assert!(xml.contains(
            "<LogonTrigger><Enabled>true</Enabled><UserId>alice</UserId></LogonTrigger>"
        ));
        assert!(xml.contains("<LogonType>InteractiveToken</LogonType>"));
        assert!(xml.contains("<Arguments>//B //Nologo C:\\Users\\alice\\AppData\\Local\\clawbot_router\\node-service.vbs</Arguments>"));
        for comment in xml.split("<!--").skip(1) {
            assert!(!comment.split("-->").next().unwrap().contains("--"));
        }
        let system = task_xml(&super::super::systemd::tests::plan(true), "x.vbs");
        assert!(system.contains("<BootTrigger>") && system.contains("<LogonType>S4U</LogonType>"));
        // `%` cannot reach the node through WshShell.Run (it expands
        // %VAR%): refused, below; the rest of the plan without it.
        assert!(launcher(&plan).unwrap_err().contains("holds a %"));
        plan.args[2] = "wss://gw.example:18789/ab".into();
        let vbs = launcher(&plan).unwrap();
        assert!(
            vbs.contains("100%"),
            "a % in a value is not expanded there: {vbs}"
        );
        assert!(!vbs.contains("s3cret"));
        // VBScript doubles quotes inside its string literal.
        assert!(vbs.contains("WScript.Quit shell.Run(\"\"\"C:\\Program Files\\clawbot\\clawbot_router.exe\"\" node --gateway"), "{vbs}");
        assert!(
            vbs.contains("\"\"build \\\"\"box\\\"\" $HOME \\ ;\"\""),
            "{vbs}"
        );
        assert!(vbs.contains("shell.Environment(\"PROCESS\")(\"PATH\") = \"/usr/bin:/bin\""));
        assert_eq!(&utf16("A")[..], &[0xff, 0xfe, b'A', 0]);
        plan.args.push("%USERNAME%".into());
        assert!(launcher(&plan).unwrap_err().contains("holds a %"));
    }

    #[test]
    fn schtasks_query_reads_as_a_runtime() {
        let r = parse_query(
            "Folder: \\\r\nTaskName:                             \\clawbot_router node\r\nStatus:                               Running\r\nLast Result:                          267009\r\nScheduled Task State:                 Enabled\r\n",
            true,
        );
        assert!(r.running && r.enabled);
        assert_eq!(r.last_exit, Some(267009));
    }
}
