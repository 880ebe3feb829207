#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for testing the `slurm` profile.
#
#   scripts/slurm-cluster.sh start    install (Debian packages) and start munged, slurmctld, slurmd
#   scripts/slurm-cluster.sh stop     stop what `start` started and remove the files it wrote
#   scripts/slurm-cluster.sh status   exit 0 when the cluster answers
#
# Idempotent: `start` on a running cluster does nothing; `stop` on a stopped one does nothing.
# Needs root (packages, /etc/slurm, daemons). The node declares two GPUs as gres backed by
# placeholder files, so the profile's real `--gpus=1` requests are scheduled and recorded,
# while the jobs themselves run on the CPU. Finished jobs are written, one line each, to the
# job-completion log $STATE/jobcomp.log (begun afresh by each start, the previous one kept as
# jobcomp.log.prev; `sacct` needs slurmdbd and a database, which this cluster does without),
# and squeue keeps them for MinJobAge = 3600 s, so the profile's squeue status queries see
# every job end.
set -euo pipefail

STATE=${SUBAUDIT_SLURM_STATE:-/var/tmp/subaudit-slurm}
CONF=/etc/slurm/slurm.conf
GRES=/etc/slurm/gres.conf
MARK="# written by subaudit scripts/slurm-cluster.sh"
HOST=$(hostname -s)

log() { echo "slurm-cluster: $*" >&2; }

answers() { timeout 10 scontrol ping 2>/dev/null | grep -q "is UP" && \
            timeout 10 sinfo -h -N -o "%T" 2>/dev/null | grep -qE "idle|mixed|alloc"; }

install_packages() {
    local need=()
    for cmd in munged slurmctld slurmd sbatch; do command -v "$cmd" >/dev/null || need+=("$cmd"); done
    [ ${#need[@]} -eq 0 ] && return
    log "installing munge and slurm (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends munge slurmctld slurmd slurm-client >/dev/null
}

write_config() {
    # RealMemory a little under what slurmd measures; CPUs as it measures them.
    local node mem
    node=$(slurmd -C | head -n 1)                 # NodeName=... CPUs=... RealMemory=...
    mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
    node=$(sed -e 's/^NodeName=[^ ]* //' -e 's/ *RealMemory=[0-9]*//' <<<"$node")
    if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        log "$CONF exists and was not written by this script: not touching it"; exit 1
    fi
    mkdir -p /etc/slurm "$STATE/ctld" "$STATE/d" "$STATE/log"
    # job ids restart from 1 on a fresh start: keep the last cluster's records apart
    if [ -f "$STATE/jobcomp.log" ]; then mv -f "$STATE/jobcomp.log" "$STATE/jobcomp.log.prev"; fi
    cat > "$CONF" <<EOF
$MARK
ClusterName=subaudit
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
MinJobAge=3600
MaxJobCount=20000
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/jobcomp.log
SchedulerParameters=defer_batch
NodeName=$HOST $node RealMemory=$(( mem * 9 / 10 )) Gres=gpu:2 State=UNKNOWN
PartitionName=cpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$HOST Default=NO MaxTime=INFINITE State=UP
EOF
    cat > "$GRES" <<EOF
$MARK
NodeName=$HOST Name=gpu File=$STATE/gpu[0-1]
EOF
    touch "$STATE/gpu0" "$STATE/gpu1"
}

start() {
    if answers; then log "already running"; return; fi
    [ -f "$CONF" ] && stop  # leftovers of an earlier start that no longer answers
    install_packages
    write_config
    if ! munge -n >/dev/null 2>&1; then  # no munged answering (a zombie does not count)
        install -d -o munge -g munge -m 0755 /run/munge
        [ -s /etc/munge/munge.key ] || { mungekey --create --force 2>/dev/null || \
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null; }
        chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
        runuser -u munge -- /usr/sbin/munged
        touch "$STATE/started-munged"
    fi
    for _ in $(seq 40); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.25; done
    slurmctld
    slurmd
    for _ in $(seq 60); do answers && { log "up: node $HOST, partitions cpu (default) and gpu"; return; }; sleep 0.5; done
    log "cluster did not come up; logs in $STATE/log"; tail -n 20 "$STATE"/log/*.log >&2 || true
    exit 1
}

stop() {
    local pid ours=0
    [ -f "$CONF" ] && grep -qF "$MARK" "$CONF" && ours=1
    for daemon in slurmd slurmctld; do
        pid=$(cat "$STATE/$daemon.pid" 2>/dev/null || true)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
        # a daemon whose pid file was lost still reads our configuration
        [ "$ours" = 1 ] && pkill -x "$daemon" || true
        for _ in $(seq 60); do pgrep -x "$daemon" >/dev/null || break; sleep 0.25; done
        [ "$ours" = 1 ] && pkill -9 -x "$daemon" || true
    done
    if [ -f "$STATE/started-munged" ]; then
        pkill -x munged || true
        rm -f "$STATE/started-munged"
    fi
    for f in "$CONF" "$GRES"; do
        [ -f "$f" ] && grep -qF "$MARK" "$f" && rm -f "$f"
    done
    rm -rf "$STATE/ctld" "$STATE/d"
    log "stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) answers ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
