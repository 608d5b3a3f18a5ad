//! One queued command of seed 003 (as rainy-mate's desktop reads them):
//! `{id, intent: "skill.method", payload: {skill, method, params}, airlockLevel,
//! approvalTimeoutSecs, priority}` — what it asks of our tools, under which
//! gate, and how its outcome is reported (`{success, output, error, exitCode}`).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::shared::hex::hex;
use crate::tools::ToolError;
use crate::tools::policy::Gate;

/// The seed's filesystem methods, as our tools, with the airlock level
/// the manifest declares for each (reads 0, writes 1).
pub const METHODS: &[(&str, u8)] = &[
    ("read_file", 0),
    ("list_files", 0),
    ("search_files", 0),
    ("write_file", 1),
];

/// The refusal the seed reports for a rejected or unanswered approval.
pub const REJECTED: &str = "Rejected by Airlock/User";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    #[serde(default)]
    pub intent: String,
    #[serde(default)]
    pub payload: Payload,
    #[serde(default)]
    pub airlock_level: Value,
    #[serde(default)]
    pub approval_timeout_secs: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Payload {
    #[serde(default)]
    pub skill: Option<String>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub params: Value,
}

/// What a command asks of us, ready to run.
#[derive(Debug, PartialEq)]
pub struct Work {
    /// Our command name (`read_file`).
    pub tool: &'static str,
    pub params: Value,
    pub gate: Gate,
    /// How long a human may take to answer.
    pub approval_wait: Duration,
}

/// The longest an approval waits when the cloud says "forever" (0).
const FOREVER: Duration = Duration::from_secs(3600);

