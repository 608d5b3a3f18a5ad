#!/usr/bin/env bash
# The Windows half, built and run for real (issue 14): cross-builds
# clawbot_router.exe, fake-openclaw.exe and the wsl.exe stand-in
# (tests/fixtures/wsl-exe) for x86_64-pc-windows-gnu, then runs the Windows
# suite (tests/windows.rs) against them under Wine, in a private WINEPREFIX.
#
# rustup cannot add the Windows target on these machines, so the build uses
# Debian's rustc-web (rustc as /usr/bin/rustc) with its standard library's
# source (rust-web-src) compiled by cargo's -Zbuild-std, and mingw's linker.
# Wine 8 lacks bcryptprimitives.dll (ProcessPrng, which Rust's std imports):
# a stand-in built here from scripts/windows/bcryptprimitives.c sits beside
# the executables. Installs what is missing (as root, from Debian).
#
# Settings (environment): CLAWBOT_WINDOWS_DIR (default target/windows).
# Arguments go to the test binary (a filter, --nocapture, ...).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
say() { printf '[windows] %s\n' "$*" >&2; }

# wine: wineserver (only recommended by wine64).
cross_name=windows
# shellcheck source=cross.sh
. "$here/cross.sh"
cross_install gcc-mingw-w64-x86-64 wine64 wine

out=$(realpath -m "${CLAWBOT_WINDOWS_DIR:-target/windows}")
target=x86_64-pc-windows-gnu
bin=$out/bin
mkdir -p "$bin"
cross_env "$target"
started=$SECONDS
say "building for $target with $($RUSTC --version)"
cargo build --locked "${cross_args[@]}" --bins --target-dir "$out/build"
cargo build --locked "${cross_args[@]}" --manifest-path tests/fixtures/wsl-exe/Cargo.toml \
  --target-dir "$out/build"
cp "$out/build/$target/debug/clawbot_router.exe" "$out/build/$target/debug/fake-openclaw.exe" \
  "$out/build/$target/debug/wsl.exe" "$bin/"
x86_64-w64-mingw32-gcc -O2 -shared -o "$bin/bcryptprimitives.dll" \
  scripts/windows/bcryptprimitives.c scripts/windows/bcryptprimitives.def
unset RUSTC RUSTC_BOOTSTRAP
say "built in $((SECONDS - started)) s"

export WINEPREFIX=$out/wineprefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
export CLAWBOT_WINE=/usr/lib/wine/wine64 CLAWBOT_WINDOWS_BIN=$bin
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  say "creating the Wine prefix $WINEPREFIX"
  "$CLAWBOT_WINE" wineboot --init >"$out/wineboot.log" 2>&1 || { cat "$out/wineboot.log" >&2; exit 1; }
fi
# One wineserver for the whole suite (each test's process starts faster),
# stopped whatever happens.
wineserver -k 2>/dev/null || true
wineserver -p
trap 'wineserver -k 2>/dev/null || true' EXIT
# The first program a fresh prefix runs may wait on Wine's own start-up
# (services, the prefix update); that wait is not the suite's.
started=$SECONDS
fake="Z:$(printf '%s' "$bin/fake-openclaw.exe" | tr / '\\')"
OPENCLAW_BIN="\"$fake\"" timeout 300 "$CLAWBOT_WINE" "$bin/clawbot_router.exe" -m warm-up >/dev/null
say "Wine ready in $((SECONDS - started)) s"
started=$SECONDS
cargo test --locked --test windows -- --ignored --test-threads=1 "$@"
say "suite ran in $((SECONDS - started)) s"
