//! `ollama.chat`: one prompt to one local model, as OpenClaw's
//! `runOllamaNodeChat` sends it — the model must be in `/api/tags`, local,
//! and say `completion` in `/api/show`; then one `/api/chat`, not
//! streamed, under one deadline for all three steps.
//!
//! The prompt goes to Ollama and nowhere else: never into a log line, an
//! error message of ours, or the call's summary (its length only).

use serde::Serialize;
use serde_json::{Map, Value};

use super::http::{self, Body, Caps, Failure};
use super::models::{self, JSON_MAX, Probed};
use super::{Deadline, invalid, js, tool_input};
use crate::tools::ToolError;

const MAX_TOKENS: f64 = 8192.0;
const DEFAULT_MAX_TOKENS: u32 = 512;
const MAX_TIMEOUT_MS: f64 = 600_000.0;
const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// In UTF-16 units, as JavaScript's `length` counts.
const MAX_PROMPT: usize = 128_000;
const MAX_SYSTEM: usize = 32_000;
/// What of an error answer is read and quoted (`MAX_ERROR_BODY_BYTES`).
const ERROR_BODY: usize = 500;

/// `ollama.chat`'s parameters, read as OpenClaw's node host reads them.
#[derive(Debug, PartialEq)]
pub struct Params {
    pub model: String,
    pub prompt: String,
    pub system: Option<String>,
    pub max_tokens: u32,
    pub timeout_ms: u64,
    pub temperature: Option<f64>,
}

impl Params {
    /// From `paramsJSON`: absent or empty is `{}`; anything but an object
    /// is refused. Checked in OpenClaw's order, with its messages.
    pub fn parse(params_json: Option<&str>) -> Result<Self, ToolError> {
        let params = match params_json.filter(|t| !t.is_empty()) {
            None => Map::new(),
            Some(text) => match super::parse_json(text.as_bytes()) {
                Some(Value::Object(map)) => map,
                Some(_) => return Err(invalid("node inference params must be a JSON object")),
                None => {
                    return Err(ToolError::new(
                        "INVALID_REQUEST",
                        "SyntaxError: paramsJSON is not valid JSON",
                    ));
                }
            },
        };
        let model = string(&params, "model")?;
        let model = js::trim(&model).to_owned();
        if model.is_empty() {
            return Err(tool_input("model required"));
        }
        let prompt = string(&params, "prompt")?;
        if prompt.is_empty() {
            return Err(tool_input("prompt required"));
        }
        let system = match raw(&params, "system") {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            _ => None,
        };
        let max_tokens = positive_integer(
            &params,
            "maxTokens",
            MAX_TOKENS,
            "maxTokens must be an integer between 1 and 8192",
        )?
        .map_or(DEFAULT_MAX_TOKENS, |n| n as u32);
        let timeout_ms = positive_integer(
            &params,
            "timeoutMs",
            MAX_TIMEOUT_MS,
            "timeoutMs must be an integer between 1 and 600000",
        )?
        .map_or(DEFAULT_TIMEOUT_MS, |n| n as u64);
        let temperature = finite_number(&params, "temperature", 0.0, 2.0)?;
        if js::utf16_len(&prompt) > MAX_PROMPT {
            return Err(invalid(&format!("prompt exceeds {MAX_PROMPT} characters")));
        }
        if system
            .as_deref()
            .is_some_and(|s| js::utf16_len(s) > MAX_SYSTEM)
        {
            return Err(invalid(&format!("system exceeds {MAX_SYSTEM} characters")));
        }
        Ok(Self {
            model,
            prompt,
            system,
            max_tokens,
            timeout_ms,
            temperature,
        })
    }
}

/// `readSnakeCaseParamRaw`: the key as given, else its snake_case
/// spelling (`maxTokens` → `max_tokens`); a key present with `null`
/// counts as present.
fn raw<'a>(params: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if let Some(v) = params.get(key) {
        return Some(v);
    }
    let mut snake = String::new();
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    params.get(&snake)
}

/// `readToolStringParam` (untrimmed here; `model` is trimmed by its
/// caller): a string, else "KEY required" when required.
fn string(params: &Map<String, Value>, key: &str) -> Result<String, ToolError> {
    match raw(params, key) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(tool_input(&format!("{key} required"))),
    }
}

/// `readNumberParam` with `strict`: a finite JSON number, or a string
/// holding one; anything else is no number.
fn number(value: Option<&Value>) -> Option<f64> {
    match value? {
        Value::Number(n) => n.as_f64().filter(|f| f.is_finite()),
        Value::String(s) => js::strict_number(s),
        _ => None,
    }
}

