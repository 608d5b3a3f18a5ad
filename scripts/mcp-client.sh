#!/usr/bin/env bash
# Installs the official Python MCP client (PyPI `mcp`, pinned) into a venv
# in the sandbox cache, once, and prints that venv's python: the real MCP
# client tests/mcp_client.rs drives `clawbot_router mcp` with.
set -euo pipefail
cache=${CLAWBOT_SANDBOX_CACHE:-$HOME/.cache/clawbot-sandbox}
venv="$cache/mcp-venv"
version=2.3.0
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$version')" 2>/dev/null; then
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$version" >&2
fi
echo "$venv/bin/python"
