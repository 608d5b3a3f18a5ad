//! The environment an agent's command runs with: which variables a call
//! may set, which inherited ones it never sees, and the fingerprint an
//! approval keeps of what a call set.
//!
//! The lists are OpenClaw 2026.9.6's own node-host policy
//! (`host-env-security`), so a command is refused here exactly where
//! OpenClaw's node host refuses it, plus what this node refused before
//! (every `PYTHON*` and `GIT_CONFIG*` variable). A call that sets a blocked
//! or malformed name is refused whole — never run with part of what it
//! asked for — with OpenClaw's words. `PATH` is one of them: the program a
//! call names is found on the node's own `PATH`, which is what its approver
//! was shown.

use std::collections::BTreeMap;

use super::ToolError;

/// Always refused as a call's variable.
const ALWAYS_BLOCKED: &[&str] = &["PATH"];
/// Refused as a call's variable and taken out of what commands inherit.
const BLOCKED_PREFIXES: &[&str] = &["DYLD_", "LD_", "BASH_FUNC_"];
/// Refused as a call's variable.
const BLOCKED_OVERRIDE_PREFIXES: &[&str] = &[
    "GIT_CONFIG",
    "NPM_CONFIG_",
    "CARGO_REGISTRIES_",
    "TF_VAR_",
    "PYTHON",
];
/// What a shell wrapper (`sh -c SCRIPT`) is given of a call's variables:
/// the terminal and the locale. A script reads any other variable as code.
const SHELL_KEEPS: &[&str] = &[
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "OPENCLAW_SUBAGENT_EXEC",
];

/// Never set by a call, never inherited: they make a program load or run
/// other code than it would (OpenClaw's `blockedEverywhereKeys`).
const BLOCKED_EVERYWHERE: &[&str] = &[
    "ANT_OPTS",
    "BASHOPTS",
    "BASH_ENV",
    "BROWSER",
    "BZR_EDITOR",
    "BZR_PLUGIN_PATH",
    "BZR_SSH",
    "CARGO_BUILD_RUSTC",
    "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTDOC",
    "CATALINA_OPTS",
    "CC",
    "CMAKE_CXX_COMPILER",
    "CMAKE_C_COMPILER",
    "CMAKE_TOOLCHAIN_FILE",
    "CONFIG_SHELL",
    "CONFIG_SITE",
    "CORECLR_PROFILER",
    "CPP",
    "CXX",
    "CXXCPP",
    "DOTNET_ADDITIONAL_DEPS",
    "DOTNET_STARTUP_HOOKS",
    "ELIXIR_ERL_OPTIONS",
    "EMACSLOADPATH",
    "ENV",
    "ERL_AFLAGS",
    "ERL_FLAGS",
    "ERL_ZFLAGS",
    "EXINIT",
    "FPATH",
    "GCONV_PATH",
    "GIT_ALLOW_PROTOCOL",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_DIR",
    "GIT_EDITOR",
    "GIT_EXEC_PATH",
    "GIT_EXTERNAL_DIFF",
    "GIT_HOOK_PATH",
    "GIT_INDEX_FILE",
    "GIT_NAMESPACE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_PROTOCOL_FROM_USER",
    "GIT_SEQUENCE_EDITOR",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_SSL_NO_VERIFY",
    "GIT_TEMPLATE_DIR",
    "GIT_WORK_TREE",
    "GLIBC_TUNABLES",
    "GRADLE_OPTS",
    "GVIMINIT",
    "HELM_PLUGINS",
    "HGEDITOR",
    "HGMERGE",
    "HGRCPATH",
    "HOSTALIASES",
    "IFS",
    "JAVA_OPTS",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "JULIA_EDITOR",
    "KSH_ENV",
    "LUA_INIT",
    "LUA_INIT_5_1",
    "LUA_INIT_5_2",
    "LUA_INIT_5_3",
    "LUA_INIT_5_4",
    "MAKE",
    "MAKEFLAGS",
    "MAVEN_OPTS",
    "MFLAGS",
    "MYVIMRC",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REDIRECT_WARNINGS",
    "NODE_REPL_EXTERNAL_MODULE",
    "NODE_REPL_HISTORY",
    "NODE_V8_COVERAGE",
    "PACKER_PLUGIN_PATH",
    "PERL5LIB",
    "PERL5OPT",
    "PS4",
    "PYTHONBREAKPOINT",
    "PYTHONHOME",
    "PYTHONPATH",
    "RUBYLIB",
    "RUBYOPT",
    "RUBYSHELL",
    "RUSTC",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "RUSTDOC",
    "R_ENVIRON",
    "R_ENVIRON_USER",
    "R_PROFILE",
    "R_PROFILE_USER",
    "SBT_OPTS",
    "SHELL",
    "SHELLOPTS",
    "SSLKEYLOGFILE",
    "SUDO_ASKPASS",
    "SVN_EDITOR",
    "SVN_SSH",
    "TCLLIBPATH",
    "VAGRANT_VAGRANTFILE",
    "VIMINIT",
    "_JAVA_OPTIONS",
];

