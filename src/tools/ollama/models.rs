//! `ollama.models`: the chat models installed here, as OpenClaw's
//! `discoverOllamaNodeModels` lists them — `/api/tags`, `/api/ps` for what
//! is loaded, then `/api/show` on each model (8 at a time, at most 800
//! probes, until 200 are kept) for its capabilities and context window.
//!
//! Names are only echoed: never a path, never a command.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::time::Duration;

use futures_util::future::join_all;
use serde::Serialize;
use serde_json::Value;

use super::http::{self, Body, Caps, Failure};
use super::{Deadline, invalid, js};
use crate::tools::ToolError;

/// `OLLAMA_TAGS_TIMEOUT_MS`, for `/api/tags` and `/api/ps`.
pub const LIST_WITHIN: Duration = Duration::from_secs(5);
/// `OLLAMA_SHOW_TIMEOUT_MS`.
pub const SHOW_WITHIN: Duration = Duration::from_secs(3);
const SHOW_AT_ONCE: usize = 8;
const MAX_PROBES: usize = 800;
const MAX_KEPT: usize = 200;

/// OpenClaw's cap on a provider's JSON answer (`PROVIDER_RESPONSE_MAX_BYTES`).
pub const JSON_MAX: usize = 16 << 20;
/// Ours on one `/api/show` answer, lower than OpenClaw's 16 MiB because
/// eight are read at once (Ollama's run to kilobytes without `verbose`).
const SHOW_MAX: usize = 4 << 20;

/// One model as `ollama.models` lists it (field order is OpenClaw's).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    name: String,
    loaded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    modified_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    family: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameter_size: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quantization: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_window: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    capabilities: Option<Value>,
}

#[derive(Debug, Serialize)]
struct Listing {
    provider: &'static str,
    models: Vec<Row>,
}

/// A `/api/tags` row: its JSON object (rows that are not objects, or
/// have no non-empty string `name`, are dropped on reading).
#[derive(Debug, Clone)]
pub struct Tag {
    pub name: String,
    row: serde_json::Map<String, Value>,
}

impl Tag {
    fn field(&self, key: &str) -> Option<&Value> {
        self.row.get(key).filter(|v| !v.is_null())
    }

    fn detail(&self, key: &str) -> Option<&Value> {
        self.field("details")
            .and_then(Value::as_object)
            .and_then(|d| d.get(key))
            .filter(|v| !v.is_null())
    }

    /// `isOllamaRemoteModel`: a remote host or model named, or a cloud
    /// ref (`…:cloud`, `…-cloud`).
    pub fn is_remote(&self) -> bool {
        let named = |key: &str| match self.field(key) {
            None => false,
            Some(Value::String(s)) => !js::trim(s).is_empty(),
            // Not a string: OpenClaw would throw on `.trim()`; never local.
            Some(_) => true,
        };
        named("remote_host") || named("remote_model") || is_cloud_ref(&self.name)
    }
}

/// What `/api/show` told of a model; `None` fields when it said nothing
/// (or failed).
#[derive(Debug, Default)]
pub struct Shown {
    context_window: Option<f64>,
    capabilities: Option<Vec<String>>,
}

/// A model with what its probe found, merged as `mergeOllamaModelShowInfo`
/// does: the probe's word first, else the tags row's.
#[derive(Debug)]
pub struct Probed {
    pub tag: Tag,
    context_window: Option<Value>,
    capabilities: Option<Value>,
}

impl Probed {
    pub fn new(tag: Tag, shown: Shown) -> Self {
        let context_window = shown
            .context_window
            .map(js::number)
            .or_else(|| tag.field("contextWindow").cloned())
            .or_else(|| tag.detail("context_length").cloned());
        let capabilities = shown
            .capabilities
            .map(Value::from)
            .or_else(|| tag.field("capabilities").cloned());
        Self {
            tag,
            context_window,
            capabilities,
        }
    }

    /// `capabilities?.includes("completion")`, for an array or a string
    /// (anything else, OpenClaw throws on: not a chat model).
    pub fn can_complete(&self) -> bool {
        match &self.capabilities {
            Some(Value::Array(items)) => items.iter().any(|c| c == "completion"),
            Some(Value::String(s)) => s.contains("completion"),
            _ => false,
        }
    }
}

