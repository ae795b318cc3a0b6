#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for CI and for trying the book's cluster path (README: "On a cluster"):
# Debian's slurm-wlm and munge, started as root in a few seconds; the node is this machine with its cores and memory,
# one partition, no GPU. Exits 0 once `sinfo` shows the node idle, else 1 with the daemons' last log lines.
# Usage (as root): scripts/slurm_one_node.sh [start|stop]
set -euo pipefail
what="${1:-start}"
PIDFILES=(/run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid)  # the daemons this script starts, and only those
any_alive() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
stop() {  # by their pid files: never a process of the same name that another user or service started
  local pids=() f pid
  for f in "${PIDFILES[@]}"; do
    pid="$(cat "$f" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && pids+=("$pid")
  done
  [[ ${#pids[@]} -gt 0 ]] || return 0
  kill "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 20); do
    any_alive "${pids[@]}" || return 0
    sleep 0.5
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
}
if [[ "$what" == stop ]]; then
  stop
  exit 0
fi
[[ "$(id -u)" == 0 ]] || { echo "slurm_one_node: needs root (it starts munged, slurmctld and slurmd)" >&2; exit 1; }
for cmd in munged slurmctld slurmd sinfo; do
  command -v "$cmd" >/dev/null || { echo "slurm_one_node: no $cmd (apt-get install slurm-wlm munge)" >&2; exit 1; }
done
node="$(hostname -s)"
cpus="$(nproc)"
mem_mb="$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)"
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/lib/munge /var/log/munge
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=odebook-ci
SlurmctldHost=${node}
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=${node} CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
if [[ ! -s /etc/munge/munge.key ]]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown -R root:root /etc/munge /run/munge /var/lib/munge /var/log/munge  # munged runs as root here, as slurm does
chmod 0400 /etc/munge/munge.key
stop  # daemons of an earlier start read an older configuration: start afresh
munged --force --pid-file=/run/munge/munged.pid
slurmctld
slurmd
for _ in $(seq 1 30); do
  if timeout 5 sinfo -h -N -o '%t' 2>/dev/null | grep -qx idle; then
    echo "slurm_one_node: node ${node} idle (${cpus} CPUs, ${mem_mb} MB), partition cpu"
    exit 0
  fi
  sleep 1
done
echo "slurm_one_node: the node did not come up; last log lines:" >&2
tail -n 5 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