/// Never set by a call: where a program finds its configuration, its
/// editor, its proxies and its credentials (OpenClaw's
/// `blockedOverrideOnlyKeys`).
const BLOCKED_OVERRIDE: &[&str] = &[
    "ALL_PROXY",
    "AMQP_URL",
    "ANSIBLE_CALLBACK_PLUGINS",
    "ANSIBLE_COLLECTIONS_PATH",
    "ANSIBLE_CONFIG",
    "ANSIBLE_CONNECTION_PLUGINS",
    "ANSIBLE_FILTER_PLUGINS",
    "ANSIBLE_INVENTORY_PLUGINS",
    "ANSIBLE_LIBRARY",
    "ANSIBLE_LOOKUP_PLUGINS",
    "ANSIBLE_MODULE_UTILS",
    "ANSIBLE_REMOTE_TEMP",
    "ANSIBLE_ROLES_PATH",
    "ANSIBLE_STRATEGY_PLUGINS",
    "AWS_ACCESS_KEY_ID",
    "AWS_CONFIG_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SECURITY_TOKEN",
    "AWS_SESSION_TOKEN",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AZURE_AUTH_LOCATION",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
    "BUNDLE_GEMFILE",
    "BUN_CONFIG_REGISTRY",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_HOME",
    "CFLAGS",
    "CGO_CFLAGS",
    "CGO_LDFLAGS",
    "CLASSPATH",
    "COMPOSER_HOME",
    "CONDA_DEFAULT_ENV",
    "CONDA_PREFIX",
    "CORECLR_PROFILER_PATH",
    "CPATH",
    "CPLUS_INCLUDE_PATH",
    "CURL_CA_BUNDLE",
    "CURL_HOME",
    "C_INCLUDE_PATH",
    "DATABASE_URL",
    "DENO_DIR",
    "DOCKER_CERT_PATH",
    "DOCKER_CONTEXT",
    "DOCKER_HOST",
    "DOCKER_TLS_VERIFY",
    "EDITOR",
    "FCEDIT",
    "GEM_HOME",
    "GEM_PATH",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GITLAB_TOKEN",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_ASKPASS",
    "GIT_COMMON_DIR",
    "GIT_DIR",
    "GIT_INDEX_FILE",
    "GIT_NAMESPACE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_PAGER",
    "GIT_PROXY_COMMAND",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_SSL_NO_VERIFY",
    "GIT_WORK_TREE",
    "GOENV",
    "GOFLAGS",
    "GONOPROXY",
    "GONOSUMCHECK",
    "GONOSUMDB",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOPATH",
    "GOPRIVATE",
    "GOPROXY",
    "GRADLE_USER_HOME",
    "HELM_HOME",
    "HGRCPATH",
    "HISTFILE",
    "HOME",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "KUBECONFIG",
    "LDFLAGS",
    "LESSCLOSE",
    "LESSOPEN",
    "LIBRARY_PATH",
    "LUA_CPATH",
    "LUA_PATH",
    "MAKEFLAGS",
    "MANPAGER",
    "MFLAGS",
    "MONGODB_URI",
    "NODE_AUTH_TOKEN",
    "NODE_EXTRA_CA_CERTS",
    "NODE_TLS_REJECT_UNAUTHORIZED",
    "NO_PROXY",
    "NPM_TOKEN",
    "OBJC_INCLUDE_PATH",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "PAGER",
    "PERL5DB",
    "PERL5DBCMD",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "PIP_CONFIG_FILE",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_INDEX_URL",
    "PIP_PYPI_URL",
    "PIP_TRUSTED_HOST",
    "PROMPT_COMMAND",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "REDIS_URL",
    "REQUESTS_CA_BUNDLE",
    "RUSTC_WRAPPER",
    "RUSTFLAGS",
    "RUSTUP_DIST_ROOT",
    "RUSTUP_DIST_SERVER",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "RUSTUP_UPDATE_ROOT",
    "R_LIBS_USER",
    "SSH_ASKPASS",
    "SSH_AUTH_SOCK",
    "SSL_CERT_DIR",
    "SSL_CERT_FILE",
    "SUDO_EDITOR",
    "SYSTEMROOT",
    "TF_CLI_CONFIG_FILE",
    "TF_PLUGIN_CACHE_DIR",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_PYTHON",
    "VIRTUAL_ENV",
    "VISUAL",
    "WGETRC",
    "WINDIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_CONFIG_HOME",
    "XDG_DATA_DIRS",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
    "XDG_STATE_HOME",
    "YARN_RC_FILENAME",
    "ZDOTDIR",
];

