//! The node's options from the command line: the gateway it joins (built
//! from the flags as OpenClaw's CLI builds the URL), a setup code, the
//! service commands.

use super::{print, print_json};
use crate::cli::{NodeArgs, ServiceCommand};
use crate::shared::log::tell;
use crate::{gateway, node};

/// The gateway the node connects to, as `openclaw node run` finds it:
/// `--gateway URL`, or OpenClaw's own `--host/--port/--tls/--context-path`
/// (so a command line or a service file carries over) — not both; a setup
/// code's; `OPENCLAW_GATEWAY_URL`; else the one this node last served.
/// `--tls` and a pin make a URL nobody typed `wss://` (a pin implies TLS,
/// as in OpenClaw); one typed as `ws://` stays so, and is refused beside
/// them rather than silently upgraded.
pub(super) fn node_endpoint(
    args: &NodeArgs,
    gateway_flag: bool,
    pair: Option<&gateway::setup_code::SetupCode>,
    from_env: bool,
    saved: impl FnOnce() -> Option<String>,
) -> Result<gateway::Endpoint, String> {
    let pin = args.gateway.tls_fingerprint();
    let tls = args.tls || pin.is_some();
    let pieces = args.host.is_some() || args.port.is_some() || args.context_path.is_some();
    if gateway_flag && (pieces || args.tls) {
        return Err(format!(
            "--gateway {} and --host/--port/--tls/--context-path both name the gateway: give one or the other",
            args.gateway.url
        ));
    }
    let typed = gateway_flag || (from_env && !pieces && pair.is_none());
    let mut url = if pieces {
        let host = args.host.clone().unwrap_or_else(|| "127.0.0.1".into());
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]") // an IPv6 address
        } else {
            host
        };
        let path = match args.context_path.as_deref().map(str::trim) {
            None | Some("") => String::new(),
            Some(p) if p.starts_with('/') => p.to_owned(),
            Some(p) => format!("/{p}"),
        };
        let scheme = if tls { "wss" } else { "ws" };
        format!("{scheme}://{host}:{}{path}", args.port.unwrap_or(18789))
    } else if let Some(code) = pair {
        if gateway_flag && args.gateway.url != code.url {
            return Err(format!(
                "the setup code is for {} but --gateway names {}: drop one",
                code.url, args.gateway.url
            ));
        }
        code.url.clone()
    } else if typed {
        args.gateway.url.clone()
    } else {
        saved().unwrap_or_else(|| args.gateway.url.clone())
    };
    if let Some(code) = pair
        && pieces
        && url != code.url
    {
        return Err(format!(
            "the setup code is for {} but --host/--port/--context-path name {url}: drop one",
            code.url
        ));
    }
    if tls
        && !typed
        && let Some(rest) = url.strip_prefix("ws://")
    {
        url = format!("wss://{rest}");
    }
    if args.tls && url.starts_with("ws://") {
        return Err(format!(
            "--tls, but the gateway is named as {url}: use wss://"
        ));
    }
    if args.no_tls && url.starts_with("wss://") {
        return Err(format!(
            "--no-tls, but the gateway is named as {url}: use ws://, or drop --no-tls"
        ));
    }
    Ok(gateway::Endpoint {
        url,
        trust: gateway::Trust {
            pin: pin.or(pair.and_then(|c| c.fingerprint)),
        },
    })
}

