# Sourced by scripts/windows.sh and scripts/dist.sh: the cross toolchain
# these machines can have. rustup cannot add targets here, so other targets
# build with Debian's rustc-web (rustc as /usr/bin/rustc) and its standard
# library's source (rust-web-src), compiled by cargo's -Zbuild-std, linked
# by Debian's cross gcc.
#
#   cross_install PACKAGE...   installs what is missing (as root, from Debian),
#                              and a rustc-web at least the crate's rust-version
#   cross_env TARGET...        exports RUSTC, the linker, CC and AR for each
#                              TARGET (ring builds C); `cross_args` then holds
#                              cargo's extra arguments for them

cross_say() { printf '[%s] %s\n' "${cross_name:-cross}" "$*" >&2; }

cross_install() {
  local missing=() p
  for p in rustc-web rust-web-src "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    cross_say "installing ${missing[*]}"
    # The lock chromium.sh and desktop.sh take: apt-get refuses to run
    # beside another.
    (
      flock 9
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    ) 9>/tmp/clawbot-apt-install.lock
  fi
  # The crate's rust-version, at least: bookworm's own rustc-web is older
  # than bookworm-security's, and an older one installed is not upgraded by
  # the check above.
  local need version
  need=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
  version=$(/usr/bin/rustc --version | awk '{print $2}')
  if [ "$(printf '%s\n' "$need" "$version" | sort -V | head -1)" != "$need" ]; then
    cross_say "rustc-web $version is older than $need: upgrading"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc-web rust-web-src >/dev/null
    version=$(/usr/bin/rustc --version | awk '{print $2}')
    if [ "$(printf '%s\n' "$need" "$version" | sort -V | head -1)" != "$need" ]; then
      cross_say "Debian offers rustc-web $version here; the crate needs $need (bookworm-security has newer)"
      return 1
    fi
  fi
}

# The cross gcc (and its C library) each target links with.
cross_packages() {
  case $1 in
    aarch64-unknown-linux-gnu) echo gcc-aarch64-linux-gnu libc6-dev-arm64-cross ;;
    armv7-unknown-linux-gnueabihf) echo gcc-arm-linux-gnueabihf libc6-dev-armhf-cross ;;
    x86_64-pc-windows-gnu) echo gcc-mingw-w64-x86-64 ;;
    *) return 1 ;;
  esac
}

cross_env() {
  local target gcc upper lower
  export RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
  cross_args=(-Zbuild-std)
  for target in "$@"; do
    case $target in
      aarch64-unknown-linux-gnu) gcc=aarch64-linux-gnu ;;
      armv7-unknown-linux-gnueabihf) gcc=arm-linux-gnueabihf ;;
      x86_64-pc-windows-gnu) gcc=x86_64-w64-mingw32 ;;
      *) cross_say "no cross toolchain for $target"; return 1 ;;
    esac
    upper=$(printf '%s' "$target" | tr 'a-z-' 'A-Z_')
    lower=$(printf '%s' "$target" | tr '-' '_')
    export "CARGO_TARGET_${upper}_LINKER=$gcc-gcc" "CC_${lower}=$gcc-gcc" "AR_${lower}=$gcc-ar"
    cross_args+=(--target "$target")
  done
}
