//! Where the browser may go: OpenClaw's SSRF policy for its browser, held
//! at the browser itself. Every request a page makes — navigations,
//! redirects, subresources, popups' first loads — is paused (CDP `Fetch`)
//! and let through only when its host is not on this machine or its
//! private networks, unless the node owner opted in
//! (`--browser-private-network`) or named the host (`--browser-allow-host`).
//! The browser's own URL is judged, after its canonicalisation (so
//! `http://0x7f.1/` arrives as `127.0.0.1`).
//!
//! Schemes other than http(s), data, blob and about never load while the
//! guard is on: `file:` would read this machine's files past the
//! workspace. An agent's own navigation ([`Reach::navigable`]) is held to
//! http(s) and `about:blank` always; with `--browser-private-network` no
//! request is paused, and Chromium's own rule (a web page never loads a
//! `file:` URL) is what holds for a page's requests.
//!
//! Not held: a name that resolves to a public address for us and a
//! private one for the browser a moment later (DNS rebinding); WebSocket
//! connections (CDP's `Fetch` does not see them).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::cdp::{Cdp, Event};

/// The owner's opt-ins.
#[derive(Clone, Debug, Default)]
pub struct Reach {
    /// Every private address allowed.
    pub private_network: bool,
    /// Hosts allowed though private (exact names, lower case).
    pub hosts: Vec<String>,
}

/// What the guard says of a URL without resolving it.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    Allow,
    Block(String),
    /// A name to resolve first.
    Resolve {
        host: String,
        port: u16,
    },
}

impl Reach {
    /// The owner's opt-ins, host names as the guard compares them (lower
    /// case, no brackets, no root's dot).
    pub fn new(private_network: bool, hosts: &[String]) -> Self {
        Self {
            private_network,
            hosts: hosts
                .iter()
                .map(|h| host_name(h.trim().trim_matches(['[', ']'])))
                .filter(|h| !h.is_empty())
                .collect(),
        }
    }

    /// Whether requests need pausing at all.
    pub fn guarding(&self) -> bool {
        !self.private_network
    }

    pub fn judge(&self, url: &str) -> Verdict {
        let Some((scheme, rest)) = url.split_once(':') else {
            return Verdict::Block(format!("not a URL: {url}"));
        };
        let scheme = scheme.to_ascii_lowercase();
        match scheme.as_str() {
            "http" | "https" | "ws" | "wss" => {}
            "data" | "blob" | "about" => return Verdict::Allow,
            other => {
                return Verdict::Block(format!(
                    "the browser on this node does not open {other}: URLs"
                ));
            }
        }
        let Some(authority) = rest.strip_prefix("//") else {
            return Verdict::Block(format!("not a URL: {url}"));
        };
        let authority = authority.split(['/', '?', '#']).next().unwrap_or_default();
        let host_port = authority.rsplit('@').next().unwrap_or_default();
        let (host, port) = split_host_port(host_port);
        // A name is the same name with its root's dot (`localhost.`), and
        // Chromium resolves `localhost.` and `*.localhost.` to loopback
        // itself, without asking the resolver we ask.
        let host = host_name(host);
        let port = port.unwrap_or(if scheme == "https" || scheme == "wss" {
            443
        } else {
            80
        });
        if self.private_network || self.hosts.contains(&host) {
            return Verdict::Allow;
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.judge_ip(&host, ip);
        }
        if host.is_empty() {
            return Verdict::Block(format!("not a URL: {url}"));
        }
        if host == "localhost" || host.ends_with(".localhost") {
            return blocked(&host);
        }
        Verdict::Resolve { host, port }
    }

    fn judge_ip(&self, host: &str, ip: IpAddr) -> Verdict {
        if not_the_internet(ip) {
            blocked(host)
        } else {
            Verdict::Allow
        }
    }

    /// A resolved name: blocked when any of its addresses is private,
    /// and when it has none (a lookup that failed or took too long: the
    /// guard fails closed).
    pub fn judge_resolved(&self, host: &str, addresses: &[IpAddr]) -> Verdict {
        if addresses.is_empty() {
            return Verdict::Block(format!("Unable to resolve hostname: {host}"));
        }
        match addresses.iter().find(|ip| not_the_internet(**ip)) {
            Some(_) => blocked(host),
            None => Verdict::Allow,
        }
    }

    /// Whether a URL may load, names resolved (within `within`): the one
    /// check behind both the paused requests and the routes' preflight.
    pub async fn check(&self, url: &str, within: Duration) -> Result<(), String> {
        match self.judge(url) {
            Verdict::Allow => Ok(()),
            Verdict::Block(why) => Err(why),
            Verdict::Resolve { host, port } => {
                // Bounded: a page making thousands of requests makes at
                // most 16 lookups at once.
                let addresses = match LOOKUPS.acquire().await {
                    Ok(_permit) => {
                        tokio::time::timeout(within, tokio::net::lookup_host((host.as_str(), port)))
                            .await
                            .ok()
                            .and_then(Result::ok)
                            .map(|a| a.map(|s| s.ip()).collect::<Vec<_>>())
                            .unwrap_or_default()
                    }
                    Err(_) => Vec::new(),
                };
                match self.judge_resolved(&host, &addresses) {
                    Verdict::Block(why) => Err(why),
                    _ => Ok(()),
                }
            }
        }
    }

