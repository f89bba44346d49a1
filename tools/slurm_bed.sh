#!/usr/bin/env bash
# A real one-host Slurm cluster in a scratch folder, for the Slurm launcher's tests: Debian's
# slurm-wlm and munge, a slurm.conf naming this host as the one node, and munged, slurmctld and
# slurmd started with every state, spool, socket and log file under DIR. Nothing in /etc is used.
#
#   slurm_bed.sh up DIR [--nodes N]
#                            install (if missing), configure, start, wait until the node is idle;
#                            prints `export SLURM_CONF=DIR/slurm.conf`. With --nodes N (> 1):
#                            N slurmd "nodes" n1..nN on this host (NodeHostname = this host, a
#                            port each), so multi-node jobs can be tested on one machine
#   slurm_bed.sh down DIR    cancel every job, stop the daemons (idempotent)
#   slurm_bed.sh check       exit 0 when a bed can be made here, else 77 with the reason
#
# Needs root (slurmd runs jobs as their owner; munged and the daemons run as root here).
set -euo pipefail

die() { echo "slurm_bed.sh: $*" >&2; exit 2; }

install_if_missing() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null &&
    return 0
  [ "$(id -u)" -eq 0 ] || return 1
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 &&
      apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null 2>&1; }
}

check() {
  [ "$(id -u)" -eq 0 ] || { echo "slurm_bed.sh: needs root to run slurmd"; exit 77; }
  install_if_missing || { echo "slurm_bed.sh: slurm-wlm and munge cannot be installed"; exit 77; }
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

stop_pidfile() {
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  local dir=$1
  [ -d "$dir" ] || return 0
  if [ -f "$dir/slurm.conf" ] && [ -f "$dir/run/slurmctld.pid" ]; then
    SLURM_CONF="$dir/slurm.conf" timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
  fi
  local f
  for f in "$dir"/run/slurmd*.pid; do stop_pidfile "$f"; done
  stop_pidfile "$dir/run/slurmctld.pid"
  stop_pidfile "$dir/run/munged.pid"
}

up() {
  local dir=$1 nodes=${2:-1}
  check >/dev/null || exit $?
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  down "$dir"
  mkdir -p "$dir"/{run,state,spool,log,munge}
  chmod 0700 "$dir/munge"
  local host cpus mem ctld_port d_port node_lines node_names i
  host=$(hostname -s)
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
  ctld_port=$(free_port)
  d_port=$(free_port)
  if [ "$nodes" -gt 1 ]; then
    # Several slurmd on one host: each node its own name and port, the host's name to reach it.
    node_lines=""
    for i in $(seq 1 "$nodes"); do
      node_lines+="NodeName=n$i NodeHostname=$host Port=$(free_port) CPUs=$cpus RealMemory=$((mem / nodes)) State=UNKNOWN"$'\n'
    done
    node_names="n[1-$nodes]"
  else
    node_lines="NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN"
    node_names=$host
  fi
  # munge: a key of this bed's own, a socket in the bed.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed"
  cat > "$dir/slurm.conf" <<CONF
# Written by tools/slurm_bed.sh for fanout's tests: one node, this host.
ClusterName=fanouttest
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
LaunchParameters=use_interactive_step
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
# Time limits (it_slurm's walltime cases): slurmctld checks them every 30 s (its fixed
# PERIODIC_TIMEOUT, no slurm.conf key), so a job with --time=1 ends 60-90 s after it started.
# OverTimeLimit=0: no grace minutes past the limit; KillWait=5: SIGKILL 5 s after the SIGTERM
# (Slurm's default is 30); MinJobAge=300: an ended job stays in squeue -t all, with its TIMEOUT.
OverTimeLimit=0
KillWait=5
MinJobAge=300
$node_lines
PartitionName=debug Nodes=$node_names Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -i -f "$SLURM_CONF"
  if [ "$nodes" -gt 1 ]; then
    for i in $(seq 1 "$nodes"); do slurmd -f "$SLURM_CONF" -N "n$i"; done
  else
    slurmd -f "$SLURM_CONF"
  fi
  local ok=0
  for _ in $(seq 1 300); do
    if [ "$(sinfo -h -N -o '%T' 2>/dev/null | grep -cE '^(idle|mixed|allocated)')" -ge "$nodes" ]
    then ok=1; break; fi
    sleep 0.2
  done
  if [ "$ok" -ne 1 ]; then
    echo "slurm_bed.sh: the node did not become idle; logs in $dir/log" >&2
    tail -n 20 "$dir"/log/*.log >&2 || true
    down "$dir"
    exit 1
  fi
  echo "export SLURM_CONF=$dir/slurm.conf"
}

case "${1:-}" in
  up)
    if [ $# -eq 2 ]; then up "$2"
    elif [ $# -eq 4 ] && [ "$3" = --nodes ] && [ "$4" -ge 1 ] 2>/dev/null; then up "$2" "$4"
    else die "usage: slurm_bed.sh up DIR [--nodes N]"; fi ;;
  down) [ $# -eq 2 ] || die "usage: slurm_bed.sh down DIR"; down "$2" ;;
  check) check ;;
  *) die "usage: slurm_bed.sh up|down|check ..." ;;
esac
