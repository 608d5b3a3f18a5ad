//! The wire under every gateway client: `ws://` and `wss://`.
//!
//! - **Trust.** `wss://` is verified against the operating system's
//!   certificate store, or — with a pin (`--tls-fingerprint`, a setup code,
//!   the node's remembered pin) — by the SHA-256 of the gateway's leaf
//!   certificate alone, as OpenClaw's own clients pin a self-signed gateway.
//!   The TLS handshake completes (and the certificate is judged) before the
//!   WebSocket upgrade, so no token ever reaches an unverified server.
//! - **Plaintext only where OpenClaw allows it**: loopback, private,
//!   link-local and CGNAT addresses, `.local` and `.ts.net` names. `ws://`
//!   to anything else is refused before a socket is opened.
//! - Every failure is one line: which host, what was expected and what was
//!   presented, or why the chain was rejected.
//! - **The wrong scheme is named, not retried.** `ws://` to a TLS server
//!   and `wss://` to a plaintext one fail in ways that look like a flaky
//!   network ("Handshake not finished", "tls handshake eof"). When an
//!   attempt fails like that, a second connection asks the server the other
//!   way (a bare TLS hello, abandoned at the certificate; a bare WebSocket
//!   upgrade, no credential in either) and, if it answers, the failure says
//!   which scheme to use.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::http::Uri;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A SHA-256 certificate fingerprint.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// OpenClaw's normalisation: an optional `sha256:`/`sha-256:` label,
    /// then 64 hex digits in any case, with or without `:` (or spaces)
    /// between the bytes — what `openssl x509 -fingerprint -sha256` prints
    /// (`sha256 Fingerprint=AB:CD:…`) pasted whole works too.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut t = text.trim();
        if let Some((label, rest)) = t.split_once('=')
            && label.to_ascii_lowercase().contains("fingerprint")
        {
            t = rest.trim();
        }
        let lower = t.to_ascii_lowercase();
        let t = lower
            .strip_prefix("sha256:")
            .or_else(|| lower.strip_prefix("sha-256:"))
            .unwrap_or(&lower);
        let hex: String = t
            .chars()
            .filter(|c| !matches!(c, ':' | ' ' | '-'))
            .collect();
        if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "{text:?} is not a SHA-256 fingerprint (64 hex digits, colons optional, as `openssl x509 -noout -fingerprint -sha256` prints it)"
            ));
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("checked hex");
        }
        Ok(Self(bytes))
    }

    pub fn of(der: &[u8]) -> Self {
        Self(Sha256::digest(der).into())
    }
}

/// `AB:CD:…`, the form openssl and OpenClaw's docs print.
impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex: Vec<String> = self.0.iter().map(|b| format!("{b:02X}")).collect();
        f.write_str(&hex.join(":"))
    }
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// How a `wss://` gateway is trusted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trust {
    /// Accept exactly this certificate (no chain, no name check), as
    /// OpenClaw does for a pinned gateway.
    pub pin: Option<Fingerprint>,
}

/// Why the wire could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Refused before connecting: the URL is wrong, or `ws://` to a host
    /// where OpenClaw forbids plaintext.
    #[error("{0}")]
    Refused(String),
    /// The server's certificate was not accepted (a pin mismatch, an
    /// untrusted chain, a wrong name): a setting to fix, not a hiccup.
    #[error("{0}")]
    Untrusted(String),
    /// The network or the handshake failed.
    #[error("{0}")]
    Transport(String),
    /// Something answered HTTP but would not upgrade to WebSocket: the
    /// status code and its text.
    #[error("it answered HTTP {1} to the WebSocket upgrade")]
    NotWebSocket(u16, String),
    /// TLS was asked of a server that does not speak it (`host:port`).
    #[error("TLS handshake with {0} failed: the server does not speak TLS")]
    NotTls(String),
    /// The gateway speaks the other scheme: the URL is wrong.
    #[error("{0}")]
    Scheme(Mismatch),
}

