//! OpenClaw's exec-approvals document on this node, mapped onto the one
//! policy: `system.execApprovals.get` / `.set` (what `openclaw approvals
//! get --node` and `openclaw approvals allowlist add --node` send) read and
//! replace it, with OpenClaw's `baseHash` concurrency.
//!
//! The document is `{version: 1, defaults?: {security, ask, askFallback,
//! autoAllowSkills}, agents?: {ID | "*": {security?, ask?, ..., allowlist?:
//! [{id?, pattern, argPattern?, source?, ...}]}}}`, kept as the exact text
//! its hash is taken of (`exec-approvals.json` in the state directory).
//! What it means here:
//! - an **allowlist** entry pre-approves the programs it names (`pattern`, a
//!   path or a glob over the resolved executable; `argPattern`, OpenClaw's
//!   `sha256:cwd-argv:v1:` binding, when present) — like `--allow-command`;
//! - **security `deny`** refuses every command; **ask `always`** makes
//!   every command need a human, pre-approved or not;
//! - `full` / `off` loosen nothing: the node's `--approval` still applies
//!   (the stricter of the two wins, as OpenClaw takes the stricter of its
//!   config and its document);
//! - this node's forbidden rules (`--deny-command`, the built-in ones) stay
//!   stronger than any entry: an allowlisted `sudo` is still refused.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::audit::digest;
use serde_json::{Value, json};

use super::ToolError;
use super::policy::Exec;
use crate::shared::paths::write_private;

const FILE: &str = "exec-approvals.json";

/// What the document says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// An allowlist entry names it.
    Allowed,
    /// Security `deny`.
    Denied,
    /// Ask `always`: a human, whatever else allows it.
    MustAsk,
    /// Nothing: the node's own policy decides.
    Silent,
}

pub struct Store {
    path: PathBuf,
    /// The stored text (what the hash is taken of); `None`: no document.
    raw: Mutex<Option<String>>,
}

impl Store {
    pub fn open(state_dir: &Path) -> Self {
        let path = state_dir.join(FILE);
        let raw = std::fs::read_to_string(&path).ok();
        Self {
            path,
            raw: Mutex::new(raw),
        }
    }

    /// The document; one that exists but does not parse counts as
    /// `security: deny` (it may have said so): fail closed.
    fn document(&self) -> Value {
        read(self.raw.lock().unwrap().as_deref())
    }

    /// `system.execApprovals.get`: `{path, exists, hash, file}`. The first
    /// one writes the (empty) document, as OpenClaw's node host does.
    pub fn get(&self) -> Result<Value, ToolError> {
        let mut raw = self.raw.lock().unwrap();
        if raw.is_none() {
            let text = serialize(&empty());
            write_private(&self.path, text.as_bytes()).map_err(|e| store_error(&e))?;
            *raw = Some(text);
        }
        Ok(snapshot(&self.path, raw.as_deref()))
    }

    /// `system.execApprovals.set {file, baseHash}`: replaces the document if
    /// `baseHash` is the current hash; the new snapshot.
    pub fn set(&self, params: Value) -> Result<Value, ToolError> {
        let Some(file) = params.get("file").filter(|f| f.is_object()) else {
            return Err(invalid("exec approvals file required"));
        };
        let base = params["baseHash"].as_str().map(str::trim).unwrap_or("");
        let mut raw = self.raw.lock().unwrap();
        let current = hash(raw.as_deref());
        match (raw.is_some(), base) {
            (true, "") => {
                return Err(invalid(
                    "exec approvals base hash required; reload and retry",
                ));
            }
            (_, base) if !base.is_empty() && base != current => {
                return Err(invalid("exec approvals changed; reload and retry"));
            }
            _ => {}
        }
        let next = normalize(file)?;
        let text = serialize(&next);
        if raw.as_deref() != Some(text.as_str()) {
            write_private(&self.path, text.as_bytes()).map_err(|e| store_error(&e))?;
            *raw = Some(text);
        }
        Ok(snapshot(&self.path, raw.as_deref()))
    }