/// Of [`BLOCKED_OVERRIDE`], those a command may still inherit from the
/// node's own environment (OpenClaw's `allowedInheritedOverrideOnlyKeys`).
const ALLOWED_INHERITED: &[&str] = &[
    "ALL_PROXY",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AZURE_AUTH_LOCATION",
    "CURL_CA_BUNDLE",
    "DOCKER_CERT_PATH",
    "DOCKER_CONTEXT",
    "DOCKER_HOST",
    "DOCKER_TLS_VERIFY",
    "GIT_PAGER",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GRADLE_USER_HOME",
    "HISTFILE",
    "HOME",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "KUBECONFIG",
    "MANPAGER",
    "NODE_EXTRA_CA_CERTS",
    "NODE_TLS_REJECT_UNAUTHORIZED",
    "NO_PROXY",
    "PAGER",
    "REQUESTS_CA_BUNDLE",
    "RUSTUP_DIST_ROOT",
    "RUSTUP_DIST_SERVER",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "RUSTUP_UPDATE_ROOT",
    "SSH_AUTH_SOCK",
    "SSL_CERT_DIR",
    "SSL_CERT_FILE",
    "SYSTEMROOT",
    "WINDIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_CONFIG_HOME",
    "XDG_DATA_DIRS",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
    "XDG_STATE_HOME",
    "ZDOTDIR",
];

/// A call's variables as they will be applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Set for the command.
    pub kept: Vec<(String, String)>,
    /// Asked for and not given (a shell wrapper gets only the terminal's
    /// and the locale's).
    pub dropped: Vec<String>,
}

