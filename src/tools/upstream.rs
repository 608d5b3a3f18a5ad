//! Tools another program serves — a local MCP server the node proxies to
//! OpenClaw's agents — called under this node's one policy, approval and
//! audit, exactly as its own tools are. The link that speaks to the server
//! implements [`Upstream`]; it never decides whether a call may run.
//!
//! A proxied tool is known to the policy as `SERVER.TOOL`: that is what
//! `--deny-command` / `--allow-command` name (`SERVER.*` covers a whole
//! server), what the terminal prompt shows, and what the audit line says.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::policy::{Call, Decision, Risk};
use super::{Invocation, ToolError, Tools, cancellable, refusal_of};

/// A proxied call's work.
pub type Reply = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;

/// A source of tools this node runs by asking someone else.
pub trait Upstream: Send + Sync {
    /// How risky `server`'s `tool` is, or (`MCP_SERVER_UNAVAILABLE`,
    /// `MCP_TOOL_UNAVAILABLE`) why it cannot be called now.
    fn lookup(&self, server: &str, tool: &str) -> Result<Risk, ToolError>;

    /// Calls it: an MCP `CallToolResult` as JSON within `max_bytes`, or
    /// why not. Must give up within `timeout` and, once `cancel` fires,
    /// tell the server and return.
    fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        timeout: Duration,
        max_bytes: usize,
        cancel: CancellationToken,
    ) -> Reply;
}

/// How much of a call's arguments a prompt shows.
const SUMMARY_ARGS: usize = 300;

impl Tools {
    /// `server`'s `tool` with `arguments`, decided by the policy, run by
    /// `upstream`, audited; the result, and how the policy decided.
    pub async fn invoke_upstream(
        self: &Arc<Self>,
        inv: &Invocation<'_>,
        upstream: &dyn Upstream,
        server: &str,
        tool: &str,
        arguments: Value,
    ) -> (Result<Value, ToolError>, String) {
        let started = Instant::now();
        let command = format!("{server}.{tool}");
        let mut decision = None;
        let result = async {
            let risk = upstream.lookup(server, tool)?;
            let call = Call {
                summary: summary(&command, &arguments),
                command: command.clone(),
                risk,
                exec: None,
                agent: inv.agent.map(str::to_owned),
                upstream: true,
                one_shot: false,
            };
            let verdict = cancellable(&inv.cancel, self.policy.decide(&call, inv.timeout)).await?;
            decision = Some(verdict.clone());
            if !matches!(verdict, Decision::Allowed(_)) {
                return Err(refusal_of(verdict));
            }
            upstream
                .call(
                    server,
                    tool,
                    arguments,
                    inv.timeout,
                    inv.max_bytes,
                    inv.cancel.clone(),
                )
                .await
        }
        .await;
        let label = self.record(inv, &command, decision, &result, started);
        (result, label)
    }
}