/// A gateway URL whose scheme the server does not speak. Proven by the
/// server's own answer, so it is a setting to change, never a hiccup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// `ws://` to a server that speaks TLS.
    SpeaksTls { url: String },
    /// `wss://` to a server that does not; how far plaintext may go
    /// decides what to suggest.
    NoTls { url: String, network: Network },
    /// `wss://` with a pinned certificate to a server that answers in
    /// plaintext off this machine: what a machine in the middle looks like,
    /// so plaintext is never suggested.
    NoTlsPinned { url: String },
}

impl Mismatch {
    /// `url` (to `host`) reached a server that does not speak TLS; `pinned`
    /// when the user's trust names the certificate expected there.
    fn no_tls(url: &str, host: &str, pinned: bool) -> Self {
        let network = Network::of(host);
        if pinned && network != Network::Loopback {
            Mismatch::NoTlsPinned {
                url: url.to_owned(),
            }
        } else {
            Mismatch::NoTls {
                url: url.to_owned(),
                network,
            }
        }
    }
}

/// Where a host is, as the plaintext rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    Loopback,
    /// Private, link-local, CGNAT, `.local`, `.ts.net` (or any name under
    /// OpenClaw's break-glass variable): `ws://` is allowed, the token
    /// crosses that network unencrypted.
    Private,
    /// `ws://` is refused.
    Public,
}

impl Network {
    /// By [`plaintext_allowed`], OpenClaw's break-glass variable included,
    /// as [`precheck`] judges a `ws://` URL.
    pub fn of(host: &str) -> Self {
        if is_loopback(host) {
            Network::Loopback
        } else if plaintext_allowed(host) {
            Network::Private
        } else {
            Network::Public
        }
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::SpeaksTls { url } => write!(
                f,
                "the gateway at {url} speaks TLS: use {}",
                with_scheme(url, "wss")
            ),
            Mismatch::NoTls {
                url,
                network: Network::Loopback,
            } => write!(
                f,
                "the gateway at {url} does not speak TLS: use {}",
                with_scheme(url, "ws")
            ),
            Mismatch::NoTls {
                url,
                network: Network::Private,
            } => write!(
                f,
                "the gateway at {url} does not speak TLS: use {} if this network is trusted (the token crosses it unencrypted), or turn on the gateway's TLS (gateway.tls.enabled)",
                with_scheme(url, "ws")
            ),
            Mismatch::NoTls {
                url,
                network: Network::Public,
            } => write!(
                f,
                "the gateway at {url} does not speak TLS, and plaintext ws:// is refused to a public address: turn on the gateway's TLS (gateway.tls.enabled), or reach it over a private network or tunnel (ws:// is allowed to loopback, private, .local and .ts.net addresses)"
            ),
            Mismatch::NoTlsPinned { url } => write!(
                f,
                "the gateway at {url} answered in plaintext where the pinned TLS certificate was expected: something other than the gateway may be answering there; check the address and the network, or turn the gateway's TLS back on (gateway.tls.enabled)"
            ),
        }
    }
}

/// `url` with its scheme replaced (the rest as the user wrote it).
fn with_scheme(url: &str, scheme: &str) -> String {
    match url.split_once("://") {
        Some((_, rest)) => format!("{scheme}://{rest}"),
        None => url.to_owned(),
    }
}

/// The parts of a gateway URL the wire needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl Target {
    /// `host:port`, with brackets around an IPv6 address.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    pub fn parse(url: &str) -> Result<Self, WireError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| WireError::Refused(format!("{url:?} is not a gateway URL ({e})")))?;
        let tls = match uri.scheme_str() {
            Some("wss") => true,
            Some("ws") => false,
            _ => {
                return Err(WireError::Refused(format!(
                    "{url:?} is not a gateway URL: it must start with ws:// or wss://"
                )));
            }
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| WireError::Refused(format!("{url:?} names no host")))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Self { tls, host, port })
    }
}

