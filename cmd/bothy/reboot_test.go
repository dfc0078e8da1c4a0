package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// TestStartAfterRebootCLI: after what a reboot does to a running sandbox
// (its processes killed -9, its cgroups removed, the test's runtime tree
// wiped), ps -a lists it as exited, saying why, under its name; stop is a
// no-op; start brings it back on its files, environment and name; exec
// runs in it; prune leaves it.
func TestStartAfterRebootCLI(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "rb", "-e", "A=1")
	c.ok("exec", "rb", "--", "sh", "-c", "echo kept > /root/f")
	sb := *c.record("rb")
	simulateReboot(t, &sb, filepath.Join(c.root, "run"))

	out := c.ok("ps", "-a")
	if !strings.Contains(out, "rb") || !strings.Contains(out, "exited (runtime state lost)") {
		t.Fatalf("ps -a after the reboot:\n%s", out)
	}
	var list []psView
	if err := json.Unmarshal([]byte(c.ok("ps", "-a", "--format", "json")), &list); err != nil || len(list) != 1 || list[0].State != string(sandbox.StatusExited) || !strings.Contains(list[0].Status, "runtime state lost") {
		t.Fatalf("ps -a --format json: %+v %v", list, err)
	}
	if st := c.inspectView("rb").State; st.Status != string(sandbox.StatusExited) || st.RuntimeLost != string(sandbox.RuntimeWiped) {
		t.Fatalf("inspect's State: %+v", st)
	}
	// stop is a no-op on it, as on any stopped sandbox (its state
	// directory is made again from the kept record, still saying why).
	c.ok("stop", "rb")
	if out := c.ok("ps", "-a"); !strings.Contains(out, "exited (runtime state lost)") {
		t.Fatalf("ps -a after stop:\n%s", out)
	}
	c.ok("start", "rb")
	if out := c.ok("exec", "rb", "--", "sh", "-c", "cat /root/f; echo $A"); out != "kept\n1\n" {
		t.Fatalf("exec after the start: %q", out)
	}
	c.ok("prune")
	if got := c.record("rb"); got.Status != sandbox.StatusRunning || got.ID != sb.ID {
		t.Fatalf("after prune: %+v", got)
	}
	c.ok("rm", "-f", "rb")
}

// simulateReboot does to sb what a reboot does, and nothing else: its PID 1
// (by pid and start time) and every process in its own cgroups killed -9,
// its cgroups removed, and the runtime tree (the test's own) wiped.
func simulateReboot(t *testing.T, sb *sandbox.Sandbox, runtimeDir string) {
	t.Helper()
	if start, err := pidStart(sb.Pid); err == nil && start == sb.PidStart {
		_ = unix.Kill(sb.Pid, unix.SIGKILL)
	}
	var cgroups []string
	if sb.Cgroup != "" {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", sb.Cgroup))
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", sb.Cgroup, "cgroup.procs")); err == nil {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", sb.Cgroup))
		}
		for _, d := range dirs {
			_ = filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
				if err == nil && de.IsDir() {
					cgroups = append(cgroups, p)
				}
				return nil
			})
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, d := range slices.Backward(cgroups) {
		for {
			data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, p := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(p); err == nil {
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("remove cgroup %s: %v", d, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for {
		if start, err := pidStart(sb.Pid); err != nil || start != sb.PidStart {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PID 1 %d still runs", sb.Pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.RemoveAll(runtimeDir); err != nil {
		t.Fatalf("wipe the runtime tree: %v", err)
	}
}

// pidStart is pid's start time (clock ticks since boot); a zombie or a
// gone process is an error.
func pidStart(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 || f[0] == "Z" {
		return 0, errors.New("gone")
	}
	return strconv.ParseUint(f[19], 10, 64)
}
