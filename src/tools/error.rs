//! The one error type every tool answers with.
//!
//! Owns the mapping from failures to the stable `code` strings the gateway
//! relays to the agent. Must never carry an absolute path the caller did not
//! send itself: OS messages are rebuilt from the error number alone, because
//! wrapped errors (e.g. from `tempfile`) embed paths.

use std::io;

/// A tool's refusal or failure, answered to the gateway as `ok:false, error:{code, message}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub code: &'static str,
    pub message: String,
}

impl ToolError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// An I/O failure while working on `shown`, the path as the agent should see it.
    pub fn from_io(shown: &str, err: &io::Error) -> Self {
        match err.kind() {
            io::ErrorKind::NotFound => Self::new("NOT_FOUND", format!("{shown:?} does not exist")),
            io::ErrorKind::PermissionDenied => {
                Self::new("IO_ERROR", format!("permission denied on {shown:?}"))
            }
            _ => Self::new("IO_ERROR", format!("{shown:?}: {}", os_message(err))),
        }
    }
}

/// The OS's wording without any path a wrapper may have attached.
fn os_message(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(errno) => io::Error::from_raw_os_error(errno).to_string(),
        None => err.kind().to_string(),
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_code_then_message() {
        let err = ToolError::new("NOT_FOUND", "gone");
        assert_eq!(err.to_string(), "NOT_FOUND: gone");
    }

    #[test]
    fn io_errors_map_to_codes() {
        let missing = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(ToolError::from_io("a", &missing).code, "NOT_FOUND");
        let denied = ToolError::from_io("a", &io::Error::from(io::ErrorKind::PermissionDenied));
        assert_eq!(denied.code, "IO_ERROR");
        assert!(
            denied.message.contains("permission denied"),
            "{}",
            denied.message
        );
    }

    #[test]
    fn io_message_drops_paths_a_wrapper_attached() {
        let wrapped = io::Error::new(io::ErrorKind::StorageFull, "no space at /secret/place");
        let err = ToolError::from_io("out.txt", &wrapped);
        assert_eq!(err.code, "IO_ERROR");
        assert!(!err.message.contains("/secret"), "{}", err.message);
        assert!(err.message.contains("\"out.txt\""), "{}", err.message);
    }
}