    /// What the document says about running `exec` for agent `agent`.
    /// With no agent known, every agent's restrictions apply (the stricter
    /// reading) and only the `"*"` allowlist allows.
    pub fn verdict(&self, exec: &Exec, agent: Option<&str>) -> Verdict {
        let doc = self.document();
        let mine: Vec<&Value> = [Some("*"), agent]
            .into_iter()
            .flatten()
            .filter_map(|id| doc["agents"].get(id))
            .chain(std::iter::once(&doc["defaults"]))
            .collect();
        let restricting: Vec<&Value> = match agent {
            Some(_) => mine.clone(),
            None => doc["agents"]
                .as_object()
                .into_iter()
                .flat_map(|a| a.values())
                .chain(std::iter::once(&doc["defaults"]))
                .collect(),
        };
        if restricting.iter().any(|s| s["security"] == "deny") {
            return Verdict::Denied;
        }
        if restricting.iter().any(|s| s["ask"] == "always") {
            return Verdict::MustAsk;
        }
        // What really runs, worked out once (PATH, canonical paths), not
        // once per entry.
        let runs = effective(exec);
        let listed = mine
            .iter()
            .filter_map(|s| s["allowlist"].as_array())
            .flatten()
            .any(|entry| matches(entry, &runs, exec));
        if listed {
            Verdict::Allowed
        } else {
            Verdict::Silent
        }
    }
}

/// The program a call really runs, and its arguments: a shell wrapper
/// around one simple command (`sh -lc "uname -s"`, what OpenClaw's exec
/// tool sends) is judged by that command, as OpenClaw's analysis does; a
/// script with anything more (pipes, `;`, expansions) is the shell's.
fn effective(exec: &Exec) -> (PathBuf, Vec<String>) {
    let real = std::fs::canonicalize(&exec.executable).unwrap_or_else(|_| exec.executable.clone());
    let outer = (
        real.clone(),
        exec.argv.get(1..).unwrap_or_default().to_vec(),
    );
    // Exactly `SHELL -c|-lc SCRIPT`, SHELL a system shell (not a program
    // that calls itself `sh`), SCRIPT one command of plain words.
    let system_shell = matches!(
        real.parent().and_then(|p| p.to_str()),
        Some("/bin" | "/usr/bin")
    ) && matches!(
        real.file_name().and_then(|n| n.to_str()),
        Some("sh" | "bash" | "dash" | "zsh" | "ksh")
    );
    // The same wrapper reading as the plan's preview, held to the bare
    // three-word form here: no shell options that could change the run.
    let Some(script) = super::exec::shell_payload(&exec.argv).filter(|_| exec.argv.len() == 3)
    else {
        return outer;
    };
    if !system_shell {
        return outer;
    }
    let simple = !script.trim().is_empty()
        && script
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" -_./,:+@%".contains(&b));
    let words: Vec<String> = script
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    let Some((program, args)) = words.split_first().filter(|_| simple) else {
        return outer;
    };
    match which::which_in(program, std::env::var_os("PATH"), &exec.cwd)
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok())
    {
        Some(path) => (path, args.to_vec()),
        None => outer,
    }
}

/// An allowlist entry naming `exec`'s program (and, with `argPattern`, its
/// exact arguments in its working directory).
fn matches(entry: &Value, (program, args): &(PathBuf, Vec<String>), exec: &Exec) -> bool {
    let Some(pattern) = entry["pattern"].as_str().filter(|p| !p.is_empty()) else {
        return false;
    };
    // Written for the gateway's own prediction only: bound to no
    // directory, it never allows anything here.
    if pattern.starts_with("=node-command:") || !pattern.starts_with('/') {
        return false;
    }
    let program = program.to_string_lossy();
    let named = if pattern.contains(['*', '?', '[']) {
        globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map(|g| g.compile_matcher().is_match(program.as_ref()))
            .unwrap_or(false)
    } else {
        pattern == program
    };
    named
        && entry["argPattern"]
            .as_str()
            .is_none_or(|p| p == arg_pattern(&exec.cwd.to_string_lossy(), args))
}

/// OpenClaw's binding of an approval to a working directory and arguments:
/// `sha256:cwd-argv:v1:` + SHA-256 of `len\0cwd\0n\0` and `len\0arg\0` per
/// argument (lengths in UTF-8 bytes; the program itself not included).
pub fn arg_pattern(cwd: &str, args: &[String]) -> String {
    let mut data = format!("{}\0{cwd}\0{}\0", cwd.len(), args.len());
    for arg in args {
        data.push_str(&format!("{}\0{arg}\0", arg.len()));
    }
    format!("sha256:cwd-argv:v1:{}", digest(&data))
}

