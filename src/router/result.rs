//! The one JSON object the tool prints (seed 002 §3.4), and the exit status
//! that goes with it when `--exit-code` asks for one.

use serde::Serialize;

/// `{"content": ..., "directTTS": false, "interruptMode": 2}`, plus `meta`
/// when asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolResult {
    pub content: String,
    /// The host must not read `content` aloud as is: the LLM digests it first.
    #[serde(rename = "directTTS")]
    pub direct_tts: bool,
    /// The host's interrupt mode for this tool (2, as the seed fixes it).
    #[serde(rename = "interruptMode")]
    pub interrupt_mode: u8,
    /// `--format structured`: status, run id, payloads, tool calls, usage...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ToolResult {
    pub fn new(content: String) -> Self {
        Self {
            content,
            direct_tts: false,
            interrupt_mode: 2,
            details: None,
            meta: None,
        }
    }
}

/// How the run went, for hosts and scripts that want more than text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// openclaw's exit code; null when it did not exit on its own.
    pub exit_code: Option<i32>,
    /// The signal that ended openclaw, if one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// The middle of the output was dropped (see `--max-output`).
    pub truncated: bool,
    pub duration_ms: u64,
    /// How OpenClaw was reached: `cli` or `gateway`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<&'static str>,
    /// The gateway's run id (`--via gateway`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// The outcome class, which fixes the exit status under `--exit-code`
/// (the conventions of `timeout(1)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Success,
    /// openclaw exited with this non-zero code.
    Failed(i32),
    /// openclaw was killed by a signal we did not send.
    Signalled(i32),
    TimedOut,
    /// The router was interrupted by this signal.
    Interrupted(i32),
    CouldNotStart,
    InvalidInput,
}

impl Status {
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Success => 0,
            Status::Failed(code) => u8::try_from(code).ok().filter(|c| *c != 0).unwrap_or(1),
            Status::Signalled(sig) | Status::Interrupted(sig) => {
                u8::try_from(128 + sig).unwrap_or(255)
            }
            Status::TimedOut => 124,
            Status::CouldNotStart => 127,
            Status::InvalidInput => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_exactly_the_seed_shape() {
        let json = serde_json::to_string(&ToolResult::new("hi \"there\"\n".into())).unwrap();
        assert_eq!(
            json,
            r#"{"content":"hi \"there\"\n","directTTS":false,"interruptMode":2}"#
        );
    }

    #[test]
    fn meta_uses_camel_case() {
        let mut r = ToolResult::new(String::new());
        r.meta = Some(Meta {
            exit_code: Some(1),
            signal: None,
            timed_out: false,
            truncated: true,
            duration_ms: 7,
            via: None,
            run_id: None,
        });
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"content":"","directTTS":false,"interruptMode":2,"meta":{"exitCode":1,"signal":null,"timedOut":false,"truncated":true,"durationMs":7}}"#
        );
    }

    #[test]
    fn exit_codes_follow_timeout_1() {
        assert_eq!(Status::Success.exit_code(), 0);
        assert_eq!(Status::Failed(3).exit_code(), 3);
        assert_eq!(Status::Failed(256).exit_code(), 1);
        assert_eq!(Status::Signalled(9).exit_code(), 137);
        assert_eq!(Status::TimedOut.exit_code(), 124);
        assert_eq!(Status::Interrupted(2).exit_code(), 130);
        assert_eq!(Status::CouldNotStart.exit_code(), 127);
        assert_eq!(Status::InvalidInput.exit_code(), 2);
    }
}
