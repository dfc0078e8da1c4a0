#!/usr/bin/env bash
# delegate-cgroups.sh USER: give USER the cgroup subtree bothy's rootless
# sandboxes are placed under (run as root; idempotent). See docs/operator.md.
#   cgroup v1 (and hybrid): /sys/fs/cgroup/<hierarchy>/bothy-UID in every
#     mounted hierarchy, owned by the user.
#   cgroup v2 (unified): /sys/fs/cgroup/bothy-UID with the root's controllers
#     enabled below it, owned by the user (hosts whose users run a systemd
#     user instance can use its delegation instead: BOTHY_CGROUP_MANAGER=systemd).
set -euo pipefail
user=${1:?usage: delegate-cgroups.sh USER}
uid=$(id -u "$user") gid=$(id -g "$user")
if [ "$(id -u)" != 0 ]; then
	echo "delegate-cgroups: run as root" >&2
	exit 1
fi
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	dir=/sys/fs/cgroup/bothy-$uid
	mkdir -p "$dir"
	# Enable for children what the root offers (memory, pids, cpu…).
	for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
		echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
	done
	chown "$uid:$gid" "$dir" "$dir/cgroup.procs" "$dir/cgroup.subtree_control" "$dir/cgroup.threads"
	echo "delegated $dir to $user"
	exit 0
fi
n=0
while read -r _ mnt fstype _; do
	case $fstype in cgroup | cgroup2) ;; *) continue ;; esac
	case $mnt in /sys/fs/cgroup/*) ;; *) continue ;; esac
	mkdir -p "$mnt/bothy-$uid"
	chown -R "$uid:$gid" "$mnt/bothy-$uid"
	n=$((n + 1))
done </proc/self/mounts
echo "delegated /sys/fs/cgroup/*/bothy-$uid ($n hierarchies) to $user"
