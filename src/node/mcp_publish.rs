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

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::gateway::client::Outbox;
use crate::gateway::frames::ErrorShape;
use crate::shared::log::say;
use crate::tools::mcp_client::{Offered, SERVER, Servers};
use crate::tools::{Invocation, ToolError, Tools, catalog};

/// The command an agent's call arrives as.
pub const COMMAND: &str = "mcp.tools.call.v1";
/// OpenClaw's reserved plugin id for node-hosted MCP tools.
const PLUGIN_ID: &str = "node-mcp";
/// The gateway keeps at most this many descriptors per node.
const MAX_TOOLS: usize = 128;
/// The gateway cuts a description to this many characters.
const MAX_DESCRIPTION: usize = 1024;
/// A name's characters, and its server part's.
const MAX_NAME: usize = 64;
const MAX_SERVER_PART: usize = 31;
/// A descriptor's bytes, and all of them together, at most (OpenClaw's
/// node host's bounds: a publication far below the gateway's frame limit).
const MAX_DESCRIPTOR_BYTES: usize = 1 << 20;
const MAX_CATALOG_BYTES: usize = 10 << 20;
/// Transient refusals of a publication retried at most this often per
/// connection.
const MAX_RETRIES: u32 = 20;

/// Our own tools that this node declares, as offered.
pub fn ours(declared: &[String]) -> Vec<Offered> {
    catalog::ENTRIES
        .iter()
        .filter(|e| declared.iter().any(|d| d == e.name))
        .map(|e| Offered {
            server: SERVER.to_owned(),
            tool: e.name.to_owned(),
            description: e.description.to_owned(),
            parameters: (e.parameters)(),
        })
        .collect()
}

/// The one door to the agents: what is offered now (ours, then each local
/// server's), as descriptors within the gateway's rules, and which
/// `{server, tool}` an agent may therefore call.
pub struct Door {
    ours: Vec<Offered>,
    servers: Option<Arc<Servers>>,
    tools: Arc<Tools>,
    /// What the last descriptors offered, by `{server, tool}`.
    published: Mutex<HashSet<(String, String)>>,
    /// Bumped by nothing when there are no local servers.
    quiet: watch::Sender<u64>,
}

impl Door {
    pub fn new(ours: Vec<Offered>, servers: Option<Arc<Servers>>, tools: Arc<Tools>) -> Self {
        Self {
            ours,
            servers,
            tools,
            published: Mutex::default(),
            quiet: watch::channel(0).0,
        }
    }

    /// Whether anything is ever published (and the door declared).
    pub fn is_open(&self) -> bool {
        !self.ours.is_empty() || self.servers.is_some()
    }

    /// Changes when what the local servers offer changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        match &self.servers {
            Some(servers) => servers.changes(),
            None => self.quiet.subscribe(),
        }
    }

    /// The descriptors to publish now, and a line on each tool left out.
    pub fn descriptors(&self) -> (Vec<Value>, Vec<String>) {
        let mut offered = self.ours.clone();
        if let Some(servers) = &self.servers {
            offered.extend(servers.offered());
        }
        let forbids = |o: &Offered| {
            let name = policy_name(&o.server, &o.tool);
            self.tools
                .forbids(&name, o.server != SERVER)
                .then_some(name)
        };
        let (descriptors, notes, published) = describe(offered, forbids);
        *self.published.lock().unwrap_or_else(|e| e.into_inner()) = published;
        (descriptors, notes)
    }

    /// Why `{server, tool}` cannot be called, if it cannot: only what the
    /// last descriptors offered can.
    /// A forbidden tool is not offered, yet a call of it is left to the
    /// policy, which says why (and audits it).
    fn refuses(&self, server: &str, tool: &str) -> Option<ToolError> {
        let published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        let name = policy_name(server, tool);
        if published.contains(&(server.to_owned(), tool.to_owned()))
            || self.tools.forbids(&name, server != SERVER)
        {
            return None;
        }
        let known = server == SERVER
            || self
                .servers
                .as_ref()
                .is_some_and(|s| s.names().any(|n| n == server));
        Some(if known {
            ToolError::new(
                "MCP_TOOL_UNAVAILABLE",
                format!("MCP tool {tool:?} is unavailable on server {server:?}"),
            )
        } else {
            ToolError::new(
                "MCP_SERVER_UNAVAILABLE",
                format!("MCP server {server:?} is unavailable"),
            )
        })
    }
}