/// OpenClaw's rule for `ws://`: only where the network is not the
/// internet. Loopback, RFC 1918, link-local, CGNAT (100.64/10), IPv6
/// loopback, link-local, unique-local and site-local, `localhost`, `.local`
/// and `.ts.net` names — and, with OpenClaw's own break-glass variable
/// `OPENCLAW_ALLOW_INSECURE_PRIVATE_WS=1`, any name (never a public IP).
pub fn plaintext_allowed(host: &str) -> bool {
    let break_glass = std::env::var("OPENCLAW_ALLOW_INSECURE_PRIVATE_WS").is_ok_and(|v| v == "1");
    plaintext_rule(host, break_glass)
}

/// The same rule without OpenClaw's break-glass variable: for the links'
/// own keys, which that variable was never meant to cover.
pub fn plaintext_allowed_strictly(host: &str) -> bool {
    plaintext_rule(host, false)
}

fn plaintext_rule(host: &str, break_glass: bool) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if let Ok(ip) = host.parse::<IpAddr>() {
        return crate::shared::net::private_address(ip);
    }
    // `134744072`, `0x8.8.8.8`, `8.8.2056`: names only to a URL parser,
    // addresses to the resolver (inet_aton): judged as the address.
    if let Some(v4) = inet_aton(&host) {
        return crate::shared::net::private_v4(v4);
    }
    host == "localhost" || host.ends_with(".local") || host.ends_with(".ts.net") || break_glass
}

/// The forms the C resolver takes for an IPv4 address: one to four parts,
/// each decimal, octal (leading 0) or hex (0x), the last filling the rest.
fn inet_aton(host: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        let value = if let Some(hex) = part.strip_prefix("0x") {
            u64::from_str_radix(hex, 16).ok()?
        } else if part.len() > 1 && part.starts_with('0') {
            u64::from_str_radix(&part[1..], 8).ok()?
        } else if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse().ok()?
        } else {
            return None;
        };
        values.push(value);
    }
    let (last, head) = values.split_last()?;
    let mut addr: u64 = 0;
    for (i, v) in head.iter().enumerate() {
        if *v > 255 {
            return None;
        }
        addr |= v << (24 - 8 * i);
    }
    let room = 32 - 8 * head.len() as u32;
    if *last >= 1u64 << room {
        return None;
    }
    Some(Ipv4Addr::from((addr | last) as u32))
}

/// Whether `host` is this machine (where OpenClaw trusts a device-less
/// operator with the shared token).
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match host.parse::<IpAddr>() {
        Ok(ip) => {
            ip.is_loopback()
                || matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()))
        }
        Err(_) => host == "localhost" || host.ends_with(".localhost"),
    }
}

/// Opens the TCP connection, TLS when `wss://`, and the WebSocket upgrade.
/// What the verifier saw is returned even on failure (`Seen`), so callers
/// can remember or report the certificate.
pub async fn open(
    url: &str,
    trust: &Trust,
    config: WebSocketConfig,
) -> (Result<Ws, WireError>, Seen) {
    let seen = Seen::default();
    let result = connect(url, trust, config, &seen).await;
    (result, seen)
}

/// The certificate the gateway presented, if it got that far.
#[derive(Clone, Default, Debug)]
pub struct Seen(Arc<Mutex<Option<Fingerprint>>>);

impl Seen {
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        *self.0.lock().unwrap()
    }
}

/// The checks made before any socket is opened: the URL, a pin with
/// plaintext, and OpenClaw's plaintext rule.
pub fn precheck(url: &str, trust: &Trust) -> Result<Target, WireError> {
    let target = Target::parse(url)?;
    if !target.tls && trust.pin.is_some() {
        return Err(WireError::Refused(format!(
            "a TLS fingerprint is given, but {url} is plaintext ws://: use wss:// (or --tls on the node)"
        )));
    }
    if !target.tls && !plaintext_allowed(&target.host) {
        return Err(WireError::Refused(format!(
            "refusing plaintext ws:// to {}: it is not a loopback, private or .local/.ts.net address, and the token would cross the network unencrypted; use wss:// (--gateway wss://{}/…, or --tls on the node; OpenClaw's OPENCLAW_ALLOW_INSECURE_PRIVATE_WS=1 admits private names, never public addresses)",
            target.host,
            target.authority()
        )));
    }
    Ok(target)
}

