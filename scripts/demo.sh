#!/usr/bin/env bash
# demo.sh: start a real sandbox on the embedded default image and drive it.
set -euo pipefail
bin=$(cd "$(dirname "$0")/../bin" && pwd)
bothy=$bin/bothy
run() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

run "$bothy" run --rm -- python3 -c 'import platform, os; print("python", platform.python_version(), "as uid", os.getuid(), "in", os.uname().nodename)'
id=$("$bothy" run -d --name "demo-$$")
trap '"$bothy" rm -f "$id" >/dev/null 2>&1 || true' EXIT
printf '\n\033[1m$ bothy run -d --name demo-%s\033[0m\n%s\n' "$$" "$id"
run "$bothy" exec "demo-$$" -- bash -c 'echo "PID 1 is: $(tr "\0" " " </proc/1/cmdline)"; ls /proc | grep -c "^[0-9]" | sed "s/^/processes visible: /"'
run "$bothy" exec "demo-$$" -- bash -c 'cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " " | sed "s/^/interface: /"'
run "$bothy" exec "demo-$$" -- sh -c 'echo hello > /root/note && cat /root/note'
run "$bothy" ps
work=$(mktemp -d) && echo 'print("hello from the host")' > "$work/main.py"
# Limits need root or a delegated cgroup (docs/operator.md); without, the demo shows the rest.
lim=(--memory 128m --pids-limit 64)
"$bothy" run --rm "${lim[@]}" -- true >/dev/null 2>&1 || lim=()
run "$bothy" run --rm "${lim[@]}" -v "$work:/work:overlay" -w /work -- \
	sh -c 'python3 main.py; echo changed > main.py; cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max 2>/dev/null || true'
run cat "$work/main.py"   # the overlay volume left the host directory alone
rm -rf "$work"
sock=$("$bothy" inspect --format '{{.Socket}}' "demo-$$")
run curl -s --unix-socket "$sock" http://bothy/alive
echo
run "$bothy" rm -f "demo-$$"
trap - EXIT
run "$bothy" images
