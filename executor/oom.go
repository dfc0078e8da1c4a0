package executor

import (
	"context"
	"os"
	"strconv"
	"strings"

	"github.com/bothy-sandbox/bothy/executor/bash"
)

// The sandbox's own cgroup as the sandbox sees it: libcontainer mounts it
// read-only at /sys/fs/cgroup (v1: one directory per controller; v2 with a
// cgroup namespace: the unified directory itself).
var oomFiles = []struct{ path, key string }{
	{"/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"}, // v1, kernel ≥ 4.13
	{"/sys/fs/cgroup/memory.events", "oom_kill"},             // v2
}

// oomKills returns how many processes the kernel's OOM killer has killed in
// the executor's memory cgroup, and false when no counter is readable.
// A process that died of SIGKILL while the count rose was OOM-killed
// (with concurrent processes that is the best a cgroup can tell: the
// counter does not name the victim).
func oomKills() (uint64, bool) {
	for _, f := range oomFiles {
		data, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, f.key+" "); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// OOMNote is appended to a session command's suffix (and so to what an agent
// reads) when the OOM killer ended it.
const OOMNote = "\n[The command was killed by the OOM killer: the sandbox ran out of memory.]"

// runSession runs req in sess and reports whether the command it ended was
// OOM-killed: exit code 137 while the cgroup's OOM-kill count rose during
// the call. A kill between two calls for the same command (a poll after a
// timeout) is not seen.
func runSession(ctx context.Context, sess *bash.Session, req bash.RunRequest) (*bash.Result, bool, error) {
	before, known := oomKills()
	res, err := sess.Run(ctx, req)
	if err != nil || !known || res.ExitCode != 137 {
		return res, false, err
	}
	after, ok := oomKills()
	if !ok || after <= before {
		return res, false, nil
	}
	res.Metadata.Suffix += OOMNote
	return res, true, nil
}
