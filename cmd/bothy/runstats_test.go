package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// statsScript writes 300 KiB to the sandbox's root filesystem, holds about
// 40 MB in a shell variable (CPU time and a peak), and exits 3.
const statsScript = `dd if=/dev/zero of=/written bs=1024 count=300 2>/dev/null; x=$(head -c 40000000 /dev/zero | tr '\0' a); echo ${#x}; exit 3`

func readRunStats(t *testing.T, p string) sandbox.RunStats {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("stats file: %v", err)
	}
	var st sandbox.RunStats
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("stats file: %v: %s", err, data)
	}
	return st
}

// checkRunStats: the figures of statsScript's sandbox are there and
// plausible: its exit code, the bytes it wrote, CPU time, a peak of at
// least the 40 MB it held, a wall time.
func checkRunStats(t *testing.T, st sandbox.RunStats, usageFrom string) {
	t.Helper()
	if st.ExitCode != 3 || st.UpperBytes < 300<<10 || st.UpperFiles < 1 || st.CPUSeconds <= 0 ||
		st.MemoryPeak < 40e6 || st.WallSeconds <= 0 || st.Ended.Before(st.Started) || len(st.ID) != 32 ||
		st.UsageFrom != usageFrom || len(st.Errors) != 0 {
		t.Errorf("stats: %+v; want exit 3, ≥ 300 KiB written, CPU time, a peak ≥ 40 MB from %s, no errors", st, usageFrom)
	}
}

// TestStatsFile: run --stats-file writes what the sandbox used when it
// stops (with --rm too, and for a failing command), read from its cgroup,
// or, without one, from the rusage of its PID 1; inspect shows the same
// figures for a sandbox kept; the file is replaced, never written through
// a symlink, even one the sandbox planted through a volume; bad names are
// refused before anything runs.
func TestStatsFile(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "stats.json")
	out, errOut, code := c.run("", "run", "--rm", "--stats-file", p, "--", "sh", "-c", statsScript)
	if code != 3 || out != "40000000\n" {
		t.Fatalf("run: exit %d, %q %q", code, out, errOut)
	}
	checkRunStats(t, readRunStats(t, p), "cgroup")

	// Kept: inspect shows the same record, and the upper directory's
	// size now.
	out, errOut, code = c.run("", "run", "--name", "kept", "--", "sh", "-c", statsScript)
	if code != 3 {
		t.Fatalf("run: exit %d, %q %q", code, out, errOut)
	}
	var inspected []inspectView
	if err := json.Unmarshal([]byte(c.ok("inspect", "kept")), &inspected); err != nil || len(inspected) != 1 || inspected[0].RunStats == nil {
		t.Fatalf("inspect: %v %+v", err, inspected)
	}
	checkRunStats(t, *inspected[0].RunStats, "cgroup")
	if u := inspected[0].Usage; u == nil || u.UpperBytes < 300<<10 {
		t.Errorf("inspect usage: %+v; want the upper directory's ≥ 300 KiB", u)
	}

	// No cgroup of its own (as an unprivileged user's sandbox in a Slurm
	// job): the CPU and the peak come from the PID 1's rusage.
	if os.Getuid() != 0 {
		t.Run("rusage", func(t *testing.T) {
			t.Setenv(cgroupParentEnv, "/bothy-not-delegated")
			p := filepath.Join(dir, "rusage.json")
			if _, errOut, code := c.run("", "run", "--rm", "--stats-file", p, "--", "sh", "-c", statsScript); code != 3 {
				t.Fatalf("run: exit %d, %q", code, errOut)
			}
			checkRunStats(t, readRunStats(t, p), "rusage")
		})
	}

	// A symlink at the name (planted by the sandbox itself, through a
	// volume of the stats file's directory) is replaced, not followed.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	ps := filepath.Join(vol, "stats.json")
	if _, errOut, code := c.run("", "run", "--rm", "-v", vol+":/out", "--stats-file", ps, "--",
		"ln", "-s", victim, "/out/stats.json"); code != 0 {
		t.Fatalf("run: exit %d, %q", code, errOut)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	if fi, err := os.Lstat(ps); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("stats file: %v %v; want a regular file in place of the symlink", fi, err)
	} else if st := readRunStats(t, ps); st.ExitCode != 0 {
		t.Errorf("stats: %+v", st)
	}
	if left, _ := filepath.Glob(filepath.Join(vol, ".stats.json.*")); len(left) != 0 {
		t.Errorf("temporaries left: %v", left)
	}

	// Refused before anything runs: a missing directory, a directory,
	// -d.
	before := c.ok("ps", "-aq")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--stats-file", filepath.Join(dir, "nodir", "s.json")}, "open its directory"},
		{[]string{"--stats-file", dir}, "is a directory"},
		{[]string{"-d", "--stats-file", p}, "needs the command in the foreground"},
	} {
		args := append(append([]string{"run", "--rm"}, tc.args...), "--", "true")
		if _, errOut, code := c.run("", args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want an error with %q", tc.args, code, errOut, tc.want)
		}
	}
	if after := c.ok("ps", "-aq"); after != before {
		t.Errorf("a refused run left a sandbox: %q, before %q", after, before)
	}
}
