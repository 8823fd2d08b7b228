#!/usr/bin/env bash
# A small cluster of "hosts" on this machine, made of Linux network namespaces, for running MPI
# ranks (`shardsim run --hostfile`) across shaped TCP links. Needs root. See docs/multi_host.md.
#
#   scripts/netns_cluster.sh up [--hosts N] [--rate RATE] [--slots S] [--name NAME] [--dir DIR]
#   scripts/netns_cluster.sh exec DIR -- CMD...     # run CMD in host 0 with DIR/env sourced
#   scripts/netns_cluster.sh down DIR               # remove everything `up` made (idempotent)
#   scripts/netns_cluster.sh check                  # exit 0 if namespaces can be made here, else 77
#
# Layout: namespaces ssim-NAME-h0 .. ssim-NAME-h{N-1} (the hosts) and ssim-NAME-br (a bridge
# `br0`). Host i has `eth0` = 10.213.0.(i+1)/24, a veth whose other end (`vh<i>`) sits on br0.
# The 10.213.0.0/24 addresses exist only inside these namespaces: nothing is added to this
# machine's own network namespace, so clusters with different NAMEs never see each other.
# With --rate, a token bucket (tc tbf) limits every host's eth0 (what it sends) and its bridge
# end vh<i> (what it receives) to RATE. Added latency (netem) is not available on this kernel.
#
# `up` writes into DIR: hostfile (OpenMPI: `ADDR slots=S` per host), agent (OpenMPI's rsh agent:
# runs the daemon in the namespace of the address it is given), env (OMPI_MCA_* lines to source),
# first_host (the namespace mpirun must run in) and state (the namespaces to remove). The last
# line it prints is DIR:  DIR=$(scripts/netns_cluster.sh up --hosts 2 --rate 1gbit | tail -1)
set -euo pipefail

SUBNET=10.213.0          # host i is $SUBNET.(i+1)/24, inside the cluster's namespaces only
DIR_FILES=(hostfile agent env first_host state)

die() { echo "netns_cluster: error: $*" >&2; exit 1; }
usage_error() { echo "netns_cluster: error: $*" >&2; exit 2; }

# Removes the namespaces listed in DIR/state (after ending any process still inside them: stray
# MPI daemons of this cluster), then the files `up` wrote and DIR itself if nothing else is in it.
remove_cluster() {
  local dir=$1 ns pids
  if [[ -f "$dir/state" ]]; then
    while read -r ns; do
      [[ -n "$ns" ]] || continue
      if ip netns list | awk '{print $1}' | grep -qx -- "$ns"; then
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        if [[ -n "$pids" ]]; then
          # shellcheck disable=SC2086
          kill -TERM $pids 2>/dev/null || true
          sleep 0.5
          pids=$(ip netns pids "$ns" 2>/dev/null || true)
          # shellcheck disable=SC2086
          [[ -z "$pids" ]] || kill -KILL $pids 2>/dev/null || true
        fi
        ip netns del "$ns" 2>/dev/null || true   # veths inside go with their namespace
      fi
    done < "$dir/state"
  fi
  local f
  for f in "${DIR_FILES[@]}"; do rm -f -- "$dir/$f"; done
  rmdir -- "$dir" 2>/dev/null || true
}

cmd_check() {
  # Namespaces and veths need root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and the `ip` tool.
  if [[ $(id -u) -ne 0 ]]; then echo "netns_cluster: cannot make network namespaces here: not root" >&2; exit 77; fi
  if ! command -v ip >/dev/null; then echo "netns_cluster: cannot make network namespaces here: no 'ip' command (iproute2)" >&2; exit 77; fi
  local ns="ssim-check-$$" err
  if ! err=$(ip netns add "$ns" 2>&1); then
    echo "netns_cluster: cannot make network namespaces here: ip netns add failed: ${err//$'\n'/ }" >&2; exit 77
  fi
  if ! err=$(ip -n "$ns" link add ca type veth peer name cb 2>&1); then
    ip netns del "$ns" 2>/dev/null || true
    echo "netns_cluster: cannot make network namespaces here: veth pairs fail: ${err//$'\n'/ }" >&2; exit 77
  fi
  ip netns del "$ns"
  echo "netns_cluster: network namespaces can be made here"
}

