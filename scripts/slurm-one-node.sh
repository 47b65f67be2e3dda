#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts a one-node Slurm on this machine (munge, slurmctld, slurmd from Debian's packages), so that
# `srun -n 2 --mpi=pmix moebench run --ep 2 ...` can be tested (tests/srun_check.py). As root; idempotent.
# Writes /etc/slurm/slurm.conf: one partition "ci" of this host's cores, oversubscribed. CI runs it; a user with a
# real cluster never needs it.
#   --install   install the missing packages first (slurmd slurmctld slurm-client munge)
set -euo pipefail
if [ "${1:-}" = "--install" ]; then
  missing=()
  for p in slurmd slurmctld slurm-client munge; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
[ "$(id -u)" -eq 0 ] || { echo "slurm-one-node: run as root (it writes /etc/slurm and starts daemons)" >&2; exit 2; }
command -v slurmctld >/dev/null || { echo "slurm-one-node: slurmctld is not installed (use --install)" >&2; exit 2; }
host=$(hostname -s)
cpus=$(nproc)
mem_mib=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
chown munge:munge /run/munge
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=128 count=1 status=none
                                 chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
cat >/etc/slurm/slurm.conf <<CONF
# Written by moebench's scripts/slurm-one-node.sh: a one-node Slurm for tests.
ClusterName=moebench-ci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
NodeName=$host CPUs=$cpus RealMemory=$mem_mib State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
for _ in $(seq 1 30); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mix)'; then
    echo "slurm-one-node: node $host up ($cpus CPUs)"
    exit 0
  fi
  sleep 1
done
echo "slurm-one-node: the node did not come up in 30 s; logs in /var/log/slurm/" >&2
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
