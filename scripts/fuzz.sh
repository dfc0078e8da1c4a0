#!/usr/bin/env bash
# fuzz.sh [FUZZTIME]: run every fuzzer (func FuzzXxx in a _test.go file) for
# FUZZTIME each (default 20s), one after the other: go test -fuzz takes one
# fuzzer at a time. Failing inputs are saved under the package's
# testdata/fuzz/ and replayed by plain go test from then on.
set -euo pipefail
time=${1:-20s}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
tags="containers_image_openpgp exclude_graphdriver_btrfs seccomp"
failed=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	echo "== $pkg $name ($time)"
	if ! go test -tags "$tags" -run '^$' -fuzz "^${name}\$" -fuzztime "$time" "$pkg"; then
		failed=$((failed + 1))
	fi
done < <(grep -rho --include='*_test.go' -H '^func Fuzz[A-Za-z0-9_]*' --exclude-dir=bin . |
	sed 's|^\./||; s|:func |:|' | sort)
[ "$failed" -eq 0 ] || { echo "$failed fuzzer(s) failed" >&2; exit 1; }
