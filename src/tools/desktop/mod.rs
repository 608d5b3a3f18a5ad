//! `desktop.stream`: this machine's VNC server, relayed to the gateway for
//! its Control UI's desktop viewer, as OpenClaw's node host does it. The
//! gateway asks (with a one-time ticket, and no deadline: the invocation
//! lasts as long as the viewer watches); the node looks at the VNC server
//! on loopback, refuses one that needs no password, opens a WebSocket back
//! to the same gateway with the ticket, says how to authenticate (with
//! the password file's password when the owner gave one), and carries
//! bytes both ways until either side closes.
//!
//! Off unless the owner names the VNC server's port (`--desktop-vnc-port`;
//! OpenClaw offers it by default). Answers and errors are OpenClaw's:
//! `{status: "closed"}`, or `UNAVAILABLE` with its words.
//!
//! Must never: relay a server that needs no password, connect anywhere but
//! 127.0.0.1 and the gateway the node is connected to, keep the password
//! after it is sent, or leave either socket open once the invocation ends.

mod relay;
mod rfb;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use zeroize::{Zeroize, Zeroizing};

use super::ToolError;
use crate::gateway::Endpoint;
use crate::runner::Tap;
use rfb::{Auth, Probe};

/// The owner's VNC server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub port: u16,
    /// Its password (the VNC password, plain text), when the owner gives
    /// it to the node; otherwise the viewer's operator must supply it.
    pub password_file: Option<PathBuf>,
}

/// How long opening the attach socket may take.
const ATTACH_TIME: Duration = Duration::from_secs(30);
/// OpenClaw's limit on the password file.
const MAX_PASSWORD: u64 = 4096;
/// The ticket's length in hex digits.
const TICKET_LEN: usize = 48;
/// Relays at once: one per open viewer, and a gateway that hands out
/// tickets without end (each relay holds two sockets and ~220 kB) cannot
/// grow the node without bound. OpenClaw sets no limit.
pub const MAX_STREAMS: usize = 8;

static STREAMS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_STREAMS);

fn unavailable(message: impl Into<String>) -> ToolError {
    ToolError::new("UNAVAILABLE", message)
}