/// `--pair CODE` / `--pair-if-needed CODE` (`-`: one line of stdin),
/// decoded; never echoed. With `--pair-if-needed` an expired code is kept:
/// the node only needs it while it has no device token.
pub(super) fn setup_code(
    args: &NodeArgs,
    from_file: Option<&str>,
) -> Result<Option<gateway::setup_code::SetupCode>, String> {
    let pair = args.pair();
    let text = match (
        pair.as_deref().or(from_file),
        args.pair_if_needed.as_ref().map(Option::as_deref),
    ) {
        (Some(_), Some(Some(_))) => {
            return Err("--pair and --pair-if-needed both carry a setup code: give one".into());
        }
        (Some(text), _) | (None, Some(Some(text))) => text,
        (None, _) => return Ok(None),
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    let text = if text == "-" {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .map_err(|e| format!("cannot read the setup code from stdin: {e}"))?;
        line
    } else {
        text.to_owned()
    };
    let now = crate::shared::clock::now_ms();
    let checked_at = if args.pair_if_needed.is_some() {
        0
    } else {
        now
    };
    gateway::setup_code::decode(&text, checked_at).map(Some)
}

pub(super) fn node_options(args: NodeArgs, gateway_flag: bool) -> Result<node::Options, String> {
    let (state_dir, workspace) = (args.hands.state_dir(), args.hands.workspace());
    let file = match &args.env_file {
        Some(path) => node::service::read_env_file(path)?,
        None => Vec::new(),
    };
    let from_file = |key: &str| {
        file.iter()
            .find(|(k, v)| k == key && !v.trim().is_empty())
            .map(|(_, v)| v.clone())
    };
    let pair = setup_code(&args, from_file(node::service::SETUP_CODE_KEY).as_deref())?;
    // The attached browser's address, wherever the owner put it: the
    // flag, the service's env file, the environment (it may hold a token).
    let mut browser = args.browser.clone();
    browser.browser_cdp_url = browser
        .browser_cdp_url
        .or_else(|| from_file(node::service::CDP_URL_KEY))
        .or_else(|| crate::shared::secrets::var(node::service::CDP_URL_KEY));
    let from_env = std::env::var_os("OPENCLAW_GATEWAY_URL").is_some_and(|v| !v.is_empty());
    let gateway = node_endpoint(&args, gateway_flag, pair.as_ref(), from_env, || {
        node::saved_gateway(&state_dir)
    })?;
    Ok(node::Options {
        gateway,
        pair,
        pair_if_needed: args.pair_if_needed.is_some(),
        token: args
            .gateway
            .token()
            .filter(|t| !t.trim().is_empty())
            .or_else(|| from_file(node::service::TOKEN_KEY)),
        log_file: args.log_file,
        log_format: args.log.log_format,
        log_level: args.log.least(),
        no_agent_tools: args.no_agent_tools,
        claude_sessions: args.claude_sessions,
        browser,
        sensors: args.sensors,
        desktop: args.desktop,
        no_ollama: args.no_ollama,
        file_roots: args.file_root,
        screen: args.screen,
        mcp: crate::tools::mcp_client::gather(args.mcp_server, args.mcp_config.as_deref())?,
        display_name: args.display_name,
        state_dir,
        workspace,
        approval: args.hands.approval,
        allow: args.hands.allow,
        deny: args.hands.deny,
        commands: args.commands.map(|c| {
            c.into_iter()
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect()
        }),
        doctor: args.doctor.then_some(node::Doctor {
            agent: args.agent,
            question: args.message,
        }),
    })
}

/// `clawbot_router node install|uninstall|status|start|stop|restart`.
pub(super) async fn node_service(command: ServiceCommand, gateway_flag: bool) -> u8 {
    use node::service::{self, Action, Scope};
    let (action, flags, plan, force, state_dir) = match command {
        ServiceCommand::Install {
            run,
            service: flags,
            force,
            print: only_print,
        } => {
            let program = std::env::current_exe()
                .and_then(|p| p.canonicalize())
                .map_err(|e| format!("cannot tell where this program is: {e}"));
            let plan = node_options(run, gateway_flag)
                .and_then(|o| service::plan(&o, flags.system, program?));
            let plan = match plan {
                Ok(plan) => plan,
                Err(problem) => {
                    tell("node install", &problem);
                    return 2;
                }
            };
            if only_print {
                return match service::print(&plan, &Scope::current(flags.system)) {
                    Ok(text) => {
                        print(&text);
                        0
                    }
                    Err(problem) => {
                        tell("node install", &problem);
                        2
                    }
                };
            }
            (Action::Install, flags, Some(plan), force, None)
        }
        ServiceCommand::Uninstall(a) => (Action::Uninstall, a.flags, None, false, a.state_dir),
        ServiceCommand::Status(a) => (Action::Status, a.flags, None, false, a.state_dir),
        ServiceCommand::Start(a) => (Action::Start, a.flags, None, false, a.state_dir),
        ServiceCommand::Stop(a) => (Action::Stop, a.flags, None, false, a.state_dir),
        ServiceCommand::Restart(a) => (Action::Restart, a.flags, None, false, a.state_dir),
    };
    let report = service::run(action, plan, Scope::current(flags.system), force, state_dir).await;
    if flags.json {
        print_json(&report.json);
    } else if report.code == 1 {
        for line in report.text.lines() {
            tell("node", line);
        }
    } else {
        print(&format!("{}\n", report.text));
    }
    report.code
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::{CommandFactory, FromArgMatches};

    /// `clawbot_router node ARGS`'s endpoint, with `saved` as the last one.
    fn endpoint(args: &[&str], from_env: bool, saved: Option<&str>) -> Result<String, String> {
        let mut words = vec!["clawbot_router", "node"];
        words.extend(args);
        let matches = Cli::command()
            .try_get_matches_from(&words)
            .unwrap_or_else(|e| panic!("{words:?} does not parse: {e}"));
        let Ok(Cli {
            command: Some(Command::Node(node)),
            ..
        }) = Cli::from_arg_matches(&matches)
        else {
            panic!("{words:?} is not a node command line");
        };
        let flag = super::super::node_gateway_typed(&matches);
        node_endpoint(&node.run, flag, None, from_env, || saved.map(str::to_owned)).map(|e| e.url)
    }

    #[test]
    fn only_a_typed_gateway_counts_as_typed() {
        let typed = |words: &[&str]| {
            let matches = Cli::command().try_get_matches_from(words).unwrap();
            super::super::node_gateway_typed(&matches)
        };
        assert!(typed(&["r", "node", "--gateway", "ws://h:1"]));
        assert!(typed(&["r", "node", "--gateway=ws://h:1"]));
        assert!(typed(&["r", "node", "install", "--gateway", "ws://h:1"]));
        assert!(!typed(&["r", "node"]));
        assert!(!typed(&["r", "node", "install", "--print"]));
        assert!(!typed(&["r", "schema"]));
    }

    const PIN: &str = "ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab:ab";

    #[test]
    fn openclaws_endpoint_flags_build_the_url_as_openclaw_does() {
        assert_eq!(endpoint(&[], false, None).unwrap(), "ws://127.0.0.1:18789");
        assert_eq!(
            endpoint(&["--host", "::1", "--port", "9"], false, None).unwrap(),
            "ws://[::1]:9"
        );
        assert_eq!(
            endpoint(
                &["--host", "gw", "--tls", "--context-path", "gw/"],
                false,
                None
            )
            .unwrap(),
            "wss://gw:18789/gw/",
            "a trailing slash is kept (a proxy's location may need it)"
        );
        assert_eq!(
            endpoint(&["--tls"], false, None).unwrap(),
            "wss://127.0.0.1:18789"
        );
        assert_eq!(
            endpoint(&["--host", "gw.lan", "--no-tls"], false, None).unwrap(),
            "ws://gw.lan:18789"
        );
        assert!(
            endpoint(&["--gateway", "wss://gw:1", "--no-tls"], false, None)
                .unwrap_err()
                .contains("--no-tls")
        );
        // A pin implies TLS, as in OpenClaw.
        assert_eq!(
            endpoint(&["--tls-fingerprint", PIN], false, None).unwrap(),
            "wss://127.0.0.1:18789"
        );
        // The gateway it last served, and --tls upgrades it rather than being dropped.
        assert_eq!(
            endpoint(&[], false, Some("ws://10.0.0.5:18789")).unwrap(),
            "ws://10.0.0.5:18789"
        );
        assert_eq!(
            endpoint(&["--tls"], false, Some("ws://10.0.0.5:18789")).unwrap(),
            "wss://10.0.0.5:18789"
        );
        // Named on purpose: kept as typed.
        assert_eq!(
            endpoint(&["--gateway", "ws://10.0.0.9:1"], false, Some("ws://x:2")).unwrap(),
            "ws://10.0.0.9:1"
        );
        assert!(
            endpoint(&["--gateway", "ws://h:1", "--host", "h"], false, None)
                .unwrap_err()
                .contains("both name the gateway")
        );
        assert!(
            endpoint(&["--gateway", "ws://h:1", "--tls"], false, None)
                .unwrap_err()
                .contains("both name the gateway")
        );
    }
}