impl Command {
    /// The work, or the failure to report for it. `headless`: the user
    /// lets levels 0 and 1 run unasked (our own class still applies).
    pub fn work(&self, headless: bool) -> Result<Work, String> {
        let level = match &self.airlock_level {
            Value::Null => 0,
            Value::Number(n) => match n.as_u64() {
                Some(l @ 0..=2) => l as u8,
                _ => return Err(format!("airlockLevel must be 0, 1 or 2, not {n}")),
            },
            other => return Err(format!("airlockLevel must be 0, 1 or 2, not {other}")),
        };
        // The payload names the skill; the intent is the fallback.
        let (intent_skill, intent_method) = self.intent.split_once('.').unwrap_or(("", ""));
        let skill = self.payload.skill.as_deref().unwrap_or(intent_skill);
        let method = self.payload.method.as_deref().unwrap_or(intent_method);
        if skill != "filesystem" {
            return Err(format!("Unknown skill: {}", shown(skill)));
        }
        let Some((tool, _)) = METHODS.iter().find(|(m, _)| *m == method) else {
            return Err(format!(
                "Unknown filesystem method: {} (this node offers {})",
                shown(method),
                METHODS
                    .iter()
                    .map(|(m, _)| *m)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        let params = match &self.payload.params {
            Value::Null => json!({}),
            Value::Object(map) => {
                let mut map = map.clone();
                // rainy-mate's names are snake_case; ours camelCase.
                if let Some(v) = map.remove("search_content") {
                    map.entry("searchContent").or_insert(v);
                }
                Value::Object(map)
            }
            _ => return Err("Missing parameters: payload.params must be an object".into()),
        };
        let gate = match (level, headless) {
            (2, _) => Gate::Human,
            (_, true) => Gate::Headless,
            (1, false) => Gate::Risky,
            _ => Gate::Ours,
        };
        let approval_wait = match self.approval_timeout_secs {
            Some(0) => FOREVER,
            Some(secs) => Duration::from_secs(secs).min(FOREVER),
            None if level == 2 => Duration::from_secs(30),
            None => Duration::from_secs(10),
        };
        Ok(Work {
            tool,
            params,
            gate,
            approval_wait,
        })
    }
}

fn shown(name: &str) -> String {
    crate::shared::escape::line(&name.chars().take(100).collect::<String>()).into_owned()
}

/// The body of `…/complete` for an outcome: the output as text (a file's
/// content as is, anything else as JSON), refusals as the seed words them.
pub fn completion(tool: &str, outcome: Result<Value, ToolError>) -> Value {
    match outcome {
        Ok(value) => {
            let output = match (tool, value["content"].as_str()) {
                ("read_file", Some(text)) => text.to_owned(),
                _ => value.to_string(),
            };
            json!({"success": true, "output": output, "error": null, "exitCode": 0})
        }
        Err(e) if matches!(e.code, "USER_REJECTED" | "APPROVAL_REQUIRED") => failed(REJECTED),
        Err(e) => failed(&format!("{}: {}", e.code, e.message)),
    }
}

pub fn failed(error: &str) -> Value {
    json!({"success": false, "output": null, "error": error, "exitCode": 1})
}

/// The skills manifest the node registers (rainy-mate's shape): one skill,
/// `filesystem`, with our tools' descriptions and parameters.
pub fn manifest() -> Value {
    let methods: Vec<Value> = METHODS
        .iter()
        .filter_map(|(name, level)| {
            let entry = crate::tools::catalog::ENTRIES.iter().find(|e| e.name == *name)?;
            let schema = (entry.parameters)();
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let parameters: serde_json::Map<String, Value> = schema["properties"]
                .as_object()
                .map(|props| {
                    props
                        .iter()
                        .map(|(k, v)| {
                            let mut p = v.clone();
                            p["required"] = json!(required.contains(&k.as_str()));
                            (k.clone(), p)
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(json!({"name": name, "description": entry.description, "airlockLevel": level, "parameters": parameters}))
        })
        .collect();
    json!([{"name": "filesystem", "version": env!("CARGO_PKG_VERSION"), "methods": methods}])
}

/// `x-skills-signature`: HMAC-SHA256 (RFC 2104) of the skills' canonical
/// JSON — object keys sorted at every level, arrays in order — keyed with
/// the API key, in hex.
pub fn signature(key: &str, skills: &Value) -> String {
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key.as_bytes()));
    } else {
        k[..key.len()].copy_from_slice(key.as_bytes());
    }
    let pad = |byte: u8| k.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    // serde_json's maps keep their keys sorted (no preserve_order here).
    hex(&hmac_parts(
        &pad(0x36),
        &pad(0x5c),
        skills.to_string().as_bytes(),
    ))
}

fn hmac_parts(ipad: &[u8], opad: &[u8], data: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(data)
        .finalize();
    Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize()
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(v: Value) -> Command {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_airlock_level_can_only_be_made_stricter() {
        let at = |level: Value, headless| {
            command(json!({"id": "c", "intent": "filesystem.read_file", "payload": {"skill": "filesystem", "method": "read_file", "params": {"path": "a"}}, "airlockLevel": level}))
                .work(headless)
                .map(|w| w.gate)
        };
        assert_eq!(at(json!(0), false), Ok(Gate::Ours));
        assert_eq!(at(json!(1), false), Ok(Gate::Risky));
        assert_eq!(at(json!(1), true), Ok(Gate::Headless));
        assert_eq!(at(json!(0), true), Ok(Gate::Headless));
        assert_eq!(
            at(json!(2), true),
            Ok(Gate::Human),
            "headless never covers level 2"
        );
        assert_eq!(at(Value::Null, false), Ok(Gate::Ours));
        for bad in [json!(3), json!(-1), json!("2"), json!(1.5)] {
            assert!(at(bad.clone(), false).is_err(), "{bad}");
        }
    }

    #[test]
    fn skills_and_methods_come_from_the_payload_or_the_intent() {
        let w = command(json!({"id": "c", "intent": "filesystem.list_files"}))
            .work(false)
            .unwrap();
        assert_eq!((w.tool, w.params.clone()), ("list_files", json!({})));
        let e = command(json!({"id": "c", "intent": "shell.execute_command"}))
            .work(false)
            .unwrap_err();
        assert_eq!(e, "Unknown skill: shell");
        let e = command(
            json!({"id": "c", "payload": {"skill": "filesystem", "method": "delete_file"}}),
        )
        .work(false)
        .unwrap_err();
        assert!(
            e.starts_with("Unknown filesystem method: delete_file"),
            "{e}"
        );
        let w = command(json!({"id": "c", "payload": {"skill": "filesystem", "method": "search_files", "params": {"query": "x", "search_content": true}}})).work(false).unwrap();
        assert_eq!(w.params, json!({"query": "x", "searchContent": true}));
        let e = command(json!({"id": "c", "payload": {"skill": "filesystem", "method": "read_file", "params": "a"}})).work(false).unwrap_err();
        assert!(e.starts_with("Missing parameters"));
    }

    #[test]
    fn approval_waits_follow_the_seed() {
        let wait = |level: u8, secs: Option<u64>| {
            command(json!({"id": "c", "intent": "filesystem.write_file", "airlockLevel": level, "approvalTimeoutSecs": secs}))
                .work(false)
                .unwrap()
                .approval_wait
        };
        assert_eq!(wait(1, None), Duration::from_secs(10));
        assert_eq!(wait(2, None), Duration::from_secs(30));
        assert_eq!(wait(2, Some(5)), Duration::from_secs(5));
        assert_eq!(wait(2, Some(0)), FOREVER);
    }

    #[test]
    fn signatures_are_hmac_sha256_of_the_canonical_json() {
        // RFC 4231 test case 2.
        let mut k = [0u8; 64];
        k[..4].copy_from_slice(b"Jefe");
        let pad = |byte: u8| k.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
        assert_eq!(
            hex(&hmac_parts(
                &pad(0x36),
                &pad(0x5c),
                b"what do ya want for nothing?"
            )),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let canonical = signature("k", &json!({"b": 1, "a": [2, 1]}));
        let reordered: Value = serde_json::from_str(r#"{"a":[2,1],"b":1}"#).unwrap();
        assert_eq!(canonical, signature("k", &reordered));
        assert_ne!(canonical, signature("k", &json!({"b": 1, "a": [1, 2]})));
        assert_ne!(canonical, signature("other", &json!({"b": 1, "a": [2, 1]})));
    }

    #[test]
    fn completions_are_the_seed_shapes() {
        assert_eq!(
            completion("read_file", Ok(json!({"content": "hi", "path": "a"}))),
            json!({"success": true, "output": "hi", "error": null, "exitCode": 0})
        );
        assert_eq!(
            completion("write_file", Err(ToolError::new("USER_REJECTED", "no"))),
            json!({"success": false, "output": null, "error": "Rejected by Airlock/User", "exitCode": 1})
        );
        assert_eq!(
            completion("read_file", Err(ToolError::new("NOT_FOUND", "gone")))["error"],
            "NOT_FOUND: gone"
        );
        let m = manifest();
        assert_eq!(m[0]["methods"][0]["name"], "read_file");
        assert_eq!(m[0]["methods"][0]["parameters"]["path"]["required"], true);
        assert_eq!(m[0]["methods"][3]["airlockLevel"], 1);
    }
}