cmd_up() {
  local hosts=2 rate=none slots=1 name=$$ dir=""
  while [[ $# -gt 0 ]]; do
    [[ $# -ge 2 ]] || usage_error "$1 needs a value"
    case $1 in
      --hosts) hosts=$2 ;;
      --rate) rate=$2 ;;
      --slots) slots=$2 ;;
      --name) name=$2 ;;
      --dir) dir=$2 ;;
      *) usage_error "unknown option '$1' for up; valid: --hosts N, --rate RATE, --slots S, --name NAME, --dir DIR" ;;
    esac
    shift 2
  done
  # Check the arguments before touching anything.
  if ! [[ "$hosts" =~ ^[0-9]{1,3}$ ]] || (( 10#$hosts < 1 || 10#$hosts > 250 )); then
    usage_error "--hosts '$hosts': valid is a whole number from 1 to 250"
  fi
  if ! [[ "$slots" =~ ^[0-9]{1,4}$ ]] || (( 10#$slots < 1 )); then
    usage_error "--slots '$slots': valid is a whole number from 1 to 9999"
  fi
  [[ "$rate" == none || "$rate" =~ ^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] ||
    usage_error "--rate '$rate': valid is none or a tc rate such as 100mbit, 1gbit, 500kbit, 10mbps"
  hosts=$((10#$hosts)) slots=$((10#$slots))
  [[ "$name" =~ ^[a-z0-9]{1,16}$ ]] ||
    usage_error "--name '$name': valid is 1 to 16 lowercase letters or digits"
  [[ $(id -u) -eq 0 ]] || die "needs root to make network namespaces (see: $0 check)"

  local prefix="ssim-$name"
  if ip netns list | awk '{print $1}' | grep -q -- "^$prefix-"; then
    die "namespaces named $prefix-* already exist: pick another --name or remove them (ip netns del)"
  fi
  if [[ -z "$dir" ]]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/ssim-netns.XXXXXX")
  else
    mkdir -p -- "$dir"
    [[ -z "$(ls -A -- "$dir")" ]] || die "--dir '$dir' is not empty"
  fi
  dir=$(cd -- "$dir" && pwd)

  # From here on, anything that fails removes what was made so far.
  UP_DIR=$dir
  trap 'echo "netns_cluster: up failed; removing what it made" >&2; remove_cluster "$UP_DIR"' EXIT
  : > "$dir/state"

  # The bridge: one namespace holding br0, to which every host's veth is attached.
  local br="$prefix-br"
  ip netns add "$br"; echo "$br" >> "$dir/state"
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up

  # The hosts: a namespace each, loopback up, eth0 (a veth) with its address, shaped.
  local i ns addr
  : > "$dir/hostfile"
  for (( i = 0; i < hosts; i++ )); do
    ns="$prefix-h$i"; addr="$SUBNET.$((i + 1))"
    ip netns add "$ns"; echo "$ns" >> "$dir/state"
    ip -n "$ns" link set lo up
    ip -n "$br" link add "vh$i" type veth peer name eth0 netns "$ns"
    ip -n "$br" link set "vh$i" master br0
    ip -n "$br" link set "vh$i" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [[ "$rate" != none ]]; then
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 64kb latency 50ms
      ip netns exec "$br" tc qdisc add dev "vh$i" root tbf rate "$rate" burst 64kb latency 50ms
    fi
    echo "$addr slots=$slots" >> "$dir/hostfile"
  done
  echo "$prefix-h0" > "$dir/first_host"

  # The rsh agent OpenMPI calls instead of ssh: `agent [options] ADDR COMMAND...`. It runs the
  # command (one string: OpenMPI's daemon) in the namespace that owns ADDR.
  # shellcheck disable=SC2016  # the $ belong to the agent, not to this script
  {
    echo '#!/bin/sh'
    echo '# OpenMPI rsh agent for the netns cluster made by scripts/netns_cluster.sh.'
    echo 'while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done'
    echo 'host=$1; shift'
    echo 'case $host in'
    for (( i = 0; i < hosts; i++ )); do echo "  $SUBNET.$((i + 1))) ns=$prefix-h$i ;;"; done
    echo '  *) echo "netns agent: unknown host $host" >&2; exit 1 ;;'
    echo 'esac'
    echo 'exec ip netns exec "$ns" sh -c "$*"'
  } > "$dir/agent"
  chmod +x "$dir/agent"

  # What mpirun needs: our agent, TCP only (shared memory would bypass the links) over eth0, no
  # binding (every host's daemon sees this machine's cores and would bind its first rank to core
  # 0: the hosts' ranks would share one core), and OpenMPI's two opt-in variables for root.
  cat > "$dir/env" <<EOF
export OMPI_MCA_plm_rsh_agent=$dir/agent
export OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_btl=tcp,self
export OMPI_MCA_btl_tcp_if_include=eth0
export OMPI_MCA_oob_tcp_if_include=eth0
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
EOF

  trap - EXIT
  echo "netns_cluster: $hosts hosts ($prefix-h0..h$((hosts - 1)), $SUBNET.1-$hosts), rate $rate, $slots slots each"
  echo "netns_cluster: run with: $0 exec $dir -- CMD...   remove with: $0 down $dir"
  echo "$dir"
}

cmd_exec() {
  [[ $# -ge 1 ]] || usage_error "exec needs DIR: exec DIR -- CMD..."
  local dir=$1; shift
  [[ -f "$dir/env" && -f "$dir/first_host" ]] || usage_error "exec: '$dir' is not a cluster directory made by up"
  [[ "${1:-}" == -- ]] && shift
  [[ $# -ge 1 ]] || usage_error "exec needs a command: exec DIR -- CMD..."
  # shellcheck disable=SC1091
  source "$dir/env"
  exec ip netns exec "$(cat "$dir/first_host")" "$@"
}

cmd_down() {
  [[ $# -eq 1 ]] || usage_error "down needs exactly one argument: down DIR"
  [[ -e "$1" ]] || return 0   # already removed
  remove_cluster "$1"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  exec) shift; cmd_exec "$@" ;;
  down) shift; cmd_down "$@" ;;
  check) shift; cmd_check ;;
  *) usage_error "unknown command '${1:-}'; valid: up, exec, down, check" ;;
esac
