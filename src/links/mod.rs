//! Links: other protocols that ask this machine to run tools. Each only
//! translates its frames into `tools` dispatch; none decides policy or
//! spawns a process by itself.

pub mod agent_service;
pub mod bridge;
pub mod command_queue;
pub mod http;
pub mod replay;

/// A link's executor: this machine's own tools (those an agent is shown),
/// built by [`crate::tools::setup::hands`] under the one policy, with no
/// gateway to approve; the prompt names `asker`.
pub fn link_tools(
    args: &crate::cli::HandsArgs,
    asker: &str,
) -> Result<std::sync::Arc<crate::tools::Tools>, String> {
    let (state_dir, workspace) = (args.state_dir(), args.workspace());
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
        browser: None,
        offer: Default::default(),
        file_roots: &[],
    };
    let declared = crate::tools::catalog::ENTRIES
        .iter()
        .map(|e| e.name.to_owned())
        .collect();
    crate::tools::setup::hands(&setup, declared)
}
