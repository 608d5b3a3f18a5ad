//! Which local MCP servers to start: `--mcp-server NAME=COMMAND [ARGS…]`
//! (one value, split into words as this platform's users write command
//! lines — see `runner::split_words` — never run by a shell) and
//! `--mcp-config FILE`, the `mcpServers` JSON that Claude Desktop and
//! Cursor write (`servers`, VS Code's key, too):
//!
//! ```json
//! {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "pkg"], "env": {"K": "v"}}}}
//! ```
//!
//! A mistake here is the user's and stops the node at start with what to
//! fix; an entry this node cannot serve (a remote `url` server, one marked
//! `disabled`) is left out with a note.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::shape::SERVER as RESERVED;
/// The longest server name (OpenClaw's node host keeps 31 characters of
/// it in a tool's name).
const MAX_NAME: usize = 31;
/// The largest config file read.
const MAX_FILE: u64 = 1 << 20;

/// One server to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub name: String,
    pub program: String,
    pub args: Vec<String>,
    /// Added to the environment it inherits (minus our secrets).
    pub env: Vec<(String, String)>,
    /// Where it runs (default: the node's workspace).
    pub cwd: Option<PathBuf>,
}

/// The flags as given (a service's command line repeats them) and what
/// they name.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    pub flags: Vec<String>,
    /// `--mcp-config`, absolute.
    pub file: Option<PathBuf>,
    /// In order: the flags', then the file's.
    pub servers: Vec<ServerConfig>,
    /// A line on each entry left out.
    pub notes: Vec<String>,
}

/// The servers the flags name, checked.
pub fn gather(flags: Vec<String>, file: Option<&Path>) -> Result<Setup, String> {
    let mut servers = flags
        .iter()
        .map(|f| from_flag(f))
        .collect::<Result<Vec<_>, _>>()?;
    let mut notes = Vec::new();
    let file = file
        .map(|f| std::path::absolute(f).map_err(|e| format!("--mcp-config {}: {e}", f.display())))
        .transpose()?;
    if let Some(path) = &file {
        let (more, left_out) = from_file(path)?;
        servers.extend(more);
        notes = left_out;
    }
    for (i, s) in servers.iter().enumerate() {
        if servers[..i].iter().any(|t| t.name == s.name) {
            return Err(format!("MCP server {:?} is named twice", s.name));
        }
    }
    Ok(Setup {
        flags,
        file,
        servers,
        notes,
    })
}

/// `NAME=COMMAND [ARGS…]`.
fn from_flag(value: &str) -> Result<ServerConfig, String> {
    let usage = "--mcp-server takes NAME=COMMAND [ARGS…], e.g. --mcp-server 'fs=npx -y @modelcontextprotocol/server-filesystem /srv'";
    let (name, command) = value
        .split_once('=')
        .ok_or_else(|| format!("{usage}: no '=' in {value:?}"))?;
    let name = check_name(name.trim())?;
    let words =
        crate::runner::split_words(command).map_err(|e| format!("--mcp-server {name}: {e}"))?;
    let (program, args) = words
        .split_first()
        .ok_or_else(|| format!("{usage}: {name:?} has no command"))?;
    Ok(ServerConfig {
        name,
        program: program.clone(),
        args: args.to_vec(),
        env: Vec::new(),
        cwd: None,
    })
}

fn from_file(path: &Path) -> Result<(Vec<ServerConfig>, Vec<String>), String> {
    let at = |e: String| format!("--mcp-config {}: {e}", path.display());
    let meta = std::fs::metadata(path).map_err(|e| at(e.to_string()))?;
    if meta.len() > MAX_FILE {
        return Err(at(format!(
            "{} bytes; at most {MAX_FILE} are read",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
    // The servers' own secrets live in its `env`.
    crate::shared::secrets::holds_secrets(path);
    let doc: Value = serde_json::from_str(&text).map_err(|e| at(format!("not JSON: {e}")))?;
    let (mut servers, notes) = parse(&doc).map_err(at)?;
    // A relative "cwd" is the file's business: from the file's directory.
    let base = path.parent().unwrap_or(Path::new("."));
    for server in &mut servers {
        server.cwd = server.cwd.take().map(|d| base.join(d));
    }
    Ok((servers, notes))
}

/// The document's servers and what was left out.
fn parse(doc: &Value) -> Result<(Vec<ServerConfig>, Vec<String>), String> {
    let entries = doc
        .get("mcpServers")
        .or_else(|| doc.get("servers"))
        .ok_or("no \"mcpServers\" object")?
        .as_object()
        .ok_or("\"mcpServers\" must be an object of servers by name")?;
    let mut servers = Vec::new();
    let mut notes = Vec::new();
    for (name, entry) in entries {
        let name = check_name(name)?;
        let fail = |what: &str| format!("server {name:?}: {what}");
        let entry = entry.as_object().ok_or_else(|| fail("must be an object"))?;
        if entry.get("disabled") == Some(&Value::Bool(true)) {
            notes.push(format!(
                "MCP server {name:?} is disabled in the config: left out"
            ));
            continue;
        }
        let transport = entry.get("type").and_then(Value::as_str).unwrap_or("stdio");
        if entry.contains_key("url") || transport != "stdio" {
            notes.push(format!(
                "MCP server {name:?} is a remote ({transport}) server: only local stdio servers are proxied; left out"
            ));
            continue;
        }
        let program = entry
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| fail("\"command\" must be a non-empty string"))?
            .to_owned();
        let args = match entry.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(args)) => args
                .iter()
                .map(|a| a.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| fail("\"args\" must be an array of strings"))?,
            Some(_) => return Err(fail("\"args\" must be an array of strings")),
        };
        let env = match entry.get("env") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(env)) => env
                .iter()
                .map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect::<Option<Vec<_>>>()
                .filter(|env| {
                    env.iter()
                        .all(|(k, _)| !k.is_empty() && !k.contains(['=', '\0']))
                })
                .ok_or_else(|| fail("\"env\" must map variable names to strings"))?,
            Some(_) => return Err(fail("\"env\" must map variable names to strings")),
        };
        let cwd = match entry.get("cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(dir)) => Some(PathBuf::from(dir)),
            Some(_) => return Err(fail("\"cwd\" must be a string")),
        };
        servers.push(ServerConfig {
            name,
            program,
            args,
            env,
            cwd,
        });
    }
    Ok((servers, notes))
}

