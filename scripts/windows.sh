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
packages=(rustc-web rust-web-src gcc-mingw-w64-x86-64 wine64 wine)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The crate's rust-version, at least: bookworm's own rustc-web is older
# than bookworm-security's, and an older one installed is not upgraded by
# the check above.
need=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
version() { /usr/bin/rustc --version | awk '{print $2}'; }
if [ "$(printf '%s\n' "$need" "$(version)" | sort -V | head -1)" != "$need" ]; then
  say "rustc-web $(version) is older than $need: upgrading"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc-web rust-web-src >/dev/null
  if [ "$(printf '%s\n' "$need" "$(version)" | sort -V | head -1)" != "$need" ]; then
    say "Debian offers rustc-web $(version) here; the crate needs $need (bookworm-security has newer)"
    exit 1
  fi
fi

out=$(realpath -m "${CLAWBOT_WINDOWS_DIR:-target/windows}")
target=x86_64-pc-windows-gnu
bin=$out/bin
mkdir -p "$bin"
export RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc AR_x86_64_pc_windows_gnu=x86_64-w64-mingw32-ar
started=$SECONDS
say "building for $target with $($RUSTC --version)"
cargo build --locked -Zbuild-std --target "$target" --bins --target-dir "$out/build"
cargo build --locked -Zbuild-std --target "$target" --manifest-path tests/fixtures/wsl-exe/Cargo.toml \
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