impl Store {
    /// `allow-always` from the gateway: an entry as OpenClaw's node host
    /// writes it (the program, bound to its arguments and directory), so
    /// the gateway's next prediction and this node agree it is allowed.
    pub fn allow_always(&self, exec: &Exec, agent: Option<&str>) {
        // The agent's own list, as OpenClaw's node host writes it; `"*"`
        // when the gateway named none.
        let agent = agent.unwrap_or("*");
        let (program, args) = effective(exec);
        let entry = json!({
            "id": uuid::Uuid::new_v4().to_string(),
            "pattern": program,
            "argPattern": arg_pattern(&exec.cwd.to_string_lossy(), &args),
            "source": "allow-always",
            "lastUsedAt": crate::shared::clock::now_ms(),
        });
        let mut raw = self.raw.lock().unwrap();
        let mut doc: Value = match raw.as_deref() {
            None => empty(),
            Some(text) => match serde_json::from_str(text) {
                Ok(doc) => doc,
                Err(_) => return, // never over a document we cannot read
            },
        };
        if !doc["agents"].is_object() {
            doc["agents"] = json!({});
        }
        if !doc["agents"][agent].is_object() {
            doc["agents"][agent] = json!({});
        }
        if !doc["agents"][agent]["allowlist"].is_array() {
            doc["agents"][agent]["allowlist"] = json!([]);
        }
        // And the exact command line, as OpenClaw's node host adds it (what
        // its gateway matches a shell builtin like `echo` by).
        let exact = json!({
            "id": uuid::Uuid::new_v4().to_string(),
            "pattern": format!("=node-command:{}", command_hash(&exec.argv)),
            "source": "allow-always",
            "lastUsedAt": crate::shared::clock::now_ms(),
        });
        let list = doc["agents"][agent]["allowlist"]
            .as_array_mut()
            .expect("just made");
        list.push(entry);
        list.push(exact);
        let text = serialize(&doc);
        if write_private(&self.path, text.as_bytes()).is_ok() {
            *raw = Some(text);
        }
    }

    /// The `"*"` allowlist, as `policySnapshot.allowlistRules`.
    pub fn rules(&self) -> Vec<Value> {
        let doc = self.document();
        doc["agents"]["*"]["allowlist"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let mut rule = json!({"pattern": e["pattern"]});
                for key in ["argPattern", "source"] {
                    if !e[key].is_null() {
                        rule[key] = e[key].clone();
                    }
                }
                rule
            })
            .collect()
    }
}

/// What `allow-always` would cover for this argv in this directory.
pub fn coverage(argv: &[String], cwd: &Path) -> Value {
    let exec = Exec {
        executable: which::which_in(&argv[0], std::env::var_os("PATH"), cwd)
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .unwrap_or_else(|| PathBuf::from(&argv[0])),
        argv: argv.to_vec(),
        cwd: cwd.to_path_buf(),
        env: Vec::new(),
        bound: None,
    };
    let (program, args) = effective(&exec);
    json!({"complete": true, "patterns": [{"pattern": program, "argPattern": arg_pattern(&cwd.to_string_lossy(), &args)}]})
}

/// OpenClaw's `=node-command:` key: the first 16 hex digits of the SHA-256
/// of the command line as it formats it.
fn command_hash(argv: &[String]) -> String {
    digest(&super::exec::format_exec_command(argv))[..16].to_owned()
}

fn empty() -> Value {
    json!({"version": 1, "defaults": {}, "agents": {}})
}

/// OpenClaw's serialisation: two-space JSON and a newline.
fn serialize(doc: &Value) -> String {
    serde_json::to_string_pretty(doc).expect("plain data") + "\n"
}

fn hash(raw: Option<&str>) -> String {
    match raw {
        Some(raw) => digest(raw),
        None => format!("missing:{}", digest("")),
    }
}

/// The document as it is obeyed: a damaged one reads as `security:
/// deny`, and is shown so to the gateway (which can then replace it).
fn read(raw: Option<&str>) -> Value {
    match raw {
        None => empty(),
        Some(raw) => serde_json::from_str(raw).unwrap_or_else(
            |_| json!({"version": 1, "defaults": {"security": "deny"}, "agents": {}}),
        ),
    }
}

fn snapshot(path: &Path, raw: Option<&str>) -> Value {
    let file = read(raw);
    json!({"path": path, "exists": raw.is_some(), "hash": hash(raw), "file": file})
}

const SECURITY: &[&str] = &["deny", "allowlist", "full"];
const ASK: &[&str] = &["off", "on-miss", "always"];

