#!/bin/bash
# run-cpu.sh [N]: the machine's busy CPU time and the wall time per
# `bothy run --rm -- true` (rootless, the default image) beside crun running
# `true` in a bundle of the same root file system (`crun spec --rootless`:
# no overlay, no cgroup, no seccomp, no executor, no state kept), in rounds
# of 10 of each, N runs of each in all (default 60). Busy CPU is the whole
# machine's (/proc/stat, ticks of 10 ms): run it on an otherwise idle
# machine. It reports, it never fails on time (docs/slurm.md, "Where an
# array's time goes").
#
# As root it runs everything as bothy-test (BENCH_USER); as another user,
# as that user. Needs `make build` (bin/, and the default image's root file
# system in /var/cache/bothy) and Debian's crun. Everything is made in a
# temporary directory, removed at the end.
set -euo pipefail
n=${1:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
rootfs_tar=/var/cache/bothy/default-rootfs.tar
[ -r "$rootfs_tar" ] || { echo "run-cpu: $rootfs_tar missing: run make build" >&2; exit 1; }
command -v crun >/dev/null || { echo "run-cpu: crun missing: apt-get install crun" >&2; exit 1; }
as=()
if [ "$(id -u)" = 0 ]; then
	as=(setpriv --reuid="${BENCH_USER:-bothy-test}" --regid="${BENCH_USER:-bothy-test}" --init-groups env HOME=/tmp)
fi
tmp=$(mktemp -d /var/tmp/bothy-run-cpu.XXXXXX)
chmod 755 "$tmp"
cleanup() {
	"${as[@]}" "$here/bin/bothy" --root "$tmp/root" prune >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/bundle/rootfs"
tar -xf "$rootfs_tar" -C "$tmp/bundle/rootfs" 2>/dev/null || true
[ "$(id -u)" = 0 ] && chown -R "${BENCH_USER:-bothy-test}" "$tmp"
(cd "$tmp/bundle" && "${as[@]}" crun spec --rootless)
"${as[@]}" python3 - "$tmp/bundle/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["process"]["args"], c["process"]["terminal"] = ["true"], False
json.dump(c, open(sys.argv[1], "w"))
EOF
# crun, rootless, refuses this machine's hybrid cgroup layout: a tmpfs over
# cgroup/unified in a user and mount namespace of its own hides it (as make
# bench does); the host's mounts are untouched.
cat >"$tmp/crun-loop.sh" <<EOF
#!/bin/sh
mount -t tmpfs none /sys/fs/cgroup/unified 2>/dev/null
cd "$tmp/bundle"
for i in \$(seq \$1); do crun --cgroup-manager=disabled --root "$tmp/crun" run "c\$2-\$i" || exit 1; done
EOF
cat >"$tmp/bothy-loop.sh" <<EOF
#!/bin/sh
for i in \$(seq \$1); do "$here/bin/bothy" --root "$tmp/root" run --rm -- true || exit 1; done
EOF
chmod 755 "$tmp"/*.sh
"${as[@]}" "$tmp/bothy-loop.sh" 1 # first use: the default image's import
"${as[@]}" python3 - "$n" "$tmp" <<'EOF'
import os, subprocess, sys, time
n, tmp = int(sys.argv[1]), sys.argv[2]
hz = os.sysconf("SC_CLK_TCK")

def busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]

loops = {
    "bothy run --rm -- true": [f"{tmp}/bothy-loop.sh"],
    "crun run (true)": ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", f"{tmp}/crun-loop.sh"],
}
cpu = {k: 0.0 for k in loops}
wall = {k: 0.0 for k in loops}
for r in range(n // 10):
    for name, argv in loops.items():
        b0, t0 = busy(), time.monotonic()
        subprocess.run(argv + ["10", str(r)], check=True)
        cpu[name] += (busy() - b0) * 1000 / hz
        wall[name] += (time.monotonic() - t0) * 1000
runs = n // 10 * 10
print(f"{'per run (' + str(runs) + ' each)':<26} {'busy CPU ms':>12} {'wall ms':>9}")
for name in loops:
    print(f"{name:<26} {cpu[name] / runs:>12.1f} {wall[name] / runs:>9.1f}")
EOF
