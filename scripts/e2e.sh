#!/usr/bin/env bash
# The end-to-end suite against the real OpenClaw: brings the sandbox up
# (installing it on first use), runs tests/e2e.rs, and always takes the
# sandbox down again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
trap '"$here/sandbox.sh" down' EXIT
"$here/sandbox.sh" up
eval "$("$here/sandbox.sh" env)"
cargo test --locked --test e2e -- --ignored --test-threads=1 "$@"
