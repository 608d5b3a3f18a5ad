#!/usr/bin/env bash
# Prints the path of a Chromium-family browser, installing Debian's
# `chromium` first when none is on PATH (as root; otherwise it says how).
# The node's browser tests (tests/node_browser.rs, tests/e2e_browser.rs)
# and scripts/e2e.sh call it.
set -euo pipefail
find_one() {
  for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  done
  return 1
}
if find_one; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "no Chromium on PATH: install one (Debian: sudo apt-get install chromium)" >&2
  exit 1
fi
echo "[chromium] installing Debian's chromium" >&2
# One install at a time: tests may ask at once.
exec 9>/tmp/clawbot-apt-install.lock
flock 9
if find_one; then exit 0; fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
find_one