async fn connect(
    url: &str,
    trust: &Trust,
    config: WebSocketConfig,
    seen: &Seen,
) -> Result<Ws, WireError> {
    let target = precheck(url, trust)?;
    let stream = open_stream(&target, trust, seen)
        .await
        .map_err(|e| match e {
            WireError::NotTls(_) => {
                WireError::Scheme(Mismatch::no_tls(url, &target.host, trust.pin.is_some()))
            }
            e => e,
        })?;
    match tokio_tungstenite::client_async_with_config(url, stream, Some(config)).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(WireError::NotWebSocket(
            response.status().as_u16(),
            response.status().to_string(),
        )),
        // Our upgrade request answered with a TLS alert, or with silence
        // (Node's TLS server, OpenClaw's, just closes).
        Err(_) if !target.tls && speaks_tls(&target).await => {
            Err(WireError::Scheme(Mismatch::SpeaksTls {
                url: url.to_owned(),
            }))
        }
        Err(e) => Err(WireError::Transport(e.to_string())),
    }
}

/// The TCP connection to `target`, and TLS over it when it is `tls`: the
/// byte stream the gateway's WebSocket and the links' HTTP both run on.
pub async fn open_stream(
    target: &Target,
    trust: &Trust,
    seen: &Seen,
) -> Result<MaybeTlsStream<TcpStream>, WireError> {
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| {
            WireError::Transport(format!("cannot reach {}:{}: {e}", target.host, target.port))
        })?;
    // Small frames must leave at once: Nagle plus delayed ACKs add tens of
    // milliseconds to a round trip.
    let _ = tcp.set_nodelay(true);
    Ok(if target.tls {
        MaybeTlsStream::Rustls(handshake(tcp, target, trust, seen).await?)
    } else {
        MaybeTlsStream::Plain(tcp)
    })
}

async fn handshake(
    tcp: TcpStream,
    target: &Target,
    trust: &Trust,
    seen: &Seen,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, WireError> {
    let verdict = Arc::new(Mutex::new(None));
    let verifier = |provider| {
        Verifier::new(provider, trust.pin, seen.clone(), verdict.clone())
            .map_err(WireError::Untrusted)
    };
    let e = match tls_connect(tcp, target, verifier).await? {
        Ok(stream) => return Ok(stream),
        Err(e) => e,
    };
    let host = target.authority();
    if let Some(problem) = verdict.lock().unwrap().take() {
        return Err(WireError::Untrusted(format!("TLS: {host} {problem}")));
    }
    let closed = matches!(
        e.kind(),
        std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
    );
    // A plaintext server answers the hello with HTTP (an error page), or
    // hangs up on it; then it is asked as a plaintext one.
    if matches!(
        rustls_error(&e),
        Some(rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType
        ))
    ) || (closed && speaks_http(target).await)
    {
        return Err(WireError::NotTls(host));
    }
    Err(WireError::Transport(format!(
        "TLS handshake with {host} failed: {e}"
    )))
}

/// A TLS handshake over `tcp` with the verifier `verifier` makes: the
/// outer error is one of setting up, the inner the handshake's own.
async fn tls_connect(
    tcp: TcpStream,
    target: &Target,
    verifier: impl FnOnce(Arc<CryptoProvider>) -> Result<Verifier, WireError>,
) -> Result<std::io::Result<tokio_rustls::client::TlsStream<TcpStream>>, WireError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = verifier(provider.clone())?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| WireError::Transport(format!("TLS setup: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    let name = ServerName::try_from(target.host.clone()).map_err(|e| {
        WireError::Refused(format!("{:?} is not a TLS server name: {e}", target.host))
    })?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    Ok(connector.connect(name, tcp).await)
}

