#!/usr/bin/env bash
# run-tests.sh DIR USER [VAR=VALUE...]: run every compiled test binary in DIR
# (built by `make test-bins`), each in its package directory, as USER (empty:
# the caller). Prints one line per package and a closing count. TEST_RUN, when
# set, is passed as -test.run (make test-pkg). The tests' opt-in knobs
# (BOTHY_POOL_CLAIMS, BOTHY_SLURM_TASKS, BOTHY_SLURM_BARE), when set, reach
# USER's tests too, whose environment is otherwise only VAR=VALUE....
set -uo pipefail
dir=$1 user=$2
shift 2
top=$(cd "$(dirname "$0")/.." && pwd)
logs=$(mktemp -d /tmp/bothy-tests.XXXXXX)
chmod 755 "$logs"
pass=0 fail=0 skip=0 failed_pkgs=()
who=${user:-$(id -un)}
run=()
[ -n "${TEST_RUN:-}" ] && run=(-test.run "$TEST_RUN")
knobs=()
for k in BOTHY_POOL_CLAIMS BOTHY_SLURM_TASKS BOTHY_SLURM_BARE; do
	[ -n "${!k:-}" ] && knobs+=("$k=${!k}")
done
echo "== tests as $who ($(id -u "$who" 2>/dev/null || id -u))"
for bin in "$dir"/*.test; do
	name=$(basename "$bin" .test)
	pkgdir=$top/${name//_//}
	[ -d "$pkgdir" ] || pkgdir=$top
	log=$logs/$name.log
	start=$(date +%s%N)
	if [ -n "$user" ]; then
		home=$(getent passwd "$user" | cut -d: -f6)
		(cd "$pkgdir" && setpriv --reuid="$user" --regid="$user" --init-groups \
			env -i PATH="$PATH" HOME="$home" USER="$user" TMPDIR=/tmp "${knobs[@]}" "$@" \
			"$bin" -test.v -test.timeout 15m "${run[@]}") >"$log" 2>&1
	else
		(cd "$pkgdir" && env "$@" "$bin" -test.v -test.timeout 15m "${run[@]}") >"$log" 2>&1
	fi
	rc=$?
	ms=$((($(date +%s%N) - start) / 1000000)); secs=$((ms / 1000)).$((ms % 1000 / 100))
	p=$(grep -c -- '^\s*--- PASS' "$log"); f=$(grep -c -- '^\s*--- FAIL' "$log"); s=$(grep -c -- '^\s*--- SKIP' "$log")
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	if [ $rc -ne 0 ]; then
		[ "$f" -eq 0 ] && fail=$((fail + 1))
		failed_pkgs+=("$name")
		echo "FAIL  $name (${secs}s)"
		grep -v -- '^=== \|^\s*--- PASS\|^PASS$' "$log" | tail -60
		# Then each failed test's first messages (a long log at its end
		# would push them out of the tail above), each with the first
		# lines of its continuation (indented deeper than the message).
		awk '/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; more = 0; next }
			/^[[:space:]]*--- FAIL: / { sub(/^[[:space:]]*--- FAIL: /, ""); failed[++nf] = $1; more = 0; next }
			cur != "" && /_test\.go:[0-9]+:/ && n[cur] < 8 { msg[cur] = msg[cur] "\n    " substr($0, 1, 400); n[cur]++
				match($0, /^[[:space:]]*/); indent = RLENGTH; more = 12; next }
			more > 0 && match($0, /^[[:space:]]*/) && RLENGTH > indent { msg[cur] = msg[cur] "\n      " substr($0, 1, 400); more--; next }
			{ more = 0 }
			END { for (i = 1; i <= nf; i++) if (failed[i] in msg) printf "  failed %s:%s\n", failed[i], msg[failed[i]] }' "$log"
	else
		echo "ok    $name (${secs}s, $p passed, $s skipped)"
	fi
	# Each skip with its reason (go test -v prints the reason just before).
	awk '/^[[:space:]]*--- SKIP/ { sub(/^[[:space:]]*/, ""); print "      " $0 " —" prev } { if ($0 ~ /_test\.go:[0-9]+:/) { prev = $0; sub(/^[[:space:]]*/, " ", prev) } }' "$log"
done
echo "$pass passed, $fail failed, $skip skipped"
[ ${#failed_pkgs[@]} -eq 0 ]
