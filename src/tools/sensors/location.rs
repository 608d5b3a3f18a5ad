//! `location.get` through GeoClue's `where-am-i`, as OpenClaw's Linux node
//! host runs it: `where-am-i -t <s> -a <level>` in the C locale, stopped as
//! soon as a fix with its timestamp has been printed (the demo otherwise
//! keeps watching for the whole timeout), the newest usable fix parsed from
//! its text.
//!
//! Must never: wait past the caller's time, keep more than 64 KiB of what
//! the program prints, or answer a fix outside the globe.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use super::{Job, ToolError, failure, finite, tool_error};
use crate::runner::{End, Tap};

/// Where Debian and Fedora put the GeoClue demo when it is not on PATH.
pub const DEMO_PATHS: [&str; 2] = [
    "/usr/libexec/geoclue-2.0/demos/where-am-i",
    "/usr/lib/geoclue-2.0/demos/where-am-i",
];
/// What is kept of what the program prints.
const KEPT: usize = 64 * 1024;
/// GeoClue stamps fixes to the second.
const TIMESTAMP_RESOLUTION_MS: f64 = 1000.0;

/// The demo, wherever this machine has it.
pub fn program() -> Option<std::path::PathBuf> {
    super::find("where-am-i", &DEMO_PATHS)
}

/// What an agent asked, as OpenClaw reads it.
struct Ask {
    timeout_ms: u64,
    max_age_ms: Option<f64>,
    accuracy: u8,
}

impl Ask {
    fn read(params: &Value) -> Self {
        let timeout = finite(params, "timeoutMs").unwrap_or(10_000.0).floor();
        Ask {
            timeout_ms: timeout.clamp(1000.0, 60_000.0) as u64,
            max_age_ms: finite(params, "maxAgeMs").filter(|m| *m >= 0.0),
            accuracy: match params.get("desiredAccuracy").and_then(Value::as_str) {
                Some("coarse") => 4,
                Some("precise") => 8,
                _ => 6,
            },
        }
    }
}

/// Runs `location.get` within `budget`.
pub async fn get(params: Value, budget: Duration) -> Result<Value, ToolError> {
    let Some(program) = program() else {
        return Err(failure("LOCATION_UNAVAILABLE: where-am-i not found"));
    };
    let ask = Ask::read(&params);
    let args = vec![
        "-t".into(),
        ask.timeout_ms.div_ceil(1000).to_string().into(),
        "-a".into(),
        ask.accuracy.to_string().into(),
    ];
    let timeout = Duration::from_millis(ask.timeout_ms + 3000).min(budget);
    // The early stop: watch the output as it comes and end the run at the
    // first usable fix (or at GeoClue's refusal).
    let (tap, mut tapped) = Tap::channel(64);
    let stop = Arc::new(Notify::new());
    let job = Job {
        env: &[("LC_ALL", "C"), ("LANG", "C")],
        tap: Some(tap),
        keep: KEPT,
        ..Job::new("LOCATION_UNAVAILABLE", &program, args, timeout)
    };
    let run = job.run({
        let stop = Arc::clone(&stop);
        async move { stop.notified().await }
    });
    let max_age = ask.max_age_ms;
    let watch = async {
        let mut seen = Vec::new();
        let mut stamps = 0;
        while let Some(chunk) = tapped.recv().await {
            seen.extend_from_slice(&chunk);
            if seen.len() > KEPT {
                seen.drain(..seen.len() - KEPT);
            }
            let text = String::from_utf8_lossy(&seen);
            if disabled(&text) {
                stop.notify_one();
                continue;
            }
            let now = stamps_in(&text);
            if now != stamps {
                stamps = now;
                if matches!(parse(&text, now_ms(), max_age), Ok(Some(_))) {
                    stop.notify_one();
                }
            }
        }
        seen
    };
    let (outcome, streamed) = tokio::join!(run, watch);
    let outcome = outcome?;
    let streamed = String::from_utf8_lossy(&streamed);
    let stdout = format!("{}{}", outcome.output.head, outcome.output.tail);
    let stderr = outcome
        .stderr
        .as_ref()
        .map(|c| format!("{}{}", c.head, c.tail))
        .unwrap_or_default();
    if disabled(&format!("{stdout}\n{stderr}\n{streamed}")) {
        return Err(failure(
            "LOCATION_DISABLED: GeoClue location services are disabled",
        ));
    }
    match parse(&format!("{stdout}\n{streamed}"), now_ms(), max_age)? {
        Some(mut fix) => {
            let precise = fix["accuracyMeters"].as_f64().is_some_and(|a| a <= 100.0);
            fix.insert("isPrecise".into(), json!(precise));
            fix.insert("source".into(), json!("unknown"));
            Ok(Value::Object(fix))
        }
        None if outcome.end == End::TimedOut || outcome.exit_code() == Some(0) => {
            Err(failure("LOCATION_TIMEOUT: no fix in time"))
        }
        None => Err(failure(format!(
            "LOCATION_UNAVAILABLE: {}",
            tool_error(&outcome)
        ))),
    }
}

