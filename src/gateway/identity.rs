//! The node's device identity: an Ed25519 key pair created on first run and
//! kept in the state directory, the `v3` connect signature the gateway
//! checks, and the device token the gateway issues on `hello-ok`.
//!
//! Files are written 0600 inside a 0700 directory, atomically (temp file +
//! rename), so a crash never leaves half a key. This module never logs key
//! material or tokens.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signer, SigningKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::frames::DeviceProof;
use crate::shared::paths::{write_new_private, write_private};

const IDENTITY_FILE: &str = "device-identity.json";
const TOKENS_FILE: &str = "device-tokens.json";

/// The key pair and the ids derived from it.
pub struct Identity {
    key: SigningKey,
    /// Lowercase hex SHA-256 of the raw 32-byte public key.
    pub device_id: String,
    /// Unpadded base64url of the raw public key.
    pub public_key: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredIdentity {
    version: u32,
    device_id: String,
    public_key: String,
    /// Unpadded base64url of the 32-byte Ed25519 seed.
    private_key: String,
}

/// What the `v3` signature covers, field by field.
pub struct SignedFields<'a> {
    pub client_id: &'a str,
    pub client_mode: &'a str,
    pub role: &'a str,
    pub scopes: &'a [String],
    pub signed_at: u64,
    pub token: Option<&'a str>,
    pub nonce: &'a str,
    pub platform: &'a str,
    pub device_family: &'a str,
}