/// Given but neither `null` nor a blank string: a value that had to be a
/// number and was not.
fn given(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !js::trim(s).is_empty(),
        Some(_) => true,
    }
}

/// `readPositiveIntegerParam`: a safe integer in 1..=`max`, or none when
/// not given.
fn positive_integer(
    params: &Map<String, Value>,
    key: &str,
    max: f64,
    message: &str,
) -> Result<Option<f64>, ToolError> {
    let value = raw(params, key);
    let safe = |f: f64| f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_991.0 && f > 0.0;
    match number(value).filter(|f| safe(*f)) {
        Some(n) if n > max => Err(tool_input(message)),
        Some(n) => Ok(Some(n)),
        None if given(value) => Err(tool_input(message)),
        None => Ok(None),
    }
}

/// `readFiniteNumberParam` with bounds.
fn finite_number(
    params: &Map<String, Value>,
    key: &str,
    min: f64,
    max: f64,
) -> Result<Option<f64>, ToolError> {
    let value = raw(params, key);
    let message = "temperature must be between 0 and 2";
    match number(value) {
        Some(n) if n < min || n > max => Err(tool_input(message)),
        Some(n) => Ok(Some(n)),
        None if given(value) => Err(tool_input(message)),
        None => Ok(None),
    }
}

/// `/api/chat`'s body, its keys in OpenClaw's order.
#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    stream: bool,
    think: bool,
    options: Options,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct Options {
    num_predict: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<Value>,
}