/// The TLS error inside an I/O error (as tokio-rustls wraps it).
fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref()?.downcast_ref::<rustls::Error>()
}

/// How long a probe of the other scheme may take.
const PROBE_LIMIT: Duration = Duration::from_secs(3);

/// Whether the server at `target` answers a TLS hello as a TLS server does,
/// on a connection of its own. The handshake is abandoned at the
/// certificate (a pin no certificate has), so only the hello is sent.
async fn speaks_tls(target: &Target) -> bool {
    let probe = async {
        let tcp = TcpStream::connect((target.host.as_str(), target.port))
            .await
            .ok()?;
        let seen = Seen::default();
        let nobody = Some(Fingerprint([0; 32]));
        let verifier = |provider| {
            Verifier::new(provider, nobody, seen.clone(), Arc::default())
                .map_err(WireError::Untrusted)
        };
        let e = tls_connect(tcp, target, verifier).await.ok()?.err()?;
        // A certificate, or an alert (no common version or cipher): TLS.
        Some(
            seen.fingerprint().is_some()
                || matches!(
                    rustls_error(&e),
                    Some(rustls::Error::AlertReceived(_) | rustls::Error::PeerIncompatible(_))
                ),
        )
    };
    matches!(
        tokio::time::timeout(PROBE_LIMIT, probe).await,
        Ok(Some(true))
    )
}

/// Whether the server at `target` answers a plaintext WebSocket upgrade
/// (with no credential) in HTTP, on a connection of its own: the answer,
/// `101` or an error page, proves it plaintext.
async fn speaks_http(target: &Target) -> bool {
    let probe = async {
        let tcp = TcpStream::connect((target.host.as_str(), target.port))
            .await
            .ok()?;
        let url = format!("ws://{}/", target.authority());
        Some(matches!(
            tokio_tungstenite::client_async(url, tcp).await,
            Ok(_) | Err(tokio_tungstenite::tungstenite::Error::Http(_))
        ))
    };
    matches!(
        tokio::time::timeout(PROBE_LIMIT, probe).await,
        Ok(Some(true))
    )
}

/// Judges the gateway's certificate: by pin when there is one, else by
/// the system's trust store; records what it saw and, on refusal, why.
#[derive(Debug)]
struct Verifier {
    provider: Arc<CryptoProvider>,
    pin: Option<Fingerprint>,
    chain: Option<Arc<dyn ServerCertVerifier>>,
    seen: Seen,
    verdict: Arc<Mutex<Option<String>>>,
}

impl Verifier {
    fn new(
        provider: Arc<CryptoProvider>,
        pin: Option<Fingerprint>,
        seen: Seen,
        verdict: Arc<Mutex<Option<String>>>,
    ) -> Result<Self, String> {
        let chain = match pin {
            Some(_) => None,
            None => Some(system_verifier(provider.clone())?),
        };
        Ok(Self {
            provider,
            pin,
            chain,
            seen,
            verdict,
        })
    }

    fn refuse(&self, problem: String) -> rustls::Error {
        *self.verdict.lock().unwrap() = Some(problem.clone());
        rustls::Error::General(problem)
    }
}

