//! Local inference (cap `local-inference`): `ollama.models` and
//! `ollama.chat` against this machine's own Ollama on 127.0.0.1:11434, as
//! OpenClaw's node host answers them (its `ollama` plugin's
//! `node-inference`), so that the gateway's `node_inference` tool and
//! `openclaw nodes invoke` see the same payloads and the same error texts.
//!
//! Owns the parameters, the deadline and the answers; [`http`] is the only
//! way out, and only to loopback. Must never send anything anywhere else,
//! follow a redirect, wait past the invocation's time, or write a prompt
//! to a log (the call's summary carries the model and the prompt's length).
//!
//! OpenClaw answers its plugins' failures with `INVALID_REQUEST` and the
//! message `String(err)`: `Error: …`, or `ToolInputError: …` for a bad
//! parameter; the same here.

mod chat;
mod http;
mod js;
mod models;

use std::time::{Duration, Instant};

use serde_json::Value;

use super::ToolError;
use super::policy::{Call, Risk};

/// What one of the two commands will do: its call for the policy and
/// its work, whose time starts when the work does.
pub struct Prepared {
    pub call: Call,
    chat: Option<chat::Params>,
}

impl Prepared {
    /// `ollama.models` (its parameters are never read, as OpenClaw's are
    /// not) or `ollama.chat` (its parameters checked now).
    pub fn new(chat: bool, params_json: Option<&str>) -> Result<Self, ToolError> {
        if !chat {
            return Ok(Self {
                call: Call::plain("ollama.models", Risk::Safe, "ollama.models".into()),
                chat: None,
            });
        }
        let params = chat::Params::parse(params_json)?;
        let model: String = params.model.chars().take(200).collect();
        let summary = format!(
            "ollama.chat: {} ({} characters of prompt)",
            crate::shared::escape::line(&model),
            js::utf16_len(&params.prompt)
        );
        Ok(Self {
            call: Call::plain("ollama.chat", Risk::Safe, summary),
            chat: Some(params),
        })
    }

    /// Runs it within `left` (what is left of the invocation's `time`),
    /// and for a chat within its own `timeoutMs` too, whichever ends first.
    pub async fn run(self, left: Duration, time: Duration) -> Result<Value, ToolError> {
        match self.chat {
            None => models::list(&Deadline::new(left, time)).await,
            Some(params) => {
                let own = Duration::from_millis(params.timeout_ms);
                let deadline = if own <= left {
                    Deadline::new(own, own)
                } else {
                    Deadline::new(left, time)
                };
                chat::run(&params, &deadline).await
            }
        }
    }
}

/// When a call's time is up; every step gets what is left (and no more
/// than its own limit).
pub struct Deadline {
    at: Instant,
    /// The limit that applies, for the message that says it ran out.
    budget_ms: u128,
}

impl Deadline {
    /// In `left`, out of a limit of `limit` (the same, or the invocation's
    /// whole time of which `left` remains).
    fn new(left: Duration, limit: Duration) -> Self {
        Self {
            at: Instant::now() + left,
            budget_ms: limit.as_millis(),
        }
    }

    /// The time left, or `None` once it is up.
    fn left(&self) -> Option<Duration> {
        let left = self.at.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }
}

/// OpenClaw's `String(new Error(text))`.
fn invalid(text: &str) -> ToolError {
    ToolError::new("INVALID_REQUEST", format!("Error: {text}"))
}

/// OpenClaw's `String(new ToolInputError(text))`: a bad parameter.
fn tool_input(text: &str) -> ToolError {
    ToolError::new("INVALID_REQUEST", format!("ToolInputError: {text}"))
}

/// JSON as JavaScript's `JSON.parse(new TextDecoder().decode(bytes))`
/// reads it: a leading byte-order mark is dropped; invalid UTF-8 is no JSON.
fn parse_json(bytes: &[u8]) -> Option<Value> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    serde_json::from_slice(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_openclaws_string_of_the_error() {
        let e = invalid("Ollama is not running at http://127.0.0.1:11434");
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                "INVALID_REQUEST",
                "Error: Ollama is not running at http://127.0.0.1:11434"
            )
        );
        assert_eq!(
            tool_input("model required").message,
            "ToolInputError: model required"
        );
    }

    #[test]
    fn the_summary_names_the_model_and_the_prompts_length_never_the_prompt() {
        let p = Prepared::new(
            true,
            Some(r#"{"model":"qwen3:0.6b\u001b[2J","prompt":"my secret plan"}"#),
        )
        .unwrap();
        assert_eq!(
            p.call.summary,
            "ollama.chat: qwen3:0.6b\\u{1b}[2J (14 characters of prompt)"
        );
        assert_eq!(p.call.risk, Risk::Safe);
        let models = Prepared::new(false, Some("{not json")).unwrap();
        assert_eq!(models.call.summary, "ollama.models");
    }

    #[test]
    fn a_deadline_gives_what_is_left_and_then_nothing() {
        let d = Deadline::new(Duration::from_secs(60), Duration::from_secs(60));
        assert!(d.left().unwrap() > Duration::from_secs(59));
        assert!(
            Deadline::new(Duration::ZERO, Duration::ZERO)
                .left()
                .is_none()
        );
    }
}
