//! The relay: the local VNC connection spliced to a WebSocket the node
//! opens back to the same gateway (`/node-desktop/attach?ticket=…`), as
//! OpenClaw's node host does (`runNodeStreamTransport`). The gateway
//! authenticates to the VNC server itself and shows its viewer a
//! pre-authenticated session; the node only carries bytes.
//!
//! Must never: send the gateway a frame over 64 KiB (its attach socket's
//! limit), accept one over 1 MiB, hold more than a frame in each
//! direction (a slow side slows the other instead: every write is awaited
//! before the next read), or go anywhere but the gateway it is connected
//! to.

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::http::Uri;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::gateway::Endpoint;
use crate::gateway::transport;

/// The gateway's attach socket takes frames of at most this much.
const MAX_OUT: usize = 64 * 1024;
/// What the node's socket accepts (OpenClaw's `maxPayload`).
const MAX_IN: usize = 1 << 20;
/// The attach path, without its ticket.
pub const ATTACH_PATH: &str = "/node-desktop/attach";

/// The attach socket's URL: the connected gateway's origin and path
/// prefix, then the attach path (OpenClaw's `attachWebSocketUrl`).
pub fn attach_url(gateway: &str, ticket: &str) -> Result<String, String> {
    let uri: Uri = gateway
        .parse()
        .map_err(|_| "desktop stream gateway URL must use WebSocket transport".to_owned())?;
    let (Some(scheme @ ("ws" | "wss")), Some(authority)) = (uri.scheme_str(), uri.authority())
    else {
        return Err("desktop stream gateway URL must use WebSocket transport".into());
    };
    let prefix = uri.path().trim_end_matches('/');
    Ok(format!(
        "{scheme}://{authority}{prefix}{ATTACH_PATH}?ticket={ticket}"
    ))
}

/// Opens the attach socket with the node's own trust (the same pin).
pub async fn attach(gateway: &Endpoint, url: &str) -> Result<transport::Ws, String> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_IN))
        .max_frame_size(Some(MAX_IN));
    match transport::open(url, &gateway.trust, config).await.0 {
        Ok(ws) => Ok(ws),
        Err(e) => Err(format!("desktop stream attach failed: {e}")),
    }
}

/// Bytes carried each way, for the log.
#[derive(Debug, Default, Clone, Copy)]
pub struct Carried {
    pub to_gateway: u64,
    pub to_server: u64,
}

/// The one binary frame that opens the attach: how the gateway must
/// authenticate, and the password when the node has one. The buffer is
/// wiped when the socket drops the frame. (A client frame's masked copy
/// stays in the socket's write buffer until later frames overwrite it.)
pub async fn introduce(ws: &mut transport::Ws, metadata: Vec<u8>) -> Result<(), String> {
    // The frame owns the buffer and wipes it when the socket lets it go
    // (a copy sent and a buffer wiped would leave the copy behind).
    let frame = bytes::Bytes::from_owner(zeroize::Zeroizing::new(metadata));
    ws.send(Message::Binary(frame))
        .await
        .map_err(|e| e.to_string())
}

/// Replays what the look read and carries bytes both ways until either
/// side closes; `Err` with OpenClaw's words when something broke.
pub async fn splice(
    ws: transport::Ws,
    tcp: TcpStream,
    prefix: Vec<u8>,
    reply: &[u8; 12],
    carried: &mut Carried,
) -> Result<(), String> {
    let (mut sink, mut stream) = ws.split();
    let (mut from_server, mut to_server) = tcp.into_split();
    let (mut up, mut down) = (0u64, 0u64);
    let upward = async {
        // The banner and offer the look read go first, as if read now.
        let mut pending = Some(prefix);
        let mut buf = vec![0u8; MAX_OUT];
        loop {
            let chunk = match pending.take() {
                Some(prefix) => prefix,
                None => {
                    let n = from_server
                        .read(&mut buf)
                        .await
                        .map_err(|e| e.to_string())?;
                    if n == 0 {
                        // The server ended the session: end the socket too.
                        let _ = sink.close().await;
                        return Ok(());
                    }
                    buf[..n].to_vec()
                }
            };
            up += chunk.len() as u64;
            match sink.send(Message::Binary(chunk.into())).await {
                Ok(()) => {}
                Err(e) if closed(&e) => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
        }
    };
    let downward = async {
        // The gateway repeats our version reply first: swallowed, and it
        // must be the same.
        let mut version = Vec::with_capacity(12);
        while let Some(message) = stream.next().await {
            let bytes = match message {
                Err(e) if closed(&e) => return Ok(()),
                Err(e) => return Err(e.to_string()),
                Ok(Message::Binary(bytes)) => bytes,
                Ok(Message::Text(_)) => {
                    return Err("gateway sent non-binary desktop stream data".into());
                }
                Ok(Message::Close(_)) => return Ok(()),
                Ok(_) => continue,
            };
            let mut rest = &bytes[..];
            if version.len() < 12 {
                let take = (12 - version.len()).min(rest.len());
                version.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if version.len() == 12 && version[..] != reply[..] {
                    return Err("RFB client changed the inspected protocol version".into());
                }
            }
            down += rest.len() as u64;
            to_server.write_all(rest).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    let ended = tokio::select! {
        r = upward => r,
        r = downward => r,
    };
    *carried = Carried {
        to_gateway: up,
        to_server: down,
    };
    ended
}

/// The gateway went away, with or without a closing handshake: a close,
/// as OpenClaw's socket reports it (1006 is a close, not an error).
fn closed(e: &tokio_tungstenite::tungstenite::Error) -> bool {
    use tokio_tungstenite::tungstenite::Error;
    use tokio_tungstenite::tungstenite::error::ProtocolError;
    matches!(
        e,
        Error::ConnectionClosed
            | Error::AlreadyClosed
            | Error::Protocol(ProtocolError::ResetWithoutClosingHandshake)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attach_url_keeps_the_gateways_origin_and_path_prefix() {
        let t = "ab".repeat(24);
        assert_eq!(
            attach_url("ws://127.0.0.1:18789", &t).unwrap(),
            format!("ws://127.0.0.1:18789/node-desktop/attach?ticket={t}")
        );
        assert_eq!(
            attach_url("wss://gw.example:443/openclaw/", &t).unwrap(),
            format!("wss://gw.example:443/openclaw/node-desktop/attach?ticket={t}")
        );
        assert!(attach_url("http://127.0.0.1:1", &t).is_err());
        assert!(attach_url("not a url", &t).is_err());
    }
}