/// `server.tool {"path":"a.txt"}`, the arguments cut to a line's length.
pub(super) fn summary(command: &str, arguments: &Value) -> String {
    let args = arguments.to_string();
    if args.chars().count() <= SUMMARY_ARGS {
        return format!("{command} {args}");
    }
    let head: String = args.chars().take(SUMMARY_ARGS).collect();
    format!("{command} {head}… ({} bytes of arguments)", args.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::policy::Call;
    use crate::tools::policy::{Mode, Policy};
    use crate::tools::{audit, sandbox::Workspace};
    use serde_json::json;
    use std::sync::Mutex;

    /// Records what reached it; `write` is risky, `read` safe.
    #[derive(Default)]
    struct Fake {
        called: Mutex<Vec<String>>,
    }

    impl Upstream for Fake {
        fn lookup(&self, server: &str, tool: &str) -> Result<Risk, ToolError> {
            match (server, tool) {
                ("s", "read") => Ok(Risk::Safe),
                ("s", "write") => Ok(Risk::Risky),
                ("s", _) => Err(ToolError::new("MCP_TOOL_UNAVAILABLE", "no such tool")),
                _ => Err(ToolError::new("MCP_SERVER_UNAVAILABLE", "no such server")),
            }
        }

        fn call(
            &self,
            _server: &str,
            tool: &str,
            arguments: Value,
            _timeout: Duration,
            _max_bytes: usize,
            _cancel: CancellationToken,
        ) -> Reply {
            self.called.lock().unwrap().push(tool.to_owned());
            Box::pin(async move { Ok(json!({"content": [], "structuredContent": arguments})) })
        }
    }

    fn tools(dir: &std::path::Path, mode: Mode, deny: &[&str]) -> Arc<Tools> {
        let ws = dir.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        Tools::new(
            Workspace::new(&ws).unwrap(),
            Policy::new(
                mode,
                vec![],
                deny.iter().map(|d| d.to_string()).collect(),
                dir,
                None,
            ),
            audit::Audit::open(dir),
            vec![],
            None,
            crate::tools::Offer::default(),
            crate::tools::files::Files::new(&Workspace::new(&ws).unwrap(), &[]).unwrap(),
        )
    }

    async fn call(
        t: &Arc<Tools>,
        fake: &Fake,
        server: &str,
        tool: &str,
    ) -> (Result<Value, ToolError>, String) {
        let inv = Invocation {
            keep: None,
            id: "i",
            command: "mcp.tools.call.v1",
            params_json: Some("{}"),
            timeout: Duration::from_secs(5),
            max_bytes: 1 << 20,
            cancel: CancellationToken::new(),
            tap: None,
            agent: None,
            gate: crate::tools::policy::Gate::Ours,
            gateway: None,
        };
        t.invoke_upstream(&inv, fake, server, tool, json!({"a": 1}))
            .await
    }

    #[tokio::test]
    async fn the_one_policy_decides_and_the_audit_log_names_server_and_tool() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Fake::default();
        let t = tools(dir.path(), Mode::Deny, &["s.read"]);
        // Denied by name, even though safe; risky refused by the mode.
        assert_eq!(
            call(&t, &fake, "s", "read").await.0.unwrap_err().code,
            "FORBIDDEN"
        );
        let (refused, decision) = call(&t, &fake, "s", "write").await;
        assert_eq!(refused.unwrap_err().code, "USER_REJECTED");
        assert_eq!(decision, "refused:USER_REJECTED");
        assert_eq!(
            call(&t, &fake, "s", "gone").await.0.unwrap_err().code,
            "MCP_TOOL_UNAVAILABLE"
        );
        assert!(
            fake.called.lock().unwrap().is_empty(),
            "nothing reached the server"
        );
        let t = tools(dir.path(), Mode::Allow, &["s.*"]);
        assert_eq!(
            call(&t, &fake, "s", "write").await.0.unwrap_err().code,
            "FORBIDDEN"
        );
        let t = tools(dir.path(), Mode::Allow, &[]);
        let (ok, decision) = call(&t, &fake, "s", "write").await;
        assert_eq!(ok.unwrap()["structuredContent"]["a"], 1);
        assert_eq!(decision, "allowed:approval-allow");
        let log = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
        let lines: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0]["command"], "s.read");
        assert_eq!(lines[2]["decision"], "none");
        assert_eq!(lines[2]["outcome"], "error:MCP_TOOL_UNAVAILABLE");
        assert_eq!(lines[4]["outcome"], "ok");
    }

    /// `SERVER.*` names a proxied server's tools only: never the node's
    /// own `system.run`, `fs.listDir` or `terminal.upload`.
    #[tokio::test]
    async fn a_servers_glob_never_covers_the_nodes_own_commands() {
        let dir = tempfile::tempdir().unwrap();
        let glob = |g: &str| vec![g.to_owned()];
        let allow = Policy::new(Mode::Deny, glob("system.*"), vec![], dir.path(), None);
        let call = |command: &str, upstream| Call {
            command: command.into(),
            risk: Risk::Risky,
            summary: command.into(),
            exec: None,
            agent: None,
            upstream,
            one_shot: false,
        };
        let wait = Duration::from_secs(1);
        assert!(matches!(
            allow.decide(&call("system.run", false), wait).await,
            Decision::Refused { .. }
        ));
        assert!(matches!(
            allow.decide(&call("system.run", true), wait).await,
            Decision::Allowed(_)
        ));
        let deny = Policy::new(Mode::Allow, vec![], glob("fs.*"), dir.path(), None);
        assert!(!deny.forbids("fs.listDir", false));
        assert!(deny.forbids("fs.read", true));
        assert!(!deny.forbids("fsx.read", true));
    }

    #[test]
    fn long_arguments_are_cut_in_the_summary() {
        let long = json!({"content": "x".repeat(5000)});
        let s = summary("fs.write_file", &long);
        assert!(s.starts_with("fs.write_file {\"content\":\"xxx"));
        assert!(s.ends_with("(5014 bytes of arguments)"), "{s}");
    }
}
