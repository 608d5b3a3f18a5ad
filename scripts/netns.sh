#!/usr/bin/env bash
# A second host for the end-to-end suite: a network namespace joined to
# this one by a veth pair, so a gateway bound to HOST_ADDR sees clients in
# the namespace (PEER_ADDR) as remote, as it would across a real network.
# The addresses are 198.18.0.0/24 (RFC 2544's benchmarking range): not
# private by OpenClaw's rule, so plaintext to them is refused as it is to
# a public host — and nothing outside this machine is ever a target.
#
#   scripts/netns.sh up      create it (root; installs iproute2 if missing)
#   scripts/netns.sh down    remove it
#   scripts/netns.sh exec CMD...   run CMD inside it
#
# Settings (environment): CLAWBOT_NETNS (default clawbot-e2e).
set -euo pipefail
ns=${CLAWBOT_NETNS:-clawbot-e2e}
host_if=clawbote2e0
peer_if=clawbote2e1
host_addr=198.18.0.1
peer_addr=198.18.0.2

up() {
  if ! command -v ip >/dev/null; then
    apt-get update -qq >/dev/null && apt-get install -y -qq iproute2 >/dev/null
  fi
  down 2>/dev/null || true
  ip netns add "$ns"
  ip link add "$host_if" type veth peer name "$peer_if"
  ip link set "$peer_if" netns "$ns"
  ip addr add "$host_addr/24" dev "$host_if"
  ip link set "$host_if" up
  ip netns exec "$ns" ip addr add "$peer_addr/24" dev "$peer_if"
  ip netns exec "$ns" ip link set "$peer_if" up
  ip netns exec "$ns" ip link set lo up
  echo "[netns] $ns: this host $host_addr, the namespace $peer_addr" >&2
}

down() {
  ip netns del "$ns" 2>/dev/null || true
  # Only our own veth (deleting the namespace usually took it already).
  if ip -d link show "$host_if" 2>/dev/null | grep -q veth; then
    ip link del "$host_if"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  exec) shift; exec ip netns exec "$ns" "$@" ;;
  *) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