    /// Whether an agent may send the browser to `url` (`/navigate`,
    /// `/tabs/open`): http(s) or `about:blank`, no credentials in it (as
    /// OpenClaw), and a host [`Reach::check`] allows. The refusal is the
    /// text the route answers with.
    pub async fn navigable(&self, url: &str, within: Duration) -> Result<(), String> {
        if url == "about:blank" {
            return Ok(());
        }
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(format!("Invalid URL: {url}"));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(format!(
                "Navigation blocked: unsupported protocol \"{scheme}:\""
            ));
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if authority.contains('@') {
            return Err(
                "Navigation blocked: URL-embedded credentials are not supported for page navigation."
                    .into(),
            );
        }
        self.check(url, within)
            .await
            .map_err(|why| format!("browser navigation blocked by policy: {why}"))
    }
}

/// Name lookups the guard makes at once, at most.
static LOOKUPS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(16);

fn blocked(host: &str) -> Verdict {
    Verdict::Block(format!(
        "Navigation blocked: {host} is a private or local address (the node's owner can allow it with --browser-private-network or --browser-allow-host {host})"
    ))
}

/// A host as the guard compares it: lower case, without its root's dot.
fn host_name(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// `host[:port]`, IPv6 in brackets.
fn split_host_port(text: &str) -> (&str, Option<u16>) {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (host, after.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match text.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().ok()),
        None => (text, None),
    }
}

/// Private, loopback, link-local, unspecified (which reaches this
/// machine), multicast and broadcast addresses.
fn not_the_internet(ip: IpAddr) -> bool {
    let (v4, tunnel) = match ip {
        IpAddr::V4(v4) => (Some(v4), false),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let embedded =
                |hi: u16, lo: u16| Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)));
            match s {
                // NAT64 (64:ff9b::/96): the IPv4 address in its last 32 bits.
                [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => (embedded(hi, lo), false),
                // 6to4 (2002::/16): the IPv4 address right after the prefix.
                [0x2002, hi, lo, ..] => (embedded(hi, lo), false),
                // Local-use NAT64 (64:ff9b:1::/48) and Teredo (2001::/32):
                // what they reach cannot be told from here.
                [0x64, 0xff9b, 1, ..] | [0x2001, 0, ..] => (None, true),
                _ => (v6.to_ipv4_mapped().or_else(|| v6.to_ipv4()), false),
            }
        }
    };
    tunnel
        || crate::shared::net::private_address(ip)
        || ip.is_unspecified()
        || ip.is_multicast()
        || v4.is_some_and(|v4| {
            let [a, b, c, _] = v4.octets();
            crate::shared::net::private_v4(v4)
                || a == 0
                || a >= 240 // reserved 240/4 and broadcast
                || (a == 198 && (b & 0xfe) == 18) // benchmarking 198.18/15
                || (a, b, c) == (192, 0, 0) // IETF protocol assignments
                || v4.is_multicast()
        })
}

