package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// TestLimitsStatsCLI: run's limit and hardening flags reach the sandbox,
// stats and inspect read its cgroup, and bad values are refused by name.
func TestLimitsStatsCLI(t *testing.T) {
	c := newCLI(t)
	out, errOut, code := c.run("", "run", "-d", "--name", "lim", "--memory", "64m", "--pids-limit", "50", "--cpus", "0.5",
		"--cap-drop", "ALL", "--read-only", "--shm-size", "8m")
	if code != 0 && os.Getuid() != 0 && strings.Contains(errOut, "no cgroup is delegated") {
		t.Skipf("requires a cgroup delegated to uid %d (make test-rootless creates it as root): %s", os.Getuid(), errOut)
	}
	if code != 0 {
		t.Fatalf("run: %d %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	if got := c.ok("exec", "lim", "--", "sh", "-c", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max; grep CapEff /proc/self/status; touch /x 2>&1; df -k /dev/shm | tail -1"); !strings.Contains(got, "67108864\n50\nCapEff:\t0000000000000000\n") ||
		!strings.Contains(got, "Read-only file system") || !strings.Contains(got, " 8192 ") {
		t.Errorf("inside: %q", got)
	}
	var stats []sandbox.Stats
	if err := json.Unmarshal([]byte(c.ok("stats", "--format", "json", "--interval", "0", "lim")), &stats); err != nil || len(stats) != 1 {
		t.Fatalf("stats json: %v %+v", err, stats)
	}
	if s := stats[0]; s.ID != id || s.Memory.Limit != 64<<20 || s.Pids.Limit != 50 || s.CPU.Limit != 0.5 || s.Pids.Current == 0 {
		t.Errorf("stats: %+v", s)
	}
	if table := c.ok("stats", "--no-stream", "--interval", "0"); !strings.Contains(table, "MEM USAGE / LIMIT") || !strings.Contains(table, "64MiB") || !strings.Contains(table, "/ 50") {
		t.Errorf("stats table:\n%s", table)
	}
	var inspected []inspectView
	if err := json.Unmarshal([]byte(c.ok("inspect", "lim")), &inspected); err != nil || inspected[0].Usage == nil ||
		inspected[0].HostConfig.Memory != 64<<20 || !inspected[0].Security.ReadOnly || !inspected[0].HostConfig.ReadonlyRootfs {
		t.Fatalf("inspect: %v %+v", err, inspected)
	}
	// A command that blows the limit is killed, the CLI says why, and the
	// sandbox stays usable; so for a timeout.
	if _, errOut, code := c.run("", "exec", "lim", "--", "sh", "-c", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}"); code != 137 || !strings.Contains(errOut, "killed by the OOM killer") {
		t.Errorf("memory bomb: exit %d, %q", code, errOut)
	}
	if _, errOut, code := c.run("", "exec", "--timeout", "0.3", "lim", "--", "sleep", "5"); code == 0 || !strings.Contains(errOut, "0.3s timeout") {
		t.Errorf("timeout: exit %d, %q", code, errOut)
	}
	c.ok("exec", "lim", "--", "true")

	// No --pids-limit: the default, read inside; --pids-limit 0: none.
	if got := c.ok("run", "--rm", "--", "cat", "/sys/fs/cgroup/pids/pids.max"); got != "4096\n" {
		t.Errorf("default pids.max inside: %q", got)
	}
	if got := c.ok("run", "--rm", "--pids-limit", "0", "--", "cat", "/sys/fs/cgroup/pids/pids.max"); got != "max\n" {
		t.Errorf("--pids-limit 0: pids.max inside %q", got)
	}

	for _, bad := range [][]string{
		{"--memory", "lots"}, {"--cpus", "-1"}, {"--memory-swap", "1g"}, {"--cap-add", "CAP_BOGUS"}, {"--pids-limit", "-5"},
		{"--security-opt", "apparmor=unconfined"}, {"--shm-size", "-1"},
	} {
		_, errOut, code := c.run("", append(append([]string{"run", "--rm"}, bad...), "--", "true")...)
		if code == 0 || !strings.Contains(errOut, strings.TrimPrefix(bad[0], "--")) && !strings.Contains(errOut, bad[1]) {
			t.Errorf("%v: exit %d, %q", bad, code, errOut)
		}
	}

	if os.Getuid() != 0 {
		// Rootless without a delegated cgroup: refused with the fix, or a
		// warning with --ignore-limits.
		t.Setenv(cgroupParentEnv, "/bothy-not-delegated")
		if _, errOut, code := c.run("", "run", "--rm", "--memory", "64m", "--", "true"); code == 0 || !strings.Contains(errOut, "cannot enforce resource limits") || !strings.Contains(errOut, "chown") {
			t.Errorf("undelegated --memory: exit %d, %q", code, errOut)
		}
		if out, errOut, code := c.run("", "run", "--rm", "--memory", "64m", "--ignore-limits", "--", "echo", "ran"); code != 0 || out != "ran\n" || !strings.Contains(errOut, "warning") {
			t.Errorf("--ignore-limits: exit %d, %q %q", code, out, errOut)
		}
		// No flags: the sandbox starts without the default pids limit,
		// with one line saying so; --pids-limit 0 asks for none and
		// gets no warning.
		out, errOut, code := c.run("", "run", "--rm", "--", "echo", "ran")
		if code != 0 || out != "ran\n" || strings.Count(errOut, "\n") != 1 ||
			!strings.Contains(errOut, "warning: sandbox ") || !strings.Contains(errOut, "the default pids limit (4096) is not enforced: no cgroup is delegated") {
			t.Errorf("undelegated, no flags: exit %d, %q %q", code, out, errOut)
		}
		if out, errOut, code := c.run("", "run", "--rm", "--pids-limit", "0", "--", "echo", "ran"); code != 0 || out != "ran\n" || errOut != "" {
			t.Errorf("undelegated, --pids-limit 0: exit %d, %q %q", code, out, errOut)
		}
	}
}
