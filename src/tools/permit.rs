//! A remote agent asking whether it may use one of *its own* tools (seed
//! 004's `permission_request`: Claude Code wants to run its `Bash`). Not a
//! call of ours, but the same question to the same policy — the terminal
//! prompt when there is one, `--allow-command`/`--deny-command`, remembered
//! "always" answers, `--approval` otherwise — and the same audit line.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::policy::{Call, Decision, Gate, Risk};
use super::{Invocation, Tools, cancellable};

/// How the policy names a remote agent's own tool: `claude.Bash`, so that
/// `--allow-command 'claude.*'` or `--deny-command claude.Bash` can.
pub const PREFIX: &str = "claude";

impl Tools {
    /// Whether the remote agent may use its tool `tool` with `args`.
    pub async fn permit(
        &self,
        request_id: &str,
        tool: &str,
        args: &Value,
        rationale: &str,
        wait: Duration,
        cancel: &CancellationToken,
    ) -> bool {
        let started = Instant::now();
        let command = format!("{PREFIX}.{tool}");
        let mut summary = super::upstream::summary(&command, args);
        if !rationale.trim().is_empty() {
            let why: String = rationale.chars().take(300).collect();
            summary = format!("{summary} — because: {why}");
        }
        let call = Call {
            command: command.clone(),
            risk: Risk::Risky,
            summary,
            exec: None,
            agent: None,
            upstream: true,
            one_shot: false,
        };
        let decision = cancellable(cancel, self.policy.decide(&call, wait))
            .await
            .unwrap_or(Decision::Refused {
                code: "CANCELLED",
                message: "the connection ended".into(),
            });
        let params = serde_json::to_string(args).unwrap_or_default();
        let inv = Invocation {
            keep: None,
            id: request_id,
            command: &command,
            params_json: Some(&params),
            timeout: wait,
            max_bytes: 0,
            cancel: cancel.clone(),
            tap: None,
            agent: None,
            gate: Gate::Ours,
            gateway: None,
        };
        let allowed = matches!(decision, Decision::Allowed(_));
        let outcome = if allowed {
            Ok(Value::Null)
        } else {
            Err(super::refusal_of(decision.clone()))
        };
        self.record(&inv, &command, Some(decision), &outcome, started);
        allowed
    }
}