impl Identity {
    /// Loads the identity from `state_dir`, creating it on first run.
    pub fn load_or_create(state_dir: &Path) -> io::Result<Self> {
        let path = state_dir.join(IDENTITY_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let stored: StoredIdentity = serde_json::from_slice(&bytes).map_err(|e| {
                    invalid(format!("{} is not a device identity: {e}", path.display()))
                })?;
                let seed: [u8; 32] = URL_SAFE_NO_PAD
                    .decode(&stored.private_key)
                    .ok()
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| invalid(format!("{} holds a bad key", path.display())))?;
                let identity = Self::from_seed(seed);
                if identity.device_id != stored.device_id {
                    return Err(invalid(format!(
                        "{}: device id does not match its key",
                        path.display()
                    )));
                }
                Ok(identity)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let mut seed = [0u8; 32];
                getrandom::fill(&mut seed).map_err(|e| io::Error::other(e.to_string()))?;
                let identity = Self::from_seed(seed);
                let stored = StoredIdentity {
                    version: 1,
                    device_id: identity.device_id.clone(),
                    public_key: identity.public_key.clone(),
                    private_key: URL_SAFE_NO_PAD.encode(seed),
                };
                // Two processes creating it at once: the first one's stays,
                // and the other reads it back (never a key whose file is gone).
                match write_new_private(&path, &serde_json::to_vec_pretty(&stored)?) {
                    Ok(()) => Ok(identity),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        Self::load_or_create(state_dir)
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    pub fn from_seed(seed: [u8; 32]) -> Self {
        let key = SigningKey::from_bytes(&seed);
        let public = key.verifying_key().to_bytes();
        Self {
            device_id: device_id(&public),
            public_key: URL_SAFE_NO_PAD.encode(public),
            key,
        }
    }

    /// The `connect.device` block for one challenge.
    pub fn prove(&self, fields: &SignedFields<'_>) -> DeviceProof {
        let payload = v3_payload(&self.device_id, fields);
        let signature = self.key.sign(payload.as_bytes());
        DeviceProof {
            id: self.device_id.clone(),
            public_key: self.public_key.clone(),
            signature: URL_SAFE_NO_PAD.encode(signature.to_bytes()),
            signed_at: fields.signed_at,
            nonce: fields.nonce.to_owned(),
        }
    }
}

/// `device.id`: lowercase hex SHA-256 of the raw public key.
pub fn device_id(public_key: &[u8; 32]) -> String {
    crate::shared::hex::hex(&Sha256::digest(public_key))
}

/// The signed string:
/// `v3|id|client.id|client.mode|role|scopes,joined|signedAt|token|nonce|platform|deviceFamily`
/// with platform and device family lowercased and a missing token as "".
pub fn v3_payload(device_id: &str, f: &SignedFields<'_>) -> String {
    format!(
        "v3|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
        device_id,
        f.client_id,
        f.client_mode,
        f.role,
        f.scopes.join(","),
        f.signed_at,
        f.token.unwrap_or(""),
        f.nonce,
        f.platform.to_lowercase(),
        f.device_family.to_lowercase(),
    )
}

/// Checks a `connect.device` block against the fields it claims to sign:
/// what the gateway does, and what our tests do with recorded frames.
#[cfg(test)]
pub fn verify(proof: &DeviceProof, fields: &SignedFields<'_>) -> Result<(), String> {
    use ed25519_dalek::{Signature, Verifier, VerifyingKey};
    let public: [u8; 32] = URL_SAFE_NO_PAD
        .decode(&proof.public_key)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or("publicKey is not 32 bytes of base64url")?;
    if device_id(&public) != proof.id {
        return Err("device id is not the SHA-256 of the public key".into());
    }
    let key = VerifyingKey::from_bytes(&public).map_err(|e| e.to_string())?;
    let signature: [u8; 64] = URL_SAFE_NO_PAD
        .decode(&proof.signature)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or("signature is not 64 bytes of base64url")?;
    key.verify(
        v3_payload(&proof.id, fields).as_bytes(),
        &Signature::from_bytes(&signature),
    )
    .map_err(|_| "signature does not verify".into())
}

/// Device tokens issued by gateways, one per gateway URL.
pub struct TokenStore {
    path: PathBuf,
}

impl TokenStore {
    pub fn new(state_dir: &Path) -> Self {
        Self {
            path: state_dir.join(TOKENS_FILE),
        }
    }

    fn load(&self) -> BTreeMap<String, String> {
        std::fs::read(&self.path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub fn get(&self, gateway: &str) -> Option<String> {
        self.load().remove(gateway)
    }

    pub fn set(&self, gateway: &str, token: Option<&str>) -> io::Result<()> {
        let mut all = self.load();
        match token {
            Some(token) => all.insert(gateway.to_owned(), token.to_owned()),
            None => all.remove(gateway),
        };
        write_private(&self.path, &serde_json::to_vec_pretty(&all)?)
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::frames::{ConnectParams, Frame};

    /// Every node `connect` in the recorded frames, with the fields its
    /// signature covers.
    fn recorded_connects() -> Vec<ConnectParams> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/frames");
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in text.lines() {
                let record: serde_json::Value = serde_json::from_str(line).unwrap();
                let Some(frame) = record.get("frame") else {
                    continue;
                };
                let Ok(Frame::Req(req)) = serde_json::from_value::<Frame>(frame.clone()) else {
                    continue;
                };
                if req.method != "connect" {
                    continue;
                }
                let params: ConnectParams = serde_json::from_value(req.params).unwrap();
                let redacted = params
                    .auth
                    .token
                    .as_deref()
                    .is_some_and(|t| t.starts_with("<redacted"));
                if params.role == "node" && params.device.is_some() && !redacted {
                    found.push(params);
                }
            }
        }
        found
    }

    fn fields(p: &ConnectParams) -> SignedFields<'_> {
        let device = p.device.as_ref().unwrap();
        SignedFields {
            client_id: &p.client.id,
            client_mode: &p.client.mode,
            role: &p.role,
            scopes: &p.scopes,
            signed_at: device.signed_at,
            token: p.auth.token.as_deref(),
            nonce: &device.nonce,
            platform: &p.client.platform,
            device_family: &p.client.device_family,
        }
    }

    #[test]
    fn recorded_openclaw_signatures_verify_with_our_v3_string() {
        let connects = recorded_connects();
        assert!(connects.len() >= 8, "found {}", connects.len());
        for params in &connects {
            verify(params.device.as_ref().unwrap(), &fields(params))
                .unwrap_or_else(|e| panic!("{e}: {}", params.client.display_name));
        }
    }

    #[test]
    fn a_changed_field_breaks_the_recorded_signature() {
        let params = &recorded_connects()[0];
        let mut f = fields(params);
        f.nonce = "another-nonce";
        assert!(verify(params.device.as_ref().unwrap(), &f).is_err());
    }

    #[test]
    fn our_signatures_verify_and_ids_derive_from_the_key() {
        let identity = Identity::from_seed([7u8; 32]);
        assert_eq!(identity.device_id.len(), 64);
        let scopes: Vec<String> = vec![];
        let f = SignedFields {
            client_id: "node-host",
            client_mode: "node",
            role: "node",
            scopes: &scopes,
            signed_at: 1795306417355,
            token: Some("t"),
            nonce: "n",
            platform: "linux",
            device_family: "Linux",
        };
        let proof = identity.prove(&f);
        assert_eq!(proof.id, identity.device_id);
        verify(&proof, &f).unwrap();
        assert_eq!(
            v3_payload(&proof.id, &f),
            format!(
                "v3|{}|node-host|node|node||1795306417355|t|n|linux|linux",
                proof.id
            )
        );
    }

    #[test]
    fn identity_is_created_once_privately_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let first = Identity::load_or_create(&state).unwrap();
        let again = Identity::load_or_create(&state).unwrap();
        assert_eq!(first.device_id, again.device_id);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&state.join(IDENTITY_FILE)), 0o600);
            assert_eq!(mode(&state), 0o700);
        }
    }

    #[test]
    fn a_corrupt_identity_is_an_error_not_a_new_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(IDENTITY_FILE), "{}").unwrap();
        assert!(Identity::load_or_create(dir.path()).is_err());
    }

    #[test]
    fn device_tokens_are_kept_per_gateway() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path());
        assert_eq!(store.get("ws://a"), None);
        store.set("ws://a", Some("ta")).unwrap();
        store.set("ws://b", Some("tb")).unwrap();
        assert_eq!(store.get("ws://a").as_deref(), Some("ta"));
        store.set("ws://a", None).unwrap();
        assert_eq!(store.get("ws://a"), None);
        assert_eq!(store.get("ws://b").as_deref(), Some("tb"));
    }
}
