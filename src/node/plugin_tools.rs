//! The node's tools as first-class agent tools: OpenClaw's "node-mcp"
//! door. The node declares `mcp.tools.call.v1` (in the Linux default
//! surface: approved with the node, no `gateway.nodes.commands.allow`
//! edit) and publishes one descriptor per tool with
//! `node.pluginTools.update`; the gateway turns each into an agent tool
//! ("… (node: NAME)") with typed parameters, and a call comes back as
//! `mcp.tools.call.v1 {server, tool, arguments}`, answered with an MCP
//! `CallToolResult`.
//!
//! This file only translates: a call goes to the same `Tools::invoke`
//! (policy, approvals, audit, runner) as every other path.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::log::say;
use crate::gateway::client::Outbox;
use crate::gateway::frames::ErrorShape;
use crate::tools::{Invocation, ToolError, Tools, catalog};

/// The command an agent's call arrives as.
pub const COMMAND: &str = "mcp.tools.call.v1";
/// The MCP server name our own tools are published under.
pub const SERVER: &str = "clawbot";
/// OpenClaw's reserved plugin id for node-hosted MCP tools.
const PLUGIN_ID: &str = "node-mcp";
/// The gateway keeps at most this many descriptors per node.
const MAX_TOOLS: usize = 128;
/// Transient refusals of a publication retried at most this often per
/// connection.
const MAX_RETRIES: u32 = 20;

/// The descriptors of the tools this node offers (those it declares).
pub fn descriptors(declared: &[String]) -> Vec<Value> {
    catalog::ENTRIES
        .iter()
        .filter(|e| declared.iter().any(|d| d == e.name))
        .take(MAX_TOOLS)
        .map(|e| {
            json!({
                "pluginId": PLUGIN_ID,
                "name": tool_name(SERVER, e.name),
                "description": e.description,
                "parameters": (e.parameters)(),
                "command": COMMAND,
                "mcp": {"server": SERVER, "tool": e.name},
            })
        })
        .collect()
}

/// The agent-facing name, as OpenClaw's node host forms it: `server_tool`
/// within the gateway's pattern `^[A-Za-z][A-Za-z0-9_-]{0,63}$`.
fn tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        let mapped: String = s
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        mapped.trim_matches(['_', '-']).to_owned()
    };
    let server: String = clean(server).chars().take(31).collect();
    let room = 64 - server.len() - 1;
    let tool: String = clean(tool).chars().take(room).collect();
    format!("{server}_{tool}")
}

/// Publishes the descriptors after every connect, and again (with a
/// backoff, a bounded number of times) when the gateway puts it off as
/// passing — `PAIRING_CHANGED` right after a reconnect; the gateway
/// re-filters the list itself once the node's commands are approved.
pub struct Publisher {
    tools: Vec<Value>,
    request_id: Option<String>,
    retry_at: Option<Instant>,
    delay: Duration,
    retries: u32,
    done: bool,
}

impl Publisher {
    pub fn new(tools: Vec<Value>) -> Self {
        Self {
            done: tools.is_empty(),
            tools,
            request_id: None,
            retry_at: None,
            delay: Duration::from_millis(250),
            retries: 0,
        }
    }

    pub fn publish(&mut self, outbox: &Outbox) {
        if self.done {
            return;
        }
        self.retry_at = None;
        self.request_id = outbox.request("node.pluginTools.update", json!({ "tools": self.tools }));
    }