/// Checks the variables a call asks for. Any blocked or malformed name
/// refuses the whole call, as OpenClaw's node host does; a shell wrapper
/// keeps only the terminal's and the locale's.
pub fn overrides(
    env: &BTreeMap<String, String>,
    shell_wrapper: bool,
) -> Result<Overrides, ToolError> {
    let mut blocked = Vec::new();
    let mut invalid = Vec::new();
    let mut twice = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut out = Overrides::default();
    for (raw, value) in env {
        let key = raw.trim();
        if !portable(key) {
            invalid.push(raw.clone());
            continue;
        }
        // `FOO` and `FOO ` set one variable, the later winning: which
        // value runs would be a matter of spelling, not of what was shown.
        if !seen.insert(key) {
            twice.push(key.to_owned());
            continue;
        }
        let upper = key.to_ascii_uppercase();
        // A pager set to nothing (or `cat`) only keeps output flowing.
        let harmless_pager =
            matches!(upper.as_str(), "PAGER" | "GIT_PAGER") && matches!(value.as_str(), "" | "cat");
        if !harmless_pager && blocked_override(&upper) {
            blocked.push(upper);
            continue;
        }
        let value = if harmless_pager {
            String::new()
        } else {
            value.clone()
        };
        if shell_wrapper && !harmless_pager && !shell_keeps(&upper) {
            out.dropped.push(key.to_owned());
        } else {
            out.kept.push((key.to_owned(), value));
        }
    }
    if blocked.is_empty() && invalid.is_empty() && twice.is_empty() {
        return Ok(out);
    }
    blocked.sort();
    blocked.dedup();
    invalid.sort();
    invalid.dedup();
    let mut parts = Vec::new();
    if !blocked.is_empty() {
        parts.push(format!("blocked override keys: {}", blocked.join(", ")));
    }
    if !invalid.is_empty() {
        parts.push(format!(
            "invalid non-portable override keys: {}",
            invalid.join(", ")
        ));
    }
    if !twice.is_empty() {
        twice.sort();
        twice.dedup();
        parts.push(format!(
            "override keys given twice once blanks are trimmed: {}",
            twice.join(", ")
        ));
    }
    Err(ToolError::new(
        "INVALID_REQUEST",
        format!(
            "SYSTEM_RUN_DENIED: environment override rejected ({})",
            parts.join("; ")
        ),
    ))
}

/// Whether an inherited variable is kept from an agent's command (the
/// node's own credentials and loader settings).
pub fn blocked_inherited(key: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    BLOCKED_PREFIXES.iter().any(|p| upper.starts_with(p))
        || BLOCKED_EVERYWHERE.binary_search(&upper.as_str()).is_ok()
        || (BLOCKED_OVERRIDE.binary_search(&upper.as_str()).is_ok()
            && ALLOWED_INHERITED.binary_search(&upper.as_str()).is_err())
}

/// OpenClaw's fingerprint of a call's variables: SHA-256 of the JSON array
/// of `[name, value]` pairs in name order; none set, no fingerprint.
pub fn fingerprint(env: &[(String, String)]) -> Option<String> {
    if env.is_empty() {
        return None;
    }
    let mut pairs: Vec<&(String, String)> = env.iter().collect();
    pairs.sort();
    let json = serde_json::to_string(&pairs).expect("strings serialise");
    Some(super::audit::digest(&json))
}

fn blocked_override(upper: &str) -> bool {
    ALWAYS_BLOCKED.contains(&upper)
        || BLOCKED_PREFIXES.iter().any(|p| upper.starts_with(p))
        || BLOCKED_OVERRIDE_PREFIXES
            .iter()
            .any(|p| upper.starts_with(p))
        || BLOCKED_EVERYWHERE.binary_search(&upper).is_ok()
        || BLOCKED_OVERRIDE.binary_search(&upper).is_ok()
        || cargo_linker(upper)
}

/// `CARGO_TARGET_<TRIPLE>_LINKER|RUNNER`: a program cargo runs.
fn cargo_linker(upper: &str) -> bool {
    upper
        .strip_prefix("CARGO_TARGET_")
        .and_then(|rest| {
            rest.strip_suffix("_LINKER")
                .or_else(|| rest.strip_suffix("_RUNNER"))
        })
        .is_some_and(|triple| {
            !triple.is_empty()
                && triple
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        })
}

fn shell_keeps(upper: &str) -> bool {
    SHELL_KEEPS.contains(&upper) || upper.starts_with("LC_")
}