/// The hook's half: a paused request is let through or failed. Names
/// are resolved off the reader's task.
pub fn on_paused(reach: &Reach, cdp: &Arc<Cdp>, event: &Event) {
    let Some(id) = event.params["requestId"].as_str().map(str::to_owned) else {
        return;
    };
    let url = event.params["request"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let session = event.session.clone();
    match reach.judge(&url) {
        Verdict::Allow => allow(cdp, session.as_deref(), id),
        Verdict::Block(why) => block(cdp, session.as_deref(), id, &why),
        Verdict::Resolve { .. } => {
            let (cdp, reach) = (Arc::clone(cdp), reach.clone());
            tokio::spawn(async move {
                match reach.check(&url, Duration::from_secs(10)).await {
                    Ok(()) => allow(&cdp, session.as_deref(), id),
                    Err(why) => block(&cdp, session.as_deref(), id, &why),
                }
            });
        }
    }
}

fn allow(cdp: &Cdp, session: Option<&str>, id: String) {
    cdp.send(session, "Fetch.continueRequest", json!({ "requestId": id }));
}

fn block(cdp: &Cdp, session: Option<&str>, id: String, why: &str) {
    // At debug level: a page can make any number of blocked requests.
    crate::shared::log::log_as(
        crate::shared::log::Level::Debug,
        "",
        &format!("browser: {why}"),
    );
    cdp.send(
        session,
        "Fetch.failRequest",
        json!({ "requestId": id, "errorReason": "BlockedByClient" }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strict() -> Reach {
        Reach::default()
    }

    #[test]
    fn private_and_local_hosts_are_blocked() {
        for url in [
            "http://127.0.0.1:8000/",
            "http://10.1.2.3/",
            "https://192.168.1.1/admin",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]:9222/json",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0:8000/",
            "http://localhost/",
            "http://api.localhost:3000/",
            "http://user:pw@127.0.0.1/",
            "http://100.64.0.1/",
            "ws://127.0.0.1:9222/devtools/browser",
            // Private addresses inside IPv6 transition forms, and the
            // special IPv4 ranges OpenClaw's guard refuses too.
            "http://[64:ff9b::a00:1]/",
            "http://[2002:c0a8:101::1]/",
            "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
            "http://[64:ff9b:1::1]/",
            "http://198.18.0.1/",
            "http://192.0.0.8/",
            "http://240.0.0.1/",
            "http://255.255.255.255/",
            // The root's dot: Chromium takes these as loopback itself.
            "http://localhost./",
            "http://LOCALHOST../",
            "http://api.localhost.:3000/",
            "http://127.0.0.1./",
        ] {
            assert!(
                matches!(strict().judge(url), Verdict::Block(_)),
                "{url} was let through"
            );
        }
    }

    #[test]
    fn public_hosts_pass_and_names_are_resolved_first() {
        assert_eq!(strict().judge("https://93.184.215.14/"), Verdict::Allow);
        // A public IPv4 address behind NAT64 or 6to4 is the internet.
        assert_eq!(
            strict().judge("https://[64:ff9b::5db8:d70e]/"),
            Verdict::Allow
        );
        assert_eq!(
            strict().judge("https://[2002:5db8:d70e::1]/"),
            Verdict::Allow
        );
        assert_eq!(
            strict().judge("https://Example.com:8443/x?y#z"),
            Verdict::Resolve {
                host: "example.com".into(),
                port: 8443
            }
        );
        assert_eq!(strict().judge("about:blank"), Verdict::Allow);
        assert_eq!(strict().judge("data:text/html,hi"), Verdict::Allow);
    }

    #[test]
    fn local_files_and_browser_pages_never_load() {
        for url in [
            "file:///etc/passwd",
            "chrome://settings",
            "view-source:http://example.com",
            "javascript:alert(1)",
            "nonsense",
        ] {
            assert!(
                matches!(strict().judge(url), Verdict::Block(_)),
                "{url} was let through"
            );
        }
        // Not even with the private network allowed.
        let open = Reach {
            private_network: true,
            hosts: vec![],
        };
        assert!(matches!(
            open.judge("file:///etc/passwd"),
            Verdict::Block(_)
        ));
        assert_eq!(open.judge("http://127.0.0.1:8000/"), Verdict::Allow);
    }

    #[tokio::test]
    async fn what_an_agent_may_navigate_to() {
        let t = Duration::from_secs(5);
        let open = Reach {
            private_network: true,
            hosts: vec![],
        };
        assert_eq!(open.navigable("about:blank", t).await, Ok(()));
        assert_eq!(open.navigable("http://127.0.0.1:8000/x", t).await, Ok(()));
        for (url, says) in [
            ("file:///etc/passwd", "unsupported protocol \"file:\""),
            ("javascript:alert(1)", "Invalid URL"),
            ("HTTP://user:pw@example.com/", "credentials"),
            ("about:srcdoc", "Invalid URL"),
        ] {
            let e = open.navigable(url, t).await.unwrap_err();
            assert!(e.contains(says), "{url}: {e}");
        }
        let e = strict().navigable("http://10.0.0.1/", t).await.unwrap_err();
        assert!(
            e.starts_with("browser navigation blocked by policy: "),
            "{e}"
        );
        // A name that does not resolve is refused (.invalid never does,
        // RFC 2606).
        let e = strict()
            .navigable("http://nowhere.invalid/", t)
            .await
            .unwrap_err();
        assert!(e.contains("Unable to resolve hostname"), "{e}");
    }

    #[test]
    fn allowed_hosts_are_named_as_the_guard_compares_them() {
        let reach = Reach::new(false, &["Intranet.".into(), "[::1]".into(), "  ".into()]);
        assert_eq!(reach.hosts, ["intranet", "::1"]);
        assert_eq!(reach.judge("http://intranet/"), Verdict::Allow);
        assert_eq!(reach.judge("http://[::1]:8000/"), Verdict::Allow);
    }

    #[test]
    fn a_named_host_is_allowed_and_only_it() {
        let reach = Reach {
            private_network: false,
            hosts: vec!["127.0.0.1".into(), "intranet".into()],
        };
        assert_eq!(reach.judge("http://127.0.0.1:8000/"), Verdict::Allow);
        assert_eq!(reach.judge("http://INTRANET/"), Verdict::Allow);
        assert_eq!(reach.judge("http://intranet./"), Verdict::Allow);
        assert!(matches!(
            reach.judge("http://127.0.0.2/"),
            Verdict::Block(_)
        ));
    }

    #[test]
    fn a_name_resolving_to_any_private_address_is_blocked() {
        let public: IpAddr = "93.184.215.14".parse().unwrap();
        let private: IpAddr = "10.0.0.5".parse().unwrap();
        assert_eq!(
            strict().judge_resolved("a.example", &[public]),
            Verdict::Allow
        );
        assert!(matches!(
            strict().judge_resolved("a.example", &[public, private]),
            Verdict::Block(_)
        ));
        // No address (a failed lookup): closed, not open.
        assert!(matches!(
            strict().judge_resolved("a.example", &[]),
            Verdict::Block(_)
        ));
    }
}
