//! Wall-clock time as the protocols write it.

/// Milliseconds since the Unix epoch (OpenClaw's timestamps, the links'
/// replay windows, the audit log); 0 before 1970.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}
