//! The gateway's checks of a Claude node's answers, ported from OpenClaw
//! 2026.9.6 (`session-catalog-parsing` `parseCatalogPage`,
//! `session-catalog-listing` `readClaudeSessionTranscript`): one bad row
//! fails a whole page there, so every page a test gets from our node goes
//! through these. Standalone (no crate internals): the unit tests include
//! this file too.

#![allow(dead_code)]

use serde_json::Value;

fn js_trim(s: &str) -> &str {
    s.trim_matches(|c: char| {
        matches!(c, '\u{9}'..='\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'..='\u{200a}'
            | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}')
    })
}

fn units(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// `normalizeBoundedOptionalString`.
fn bounded(value: &Value, max: usize) -> Option<&str> {
    let text = js_trim(value.as_str()?);
    (!text.is_empty() && units(text) <= max).then_some(text)
}

/// `isExactClaudeSessionCursor`.
pub fn exact_cursor(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| !s.is_empty() && units(s) <= 256 && js_trim(s).len() == s.len())
}

/// `parseCatalogPage`: `Err` with the gateway's words when it would refuse.
pub fn check_catalog_page(page: &Value) -> Result<(), String> {
    let invalid_page = || Err("Claude node returned an invalid session page".to_owned());
    let Some(sessions) = page.as_object().and_then(|p| p.get("sessions")?.as_array()) else {
        return invalid_page();
    };
    if sessions.len() > 100 {
        return invalid_page();
    }
    for row in sessions {
        check_row(row)
            .map_err(|why| format!("Claude node returned an invalid session ({why}): {row}"))?;
    }
    if let Some(next) = page.get("nextCursor")
        && !exact_cursor(next)
    {
        return invalid_page();
    }
    Ok(())
}

fn check_row(row: &Value) -> Result<(), String> {
    let Some(map) = row.as_object() else {
        return Err("not an object".into());
    };
    if bounded(&row["threadId"], 256).is_none() {
        return Err("threadId".into());
    }
    if row["archived"] != Value::Bool(false) {
        return Err("archived".into());
    }
    if row["status"] != "stored" {
        return Err("status".into());
    }
    if row["source"] != "claude-cli" && row["source"] != "claude-desktop" {
        return Err("source".into());
    }
    if row["modelProvider"] != "anthropic" {
        return Err("modelProvider".into());
    }
    let string = |key: &str, max: usize| -> Result<(), String> {
        match map.get(key) {
            None => Ok(()),
            Some(v) if bounded(v, max).is_some() => Ok(()),
            Some(_) => Err(key.to_owned()),
        }
    };
    if row.get("name") != Some(&Value::Null) {
        string("name", 500)?;
    }
    string("cwd", 4096)?;
    string("color", 4096)?;
    string("cliVersion", 256)?;
    string("gitBranch", 500)?;
    for key in ["createdAt", "updatedAt", "recencyAt"] {
        match map.get(key) {
            None => {}
            Some(Value::Null) if key == "recencyAt" => {}
            Some(Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => {}
            Some(_) => return Err(key.to_owned()),
        }
    }
    if let Some(pr) = map.get("pullRequest") {
        let numbers = pr["numbers"].as_array().ok_or("pullRequest")?;
        let ints: Vec<u64> = numbers
            .iter()
            .filter_map(|n| n.as_u64().filter(|n| *n > 0 && *n <= 9_007_199_254_740_991))
            .collect();
        let mut unique = ints.clone();
        unique.sort();
        unique.dedup();
        let state = pr["state"].as_str().map(|s| js_trim(s).to_lowercase());
        if ints.is_empty()
            || ints.len() != numbers.len()
            || ints.len() > 20
            || unique.len() != ints.len()
            || !matches!(
                state.as_deref(),
                Some("open" | "draft" | "merged" | "closed")
            )
        {
            return Err("pullRequest".into());
        }
    }
    Ok(())
}

/// `readClaudeSessionTranscript`'s checks of a node's page.
pub fn check_transcript_page(page: &Value, thread_id: &str) -> Result<(), String> {
    let invalid = |why: &str| {
        Err(format!(
            "Claude node returned an invalid transcript page ({why})"
        ))
    };
    let Some(items) = page.as_object().and_then(|p| p.get("items")?.as_array()) else {
        return invalid("items");
    };
    if items.len() > 50 {
        return invalid("more than 50 items");
    }
    if items
        .iter()
        .any(|i| !i.is_object() || !i["type"].is_string())
    {
        return invalid("an item without a string type");
    }
    if page["threadId"] != thread_id {
        return invalid("threadId");
    }
    if serde_json::to_string(page).unwrap().len() > 20_971_520 {
        return invalid("over 20 MiB");
    }
    if let Some(next) = page.get("nextCursor")
        && !exact_cursor(next)
    {
        return invalid("nextCursor");
    }
    Ok(())
}