/// The answer, as OpenClaw's node host writes it.
#[derive(Serialize)]
struct Answer {
    provider: &'static str,
    model: String,
    response: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timings: Option<Timings>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_tokens: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completion_tokens: Option<Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Timings {
    #[serde(skip_serializing_if = "Option::is_none")]
    load_ms: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_ms: Option<Value>,
}

/// Runs the chat within `deadline`.
pub async fn run(p: &Params, deadline: &Deadline) -> Result<Value, ToolError> {
    let timed_out = || {
        invalid(&format!(
            "Ollama node inference timed out after {}ms",
            deadline.budget_ms
        ))
    };
    deadline.left().ok_or_else(timed_out)?;
    let tags = models::tags(deadline).await;
    let local = tags
        .as_ref()
        .and_then(|t| t.iter().find(|t| t.name == p.model && !t.is_remote()));
    let probed = match local {
        Some(tag) => {
            deadline.left().ok_or_else(timed_out)?;
            Some(Probed::new(
                tag.clone(),
                models::show(&tag.name, deadline).await,
            ))
        }
        None => None,
    };
    if tags.is_none() || !probed.is_some_and(|p| p.can_complete()) {
        deadline.left().ok_or_else(timed_out)?;
        return Err(invalid(&format!(
            "Ollama model {} is not a local chat model; discover models first",
            Value::from(p.model.as_str())
        )));
    }
    let within = deadline.left().ok_or_else(timed_out)?;
    let unavailable =
        |why: &str| invalid(&format!("Ollama is unavailable at {}: {why}", http::BASE));
    let reply = match http::exchange(
        hyper::Method::POST,
        "/api/chat",
        Some(body(p)),
        within,
        Caps {
            ok: JSON_MAX,
            error: ERROR_BODY,
        },
    )
    .await
    {
        Ok(reply) => reply,
        Err(Failure::TimedOut) => return Err(timed_out()),
        Err(Failure::Transport(why)) => return Err(unavailable(&why)),
    };
    const LABEL: &str = "ollama-node-inference/api/chat";
    let bytes = match reply.body {
        Body::Whole(bytes) if (200..300).contains(&reply.status) => bytes,
        Body::TooLarge => {
            return Err(invalid(&format!(
                "{LABEL}: JSON response exceeds {JSON_MAX} bytes"
            )));
        }
        Body::Stalled => {
            return Err(invalid(&format!(
                "{LABEL}: response body stalled for {}ms",
                http::STALL.as_millis()
            )));
        }
        Body::Broken(why) => return Err(unavailable(&why)),
        Body::Whole(bytes) | Body::Prefix(bytes) => {
            return Err(invalid(&failed(reply.status, &bytes)));
        }
    };
    let data = super::parse_json(&bytes)
        .ok_or_else(|| invalid(&format!("{LABEL}: malformed JSON response")))?;
    answer(p, &data)
}

/// The body OpenClaw sends, byte for byte.
fn body(p: &Params) -> String {
    let mut messages = Vec::new();
    if let Some(system) = &p.system {
        messages.push(Message {
            role: "system",
            content: system,
        });
    }
    messages.push(Message {
        role: "user",
        content: &p.prompt,
    });
    serde_json::to_string(&Request {
        model: &p.model,
        messages,
        stream: false,
        think: false,
        options: Options {
            num_predict: p.max_tokens,
            temperature: p.temperature.map(js::number),
        },
    })
    .unwrap_or_default()
}

/// "Ollama /api/chat failed (HTTP s): what it said" — its `error` when
/// the first 500 bytes are a JSON object saying one, else those bytes.
fn failed(status: u16, prefix: &[u8]) -> String {
    let text = String::from_utf8_lossy(prefix);
    let body = js::trim(&text);
    let detail = match super::parse_json(body.as_bytes()) {
        Some(Value::Object(o)) => match o.get("error") {
            Some(Value::String(e)) => e.clone(),
            _ => body.to_owned(),
        },
        _ => body.to_owned(),
    };
    if detail.is_empty() {
        format!("Ollama /api/chat failed (HTTP {status})")
    } else {
        format!("Ollama /api/chat failed (HTTP {status}): {detail}")
    }
}

fn answer(p: &Params, data: &Value) -> Result<Value, ToolError> {
    let Some(response) = data["message"]["content"].as_str() else {
        return Err(invalid(
            "Ollama /api/chat response did not contain message.content",
        ));
    };
    if data["done_reason"] == "length" {
        return Err(invalid(&format!(
            "Ollama stopped after reaching maxTokens ({}); retry with a larger maxTokens value",
            p.max_tokens
        )));
    }
    let finite = |key: &str| data[key].as_f64().filter(|f| f.is_finite()).map(js::number);
    let ms = |key: &str| {
        data[key]
            .as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .map(|ns| js::number((ns / 1e6 * 100.0).round() / 100.0))
    };
    let (prompt_tokens, completion_tokens) = (finite("prompt_eval_count"), finite("eval_count"));
    let (load_ms, total_ms) = (ms("load_duration"), ms("total_duration"));
    let model = match data["model"].as_str() {
        Some(m) if !js::trim(m).is_empty() => m.to_owned(),
        _ => p.model.clone(),
    };
    serde_json::to_value(Answer {
        provider: "ollama",
        model,
        response: response.to_owned(),
        usage: (prompt_tokens.is_some() || completion_tokens.is_some()).then_some(Usage {
            prompt_tokens,
            completion_tokens,
        }),
        timings: (load_ms.is_some() || total_ms.is_some()).then_some(Timings { load_ms, total_ms }),
    })
    .map_err(|e| ToolError::new("INTERNAL", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Params, String> {
        Params::parse(Some(&v.to_string())).map_err(|e| e.message)
    }

    #[test]
    fn defaults_and_openclaws_order_of_checks() {
        let p = parse(json!({"model": " m ", "prompt": "  "})).unwrap();
        assert_eq!(
            p,
            Params {
                model: "m".into(),
                prompt: "  ".into(),
                system: None,
                max_tokens: 512,
                timeout_ms: 120_000,
                temperature: None
            }
        );
        assert_eq!(
            parse(json!({"prompt": "x"})).unwrap_err(),
            "ToolInputError: model required"
        );
        assert_eq!(
            parse(json!({"model": " ", "prompt": "x"})).unwrap_err(),
            "ToolInputError: model required"
        );
        assert_eq!(
            parse(json!({"model": "m", "prompt": ""})).unwrap_err(),
            "ToolInputError: prompt required"
        );
        assert_eq!(
            parse(json!({"model": "m", "prompt": 5})).unwrap_err(),
            "ToolInputError: prompt required"
        );
        assert_eq!(
            Params::parse(Some("[1]")).unwrap_err().message,
            "Error: node inference params must be a JSON object"
        );
        assert_eq!(
            Params::parse(Some("null")).unwrap_err().message,
            "Error: node inference params must be a JSON object"
        );
        assert_eq!(
            Params::parse(None).unwrap_err().message,
            "ToolInputError: model required"
        );
    }

    #[test]
    fn numbers_may_be_strings_and_snake_case() {
        let p = parse(json!({"model": "m", "prompt": "x", "maxTokens": "64", "timeout_ms": 5000, "temperature": "0.5"})).unwrap();
        assert_eq!(
            (p.max_tokens, p.timeout_ms, p.temperature),
            (64, 5000, Some(0.5))
        );
        let p = parse(json!({"model": "m", "prompt": "x", "max_tokens": 7, "maxTokens": null}))
            .unwrap();
        assert_eq!(p.max_tokens, 512, "a present null hides the snake_case key");
        let p = parse(json!({"model": "m", "prompt": "x", "maxTokens": "  ", "temperature": ""}))
            .unwrap();
        assert_eq!((p.max_tokens, p.temperature), (512, None));
        for bad in [
            json!(0),
            json!(1.5),
            json!(true),
            json!("0x10"),
            json!(8193),
            json!(-1),
            json!([]),
            json!("abc"),
        ] {
            assert_eq!(
                parse(json!({"model": "m", "prompt": "x", "maxTokens": bad})).unwrap_err(),
                "ToolInputError: maxTokens must be an integer between 1 and 8192",
                "{bad}"
            );
        }
        assert_eq!(
            parse(json!({"model": "m", "prompt": "x", "timeoutMs": 600_001})).unwrap_err(),
            "ToolInputError: timeoutMs must be an integer between 1 and 600000"
        );
        for bad in [json!(-0.1), json!(2.01), json!("hot"), json!(false)] {
            assert_eq!(
                parse(json!({"model": "m", "prompt": "x", "temperature": bad})).unwrap_err(),
                "ToolInputError: temperature must be between 0 and 2"
            );
        }
    }

    #[test]
    fn lengths_are_utf16_units_checked_after_the_numbers() {
        let at_limit = "😀".repeat(64_000);
        assert!(parse(json!({"model": "m", "prompt": at_limit})).is_ok());
        let over = format!("{at_limit}a");
        assert_eq!(
            parse(json!({"model": "m", "prompt": over})).unwrap_err(),
            "Error: prompt exceeds 128000 characters"
        );
        assert_eq!(
            parse(json!({"model": "m", "prompt": over, "maxTokens": 0})).unwrap_err(),
            "ToolInputError: maxTokens must be an integer between 1 and 8192"
        );
        assert_eq!(
            parse(json!({"model": "m", "prompt": "x", "system": "s".repeat(32_001)})).unwrap_err(),
            "Error: system exceeds 32000 characters"
        );
    }

    #[test]
    fn the_body_is_openclaws_byte_for_byte() {
        let p = parse(json!({"model": "m", "prompt": "hi\u{1b}", "system": "be brief", "temperature": 1, "maxTokens": 32})).unwrap();
        assert_eq!(
            body(&p),
            r#"{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi\u001b"}],"stream":false,"think":false,"options":{"num_predict":32,"temperature":1}}"#
        );
    }

    #[test]
    fn answers_keep_only_what_ollama_said() {
        let p = parse(json!({"model": "m", "prompt": "x"})).unwrap();
        let full = answer(&p, &json!({"model": "m:latest", "message": {"content": "pong"}, "prompt_eval_count": 3, "eval_count": 1.0, "load_duration": 1_500_000, "total_duration": 25_000_000})).unwrap();
        assert_eq!(
            full.to_string(),
            r#"{"model":"m:latest","provider":"ollama","response":"pong","timings":{"loadMs":1.5,"totalMs":25},"usage":{"completionTokens":1,"promptTokens":3}}"#
        );
        let bare = answer(
            &p,
            &json!({"model": " ", "message": {"content": ""}, "total_duration": -1}),
        )
        .unwrap();
        assert_eq!(
            bare,
            json!({"provider": "ollama", "model": "m", "response": ""})
        );
        assert_eq!(
            answer(
                &p,
                &json!({"message": {"content": "x"}, "done_reason": "length"})
            )
            .unwrap_err()
            .message,
            "Error: Ollama stopped after reaching maxTokens (512); retry with a larger maxTokens value"
        );
        assert_eq!(
            answer(&p, &json!({"message": {}})).unwrap_err().message,
            "Error: Ollama /api/chat response did not contain message.content"
        );
    }

    #[test]
    fn error_answers_quote_ollamas_error_or_its_first_500_bytes() {
        assert_eq!(
            failed(404, br#"{"error":"model 'x' not found"}"#),
            "Ollama /api/chat failed (HTTP 404): model 'x' not found"
        );
        assert_eq!(failed(500, b"  \n"), "Ollama /api/chat failed (HTTP 500)");
        assert_eq!(
            failed(502, b" bad gateway "),
            "Ollama /api/chat failed (HTTP 502): bad gateway"
        );
        assert_eq!(
            failed(500, br#"{"error":5}"#),
            r#"Ollama /api/chat failed (HTTP 500): {"error":5}"#
        );
    }
}