/// What the policy calls a tool: ours by its command, a server's
/// `SERVER.TOOL`.
fn policy_name(server: &str, tool: &str) -> String {
    if server == SERVER {
        tool.to_owned()
    } else {
        format!("{server}.{tool}")
    }
}

/// Descriptors within the gateway's rules, in order, at most 128: names as
/// OpenClaw's node host forms them (`server_tool`, a case-insensitive clash
/// numbered `_2`, `_3`…), descriptions cut to 1024 characters; forbidden
/// tools (`--deny-command`) are not offered at all.
fn describe(
    offered: Vec<Offered>,
    forbids: impl Fn(&Offered) -> Option<String>,
) -> (Vec<Value>, Vec<String>, HashSet<(String, String)>) {
    let mut descriptors = Vec::new();
    let mut notes = Vec::new();
    let mut published = HashSet::new();
    let mut taken: HashSet<String> = HashSet::new();
    let mut over = Vec::new();
    let mut bytes = 0;
    for o in offered {
        if let Some(name) = forbids(&o) {
            notes.push(format!(
                "{name} is not offered to agents: --deny-command forbids it"
            ));
            continue;
        }
        if descriptors.len() == MAX_TOOLS {
            over.push(format!("{}.{}", o.server, o.tool));
            continue;
        }
        let name = unique_name(&tool_name(&o.server, &o.tool), &mut taken);
        let description = match o.description.trim() {
            "" => o.tool.clone(),
            d => d.chars().take(MAX_DESCRIPTION).collect(),
        };
        let parameters = match o.parameters {
            p @ Value::Object(_) => p,
            _ => json!({"type": "object", "properties": {}, "additionalProperties": true}),
        };
        let descriptor = json!({
            "pluginId": PLUGIN_ID,
            "name": name,
            "description": description,
            "parameters": parameters,
            "command": COMMAND,
            "mcp": {"server": o.server, "tool": o.tool},
        });
        let size = descriptor.to_string().len();
        if size > MAX_DESCRIPTOR_BYTES || bytes + size > MAX_CATALOG_BYTES {
            taken.remove(&name.to_ascii_lowercase());
            notes.push(format!(
                "{}.{} is not offered to agents: its descriptor is {size} bytes (at most {MAX_DESCRIPTOR_BYTES} each, {MAX_CATALOG_BYTES} in all)",
                o.server, o.tool
            ));
            continue;
        }
        bytes += size;
        descriptors.push(descriptor);
        published.insert((o.server, o.tool));
    }
    if !over.is_empty() {
        notes.push(format!(
            "the gateway takes at most {MAX_TOOLS} tools per node: {} left out ({})",
            over.len(),
            over.join(", ")
        ));
    }
    (descriptors, notes, published)
}

/// The agent-facing name, as OpenClaw's node host forms it: `server_tool`
/// within the gateway's pattern `^[A-Za-z][A-Za-z0-9_-]{0,63}$`.
fn tool_name(server: &str, tool: &str) -> String {
    let server: String = fragment(server, "mcp")
        .chars()
        .take(MAX_SERVER_PART)
        .collect();
    let room = MAX_NAME - server.len() - 1;
    let tool: String = fragment(tool, "tool").chars().take(room).collect();
    format!("{server}_{tool}")
}