/// The document as OpenClaw's node host keeps it: version 1, only the keys
/// its closed schema has (the gateway refuses anything else), entries with
/// an id, empty patterns and unknown settings dropped.
fn normalize(file: &Value) -> Result<Value, ToolError> {
    let settings = |from: &Value, into: &mut serde_json::Map<String, Value>| {
        for (key, allowed) in [
            ("security", SECURITY),
            ("ask", ASK),
            ("askFallback", SECURITY),
        ] {
            if let Some(v) = from[key].as_str().filter(|v| allowed.contains(v)) {
                into.insert(key.into(), json!(v));
            }
        }
        if let Some(b) = from["autoAllowSkills"].as_bool() {
            into.insert("autoAllowSkills".into(), json!(b));
        }
    };
    let mut defaults = serde_json::Map::new();
    settings(&file["defaults"], &mut defaults);
    let mut agents = serde_json::Map::new();
    if let Some(given) = file["agents"].as_object() {
        for (id, agent) in given {
            let mut out = serde_json::Map::new();
            settings(agent, &mut out);
            if let Some(list) = agent["allowlist"].as_array() {
                let entries: Vec<Value> = list.iter().filter_map(entry).collect();
                out.insert("allowlist".into(), json!(entries));
            }
            agents.insert(id.clone(), Value::Object(out));
        }
    } else if !file["agents"].is_null() {
        return Err(invalid("agents must be an object"));
    }
    Ok(json!({"version": 1, "defaults": defaults, "agents": agents}))
}

fn entry(given: &Value) -> Option<Value> {
    let given = match given {
        Value::String(pattern) => json!({"pattern": pattern}),
        other => other.clone(),
    };
    let pattern = given["pattern"]
        .as_str()
        .map(str::trim)
        .filter(|p| !p.is_empty())?;
    let mut out = json!({
        "id": given["id"].as_str().filter(|i| !i.is_empty()).map(str::to_owned).unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        "pattern": pattern,
    });
    for key in ["argPattern", "lastUsedCommand", "lastResolvedPath"] {
        if let Some(v) = given[key].as_str() {
            out[key] = json!(v);
        }
    }
    if given["source"] == "allow-always" {
        out["source"] = json!("allow-always");
    }
    if let Some(at) = given["lastUsedAt"].as_f64().filter(|t| *t >= 0.0) {
        out["lastUsedAt"] = json!(at);
    }
    Some(out)
}

fn invalid(message: &str) -> ToolError {
    ToolError::new("INVALID_REQUEST", format!("INVALID_REQUEST: {message}"))
}

