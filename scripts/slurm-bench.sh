#!/bin/bash
# slurm-bench.sh [N] [MODE...]: the job-array figure of docs/slurm.md
# (reported, not asserted). As root: starts a single-node Slurm of its own
# (scripts/slurm-cluster.sh, ports 16837/16838, OverSubscribe=FORCE:25,
# batch_sched_delay=0), then, as bothy-test (rootless), runs one array of N
# tasks (default 200) per MODE and prints its wall time and tasks/s:
#
#   bare    each task runs  sh -c 'echo task $ID'  without bothy
#   own     each task runs  bothy run --rm -- sh -c 'echo task $ID'  with a
#           fresh store of the user's own: every task may import the default
#           image on first use (the issue's baseline)
#   warm    the same, the user's store already holding the image
#   shared  the same from a shared store root prepared (--image-store)
#   sharedwarm   shared, the state root having run one sandbox before the
#           array (its first-use work done: the store's directory shim)
#   sharedtmpfs  shared, the state root on /dev/shm (a tmpfs)
#   runc    each task runs  runc run  (Debian's runc, rootless: what bothy's
#           launcher drives as a library, alone) on a bundle made before the
#           array, whose read-only rootfs is the shared store's extracted
#           default image (one layer) and whose process is  sh -c 'echo task
#           $ID', in runc's rootless spec (pid, ipc, uts, mount and user
#           namespaces) and a network namespace: no overlay, no executor, no
#           state but runc's own
#   podman  each task runs  podman run --rm --network none IMAGE sh -c 'echo
#           task $ID'  rootless, the same default image loaded before the
#           array into a podman storage of the bench's own (runtime runc:
#           Debian's crun refuses this host's hybrid cgroup layout)
#
# Default modes: bare own shared. Besides wall time, each row gives the CPU
# time used per task by the cluster's daemons (munged, slurmctld, slurmd)
# and everything they start (steps, tasks, epilogs, and an unprivileged
# user's sandboxes, which stay in their job's cgroups): the daemons are put
# in a cpuacct cgroup of the bench's own, which Slurm (which manages only
# the freezer hierarchy here) leaves to their children. Unlike the wall
# time, that figure does not depend on what else the machine runs. Every task's output is checked; a failed
# task is counted and its stderr shown. BOTHY_TRACE=1 keeps each sandboxed
# task's trace (bothy's phases) in the results directory, for profiling.
# Everything is made under a fresh directory, and the cluster stopped, at the
# end. The load (uptime) is printed before and after: the machine is shared.
set -euo pipefail
n=${1:-200}
shift || true
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(bare own shared)
[ "$(id -u)" = 0 ] || { echo "slurm-bench: run as root (it starts slurmd and slurmctld)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
bothy=${BOTHY:-$(cd "$here/../bin" && pwd)/bothy}
user=${BENCH_USER:-bothy-test}
tmp=$(mktemp -d /var/tmp/bothy-slurm-bench.XXXXXX)
chmod 755 "$tmp"
cluster=$tmp/cluster
export SLURMCTLD_PORT=${SLURMCTLD_PORT:-16837} SLURMD_PORT=${SLURMD_PORT:-16838}
acct=/sys/fs/cgroup/cpuacct/bothy-slurm-bench-$$
shm=""
podlock=/dev/shm/libpod_rootless_lock_$(id -u "$user")
[ -e "$podlock" ] && podlock=""
cleanup() {
	BOTHY=$bothy "$here/slurm-cluster.sh" stop "$cluster" || true
	# Rootless podman's pause process (started by `podman load`, outside the
	# cluster) and its lock in /dev/shm, unless that was there before.
	pause=$(cat "$tmp/podman/tmp/pause.pid" 2>/dev/null || true)
	if [ -n "$pause" ] && [ "$(cat "/proc/$pause/comm" 2>/dev/null)" = "podman pause" ]; then
		kill "$pause" || true
	fi
	[ -n "$podlock" ] && rm -f "$podlock"
	[ -n "$shm" ] && rm -rf "$shm"
	[ -d "$acct" ] && { rmdir "$acct" 2>/dev/null || echo "slurm-bench: $acct is not empty: left" >&2; }
	rm -rf "$tmp" 2>/dev/null || true
}
trap cleanup EXIT
BOTHY=$bothy "$here/slurm-cluster.sh" start "$cluster" >/dev/null
if mkdir "$acct" 2>/dev/null; then
	for d in munged slurmctld slurmd; do cat "$cluster/$d.pid" >"$acct/cgroup.procs"; done
fi
export SLURM_CONF=$cluster/slurm.conf
mkdir -m 1777 "$tmp/work"
chmod 1777 "$tmp/work"
as() { runuser -u "$user" -- env -u XDG_RUNTIME_DIR SLURM_CONF="$SLURM_CONF" "$@"; }
trace=""
# podman's storage, state and configuration in the bench's directory.
podflags="--root $tmp/podman/root --runroot $tmp/podman/run --tmpdir $tmp/podman/tmp --storage-driver overlay --events-backend none --cgroup-manager cgroupfs --runtime runc"
# store: the shared store, prepared by root from the default image once.
store() { [ -d "$tmp/store" ] || "$bothy" --root "$tmp/preparer" image export --store "$tmp/store" >/dev/null; }
# cpu: CPU nanoseconds the cluster used so far (0 without cpuacct).
cpu() { cat "$acct/cpuacct.usage" 2>/dev/null || echo 0; }
[ -n "${BOTHY_TRACE:-}" ] && trace="BOTHY_TRACE=1 "

echo "slurm-bench: $n tasks per array, as $user; load before: $(uptime | sed 's/.*load/load/')"
k=0
for mode in "${modes[@]}"; do
	# A directory of its own per array: a mode may be named twice.
	k=$((k + 1))
	res=$tmp/work/$k-$mode
	# Sticky, as /tmp: bothy refuses a state directory others could move.
	mkdir -m 1777 "$res" && chmod 1777 "$res"
	mkdir "$res/root" && chown "$user" "$res/root"
	case $mode in
	bare) cmd="sh -c 'echo task \$1' sh \"\$SLURM_ARRAY_TASK_ID\"" ;;
	own | warm) cmd="$bothy --root $res/root run --rm -- sh -c 'echo task \$1' sh \"\$SLURM_ARRAY_TASK_ID\"" ;;
	shared | sharedwarm | sharedtmpfs)
		store
		root=$res/root
		if [ "$mode" = sharedtmpfs ]; then
			[ -n "$shm" ] || { shm=$(mktemp -d /dev/shm/bothy-slurm-bench.XXXXXX) && chmod 755 "$shm"; }
			root=$shm/$k && mkdir "$root" && chown "$user" "$root"
		fi
		cmd="$bothy --root $root --image-store $tmp/store run --rm -- sh -c 'echo task \$1' sh \"\$SLURM_ARRAY_TASK_ID\""
		[ "$mode" = sharedwarm ] && as "$bothy" --root "$root" --image-store "$tmp/store" run --rm -- true
		;;
	runc)
		store
		layers=("$tmp"/store/layers/sha256/*)
		[ ${#layers[@]} = 1 ] || { echo "slurm-bench: runc: the default image has ${#layers[@]} layers, not one" >&2; exit 1; }
		(cd "$res" && as runc spec --rootless)
		as python3 - "$res" "${layers[0]}" "$n" <<'PY'
import json, os, sys
res, rootfs, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(os.path.join(res, "config.json")) as f:
    c = json.load(f)
c["root"] = {"path": rootfs, "readonly": True}
c["process"]["terminal"] = False
c["linux"]["namespaces"].append({"type": "network"})
for i in range(n):
    c["process"]["args"] = ["sh", "-c", "echo task %d" % i]
    os.makedirs(os.path.join(res, "b", str(i)))
    with open(os.path.join(res, "b", str(i), "config.json"), "w") as f:
        json.dump(c, f)
PY
		cmd="runc --root $res/runc run --bundle $res/b/\$SLURM_ARRAY_TASK_ID t\$SLURM_ARRAY_TASK_ID"
		;;
	podman)
		pod=$tmp/podman
		if [ ! -d "$pod" ]; then
			mkdir -m 755 "$pod" && mkdir -m 700 "$pod/xdg" "$pod/home" && chown "$user" "$pod" "$pod/xdg" "$pod/home"
			as env XDG_RUNTIME_DIR="$pod/xdg" HOME="$pod/home" podman $podflags load -q -i "$here/../bin/default-image.oci.tar" >/dev/null 2>"$tmp/podman-load.err" ||
				{ cat "$tmp/podman-load.err" >&2; exit 1; }
		fi
		cmd="env XDG_RUNTIME_DIR=$pod/xdg HOME=$pod/home podman $podflags run --rm --network none localhost/bothy-default sh -c 'echo task \$1' sh \"\$SLURM_ARRAY_TASK_ID\""
		;;
	*) echo "slurm-bench: unknown mode $mode: bare, own, warm, shared, sharedwarm, sharedtmpfs, runc or podman" >&2; exit 2 ;;
	esac
	if [ "$mode" = warm ]; then
		as "$bothy" --root "$res/root" image pull >/dev/null 2>&1 || as "$bothy" --root "$res/root" run --rm -- true >/dev/null
	fi
	cat >"$res/task.sh" <<EOF
#!/bin/sh
$trace exec $cmd >$res/\$SLURM_ARRAY_TASK_ID 2>$res/\$SLURM_ARRAY_TASK_ID.err
EOF
	chmod 0755 "$res/task.sh"
	cpu0=$(cpu)
	t0=$(date +%s%N)
	as sbatch --wait --array=0-$((n - 1)) -o /dev/null "$res/task.sh" >/dev/null 2>&1 || true
	t1=$(date +%s%N)
	cpu1=$(cpu)
	ok=0
	for i in $(seq 0 $((n - 1))); do
		if [ "$(cat "$res/$i" 2>/dev/null)" = "task $i" ]; then
			ok=$((ok + 1))
		elif [ $((i - ok)) -lt 3 ]; then # the first three failures
			echo "  task $i failed: $(head -c 300 "$res/$i.err" 2>/dev/null)" >&2
		fi
	done
	ms=$(((t1 - t0) / 1000000))
	printf '%-11s %5d tasks  %8.1f s  %6.2f tasks/s  %6.0f CPU ms/task  %d ok\n' "$mode" "$n" "$(echo "$ms / 1000" | bc -l)" \
		"$(echo "$n * 1000 / $ms" | bc -l)" "$(echo "($cpu1 - $cpu0) / 1000000 / $n" | bc -l)" "$ok"
	if [ -n "$trace" ] && [ -n "${BENCH_KEEP:-}" ]; then
		mkdir -p "$BENCH_KEEP/$mode" && cp "$res"/*.err "$BENCH_KEEP/$mode/" 2>/dev/null || true
	fi
done
echo "slurm-bench: load after: $(uptime | sed 's/.*load/load/')"