/// One part of a name: runs of other characters as `_`, no `_`/`-` at the
/// ends, starting with a letter (`fallback_` put first otherwise).
fn fragment(s: &str, fallback: &str) -> String {
    let mut out = String::new();
    let mut in_run = false;
    for c in s.trim().chars() {
        let kept = c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if kept {
            out.push(c);
        } else if !in_run {
            out.push('_');
        }
        in_run = !kept;
    }
    let out = out.trim_matches(['_', '-']);
    match out.chars().next() {
        None => fallback.to_owned(),
        Some(c) if c.is_ascii_alphabetic() => out.to_owned(),
        Some(_) => format!("{fallback}_{out}"),
    }
}

/// `name`, or `name_2`, `name_3`… (cut to fit) when another tool has it,
/// compared without case.
fn unique_name(name: &str, taken: &mut HashSet<String>) -> String {
    let mut candidate = name.to_owned();
    let mut n = 2;
    while !taken.insert(candidate.to_ascii_lowercase()) {
        let suffix = format!("_{n}");
        let base: String = name.chars().take(MAX_NAME - suffix.len()).collect();
        candidate = format!("{base}{suffix}");
        n += 1;
    }
    candidate
}

/// Publishes the door's descriptors after every connect and whenever what
/// is offered changes, and again (with a backoff, a bounded number of
/// times) when the gateway puts it off as passing — `PAIRING_CHANGED`
/// right after a reconnect; the gateway re-filters the list itself once
/// the node's commands are approved. A list the gateway settled (took or
/// refused for good) is not sent again on the same connection.
pub struct Publisher {
    door: Arc<Door>,
    settled: Option<Vec<Value>>,
    sending: Option<(String, Vec<Value>)>,
    /// The left-out notes last told.
    told: Vec<String>,
    /// The gateway took the last list before it approved this node's
    /// commands (filtering by the surface it had then).
    before_approval: bool,
    retry_at: Option<Instant>,
    delay: Duration,
    retries: u32,
}

impl Publisher {
    pub fn new(door: Arc<Door>) -> Self {
        Self {
            door,
            settled: None,
            sending: None,
            told: Vec::new(),
            before_approval: false,
            retry_at: None,
            delay: Duration::from_millis(250),
            retries: 0,
        }
    }

    pub fn publish(&mut self, outbox: &Outbox) {
        if !self.door.is_open() {
            return;
        }
        self.retry_at = None;
        let (tools, notes) = self.door.descriptors();
        if notes != self.told {
            for note in &notes {
                say(note);
            }
            self.told = notes;
        }
        // Nothing new: what is on its way, or (nothing on its way) what the
        // gateway settled.
        let latest = match &self.sending {
            Some((_, sending)) => Some(sending),
            None => self.settled.as_ref(),
        };
        if latest == Some(&tools) {
            return;
        }
        let params = json!({ "tools": tools });
        self.sending = outbox
            .request("node.pluginTools.update", params)
            .map(|id| (id, tools));
    }

    /// Once the gateway approves this node's commands, a list it took
    /// before is sent again: an agent turn right after the approval saw
    /// only part of it otherwise (the e2e test caught it).
    pub fn approval(&mut self, confirmed: bool, outbox: &Outbox) {
        if confirmed && self.before_approval {
            self.before_approval = false;
            self.settled = None;
            self.sending = None;
            self.publish(outbox);
        }
    }

