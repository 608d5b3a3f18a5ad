#!/usr/bin/env bash
# The end-to-end suite against real third-party software: brings the
# OpenClaw sandbox up (installing it on first use), runs tests/e2e_*.rs, then
# drives `clawbot_router mcp` with the official Python MCP client (installed
# by scripts/mcp-client.sh), the official TypeScript SDK and the official
# MCP conformance suite, and always takes the sandbox down again.
#
# It runs a sandbox of its own (its own directory and ports), so a sandbox
# left running by `scripts/sandbox.sh demo` is left alone.
#
# Beside it: a gateway serving wss:// with OpenClaw's self-signed
# certificate on loopback, and (as root) a remote one — bound to an address
# of a network namespace's veth pair (scripts/netns.sh), TLS too — whose
# clients run inside the namespace. Their `scripts/sandbox.sh env` exports
# go to files the tests read (CLAWBOT_E2E_TLS_ENV, CLAWBOT_E2E_REMOTE_ENV).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
base=${CLAWBOT_E2E_DIR:-${TMPDIR:-/tmp}/clawbot-e2e}
export CLAWBOT_SANDBOX_DIR=$base
export CLAWBOT_SANDBOX_PORT=${CLAWBOT_E2E_PORT:-19789}
export CLAWBOT_SANDBOX_MODEL_PORT=${CLAWBOT_E2E_MODEL_PORT:-19555}
tls=(CLAWBOT_SANDBOX_DIR="$base-tls" CLAWBOT_SANDBOX_PORT=19889 CLAWBOT_SANDBOX_MODEL_PORT=19556 CLAWBOT_SANDBOX_TLS=1)
remote=(CLAWBOT_SANDBOX_DIR="$base-remote" CLAWBOT_SANDBOX_PORT=19989 CLAWBOT_SANDBOX_MODEL_PORT=19557
        CLAWBOT_SANDBOX_TLS=1 CLAWBOT_SANDBOX_BIND=198.18.0.1)
jobs_up=()
cleanup() {
  # A gateway still starting is waited for, so `down` finds its pid file.
  for job in "${jobs_up[@]}"; do wait "$job" 2>/dev/null || true; done
  "$here/sandbox.sh" down || true
  env "${tls[@]}" "$here/sandbox.sh" down || true
  env "${remote[@]}" "$here/sandbox.sh" down || true
  if [ "$(id -u)" = 0 ]; then "$here/netns.sh" down || true; fi
  rm -rf "$base-tls" "$base-remote" "$base-tls.env" "$base-remote.env"
}
trap cleanup EXIT
"$here/sandbox.sh" install
# Debian's Chromium for the node's browser (tests/e2e_browser.rs).
"$here/chromium.sh" >/dev/null
# Debian's Xvfb, x11vnc, xdotool and FFmpeg for the node's desktop.
"$here/desktop.sh"
# The three gateways start side by side (about 15 s each).
# As root the second host is required: a failure to make it fails the suite.
"$here/sandbox.sh" up & main_up=$!; jobs_up+=("$main_up")
env "${tls[@]}" "$here/sandbox.sh" up & tls_up=$!; jobs_up+=("$tls_up")
remote_up=
if [ "$(id -u)" = 0 ]; then
  "$here/netns.sh" up
  env "${remote[@]}" "$here/sandbox.sh" up & remote_up=$!; jobs_up+=("$remote_up")
else
  export CLAWBOT_E2E_REMOTE_SKIP="network namespaces need root (ip netns); run as root to test a remote gateway"
fi
wait "$main_up"; wait "$tls_up"
env "${tls[@]}" "$here/sandbox.sh" env >"$base-tls.env"
export CLAWBOT_E2E_TLS_ENV="$base-tls.env"
if [ -n "$remote_up" ]; then
  wait "$remote_up"
  env "${remote[@]}" "$here/sandbox.sh" env >"$base-remote.env"
  export CLAWBOT_E2E_REMOTE_ENV="$base-remote.env"
fi
eval "$("$here/sandbox.sh" env)"
# The suite is split by idea (tests/e2e_*.rs: router, node, node_agents,
# doctor, tls, browser), one test crate each; every file of that name runs here, so
# a new one cannot be left out.
for file in "$here"/../tests/e2e_*.rs; do
  suite=$(basename "$file" .rs)
  cargo test --locked --test "$suite" -- --ignored --test-threads=1 "$@"
done
# The MCP server against real MCP clients: the official Python SDK (stdio
# and Streamable HTTP), the official TypeScript SDK (Streamable HTTP), and
# the official conformance suite's server scenarios (Streamable HTTP).
CLAWBOT_MCP_PYTHON=$("$here/mcp-client.sh") cargo test --locked --test mcp_client -- --ignored
