//! What the node says about itself in `connect`: who it is (client,
//! signed device), what it can do (caps, commands) and which token it
//! presents.

use super::{Node, mcp_publish};
use crate::gateway;
use crate::gateway::frames::{Auth, ClientInfo, ConnectParams, MAX_PROTOCOL, MIN_PROTOCOL};
use crate::gateway::identity::SignedFields;

/// The closed set of client ids the gateway accepts for nodes.
const CLIENT_ID: &str = "node-host";

impl Node {
    /// What `connect` declares: the tools' commands, and the published
    /// tools' one door.
    pub(super) fn commands(&self) -> Vec<String> {
        let mut commands = self.tools.declared().to_vec();
        if self.publishing() {
            commands.push(mcp_publish::COMMAND.to_owned());
        }
        commands
    }

    pub(super) fn caps(&self) -> Vec<String> {
        let mut caps = caps(self.tools.declared());
        if self.publishing() {
            caps.push("mcp".to_owned());
        }
        caps
    }

    pub(super) fn connect_params(
        &self,
        challenge: &crate::gateway::frames::Challenge,
        token: Option<&str>,
        bootstrap: bool,
    ) -> ConnectParams {
        let client = ClientInfo {
            id: CLIENT_ID.into(),
            display_name: self.display_name.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            platform: gateway::platform().into(),
            device_family: gateway::device_family().into(),
            mode: "node".into(),
            instance_id: self.identity.device_id[..16].to_owned(),
        };
        let scopes: Vec<String> = Vec::new();
        let device = self.identity.prove(&SignedFields {
            client_id: &client.id,
            client_mode: &client.mode,
            role: "node",
            scopes: &scopes,
            signed_at: challenge.ts,
            token,
            nonce: &challenge.nonce,
            platform: &client.platform,
            device_family: &client.device_family,
        });
        ConnectParams {
            min_protocol: MIN_PROTOCOL,
            max_protocol: MAX_PROTOCOL,
            client,
            caps: self.caps(),
            commands: self.commands(),
            permissions: Some(Default::default()),
            path_env: std::env::var("PATH").ok(),
            auth: if bootstrap {
                Auth {
                    token: None,
                    bootstrap_token: token.map(str::to_owned),
                    device_token: None,
                }
            } else {
                Auth {
                    token: token.map(str::to_owned),
                    bootstrap_token: None,
                    device_token: None,
                }
            },
            role: "node".into(),
            scopes,
            device: Some(device),
            computer_use: self
                .tools
                .computer_use()
                .and_then(|d| serde_json::to_value(d).ok()),
        }
    }
}

/// The capability families the declared commands belong to, in a fixed
/// order: OpenClaw's own host commands are `system` (as its node host
/// files them), the browser's `browser` (what the gateway looks for in a
/// browser node), the seed's tools `file`, Ollama's `local-inference`
/// and Claude Code's sessions `claude-sessions` (OpenClaw's names).
fn caps(declared: &[String]) -> Vec<String> {
    const ORDER: [&str; 9] = [
        "system",
        "file",
        "browser",
        "camera",
        "location",
        "screen",
        "computer",
        "local-inference",
        "claude-sessions",
    ];
    ORDER
        .into_iter()
        .filter(|cap| declared.iter().any(|c| cap_of(c) == *cap))
        .map(str::to_owned)
        .collect()
}

/// The family one command belongs to.
fn cap_of(command: &str) -> &'static str {
    match command {
        c if c.starts_with("system.") || c == "fs.listDir" || c == "terminal.upload" => "system",
        c if c.starts_with("browser.") => "browser",
        c if c.starts_with("camera.") => "camera",
        "location.get" => "location",
        "desktop.stream" | "screen.snapshot" => "screen",
        c if c.starts_with("ollama.") => "local-inference",
        c if c.starts_with("anthropic.claude.sessions.") => "claude-sessions",
        "computer.act" => "computer",
        _ => "file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(commands: &[&str]) -> Vec<String> {
        commands.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn openclaws_host_commands_are_the_system_cap() {
        let caps = caps(&declared(&["system.run", "fs.listDir", "terminal.upload"]));
        assert_eq!(caps, ["system"]);
    }

    #[test]
    fn the_seeds_tools_are_the_file_cap() {
        assert_eq!(caps(&declared(&["read_file", "run_command"])), ["file"]);
    }

    #[test]
    fn both_families_declare_both_caps_and_none_declare_none() {
        assert_eq!(
            caps(&declared(&["system.which", "write_file"])),
            ["system", "file"]
        );
        assert!(caps(&[]).is_empty());
        assert_eq!(
            caps(&declared(&["file.fetch", "dir.list", "file.write"])),
            ["file"]
        );
        assert_eq!(
            caps(&declared(&["browser.proxy", "browser.proxy.upload.v1"])),
            ["browser"]
        );
        assert_eq!(
            caps(&declared(&["location.get", "camera.snap", "camera.list"])),
            ["camera", "location"]
        );
        assert_eq!(
            caps(&declared(&[
                "anthropic.claude.sessions.list.v1",
                "anthropic.claude.sessions.read.v1"
            ])),
            ["claude-sessions"]
        );
        assert_eq!(
            caps(&declared(&["computer.act", "screen.snapshot"])),
            ["screen", "computer"]
        );
    }
}
