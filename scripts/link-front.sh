#!/usr/bin/env bash
# Cargo's linker for x86_64 Linux (.cargo/config.toml). Every link goes to
# cc unchanged but one: the small `clawbot_router` executable, linked as a
# static PIE. Its start-up is what a host pays per tool call, and the
# dynamic loader (libc and libgcc_s found, mapped, relocated and bound) is
# a fifth of it (BENCHMARKS.md, item 1). Cargo cannot set
# `-C target-feature=+crt-static` for one executable (or without --target,
# which proc-macros need), so this does at link time what that flag does
# there: the same system libraries, static, with libgcc_eh for libgcc_s,
# and -static-pie for -pie (ASLR and full RELRO kept). If the command line
# is not the shape this expects, or the static link fails, the ordinary
# link runs: the build never breaks, and tests/front.rs says so.
set -u
out=
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ ${args[i]} == -o ]] && out=${args[i + 1]:-}
done
front=0
if [[ $(basename -- "$out") == clawbot_router-* ]]; then
  front=1
  for a in "${args[@]}"; do
    # The library's unit tests share the name; they link libtest.
    [[ $a == */libtest-*.rlib ]] && front=0
  done
fi
((front)) || exec "${CLAWBOT_LINK_CC:-cc}" "$@"

new=()
dropped=0 pie=0 lastc=-1
for ((i = 0; i < ${#args[@]}; i++)); do
  a=${args[i]}
  if [[ $a == -Wl,-Bdynamic && ${args[i + 1]:-} == -lgcc_s ]]; then
    ((i++, dropped++))
    continue
  fi
  if [[ $a == -pie ]]; then
    new+=(-static-pie)
    ((pie++))
    continue
  fi
  new+=("$a")
  [[ $a == -lc ]] && lastc=$((${#new[@]} - 1))
done
if ((dropped == 1 && pie == 1 && lastc >= 0)); then
  new=("${new[@]:0:lastc+1}" -lgcc_eh -lgcc -lc -Wl,-Bdynamic "${new[@]:lastc+1}")
  "${CLAWBOT_LINK_CC:-cc}" "${new[@]}" && exit 0
fi
exec "${CLAWBOT_LINK_CC:-cc}" "$@"
