#!/usr/bin/env bash
# A multi-host test bed on one machine: N "hosts", each a Linux network namespace with its own
# address, joined by veth pairs to a bridge that lives in a switch namespace of its own (the
# machine's own network is never touched). Used by the many-host integration tests and by
# tools/bench/multihost.py.
#
#   bed.sh up PREFIX N NET     make PREFIX-sw and hosts PREFIX-h0 .. PREFIX-h(N-1); host i gets
#                              NET.(i+1)/24 on its eth0 (NET: the first three octets, e.g. 10.231.7)
#   bed.sh down PREFIX         remove every namespace whose name starts with PREFIX- (idempotent)
#   bed.sh cut PREFIX I        cut host I off (its switch port down; its processes keep running)
#   bed.sh heal PREFIX I       put host I back
#   bed.sh check               exit 0 when this machine can make a bed (root, ip netns), else 77
#
# Needs root and iproute2. The tests run `up` after a `down` of the same prefix, and `down` at the
# end, also on failure (RAII in the test, a trap when used from a shell).
set -euo pipefail

die() { echo "bed.sh: $*" >&2; exit 2; }

check() {
  [ "$(id -u)" -eq 0 ] || { echo "bed.sh: needs root to make network namespaces"; exit 77; }
  command -v ip >/dev/null || { echo "bed.sh: iproute2's ip is missing"; exit 77; }
  local probe="fanout-probe-$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "bed.sh: ip netns add is not permitted here"; exit 77
  fi
  ip netns del "$probe"
}

down() {
  local prefix=$1 ns
  for ns in $(ip netns list | awk '{print $1}'); do
    case "$ns" in "$prefix"-*) ip netns del "$ns" 2>/dev/null || true ;; esac
  done
}

up() {
  local prefix=$1 n=$2 net=$3 i
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "N must be 1..200 (got $n)"
  [[ "$net" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "NET must be three octets like 10.231.7 (got $net)"
  down "$prefix"
  trap 'down "$prefix"' ERR
  local sw="$prefix-sw"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for ((i = 0; i < n; i++)); do
    local h="$prefix-h$i"
    ip netns add "$h"
    ip -n "$h" link set lo up
    # Made inside the host namespace, then the peer end moved to the switch: names stay short
    # and never collide with the machine's own interfaces.
    ip -n "$h" link add eth0 type veth peer name "p$i"
    ip -n "$h" link set "p$i" netns "$sw"
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    ip -n "$h" addr add "$net.$((i + 1))/24" dev eth0
    ip -n "$h" link set eth0 up
  done
  trap - ERR
}

port() {  # cut / heal: the host's port on the switch
  local prefix=$1 i=$2 state=$3
  ip -n "$prefix-sw" link set "p$i" "$state"
}

cmd=${1:-}
case "$cmd" in
  up) [ $# -eq 4 ] || die "usage: bed.sh up PREFIX N NET"; up "$2" "$3" "$4" ;;
  down) [ $# -eq 2 ] || die "usage: bed.sh down PREFIX"; down "$2" ;;
  cut) [ $# -eq 3 ] || die "usage: bed.sh cut PREFIX I"; port "$2" "$3" down ;;
  heal) [ $# -eq 3 ] || die "usage: bed.sh heal PREFIX I"; port "$2" "$3" up ;;
  check) check ;;
  *) die "usage: bed.sh up|down|cut|heal|check ..." ;;
esac
