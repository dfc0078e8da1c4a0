#!/bin/bash
# podman-commit-bench.sh: what podman takes to do what `bothy fork` does
# (scripts/fork-bench.sh): a container of the same image is given the same
# 1 GiB workspace, then `podman commit` of it and `podman run` of the
# committed image (one child, ready when it answers an exec), and 7 more
# runs. Prints the times and the storage used; it reports, it never fails
# on time.
#
#   scripts/podman-commit-bench.sh [IMAGE.oci.tar]   (default bin/default-image.oci.tar)
#
# Podman keeps everything in a directory of its own, removed at the end
# (with the rootless pause process it started). As root it runs in a mount
# namespace of its own (tmpfs over /run and /dev/shm: podman's locks and
# runtime files stay there), with runc (crun refuses this machine's hybrid
# cgroup layout), ulimits at this process's own (this root cannot raise
# them), and its cgroups under podman-commit-bench-PID, removed after.
set -eu
img=$(realpath "${1:-bin/default-image.oci.tar}")
if [ "$(id -u)" = 0 ] && [ -z "${PODMAN_COMMIT_BENCH_INNER:-}" ]; then
	cg=podman-commit-bench-$$
	pid_max=$(cat /proc/sys/kernel/pid_max)
	rc=0
	PODMAN_COMMIT_BENCH_INNER=1 PODMAN_RUN_FLAGS="--ulimit nofile=$(ulimit -Hn):$(ulimit -Hn) --ulimit nproc=$pid_max:$pid_max --cgroup-parent /$cg" \
		unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /dev/shm && exec "$0" "$1"' "$0" "$img" || rc=$?
	for d in /sys/fs/cgroup/*/"$cg"; do [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; ; done
	exit $rc
fi

P=$(mktemp -d "${TMPDIR:-/tmp}/podman-commit-bench.XXXXXX")
export HOME=$P/home XDG_CONFIG_HOME=$P/config XDG_DATA_HOME=$P/data XDG_RUNTIME_DIR=$P/xdg TMPDIR=$P/tmp
mkdir -p "$HOME" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_RUNTIME_DIR" "$TMPDIR"
chmod 700 "$XDG_RUNTIME_DIR"
pm() { podman --root "$P/root" --runroot "$P/run" --tmpdir "$P/ptmp" --storage-driver overlay --events-backend file --cgroup-manager cgroupfs "$@"; }
# shellcheck disable=SC2206
R=(--runtime runc --network none ${PODMAN_RUN_FLAGS:-})
now() { date +%s.%N; }
ms() { echo "$1 $2" | awk '{printf "%.0f", ($2-$1)*1000}'; }
cleanup() {
	pm rm -af -t 0 >/dev/null 2>&1 || true
	pm rmi -af >/dev/null 2>&1 || true
	# Rootless, the storage holds files of the user's subordinate ids:
	# removed in podman's user namespace, before its pause process goes.
	if [ "$(id -u)" != 0 ]; then pm unshare rm -rf "$P/root" "$P/run" "$P/ptmp/overlay" 2>/dev/null || true; fi
	# The rootless pause process (--tmpdir is where podman keeps its pid).
	if [ -s "$P/ptmp/pause.pid" ]; then kill "$(cat "$P/ptmp/pause.pid")" 2>/dev/null || true; fi
	chmod -R u+rwX "$P" 2>/dev/null || true
	rm -rf "$P"
}
trap cleanup EXIT
ref=$(pm load -q -i "$img" | sed -n 's/^Loaded image[^:]*: //p' | tail -1)
pm run -d "${R[@]}" --name w "$ref" sleep 3600 >/dev/null
pm exec w sh -c '
	mkdir -p /work/small && cd /work &&
	head -c 536870912 /dev/urandom > big &&
	for d in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do
		mkdir small/$d && head -c 33554432 /dev/urandom | split -b 32768 -a 3 - small/$d/f || exit 1
	done; sync'
t0=$(now); pm commit -q w forked >/dev/null; t1=$(now)
pm run -d "${R[@]}" --name c1 forked sleep 3600 >/dev/null; pm exec c1 test -s /work/big; t2=$(now)
for i in 2 3 4 5 6 7 8; do pm run -d "${R[@]}" --name "c$i" forked sleep 3600 >/dev/null; done; t3=$(now)
echo "podman commit + run of a container with a 1 GiB workspace, podman $(podman --version | cut -d' ' -f3), $(id -un), $(date -u +%FT%TZ), load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-44s %8s ms\n' "podman commit" "$(ms "$t0" "$t1")"
printf '%-44s %8s ms\n' "podman commit + run, 1 child ready" "$(ms "$t0" "$t2")"
printf '%-44s %8s ms\n' "7 more podman runs" "$(ms "$t2" "$t3")"
printf '%-44s %7s MiB\n' "podman's storage (image, container, commit)" "$(du -smx "$P/root" 2>/dev/null | cut -f1)"
