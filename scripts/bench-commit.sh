#!/usr/bin/env bash
# bench-commit.sh [RUNS]: time `bothy commit` of a sandbox that wrote 100 MB
# (one random file) and 10,000 small files, against `podman commit` of a
# container that did the same, on the busybox test image, as the calling
# user (run it as root, or as bothy-test for rootless). Prints per run the
# seconds of each commit, then the medians and the layer sizes. Everything
# lives in a temporary directory removed at the end; podman gets its own
# --root/--runroot there, so no other podman state is touched. NO_PODMAN=1
# measures bothy alone (podman as root fails on this host's rlimits).
set -euo pipefail
runs=${1:-3}
top=$(cd "$(dirname "$0")/.." && pwd)
bothy=$top/bin/bothy
image=$top/bin/busybox.oci.tar
tmp=$(mktemp -d /tmp/bench-commit.XXXXXX)
export BOTHY_DEFAULT_IMAGE=$image BOTHY_ROOT=$tmp/bothy
if [ ! -w "${XDG_RUNTIME_DIR:-/nonexistent}" ]; then
	mkdir -m 700 "$tmp/xdg" && export XDG_RUNTIME_DIR=$tmp/xdg # podman's runtime files
fi
pod=(podman --root "$tmp/podman/root" --runroot "$tmp/podman/run" --storage-driver overlay --cgroup-manager cgroupfs --events-backend none)
cleanup() {
	"$bothy" rm -f $("$bothy" ps -aq) >/dev/null 2>&1 || true
	"${pod[@]}" rm -af >/dev/null 2>&1 || true
	"${pod[@]}" system reset -f >/dev/null 2>&1 || true
	rm -rf "$tmp" 2>/dev/null || "$bothy" --root "$tmp/bothy" prune >/dev/null 2>&1 || true
}
trap cleanup EXIT
work='dd if=/dev/urandom of=/big bs=1M count=100 2>/dev/null && mkdir /small && i=0 && while [ $i -lt 10000 ]; do echo $i > /small/$i; i=$((i+1)); done && sync'
now() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

if [ -n "${NO_PODMAN:-}" ]; then pod=(true); fi
"${pod[@]}" load -q -i "$image" >/dev/null
pimg=$("${pod[@]}" images -q | head -1)
: >"$tmp/b" ; : >"$tmp/p"
for r in $(seq "$runs"); do
	"$bothy" run -d --name "c$r" >/dev/null
	"$bothy" exec "c$r" -- sh -c "$work"
	t0=$(now); id=$("$bothy" commit -q "c$r" "bench:$r"); t1=$(now)
	b=$(secs "$t0" "$t1"); echo "$b" >>"$tmp/b"
	"$bothy" rm -f "c$r" >/dev/null

	if [ -n "${NO_PODMAN:-}" ]; then echo "run $r: bothy commit ${b}s"; continue; fi
	"${pod[@]}" run -d --name "c$r" --network none --runtime runc --ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit "nproc=$(ulimit -Su):$(ulimit -Hu)" "$pimg" sleep 3600 >/dev/null
	"${pod[@]}" exec "c$r" sh -c "$work"
	t0=$(now); "${pod[@]}" commit -q "c$r" "bench:$r" >/dev/null; t1=$(now)
	p=$(secs "$t0" "$t1"); echo "$p" >>"$tmp/p"
	"${pod[@]}" rm -f -t 0 "c$r" >/dev/null
	echo "run $r: bothy commit ${b}s, podman commit ${p}s"
done
layer=$("$bothy" images --format json | python3 -c 'import json,sys; print(next(i["Layers"][-1]["Size"] for i in json.load(sys.stdin) if "localhost/bench:1" in (i["Names"] or [])))' 2>/dev/null || echo "?")
psize=$("${pod[@]}" image inspect "bench:1" --format '{{.Size}}' || true)
pbase=$("${pod[@]}" image inspect "$pimg" --format '{{.Size}}' || true)
echo "median over $runs runs ($(id -un)): bothy commit $(median <"$tmp/b")s, podman commit $(median <"$tmp/p")s"
echo "bothy: the new layer (gzip blob) $layer bytes; podman: image size $psize bytes, of which the base image $pbase"