/// `ollama.models`.
pub async fn list(deadline: &Deadline) -> Result<Value, ToolError> {
    let tags = tags(deadline)
        .await
        .ok_or_else(|| invalid(&format!("Ollama is not running at {}", http::BASE)))?;
    let local: Vec<Tag> = tags.into_iter().filter(|t| !t.is_remote()).collect();
    let loaded = loaded(deadline).await;
    // Loaded first (a stable sort): they are probed first.
    let mut ordered = local;
    ordered.sort_by_key(|t| !loaded.contains(&t.name));
    let limit = ordered.len().min(MAX_PROBES);
    let mut kept: Vec<Probed> = Vec::new();
    let mut start = 0;
    while start < limit && kept.len() < MAX_KEPT {
        if deadline.left().is_none() {
            return Err(invalid(&format!(
                "Ollama model discovery timed out after {}ms",
                deadline.budget_ms
            )));
        }
        let batch = &ordered[start..(start + SHOW_AT_ONCE).min(limit)];
        let shown = join_all(batch.iter().map(|t| show(&t.name, deadline))).await;
        for (tag, shown) in batch.iter().zip(shown) {
            let probed = Probed::new(tag.clone(), shown);
            if probed.can_complete() {
                kept.push(probed);
                if kept.len() == MAX_KEPT {
                    break;
                }
            }
        }
        start += SHOW_AT_ONCE;
    }
    let mut rows: Vec<Row> = kept.into_iter().map(|p| row(p, &loaded)).collect();
    rows.sort_by(by_openclaws_order);
    serde_json::to_value(Listing {
        provider: "ollama",
        models: rows,
    })
    .map_err(|e| ToolError::new("INTERNAL", e.to_string()))
}

fn row(p: Probed, loaded: &HashSet<String>) -> Row {
    let tag = &p.tag;
    let truthy = |v: Option<&Value>| v.filter(|v| js::truthy(v)).map(js::renumber);
    Row {
        name: tag.name.clone(),
        loaded: loaded.contains(&tag.name),
        size: tag
            .field("size")
            .filter(|v| v.is_number())
            .map(js::renumber),
        modified_at: tag
            .field("modified_at")
            .and_then(Value::as_str)
            .map(str::to_owned),
        family: truthy(tag.detail("family")),
        parameter_size: truthy(tag.detail("parameter_size")),
        quantization: truthy(tag.detail("quantization_level")),
        context_window: p
            .context_window
            .filter(Value::is_number)
            .map(|v| js::renumber(&v)),
        capabilities: p.capabilities.filter(js::truthy).map(|c| js::renumber(&c)),
    }
}

/// Loaded first, then smaller first (no size: last), then by name as
/// `localeCompare` orders it.
fn by_openclaws_order(a: &Row, b: &Row) -> Ordering {
    const UNKNOWN: f64 = 9_007_199_254_740_991.0;
    let size = |r: &Row| r.size.as_ref().and_then(Value::as_f64).unwrap_or(UNKNOWN);
    b.loaded
        .cmp(&a.loaded)
        .then_with(|| size(a).partial_cmp(&size(b)).unwrap_or(Ordering::Equal))
        .then_with(|| js::locale_compare(&a.name, &b.name))
}

