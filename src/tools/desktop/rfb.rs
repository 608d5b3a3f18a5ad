//! The look at the local VNC server before anything is relayed: its RFB
//! version banner and the security types it offers, read on the one TCP
//! connection that is then handed to the relay (OpenClaw's
//! `connectRfbServer`: no second handshake; the bytes read here are
//! replayed to the gateway, which authenticates on the same connection).
//!
//! Must never: wait past its deadline, take a server that needs no
//! password, or read more than the offer.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// OpenClaw's budget for the whole look (connect, banner, offer).
pub const PROBE_TIME: Duration = Duration::from_millis(1500);

/// What the server offered, with the connection still open.
pub struct Offered {
    pub stream: TcpStream,
    /// Exactly what was read: the banner, then the security offer.
    pub prefix: Vec<u8>,
    /// Our version reply, which the gateway must send again (and which is
    /// then not sent twice).
    pub reply: &'static [u8; 12],
    pub security: Vec<u8>,
}

/// What the look found.
pub enum Probe {
    Rfb(Offered),
    /// Something answered, but not with an RFB banner.
    NotRfb,
    /// Nothing answered in time, or the connection failed.
    Unreachable,
}

/// How the gateway will have to authenticate (the first type OpenClaw
/// knows, in the server's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    None,
    VncPassword,
    ArdAccount,
    Unsupported,
}

impl Auth {
    pub fn of(types: &[u8]) -> Auth {
        for t in types {
            match t {
                1 => return Auth::None,
                2 => return Auth::VncPassword,
                30 => return Auth::ArdAccount,
                6 | 16 | 19 | 22 | 113 => return Auth::Unsupported,
                _ => {}
            }
        }
        Auth::Unsupported
    }

    /// The name the gateway's attach metadata uses.
    pub fn wire(self) -> &'static str {
        match self {
            Auth::VncPassword => "vnc-password",
            Auth::ArdAccount => "ard-account",
            Auth::None => "none",
            Auth::Unsupported => "unsupported",
        }
    }
}

/// The reply to a server's banner: 3.8 for anything newer than 3.7.
fn reply_to(banner: &[u8]) -> Option<&'static [u8; 12]> {
    let text = std::str::from_utf8(banner).ok()?;
    let minor = text.strip_prefix("RFB 003.")?.strip_suffix('\n')?;
    if minor.len() != 3 || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(match minor.parse::<u32>().ok()? {
        8.. => b"RFB 003.008\n",
        7 => b"RFB 003.007\n",
        _ => b"RFB 003.003\n",
    })
}

/// Connects to `127.0.0.1:port` and reads its banner and offer within
/// [`PROBE_TIME`].
pub async fn probe(port: u16) -> Probe {
    match tokio::time::timeout(PROBE_TIME, look(port)).await {
        Ok(found) => found,
        Err(_) => Probe::Unreachable,
    }
}

async fn look(port: u16) -> Probe {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)).await else {
        return Probe::Unreachable;
    };
    let _ = stream.set_nodelay(true);
    let mut banner = [0u8; 12];
    match stream.read_exact(&mut banner).await {
        Ok(_) => {}
        // Closed before 12 bytes: not a VNC server.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Probe::NotRfb,
        Err(_) => return Probe::Unreachable,
    }
    let Some(reply) = reply_to(&banner) else {
        return Probe::NotRfb;
    };
    if stream.write_all(reply).await.is_err() {
        return Probe::Unreachable;
    }
    let mut prefix = banner.to_vec();
    let security = if reply == b"RFB 003.003\n" {
        // 3.3: the server chooses, as a u32 (0: none is offered).
        let mut chosen = [0u8; 4];
        if stream.read_exact(&mut chosen).await.is_err() {
            return Probe::Unreachable;
        }
        prefix.extend_from_slice(&chosen);
        match u32::from_be_bytes(chosen) {
            0 => Vec::new(),
            // Only a byte-sized type can be one OpenClaw knows.
            t => vec![u8::try_from(t).unwrap_or(0)],
        }
    } else {
        let mut count = [0u8; 1];
        if stream.read_exact(&mut count).await.is_err() {
            return Probe::Unreachable;
        }
        let mut types = vec![0u8; usize::from(count[0])];
        if stream.read_exact(&mut types).await.is_err() {
            return Probe::Unreachable;
        }
        prefix.push(count[0]);
        prefix.extend_from_slice(&types);
        types
    };
    Probe::Rfb(Offered {
        stream,
        prefix,
        reply,
        security,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_follows_openclaws_rule() {
        assert_eq!(reply_to(b"RFB 003.008\n"), Some(b"RFB 003.008\n"));
        assert_eq!(reply_to(b"RFB 003.889\n"), Some(b"RFB 003.008\n"));
        assert_eq!(reply_to(b"RFB 003.007\n"), Some(b"RFB 003.007\n"));
        assert_eq!(reply_to(b"RFB 003.005\n"), Some(b"RFB 003.003\n"));
        for bad in [
            b"RFB 004.008\n",
            b"RFB 003.0x8\n",
            b"HTTP/1.1 200",
            b"RFB 003.008 ",
        ] {
            assert_eq!(reply_to(bad), None);
        }
    }

    #[test]
    fn the_first_known_type_decides_in_the_servers_order() {
        assert_eq!(Auth::of(&[1]), Auth::None);
        assert_eq!(Auth::of(&[5, 2]), Auth::VncPassword);
        assert_eq!(Auth::of(&[16, 2]), Auth::Unsupported);
        assert_eq!(Auth::of(&[2, 1]), Auth::VncPassword);
        assert_eq!(Auth::of(&[30]), Auth::ArdAccount);
        assert_eq!(Auth::of(&[]), Auth::Unsupported);
        assert_eq!(Auth::of(&[200]), Auth::Unsupported);
    }
}
