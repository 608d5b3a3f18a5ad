//! Setup codes: how a node enrolls without the gateway's shared token.
//!
//! `openclaw qr --setup-code-only` (or the Control UI's "Node host" dialog)
//! hands out unpadded base64url of the JSON `{url, urls?, bootstrapToken,
//! expiresAtMs, tlsFingerprint?}`, also written `oc-pair://<code>`. The
//! bootstrap token goes in `connect.auth.bootstrapToken` (and in the
//! signature's token slot) once; the gateway answers with a device token
//! that later connects use. The code is a secret for its ten minutes of
//! life: it is never written anywhere, and no message repeats it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;

use super::transport::Fingerprint;

/// A decoded, unexpired setup code.
#[derive(Clone, PartialEq, Eq)]
pub struct SetupCode {
    pub url: String,
    pub bootstrap_token: String,
    pub expires_at_ms: Option<u64>,
    pub fingerprint: Option<Fingerprint>,
    /// The code itself, for a service's env file (it holds the token).
    pub code: String,
}

/// Never prints the token.
impl std::fmt::Debug for SetupCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetupCode")
            .field("url", &self.url)
            .field("expires_at_ms", &self.expires_at_ms)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Payload {
    url: String,
    bootstrap_token: String,
    #[serde(default)]
    expires_at_ms: Option<u64>,
    #[serde(default)]
    tls_fingerprint: Option<String>,
}

const HINT: &str =
    "create a new one with `openclaw qr --setup-code-only` (or the Control UI's Node host dialog)";

/// Decodes `text` (a code or an `oc-pair://` URL) as of `now_ms`.
pub fn decode(text: &str, now_ms: u64) -> Result<SetupCode, String> {
    let text = text.trim();
    let code = match text.get(..10) {
        Some(prefix) if prefix.eq_ignore_ascii_case("oc-pair://") => &text[10..],
        _ => text,
    };
    let invalid = || format!("invalid pairing setup code or URL: {HINT}");
    if code.is_empty()
        || !code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(invalid());
    }
    let bytes = URL_SAFE_NO_PAD.decode(code).map_err(|_| invalid())?;
    let payload: Payload = serde_json::from_slice(&bytes)
        .map_err(|_| format!("invalid pairing setup payload: {HINT}"))?;
    if !(payload.url.starts_with("ws://") || payload.url.starts_with("wss://")) {
        return Err(format!(
            "invalid pairing setup payload (its gateway URL is not ws:// or wss://): {HINT}"
        ));
    }
    if payload.bootstrap_token.trim().is_empty() {
        return Err(format!(
            "invalid pairing setup payload (no bootstrap token): {HINT}"
        ));
    }
    if payload.expires_at_ms.is_some_and(|at| at <= now_ms) {
        return Err(format!("the pairing setup code has expired: {HINT}"));
    }
    let fingerprint = match payload
        .tls_fingerprint
        .as_deref()
        .filter(|f| !f.trim().is_empty())
    {
        Some(f) => Some(Fingerprint::parse(f).map_err(|_| {
            format!("invalid pairing setup payload (its TLS fingerprint is not SHA-256): {HINT}")
        })?),
        None => None,
    };
    Ok(SetupCode {
        url: payload.url,
        bootstrap_token: payload.bootstrap_token,
        expires_at_ms: payload.expires_at_ms,
        fingerprint,
        code: code.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(json: serde_json::Value) -> String {
        URL_SAFE_NO_PAD.encode(json.to_string())
    }

    #[test]
    fn codes_and_oc_pair_urls_decode() {
        let fp = "ab".repeat(32);
        let code = encode(serde_json::json!({
            "url": "wss://10.0.0.5:18789", "bootstrapToken": "boot-123",
            "expiresAtMs": 2_000, "tlsFingerprint": fp,
        }));
        let decoded = decode(&code, 1_000).unwrap();
        assert_eq!(decoded.url, "wss://10.0.0.5:18789");
        assert_eq!(decoded.bootstrap_token, "boot-123");
        assert_eq!(decoded.fingerprint, Some(Fingerprint([0xab; 32])));
        assert_eq!(
            decode(&format!("OC-PAIR://{code}"), 1_000).unwrap(),
            decoded
        );
        assert!(
            !format!("{decoded:?}").contains("boot-123"),
            "Debug hides the token"
        );
        let bare =
            encode(serde_json::json!({"url": "ws://127.0.0.1:18789", "bootstrapToken": "t"}));
        assert_eq!(decode(&bare, u64::MAX).unwrap().fingerprint, None);
    }

    #[test]
    fn bad_and_expired_codes_are_refused_without_repeating_them() {
        let expired = encode(
            serde_json::json!({"url": "ws://127.0.0.1:1", "bootstrapToken": "secret-boot", "expiresAtMs": 5}),
        );
        let why = decode(&expired, 10).unwrap_err();
        assert!(
            why.contains("expired") && why.contains("openclaw qr"),
            "{why}"
        );
        assert!(!why.contains("secret-boot") && !why.contains(&expired));
        for bad in [
            "",
            "not a code!",
            &format!("{expired}="),
            &encode(serde_json::json!({"url": "http://x", "bootstrapToken": "t"})),
            &encode(serde_json::json!({"url": "ws://x:1", "bootstrapToken": ""})),
            &encode(
                serde_json::json!({"url": "ws://x:1", "bootstrapToken": "t", "tlsFingerprint": "zz"}),
            ),
            &URL_SAFE_NO_PAD.encode("[1,2]"),
        ] {
            let why = decode(bad, 0).unwrap_err();
            assert!(why.starts_with("invalid pairing setup"), "{bad}: {why}");
        }
    }
}