    /// When to publish again, if an answer asked for it.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// Takes the answer to a publish (anything else is not ours).
    /// `approved`: the gateway has approved this node's commands.
    pub fn answered(&mut self, id: &str, answer: Answer<'_>, approved: bool) {
        if self.request_id.as_deref() != Some(id) {
            return;
        }
        self.request_id = None;
        let Some(e) = answer.error.filter(|_| !answer.ok) else {
            self.done = true;
            let sent = self.tools.len();
            let listed = answer
                .payload
                .and_then(|p| p["tools"].as_array())
                .map_or(0, Vec::len);
            say(&if listed == sent {
                format!("published {listed} tools to the gateway's agents (node-mcp)")
            } else if !approved {
                format!(
                    "published {sent} tools (node-mcp); the gateway offers them once this node's commands are approved"
                )
            } else {
                format!(
                    "published {sent} tools (node-mcp); the gateway offers {listed} of them (its gateway.nodes.commands.deny and gateway.nodes.pluginTools.enabled decide)"
                )
            });
            return;
        };
        // Only what the gateway calls passing is worth asking again, and
        // not forever.
        let passing = e.retryable == Some(true) || e.code == "UNAVAILABLE";
        if passing && self.retries < MAX_RETRIES {
            if self.retries == 0 {
                say(&format!(
                    "the gateway put off this node's tool publication ({}: {}); retrying",
                    e.code, e.message
                ));
            }
            self.retries += 1;
            self.retry_at = Some(Instant::now() + self.delay);
            self.delay = (self.delay * 2).min(Duration::from_secs(5));
            return;
        }
        self.done = true;
        say(&format!(
            "the gateway refused this node's tool descriptors: {}: {}",
            e.code, e.message
        ));
    }
}

/// A response frame's parts, as `Publisher::answered` reads them.
pub struct Answer<'a> {
    pub ok: bool,
    pub payload: Option<&'a Value>,
    pub error: Option<&'a ErrorShape>,
}

/// What a published tool's call came to.
pub struct Called {
    /// `read_file (mcp.tools.call.v1)`, for the log.
    pub label: String,
    pub result: Result<Value, ToolError>,
    pub decision: String,
}

impl Called {
    fn refused(label: String, error: ToolError) -> Self {
        Self {
            label,
            result: Err(error),
            decision: "none".into(),
        }
    }

    /// The outcome as the log says it: `ok`, or the failure's code.
    pub fn verdict(&self) -> String {
        match &self.result {
            Ok(v) if v["isError"] == true => v["structuredContent"]["error"]["code"]
                .as_str()
                .unwrap_or("error")
                .to_owned(),
            Ok(_) => "ok".into(),
            Err(e) => e.code.to_owned(),
        }
    }
}

/// `mcp.tools.call.v1 {server, tool, arguments}`: the named tool through
/// the one dispatch, its answer as an MCP `CallToolResult`.
pub async fn call(tools: &Arc<Tools>, mut inv: Invocation<'_>) -> Called {
    let (tool, arguments) = match decode(inv.params_json) {
        Ok(decoded) => decoded,
        Err(e) => {
            tools.record_refused(&inv, &e);
            return Called::refused(COMMAND.to_owned(), e);
        }
    };
    let label = format!("{tool} ({COMMAND})");
    if !tools.declared().iter().any(|d| d == &tool) || catalog::entry(&tool).is_none() {
        let error = ToolError::new(
            "MCP_TOOL_UNAVAILABLE",
            format!("MCP tool {tool:?} is unavailable on server \"{SERVER}\""),
        );
        tools.record_refused(&inv, &error);
        return Called::refused(label, error);
    }
    let arguments = arguments.to_string();
    inv.command = &tool;
    inv.params_json = Some(&arguments);
    let (outcome, decision) = tools.invoke(inv).await;
    let result = match outcome {
        // The result once, as structured content (OpenClaw's agent shows
        // it as JSON text itself), never twice.
        Ok(value) => Ok(json!({"content": [], "structuredContent": value})),
        // Cancelled: answered CANCELLED, as every command here is.
        Err(e) if e.code == "CANCELLED" => Err(e),
        // The tool ran (or was refused) and failed: a result the agent
        // reads, with the node's code and what to do.
        Err(e) => Ok(json!({
            "content": [{"type": "text", "text": format!("{}: {}", e.code, e.message)}],
            "structuredContent": {"error": {"code": e.code, "message": e.message}},
            "isError": true,
        })),
    };
    Called {
        label,
        result,
        decision,
    }
}

