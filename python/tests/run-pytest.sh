#!/usr/bin/env bash
# run-pytest.sh: the Python client's pytest suite, in the place of a Go test
# binary: `make test-bins` installs it as bin/tests/python.test, and
# scripts/run-tests.sh runs it like the others, in python/, as root and as
# bothy-test, with -test.v, -test.timeout and -test.run (given to pytest as
# -k). Each result is also printed as `--- PASS: test (1.23s)`, which
# run-tests.sh counts. PYTHON is Debian's python3, which has python3-pytest.
set -uo pipefail
run=""
while [ $# -gt 0 ]; do
	case $1 in
	-test.run) run=${2:-}; shift 2 ;;
	-test.run=*) run=${1#*=}; shift ;;
	*) shift ;;
	esac
done
if [ ! -f bothy/__init__.py ] || [ ! -d tests ]; then
	echo "run-pytest.sh: run it in the repository's python/ directory" >&2
	exit 2
fi
args=(-p no:cacheprovider -v -rfEs)
[ -n "$run" ] && args+=(-k "$run")
exec env PYTHONDONTWRITEBYTECODE=1 BOTHY_GO_TEST_OUTPUT=1 "${PYTHON:-/usr/bin/python3}" -m pytest "${args[@]}" tests
