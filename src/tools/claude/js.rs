//! JavaScript's semantics the Claude commands lean on beyond what every
//! family shares (`crate::tools::js`): `normalizeBoundedOptionalString`,
//! `Date.parse` of ISO strings, and Node's lenient base64url decoder.
//!
//! Must never panic on any input: every caller feeds it what a file or a
//! stranger wrote.

use serde_json::Value;

pub use crate::tools::js::{js_numbers, locale_compare, number, trim, truncate_utf16, utf16_len};

/// OpenClaw's `normalizeBoundedOptionalString`: a string, trimmed, not
/// blank, at most `max` UTF-16 units; anything else is absent.
pub fn bounded(value: &Value, max: usize) -> Option<String> {
    let text = trim(value.as_str()?);
    (!text.is_empty() && utf16_len(text) <= max).then(|| text.to_owned())
}

/// `parseDateFirstTimestampMs`: a finite number as it is, a string as
/// `Date.parse` reads it (within ±8.64e15).
pub fn timestamp_ms(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64().filter(|f| f.is_finite()),
        Value::String(s) => date_parse(s).filter(|ms| ms.abs() <= 8.64e15),
        _ => None,
    }
}

/// `Date.parse` for the ISO forms (what Claude Code writes):
/// `[±YY]YYYY[-MM[-DD]][(T| )HH:mm[:ss[.f…]]][Z|±HH:mm]`. A date alone is
/// UTC, a date and time without a zone local time, as V8 reads them.
/// V8's legacy forms ("Jan 1 2025") are not read: the field is left out.
pub fn date_parse(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize, n: usize| -> Option<i64> {
        let part = b.get(*i..*i + n)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        *i += n;
        Some(part.iter().fold(0, |acc, d| acc * 10 + i64::from(d - b'0')))
    };
    let year = match b.first()? {
        sign @ (b'+' | b'-') => {
            i = 1;
            let y = digits(&mut i, 6)?;
            if *sign == b'-' {
                if y == 0 {
                    return None;
                }
                -y
            } else {
                y
            }
        }
        _ => digits(&mut i, 4)?,
    };
    let (mut month, mut day) = (1, 1);
    if b.get(i) == Some(&b'-') {
        i += 1;
        month = digits(&mut i, 2)?;
        if b.get(i) == Some(&b'-') {
            i += 1;
            day = digits(&mut i, 2)?;
        }
    }
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if i == b.len() {
        return Some(days as f64 * 86_400_000.0);
    }
    if !matches!(b[i], b'T' | b't' | b' ') {
        return None;
    }
    i += 1;
    let hour = digits(&mut i, 2)?;
    if b.get(i) != Some(&b':') {
        return None;
    }
    i += 1;
    let minute = digits(&mut i, 2)?;
    let (mut second, mut millis) = (0, 0.0);
    if b.get(i) == Some(&b':') {
        i += 1;
        second = digits(&mut i, 2)?;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == start {
                return None;
            }
            // Milliseconds: the first three digits, the rest dropped.
            let frac = &s[start..i.min(start + 3)];
            millis = frac.parse::<f64>().ok()? * 10f64.powi(3 - frac.len() as i32);
        }
    }
    let valid_time = (hour < 24 && minute < 60 && second < 60)
        || (hour == 24 && minute == 0 && second == 0 && millis == 0.0);
    if !valid_time {
        return None;
    }
    let wall =
        days as f64 * 86_400_000.0 + ((hour * 60 + minute) * 60 + second) as f64 * 1000.0 + millis;
    let offset_min = match b.get(i) {
        None => return Some(wall - local_offset_ms(wall)),
        Some(b'Z' | b'z') => {
            i += 1;
            0
        }
        Some(sign @ (b'+' | b'-')) => {
            let negative = *sign == b'-';
            i += 1;
            let h = digits(&mut i, 2)?;
            if b.get(i) != Some(&b':') {
                return None;
            }
            i += 1;
            let m = digits(&mut i, 2)?;
            if h > 23 || m > 59 {
                return None;
            }
            if negative { -(h * 60 + m) } else { h * 60 + m }
        }
        Some(_) => return None,
    };
    (i == b.len()).then_some(wall - offset_min as f64 * 60_000.0)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (a day past the
/// month's end runs into the next month, as V8 lets it).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The local zone's offset from UTC at (about) this wall time, in ms.
#[cfg(unix)]
fn local_offset_ms(wall_ms: f64) -> f64 {
    let secs = (wall_ms / 1000.0) as libc::time_t;
    // SAFETY: localtime_r writes only into the tm we own.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return 0.0;
        }
        tm.tm_gmtoff as f64 * 1000.0
    }
}

