//! The certificates this node has seen, per gateway (`gateway-pins.json` in
//! the state directory). A gateway first trusted by its fingerprint (a
//! self-signed one: `--tls-fingerprint` or a setup code) stays pinned to
//! that certificate: a later connection that presents another is refused,
//! even with no flag given, until the user pins the new one on purpose. A
//! gateway the system's trust store vouched for is only recorded: its
//! certificate is renewed routinely, and the chain still guards it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::gateway::{Fingerprint, Trust};
use crate::shared::paths::write_private;

const FILE: &str = "gateway-pins.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    /// `AB:CD:…`.
    sha256: String,
    /// `pin` (accepted because it matched a pin) or `system` (the chain).
    verified_by: String,
}

pub struct Pins {
    path: PathBuf,
}

/// Where a connection's trust came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The command line (or a setup code).
    Given,
    /// This node's state directory.
    Remembered,
    /// The system's trust store.
    System,
}

impl Pins {
    pub fn new(state_dir: &Path) -> Self {
        Self {
            path: state_dir.join(FILE),
        }
    }

    /// The file's entries; a file that does not parse is an error (never
    /// silently overwritten: it may hold other gateways' pins).
    fn load(&self) -> std::io::Result<BTreeMap<String, Entry>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::other(format!(
                    "{} is not valid ({e}); fix or delete it",
                    self.path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(e),
        }
    }

    /// The trust to connect to `url` with, and where it came from.
    pub fn trust(&self, url: &str, given: &Trust) -> (Trust, Source) {
        if given.pin.is_some() {
            return (given.clone(), Source::Given);
        }
        let remembered = self
            .load()
            .unwrap_or_default()
            .remove(&key(url))
            .filter(|e| e.verified_by == "pin")
            .and_then(|e| Fingerprint::parse(&e.sha256).ok());
        match remembered {
            Some(pin) => (Trust { pin: Some(pin) }, Source::Remembered),
            None => (given.clone(), Source::System),
        }
    }

    /// Records the certificate a verified connection presented; says what
    /// changed, if anything worth a line did.
    pub fn remember(
        &self,
        url: &str,
        presented: Fingerprint,
        source: Source,
    ) -> std::io::Result<Option<String>> {
        let mut all = self.load()?;
        let url = &key(url);
        let entry = Entry {
            sha256: presented.to_string(),
            verified_by: if source == Source::System {
                "system".into()
            } else {
                "pin".into()
            },
        };
        let before = all.get(url).cloned();
        if before.as_ref() == Some(&entry) {
            return Ok(None);
        }
        all.insert(url.to_owned(), entry);
        write_private(&self.path, &serde_json::to_vec_pretty(&all)?)?;
        Ok(Some(match before {
            None => format!(
                "remembered the gateway's certificate ({presented}) in {}",
                self.path.display()
            ),
            Some(old) => format!(
                "the gateway's certificate changed from {} to {presented} ({}); remembered",
                old.sha256,
                match source {
                    Source::System => "the system's trust store vouches for the new one",
                    _ => "pinned on purpose",
                }
            ),
        }))
    }

    /// The hint that goes with a refusal when the pin was remembered.
    pub fn reset_hint(&self, url: &str) -> String {
        format!(
            "this node pinned the certificate on its first connection to {url} ({}): if the gateway's certificate was replaced on purpose, start the node once with --tls-fingerprint <the new fingerprint>, or delete that entry",
            self.path.display()
        )
    }
}

/// One spelling per gateway: scheme and host in lower case, no trailing
/// slash (the path is kept: it can name another gateway).
fn key(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            format!(
                "{}://{}{path}",
                scheme.to_ascii_lowercase(),
                authority.to_ascii_lowercase()
            )
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_gateway_stays_pinned_and_a_system_one_is_only_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let pins = Pins::new(dir.path());
        let url = "wss://gw:18789";
        let a = Fingerprint([1; 32]);
        let b = Fingerprint([2; 32]);
        assert_eq!(
            pins.trust(url, &Trust::default()),
            (Trust::default(), Source::System).clone()
        );
        pins.remember(url, a, Source::Given)
            .unwrap()
            .expect("a first line");
        assert_eq!(pins.trust(url, &Trust::default()).0.pin, Some(a));
        assert_eq!(pins.trust(url, &Trust::default()).1, Source::Remembered);
        assert_eq!(pins.remember(url, a, Source::Remembered).unwrap(), None);
        // Given on purpose: wins, and is remembered instead.
        let given = Trust { pin: Some(b) };
        assert_eq!(pins.trust(url, &given).0.pin, Some(b));
        assert!(
            pins.remember(url, b, Source::Given)
                .unwrap()
                .unwrap()
                .contains("changed")
        );
        assert_eq!(pins.trust(url, &Trust::default()).0.pin, Some(b));
        // Vouched for by the system: recorded, never enforced.
        let other = "wss://public.example";
        pins.remember(other, a, Source::System).unwrap();
        assert_eq!(pins.trust(other, &Trust::default()).1, Source::System);
        // Another spelling of the same gateway keeps its pin.
        assert_eq!(
            pins.trust("WSS://GW:18789/", &Trust::default()).0.pin,
            Some(b)
        );
        // A damaged file is reported, not overwritten.
        std::fs::write(dir.path().join(FILE), "{not json").unwrap();
        assert!(pins.remember(url, a, Source::Given).is_err());
        assert_eq!(
            std::fs::read_to_string(dir.path().join(FILE)).unwrap(),
            "{not json"
        );
    }
}