    /// When to publish again, if an answer asked for it.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// Takes the answer to a publish (anything else is not ours).
    /// `approved`: the gateway has approved this node's commands.
    pub fn answered(&mut self, id: &str, answer: Answer<'_>, approved: bool) {
        let Some((_, tools)) = self.sending.take_if(|(sent, _)| sent == id) else {
            return;
        };
        let sent = tools.len();
        let Some(e) = answer.error.filter(|_| !answer.ok) else {
            self.settled = Some(tools);
            self.before_approval = !approved;
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
                crate::shared::log::warn(&format!(
                    "the gateway put off this node's tool publication ({}: {}); retrying",
                    e.code, e.message
                ));
            }
            self.retries += 1;
            self.retry_at = Some(Instant::now() + self.delay);
            self.delay = (self.delay * 2).min(Duration::from_secs(5));
            return;
        }
        self.settled = Some(tools);
        crate::shared::log::warn(&format!(
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
pub async fn call(door: &Door, mut inv: Invocation<'_>) -> Called {
    let tools = &door.tools;
    let (server, tool, arguments) = match decode(inv.params_json) {
        Ok(decoded) => decoded,
        Err(e) => {
            tools.record_refused(&inv, &e);
            return Called::refused(COMMAND.to_owned(), e);
        }
    };
    if let Some(error) = door.refuses(&server, &tool) {
        tools.record_refused(&inv, &error);
        return Called::refused(format!("{server}.{tool} ({COMMAND})"), error);
    }
    let (label, outcome, decision) = match &door.servers {
        Some(servers) if server != SERVER => {
            let (outcome, decision) = tools
                .invoke_upstream(&inv, servers.as_ref(), &server, &tool, arguments)
                .await;
            (format!("{server}.{tool} ({COMMAND})"), outcome, decision)
        }
        _ => {
            let arguments = arguments.to_string();
            inv.command = &tool;
            inv.params_json = Some(&arguments);
            let (outcome, decision) = tools.invoke(inv).await;
            // The result once, as structured content (OpenClaw's agent
            // shows it as JSON text itself), never twice.
            let outcome = outcome.map(|value| json!({"content": [], "structuredContent": value}));
            (format!("{tool} ({COMMAND})"), outcome, decision)
        }
    };
    let result = match outcome {
        Ok(result) => Ok(result),
        // Cancelled, or the server could not answer (OpenClaw's MCP_*
        // codes): a failed invoke, as OpenClaw's node host answers.
        Err(e) if e.code == "CANCELLED" || e.code.starts_with("MCP_") => Err(e),
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
fn decode(params_json: Option<&str>) -> Result<(String, String, Value), ToolError> {
    let invalid = |m: &str| ToolError::new("INVALID_REQUEST", m.to_owned());
    let text = params_json.ok_or_else(|| invalid("paramsJSON required"))?;
    let mut params: Value =
        serde_json::from_str(text).map_err(|_| invalid("paramsJSON malformed JSON"))?;
    if !params.is_object() {
        return Err(invalid("MCP tool params must be an object"));
    }
    let part = |key: &str| params[key].as_str().map(str::trim).unwrap_or("").to_owned();
    let (server, tool) = (part("server"), part("tool"));
    if server.is_empty() || tool.is_empty() {
        return Err(invalid("server and tool required"));
    }
    let arguments = match params.get_mut("arguments").map(Value::take) {
        None => json!({}),
        Some(arguments @ Value::Object(_)) => arguments,
        Some(_) => return Err(invalid("arguments must be an object")),
    };
    Ok((server, tool, arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(server: &str, tool: &str) -> Offered {
        Offered {
            server: server.into(),
            tool: tool.into(),
            description: format!("{tool} of {server}"),
            parameters: json!({"type": "object"}),
        }
    }

    fn none(_: &Offered) -> Option<String> {
        None
    }

    /// The gateway's own rules (`node-plugin-tool-snapshot`, the schema in
    /// `nodes-*.mjs`): a closed descriptor, the name pattern, a non-empty
    /// description of at most 1024 characters, `mcp.tools.call.v1` with
    /// `mcp {server, tool}` under `node-mcp`, at most 128.
    #[test]
    fn descriptors_pass_the_gateways_rules() {
        let declared = crate::tools::available_commands();
        let mut all = ours(&declared);
        assert_eq!(all.len(), catalog::ENTRIES.len());
        let mut long = offered("srv", "long");
        long.description = "é".repeat(3000);
        long.parameters = json!("not a schema");
        all.push(long);
        all.extend((0..200).map(|i| offered("many", &format!("t{i}"))));
        let (all, notes, published) = describe(all, none);
        assert_eq!(all.len(), MAX_TOOLS);
        assert_eq!(published.len(), MAX_TOOLS);
        assert!(
            notes[0].contains("at most 128 tools per node: 81 left out"),
            "{notes:?}"
        );
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
            let description = d["description"].as_str().unwrap();
            assert!(!description.is_empty() && description.chars().count() <= 1024);
            assert!(d["parameters"].is_object());
            assert!(valid_name(d["name"].as_str().unwrap()), "{d}");
        }
        assert_eq!(all[0]["name"], "clawbot_read_file");
        assert_eq!(
            all[0]["mcp"],
            json!({"server": "clawbot", "tool": "read_file"})
        );
        assert_eq!(all[8]["parameters"]["type"], "object");
        let only = ours(&["write_file".to_owned(), "system.run".to_owned()]);
        assert_eq!(
            only.len(),
            1,
            "only declared tools, and none of OpenClaw's own"
        );
    }

    fn valid_name(name: &str) -> bool {
        let mut chars = name.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && name.len() <= 64
    }

    #[test]
    fn names_follow_openclaws_node_host() {
        assert_eq!(tool_name("clawbot", "read_file"), "clawbot_read_file");
        assert_eq!(tool_name("my server!", "do.it"), "my_server_do_it");
        assert_eq!(tool_name("everything", "get-sum"), "everything_get-sum");
        assert_eq!(tool_name("!!", "9lives"), "mcp_tool_9lives");
        assert_eq!(tool_name("a", "b_.c"), "a_b__c", "a run of others is one _");
        assert_eq!(tool_name(&"s".repeat(40), "t").len(), 33);
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), 64);
        // Clashes, without case, are numbered, within 64.
        let (all, _, _) = describe(
            vec![
                offered("a", "b.c"),
                offered("a", "B_c"),
                offered("a", "b c"),
            ],
            none,
        );
        let names: Vec<&str> = all.iter().map(|d| d["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a_b_c", "a_B_c_2", "a_b_c_3"]);
        let mut taken = HashSet::new();
        let long = "x".repeat(64);
        unique_name(&long, &mut taken);
        assert_eq!(unique_name(&long, &mut taken).len(), 64);
    }

    #[test]
    fn oversized_descriptors_are_left_out() {
        let mut huge = offered("s", "huge");
        huge.parameters =
            json!({"type": "object", "description": "x".repeat(MAX_DESCRIPTOR_BYTES)});
        let (all, notes, published) = describe(vec![huge, offered("s", "small")], none);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0]["name"], "s_small");
        assert!(!published.contains(&("s".to_owned(), "huge".to_owned())));
        assert!(
            notes[0].starts_with("s.huge is not offered to agents: its descriptor is"),
            "{notes:?}"
        );
    }

    #[test]
    fn forbidden_tools_are_not_offered() {
        let (all, notes, published) =
            describe(vec![offered("fs", "write"), offered("fs", "read")], |o| {
                (o.tool == "write").then(|| "fs.write".to_owned())
            });
        assert_eq!(all.len(), 1);
        assert!(!published.contains(&("fs".to_owned(), "write".to_owned())));
        assert_eq!(
            notes,
            ["fs.write is not offered to agents: --deny-command forbids it"]
        );
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
            code(Some(
                r#"{"server":"clawbot","tool":"read_file","arguments":null}"#
            )),
            "INVALID_REQUEST",
            "as OpenClaw: null is not an object"
        );
        let (server, tool, args) =
            decode(Some(r#"{"server":" clawbot ","tool":"system_info"}"#)).unwrap();
        assert_eq!(
            (server.as_str(), tool.as_str(), args),
            ("clawbot", "system_info", json!({}))
        );
    }
}
