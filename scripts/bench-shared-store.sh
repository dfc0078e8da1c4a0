#!/bin/bash
# bench-shared-store.sh [N]: the shared image store's figures (reported, not
# asserted), rootless as the calling user (as root: as bothy-test), with the
# embedded default image:
#   - prepare once: bothy image export --store (import, copy, extract);
#   - the first sandbox from the user's own store (import + extract) and from
#     the shared store (prepared by the user; by root: the directory shim);
#   - N sandboxes one after the other (run --rm -- true) from each.
# Everything is made under a fresh directory and removed at the end.
set -euo pipefail
n=${1:-20}
bin=$(cd "$(dirname "$0")/../bin" && pwd)
user=$(id -un)
[ "$(id -u)" = 0 ] && user=bothy-test
tmp=$(mktemp -d /var/tmp/bothy-bench-store.XXXXXX)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
as() { if [ "$(id -un)" = "$user" ]; then env -u XDG_RUNTIME_DIR "$@"; else runuser -u "$user" -- env -u XDG_RUNTIME_DIR "$@"; fi; }
ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null; t1=$(date +%s%N); echo $(((t1 - t0) / 1000000)); }
mkdir -p "$tmp/u" && chown "$user" "$tmp/u" 2>/dev/null || true
b=$bin/bothy
echo "prepare once (bothy image export, default image), as $user: $(ms as $b --root "$tmp/u/prep" image export --store "$tmp/u/store") ms"
if [ "$(id -u)" = 0 ]; then
	echo "prepare once, as root: $(ms $b --root "$tmp/rootprep" image export --store "$tmp/rootstore") ms"
fi
echo "first sandbox, own store (import + extract): $(ms as $b --root "$tmp/u/own" run --rm -- true) ms"
echo "first sandbox, shared store prepared by $user: $(ms as $b --root "$tmp/u/shared" --image-store "$tmp/u/store" run --rm -- true) ms"
if [ "$(id -u)" = 0 ]; then
	echo "first sandbox, shared store prepared by root (directory shim made): $(ms as $b --root "$tmp/u/other" --image-store "$tmp/rootstore" run --rm -- true) ms"
fi
loop() { local t0 t1 i; t0=$(date +%s%N); for i in $(seq "$n"); do as "$@" run --rm -- true >/dev/null; done; t1=$(date +%s%N); echo "$(((t1 - t0) / 1000000 / n)) ms each"; }
echo "$n sandboxes, own store:        $(loop $b --root "$tmp/u/own")"
echo "$n sandboxes, shared (own prep): $(loop $b --root "$tmp/u/shared" --image-store "$tmp/u/store")"
if [ "$(id -u)" = 0 ]; then
	echo "$n sandboxes, shared (root's):   $(loop $b --root "$tmp/u/other" --image-store "$tmp/rootstore")"
fi
