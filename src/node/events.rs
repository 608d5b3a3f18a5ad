//! What the node tells the gateway besides results, in OpenClaw's shapes
//! (`node.event {event, payloadJSON}`): `exec.finished` after every
//! completed `system.run`, `exec.denied` before a refused one — echoing the
//! request's `runId` and `sessionKey` unchanged, or the gateway drops them —
//! and `node.host.stats` (its closed shape) once after `hello-ok` and every
//! minute.

use serde_json::{Value, json};

use crate::tools::ToolError;

/// How often `node.host.stats` goes out.
pub const STATS_EVERY: std::time::Duration = std::time::Duration::from_secs(60);
/// `exec.finished`'s output keeps this many characters from the end.
const OUTPUT_TAIL: usize = 20_000;

/// The `exec.*` event for a finished `system.run`, if one is due.
pub fn exec_event(
    command: &str,
    params_json: Option<&str>,
    outcome: &Result<Value, ToolError>,
) -> Option<Value> {
    if command != "system.run" {
        return None;
    }
    let params: Value = serde_json::from_str(params_json?).ok()?;
    // The gateway matches events to the run it dispatched by this id.
    let run_id = params["runId"].as_str()?;
    let session_key = params["sessionKey"].as_str().unwrap_or("node");
    // The command text as OpenClaw formats the argv (not the preview).
    let text = params["command"]
        .as_array()
        .and_then(|argv| {
            let argv: Vec<String> = argv
                .iter()
                .map(|a| a.as_str().map(str::to_owned))
                .collect::<Option<_>>()?;
            Some(crate::tools::exec::format_exec_command(&argv))
        })
        .or_else(|| params["rawCommand"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let suppress = params["suppressNotifyOnExit"].as_bool().unwrap_or(false);
    let (event, payload) = match outcome {
        Ok(result) => {
            let mut payload = json!({"sessionKey": session_key, "runId": run_id, "host": "node", "command": text});
            if let Some(code) = result["exitCode"].as_i64() {
                payload["exitCode"] = json!(code);
            }
            payload["timedOut"] = json!(result["timedOut"].as_bool().unwrap_or(false));
            payload["success"] = json!(result["success"].as_bool().unwrap_or(false));
            payload["output"] = json!(output(result));
            payload["suppressNotifyOnExit"] = json!(suppress);
            ("exec.finished", payload)
        }
        Err(e) => {
            let reason = match e.code {
                "FORBIDDEN" => "security=deny",
                "USER_REJECTED" | "SYSTEM_RUN_DENIED" => "approval-required",
                _ => return None, // a malformed request: OpenClaw sends no event either
            };
            let payload = json!({"sessionKey": session_key, "runId": run_id, "host": "node",
                "command": text, "reason": reason, "suppressNotifyOnExit": suppress});
            ("exec.denied", payload)
        }
    };
    Some(json!({"event": event, "payloadJSON": payload.to_string()}))
}

/// stdout, stderr and the error, as OpenClaw joins them, the tail kept.
fn output(result: &Value) -> String {
    let joined = ["stdout", "stderr", "error"]
        .iter()
        .filter_map(|k| result[*k].as_str().filter(|s| !s.is_empty()))
        .collect::<Vec<_>>()
        .join("\n");
    let trimmed = joined.trim();
    let count = trimmed.chars().count();
    if count <= OUTPUT_TAIL {
        return trimmed.to_owned();
    }
    let tail: String = trimmed.chars().skip(count - OUTPUT_TAIL).collect();
    format!("... (truncated) {tail}")
}

/// `node.host.stats`, or `None` where this machine cannot say (the shape
/// is closed: memory is required).
pub fn host_stats() -> Option<Value> {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let (total, free) = memory()?;
    let mut stats = json!({"cpuCount": cpus.min(4096), "memoryTotalBytes": total, "memoryFreeBytes": free.min(total)});
    if let Some(load) = load_average().filter(|l| l.iter().any(|v| *v > 0.0)) {
        stats["loadAverage"] = json!(load);
    }
    if let Some((disk_total, disk_free)) = disk() {
        stats["diskTotalBytes"] = json!(disk_total);
        stats["diskAvailableBytes"] = json!(disk_free.min(disk_total));
    }
    Some(json!({"event": "node.host.stats", "payloadJSON": stats.to_string()}))
}

#[cfg(target_os = "linux")]
fn memory() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|kib| kib * 1024)
    };
    Some((
        field("MemTotal:")?,
        field("MemAvailable:").or_else(|| field("MemFree:"))?,
    ))
}

