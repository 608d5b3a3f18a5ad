//! Memory stays bounded whatever the child prints (issue 2, output §4).
//! Its own test binary, so `RUSAGE_CHILDREN` sees only this router run.

#![cfg(unix)]

mod common;

use common::*;

#[test]
fn a_flood_of_output_keeps_the_router_small() {
    let run = run(router_with("flood", &["--bytes", "512M"]).args(["-m", "hi", "--meta"]));
    let content = run.content();
    assert!(content.starts_with("BEGIN\n") && content.ends_with("\nEND\n"));
    assert_eq!(run.meta()["truncated"], serde_json::Value::Bool(true));
    // SAFETY: getrusage only fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) },
        0
    );
    let max_rss_kib = usage.ru_maxrss;
    // 256 KiB kept, a 64 KiB read buffer, the runtime and the binary itself.
    assert!(
        max_rss_kib < 32 * 1024,
        "the router peaked at {max_rss_kib} KiB while 512 MiB went through it"
    );
}