/// A server name: a letter, then letters, digits, `_` or `-`; at most 31;
/// not ours. What `--deny-command NAME.TOOL` and tool names are made of.
fn check_name(name: &str) -> Result<String, String> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && name.len() <= MAX_NAME;
    if !ok {
        return Err(format!(
            "MCP server name {name:?}: use a letter, then letters, digits, '_' or '-' (at most {MAX_NAME})"
        ));
    }
    if name == RESERVED {
        return Err(format!(
            "MCP server name {name:?} is this node's own tools' name: choose another"
        ));
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_flag_is_a_name_and_a_command_line_split_without_a_shell() {
        let s = from_flag("fs=npx -y '@scope/server x' \"$HOME\" ;rm").unwrap();
        assert_eq!(s.name, "fs");
        assert_eq!(s.program, "npx");
        assert_eq!(s.args, ["-y", "@scope/server x", "$HOME", ";rm"]);
        for bad in [
            "fs",
            "=npx",
            "fs=",
            "1fs=x",
            "f.s=x",
            "clawbot=x",
            "fs=npx 'open",
        ] {
            assert!(from_flag(bad).is_err(), "{bad}");
        }
        assert!(from_flag(&format!("{}=x", "a".repeat(32))).is_err());
    }

    #[test]
    fn the_claude_desktop_shape_is_read_and_what_cannot_be_served_is_left_out() {
        let doc = json!({"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "pkg", "/srv"], "env": {"KEY": "v"}, "cwd": "/tmp", "autoApprove": []},
            "web": {"url": "https://example.com/mcp"},
            "sse": {"type": "sse", "command": "x"},
            "off": {"command": "x", "disabled": true},
        }});
        let (servers, notes) = parse(&doc).unwrap();
        assert_eq!(
            servers,
            [ServerConfig {
                name: "fs".into(),
                program: "npx".into(),
                args: vec!["-y".into(), "pkg".into(), "/srv".into()],
                env: vec![("KEY".into(), "v".into())],
                cwd: Some("/tmp".into()),
            }]
        );
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            parse(&json!({"servers": {"a": {"command": "x"}}}))
                .unwrap()
                .0
                .len()
                == 1
        );
    }

    #[test]
    fn malformed_documents_say_what_to_fix() {
        for (doc, says) in [
            (json!([]), "no \"mcpServers\""),
            (json!({"mcpServers": []}), "must be an object"),
            (
                json!({"mcpServers": {"a": 1}}),
                "server \"a\": must be an object",
            ),
            (json!({"mcpServers": {"a": {}}}), "\"command\""),
            (
                json!({"mcpServers": {"a": {"command": "x", "args": "y"}}}),
                "\"args\"",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x", "args": [1]}}}),
                "\"args\"",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}),
                "\"env\"",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x", "env": {"A=B": "c"}}}}),
                "\"env\"",
            ),
            (
                json!({"mcpServers": {"a b": {"command": "x"}}}),
                "MCP server name",
            ),
        ] {
            let e = parse(&doc).unwrap_err();
            assert!(e.contains(says), "{doc}: {e}");
        }
    }

    #[test]
    fn names_are_unique_across_flags_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mcp.json");
        std::fs::write(&file, r#"{"mcpServers": {"fs": {"command": "x"}}}"#).unwrap();
        let e = gather(vec!["fs=y".into()], Some(&file)).unwrap_err();
        assert!(e.contains("named twice"), "{e}");
        let setup = gather(vec!["a=y".into()], Some(&file)).unwrap();
        let names: Vec<&str> = setup.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "fs"]);
        assert!(setup.file.unwrap().is_absolute());
        std::fs::write(
            &file,
            r#"{"mcpServers": {"fs": {"command": "x", "cwd": "sub"}}}"#,
        )
        .unwrap();
        let setup = gather(vec![], Some(&file)).unwrap();
        assert_eq!(
            setup.servers[0].cwd.as_deref(),
            Some(dir.path().join("sub").as_path())
        );
        std::fs::write(&file, "{").unwrap();
        assert!(
            gather(vec![], Some(&file))
                .unwrap_err()
                .contains("not JSON")
        );
        assert!(
            gather(vec![], Some(&dir.path().join("none")))
                .unwrap_err()
                .contains("--mcp-config")
        );
    }
}
