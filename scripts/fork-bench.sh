#!/bin/sh
# fork-bench.sh: what a fork of a sandbox with a 1 GB workspace costs, against
# cp -a of its upper directory, and the disk 8 forks use. Prints a table;
# it reports, it never fails on time.
#
#   scripts/fork-bench.sh [BIN]     (BIN: the directory of make build's bothy, default ./bin)
#
# The workspace: one 512 MiB file and 16,384 files of 32 KiB (512 MiB) in 16
# directories, written in the sandbox. It runs in a bothy state of its own
# (BOTHY_ROOT under $TMPDIR), removed at the end.
set -eu
BIN=$(cd "${1:-bin}" && pwd)
B="$BIN/bothy"
export BOTHY_ROOT="${TMPDIR:-/tmp}/fork-bench.$$"
export BOTHY_EXECUTOR="$BIN/bothy-executor" BOTHY_INIT="$BIN/bothy-init"
mkdir -p "$BOTHY_ROOT"
trap '"$B" ps -aq | xargs -r "$B" rm -f >/dev/null; "$B" prune >/dev/null 2>&1; rm -rf "$BOTHY_ROOT"' EXIT

now() { date +%s.%N; }
ms() { echo "$1 $2" | awk '{printf "%.0f", ($2-$1)*1000}'; }

workspace() { # SANDBOX: fills its /work
	"$B" exec "$1" -- sh -c '
		mkdir -p /work/small && cd /work &&
		head -c 536870912 /dev/urandom > big &&
		for d in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do
			mkdir small/$d && head -c 33554432 /dev/urandom | split -b 32768 -a 3 - small/$d/f || exit 1
		done; sync'
}

upper() { "$B" inspect --format '{{.UpperDir}}' "$1"; }

"$B" run -d --name fb1 >/dev/null
workspace fb1
size=$(du -sm "$(upper fb1)" | cut -f1)
files=$(find "$(upper fb1)" -type f | wc -l)

t0=$(now); cp -a "$(upper fb1)" "$BOTHY_ROOT/copy"; sync; t1=$(now)
cp_ms=$(ms "$t0" "$t1"); rm -rf "$BOTHY_ROOT/copy"

t0=$(now); "$B" fork fb1 -n 1 --name one >/dev/null; t1=$(now)
fork1_ms=$(ms "$t0" "$t1")

"$B" run -d --name fb8 >/dev/null
workspace fb8
t0=$(now); "$B" fork fb8 -n 8 --name eight >/dev/null; t1=$(now)
fork8_ms=$(ms "$t0" "$t1")
# Every child answers: ready means its executor serves a command.
for i in 1 2 3 4 5 6 7 8; do "$B" exec eight-$i -- test -s /work/big; done

layer=$("$B" snapshot ls --format '{{.Dir}}' | tail -1)
children=$(for i in 1 2 3 4 5 6 7 8; do dirname "$(upper eight-$i)"; done)
# shellcheck disable=SC2086
kids_kb=$(du -sk $children | awk '{s+=$1} END {print s}')
layer_mb=$(du -sm "$layer" | cut -f1)

echo "fork of a sandbox with a ${size} MiB workspace ($files files), $(id -un), $(date -u +%FT%TZ), load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-44s %10s\n' "what" "result"
printf '%-44s %8s ms\n' "cp -a of its upper directory" "$cp_ms"
printf '%-44s %8s ms\n' "bothy fork -n 1 (child ready)" "$fork1_ms"
printf '%-44s %8s ms\n' "bothy fork -n 8 (8 children ready)" "$fork8_ms"
printf '%-44s %7s MiB\n' "the shared layer (the parent's former upper)" "$layer_mb"
printf '%-44s %7s KiB\n' "8 children's own directories (du)" "$kids_kb"
printf '%-44s %7s MiB\n' "8 copies by cp -a would take" "$((size * 8))"