fn now_ms() -> f64 {
    crate::shared::clock::now_ms() as f64
}

/// GeoClue (or its agent) saying no, in the words OpenClaw looks for.
fn disabled(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "geolocation disabled",
        "disallowed, no agent",
        "accessdenied",
        "not authorized",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// How many complete `Timestamp: … seconds since the Epoch)` lines there are.
fn stamps_in(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            l.find("Timestamp:")
                .is_some_and(|i| l[i..].contains("seconds since the Epoch)"))
        })
        .count()
}

/// The newest usable fix in the demo's output (blocks after each `New
/// location:` line), as OpenClaw's parser reads it; `Err` only for a
/// timestamp JavaScript cannot hold (its `toISOString` throws).
fn parse(
    output: &str,
    now: f64,
    max_age_ms: Option<f64>,
) -> Result<Option<Map<String, Value>>, ToolError> {
    for block in blocks(output).into_iter().rev() {
        let (Some(lat), Some(lon), Some(accuracy)) = (
            field(block, "Latitude:"),
            field(block, "Longitude:"),
            field(block, "Accuracy:"),
        ) else {
            continue;
        };
        let (lat, lon, accuracy) = (js_number(lat), js_number(lon), js_number(accuracy));
        // NaN is in no range.
        let on_earth = (-90.0..=90.0).contains(&lat)
            && (-180.0..=180.0).contains(&lon)
            && (0.0..=f64::MAX).contains(&accuracy);
        if !on_earth {
            continue;
        }
        let stamp_ms = match epoch_seconds(block) {
            Some(seconds) => {
                let ms = seconds * 1000.0;
                if ms > 8.64e15 {
                    return Err(ToolError::new(
                        "INVALID_REQUEST",
                        "RangeError: Invalid time value",
                    ));
                }
                ms
            }
            None => now.floor(),
        };
        let age = now - stamp_ms;
        if let Some(max) = max_age_ms
            && (age < 0.0 || age >= max + TIMESTAMP_RESOLUTION_MS)
        {
            continue;
        }
        let mut fix = Map::new();
        fix.insert("lat".into(), crate::tools::js::number(lat));
        fix.insert("lon".into(), crate::tools::js::number(lon));
        fix.insert("accuracyMeters".into(), crate::tools::js::number(accuracy));
        for (label, key) in [
            ("Altitude:", "altitudeMeters"),
            ("Speed:", "speedMps"),
            ("Heading:", "headingDeg"),
        ] {
            if let Some(text) = field(block, label) {
                fix.insert(key.into(), crate::tools::js::number(js_number(text)));
            }
        }
        fix.insert(
            "timestamp".into(),
            json!(crate::shared::clock::iso(stamp_ms as i64)),
        );
        return Ok(Some(fix));
    }
    Ok(None)
}

