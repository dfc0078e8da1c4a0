#!/bin/bash
# A single-node Slurm cluster for bothy's tests, from Debian's packages
# (slurmctld slurmd slurm-client munge), with no systemd: munged with its own
# key and socket, slurmctld and slurmd in the foreground on ports of their own
# on loopback, everything under one directory, stopped by the pids it started.
#
#   scripts/slurm-cluster.sh start [DIR]   start it (idempotent); prints SLURM_CONF=...
#   scripts/slurm-cluster.sh stop  [DIR]   stop what start started, by pid
#   scripts/slurm-cluster.sh status [DIR]
#
# DIR defaults to /var/tmp/bothy-slurm. Clients use SLURM_CONF=DIR/slurm.conf.
# BOTHY=path/to/bothy is what the Epilog= (scripts/slurm-epilog.sh) runs;
# BOTHY_EPILOG_ROOT (default: default) where it looks for the jobs' sandboxes.
# Ports: SLURMCTLD_PORT (default 16817) and SLURMD_PORT (16818), on 127.0.0.1.
# SLURM_FIRST_JOB_ID (default 1): where its job IDs start, for a second
# cluster on the same host (job cgroups and epilog prunes go by job ID).
set -euo pipefail

cmd=${1:-}
dir=${2:-/var/tmp/bothy-slurm}
here=$(cd "$(dirname "$0")" && pwd)
ctld_port=${SLURMCTLD_PORT:-16817}
slurmd_port=${SLURMD_PORT:-16818}

die() { echo "slurm-cluster: $*" >&2; exit 1; }

alive() { # alive NAME: the daemon NAME started by us runs
	local f="$dir/$1.pid" pid
	[ -s "$f" ] || return 1
	pid=$(cat "$f")
	[ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}

stop_one() { # stop_one NAME
	local f="$dir/$1.pid" pid i
	alive "$1" || { rm -f "$f"; return 0; }
	pid=$(cat "$f")
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
	[ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
	rm -f "$f"
}

configure() {
	mkdir -p "$dir"/{munge,state,spool,log}
	chmod 0755 "$dir"
	chmod 0700 "$dir/munge" "$dir/state" "$dir/spool"
	if [ ! -s "$dir/munge/munge.key" ]; then
		(umask 077; dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none)
	fi
	local node cpus mem
	node=$(hostname -s)
	cpus=$(slurmd -C | sed -n 's/.* CPUs=\([0-9]*\).*/\1/p')
	mem=$(slurmd -C | sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p')
	cat >"$dir/epilog.sh" <<EOF
#!/bin/sh
BOTHY=${BOTHY:-bothy} BOTHY_EPILOG_ROOT='${BOTHY_EPILOG_ROOT:-default}' exec $here/slurm-epilog.sh
EOF
	chmod 0755 "$dir/epilog.sh"
	cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-cluster.sh: a single-node test cluster.
ClusterName=bothytest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.daemon.pid
SlurmdPidFile=$dir/slurmd.daemon.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# Jobs' processes are tracked by the freezer cgroup: scancel and the time
# limit end every process of a step, however it was started.
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
Epilog=$dir/epilog.sh
KillWait=2
# Many batch steps start at once on a small node: give their launch time.
MessageTimeout=60
MinJobAge=2
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MaxArraySize=10001
MaxJobCount=20000
# Two clusters on one host share its job cgroups (slurm_NODE/uid_U/job_N)
# and root's sandboxes, which epilogs prune by job ID: give each its IDs.
FirstJobId=${SLURM_FIRST_JOB_ID:-1}
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:25
EOF
	cat >"$dir/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
IgnoreSystemd=yes
EOF
}

start() {
	[ "$(id -u)" = 0 ] || die "run as root: slurmd, slurmctld and munged are started as root"
	for b in munged slurmctld slurmd; do
		command -v "$b" >/dev/null || die "$b is missing: make setup (slurmctld slurmd slurm-client munge)"
	done
	configure
	export SLURM_CONF="$dir/slurm.conf"
	# slurmd makes /sys/fs/cgroup/*/slurm_NODE at the first job: stop
	# removes it (empty cgroups only) if it was not there before.
	if [ ! -e "$dir/cgroups-preexisting" ]; then
		ls -d /sys/fs/cgroup/*/"slurm_$(hostname -s)" >"$dir/cgroups-preexisting" 2>/dev/null || true
	fi
	if ! alive munged; then
		rm -f "$dir/munge/munge.socket"*
		munged --foreground --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
			--pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
			</dev/null >>"$dir/log/munged.out" 2>&1 &
		echo $! >"$dir/munged.pid"
		for _ in $(seq 100); do [ -S "$dir/munge/munge.socket" ] && break; sleep 0.1; done
		[ -S "$dir/munge/munge.socket" ] || die "munged did not start: $(tail -3 "$dir/log/munged.log" 2>/dev/null)"
		chmod 0755 "$dir/munge" # clients of every user reach the socket
	fi
	if ! alive slurmctld; then
		slurmctld -D -i -f "$SLURM_CONF" </dev/null >>"$dir/log/slurmctld.out" 2>&1 &
		echo $! >"$dir/slurmctld.pid"
	fi
	if ! alive slurmd; then
		slurmd -D -f "$SLURM_CONF" </dev/null >>"$dir/log/slurmd.out" 2>&1 &
		echo $! >"$dir/slurmd.pid"
	fi
	for _ in $(seq 300); do
		if sinfo -h -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; then
			echo "SLURM_CONF=$SLURM_CONF"
			return 0
		fi
		sleep 0.2
	done
	die "the node did not come up: $(sinfo 2>&1 | tail -2); see $dir/log"
}

stop() {
	# Jobs first (their epilogs clean up), then the daemons, by pid.
	if alive slurmctld; then
		SLURM_CONF="$dir/slurm.conf" scancel --full --quiet --user="*" 2>/dev/null || true
	fi
	stop_one slurmd
	stop_one slurmctld
	stop_one munged
	if [ -e "$dir/cgroups-preexisting" ] && [ ! -s "$dir/cgroups-preexisting" ]; then
		for d in $(find /sys/fs/cgroup/*/"slurm_$(hostname -s)" -depth -type d 2>/dev/null); do
			rmdir "$d" 2>/dev/null || echo "slurm-cluster: $d is not empty: left" >&2
		done
		rm -f "$dir/cgroups-preexisting"
	fi
}

case "$cmd" in
start) start ;;
stop) stop ;;
status)
	for d in munged slurmctld slurmd; do
		if alive "$d"; then echo "$d: running ($(cat "$dir/$d.pid"))"; else echo "$d: stopped"; fi
	done
	;;
*) die "usage: $0 start|stop|status [DIR]" ;;
esac
