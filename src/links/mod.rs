//! Links: other protocols that ask this machine to run tools. Each only
//! translates its frames into `tools` dispatch; none decides policy or
//! spawns a process by itself.

pub mod agent_service;
pub mod bridge;
pub mod command_queue;
pub mod http;
pub mod replay;

/// Where the hands keep their state and which directory they work in:
/// `--state-dir` and `--workspace` with their defaults filled in. The one
/// translation of these flags, shared by every link and the node's options
/// (`app::node_args`), so a default changes in one place.
pub fn places(args: &crate::cli::HandsArgs) -> (std::path::PathBuf, std::path::PathBuf) {
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(crate::shared::paths::default_state_dir);
    let workspace = args.workspace.clone().unwrap_or_else(|| ".".into());
    (state_dir, workspace)
}

/// A link's executor: this machine's own tools (those an agent is shown),
/// built by [`crate::tools::setup::hands`] under the one policy, with no
/// gateway to approve; the prompt names `asker`.
pub fn link_tools(
    args: &crate::cli::HandsArgs,
    asker: &str,
) -> Result<(std::sync::Arc<crate::tools::Tools>, bool), String> {
    let (state_dir, workspace) = places(args);
    if args.approval == crate::tools::policy::Mode::Gateway {
        return Err(
            "--approval gateway needs an OpenClaw gateway; a link has none (ask, allow or deny)"
                .into(),
        );
    }
    let setup = crate::tools::setup::Setup {
        state_dir: &state_dir,
        workspace: &workspace,
        approval: args.approval,
        allow: &args.allow,
        deny: &args.deny,
        asker,
        gateway: false,
    };
    let declared = crate::tools::catalog::ENTRIES
        .iter()
        .map(|e| e.name.to_owned())
        .collect();
    let (tools, asks) = crate::tools::setup::hands(&setup, declared)?;
    if args.approval == crate::tools::policy::Mode::Ask && !asks {
        crate::shared::log::tell(
            "",
            "stdin/stderr is not a terminal: risky calls are refused unless pre-approved (--allow-command NAME, or --approval allow)",
        );
    }
    Ok((tools, asks))
}