/// The call's `{server, tool, arguments}`, checked as OpenClaw's node
/// host checks them; parsed once, the arguments taken, not copied.
fn decode(params_json: Option<&str>) -> Result<(String, Value), ToolError> {
    let invalid = |m: &str| ToolError::new("INVALID_REQUEST", m.to_owned());
    let text = params_json.ok_or_else(|| invalid("paramsJSON required"))?;
    let mut params: Value =
        serde_json::from_str(text).map_err(|_| invalid("paramsJSON malformed JSON"))?;
    if !params.is_object() {
        return Err(invalid("MCP tool params must be an object"));
    }
    let server = params["server"]
        .as_str()
        .map(str::trim)
        .unwrap_or("")
        .to_owned();
    let tool = params["tool"]
        .as_str()
        .map(str::trim)
        .unwrap_or("")
        .to_owned();
    if server.is_empty() || tool.is_empty() {
        return Err(invalid("server and tool required"));
    }
    let arguments = match params["arguments"].take() {
        Value::Null => json!({}),
        arguments @ Value::Object(_) => arguments,
        _ => return Err(invalid("arguments must be an object")),
    };
    if server != SERVER {
        return Err(ToolError::new(
            "MCP_SERVER_UNAVAILABLE",
            format!("MCP server {server:?} is unavailable"),
        ));
    }
    Ok((tool, arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gateway's own rules (`node-plugin-tool-snapshot`, the schema in
    /// `nodes-*.mjs`): a closed descriptor, the name pattern, a non-empty
    /// description of at most 1024 characters, `mcp.tools.call.v1` with
    /// `mcp {server, tool}` under `node-mcp`, at most 128.
    #[test]
    fn descriptors_pass_the_gateways_rules() {
        let declared = crate::tools::available_commands();
        let all = descriptors(&declared);
        assert_eq!(all.len(), catalog::ENTRIES.len());
        let pattern = regex_lite(&all);
        for d in &all {
            let keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
            for key in &keys {
                assert!(
                    [
                        "pluginId",
                        "name",
                        "description",
                        "parameters",
                        "command",
                        "mcp"
                    ]
                    .contains(key),
                    "{key}"
                );
            }
            assert_eq!(d["pluginId"], "node-mcp");
            assert_eq!(d["command"], COMMAND);
            assert_eq!(d["mcp"]["server"], SERVER);
            let description = d["description"].as_str().unwrap();
            assert!(!description.is_empty() && description.chars().count() <= 1024);
            assert!(d["parameters"].is_object());
        }
        assert!(
            pattern,
            "every name matches ^[A-Za-z][A-Za-z0-9_-]{{0,63}}$"
        );
        assert_eq!(all[0]["name"], "clawbot_read_file");
        let only = descriptors(&["write_file".to_owned(), "system.run".to_owned()]);
        assert_eq!(
            only.len(),
            1,
            "only declared tools, and none of OpenClaw's own"
        );
    }

    fn regex_lite(all: &[Value]) -> bool {
        all.iter().all(|d| {
            let name = d["name"].as_str().unwrap();
            let mut chars = name.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                && name.len() <= 64
        })
    }

    #[test]
    fn names_are_sanitised_and_bounded() {
        assert_eq!(tool_name("clawbot", "read_file"), "clawbot_read_file");
        assert_eq!(tool_name("my server!", "do.it"), "my_server_do_it");
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), 64);
    }

    #[test]
    fn malformed_calls_get_openclaws_codes() {
        let code = |p: Option<&str>| decode(p).unwrap_err().code;
        assert_eq!(code(None), "INVALID_REQUEST");
        assert_eq!(code(Some("{")), "INVALID_REQUEST");
        assert_eq!(code(Some("[1]")), "INVALID_REQUEST");
        assert_eq!(code(Some(r#"{"server":"clawbot"}"#)), "INVALID_REQUEST");
        assert_eq!(
            code(Some(
                r#"{"server":"clawbot","tool":"read_file","arguments":[1]}"#
            )),
            "INVALID_REQUEST"
        );
        assert_eq!(
            code(Some(r#"{"server":"other","tool":"read_file"}"#)),
            "MCP_SERVER_UNAVAILABLE"
        );
        let (tool, args) = decode(Some(r#"{"server":"clawbot","tool":"system_info"}"#)).unwrap();
        assert_eq!((tool.as_str(), args), ("system_info", json!({})));
    }
}
