#!/usr/bin/env bash
# Installs what the node's desktop tests need from Debian when it is
# missing (as root; otherwise it says how): Xvfb (a display without a
# screen), x11vnc (a VNC server on it), xdotool (the pointer and keys) and
# FFmpeg (captures). The node never starts any of them: they are the
# machine under test. scripts/e2e.sh and the desktop tests call it.
set -euo pipefail
packages=(xvfb x11vnc xdotool ffmpeg)
programs=(Xvfb x11vnc xdotool ffmpeg)
missing() {
  for p in "${programs[@]}"; do
    command -v "$p" >/dev/null 2>&1 || return 0
  done
  return 1
}
if ! missing; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "the desktop tests need ${programs[*]}: sudo apt-get install ${packages[*]}" >&2
  exit 1
fi
echo "[desktop] installing Debian's ${packages[*]}" >&2
# One install at a time: tests may ask at once (and chromium.sh may be
# installing too: apt holds its own lock, this one keeps us from racing it).
exec 9>/tmp/clawbot-apt-install.lock
flock 9
if ! missing; then exit 0; fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
! missing
