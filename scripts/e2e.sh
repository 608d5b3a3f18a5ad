#!/usr/bin/env bash
# The end-to-end suite against real third-party software: brings the
# OpenClaw sandbox up (installing it on first use), runs tests/e2e.rs, then
# drives `clawbot_router mcp` with the official Python MCP client (installed
# by scripts/mcp-client.sh), and always takes the sandbox down again.
#
# It runs a sandbox of its own (its own directory and ports), so a sandbox
# left running by `scripts/sandbox.sh demo` is left alone.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
export CLAWBOT_SANDBOX_DIR=${CLAWBOT_E2E_DIR:-${TMPDIR:-/tmp}/clawbot-e2e}
export CLAWBOT_SANDBOX_PORT=${CLAWBOT_E2E_PORT:-19789}
export CLAWBOT_SANDBOX_MODEL_PORT=${CLAWBOT_E2E_MODEL_PORT:-19555}
trap '"$here/sandbox.sh" down' EXIT
"$here/sandbox.sh" up
eval "$("$here/sandbox.sh" env)"
cargo test --locked --test e2e -- --ignored --test-threads=1 "$@"
# The MCP server against a real MCP client (the official Python SDK).
CLAWBOT_MCP_PYTHON=$("$here/mcp-client.sh") cargo test --locked --test mcp_client -- --ignored
