#!/bin/sh
# fork-bench.sh: what a fork of a sandbox with a 1 GB workspace costs, against
# cp -a of its upper directory, and the disk 8 and 32 forks use. Prints a table;
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

forkn() { # N: a fresh sandbox with the workspace, forked N times; prints ms, the children's KiB, the layer's MiB
	"$B" run -d --name "fb$1" >/dev/null
	workspace "fb$1"
	t0=$(now); "$B" fork "fb$1" -n "$1" --name "n$1" >/dev/null; t1=$(now)
	# Every child answers: ready means its executor serves a command.
	i=1; while [ "$i" -le "$1" ]; do "$B" exec "n$1-$i" -- test -s /work/big; i=$((i + 1)); done
	kids=$(i=1; while [ "$i" -le "$1" ]; do dirname "$(upper "n$1-$i")"; i=$((i + 1)); done)
	# shellcheck disable=SC2086
	echo "$(ms "$t0" "$t1") $(du -sk $kids 2>/dev/null | awk '{s+=$1} END {print s}') $(du -sm "$("$B" snapshot ls --format '{{.Dir}}' | tail -1)" 2>/dev/null | cut -f1)"
	"$B" rm -f "fb$1" $(i=1; while [ "$i" -le "$1" ]; do echo "n$1-$i"; i=$((i + 1)); done) >/dev/null
}
# shellcheck disable=SC2046
set -- $(forkn 8); fork8_ms=$1 kids8_kb=$2
# shellcheck disable=SC2046
set -- $(forkn 32); fork32_ms=$1 kids32_kb=$2 layer_mb=$3

echo "fork of a sandbox with a ${size} MiB workspace ($files files), $(id -un), $(date -u +%FT%TZ), load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-44s %10s\n' "what" "result"
printf '%-44s %8s ms\n' "cp -a of its upper directory" "$cp_ms"
printf '%-44s %8s ms\n' "bothy fork -n 1 (child ready)" "$fork1_ms"
printf '%-44s %8s ms\n' "bothy fork -n 8 (8 children ready)" "$fork8_ms"
printf '%-44s %8s ms\n' "bothy fork -n 32 (32 children ready)" "$fork32_ms"
printf '%-44s %7s MiB\n' "a shared layer (a parent's former upper)" "$layer_mb"
printf '%-44s %7s KiB\n' "8 children's own directories (du)" "$kids8_kb"
printf '%-44s %7s KiB\n' "32 children's own directories (du)" "$kids32_kb"
printf '%-44s %7s MiB\n' "32 copies by cp -a would take" "$((size * 32))"
