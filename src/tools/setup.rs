//! The hands as a process sets them up — the node and every link alike:
//! the workspace (with our own state kept out of it), the one policy with
//! its terminal prompt, the audit log, and the executor over them.

use std::path::Path;
use std::sync::Arc;

use super::audit::Audit;
use super::policy::{Mode, Policy};
use super::sandbox::Workspace;
use super::{Tools, system};
use crate::ui::Prompter;

/// What the hands are built from (the flags of [`crate::cli::HandsArgs`]).
pub struct Setup<'a> {
    pub state_dir: &'a Path,
    pub workspace: &'a Path,
    pub approval: Mode,
    pub allow: &'a [String],
    pub deny: &'a [String],
    /// Who asks, as the terminal prompt names it ("OpenClaw").
    pub asker: &'a str,
    /// Whether a gateway's operators can approve what no terminal can.
    pub gateway: bool,
    /// The browser `browser.proxy` drives (the node's, when found).
    pub browser: Option<super::browser::Options>,
    /// What the owner turned on.
    pub offer: super::Offer,
    /// More directories OpenClaw's file transfers may reach (`--file-root`).
    pub file_roots: &'a [std::path::PathBuf],
}

/// The executor for `declared` commands. Under `--approval ask` without a
/// terminal to ask on, it says (once, as a warning) where risky calls go
/// instead.
pub fn hands(setup: &Setup<'_>, declared: Vec<String>) -> Result<Arc<Tools>, String> {
    crate::shared::paths::create_private_dir(setup.state_dir).map_err(|e| {
        format!(
            "cannot create the state directory {}: {e}",
            setup.state_dir.display()
        )
    })?;
    let mut workspace = Workspace::new(setup.workspace)
        .map_err(|e| format!("--workspace {}: {e}", setup.workspace.display()))?;
    // Keys, tokens and approvals are never a tool's business, even when
    // the workspace is the home directory that holds them.
    workspace.protect(setup.state_dir);
    for path in system::openclaw_private_paths() {
        workspace.protect(&path);
    }
    // Claude Code's transcripts and sign-in token: shared only through
    // the sessions commands, and only when the owner says so.
    for path in super::claude::private_paths() {
        workspace.protect(&path);
    }
    // The files this process read a secret from (--env-file, --token-file,
    // --key-file, --mcp-config), wherever they are.
    for path in crate::shared::secrets::files() {
        workspace.protect(&path);
    }
    let prompter = match setup.approval {
        Mode::Ask => Prompter::for_terminal(),
        _ => None,
    };
    if setup.approval == Mode::Ask && prompter.is_none() {
        crate::shared::log::warn_as(
            "",
            if setup.gateway {
                "stdin/stderr is not a terminal: risky calls go to the gateway for approval (an agent's exec raises an exec approval) or are refused unless pre-approved (--allow-command, --approval allow, openclaw approvals allowlist add --node)"
            } else {
                "stdin/stderr is not a terminal: risky calls are refused unless pre-approved (--allow-command NAME, or --approval allow)"
            },
        );
    }
    let policy = Policy::new(
        setup.approval,
        setup.allow.to_vec(),
        setup.deny.to_vec(),
        setup.state_dir,
        prompter,
    )
    .asked_by(setup.asker);
    let policy = if setup.gateway {
        policy
    } else {
        policy.without_gateway()
    };
    let audit = Audit::open(setup.state_dir);
    let files = super::files::Files::new(&workspace, setup.file_roots)?;
    Ok(Tools::new(
        workspace,
        policy,
        audit,
        declared,
        setup.browser.clone(),
        setup.offer.clone(),
        files,
    ))
}
