package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/testenv"
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

	// Refused before anything runs: a missing directory (in the
	// foreground and with -d), a directory.
	before := c.ok("ps", "-aq")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--stats-file", filepath.Join(dir, "nodir", "s.json")}, "open its directory"},
		{[]string{"--stats-file", dir}, "is a directory"},
		{[]string{"-d", "--stats-file", filepath.Join(dir, "nodir", "d.json")}, "open its directory"},
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

// TestDetachedRm: run -d --rm's sandbox is removed once its main process
// has exited, by the first bothy wait, ps or stop to find it so (there is
// no daemon to do it when it exits), and run -d --stats-file's stats are
// written by the bothy that removes the sandbox, into the directory they
// were given in and no other.
func TestDetachedRm(t *testing.T) {
	c := newCLI(t)
	dir := testenv.ShortTempDir(t)
	gone := func(what, name string) {
		t.Helper()
		for _, sb := range c.records() {
			if sb.Name == name {
				t.Errorf("%s: sandbox %s (%s) left", what, name, sb.Status)
			}
		}
	}
	exited := func(name string) {
		t.Helper()
		for range 200 {
			if sb := c.record(name); sb.Status == sandbox.StatusExited {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s did not exit", name)
	}

	// wait prints the code, then removes it; the stats are written then.
	w := filepath.Join(dir, "w.json")
	c.ok("run", "-d", "--rm", "--name", "w", "--stats-file", w, "--", "sh", "-c", statsScript)
	if out := c.ok("wait", "w"); out != "3\n" {
		t.Errorf("wait: %q", out)
	}
	gone("wait", "w")
	if st := readRunStats(t, w); st.ExitCode != 3 || st.Name != "w" || st.UpperBytes < 300*1024 || st.CPUSeconds <= 0 || st.MemoryPeak < 40e6 || st.WallSeconds <= 0 {
		t.Errorf("stats of a -d --rm sandbox: %+v", st)
	}
	// ps: an exited one is removed, not listed; a running one stays.
	c.ok("run", "-d", "--rm", "--name", "p", "--", "true")
	c.ok("run", "-d", "--rm", "--name", "r", "--", "sleep", "100")
	exited("p")
	if out := c.ok("ps", "-a", "--format", "{{.Names}}"); out != "r\n" {
		t.Errorf("ps -a: %q, want r only", out)
	}
	gone("ps", "p")
	// stop: removed once stopped.
	c.ok("stop", "-t", "0", "r")
	gone("stop", "r")

	// Without --rm: the stats are written at rm, not before.
	k := filepath.Join(dir, "k.json")
	c.ok("run", "-d", "--name", "k", "--stats-file", k, "--", "sh", "-c", "exit 2")
	exited("k")
	c.ok("ps", "-a")
	if _, err := os.Stat(k); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stats of a sandbox not removed yet: %v", err)
	}
	removing := time.Now()
	c.ok("rm", "k")
	// Ended is when its main process ended, not when it was removed.
	if st := readRunStats(t, k); st.ExitCode != 2 || !st.Ended.Before(removing) || st.WallSeconds <= 0 {
		t.Errorf("stats at rm (begun %s): %+v", removing.UTC().Format(time.RFC3339Nano), st)
	}

	// The directory swapped meanwhile, for another or for a symlink to
	// another, and the sandbox started again after (which must not look
	// the path up again): nothing written there, the sandbox removed all
	// the same, and rm (or prune, which lists it as removed) says why.
	for _, swap := range []string{"directory", "symlink"} {
		sub, other := filepath.Join(dir, swap), filepath.Join(dir, swap+"-other")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(c.ok("run", "-d", "--name", "s", "--stats-file", filepath.Join(sub, "s.json"), "--", "true"))
		if err := os.Rename(sub, sub+".old"); err != nil {
			t.Fatal(err)
		}
		if swap == "directory" {
			other = sub
		}
		if err := os.Mkdir(other, 0o755); err != nil {
			t.Fatal(err)
		}
		if swap == "symlink" {
			if err := os.Symlink(other, sub); err != nil {
				t.Fatal(err)
			}
		}
		exited("s")
		c.ok("start", "s")
		exited("s")
		remove := []string{"rm", "s"}
		if swap == "symlink" {
			remove = []string{"prune"}
		}
		out, errOut, code := c.run("", remove...)
		if code == 0 || !strings.Contains(errOut, "removed, but") || !strings.Contains(errOut, "not the one it was in") ||
			(swap == "symlink" && out != id+"\n") {
			t.Errorf("%s swapped: %v: exit %d, %q, %q", swap, remove, code, out, errOut)
		}
		gone(swap+" swapped", "s")
		for _, d := range []string{other, sub + ".old"} {
			if names, _ := os.ReadDir(d); len(names) != 0 {
				t.Errorf("%s swapped: %s has %v", swap, d, names)
			}
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rm", "--restart", "on-failure", "--", "true"}, "--restart and --rm conflict"},
		{[]string{"--pool", "p", "--stats-file", k}, "--pool -d takes no --stats-file"},
	} {
		args := append([]string{"run", "-d"}, tc.args...)
		if _, errOut, code := c.run("", args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}
