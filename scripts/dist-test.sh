#!/usr/bin/env bash
# The release archives, run: tests/dist.rs against what scripts/dist.sh
# made (CLAWBOT_DIST_DIR, default target/dist) — the Linux ones, the ARM
# builds under qemu-user — with an OpenClaw sandbox of its own for the
# node on the real gateway. Builds nothing: run scripts/dist.sh first.
#
#   scripts/dist-test.sh [TARGET ...]   default: every Linux archive there is
#
# The kernel starts the ARM executables through qemu-user (binfmt_misc), as
# it would start them on an ARM machine: the small executable's exec of the
# full one and the node's children need that, not only a `qemu-aarch64
# ./prog` in front. Installs Debian's qemu-user-static and registers its
# handlers when missing (as root). Arguments after `--` go to the test binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
say() { printf '[dist-test] %s\n' "$*" >&2; }

targets=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do targets+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
export CLAWBOT_DIST_DIR
CLAWBOT_DIST_DIR=$(realpath -m "${CLAWBOT_DIST_DIR:-target/dist}")
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
if [ ${#targets[@]} -eq 0 ]; then
  for archive in "$CLAWBOT_DIST_DIR/clawbot_router-$version-"*-linux-*.tar.gz; do
    [ -e "$archive" ] || { say "no archives in $CLAWBOT_DIST_DIR: run scripts/dist.sh"; exit 1; }
    name=$(basename "$archive" .tar.gz)
    targets+=("${name#clawbot_router-"$version"-}")
  done
fi
export CLAWBOT_DIST_TARGETS="${targets[*]}"

# qemu-user for what this machine cannot run itself.
handlers=()
for target in "${targets[@]}"; do
  case $target in
    x86_64-*) ;;
    aarch64-*) handlers+=(qemu-aarch64) ;;
    armv7-*) handlers+=(qemu-arm) ;;
    *) say "no way to run $target here"; exit 1 ;;
  esac
done
if [ ${#handlers[@]} -gt 0 ]; then
  if ! dpkg-query -W -f='${Status}' qemu-user-static 2>/dev/null | grep -q "install ok installed"; then
    say "installing qemu-user-static"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static >/dev/null
  fi
  binfmt=/proc/sys/fs/binfmt_misc
  if [ ! -e "$binfmt/register" ] && ! mount -t binfmt_misc binfmt_misc "$binfmt"; then
    say "cannot mount binfmt_misc at $binfmt (needs root, and a kernel with it): the ARM archives cannot run"
    exit 1
  fi
  grep -qx enabled "$binfmt/status" || { say "binfmt_misc is disabled on this kernel ($binfmt/status)"; exit 1; }
  for handler in "${handlers[@]}"; do
    # One registered by someone else counts only if its interpreter is
    # here or was opened at registration (flag F); else it is replaced.
    if [ -e "$binfmt/$handler" ]; then
      interpreter=$(sed -n 's/^interpreter //p' "$binfmt/$handler")
      if ! grep -q '^flags:.*F' "$binfmt/$handler" && [ ! -x "$interpreter" ]; then
        say "replacing $handler, whose interpreter $interpreter is not here"
        echo -1 >"$binfmt/$handler"
      fi
    fi
    if [ ! -e "$binfmt/$handler" ]; then
      say "registering $handler with binfmt_misc (for the whole kernel, as qemu-user-static's package does)"
      cat "/usr/lib/binfmt.d/$handler.conf" >"$binfmt/register"
    fi
    grep -qx enabled "$binfmt/$handler" || { say "$handler is registered but disabled"; exit 1; }
  done
fi

# A sandbox of its own (its own directory and ports).
export CLAWBOT_SANDBOX_DIR=${TMPDIR:-/tmp}/clawbot-dist-test
export CLAWBOT_SANDBOX_PORT=19689 CLAWBOT_SANDBOX_MODEL_PORT=19558
trap '"$here/sandbox.sh" down || true' EXIT
"$here/sandbox.sh" install
"$here/sandbox.sh" up
eval "$("$here/sandbox.sh" env)"
started=$SECONDS
say "running ${targets[*]}"
cargo test --locked --test dist -- --ignored --test-threads=1 --nocapture "$@"
say "ran in $((SECONDS - started)) s"