/// The output cut where a line `New location:` (then only blank space up
/// to a line end) starts a new fix: `split(/\nNew location:\s*\n/)`.
fn blocks(output: &str) -> Vec<&str> {
    const MARK: &str = "\nNew location:";
    let mut blocks = Vec::new();
    let (mut start, mut from) = (0, 0);
    while let Some(found) = output[from..].find(MARK) {
        let at = from + found;
        let after = at + MARK.len();
        let space = output[after..]
            .find(|c: char| !c.is_whitespace())
            .map_or(output.len(), |i| after + i);
        // The greedy `\s*\n`: up to the last line end in that blank space.
        match output[after..space].rfind('\n') {
            Some(nl) => {
                blocks.push(&output[start..at]);
                start = after + nl + 1;
                from = start;
            }
            None => from = after,
        }
    }
    blocks.push(&output[start..]);
    blocks
}

/// The first `LABEL <number>` in `block`: `LABEL\s*([-+\d.]+)`.
fn field<'a>(block: &'a str, label: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = block[from..].find(label) {
        let rest = block[from + i + label.len()..].trim_start();
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '-' || c == '+' || c == '.'))
            .unwrap_or(rest.len());
        if end > 0 {
            return Some(&rest[..end]);
        }
        from += i + label.len();
    }
    None
}

/// The first `(N seconds since the Epoch)`: `\((\d+)\s+seconds since the Epoch\)`.
fn epoch_seconds(block: &str) -> Option<f64> {
    const TAIL: &str = "seconds since the Epoch)";
    let mut from = 0;
    while let Some(i) = block[from..].find(TAIL) {
        let head = &block[..from + i];
        from += i + TAIL.len();
        let digits_end = head.trim_end().len();
        if digits_end == head.len() {
            continue;
        }
        let head = &head[..digits_end];
        let start = head
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |p| p + 1);
        if start < head.len() && head[..start].ends_with('(') {
            return head[start..].parse().ok();
        }
    }
    None
}

