//! Which addresses are not the internet, and where a listener may listen.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Loopback, RFC 1918, link-local, CGNAT (100.64/10), IPv6 loopback,
/// link-local, unique-local and site-local: where OpenClaw lets `ws://`
/// carry a token, and where a link may listen with `--allow-remote`.
pub fn private_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return private_v4(v4);
            }
            let first = v6.segments()[0];
            v6 == Ipv6Addr::LOCALHOST
                || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (first & 0xffc0) == 0xfec0 // site-local fec0::/10
        }
    }
}

pub fn private_v4(v4: Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64.0.0/10
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
    if !private_address(ip) {
        return Err(format!(
            "{addr} is a public address, and {secret} would cross the internet in plaintext: use a loopback or private address"
        ));
    }
    Ok(addr)
}
