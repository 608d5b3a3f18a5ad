//! The release archives (`scripts/dist.sh`), taken as a user takes them:
//! checked against `SHA256SUMS`, unpacked, and run — the ARM ones under
//! qemu-user, which the kernel starts for them (binfmt_misc), as it would
//! start them on a Raspberry Pi. Each Linux build:
//! - holds what the README says, and nothing it would need from the machine
//!   (no program interpreter, no shared library), for its machine;
//! - names its version, target and commit, and prints the same tool
//!   declaration as this checkout's build (the small executable handing
//!   over to the full one, an `exec` of the same architecture); resolves
//!   `localhost` through /etc/hosts with its static glibc;
//! - runs a router call whose openclaw is a host script: the merged output
//!   in write order, invalid UTF-8, the message byte for byte, the timeout
//!   with a grandchild that ignores TERM, and its whole tree stopped when
//!   the router is killed outright (the sentinel, forked under qemu);
//! - joins the real OpenClaw gateway as a node, is approved, and answers
//!   `system.which`, `read_file` and `system_info` (its own architecture)
//!   invoked through the gateway.
//!
//! Only `scripts/dist-test.sh` runs these (`#[ignore]` otherwise): it sets
//! `CLAWBOT_DIST_DIR` (the archives), `CLAWBOT_DIST_TARGETS` (those to run)
//! and brings up an OpenClaw sandbox.

#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::e2e::{RealNode, nodes_invoke};
use common::*;
use serde_json::json;
use sha2::{Digest, Sha256};

const WHY: &str = "needs the release archives: scripts/dist-test.sh";
const VERSION: &str = env!("CARGO_PKG_VERSION");
const TIMEOUT_LINE_1S: &str =
    "[clawbot_router] 远程 clawBot 处理超时（超过 1 秒未完成），本次结果已中止。";

fn dist() -> PathBuf {
    PathBuf::from(std::env::var_os("CLAWBOT_DIST_DIR").expect(WHY))
}

/// The Linux targets to run (the Windows one runs under Wine elsewhere).
fn targets() -> Vec<String> {
    let targets: Vec<String> = std::env::var("CLAWBOT_DIST_TARGETS")
        .expect(WHY)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert!(!targets.is_empty(), "CLAWBOT_DIST_TARGETS is empty");
    targets
}

fn archive(target: &str) -> PathBuf {
    dist().join(format!("clawbot_router-{VERSION}-{target}.tar.gz"))
}