/// JavaScript's `Number(text)` for the characters `[-+\d.]`: NaN where
/// it would be.
fn js_number(text: &str) -> f64 {
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    if body.is_empty() || body.contains(['+', '-']) || body == "." {
        return f64::NAN;
    }
    text.parse().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIX: &str = "Client object: /org/freedesktop/GeoClue2/Client/1\n\nNew location:\nLatitude:    48.858400°\nLongitude:   2.294500°\nAccuracy:    25.000000 meters\nAltitude:    35.000000 meters\nSpeed:       0.500000 meters/second\nHeading:     90.000000°\nDescription: WiFi\nTimestamp:   Sat 21 Nov 2026 10:00:00 AM UTC (1795000000 seconds since the Epoch)\n";

    #[test]
    fn a_fix_reads_as_openclaws_parser_reads_it() {
        let fix = parse(FIX, 1_795_000_005_000.0, None).unwrap().unwrap();
        // What OpenClaw 2026.9.6 answers for the same text.
        let theirs: Value = serde_json::from_str(r#"{"lat":48.8584,"lon":2.2945,"accuracyMeters":25,"altitudeMeters":35,"speedMps":0.5,"headingDeg":90,"timestamp":"2026-11-18T11:06:40.000Z"}"#).unwrap();
        assert_eq!(Value::Object(fix.clone()).to_string(), theirs.to_string());
        assert!(fix["accuracyMeters"].is_i64(), "25, not 25.0");
    }

    #[test]
    fn the_newest_usable_block_wins_and_bad_ones_are_skipped() {
        let two = format!(
            "{FIX}\nNew location:\nLatitude: 1.5\nLongitude: 2.5\nAccuracy: 3\n\nNew location:\nLatitude: 91\nLongitude: 0\nAccuracy: 1\n"
        );
        let fix = parse(&two, 1_795_000_005_000.0, None).unwrap().unwrap();
        assert_eq!(fix["lat"], json!(1.5));
        // No timestamp of its own: now.
        assert_eq!(fix["timestamp"], "2026-11-18T11:06:45.000Z");
        for bad in [
            "Latitude: 1\nLongitude: 2\nAccuracy: -1",
            "Latitude: 1.2.3\nLongitude: 2\nAccuracy: 1",
            "Latitude: +-1\nLongitude: 2\nAccuracy: 1",
            "Latitude: 1\nLongitude: 181\nAccuracy: 1",
            "Latitude: 1\nAccuracy: 1",
            "Latitude: °\nLongitude: 1\nAccuracy: 1",
        ] {
            assert_eq!(parse(bad, 0.0, None).unwrap(), None, "{bad}");
        }
    }

    #[test]
    fn a_fix_older_than_max_age_is_skipped_and_one_from_the_future_too() {
        let now = 1_795_000_000_000.0;
        assert!(parse(FIX, now + 1999.0, Some(1000.0)).unwrap().is_some());
        assert!(parse(FIX, now + 2000.0, Some(1000.0)).unwrap().is_none());
        assert!(parse(FIX, now - 1.0, Some(1000.0)).unwrap().is_none());
        assert!(parse(FIX, now - 1.0, None).unwrap().is_some());
    }

    #[test]
    fn an_unparsable_altitude_is_null_as_json_stringify_writes_nan() {
        let text = "Latitude: 1\nLongitude: 2\nAccuracy: 3\nAltitude: -.\n";
        let fix = parse(text, 0.0, None).unwrap().unwrap();
        assert_eq!(fix["altitudeMeters"], Value::Null);
    }

    #[test]
    fn a_timestamp_javascript_cannot_hold_is_its_range_error() {
        let text =
            "Latitude: 1\nLongitude: 2\nAccuracy: 3\n(99999999999999999 seconds since the Epoch)";
        let e = parse(text, 0.0, None).unwrap_err();
        assert_eq!(e.message, "RangeError: Invalid time value");
    }

    #[test]
    fn blocks_split_only_where_a_line_ends_after_the_mark() {
        assert_eq!(blocks("a\nNew location:\nb"), ["a", "b"]);
        assert_eq!(blocks("a\nNew location:  \n \nb"), ["a", "b"]);
        assert_eq!(blocks("a\nNew location: x\nb"), ["a\nNew location: x\nb"]);
        assert_eq!(blocks("New location:\nb"), ["New location:\nb"]);
    }

    #[test]
    fn the_level_and_limits_are_openclaws() {
        let a =
            Ask::read(&json!({"timeoutMs": 1e12, "maxAgeMs": -1, "desiredAccuracy": "precise"}));
        assert_eq!((a.timeout_ms, a.max_age_ms, a.accuracy), (60_000, None, 8));
        let a = Ask::read(&json!({"timeoutMs": "5000", "desiredAccuracy": "coarse"}));
        assert_eq!((a.timeout_ms, a.accuracy), (10_000, 4));
        let a = Ask::read(&json!({"timeoutMs": 1500.7, "maxAgeMs": 0}));
        assert_eq!(
            (a.timeout_ms, a.max_age_ms, a.accuracy),
            (1500, Some(0.0), 6)
        );
        assert_eq!(Ask::read(&json!({"timeoutMs": 1})).timeout_ms, 1000);
    }

    #[test]
    fn refusals_and_stamps_are_found_in_any_case() {
        assert!(disabled(
            "Failed: GDBus.Error: ... AccessDenied: Geolocation disabled"
        ));
        assert!(disabled("NOT AUTHORIZED"));
        assert!(!disabled("Latitude: 1"));
        assert_eq!(stamps_in(FIX), 1);
        assert_eq!(stamps_in("Timestamp: (12 seconds since the Epoch"), 0);
    }
}
