//! The connection loop: connect, serve the session, and on a drop or a
//! refusal decide whether to retry (with which token, after how long) or
//! to stop, because retrying cannot fix what the user must.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

use super::saved_gateway::save_gateway;
use super::session::End;
use super::{Node, pins, status};
use crate::gateway::client::{self, ConnectError};
use crate::gateway::frames::ErrorShape;
use crate::shared::backoff::Backoff;
use crate::shared::log::{self, say, warn};

const HANDSHAKE_LIMIT: Duration = Duration::from_secs(20);
/// A session this long proves the link works; shorter ones keep backing off.
const STABLE_SESSION: Duration = Duration::from_secs(30);
/// Handshakes in a row that prove the server is not an OpenClaw gateway
/// before the node gives up (exit 1).
const NOT_GATEWAY_LIMIT: u32 = 3;
/// A pairing request is retried at least this often, so an approval is
/// picked up quickly, but never faster than the backoff allows.
const PAIRING_RETRY_CAP: Duration = Duration::from_secs(10);

/// Which token the next connect presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenChoice {
    Device,
    Shared,
    /// A setup code's bootstrap token (`--pair`), until the device token.
    Bootstrap,
}

impl Node {
    pub(super) async fn serve(self, shutdown: impl std::future::Future<Output = ()>) -> u8 {
        tokio::pin!(shutdown);
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let mut choice = self.first_choice();
        if choice == TokenChoice::Bootstrap
            && let Some(why) = self.expired_code()
        {
            log::error(&why);
            return 1;
        }
        let mut tried_device_after_mismatch = false;
        let mut announced_pairing = HashSet::new();
        let mut not_gateway = 0;
        let mut ever_connected = false;
        let mut beacon = status::Beacon::new(&self.options.state_dir, &self.options.gateway.url);
        say(&format!(
            "device {} ({}), workspace {}; `--node {}` finds this node in openclaw nodes commands",
            &self.identity.device_id[..16],
            self.display_name,
            self.tools.workspace().root().display(),
            &self.identity.device_id[..16],
        ));
        say(&format!("connecting to {}", self.options.gateway));
        loop {
            let token = self.token(choice);
            let (endpoint, trusted_by) = self.endpoint();
            let attempt = tokio::select! {
                _ = &mut shutdown => {
                    say("stopped");
                    return 0;
                }
                attempt = client::open(&endpoint, HANDSHAKE_LIMIT, |c| self.connect_params(c, token.as_deref(), choice == TokenChoice::Bootstrap)) => attempt,
            };
            let was_not_gateway = matches!(attempt, Err(ConnectError::NotGateway(_)));
            let mut wait = None;
            match attempt {
                Ok(conn) => {
                    tried_device_after_mismatch = false;
                    ever_connected = true;
                    save_gateway(&self.options.state_dir, &endpoint.url);
                    if let Some(presented) = conn.certificate {
                        match self.pins.remember(&endpoint.url, presented, trusted_by) {
                            Ok(Some(line)) => say(&line),
                            Ok(None) => {}
                            Err(e) => {
                                warn(&format!("cannot remember the gateway's certificate: {e}"))
                            }
                        }
                    }
                    if let Some(device_token) = conn.device_token() {
                        if let Err(e) = self
                            .tokens
                            .set(&self.options.gateway.url, Some(device_token))
                        {
                            warn(&format!("cannot save the device token: {e}"));
                        }
                        choice = TokenChoice::Device;
                    }
                    say(&format!(
                        "connected to {} (protocol {})",
                        self.options.gateway, conn.hello.protocol
                    ));
                    beacon.connected();
                    let began = Instant::now();
                    match self
                        .session(conn, &endpoint, &mut shutdown, &mut beacon)
                        .await
                    {
                        End::Shutdown => return 0,
                        End::Dropped(why) => {
                            warn(&format!("connection lost: {why}"));
                            beacon.lost(&why);
                        }
                    }
                    // A gateway that accepts and drops at once must not get
                    // a reconnect storm: only a session that lasted resets.
                    if began.elapsed() >= STABLE_SESSION {
                        backoff.reset();
                    }
                }
                Err(ConnectError::Rejected(error)) => match error.detail_code() {
                    "PAIRING_REQUIRED" => {
                        let request = error
                            .details
                            .as_ref()
                            .and_then(|d| d.request_id.clone())
                            .unwrap_or_default();
                        if announced_pairing.insert(request.clone()) {
                            let reason = error
                                .details
                                .as_ref()
                                .and_then(|d| d.reason.clone())
                                .unwrap_or_default();
                            warn(&format!(
                                "pairing required ({reason}): ask the gateway's operator to run"
                            ));
                            warn(&format!("    openclaw devices approve {request}"));
                            warn("  (retrying until approved)");
                        }
                        beacon.lost(&format!(
                            "pairing required: openclaw devices approve {request}"
                        ));
                        wait = Some(backoff.next().min(PAIRING_RETRY_CAP));
                    }
                    "AUTH_TOKEN_MISMATCH" | "AUTH_DEVICE_TOKEN_MISMATCH"
                        if choice == TokenChoice::Device =>
                    {
                        warn("the gateway no longer accepts the saved device token; forgetting it");
                        let _ = self.tokens.set(&self.options.gateway.url, None);
                        if self.options.pair.is_some() {
                            // The setup code in hand enrols the device again.
                            if let Some(code) = self.expired_code() {
                                log::error(&code);
                                return 1;
                            }
                            choice = TokenChoice::Bootstrap;
                            wait = Some(Duration::ZERO);
                        } else if self.options.token.is_none() {
                            log::error(
                                "no shared token to fall back on: pass --token or set OPENCLAW_GATEWAY_TOKEN",
                            );
                            return 1;
                        } else {
                            choice = TokenChoice::Shared;
                            wait = Some(Duration::ZERO);
                        }
                    }
                    "AUTH_TOKEN_MISMATCH" => {
                        let can_retry = error
                            .details
                            .as_ref()
                            .and_then(|d| d.can_retry_with_device_token)
                            .unwrap_or(false);
                        if can_retry
                            && !tried_device_after_mismatch
                            && self.tokens.get(&self.options.gateway.url).is_some()
                        {
                            tried_device_after_mismatch = true;
                            choice = TokenChoice::Device;
                            wait = Some(Duration::ZERO);
                        } else {
                            log::error(&format!(
                                "{}: {} — check --token / OPENCLAW_GATEWAY_TOKEN",
                                error.detail_code(),
                                error.message
                            ));
                            return 1;
                        }
                    }
                    "AUTH_BOOTSTRAP_TOKEN_INVALID" => {
                        log::error(&format!(
                            "the gateway refused the setup code: {}: create a new one with `openclaw qr --setup-code-only` (or the Control UI's Node host dialog){}",
                            error.message,
                            if self.options.pair_if_needed {
                                ""
                            } else {
                                ", or start with --pair-if-needed to reuse this node's device token"
                            }
                        ));
                        return 1;
                    }
                    "AUTH_TOKEN_MISSING" => {
                        log::error(
                            "the gateway requires a token: pass --token or set OPENCLAW_GATEWAY_TOKEN",
                        );
                        return 1;
                    }
                    _ if is_terminal(&error) => {
                        log::error(&format!(
                            "the gateway refused this node: {}: {}",
                            error.code, error.message
                        ));
                        return 1;
                    }
                    _ => warn(&format!(
                        "the gateway refused the connection: {}: {}",
                        error.code, error.message
                    )),
                },
                // Settings to fix, not hiccups: retrying changes nothing.
                Err(ConnectError::Refused(why)) => {
                    log::error(&why);
                    beacon.lost(&why); // `node status` shows why it stopped
                    return 1;
                }
                Err(ConnectError::Untrusted(why)) => {
                    log::error(&why);
                    beacon.lost(&why);
                    if trusted_by == pins::Source::Remembered {
                        log::error(&self.pins.reset_hint(&endpoint.url));
                    }
                    return 1;
                }
                Err(ConnectError::NotGateway(what)) => {
                    // Proof, not a hiccup: a few in a row and we stop
                    // rather than knock on the wrong door for ever — unless
                    // this URL was a gateway earlier in this run (then it is
                    // one being replaced or restarted: keep trying).
                    not_gateway += 1;
                    if not_gateway >= NOT_GATEWAY_LIMIT && !ever_connected {
                        log::error(&format!(
                            "{} is not an OpenClaw gateway ({what}; {not_gateway} handshakes in a row): check --gateway (OpenClaw's default is ws://127.0.0.1:18789)",
                            self.options.gateway
                        ));
                        return 1;
                    }
                    warn(&format!(
                        "{}: this does not look like an OpenClaw gateway: {what}",
                        self.options.gateway
                    ));
                }
                Err(e) => warn(&e.to_string()),
            }
            if !was_not_gateway {
                not_gateway = 0;
            }
            let delay = wait.unwrap_or_else(|| backoff.next());
            if !delay.is_zero() {
                say(&format!("reconnecting in {:.1}s", delay.as_secs_f64()));
            }
            tokio::select! {
                _ = &mut shutdown => {
                    say("stopped");
                    return 0;
                }
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn token(&self, choice: TokenChoice) -> Option<String> {
        match choice {
            TokenChoice::Device => self
                .tokens
                .get(&self.options.gateway.url)
                .or_else(|| self.options.token.clone()),
            TokenChoice::Shared => self.options.token.clone(),
            TokenChoice::Bootstrap => self
                .options
                .pair
                .as_ref()
                .map(|c| c.bootstrap_token.clone()),
        }
    }

    /// Why the setup code cannot be used any more, if it cannot.
    fn expired_code(&self) -> Option<String> {
        let code = self.options.pair.as_ref()?;
        code.expires_at_ms
            .is_some_and(|at| at <= crate::shared::clock::now_ms())
            .then(|| {
                "the pairing setup code has expired and this node has no device token for its gateway: create a new one with `openclaw qr --setup-code-only` (or the Control UI's Node host dialog)".to_owned()
            })
    }

    /// The first token to present: a setup code's unless `--pair-if-needed`
    /// finds a device token already; then the saved device token; then the
    /// shared one.
    fn first_choice(&self) -> TokenChoice {
        let saved = self.tokens.get(&self.options.gateway.url).is_some();
        first_choice(
            self.options.pair.is_some(),
            self.options.pair_if_needed,
            saved,
        )
    }
}

/// The first token, from whether a setup code was given (`--pair`), with
/// `--pair-if-needed`, and whether a device token is saved for the gateway.
fn first_choice(pair: bool, pair_if_needed: bool, saved: bool) -> TokenChoice {
    match (pair, saved) {
        (true, true) if pair_if_needed => TokenChoice::Device,
        (true, _) => TokenChoice::Bootstrap,
        (false, true) => TokenChoice::Device,
        (false, false) => TokenChoice::Shared,
    }
}

/// Refusals that retrying cannot fix.
fn is_terminal(error: &ErrorShape) -> bool {
    error.code == "INVALID_REQUEST" && error.message.contains("connect params")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setup_code_is_presented_first_unless_pair_if_needed_finds_a_device_token() {
        assert_eq!(first_choice(true, false, true), TokenChoice::Bootstrap);
        assert_eq!(first_choice(true, true, false), TokenChoice::Bootstrap);
        assert_eq!(first_choice(true, true, true), TokenChoice::Device);
    }

    #[test]
    fn without_a_setup_code_the_saved_device_token_goes_before_the_shared_one() {
        assert_eq!(first_choice(false, false, true), TokenChoice::Device);
        assert_eq!(first_choice(false, true, true), TokenChoice::Device);
        assert_eq!(first_choice(false, false, false), TokenChoice::Shared);
    }

    fn refusal(code: &str, message: &str) -> ErrorShape {
        serde_json::from_value(serde_json::json!({"code": code, "message": message})).unwrap()
    }

    #[test]
    fn bad_connect_params_stop_the_node() {
        assert!(is_terminal(&refusal(
            "INVALID_REQUEST",
            "invalid connect params: at /client/id"
        )));
    }

    #[test]
    fn other_refusals_are_retried() {
        assert!(!is_terminal(&refusal("INVALID_REQUEST", "unknown method")));
        assert!(!is_terminal(&refusal(
            "UNAVAILABLE",
            "invalid connect params"
        )));
    }
}
