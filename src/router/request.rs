//! Validation of the tool call's arguments (seed 002 §3.1), from command-line
//! flags or from the arguments object a host LLM emits.
//!
//! A request that leaves this module is one openclaw may be started for: the
//! message is non-blank and within OpenClaw's 4 MiB `--message-file` limit.
//! The message is never trimmed or rewritten: it travels byte for byte.

use serde_json::Value;

use super::messages::{self, Lang};

/// OpenClaw's own limit for `--message-file` (4 MiB).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Longest agent id accepted; OpenClaw's ids are short slugs.
const MAX_AGENT_CHARS: usize = 128;

/// A validated tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `None` when absent, null or blank: the router picks the default route.
    pub agent: Option<String>,
    pub message: String,
}

/// Why a call was refused before anything was started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    MissingMessage,
    /// The arguments JSON did not parse.
    Json(String),
    /// The arguments JSON parsed, but is not an object.
    NotAnObject(&'static str),
    /// A field has the wrong JSON type.
    NotAString {
        field: &'static str,
        found: &'static str,
    },
    MessageTooLong(usize),
    BadAgent(&'static str),
    /// The command line itself was wrong (clap's message).
    CommandLine(String),
    /// `--args-json -` could not get the arguments from stdin.
    Stdin(StdinProblem),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdinProblem {
    IsTerminal,
    TooLarge(u64),
    NotUtf8,
    Unreadable(String),
    /// Nothing complete arrived within this many seconds.
    NoInput(String),
}

impl RequestError {
    /// The sentence that goes into `content`.
    pub fn content(&self, lang: Lang) -> String {
        use RequestError::*;
        let zh = lang == Lang::Zh;
        let detail = match self {
            MissingMessage => return messages::missing_message(lang),
            Json(e) if zh => format!("参数不是合法的 JSON（解析器原文：“{e}”）"),
            Json(e) => format!("the arguments are not valid JSON ({e})"),
            NotAnObject(kind) if zh => format!("参数必须是 JSON 对象，收到的是{}", kind_zh(kind)),
            NotAnObject(kind) => format!("the arguments must be a JSON object, got {kind}"),
            NotAString { field, found } if zh => {
                format!("字段 {field} 必须是字符串，收到的是{}", kind_zh(found))
            }
            NotAString { field, found } => format!("field {field} must be a string, got {found}"),
            MessageTooLong(n) if zh => format!(
                "message 长度为 {n} 字节，超过 OpenClaw 的上限 {MAX_MESSAGE_BYTES} 字节（4 MiB）"
            ),
            MessageTooLong(n) => format!(
                "message is {n} bytes, over OpenClaw's limit of {MAX_MESSAGE_BYTES} bytes (4 MiB)"
            ),
            BadAgent(why) if zh => format!("agent 名称无效（{}）", agent_problem_zh(why)),
            BadAgent(why) => format!("invalid agent name ({why})"),
            CommandLine(e) if zh => format!("命令行参数有误（命令行解析器原文：“{e}”）"),
            CommandLine(e) => format!("bad command line: {e}"),
            Stdin(problem) => problem.describe(lang),
        };
        messages::invalid_arguments(lang, &detail)
    }
}

impl StdinProblem {
    fn describe(&self, lang: Lang) -> String {
        use StdinProblem::*;
        match (self, lang) {
            (IsTerminal, Lang::Zh) => {
                "--args-json - 从标准输入读取参数，但标准输入是终端；请用管道传入 JSON".into()
            }
            (IsTerminal, Lang::En) => {
                "--args-json - reads stdin, but stdin is a terminal; pipe the JSON in".into()
            }
            (TooLarge(n), Lang::Zh) => format!("标准输入超过 {n} 字节"),
            (TooLarge(n), Lang::En) => format!("stdin holds more than {n} bytes"),
            (NotUtf8, Lang::Zh) => "标准输入不是 UTF-8 文本".into(),
            (NotUtf8, Lang::En) => "stdin is not UTF-8 text".into(),
            (Unreadable(e), Lang::Zh) => format!("无法读取标准输入（系统原文：“{e}”）"),
            (Unreadable(e), Lang::En) => format!("cannot read stdin ({e})"),
            (NoInput(secs), Lang::Zh) => format!("{secs} 秒内没有从标准输入读到完整的参数"),
            (NoInput(secs), Lang::En) => {
                format!("the arguments did not arrive on stdin within {secs} seconds")
            }
        }
    }
}

/// From `-m` / `-a`.
pub fn from_parts(agent: Option<String>, message: Option<String>) -> Result<Request, RequestError> {
    let message = message.ok_or(RequestError::MissingMessage)?;
    if message.trim().is_empty() {
        return Err(RequestError::MissingMessage);
    }
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(RequestError::MessageTooLong(message.len()));
    }
    let agent = match agent.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(name) => Some(check_agent(name)?.to_owned()),
    };
    Ok(Request { agent, message })
}

