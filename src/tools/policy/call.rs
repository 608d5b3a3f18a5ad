//! What the policy is asked and what it answers: a call (its risk, the
//! program it runs), the `--approval` mode, what the remote side says of a
//! call's risk (`Gate`), the decision, and the stance the gateway is told.
//!
//! Plain values only: must never decide anything, read a file or ask
//! anyone — that is the policy's (`super`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Risk class of a command (seed 003's airlock levels 0 and 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Risk {
    /// Reads: auto-execute.
    Safe,
    /// Writes and execution: need approval.
    Risky,
}

/// What the remote side says about a call's risk (seed 001's `risk`, seed
/// 003's airlock level). It can only make our own class stricter: the
/// desktop is the final authority.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Gate {
    /// Our own class decides (the node, the bridge).
    #[default]
    Ours,
    /// At least risky: a read runs only as a write would.
    Risky,
    /// The user trusts this source with risky calls that run no program
    /// (seed 003's headless mode for airlock levels 0 and 1): a write runs
    /// unasked; a program still goes through the policy.
    Headless,
    /// A human, every time (seed 003's airlock level 2): no pre-approval,
    /// no remembered "always", no `--approval allow` stands in.
    Human,
}

/// `--approval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// A human decides: on the terminal when stdin and stderr are one,
    /// otherwise through the gateway (an exec approval an operator resolves).
    Ask,
    /// A human decides, always through the gateway.
    Gateway,
    Deny,
    Allow,
}

/// How `system.run.prepare` describes this node's exec policy to the
/// gateway, which decides from it whether to raise an approval first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stance {
    /// Nothing for the gateway to ask (we allow, or ask on our terminal).
    Open,
    /// The gateway must ask a human for what the allowlist does not cover.
    Approvals,
    /// Exec is refused here.
    Closed,
}

/// One call as the policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub command: String,
    pub risk: Risk,
    /// What the user is shown: the command and its arguments, one line.
    pub summary: String,
    /// Set for calls that run a program: what "allow always" binds to.
    pub exec: Option<Exec>,
    /// The agent the gateway names for it, if any: its own allowlist in
    /// the exec-approvals document applies (none named: only `"*"`'s, and
    /// every agent's restrictions).
    pub agent: Option<String>,
    /// A tool another program serves (`SERVER.TOOL`): what `SERVER.*`
    /// names, and nothing else does.
    pub upstream: bool,
    /// It runs a script: a gateway's `allow-always` of it is spent as
    /// `allow-once` (as OpenClaw offers only `allow-once` for a plan with a
    /// mutable file operand), since an allowlist entry would cover the
    /// script whatever it holds later.
    pub one_shot: bool,
}

impl Call {
    /// A call of one of our own commands that runs no program.
    pub fn plain(command: &str, risk: Risk, summary: String) -> Self {
        Self {
            command: command.to_owned(),
            risk,
            summary,
            exec: None,
            agent: None,
            upstream: false,
            one_shot: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exec {
    pub executable: PathBuf,
    pub argv: Vec<String>,
    /// Where it runs and what it adds to the environment: part of what the
    /// user approves, so part of what "allow always" remembers.
    #[serde(default)]
    pub cwd: PathBuf,
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// The fingerprint of the files it runs and its directory (see
    /// `binding.rs`): a remembered "always" covers those files only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
}

/// Why a call may run, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allowed(&'static str),
    Refused { code: &'static str, message: String },
}

impl Decision {
    /// A short label for the audit log.
    pub fn label(&self) -> String {
        match self {
            Decision::Allowed(why) => format!("allowed:{why}"),
            Decision::Refused { code, .. } => format!("refused:{code}"),
        }
    }
}