/// The commit the archives must name: this checkout's
/// (`CLAWBOT_DIST_COMMIT` for archives made from another of its commits).
fn commit() -> String {
    if let Ok(commit) = std::env::var("CLAWBOT_DIST_COMMIT") {
        return commit;
    }
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// An archive unpacked as a user unpacks it, into a directory of its own.
struct Unpacked {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Unpacked {
    fn new(target: &str) -> Self {
        let dir = tempdir();
        let out = Command::new("tar")
            .arg("-xzf")
            .arg(archive(target))
            .arg("-C")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let root = dir
            .path()
            .join(format!("clawbot_router-{VERSION}-{target}"));
        Unpacked { _dir: dir, root }
    }

    fn exe(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

fn output(cmd: &mut Command) -> (String, String, Option<i32>) {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

#[test]
#[ignore = "needs the release archives: scripts/dist-test.sh"]
fn every_archive_matches_sha256sums_and_holds_what_the_readme_says() {
    let sums = std::fs::read_to_string(dist().join("SHA256SUMS")).unwrap();
    let mut listed = Vec::new();
    for line in sums.lines() {
        let (hash, name) = line.split_once("  ").expect("sha256sum's format");
        let bytes = std::fs::read(dist().join(name)).unwrap();
        let actual: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(actual, hash, "{name}");
        listed.push(name.to_owned());
    }
    for target in targets() {
        let name = format!("clawbot_router-{VERSION}-{target}.tar.gz");
        assert!(listed.contains(&name), "{name} not in SHA256SUMS:\n{sums}");
        let (list, err, code) = output(Command::new("tar").arg("-tvzf").arg(archive(&target)));
        assert_eq!(code, Some(0), "{err}");
        let mut files: Vec<(String, String)> = list
            .lines()
            .filter(|l| !l.starts_with('d'))
            .map(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                let path = words.last().unwrap();
                (
                    path.rsplit('/').next().unwrap().to_owned(),
                    format!("{} {}", words[0], words[1]),
                )
            })
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                ("LICENSE", "-rw-r--r-- 0/0"),
                ("README.md", "-rw-r--r-- 0/0"),
                ("THIRD-PARTY.md", "-rw-r--r-- 0/0"),
                ("clawbot_router", "-rwxr-xr-x 0/0"),
                ("clawbot_router-full", "-rwxr-xr-x 0/0"),
                ("fake-openclaw", "-rwxr-xr-x 0/0"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned())),
            "{list}"
        );
        let unpacked = Unpacked::new(&target);
        let readme = std::fs::read_to_string(unpacked.root.join("README.md")).unwrap();
        assert_eq!(
            readme,
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
                .unwrap()
        );
        assert!(readme.contains("## Install"), "the install section");
        let notices = std::fs::read_to_string(unpacked.root.join("THIRD-PARTY.md")).unwrap();
        for needle in [
            &format!("for {target}"),
            "| tokio |",
            "| rustls |",
            "| ring |",
            "GNU C Library",
            "Permission is hereby granted",
        ] {
            assert!(notices.contains(needle), "{target}: {needle}");
        }
    }
}

/// `readelf` on an executable: its header, program headers and dynamic
/// section, as one text.
fn readelf(path: &Path) -> String {
    let (text, err, code) = output(Command::new("readelf").arg("-hldW").arg(path));
    assert_eq!(code, Some(0), "{err}");
    text
}

#[test]
#[ignore = "needs the release archives: scripts/dist-test.sh"]
fn the_executables_are_static_and_for_their_machine() {
    for target in targets() {
        let unpacked = Unpacked::new(&target);
        for exe in ["clawbot_router", "clawbot_router-full", "fake-openclaw"] {
            let elf = readelf(&unpacked.exe(exe));
            let machine = match target.split('-').next().unwrap() {
                "x86_64" => "Advanced Micro Devices X86-64",
                "aarch64" => "AArch64",
                "armv7" => "ARM",
                other => panic!("no machine for {other}"),
            };
            assert!(
                elf.lines()
                    .any(|l| l.trim() == format!("Machine:                           {machine}")),
                "{target} {exe}:\n{elf}"
            );
            if target.starts_with("armv7") {
                assert!(elf.contains("hard-float ABI"), "{target} {exe}:\n{elf}");
            }
            assert!(
                !elf.contains("program interpreter") && !elf.contains("(NEEDED)"),
                "{target} {exe} is not static:\n{elf}"
            );
        }
    }
}

#[test]
#[ignore = "needs the release archives: scripts/dist-test.sh"]
fn each_names_its_version_target_and_commit_and_declares_the_same_tool() {
    let commit = commit();
    let (ours, _, _) = output(router().args(["schema", "--format", "mcp"]));
    for target in targets() {
        let unpacked = Unpacked::new(&target);
        let (version, err, code) =
            output(program(&unpacked.exe("clawbot_router")).arg("--version"));
        assert_eq!(code, Some(0), "{target}: {err}");
        assert_eq!(
            version,
            format!("clawbot_router {VERSION} ({target}, commit {commit})\n")
        );
        // Handed over to clawbot_router-full beside it.
        let (schema, err, code) =
            output(program(&unpacked.exe("clawbot_router")).args(["schema", "--format", "mcp"]));
        assert_eq!(code, Some(0), "{target}: {err}");
        assert_eq!(schema, ours, "{target}");
        // glibc linked in statically still resolves a name through
        // /etc/hosts: "localhost" is looked up, and a closed port refuses.
        let port = free_port().to_string();
        let closed = run(program(&unpacked.exe("clawbot_router")).args([
            "-m",
            "hi",
            "--lang",
            "en",
            "--via",
            "gateway",
            "--gateway",
            &format!("ws://localhost:{port}"),
        ]));
        // (Refused on 127.0.0.1, or on ::1 where IPv6 is off: either way
        // the name was found.)
        let content = closed.content();
        assert!(
            content.contains(&format!("cannot reach localhost:{port}: "))
                && !content.contains("lookup"),
            "{target}: {content}"
        );
        let (fake, _, code) = output(program(&unpacked.exe("fake-openclaw")).arg("--version"));
        assert_eq!(
            (fake.as_str(), code),
            ("OpenClaw 2026.9.6 (fake)\n", Some(0))
        );
    }
}

/// A host script as openclaw: `body` after a line recording its argv.
fn stand_in(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("openclaw-stand-in");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nprintf '%s\\0' \"$@\" > '{}'\n{body}",
            dir.join("argv").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

#[test]
#[ignore = "needs the release archives: scripts/dist-test.sh"]
fn a_router_call_runs_a_host_openclaw_merges_times_out_and_stops_its_tree() {
    let message = "it's \"quoted\" $(touch pwned) `x` \\ 日本\n\tsecond line";
    for target in targets() {
        let unpacked = Unpacked::new(&target);
        let front = unpacked.exe("clawbot_router");

        // Merged output in write order, invalid UTF-8 replaced, the message
        // byte for byte.
        let dir = tempdir();
        let openclaw = stand_in(
            dir.path(),
            "i=0\nwhile [ $i -lt 200 ]; do echo \"out $i\"; echo \"err $i\" >&2; i=$((i+1)); done\n\
             printf 'bad \\377 byte\\n'\n",
        );
        let said = run(program(&front)
            .current_dir(dir.path())
            .env("OPENCLAW_BIN", &openclaw)
            .args(["-m", message, "--agent", "ops"]));
        let mut expected: String = (0..200).map(|i| format!("out {i}\nerr {i}\n")).collect();
        expected.push_str("bad \u{FFFD} byte\n");
        assert_eq!(said.content(), expected, "{target}");
        assert_eq!(said.code, Some(0));
        let argv = std::fs::read(dir.path().join("argv")).unwrap();
        let argv: Vec<&[u8]> = argv.split(|b| *b == 0).filter(|a| !a.is_empty()).collect();
        assert!(
            argv.windows(2)
                .any(|w| w[0] == b"--message" && w[1] == message.as_bytes()),
            "{target}: {argv:?}"
        );
        assert!(!dir.path().join("pwned").exists());

        // The timeout: a grandchild ignoring TERM (ignored signals survive
        // exec, so its sleep ignores it too) is killed after the grace.
        let pid_file = dir.path().join("pids");
        let body = format!(
            "echo thinking...\n(trap '' TERM; echo $(exec sh -c 'echo $PPID') >> '{p}'; exec sleep 300) &\n\
             echo $$ >> '{p}'\nsleep 300\n",
            p = pid_file.display()
        );
        let openclaw = stand_in(dir.path(), &body);
        let timed = run(program(&front).env("OPENCLAW_BIN", &openclaw).args([
            "-m",
            "hi",
            "--timeout",
            "1",
            "--grace",
            "0.5",
        ]));
        assert_eq!(
            timed.content(),
            format!("thinking...\n{TIMEOUT_LINE_1S}"),
            "{target}"
        );
        // Slower under emulation; still bounded.
        assert!(
            timed.elapsed < Duration::from_secs(10),
            "{:?}",
            timed.elapsed
        );
        let pids = pids(&pid_file);
        assert_eq!(pids.len(), 2, "{target}: {pids:?}");
        assert_all_gone(&pids);

        // Killed outright, mid-call: the sentinel (forked under qemu) and
        // the parent-death signal stop the tree.
        std::fs::remove_file(&pid_file).unwrap();
        let router = program(&front)
            .env("OPENCLAW_BIN", &openclaw)
            .args(["-m", "hi", "--timeout", "60"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut router = KillOnDrop(router);
        let tree = wait_for_pids(&pid_file, 2);
        router.0.kill().unwrap();
        router.0.wait().unwrap();
        assert_gone_in_time(&tree, &target);
    }
}

#[test]
#[ignore = "needs the release archives and the OpenClaw sandbox: scripts/dist-test.sh"]
fn each_joins_the_real_gateway_as_a_node_and_answers_through_it() {
    for target in targets() {
        let unpacked = Unpacked::new(&target);
        let name = format!("dist-{target}");
        let node = RealNode::start_program(
            Some(&unpacked.exe("clawbot_router")),
            &name,
            &["--approval", "deny"],
            None,
            &[],
        );
        let began = Instant::now();
        node.approve_surface();
        eprintln!("{target}: approved {:?} after start", began.elapsed());
        let which = node.invoke("system.which", json!({"bins": ["sh"]}));
        assert!(
            which["payload"]["bins"]["sh"]
                .as_str()
                .is_some_and(|p| p.ends_with("/sh")),
            "{target}: {which}"
        );
        let read = node.invoke("read_file", json!({"path": "peer.txt"}));
        assert_eq!(
            read["payload"]["content"], "peer-file-content-42\n",
            "{target}: {read}"
        );
        let info = node.invoke("system_info", json!({}));
        let arch = target.split('-').next().unwrap();
        let arch = if arch == "armv7" { "arm" } else { arch };
        assert_eq!(info["payload"]["arch"], arch, "{target}: {info}");
        // A command the owner refuses stays refused on this build too.
        let refused = nodes_invoke(&name, "run_command", &json!({"command": "touch y"}), None);
        assert!(
            refused.said.contains("USER_REJECTED"),
            "{target}: {}",
            refused.said
        );
        assert!(!node.ws.join("y").exists());
    }
}