#[cfg(not(unix))]
fn local_offset_ms(_wall_ms: f64) -> f64 {
    0.0
}

/// `Buffer.from(text, "base64url")`: both alphabets, padding ends it,
/// anything else is skipped, a trailing partial group gives what whole
/// bytes it holds. Never fails, as Node's never throws.
pub fn base64url_decode_lenient(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.chars() {
        let v = match c {
            'A'..='Z' => c as u32 - 'A' as u32,
            'a'..='z' => c as u32 - 'a' as u32 + 26,
            '0'..='9' => c as u32 - '0' as u32 + 52,
            '+' | '-' => 62,
            '/' | '_' => 63,
            '=' => break,
            _ => continue,
        };
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bounded_counts_utf16_units() {
        assert_eq!(bounded(&json!("  x "), 1).as_deref(), Some("x"));
        assert_eq!(bounded(&json!("   "), 10), None);
        assert_eq!(bounded(&json!(5), 10), None);
        assert_eq!(bounded(&json!("😀"), 1), None);
        assert_eq!(bounded(&json!("😀"), 2).as_deref(), Some("😀"));
    }

    /// Each row: what node 20 / V8 answered for `Date.parse` (TZ=UTC).
    #[test]
    fn date_parse_matches_v8_on_iso_forms() {
        let rows: &[(&str, Option<f64>)] = &[
            ("2025-01-01T00:00:00.000Z", Some(1735689600000.0)),
            ("2025-01-01T00:00:00.1234567Z", Some(1735689600123.0)),
            ("2025-01-01", Some(1735689600000.0)),
            ("2025", Some(1735689600000.0)),
            ("2025-01-01T10:00:00+02:00", Some(1735718400000.0)),
            ("+002025-01-01T00:00:00Z", Some(1735689600000.0)),
            ("2025-01-01T24:00:00Z", Some(1735776000000.0)),
            ("2025-01-01T10:00:00z", Some(1735725600000.0)),
            ("2025-02-30T00:00:00Z", Some(1740873600000.0)),
            ("2025-13-01", None),
            ("2025-01-01T10:00:00.Z", None),
            (" 2025-01-01T00:00:00Z", None),
            ("2025-01-01T00:00:00Z ", None),
            ("1700000000000", None),
            ("", None),
            ("-000000-01-01", None),
        ];
        for (text, want) in rows {
            assert_eq!(date_parse(text), *want, "{text:?}");
        }
    }

    #[test]
    fn timestamps_take_finite_numbers_as_they_are() {
        assert_eq!(timestamp_ms(&json!(1.5)), Some(1.5));
        assert_eq!(timestamp_ms(&json!(null)), None);
        assert_eq!(timestamp_ms(&json!("+275760-09-13T00:00:00.001Z")), None);
    }

    /// Each row: `Buffer.from(x, "base64url").toString("hex")` in node 20.
    #[test]
    fn base64url_decoding_is_as_lenient_as_nodes() {
        let rows = [
            ("QQ", "41"),
            ("QUI", "4142"),
            ("QUJD", "414243"),
            ("Q", ""),
            ("QQ=", "41"),
            ("QQ==x", "41"),
            ("Q=Q", ""),
            ("QUJDRA", "41424344"),
            ("QU JD", "414243"),
            ("Q\u{e9}UJD", "414243"),
            ("QUJD\u{0}RA", "41424344"),
        ];
        for (text, hex) in rows {
            let got: String = base64url_decode_lenient(text)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(got, hex, "{text:?}");
        }
    }
}
