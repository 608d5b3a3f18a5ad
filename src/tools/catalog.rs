//! The node's own tools as an agent is shown them: a name, what the tool
//! does in words a model can act on, and its parameters as JSON Schema.
//! One description for every place that publishes them (OpenClaw's
//! node-mcp tool descriptors); what the tools do stays in `tools/`.

use serde_json::{Value, json};

/// One tool as published.
pub struct Entry {
    /// The command name (`read_file`): what `dispatch` runs.
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: fn() -> Value,
}

/// The seed's tools, in the order an agent is shown them.
pub const ENTRIES: &[Entry] = &[
    Entry {
        name: "read_file",
        description: "Read a text file on this node, inside its workspace (paths are relative to the workspace). Returns {path, content, truncated, bytes, binary}; a binary file is reported, not dumped.",
        parameters: || {
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "File path, relative to the node's workspace"},
                "maxLines": {"type": "integer", "minimum": 1, "description": "Return at most this many lines from the start"}
            }, "required": ["path"], "additionalProperties": false})
        },
    },
    Entry {
        name: "list_files",
        description: "List a directory on this node, inside its workspace. Returns {path, entries: [{name, type, size?}], truncated}.",
        parameters: || {
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "Directory, relative to the workspace (default: the workspace itself)"},
                "pattern": {"type": "string", "description": "Glob on entry names, e.g. *.rs"},
                "recursive": {"type": "boolean", "description": "Walk subdirectories too"}
            }, "additionalProperties": false})
        },
    },
    Entry {
        name: "search_files",
        description: "Find files on this node by name, or (searchContent: true) by text inside them, within the workspace. Returns {query, matches: [{path, kind, line?, text?}], truncated}.",
        parameters: || {
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "Text to look for (case-insensitive)"},
                "searchContent": {"type": "boolean", "description": "Search inside files, not only their names"},
                "path": {"type": "string", "description": "Directory to search, relative to the workspace"}
            }, "required": ["query"], "additionalProperties": false})
        },
    },
    Entry {
        name: "read_config",
        description: "Read this node's OpenClaw configuration (openclaw.json), with tokens, keys and passwords replaced by <redacted>. Returns {path, content, redacted}.",
        parameters: no_parameters,
    },
    Entry {
        name: "validate_config",
        description: "Check this node's OpenClaw configuration with `openclaw config validate`. Returns {valid, exitCode, report}.",
        parameters: no_parameters,
    },
    Entry {
        name: "system_info",
        description: "Describe this node: operating system, architecture, hostname, shell, PATH, home, user, CPU count, workspace, and the OpenClaw version installed.",
        parameters: no_parameters,
    },
    Entry {
        name: "write_file",
        description: "Write (create or replace) a text file on this node, inside its workspace; the parent directory must exist. Needs the node owner's approval unless pre-approved. Returns {path, bytes, created}.",
        parameters: || {
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace"},
                "content": {"type": "string", "description": "The whole new content"}
            }, "required": ["path", "content"], "additionalProperties": false})
        },
    },
    Entry {
        name: "run_command",
        description: "Run a program on this node (in its workspace unless cwd is given) and return {exitCode, timedOut, success, stdout, stderr, error, signal, truncated}. `command` is an argv array, or a program name with `args`, or alone a shell command line. Needs the node owner's approval unless pre-approved; some commands (sudo, rm -rf /, …) are always refused.",
        parameters: || {
            json!({"type": "object", "properties": {
                "command": {
                    "description": "An argv array such as [\"ls\", \"-la\"], or a program name (with args), or a shell command line",
                    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]
                },
                "args": {"type": "array", "items": {"type": "string"}, "description": "Arguments when command is a program name"},
                "cwd": {"type": "string", "description": "Working directory, relative to the workspace"}
            }, "required": ["command"], "additionalProperties": false})
        },
    },
];

fn no_parameters() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_a_command_of_this_node_with_an_object_schema() {
        let commands = super::super::available_commands();
        for e in ENTRIES {
            assert!(commands.iter().any(|c| c == e.name), "{}", e.name);
            let schema = (e.parameters)();
            assert_eq!(schema["type"], "object", "{}", e.name);
            for required in schema["required"].as_array().into_iter().flatten() {
                assert!(
                    schema["properties"][required.as_str().unwrap()].is_object(),
                    "{}: {required}",
                    e.name
                );
            }
            assert!(e.description.len() > 40, "{} says what it does", e.name);
        }
    }
}
