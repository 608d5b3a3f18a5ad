//! Links: other protocols that ask this machine to run tools. Each only
//! translates its frames into `tools` dispatch; none decides policy or
//! spawns a process by itself.

pub mod mcp_servers;