/// A name every shell can carry: a letter or `_`, then letters, digits,
/// `_` (and the parentheses of Windows' `ProgramFiles(x86)`).
fn portable(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'(' | b')'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_lists_are_sorted_for_binary_search() {
        for list in [BLOCKED_EVERYWHERE, BLOCKED_OVERRIDE, ALLOWED_INHERITED] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
    }

    #[test]
    fn blocked_and_malformed_names_refuse_the_whole_call_as_openclaw_words_it() {
        let e = overrides(
            &env(&[
                ("PATH", "/tmp"),
                ("NODE_OPTIONS", "-r x"),
                ("BAD-KEY", "1"),
                ("OK", "1"),
            ]),
            false,
        )
        .unwrap_err();
        assert_eq!(e.code, "INVALID_REQUEST");
        assert_eq!(
            e.message,
            "SYSTEM_RUN_DENIED: environment override rejected (blocked override keys: NODE_OPTIONS, PATH; invalid non-portable override keys: BAD-KEY)"
        );
        for key in [
            "LD_PRELOAD",
            "path",
            "HOME",
            "PYTHONSTARTUP",
            "GIT_CONFIG_GLOBAL",
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER",
            "GITHUB_TOKEN",
            "BASH_FUNC_x%%",
        ] {
            assert!(overrides(&env(&[(key, "x")]), false).is_err(), "{key}");
        }
        let ok = overrides(&env(&[("GREETING", "hi"), ("PAGER", "cat")]), false).unwrap();
        assert_eq!(
            ok.kept,
            [
                ("GREETING".into(), "hi".into()),
                ("PAGER".into(), String::new())
            ]
        );
    }

    #[test]
    fn a_shell_wrapper_gets_only_the_terminal_and_the_locale() {
        let got = overrides(
            &env(&[
                ("GREETING", "hi"),
                ("LANG", "C"),
                ("LC_TIME", "C"),
                ("TERM", "dumb"),
            ]),
            true,
        )
        .unwrap();
        assert_eq!(got.dropped, ["GREETING"]);
        assert_eq!(got.kept.len(), 3);
    }

    #[test]
    fn the_node_keeps_its_credentials_and_loader_settings_from_commands() {
        for key in [
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "LD_PRELOAD",
            "NODE_OPTIONS",
            "SHELL",
        ] {
            assert!(blocked_inherited(key), "{key}");
        }
        for key in [
            "HOME",
            "PATH",
            "LANG",
            "HTTPS_PROXY",
            "SSH_AUTH_SOCK",
            "USER",
        ] {
            assert!(!blocked_inherited(key), "{key}");
        }
    }

    #[test]
    fn the_fingerprint_is_openclaws() {
        // Vectors from OpenClaw 2026.9.6's buildSystemRunApprovalEnvBinding.
        let pairs = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(fingerprint(&[]), None);
        assert_eq!(
            fingerprint(&pairs(&[("FOO", "bar")])).unwrap(),
            "c0a99ace5269b1fa63a9e666bee583d2f5298354494a23dbb42b06abce494159"
        );
        assert_eq!(
            fingerprint(&pairs(&[("B", "2"), ("A", "1")])).unwrap(),
            "b520ef3fdba6b3bf44b4f861557837d41373b19d5667a5ad2e9b0b46f1f3baf1"
        );
        assert_eq!(
            fingerprint(&pairs(&[
                ("A", "line1\nline2"),
                ("B", "tab\there"),
                ("C", "quote\"back\\slash")
            ]))
            .unwrap(),
            "dfacc534b3553c317a67252b45a2b2e190f3812c410a10fc13a20697a3c0003a"
        );
        assert_eq!(
            fingerprint(&pairs(&[("X", "é☃")])).unwrap(),
            "4b62a4f2bb0b14296e4b0d1db3e4f326aad5d2b95933ca97a13737544a43a444"
        );
    }
}