/// From the arguments object, e.g. `{"agent":"ops","message":"..."}`.
/// Unknown fields are ignored: hosts add their own.
pub fn from_json(text: &str) -> Result<Request, RequestError> {
    let value: Value = serde_json::from_str(text).map_err(|e| RequestError::Json(e.to_string()))?;
    let Value::Object(fields) = value else {
        return Err(RequestError::NotAnObject(kind(&value)));
    };
    let string = |field: &'static str| match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(RequestError::NotAString {
            field,
            found: kind(other),
        }),
    };
    from_parts(string("agent")?, string("message")?)
}

fn check_agent(name: &str) -> Result<&str, RequestError> {
    if name.chars().count() > MAX_AGENT_CHARS {
        return Err(RequestError::BadAgent("longer than 128 characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(RequestError::BadAgent("contains control characters"));
    }
    Ok(name)
}

/// The Chinese for [`kind`]'s words.
fn kind_zh(kind: &str) -> &'static str {
    match kind {
        "null" => " null",
        "a boolean" => "布尔值",
        "a number" => "数字",
        "a string" => "字符串",
        "an array" => "数组",
        _ => "对象",
    }
}

/// The Chinese for [`check_agent`]'s reasons.
fn agent_problem_zh(why: &str) -> &'static str {
    match why {
        "longer than 128 characters" => "超过 128 个字符",
        _ => "含有控制字符",
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(agent: Option<&str>, message: &str) -> Result<Request, RequestError> {
        Ok(Request {
            agent: agent.map(str::to_owned),
            message: message.to_owned(),
        })
    }

    #[test]
    fn message_and_agent() {
        assert_eq!(
            from_json(r#"{"agent":"ops","message":"总结日志"}"#),
            ok(Some("ops"), "总结日志")
        );
    }

    #[test]
    fn missing_null_empty_and_blank_messages_are_refused() {
        for args in [
            r#"{}"#,
            r#"{"message":null}"#,
            r#"{"message":""}"#,
            r#"{"message":" \n\t "}"#,
        ] {
            assert_eq!(from_json(args), Err(RequestError::MissingMessage), "{args}");
        }
    }

    #[test]
    fn blank_or_null_agent_counts_as_absent() {
        assert_eq!(from_json(r#"{"agent":"  ","message":"m"}"#), ok(None, "m"));
        assert_eq!(from_json(r#"{"agent":null,"message":"m"}"#), ok(None, "m"));
    }

    #[test]
    fn the_message_is_never_trimmed() {
        assert_eq!(from_json(r#"{"message":"  x \n"}"#), ok(None, "  x \n"));
    }

    #[test]
    fn wrong_types_name_the_field() {
        assert_eq!(
            from_json(r#"{"message":42}"#),
            Err(RequestError::NotAString {
                field: "message",
                found: "a number"
            })
        );
        assert_eq!(
            from_json(r#"{"message":"m","agent":["ops"]}"#),
            Err(RequestError::NotAString {
                field: "agent",
                found: "an array"
            })
        );
    }

    #[test]
    fn non_objects_and_garbage_are_refused() {
        assert_eq!(
            from_json(r#"["m"]"#),
            Err(RequestError::NotAnObject("an array"))
        );
        assert_eq!(
            from_json(r#""{\"message\":\"m\"}""#),
            Err(RequestError::NotAnObject("a string"))
        );
        assert!(matches!(from_json("{message:"), Err(RequestError::Json(_))));
        assert!(matches!(from_json(""), Err(RequestError::Json(_))));
    }

    #[test]
    fn messages_over_four_mib_are_refused() {
        let at_limit = "a".repeat(MAX_MESSAGE_BYTES);
        assert!(from_parts(None, Some(at_limit)).is_ok());
        let over = "a".repeat(MAX_MESSAGE_BYTES + 1);
        assert_eq!(
            from_parts(None, Some(over)),
            Err(RequestError::MessageTooLong(MAX_MESSAGE_BYTES + 1))
        );
    }

    #[test]
    fn agents_with_control_characters_are_refused() {
        assert_eq!(
            from_parts(Some("ops\nrm".into()), Some("m".into())),
            Err(RequestError::BadAgent("contains control characters"))
        );
    }

    #[test]
    fn error_content_is_localised() {
        assert!(
            RequestError::MissingMessage
                .content(Lang::Zh)
                .contains("没有任务描述")
        );
        assert!(
            RequestError::MissingMessage
                .content(Lang::En)
                .contains("No task description")
        );
        let e = RequestError::NotAString {
            field: "message",
            found: "a number",
        };
        assert!(
            e.content(Lang::En)
                .contains("field message must be a string")
        );
    }
}
