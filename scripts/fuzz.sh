#!/usr/bin/env bash
# Fuzzing what strangers send: every decoder a peer feeds has a
# coverage-guided target in fuzz/ (libFuzzer with AddressSanitizer, through
# cargo-fuzz). Builds them all once, then runs each from its committed
# corpus (fuzz/corpus/TARGET) for a bounded time and prints how many inputs
# it ran. A crash (a panic, a broken invariant, a sanitizer report), a leak,
# an input slower than TIMEOUT seconds or a run past RSS_MB fails the script;
# cargo-fuzz then names the input it kept under fuzz/artifacts/TARGET/.
#
#   scripts/fuzz.sh                 every target, CLAWBOT_FUZZ_SECONDS (20) each
#   scripts/fuzz.sh forbidden ...   only those targets
#   scripts/fuzz.sh --cmin          minimise the committed corpora instead
#
# The mutations follow a fixed seed (CLAWBOT_FUZZ_SEED, 1): CI tries the
# same inputs on every run, so what it finds a run here found first — a
# gate that does not fail at random. CLAWBOT_FUZZ_SEED=0 takes a new seed
# each run, for exploring.
#
# New inputs go to a scratch directory, never into the committed corpus:
# adding what a long local run found is `cargo fuzz run TARGET
# fuzz/corpus/TARGET` followed by --cmin.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
SECONDS_EACH=${CLAWBOT_FUZZ_SECONDS:-20}
SEED=${CLAWBOT_FUZZ_SEED:-1}
TIMEOUT=10
RSS_MB=2048
# libFuzzer's sanitizer and coverage flags are unstable options; the
# stable compiler takes them with this.
export RUSTC_BOOTSTRAP=1
export CARGO_TERM_COLOR=never

cmin=false
if [ "${1:-}" = --cmin ]; then
  cmin=true
  shift
fi

started=$(date +%s)
if ! cargo fuzz --version 2>/dev/null | grep -qx "cargo-fuzz $CARGO_FUZZ_VERSION"; then
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi
installed=$(date +%s)

# The fuzz crate has its own lock file: refuse to drift from it.
cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null

# The targets' fixtures (a workspace, a state directory) live under TMPDIR:
# a directory of our own, in memory when the machine has /dev/shm (the
# approvals document is written, with fsync, once per input).
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
work=$(mktemp -d "$shm/clawbot_router-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work

# 16 codegen units: cargo-fuzz's default of one unit per crate builds
# several times slower on two cores, for some speed per input. The build
# is kept outside the checkout (as the e2e suite keeps OpenClaw), so a
# later run on this machine rebuilds only our crate, not every dependency
# with the sanitizer's instrumentation.
target_dir=${CLAWBOT_FUZZ_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/clawbot_router/fuzz-target}
build=(--codegen-units 16 --target-dir "$target_dir")
cargo fuzz build "${build[@]}"
built=$(date +%s)

if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo fuzz list)
fi

# Minimising keeps an input per new edge, not per new hit count: a few
# hundred small files per target instead of a thousand.
if $cmin; then
  for target in "${targets[@]}"; do
    before=$(find "fuzz/corpus/$target" -type f | wc -l)
    cargo fuzz cmin "${build[@]}" "$target" "fuzz/corpus/$target" -- -rss_limit_mb=$RSS_MB -use_counters=0 \
      >"$work/$target.log" 2>&1 || { tail -40 "$work/$target.log"; exit 1; }
    echo "$target: $before -> $(find "fuzz/corpus/$target" -type f | wc -l) inputs"
  done
  exit 0
fi

printf '%-22s %12s %8s %8s\n' target executions seconds corpus
failed=()
for target in "${targets[@]}"; do
  mkdir -p "$work/corpus/$target"
  log=$work/$target.log
  t0=$(date +%s)
  if cargo fuzz run "${build[@]}" "$target" "$work/corpus/$target" "fuzz/corpus/$target" -- \
    -max_total_time="$SECONDS_EACH" -seed="$SEED" -timeout=$TIMEOUT -rss_limit_mb=$RSS_MB \
    -print_final_stats=1 >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$target")
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  printf '%-22s %12s %8s %8s %s\n' "$target" "${runs:-?}" "$(($(date +%s) - t0))" \
    "$(find "fuzz/corpus/$target" -type f | wc -l)" "$status"
  if [ "$status" != ok ]; then
    tail -60 "$log"
  fi
done

echo "fuzz: install $((installed - started)) s, build $((built - installed)) s," \
  "runs $(($(date +%s) - built)) s, in all $(($(date +%s) - started)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