fn store_error(e: &std::io::Error) -> ToolError {
    ToolError::new(
        "UNAVAILABLE",
        format!("cannot write the exec approvals document: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(program: &str, args: &[&str], cwd: &str) -> Exec {
        Exec {
            executable: program.into(),
            argv: std::iter::once(program)
                .chain(args.iter().copied())
                .map(str::to_owned)
                .collect(),
            cwd: cwd.into(),
            env: vec![],
            bound: None,
        }
    }

    #[test]
    fn get_creates_set_needs_the_current_hash_and_normalises() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path());
        let first = store.get().unwrap();
        assert_eq!(first["exists"], true);
        assert_eq!(first["file"], empty());
        let hash = first["hash"].as_str().unwrap().to_owned();
        let file = json!({"version": 1, "agents": {"*": {"allowlist": [{"pattern": "/usr/bin/uname", "bogus": 1}, {"pattern": ""}, "/usr/bin/id"]}}, "extra": true});
        let stale = store
            .set(json!({"file": file, "baseHash": "nope"}))
            .unwrap_err();
        assert_eq!(
            stale.message,
            "INVALID_REQUEST: exec approvals changed; reload and retry"
        );
        let missing = store.set(json!({"file": file})).unwrap_err();
        assert!(missing.message.contains("base hash required"));
        let after = store.set(json!({"file": file, "baseHash": hash})).unwrap();
        let list = after["file"]["agents"]["*"]["allowlist"]
            .as_array()
            .unwrap();
        assert_eq!(list.len(), 2, "{after}");
        assert!(
            list.iter()
                .all(|e| e["id"].is_string() && e.get("bogus").is_none())
        );
        assert!(after["file"].get("extra").is_none(), "the closed schema");
        assert_ne!(after["hash"], hash);
        // Reopened: the same text, the same hash.
        assert_eq!(
            Store::open(dir.path()).get().unwrap()["hash"],
            after["hash"]
        );
        assert!(
            store
                .set(json!({"baseHash": after["hash"]}))
                .unwrap_err()
                .message
                .contains("file required")
        );
    }

    #[test]
    fn the_document_allows_listed_programs_and_restricts_with_deny_and_always() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path());
        let uname = exec("/usr/bin/uname", &["-a"], "/w");
        assert_eq!(store.verdict(&uname, None), Verdict::Silent);
        let hash = store.get().unwrap()["hash"].as_str().unwrap().to_owned();
        let bound = arg_pattern("/w", &["-s".to_owned()]);
        let file = json!({"version": 1, "agents": {
            "*": {"allowlist": [{"pattern": "/usr/bin/uname"}, {"pattern": "/usr/bin/id", "argPattern": bound}]},
            "ops": {"ask": "always"}}});
        store.set(json!({"file": file, "baseHash": hash})).unwrap();
        assert_eq!(store.verdict(&uname, Some("main")), Verdict::Allowed);
        let main = Some("main");
        assert_eq!(
            store.verdict(&exec("/usr/bin/id", &["-s"], "/w"), main),
            Verdict::Allowed
        );
        assert_eq!(
            store.verdict(&exec("/usr/bin/id", &["-u"], "/w"), main),
            Verdict::Silent,
            "bound to its arguments"
        );
        assert_eq!(
            store.verdict(&exec("/usr/bin/id", &["-s"], "/elsewhere"), main),
            Verdict::Silent,
            "and its directory"
        );
        assert_eq!(store.verdict(&uname, Some("ops")), Verdict::MustAsk);
        // No agent known: every agent's restriction applies.
        assert_eq!(store.verdict(&uname, None), Verdict::MustAsk);
        // A shell around one simple command is judged by that command.
        let real_uname = std::fs::canonicalize(which::which("uname").unwrap()).unwrap();
        let hash = store.get().unwrap()["hash"].as_str().unwrap().to_owned();
        let file = json!({"version": 1, "agents": {"*": {"allowlist": [{"pattern": real_uname}]}}});
        store.set(json!({"file": file, "baseHash": hash})).unwrap();
        let wrapped = exec("/bin/sh", &["-lc", "uname -s"], "/");
        assert_eq!(store.verdict(&wrapped, main), Verdict::Allowed);
        let piped = exec("/bin/sh", &["-lc", "uname -s; rm -rf x"], "/");
        assert_eq!(
            store.verdict(&piped, main),
            Verdict::Silent,
            "more than one command is the shell's"
        );
        // A program that only calls itself sh, and a script hidden behind
        // other flags, are not judged by the command they name.
        let dir = tempfile::tempdir().unwrap();
        let fake_sh = dir.path().join("sh");
        std::fs::write(&fake_sh, "#!/bin/true\n").unwrap();
        let impostor = exec(fake_sh.to_str().unwrap(), &["-c", "uname -s"], "/");
        assert_eq!(store.verdict(&impostor, main), Verdict::Silent);
        let rcfile = exec(
            "/bin/bash",
            &["--rcfile", "uname -s", "-c", "curl x | sh"],
            "/",
        );
        assert_eq!(store.verdict(&rcfile, main), Verdict::Silent);
        // A glob never crosses directories; relative patterns never match.
        let hash = store.get().unwrap()["hash"].as_str().unwrap().to_owned();
        let file = json!({"version": 1, "agents": {"*": {"allowlist": [{"pattern": "/usr/*"}, {"pattern": "uname"}]}}});
        store.set(json!({"file": file, "baseHash": hash})).unwrap();
        let direct = exec(real_uname.to_str().unwrap(), &[], "/");
        assert_eq!(store.verdict(&direct, main), Verdict::Silent);
    }

    #[test]
    fn command_hash_is_openclaws() {
        // Verified against OpenClaw 2026.9.6: `/bin/sh -lc "id -u"`.
        let argv = ["/bin/sh", "-lc", "id -u"].map(str::to_owned);
        assert_eq!(command_hash(&argv), "e5bf5b663b2c5a8c");
    }

    #[test]
    fn arg_pattern_is_openclaws() {
        // Verified against OpenClaw 2026.9.6 (cwd /tmp/research-node, `id -u`).
        assert_eq!(
            arg_pattern("/tmp/research-node", &["-u".to_owned()]),
            "sha256:cwd-argv:v1:9a4c2837aac332e84f773059880e3dcad0a090eb84ae77f7153c528367f6ce23"
        );
    }
}
