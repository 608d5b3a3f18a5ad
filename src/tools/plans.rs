//! The plans `system.run.prepare` handed the gateway, and what an operator's
//! approval of one buys: exactly one run of exactly that plan.
//!
//! OpenClaw's gateway raises an approval for a plan and, once an operator
//! answers, re-sends `system.run` with `approved`/`approvalDecision` and the
//! plan. This node honours that only for a plan it prepared itself (so a
//! gateway cannot approve a plan of its own making), whose words are the
//! run's words, whose [`Binding`] — the files it runs, its directory, its
//! variables — still holds, and which no approval has used before: an
//! approval runs its plan once, `allow-once` or not (`allow-always` is
//! remembered in the exec-approvals document for later runs). OpenClaw's
//! node host leaves the "once" to its gateway; this node does not.
//!
//! Plans live in memory for 35 minutes (OpenClaw's approvals expire after
//! 30), 1,024 at most: a node restarted between the prepare and the run
//! asks again.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::ToolError;
use super::audit::digest;
use super::binding::Binding;

const KEEP: usize = 1024;
const AGE: Duration = Duration::from_secs(35 * 60);

struct Plan {
    key: String,
    binding: Binding,
    at: Instant,
    used: bool,
}

/// The plans this node prepared recently.
#[derive(Default)]
pub struct Plans(Mutex<Vec<Plan>>);

impl Plans {
    /// The words of a plan that the re-sent `system.run` must repeat.
    fn key(plan: &Value) -> String {
        let fields = json!([
            plan["argv"],
            plan["cwd"],
            plan["commandText"],
            plan["agentId"],
            plan["sessionKey"]
        ]);
        digest(&fields.to_string())
    }

    pub fn remember(&self, plan: &Value, binding: Binding) {
        let mut plans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        plans.retain(|p| p.at.elapsed() < AGE);
        if plans.len() >= KEEP {
            plans.remove(0);
        }
        plans.push(Plan {
            key: Self::key(plan),
            binding,
            at: Instant::now(),
            used: false,
        });
    }

    /// Spends an approval of `plan` on a run whose binding is `now`.
    pub fn redeem(&self, plan: &Value, now: &Binding) -> Result<(), ToolError> {
        let key = Self::key(plan);
        let mut plans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        plans.retain(|p| p.at.elapsed() < AGE);
        let mut mine: Vec<&mut Plan> = plans.iter_mut().filter(|p| p.key == key).collect();
        if mine.is_empty() {
            return Err(ToolError::new(
                "INVALID_REQUEST",
                "explicit approval requires matching systemRunPlan (this node prepared no such plan)",
            ));
        }
        let open: Vec<usize> = (0..mine.len()).filter(|i| !mine[*i].used).collect();
        let Some(&last) = open.last() else {
            return Err(ToolError::new(
                "SYSTEM_RUN_DENIED",
                "SYSTEM_RUN_DENIED: approval required (this plan's approval was used already: an approval runs its plan once)",
            ));
        };
        // Prepared twice with other files or variables: which one the
        // operator saw cannot be told, so neither runs.
        let ambiguous = open.iter().any(|i| mine[*i].binding != mine[last].binding);
        let verdict = if ambiguous {
            Err(ToolError::new(
                "SYSTEM_RUN_DENIED",
                "SYSTEM_RUN_DENIED: approval required (this command was prepared more than once with different variables or files, and the approval cannot say which one was shown; ask for approval again)",
            ))
        } else {
            mine[last].binding.check(now).map_err(|drift| drift.error())
        };
        // Spent either way: a refused run cannot be retried on this approval.
        for i in open {
            mine[i].used = true;
        }
        verdict
    }
}

/// The gateway's approval a re-sent `system.run` carries (`approved`,
/// `approvalDecision`), honoured only when its plan is exactly what
/// `system.run.prepare` handed out for this very call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub always: bool,
}

pub fn gateway_grant(params: &Value) -> Result<Option<Grant>, ToolError> {
    let decision = params["approvalDecision"].as_str();
    let approved =
        params["approved"] == true || matches!(decision, Some("allow-once" | "allow-always"));
    if !approved {
        return Ok(None);
    }
    let mismatch = || {
        ToolError::new(
            "INVALID_REQUEST",
            "explicit approval requires matching systemRunPlan",
        )
    };
    let plan = params
        .get("systemRunPlan")
        .filter(|p| p.is_object())
        .ok_or_else(mismatch)?;
    let argv: Option<Vec<String>> = params["command"]
        .as_array()
        .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_owned)).collect());
    let argv = argv.ok_or_else(mismatch)?;
    // Exactly (what runs is what was approved: no trimming).
    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
    let same = plan["argv"] == json!(argv)
        && plan["commandText"].as_str() == Some(super::exec::format_exec_command(&argv).as_str())
        && text(&plan["cwd"]) == text(&params["cwd"])
        && text(&plan["agentId"]) == text(&params["agentId"])
        && text(&plan["sessionKey"]) == text(&params["sessionKey"]);
    if !same {
        return Err(mismatch());
    }
    Ok(Some(Grant {
        always: decision == Some("allow-always"),
    }))
}