/// Runs one `desktop.stream` invocation until the relay ends or `cancel`.
pub async fn stream(
    host: &Host,
    params_json: Option<&str>,
    gateway: Option<&Endpoint>,
    progress: Option<&Tap>,
    cancel: &CancellationToken,
    timeout: Duration,
) -> Result<Value, ToolError> {
    let Some(gateway) = gateway else {
        return Err(unavailable(
            "desktop stream gateway connection is unavailable",
        ));
    };
    let ticket = decode(params_json).map_err(unavailable)?;
    let Ok(_slot) = STREAMS.try_acquire() else {
        return Err(unavailable(format!(
            "desktop stream refused: {MAX_STREAMS} are already open on this node; close a viewer"
        )));
    };
    let say = |text: &str| {
        if let Some(tap) = progress {
            tap.offer(text.as_bytes());
        }
    };
    let work = async {
        say("probing local RFB server\n");
        let offered = match rfb::probe(host.port).await {
            Probe::Rfb(offered) => offered,
            Probe::NotRfb => {
                return Err(format!(
                    "desktop stream target 127.0.0.1:{} is not an RFB server; set --desktop-vnc-port to the node's VNC server port",
                    host.port
                ));
            }
            Probe::Unreachable => {
                return Err(format!(
                    "desktop stream loopback RFB server is unavailable on port {}; start an authenticated loopback VNC server (for example x11vnc -localhost -rfbauth FILE)",
                    host.port
                ));
            }
        };
        let auth = Auth::of(&offered.security);
        match auth {
            Auth::None => return Err("refusing unauthenticated loopback RFB server".into()),
            Auth::Unsupported => return Err("loopback RFB server security is unsupported".into()),
            Auth::VncPassword | Auth::ArdAccount => {}
        }
        let password = match (&host.password_file, auth) {
            (Some(file), Auth::VncPassword) => Some(Secret::new(read_password(file)?)),
            _ => None,
        };
        let url = relay::attach_url(&gateway.url, &ticket)?;
        let mut ws = tokio::time::timeout(ATTACH_TIME, relay::attach(gateway, &url))
            .await
            .map_err(|_| "desktop stream attach timed out".to_owned())??;
        let metadata = metadata(auth, password.as_ref());
        drop(password);
        relay::introduce(&mut ws, metadata).await?;
        say("desktop stream attached\n");
        let mut carried = relay::Carried::default();
        let ended = relay::splice(
            ws,
            offered.stream,
            offered.prefix,
            offered.reply,
            &mut carried,
        )
        .await;
        crate::shared::log::say(&format!(
            "desktop stream ended: {} bytes to the gateway, {} to the VNC server{}",
            carried.to_gateway,
            carried.to_server,
            ended
                .as_ref()
                .err()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
        ended
    };
    tokio::select! {
        ended = work => ended.map_err(unavailable)?,
        // The gateway let go (the viewer left), or the time it gave ran
        // out: both sockets close with the work; the answer is the usual
        // one.
        _ = cancel.cancelled() => {}
        _ = tokio::time::sleep(timeout) => {}
    }
    Ok(json!({"status": "closed"}))
}

/// The password while the node holds it: zeroed (its whole allocation)
/// when dropped, however the call ends (an attach that fails drops it too).
type Secret = Zeroizing<String>;

/// `{"auth": …, "vncPassword"?: …}`, written straight into a buffer with
/// room for the worst escaping (`\u00XX` per byte), so it never grows:
/// growing would leave a copy of the password in the block it left, and
/// a `Value` would hold another.
fn metadata(auth: Auth, password: Option<&Secret>) -> Vec<u8> {
    let room = password.map_or(0, |p| 6 * p.len());
    let mut out = Vec::with_capacity(64 + room);
    out.extend_from_slice(b"{\"auth\":\"");
    out.extend_from_slice(auth.wire().as_bytes());
    out.push(b'"');
    if let Some(password) = password {
        out.extend_from_slice(b",\"vncPassword\":");
        serde_json::to_writer(&mut out, password.as_str()).expect("a string into a Vec");
    }
    out.push(b'}');
    out
}

/// `{ticket, attachPath}` exactly, as OpenClaw's node host checks them.
fn decode(params_json: Option<&str>) -> Result<String, String> {
    let raw = params_json.unwrap_or("");
    let value: Option<Value> = if raw.is_empty() {
        None
    } else {
        Some(
            serde_json::from_str(raw)
                .map_err(|_| "INVALID_REQUEST: desktop stream params malformed JSON".to_owned())?,
        )
    };
    let Some(Value::Object(map)) = value else {
        return Err("INVALID_REQUEST: desktop stream params required".into());
    };
    let text = |key: &str| map.get(key).and_then(Value::as_str).map_or("", str::trim);
    let (ticket, attach_path) = (text("ticket"), text("attachPath"));
    let hex = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
    if ticket.len() != TICKET_LEN
        || !ticket.bytes().all(hex)
        || attach_path != format!("{}?ticket={ticket}", relay::ATTACH_PATH)
    {
        return Err("INVALID_REQUEST: desktop stream ticket and attachPath required".into());
    }
    if map.keys().any(|k| k != "ticket" && k != "attachPath") {
        return Err("INVALID_REQUEST: desktop stream params contain unsupported fields".into());
    }
    Ok(ticket.to_owned())
}

/// The VNC password from the owner's file: a regular file of at most 4096
/// bytes, trailing line ends dropped; opened without blocking (a FIFO in
/// its place must not hang the call), read once, the buffer wiped.
fn read_password(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options
        .open(path)
        .map_err(|e| format!("desktop password file cannot be read: {}", e.kind()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("desktop password file cannot be read: {}", e.kind()))?;
    if !meta.is_file() {
        return Err("desktop password file must be a regular file".into());
    }
    if meta.len() > MAX_PASSWORD {
        return Err("desktop password file is too large".into());
    }
    let mut buf = Vec::with_capacity(MAX_PASSWORD as usize + 1);
    let read = file.take(MAX_PASSWORD + 1).read_to_end(&mut buf);
    let result = match read {
        Err(e) => Err(format!(
            "desktop password file cannot be read: {}",
            e.kind()
        )),
        Ok(_) if buf.len() as u64 > MAX_PASSWORD => {
            Err("desktop password file is too large".into())
        }
        Ok(_) => {
            let text = String::from_utf8_lossy(&buf);
            let password = text.trim_end_matches(['\r', '\n']).to_owned();
            // Not UTF-8: the lossy text is a copy of its own.
            if let std::borrow::Cow::Owned(mut text) = text {
                text.zeroize();
            }
            if password.is_empty() {
                Err("desktop password file is empty".into())
            } else {
                Ok(password)
            }
        }
    };
    buf.zeroize();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(ticket: &str, path: &str) -> String {
        json!({"ticket": ticket, "attachPath": path}).to_string()
    }

    #[test]
    fn params_are_checked_as_openclaws_node_checks_them() {
        let t = "0123456789abcdef".repeat(3);
        let good = params(&t, &format!("/node-desktop/attach?ticket={t}"));
        assert_eq!(decode(Some(&good)).unwrap(), t);
        let spaced = params(
            &format!(" {t} "),
            &format!(" /node-desktop/attach?ticket={t}\n"),
        );
        assert_eq!(decode(Some(&spaced)).unwrap(), t);
        let wrong = "INVALID_REQUEST: desktop stream ticket and attachPath required";
        for bad in [
            params(
                &t.to_uppercase(),
                &format!("/node-desktop/attach?ticket={}", t.to_uppercase()),
            ),
            params(&t[1..], &format!("/node-desktop/attach?ticket={}", &t[1..])),
            params(
                &t,
                &format!("//evil.example/node-desktop/attach?ticket={t}"),
            ),
            params(&t, &format!("/node-desktop/attach?ticket={t}&ticket=x")),
            params(&t, "/other"),
            json!({"ticket": 5, "attachPath": 5}).to_string(),
        ] {
            assert_eq!(decode(Some(&bad)).unwrap_err(), wrong, "{bad}");
        }
        let mut extra: Value = serde_json::from_str(&good).unwrap();
        extra["port"] = json!(22);
        assert_eq!(
            decode(Some(&extra.to_string())).unwrap_err(),
            "INVALID_REQUEST: desktop stream params contain unsupported fields"
        );
        assert_eq!(
            decode(Some("{")).unwrap_err(),
            "INVALID_REQUEST: desktop stream params malformed JSON"
        );
        for none in [None, Some(""), Some("[]"), Some("null")] {
            assert_eq!(
                decode(none).unwrap_err(),
                "INVALID_REQUEST: desktop stream params required"
            );
        }
    }

    #[test]
    fn the_metadata_is_the_json_openclaw_sends_and_never_grows() {
        let parse = |b: &[u8]| serde_json::from_slice::<Value>(b).unwrap();
        assert_eq!(
            parse(&metadata(Auth::ArdAccount, None)),
            json!({"auth": "ard-account"})
        );
        for pw in ["s3cret", "q\"\\\u{1}\u{7f}é\u{fffd}", &"\u{1}".repeat(4096)] {
            let secret = Secret::new(pw.to_owned());
            let out = metadata(Auth::VncPassword, Some(&secret));
            assert_eq!(
                parse(&out),
                json!({"auth": "vnc-password", "vncPassword": pw})
            );
            assert_eq!(out.capacity(), 64 + 6 * pw.len(), "it grew");
        }
    }

    #[test]
    fn the_password_file_is_a_small_regular_file_with_something_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret\r\n\n").unwrap();
        assert_eq!(read_password(&file).unwrap(), "s3cret");
        std::fs::write(&file, "\n\n").unwrap();
        assert_eq!(
            read_password(&file).unwrap_err(),
            "desktop password file is empty"
        );
        std::fs::write(&file, "x".repeat(4097)).unwrap();
        assert_eq!(
            read_password(&file).unwrap_err(),
            "desktop password file is too large"
        );
        std::fs::write(&file, "x".repeat(4096)).unwrap();
        assert_eq!(read_password(&file).unwrap().len(), 4096);
        assert_eq!(
            read_password(dir.path()).unwrap_err(),
            "desktop password file must be a regular file"
        );
        assert!(
            read_password(&dir.path().join("missing"))
                .unwrap_err()
                .starts_with("desktop password file cannot be read")
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_in_place_of_the_password_file_does_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pw");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(
            read_password(&fifo).unwrap_err(),
            "desktop password file must be a regular file"
        );
    }
}
