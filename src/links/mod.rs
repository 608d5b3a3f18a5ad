//! Links: other protocols that ask this machine to run tools. Each only
//! translates its frames into `tools` dispatch; none decides policy or
//! spawns a process by itself.

pub mod agent_service;
pub mod bridge;
pub mod command_queue;
pub mod http;
pub mod mcp_servers;
pub mod replay;

use std::path::Path;

/// Where a secret comes from: its command-line flag (refused), its
/// file flag, its environment variable.
pub struct SecretSource<'a> {
    /// What was given on the command line, to refuse.
    pub flag: Option<&'a str>,
    pub file: Option<&'a Path>,
    /// The file flag's name (`--token-file`), for the messages.
    pub file_flag: &'a str,
    pub var: &'a str,
    /// What it is ("the bridge token").
    pub what: &'a str,
}

/// A secret (a token, an API key), from its file or its variable — never
/// from the command line, where every user of the machine can read it
/// (`ps`).
pub fn secret(from: &SecretSource<'_>) -> Result<String, String> {
    let SecretSource {
        flag,
        file,
        file_flag,
        var,
        what,
    } = *from;
    if flag.is_some() {
        return Err(format!(
            "{what} on the command line is visible to every user of this machine (ps); put it in the environment variable {var} or a file ({file_flag} FILE)"
        ));
    }
    let text = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {what} from {}: {e}", path.display()))?;
            crate::secrets::holds_secrets(path);
            text
        }
        None => crate::secrets::var(var).unwrap_or_default(),
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(format!(
            "{what} is missing: set {var} or give {file_flag} FILE"
        ));
    }
    Ok(text.to_owned())
}

/// Whether two secrets are equal, in time that does not depend on where
/// they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    use sha2::{Digest, Sha256};
    let (x, y) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    x.iter()
        .zip(y.iter())
        .fold(0u8, |acc, (p, q)| acc | (p ^ q))
        == 0
}

/// `bytes` in lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A link's listening (or reaching) address: loopback, or with
/// `allow_remote` a private-network address — never a public one, and
/// never every interface at once: `secret` crosses it in plaintext.
pub fn listen_address(
    text: &str,
    allow_remote: bool,
    secret: &str,
) -> Result<std::net::SocketAddr, String> {
    let addr: std::net::SocketAddr = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not an address: write IP:PORT, e.g. 127.0.0.1:18801"))?;
    let ip = addr.ip();
    if ip.is_loopback() {
        return Ok(addr);
    }
    if ip.is_unspecified() {
        return Err(format!(
            "{addr} listens on every interface, public ones included, and {secret} would cross them in plaintext: name a loopback or private address"
        ));
    }
    if !allow_remote {
        return Err(format!(
            "{addr} is not loopback: add --allow-remote to use a private-network address"
        ));
    }
    if !crate::gateway::transport::plaintext_allowed_strictly(&ip.to_string()) {
        return Err(format!(
            "{addr} is a public address, and {secret} would cross the internet in plaintext: use a loopback or private address"
        ));
    }
    Ok(addr)
}

/// The hands a link's calls run on: this machine's own tools (those an
/// agent is shown), under the one policy; the prompt names `asker`.
pub fn hands(
    args: &crate::cli::HandsArgs,
    asker: &str,
) -> Result<(std::sync::Arc<crate::tools::Tools>, bool), String> {
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(crate::node::default_state_dir);
    let workspace = args.workspace.clone().unwrap_or_else(|| ".".into());
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
        crate::log::tell(
            "",
            "stdin/stderr is not a terminal: risky calls are refused unless pre-approved (--allow-command NAME, or --approval allow)",
        );
    }
    Ok((tools, asks))
}
