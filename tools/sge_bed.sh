#!/usr/bin/env bash
# A real one-host Grid Engine for the sge launcher's tests: Debian's gridengine-master,
# gridengine-exec and gridengine-client (installed non-interactively, the master named by debconf
# preseeding), sge_qmaster and sge_execd on this host, a queue all.q of this host with a
# parallel environment smp, and jobs of root allowed (min_uid 0). The state lives where Debian
# puts it: /var/lib/gridengine (SGE_ROOT) and /var/spool/gridengine.
#
#   sge_bed.sh up      install (if missing), configure, start, wait until all.q@HOST takes jobs;
#                      prints `export SGE_ROOT=... SGE_CELL=...`. Idempotent: running it again
#                      leaves a working bed as it is
#   sge_bed.sh down    delete every job, stop sge_execd and sge_qmaster (idempotent)
#   sge_bed.sh check   exit 0 when a bed can be made here, else 77 with the reason
#
# Needs root (sge_execd runs jobs as their owner).
set -euo pipefail

export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
host=$(hostname)

die() { echo "sge_bed.sh: $*" >&2; exit 2; }

install_if_missing() {
  command -v qsub >/dev/null && [ -x /usr/sbin/sge_qmaster ] && [ -x /usr/sbin/sge_execd ] &&
    return 0
  [ "$(id -u)" -eq 0 ] || return 1
  export DEBIAN_FRONTEND=noninteractive
  # Without these the packages ask for the master's name and whether to configure the cell.
  debconf-set-selections <<SEL
gridengine-common shared/gridenginemaster string $host
gridengine-common shared/gridenginecell string default
gridengine-common shared/gridengineconfig boolean true
SEL
  local pkgs="gridengine-master gridengine-exec gridengine-client"
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $pkgs >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 &&
      apt-get install -y -qq --no-install-recommends $pkgs >/dev/null 2>&1; }
}

check() {
  [ "$(id -u)" -eq 0 ] || { echo "sge_bed.sh: needs root to run sge_execd"; exit 77; }
  install_if_missing ||
    { echo "sge_bed.sh: gridengine-master, gridengine-exec, gridengine-client cannot be installed"; exit 77; }
  [ -f "$SGE_ROOT/$SGE_CELL/common/bootstrap" ] ||
    { echo "sge_bed.sh: $SGE_ROOT/$SGE_CELL/common/bootstrap missing (the packages did not set up the cell)"; exit 77; }
}

# An editor for `qconf -m...` that sets KEY to VALUE in the file it is given.
editor_setting() {
  local f
  f=$(mktemp)
  printf '#!/bin/sh\nsed -i -e "s/^%s .*/%s %s/" "$1"\n' "$1" "$1" "$2" > "$f"
  chmod +x "$f"
  echo "$f"
}

set_conf() {  # set_conf -mconf|-msconf KEY VALUE
  local ed
  ed=$(editor_setting "$2" "$3")
  EDITOR=$ed qconf "$1" >/dev/null 2>&1 || true
  rm -f "$ed"
}

configure() {
  local f
  f=$(mktemp)
  qconf -ah "$host" >/dev/null 2>&1 || true
  qconf -as "$host" >/dev/null 2>&1 || true
  if ! qconf -sel 2>/dev/null | grep -qx "$host"; then
    printf 'hostname %s\nload_scaling NONE\ncomplex_values NONE\nuser_lists NONE\nxuser_lists NONE\nprojects NONE\nxprojects NONE\nusage_scaling NONE\nreport_variables NONE\n' \
      "$host" > "$f"
    qconf -Ae "$f" >/dev/null 2>&1
  fi
  # Debian's queue template names the parallel environments smp, mpi and make: all must exist.
  local pe
  for pe in smp mpi make; do
    if ! qconf -spl 2>/dev/null | grep -qx "$pe"; then
      printf 'pe_name %s\nslots 9999\nuser_lists NONE\nxuser_lists NONE\nstart_proc_args NONE\nstop_proc_args NONE\nallocation_rule $pe_slots\ncontrol_slaves FALSE\njob_is_first_task TRUE\nurgency_slots min\naccounting_summary FALSE\nqsort_args NONE\n' \
        "$pe" > "$f"
      qconf -Ap "$f" >/dev/null 2>&1
    fi
  done
  qconf -sql 2>/dev/null | grep -qx all.q || EDITOR=/bin/true qconf -aq all.q >/dev/null
  qconf -rattr queue hostlist "$host" all.q >/dev/null
  qconf -rattr queue slots 16 all.q >/dev/null
  # A busy test machine has a load far above the default threshold, which would keep the queue
  # in alarm state (no jobs).
  qconf -rattr queue load_thresholds NONE all.q >/dev/null
  rm -f "$f"
  # The tests run as root; Debian allows jobs from uid 1000 up only.
  set_conf -mconf min_uid 0
  set_conf -mconf min_gid 0
  # Schedule every 2 s, and at once on submit and finish (the default is every 15 s).
  set_conf -msconf schedule_interval 0:0:2
  set_conf -msconf flush_submit_sec 1
  set_conf -msconf flush_finish_sec 1
}

up() {
  check >/dev/null || exit $?
  # This host's name resolves to 127.0.0.1 on many test machines, and back to "localhost": Grid
  # Engine then refuses its own clients ("client IP resolved to host name localhost").
  printf '%s localhost\n' "$host" > "$SGE_ROOT/$SGE_CELL/common/host_aliases"
  echo "$host" > "$SGE_ROOT/$SGE_CELL/common/act_qmaster"
  qstat >/dev/null 2>&1 || /usr/sbin/sge_qmaster
  local ok=0
  for _ in $(seq 1 150); do qconf -sh >/dev/null 2>&1 && { ok=1; break; }; sleep 0.2; done
  [ "$ok" -eq 1 ] || die "sge_qmaster did not answer; see /var/spool/gridengine/qmaster/messages"
  configure
  mkdir -p /var/spool/gridengine/execd
  pgrep -x sge_execd >/dev/null || /usr/sbin/sge_execd
  ok=0
  for _ in $(seq 1 300); do
    # all.q@HOST listed with a load (execd reported) and no state (a: alarm, u: unknown, ...).
    if qstat -f -q "all.q@$host" 2>/dev/null | awk -v q="all.q@$host" '$1 == q && NF == 5 && $4 != "-NA-" {f=1} END {exit !f}'
    then ok=1; break; fi
    sleep 0.2
  done
  if [ "$ok" -ne 1 ]; then
    echo "sge_bed.sh: all.q@$host did not come up; logs in /var/spool/gridengine/" >&2
    qstat -f >&2 || true
    exit 2
  fi
  echo "export SGE_ROOT=$SGE_ROOT SGE_CELL=$SGE_CELL"
}

down() {
  command -v qdel >/dev/null || return 0
  if qstat >/dev/null 2>&1; then
    qdel -f -u '*' >/dev/null 2>&1 || true
    timeout 10 qconf -ke "$host" >/dev/null 2>&1 || true
    timeout 10 qconf -km >/dev/null 2>&1 || true
  fi
  local pid
  for name in sge_execd sge_qmaster; do
    for _ in $(seq 1 100); do pgrep -x "$name" >/dev/null || break; sleep 0.1; done
    for pid in $(pgrep -x "$name" || true); do kill -9 "$pid" 2>/dev/null || true; done
  done
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  check) check ;;
  *) die "usage: sge_bed.sh up|down|check" ;;
esac
