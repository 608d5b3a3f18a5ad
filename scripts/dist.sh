#!/usr/bin/env bash
# The release: static executables for every machine a node runs on, one
# archive each, and SHA256SUMS over them (README "Install").
#
#   scripts/dist.sh                  every target below
#   scripts/dist.sh TARGET ...       only those
#
# Targets: x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu,
# armv7-unknown-linux-gnueabihf (Linux, glibc linked in statically: no
# loader, no library needed on the machine) and x86_64-pc-windows-gnu
# (needs only what every Windows 10 has). Linux x86_64 builds with the
# machine's own toolchain; the others with Debian's rustc-web, its std's
# source and the cross gcc (scripts/cross.sh), installed when missing.
#
# Each archive, clawbot_router-VERSION-TARGET.tar.gz (.zip for Windows),
# holds one directory of that name: the executables, README.md, LICENSE
# and THIRD-PARTY.md (every crate linked in, its license and its notices).
# `--version` names the version, the target and the commit. The archives
# are built to be reproducible: files in name order, owned by 0, dated at
# the commit, no path of this machine in the executables.
#
# Refuses a checkout with uncommitted changes (its commit would not say
# what was built); CLAWBOT_DIST_DIRTY=1 builds it anyway, as COMMIT-dirty.
# Settings: CLAWBOT_DIST_DIR (default target/dist).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
cross_name=dist
# shellcheck source=cross.sh
. "$here/cross.sh"
say() { cross_say "$@"; }

all=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf x86_64-pc-windows-gnu)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all[@]}"); fi
for target in "${targets[@]}"; do
  case " ${all[*]} " in *" $target "*) ;; *) say "unknown target $target (one of: ${all[*]})"; exit 2 ;; esac
done

# RUSTFLAGS would replace the per-target flags below (cargo takes the
# first it finds): the static link would be silently lost.
if [ -n "${RUSTFLAGS:-}${CARGO_ENCODED_RUSTFLAGS:-}" ]; then
  say "RUSTFLAGS is set: it would replace the flags that make the executables static; unset it"
  exit 1
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
head=$(git rev-parse HEAD)
commit=$(git rev-parse --short=12 "$head")
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  if [ "${CLAWBOT_DIST_DIRTY:-}" != 1 ]; then
    say "the checkout has uncommitted changes: commit them (or CLAWBOT_DIST_DIRTY=1)"
    exit 1
  fi
  commit=$commit-dirty
fi
export CLAWBOT_BUILD_COMMIT=$commit
# Every file in the archives is dated at the commit.
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
out=$(realpath -m "${CLAWBOT_DIST_DIR:-target/dist}")
mkdir -p "$out"
# SHA256SUMS covers every archive in the directory: archives of another
# commit are removed first, so a release never mixes two.
if [ "$(cat "$out/COMMIT" 2>/dev/null)" != "$commit" ]; then
  rm -f "$out"/clawbot_router-*.tar.gz "$out"/clawbot_router-*.zip "$out/SHA256SUMS"
  printf '%s\n' "$commit" >"$out/COMMIT"
fi

packages=()
for target in "${targets[@]}"; do
  # shellcheck disable=SC2207
  [ "$target" = x86_64-unknown-linux-gnu ] || packages+=($(cross_packages "$target"))
done
if [ ${#packages[@]} -gt 0 ]; then cross_install "${packages[@]}"; fi

# Static: glibc, libgcc and (on Windows) mingw's runtime linked in.
# RUSTFLAGS for each target alone: build scripts and proc macros, which
# run here, stay as they are.
# The paths of the machine that built them are not kept in them (panic
# locations name source files): the same commit builds the same bytes
# whatever the builder's home or checkout directory.
cargo_home=$(realpath -m "${CARGO_HOME:-$HOME/.cargo}")
flags="-C target-feature=+crt-static --remap-path-prefix=$cargo_home/registry/src=/cargo --remap-path-prefix=$PWD=/clawbot_router"
for target in "${targets[@]}"; do
  export "CARGO_TARGET_$(printf '%s' "$target" | tr 'a-z-' 'A-Z_')_RUSTFLAGS=$flags"
done
build() {
  cargo build --locked --release "$@" --bins 2>&1 | { grep -v '^ *Compiling ' || true; } >&2
}
started=$SECONDS
native=() cross=()
for target in "${targets[@]}"; do
  if [ "$target" = x86_64-unknown-linux-gnu ]; then native+=("$target"); else cross+=("$target"); fi
done
if [ ${#native[@]} -gt 0 ]; then
  say "building ${native[0]} at $commit"
  build --target "${native[0]}" --target-dir "$out/build-native"
  say "built ${native[0]} in $((SECONDS - started)) s"
fi
for target in "${cross[@]}"; do
  t0=$SECONDS
  say "building $target at $commit"
  (cross_env "$target" && build "${cross_args[@]}" --target-dir "$out/build")
  say "built $target in $((SECONDS - t0)) s"
done

for target in "${targets[@]}"; do
  name=clawbot_router-$version-$target
  if [ "$target" = x86_64-unknown-linux-gnu ]; then
    rel=$out/build-native/$target/release
  else
    rel=$out/build/$target/release
  fi
  stage=$out/stage/$name
  rm -rf "$stage"
  mkdir -p "$stage"
  chmod 0755 "$stage"
  case $target in
    *windows*)
      # One executable does everything on Windows (no exec to hand over
      # to): clawbot_router-full.exe is not shipped.
      install -m 0755 "$rel/clawbot_router.exe" "$rel/fake-openclaw.exe" "$stage/"
      ;;
    *)
      install -m 0755 "$rel/clawbot_router" "$rel/clawbot_router-full" "$rel/fake-openclaw" "$stage/"
      ;;
  esac
  # The commit's own texts, whatever the working tree holds by now.
  for doc in README.md LICENSE; do
    git show "$head:$doc" >"$stage/$doc"
    chmod 0644 "$stage/$doc"
  done
  python3 "$here/dist/notices.py" "$target" >"$stage/THIRD-PARTY.md"
  chmod 0644 "$stage/THIRD-PARTY.md"
  find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
  rm -f "$out/$name.tar.gz" "$out/$name.zip"
  case $target in
    *windows*)
      python3 "$here/dist/zip.py" "$out/$name.zip" "$out/stage" "$name"
      ;;
    *)
      tar -C "$out/stage" --sort=name --owner=0 --group=0 --numeric-owner --format=gnu \
        -cf - "$name" | gzip -9 -n >"$out/$name.tar.gz"
      ;;
  esac
  say "$target: $(du -k "$out/$name".* | awk '{print $1}') KiB"
done

# SHA256SUMS over every archive in the directory (this commit's, those
# built before for other targets too): `sha256sum -c SHA256SUMS`.
(
  cd "$out"
  rm -f SHA256SUMS
  shopt -s nullglob
  archives=("clawbot_router-$version-"*.tar.gz "clawbot_router-$version-"*.zip)
  sha256sum "${archives[@]}" >SHA256SUMS
)
say "built ${#targets[@]} in $((SECONDS - started)) s: $out"
cat "$out/SHA256SUMS" >&2
