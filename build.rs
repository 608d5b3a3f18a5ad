//! Links the small `clawbot_router` executable as a static PIE on x86_64
//! Linux with glibc; every other link is rustc's as usual.
//!
//! Why: its start-up is what a host pays per tool call, and the dynamic
//! loader (libc and libgcc_s found, mapped, relocated, and libgcc_s's CPU
//! probe) is the largest share of it we can remove (BENCHMARKS.md, item
//! 1). Why here: a build script's link arguments apply however the package
//! is built — `cargo build`, `cargo install --path` from any directory,
//! `cargo install --git` — where `.cargo/config.toml` applies only inside
//! this repository. Cargo cannot set `-C target-feature=+crt-static` for
//! one executable, so this gets the same link another way.
//!
//! How: rustc links a dynamic PIE, `-pie … -Wl,-Bdynamic -lgcc_s -lutil
//! -lrt -lpthread -lm -ldl -lc`. Two arguments added at the end make that
//! static: `-static-pie` (the C compiler then starts from `rcrt1.o` and
//! asks for no program interpreter; ASLR and full RELRO are kept), and a
//! search directory, looked in before the system's, where each of those
//! names is a linker script standing for the static archives
//! (`libgcc_s.so` → `libgcc_eh.a libgcc.a`, `libc.so` → `libc.a …`).
//! Were rustc to name another shared library, it would be linked
//! dynamically into a program without an interpreter:
//! `tests/front.rs` (`the_front_is_a_static_pie`) fails then.
//!
//! Where the C compiler finds no static glibc (`libc.a`: Debian's
//! libc6-dev has it, Fedora's glibc-static), the front is linked as rustc
//! links it, and the build says so.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries rustc names for std on glibc, and what each stands for.
const STATIC: &[(&str, &str)] = &[
    ("gcc_s", "GROUP(libgcc_eh.a libgcc.a)"),
    ("util", "INPUT(libutil.a)"),
    ("rt", "INPUT(librt.a)"),
    ("pthread", "INPUT(libpthread.a)"),
    ("m", "INPUT(libm.a)"),
    ("dl", "INPUT(libdl.a)"),
    ("c", "GROUP(libc.a libgcc.a libgcc_eh.a)"),
];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    identify();
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_ARCH") != "x86_64"
        || target("CARGO_CFG_TARGET_OS") != "linux"
        || target("CARGO_CFG_TARGET_ENV") != "gnu"
    {
        return;
    }
    // A build asked to be static (`-C target-feature=+crt-static`, as the
    // release archives are: scripts/dist.sh) is static already, every
    // executable of it.
    if target("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static")
    {
        return;
    }
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    let cc = std::env::var_os("RUSTC_LINKER").unwrap_or_else(|| "cc".into());
    // Every archive a script below names, found before it is named.
    if let Some(missing) = STATIC
        .iter()
        .flat_map(|(_, script)| archives(script))
        .find(|archive| !found(&cc, archive))
    {
        println!(
            "cargo::warning=no {missing} for {}: clawbot_router is linked dynamically, \
             and starts slower (install libc6-dev, or glibc-static)",
            Path::new(&cc).display()
        );
        return;
    }
    let dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("static-front");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, script) in STATIC {
        std::fs::write(dir.join(format!("lib{name}.so")), format!("{script}\n")).unwrap();
    }
    println!("cargo::rustc-link-arg-bin=clawbot_router=-static-pie");
    println!(
        "cargo::rustc-link-arg-bin=clawbot_router=-L{}",
        dir.display()
    );
}

/// What `--version` says besides the version: the target the build is for
/// and the commit it was built from — `CLAWBOT_BUILD_TARGET` and
/// `CLAWBOT_BUILD_COMMIT` for the crate's code. The commit is git's
/// (12 digits) when the source is a checkout, `CLAWBOT_BUILD_COMMIT` when a
/// packager building from a tarball sets it, and `unknown` otherwise.
fn identify() {
    println!("cargo::rerun-if-env-changed=CLAWBOT_BUILD_COMMIT");
    let target = std::env::var("TARGET").unwrap_or_default();
    println!("cargo::rustc-env=CLAWBOT_BUILD_TARGET={target}");
    let commit = std::env::var("CLAWBOT_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            // Only this package's own checkout: git searches upwards, and a
            // crate unpacked inside another repository is not its commit.
            let top = git(&["rev-parse", "--show-toplevel"])?;
            let here = std::env::var_os("CARGO_MANIFEST_DIR")?;
            if std::fs::canonicalize(&top).ok()? != std::fs::canonicalize(&here).ok()? {
                return None;
            }
            let head = git(&["rev-parse", "--short=12", "HEAD"])?;
            // Built again when HEAD moves: the files git keeps it in (a
            // branch's ref, loose or packed, and HEAD's log, which every
            // move appends to — a ref first created loose after a pack is
            // seen there), those that exist: cargo would rebuild every time
            // for one that does not.
            let mut watched = vec![
                git(&["rev-parse", "--git-path", "HEAD"]),
                git(&["rev-parse", "--git-path", "logs/HEAD"]),
                git(&["rev-parse", "--git-path", "packed-refs"]),
            ];
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                watched.push(git(&["rev-parse", "--git-path", &branch]));
            }
            for path in watched.into_iter().flatten() {
                if Path::new(&path).exists() {
                    println!("cargo::rerun-if-changed={path}");
                }
            }
            Some(head)
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo::rustc-env=CLAWBOT_BUILD_COMMIT={commit}");
}

/// `git ARGS` in the package's directory: its one line, if it answered.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(std::env::var_os("CARGO_MANIFEST_DIR")?)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let line = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !line.is_empty()).then_some(line)
}

/// The archives a linker script names (`GROUP(libgcc_eh.a libgcc.a)`).
fn archives(script: &str) -> impl Iterator<Item = &str> {
    script
        .split(|c: char| c == '(' || c == ')' || c.is_whitespace())
        .filter(|word| word.ends_with(".a"))
}

/// The C compiler finds `archive` on its library path.
fn found(cc: &std::ffi::OsStr, archive: &str) -> bool {
    Command::new(cc)
        .arg(format!("-print-file-name={archive}"))
        .output()
        .is_ok_and(|out| {
            let path = String::from_utf8_lossy(&out.stdout);
            out.status.success() && Path::new(path.trim()).is_absolute()
        })
}
