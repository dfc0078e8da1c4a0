#!/bin/bash
# compact-bench.sh: what compaction costs and saves (docs/snapshots.md,
# Compaction). A stopped busybox sandbox is snapshotted N times, each layer
# with a directory of M files of 1 KiB; it is started three times on the N
# layers (20,000 lookups of missing names timed in it each time), the top
# snapshot is compacted (time, and the snapshots directory's growth), and it
# is started three times again, on one layer. Run after make build, as the
# user to measure: N=256 M=100 scripts/compact-bench.sh
set -euo pipefail
N=${N:-256} M=${M:-100}
B=$(cd "$(dirname "$0")/.." && pwd)/bin
work=$(mktemp -d /tmp/compact-bench.XXXXXX)
export BOTHY_ROOT=$work/root BOTHY_EXECUTOR=$B/bothy-executor BOTHY_INIT=$B/bothy-init BOTHY_DEFAULT_IMAGE=$B/busybox.oci.tar
b=$B/bothy
# starts: three starts of the sandbox, each timed with 20,000 lookups of
# missing names in it.
starts() {
  for r in 1 2 3; do
    s=$(date +%s.%N); $b start deep >/dev/null; e=$(date +%s.%N)
    stack=$($b inspect deep --format '{{.SnapshotStack}}')
    look=$( { /usr/bin/time -f %e $b exec deep -- sh -c 'i=0; while [ $i -lt 20000 ]; do [ -e /nope$i ]; i=$((i+1)); done' ; } 2>&1 )
    echo "start on $stack snapshot layers: $(echo "$e - $s" | bc) s; 20000 missing-name lookups: $look s"
    $b stop deep >/dev/null
  done
}
$b run -d --name deep >/dev/null
$b stop deep
upper=$($b inspect deep --format '{{.UpperDir}}')
head -c 1024 /dev/urandom > $work/blob
t0=$(date +%s.%N)
for i in $(seq 1 $N); do
  mkdir -p $upper/l$i
  for j in $(seq 1 $M); do cp $work/blob $upper/l$i/f$j; done
  echo $i > $upper/top
  $b snapshot deep s$i >/dev/null 2>&1
done
t1=$(date +%s.%N)
echo "made $N snapshots of $M files each in $(echo "$t1 - $t0" | bc) s"
# The CLI compacted every 32nd in the background: undone, for a stack of N.
while pgrep -f "snapshot compact [0-9a-f]{32}" >/dev/null; do sleep 0.2; done
rm -rf $BOTHY_ROOT/data/snapshots/*/compact
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
starts
before=$(du -s --block-size=1K $BOTHY_ROOT/data/snapshots | cut -f1)
s=$(date +%s.%N); $b snapshot compact s$N; e=$(date +%s.%N)
after=$(du -s --block-size=1K $BOTHY_ROOT/data/snapshots | cut -f1)
echo "compact of $N layers ($((N*M)) files): $(echo "$e - $s" | bc) s; snapshots dir $before KiB -> $after KiB (+$((after-before)) KiB)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
starts
$b rm -f deep >/dev/null
$b snapshot rm $(seq -f 's%g' $N -1 1) >/dev/null
$b prune >/dev/null
rm -rf $work