/// `/api/tags`' rows with a name, or `None` when Ollama did not answer
/// with JSON (OpenClaw's "not reachable"). An error status is an answer
/// with no models.
pub async fn tags(deadline: &Deadline) -> Option<Vec<Tag>> {
    let models = list_rows("/api/tags", deadline).await?;
    Some(
        models
            .into_iter()
            .filter_map(|row| match row {
                Value::Object(row) => match row.get("name") {
                    Some(Value::String(name)) if !name.is_empty() => Some(Tag {
                        name: name.clone(),
                        row,
                    }),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
    )
}

/// The names `/api/ps` says are loaded: `name`, else `model`, trimmed.
/// Any failure: none.
async fn loaded(deadline: &Deadline) -> HashSet<String> {
    let rows = list_rows("/api/ps", deadline).await.unwrap_or_default();
    rows.iter()
        .filter_map(|r| match (r.get("name"), r.get("model")) {
            (Some(Value::String(name)), _) => Some(js::trim(name).to_owned()),
            (_, Some(Value::String(model))) => Some(js::trim(model).to_owned()),
            _ => None,
        })
        .filter(|n| !n.is_empty())
        .collect()
}

/// The `models` array of a list endpoint (none when it is not an array).
async fn list_rows(path: &str, deadline: &Deadline) -> Option<Vec<Value>> {
    let within = deadline.left()?.min(LIST_WITHIN);
    let caps = Caps {
        ok: JSON_MAX,
        error: 0,
    };
    let reply = http::exchange(hyper::Method::GET, path, None, within, caps)
        .await
        .ok()?;
    if !(200..300).contains(&reply.status) {
        return Some(Vec::new());
    }
    let Body::Whole(bytes) = reply.body else {
        return None;
    };
    match super::parse_json(&bytes)? {
        // `null.models` throws in OpenClaw: not reachable.
        Value::Null => None,
        Value::Object(mut body) => match body.remove("models") {
            Some(Value::Array(models)) => Some(models),
            _ => Some(Vec::new()),
        },
        _ => Some(Vec::new()),
    }
}

/// `/api/show` on one model: its context window and capabilities, or
/// nothing when it failed (any failure: the probe found nothing).
pub async fn show(name: &str, deadline: &Deadline) -> Shown {
    let Some(within) = deadline.left().map(|l| l.min(SHOW_WITHIN)) else {
        return Shown::default();
    };
    let body = serde_json::json!({ "model": name }).to_string();
    let caps = Caps {
        ok: SHOW_MAX,
        error: 0,
    };
    let reply =
        match http::exchange(hyper::Method::POST, "/api/show", Some(body), within, caps).await {
            Ok(reply) if (200..300).contains(&reply.status) => reply,
            Ok(_) | Err(Failure::Transport(_) | Failure::TimedOut) => return Shown::default(),
        };
    let Body::Whole(bytes) = reply.body else {
        return Shown::default();
    };
    read_show(&bytes).unwrap_or_default()
}

/// The parts of a `/api/show` answer OpenClaw reads.
fn read_show(bytes: &[u8]) -> Option<Shown> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let answer: ShowAnswer = serde_json::from_slice(bytes).ok()?;
    // The first `….context_length` in the answer's own key order (a Map
    // here would sort the keys).
    let mut context_window = answer.model_info.and_then(|info| {
        info.0.into_iter().find_map(|(key, value)| {
            let n = value
                .as_f64()
                .filter(|_| key.ends_with(".context_length"))?;
            let n = n.floor();
            (n > 0.0).then_some(n)
        })
    });
    if let Some(Value::String(parameters)) = &answer.parameters
        && let Some(num_ctx) = last_num_ctx(parameters)
        && context_window.is_none_or(|c| num_ctx > c)
    {
        context_window = Some(num_ctx);
    }
    let capabilities = match answer.capabilities {
        Some(Value::Array(items)) => Some(
            items
                .into_iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect(),
        ),
        _ => None,
    };
    Some(Shown {
        context_window,
        capabilities,
    })
}

/// `parseOllamaNumCtxParameter`: the last `num_ctx N` line with N > 0.
fn last_num_ctx(parameters: &str) -> Option<f64> {
    parameters
        .split('\n')
        .filter_map(|line| {
            let line = js::trim(line.strip_suffix('\r').unwrap_or(line));
            let rest = line.strip_prefix("num_ctx")?;
            let digits = js::trim(rest);
            // `\s+` then `-?\d+` then a word boundary.
            if digits.len() == rest.len() {
                return None;
            }
            let (sign, unsigned) = match digits.strip_prefix('-') {
                Some(u) => (-1.0, u),
                None => (1.0, digits),
            };
            let end = unsigned
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(unsigned.len());
            if end == 0 {
                return None;
            }
            let next = unsigned[end..].chars().next();
            if next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                return None;
            }
            let n: f64 = unsigned[..end].parse().ok()?;
            Some(sign * n).filter(|n| n.is_finite() && *n > 0.0)
        })
        .next_back()
}

#[derive(serde::Deserialize)]
struct ShowAnswer {
    #[serde(default)]
    model_info: Option<Ordered>,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    capabilities: Option<Value>,
}

/// A JSON object's entries in the order written (a repeated key keeps its
/// first place and its last value, as in JavaScript); anything but an
/// object reads as none.
struct Ordered(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Ordered, A::Error> {
                let mut entries: Vec<(String, Value)> = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Value>()? {
                    match entries.iter_mut().find(|(key, _)| *key == k) {
                        Some(entry) => entry.1 = v,
                        None => entries.push((k, v)),
                    }
                }
                Ok(Ordered(entries))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Ordered, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Ordered(Vec::new()))
            }
            fn visit_str<E>(self, _: &str) -> Result<Ordered, E> {
                Ok(Ordered(Vec::new()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Ordered, E> {
                Ok(Ordered(Vec::new()))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Ordered, E> {
                Ok(Ordered(Vec::new()))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Ordered, E> {
                Ok(Ordered(Vec::new()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Ordered, E> {
                Ok(Ordered(Vec::new()))
            }
            fn visit_unit<E>(self) -> Result<Ordered, E> {
                Ok(Ordered(Vec::new()))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// `isCloudModelRef`: a `:cloud` (or `…-cloud`) source suffix on a ref
/// whose base carries no source suffix of its own.
fn is_cloud_ref(name: &str) -> bool {
    let normalized = js::trim(name).to_lowercase();
    if normalized.is_empty() {
        return false;
    }
    matches!(source_suffix(&normalized), Some((base, "cloud")) if source_suffix(base).is_none())
}

fn source_suffix(r: &str) -> Option<(&str, &'static str)> {
    let sep = r.rfind(':')?;
    let source = &r[sep + 1..];
    match source {
        "cloud" => Some((&r[..sep], "cloud")),
        "local" => Some((&r[..sep], "local")),
        s if !s.contains('/') && s.ends_with("-cloud") => Some((&r[..r.len() - 6], "cloud")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tag(row: Value) -> Tag {
        let row = row.as_object().unwrap().clone();
        Tag {
            name: row["name"].as_str().unwrap().to_owned(),
            row,
        }
    }

    #[test]
    fn cloud_refs_are_openclaws() {
        for (name, cloud) in [
            ("kimi:cloud", true),
            ("KIMI:Cloud ", true),
            ("gpt-oss:120b-cloud", true),
            ("x:cloud:cloud", false),
            ("a:local:cloud", false),
            ("foo-cloud", false),
            ("llama3:8b", false),
            ("a:b/c-cloud", false),
        ] {
            assert_eq!(is_cloud_ref(name), cloud, "{name}");
        }
    }

    #[test]
    fn remote_rows_are_named_hosts_models_or_cloud_refs() {
        assert!(tag(json!({"name": "a", "remote_host": "https://ollama.com"})).is_remote());
        assert!(!tag(json!({"name": "a", "remote_host": "  "})).is_remote());
        assert!(tag(json!({"name": "a", "remote_model": "x"})).is_remote());
        assert!(!tag(json!({"name": "a", "remote_model": null})).is_remote());
        assert!(tag(json!({"name": "a:cloud"})).is_remote());
    }

    #[test]
    fn the_context_window_is_the_first_context_length_or_a_larger_num_ctx() {
        let shown = read_show(
            br#"{"model_info":{"z.context_length":4096,"a.context_length":2048},"parameters":"num_ctx 1024\nstop x","capabilities":["completion",5]}"#,
        )
        .unwrap();
        assert_eq!(shown.context_window, Some(4096.0));
        assert_eq!(shown.capabilities.unwrap(), ["completion"]);
        let larger = read_show(
            br#"{"model_info":{"llama.context_length":8192.7},"parameters":"num_ctx 16384\r\n  num_ctx 32768 \nnum_ctx -5\nnum_ctx 9x"}"#,
        )
        .unwrap();
        assert_eq!(larger.context_window, Some(32768.0));
        assert!(larger.capabilities.is_none());
        let only_params = read_show(br#"{"model_info":[],"parameters":"num_ctx\t77"}"#).unwrap();
        assert_eq!(only_params.context_window, Some(77.0));
        assert!(read_show(b"not json").is_none());
    }

    #[test]
    fn a_failed_probe_falls_back_to_the_tags_row() {
        let t = tag(
            json!({"name": "m", "details": {"context_length": 999}, "capabilities": ["completion"]}),
        );
        let p = Probed::new(t, Shown::default());
        assert!(p.can_complete());
        assert_eq!(p.context_window, Some(json!(999)));
        let none = Probed::new(tag(json!({"name": "m"})), Shown::default());
        assert!(!none.can_complete());
    }

    #[test]
    fn rows_sort_loaded_then_size_then_name() {
        let r = |name: &str, loaded: bool, size: Option<u64>| Row {
            name: name.into(),
            loaded,
            size: size.map(Value::from),
            modified_at: None,
            family: None,
            parameter_size: None,
            quantization: None,
            context_window: None,
            capabilities: None,
        };
        let mut rows = [
            r("nosize", false, None),
            r("b", false, Some(5)),
            r("llama3.1:8b", false, Some(5)),
            r("llama3:8b", false, Some(5)),
            r("big", true, Some(100)),
        ];
        rows.sort_by(by_openclaws_order);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["big", "b", "llama3:8b", "llama3.1:8b", "nosize"]);
    }
}