/// The operating system's trust store (loaded once per process).
fn system_verifier(provider: Arc<CryptoProvider>) -> Result<Arc<dyn ServerCertVerifier>, String> {
    static ROOTS: std::sync::OnceLock<Arc<rustls::RootCertStore>> = std::sync::OnceLock::new();
    let roots = ROOTS.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(found.certs);
        Arc::new(roots)
    });
    if roots.is_empty() {
        return Err(
            "the system has no trusted certificates to verify the gateway with: pin its certificate with --tls-fingerprint (or OPENCLAW_GATEWAY_TLS_FINGERPRINT)".into(),
        );
    }
    rustls::client::WebPkiServerVerifier::builder_with_provider(roots.clone(), provider)
        .build()
        .map(|v| v as Arc<dyn ServerCertVerifier>)
        .map_err(|e| format!("cannot use the system's trusted certificates: {e}"))
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let presented = Fingerprint::of(end_entity);
        *self.seen.0.lock().unwrap() = Some(presented);
        if let Some(pin) = self.pin {
            return if presented == pin {
                Ok(ServerCertVerified::assertion())
            } else {
                Err(self.refuse(format!(
                    "presented a certificate with SHA-256 fingerprint {presented}, but {pin} is pinned: not the expected gateway (or its certificate was replaced — if so, pin the new one with --tls-fingerprint)"
                )))
            };
        }
        let chain = self.chain.as_ref().expect("no pin: a chain verifier");
        chain
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .map_err(|e| {
                self.refuse(format!(
                    "presented a certificate the system does not trust ({e}; fingerprint {presented}): if this is your gateway's self-signed certificate, pin it with --tls-fingerprint {presented}"
                ))
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn fingerprints_normalise_as_openclaw_does() {
        let want = Fingerprint::parse(HEX).unwrap();
        let colons: Vec<String> = (0..32)
            .map(|i| HEX[2 * i..2 * i + 2].to_uppercase())
            .collect();
        for text in [
            HEX.to_uppercase(),
            colons.join(":"),
            colons.join(":").to_lowercase(),
            format!("sha256:{HEX}"),
            format!("SHA256:{}", colons.join(":")),
            format!("sha256 Fingerprint={}", colons.join(":")),
            format!("  {HEX}\n"),
        ] {
            assert_eq!(Fingerprint::parse(&text), Ok(want), "{text}");
        }
        assert_eq!(want.to_string(), colons.join(":"));
        for bad in [
            "",
            "abc",
            &HEX[1..],
            &format!("{HEX}00"),
            &HEX.replace('9', "g"),
        ] {
            assert!(Fingerprint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plaintext_only_off_the_internet() {
        for ok in [
            "127.0.0.1",
            "127.8.9.10",
            "::1",
            "localhost",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.20",
            "169.254.3.4",
            "100.64.0.1",
            "100.127.255.254",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "::ffff:192.168.0.1",
            "printer.local",
            "gw.tail1234.ts.net",
            "GW.TS.NET.",
        ] {
            assert!(plaintext_rule(ok, false), "{ok}");
        }
        for public in [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "2001:db8::1",
            "doctor.openclaw.ai",
            "local",
            "evil.local.example.com",
            "ts.net.example.com",
            "foo.localhost",
            "0.0.0.0",
            "::",
        ] {
            assert!(!plaintext_rule(public, false), "{public}");
        }
        // Break-glass: any name, never a public address — in any spelling
        // the resolver takes.
        assert!(plaintext_rule("gateway.corp.example", true));
        for public in ["8.8.8.8", "134744072", "0x8.8.8.8", "8.8.2056", "010.0.0.1"] {
            assert!(!plaintext_rule(public, true), "{public}");
        }
        assert_eq!(inet_aton("134744072"), Some(Ipv4Addr::new(8, 8, 8, 8)));
        assert_eq!(inet_aton("0x7f.1"), Some(Ipv4Addr::new(127, 0, 0, 1)));
        assert!(
            plaintext_rule("0x7f.1", false),
            "loopback in another spelling"
        );
        assert_eq!(inet_aton("deadbeef"), None);
        assert_eq!(inet_aton("1.2.3.4.5"), None);
    }

    #[test]
    fn targets_parse() {
        assert_eq!(
            Target::parse("wss://gw.example:8443/ws").unwrap(),
            Target {
                tls: true,
                host: "gw.example".into(),
                port: 8443
            }
        );
        assert_eq!(Target::parse("ws://[::1]:18789").unwrap().host, "::1");
        assert_eq!(Target::parse("wss://gw.example").unwrap().port, 443);
        assert!(Target::parse("http://gw:1").is_err());
        assert!(Target::parse("not a url").is_err());
    }

    #[tokio::test]
    async fn plaintext_to_a_public_host_is_refused_before_connecting() {
        let (result, seen) = open(
            "ws://public-host.invalid:18789",
            &Trust::default(),
            WebSocketConfig::default(),
        )
        .await;
        let Err(WireError::Refused(why)) = result else {
            panic!("not refused")
        };
        assert!(
            why.contains("refusing plaintext ws:// to public-host.invalid")
                && why.contains("wss://"),
            "{why}"
        );
        assert!(seen.fingerprint().is_none());
    }

    // ---- The wrong scheme ------------------------------------------------------

    /// A server on loopback that answers every connection with `serve`.
    async fn server<F, Fut>(serve: F) -> u16
    where
        F: Fn(TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(serve(tcp));
            }
        });
        port
    }

    /// What OpenClaw's TLS gateway (Node's TLS server) does: a hello gets a
    /// TLS server, anything else a silent close.
    async fn node_tls_server() -> u16 {
        use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der())),
        )
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        server(move |tcp| {
            let acceptor = acceptor.clone();
            async move {
                let mut first = [0u8; 1];
                if tcp.peek(&mut first).await.is_ok() && first[0] == 0x16 {
                    let _ = acceptor.accept(tcp).await;
                }
            }
        })
        .await
    }

    /// What OpenClaw's plaintext gateway (Node's HTTP server) does with
    /// bytes that are not HTTP: an error page.
    async fn node_http_server() -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        server(|mut tcp| async move {
            let mut buf = [0u8; 1024];
            let _ = tcp.read(&mut buf).await;
            let _ = tcp
                .write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                .await;
        })
        .await
    }

    /// Neither: takes the connection and hangs up.
    async fn hang_up_server() -> u16 {
        server(|tcp| async move { drop(tcp) }).await
    }

    async fn attempt(url: &str) -> WireError {
        let pinned = Trust {
            pin: url.starts_with("wss").then_some(Fingerprint([0xAB; 32])),
        };
        let (result, _) = open(url, &pinned, WebSocketConfig::default()).await;
        result.expect_err("no server here completes a handshake")
    }

    #[tokio::test]
    async fn ws_to_a_tls_server_that_closes_silently_names_wss() {
        let port = node_tls_server().await;
        let url = format!("ws://127.0.0.1:{port}/gw");
        let WireError::Scheme(mismatch) = attempt(&url).await else {
            panic!("not a mismatch")
        };
        assert_eq!(
            mismatch.to_string(),
            format!("the gateway at {url} speaks TLS: use wss://127.0.0.1:{port}/gw")
        );
    }

    #[tokio::test]
    async fn wss_to_a_plaintext_server_that_answers_http_names_ws() {
        let port = node_http_server().await;
        let url = format!("wss://127.0.0.1:{port}");
        let WireError::Scheme(mismatch) = attempt(&url).await else {
            panic!("not a mismatch")
        };
        assert_eq!(
            mismatch.to_string(),
            format!("the gateway at {url} does not speak TLS: use ws://127.0.0.1:{port}")
        );
    }

    #[tokio::test]
    async fn a_server_that_only_hangs_up_is_no_mismatch() {
        let port = hang_up_server().await;
        for url in [
            format!("ws://127.0.0.1:{port}"),
            format!("wss://127.0.0.1:{port}"),
        ] {
            let e = attempt(&url).await;
            assert!(matches!(e, WireError::Transport(_)), "{url}: {e:?}");
        }
    }

    /// A server that hangs up on the attempt and then holds the probe's
    /// connection without a word (or trickles bytes): the probe gives up at
    /// its cap, and the failure is no mismatch.
    #[tokio::test]
    async fn a_probe_answered_slowly_gives_up_at_its_cap() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::AsyncWriteExt;
        for url_scheme in ["ws", "wss"] {
            let seen = Arc::new(AtomicUsize::new(0));
            let port = server(move |mut tcp| {
                let first = seen.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if first {
                        return; // hang up on the attempt
                    }
                    // The probe: the start of an answer in its own
                    // protocol, then a trickle that never completes it.
                    let mut first = [0u8; 1];
                    let tls = tcp.peek(&mut first).await.is_ok() && first[0] == 0x16;
                    let (start, more): (&[u8], &[u8]) = if tls {
                        (&[0x16, 0x03, 0x03, 0x40, 0x00, 0x02], b"\0")
                    } else {
                        (b"HTTP/1.1 101 Switching Protocols\r\n", b"a: b\r\n")
                    };
                    if tcp.write_all(start).await.is_err() {
                        return;
                    }
                    for _ in 0..300 {
                        if tcp.write_all(more).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            })
            .await;
            let url = format!("{url_scheme}://127.0.0.1:{port}");
            let started = std::time::Instant::now();
            let e = attempt(&url).await;
            let took = started.elapsed();
            assert!(matches!(e, WireError::Transport(_)), "{url}: {e:?}");
            assert!(
                took >= PROBE_LIMIT,
                "{url}: the probe ended early ({took:?})"
            );
            assert!(
                took < PROBE_LIMIT + Duration::from_secs(1),
                "{url}: {took:?}"
            );
        }
    }

    #[tokio::test]
    async fn the_links_hear_tls_refused_without_the_gateways_advice() {
        let port = node_http_server().await;
        let target = Target {
            tls: true,
            host: "127.0.0.1".into(),
            port,
        };
        let pinned = Trust {
            pin: Some(Fingerprint([0xAB; 32])),
        };
        let e = open_stream(&target, &pinned, &Seen::default())
            .await
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            format!("TLS handshake with 127.0.0.1:{port} failed: the server does not speak TLS")
        );
    }

    /// A pinned certificate says TLS is expected there: a plaintext answer
    /// from another machine is what one in the middle gives, and must not
    /// talk the user into dropping TLS (and the pin).
    #[test]
    fn no_tls_advice_never_suggests_plaintext_against_a_pin() {
        let pinned = Mismatch::no_tls("wss://192.168.1.20:18789", "192.168.1.20", true).to_string();
        assert!(!pinned.contains("ws://192"), "{pinned}");
        assert!(pinned.contains("pinned"), "{pinned}");
        let public = Mismatch::no_tls("wss://203.0.113.7", "203.0.113.7", true).to_string();
        assert!(!public.contains("use ws://"), "{public}");
        // On this machine the pin guards nothing a plaintext answer could steal.
        let here = Mismatch::no_tls("wss://127.0.0.1:1", "127.0.0.1", true).to_string();
        assert!(here.contains("use ws://127.0.0.1:1"), "{here}");
        // Without a pin, the plaintext rule's advice stands.
        let unpinned = Mismatch::no_tls("wss://192.168.1.20", "192.168.1.20", false).to_string();
        assert!(unpinned.contains("use ws://192.168.1.20"), "{unpinned}");
    }

    #[test]
    fn no_tls_advice_follows_the_plaintext_rule() {
        let said = |url: &str, host| {
            Mismatch::NoTls {
                url: url.into(),
                network: Network::of(host),
            }
            .to_string()
        };
        assert_eq!(
            said("wss://localhost:18789", "localhost"),
            "the gateway at wss://localhost:18789 does not speak TLS: use ws://localhost:18789"
        );
        let private = said("wss://192.168.1.20:18789/ctx", "192.168.1.20");
        assert!(
            private.starts_with("the gateway at wss://192.168.1.20:18789/ctx does not speak TLS: use ws://192.168.1.20:18789/ctx if this network is trusted")
                && private.contains("gateway.tls.enabled"),
            "{private}"
        );
        let public = said("wss://203.0.113.7", "203.0.113.7");
        assert!(
            public.starts_with("the gateway at wss://203.0.113.7 does not speak TLS, and plaintext ws:// is refused to a public address: turn on the gateway's TLS (gateway.tls.enabled)")
                && !public.contains("use ws://"),
            "{public}"
        );
    }
}
