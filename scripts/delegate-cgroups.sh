#!/usr/bin/env bash
# delegate-cgroups.sh USER: give USER the cgroup subtree bothy's rootless
# sandboxes are placed under (run as root; idempotent). See docs/operator.md.
#   cgroup v1 (and hybrid): /sys/fs/cgroup/<hierarchy>/bothy-UID, owned by
#     the user, in the hierarchies of the controllers rootless sandboxes
#     join (memory, pids, cpu, cpuacct, freezer; see sandbox/limits.go).
#   cgroup v2 (unified): nothing to create; it says how to give the user a
#     systemd user instance with delegated controllers, which bothy uses.
set -euo pipefail
user=${1:?usage: delegate-cgroups.sh USER}
uid=$(id -u "$user") gid=$(id -g "$user")
if [ "$(id -u)" != 0 ]; then
	echo "delegate-cgroups: run as root" >&2
	exit 1
fi
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	# cgroup v2 moves a process only between cgroups whose common ancestor
	# the mover may write: a chowned directory is not enough on its own.
	# Rootless bothy asks the user's systemd instance for a scope instead.
	echo "delegate-cgroups: cgroup v2 host: nothing to create; give $user a systemd user instance" >&2
	echo "  (loginctl enable-linger $user) with the controllers delegated (systemctl edit user@.service:" >&2
	echo "  [Service] Delegate=memory pids cpu cpuset); see docs/operator.md" >&2
	exit 0
fi
n=0
while read -r _ mnt fstype opts _; do
	case $fstype in cgroup | cgroup2) ;; *) continue ;; esac
	case $mnt in /sys/fs/cgroup/*) ;; *) continue ;; esac
	case ",$opts," in *,memory,* | *,pids,* | *,cpu,* | *,cpuacct,* | *,freezer,*) ;; *) continue ;; esac
	mkdir -p "$mnt/bothy-$uid"
	chown -R "$uid:$gid" "$mnt/bothy-$uid"
	n=$((n + 1))
done </proc/self/mounts
echo "delegated bothy-$uid in $n cgroup hierarchies to $user"
