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
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_ARCH") != "x86_64"
        || target("CARGO_CFG_TARGET_OS") != "linux"
        || target("CARGO_CFG_TARGET_ENV") != "gnu"
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
