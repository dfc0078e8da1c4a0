#!/usr/bin/env bash
# test-halves.sh DIR USER [VAR=VALUE...]: make test's two halves, every
# compiled test binary in DIR as the caller and as USER (scripts/run-tests.sh
# each). As root, the halves run at once: their users' sandboxes, stores and
# cgroups are apart, and much of each half waits (on sandboxes, Slurm,
# timeouts), so together they take little more than the longer one. Each
# half's report is printed whole when it ends, root's first. Unprivileged
# (USER empty: the caller again), one after the other.
set -uo pipefail
dir=$1 user=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ] || [ -z "$user" ]; then
	"$here/run-tests.sh" "$dir" "" "$@" && "$here/run-tests.sh" "$dir" "$user" "$@"
	exit
fi
out=$(mktemp -d /tmp/bothy-halves.XXXXXX)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
# A non-interactive shell starts background commands with SIGINT and
# SIGQUIT ignored, which every process they start would inherit (a test's
# Ctrl-C would interrupt nothing): env restores the defaults.
env --default-signal=INT,QUIT "$here/run-tests.sh" "$dir" "" "$@" >"$out/root" 2>&1 &
root=$!
env --default-signal=INT,QUIT "$here/run-tests.sh" "$dir" "$user" "$@" >"$out/user" 2>&1 &
rootless=$!
wait "$root"; rc_root=$?
cat "$out/root"
wait "$rootless"; rc_user=$?
cat "$out/user"
echo "both halves in $(($(date +%s) - start))s"
[ "$rc_root" = 0 ] && [ "$rc_user" = 0 ]