#[cfg(not(target_os = "linux"))]
fn memory() -> Option<(u64, u64)> {
    None
}

#[cfg(target_os = "linux")]
fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut parts = text.split_whitespace().map(|p| p.parse::<f64>().ok());
    Some([parts.next()??, parts.next()??, parts.next()??].map(|v| v.clamp(0.0, 1e5)))
}

#[cfg(not(target_os = "linux"))]
fn load_average() -> Option<[f64; 3]> {
    None
}

/// The home directory's filesystem, as OpenClaw measures it.
#[cfg(unix)]
fn disk() -> Option<(u64, u64)> {
    let home = std::env::var_os("HOME")?;
    let path =
        std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(home.as_os_str())).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a zeroed out-struct of the right type.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let unit = st.f_frsize as u64;
    Some((st.f_blocks as u64 * unit, st.f_bavail as u64 * unit))
}

#[cfg(not(unix))]
fn disk() -> Option<(u64, u64)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(event: &Value) -> Value {
        serde_json::from_str(event["payloadJSON"].as_str().unwrap()).unwrap()
    }

    #[test]
    fn exec_events_echo_the_run_and_join_the_output_as_openclaw_does() {
        let params = r#"{"command":["/bin/sh","-lc","uname -s; echo hi"],"runId":"r-1","sessionKey":"agent:main:s"}"#;
        let result = json!({"exitCode": 0, "timedOut": false, "success": true, "stdout": "Linux\nhi\n", "stderr": "", "error": null});
        let event = exec_event("system.run", Some(params), &Ok(result)).unwrap();
        assert_eq!(event["event"], "exec.finished");
        let p = payload(&event);
        assert_eq!(
            p,
            json!({"sessionKey": "agent:main:s", "runId": "r-1", "host": "node",
                   "command": "/bin/sh -lc \"uname -s; echo hi\"", "exitCode": 0, "timedOut": false,
                   "success": true, "output": "Linux\nhi", "suppressNotifyOnExit": false})
        );
        let denied = exec_event(
            "system.run",
            Some(params),
            &Err(ToolError::new("USER_REJECTED", "no")),
        )
        .unwrap();
        assert_eq!(payload(&denied)["reason"], "approval-required");
        assert!(
            exec_event(
                "system.run",
                Some(params),
                &Err(ToolError::new("INVALID_PARAMS", "x"))
            )
            .is_none()
        );
        assert!(
            exec_event("system.run", Some(r#"{"command":["ls"]}"#), &Ok(json!({}))).is_none(),
            "no runId, nothing to match"
        );
        assert!(exec_event("run_command", Some(params), &Ok(json!({}))).is_none());
        let long = json!({"stdout": "x".repeat(30_000)});
        let out = output(&long);
        assert!(out.starts_with("... (truncated) ") && out.chars().count() == 20_000 + 16);
    }

    #[test]
    fn host_stats_have_the_closed_shape() {
        let event = host_stats().expect("Linux can say");
        let p = payload(&event);
        assert!(p["cpuCount"].as_u64().unwrap() >= 1);
        assert!(p["memoryFreeBytes"].as_u64() <= p["memoryTotalBytes"].as_u64());
        for key in p.as_object().unwrap().keys() {
            assert!(
                [
                    "cpuCount",
                    "loadAverage",
                    "memoryTotalBytes",
                    "memoryFreeBytes",
                    "diskTotalBytes",
                    "diskAvailableBytes"
                ]
                .contains(&key.as_str()),
                "{key}"
            );
        }
    }
}
