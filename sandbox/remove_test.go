package sandbox_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// statusOf lists the sandboxes by ID with their status.
func statusOf(t *testing.T, m *sandbox.Manager) map[string]sandbox.Status {
	t.Helper()
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]sandbox.Status{}
	for _, sb := range list {
		out[sb.ID] = sb.Status
	}
	return out
}

// cgroupDirs lists the sandbox's cgroup directories that exist, in every
// hierarchy.
func cgroupDirs(sb *sandbox.Sandbox) []string {
	if sb.Cgroup == "" {
		return nil
	}
	hs, _ := filepath.Glob("/sys/fs/cgroup/*")
	var out []string
	for _, h := range hs {
		if _, err := os.Stat(h + sb.Cgroup); err == nil {
			out = append(out, h+sb.Cgroup)
		}
	}
	return out
}

// What a killed bothy can leave of a sandbox is listed by List (ps -a) as
// dead, and Prune removes it: a state directory without state.json, an upper
// directory whose state directory is gone while the sandbox's executor still
// runs in its cgroups (its processes are killed, its cgroups removed), a name
// whose sandbox is gone, and the temporary directory of a creator killed
// before its directory got its ID.
func TestPruneLeftovers(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sbDir := filepath.Join(m.Paths().State, "sb")

	// A state directory whose state.json is gone, with the upper directory.
	a, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx, a.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(a.Dir, "state.json")); err != nil {
		t.Fatal(err)
	}
	// A running sandbox whose whole state directory is gone: only its upper
	// directory names it; its executor still runs in its cgroups.
	b, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Cgroup == "" {
		t.Fatalf("sandbox has no cgroup of its own (%s): this test needs one", b.LimitsIgnored)
	}
	if err := userns.RemoveTree(b.Dir); err != nil {
		t.Fatal(err)
	}
	// A name whose sandbox is gone, and the temporary directory of a
	// creator killed before its directory got its ID.
	if err := os.Symlink(strings.Repeat("ab", 16), filepath.Join(m.Paths().State, "names", "gone")); err != nil {
		t.Fatal(err)
	}
	abandoned := filepath.Join(sbDir, ".new-1")
	if err := os.Mkdir(abandoned, 0o700); err != nil {
		t.Fatal(err)
	}

	st := statusOf(t, m)
	if st[a.ID] != sandbox.StatusDead || st[b.ID] != sandbox.StatusDead || len(st) != 2 {
		t.Errorf("List: %v, want %s and %s dead", st, a.ID, b.ID)
	}
	for _, ref := range []string{"a", a.ID[:8]} {
		if got, err := m.Get(ctx, ref); err != nil || got.ID != a.ID || got.Status != sandbox.StatusDead {
			t.Errorf("Get(%s) of a sandbox without state.json: %+v, %v", ref, got, err)
		}
	}
	if got, err := m.Get(ctx, b.ID[:8]); err != nil || got.Status != sandbox.StatusDead || got.Dir != "" {
		t.Errorf("Get of a sandbox without a state directory: %+v, %v", got, err)
	}

	removed, err := m.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, a.ID) {
		t.Errorf("Prune removed %v, want %s", removed, a.ID)
	}
	assertGone(t, m, a)
	assertGone(t, m, b)
	for _, sb := range []*sandbox.Sandbox{a, b} {
		if dirs := cgroupDirs(sb); len(dirs) > 0 {
			t.Errorf("cgroups of %s left: %v", sb.ShortID(), dirs)
		}
	}
	if alive(b.Pid) {
		t.Errorf("the executor of the sandbox without state (%d) still runs", b.Pid)
	}
	names, _ := os.ReadDir(filepath.Join(m.Paths().State, "names"))
	if len(names) != 0 {
		t.Errorf("names left: %v", names)
	}
	if _, err := os.Stat(abandoned); !os.IsNotExist(err) {
		t.Errorf("abandoned %s: %v", abandoned, err)
	}
}

// alive reports whether pid runs (and is not a zombie).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(data), ") Z")
}

// Prune never removes a sandbox from under its creator: sandboxes created
// while Prune runs in a loop all start and run; one whose launcher hangs is
// creating, and Prune leaves it; rm -f ends its launcher, and its creator
// cleans up.
func TestPruneSparesCreation(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	stop := make(chan struct{})
	var pruned sync.WaitGroup
	pruned.Add(1)
	go func() {
		defer pruned.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := m.Prune(ctx); err != nil {
				t.Errorf("Prune: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	const n = 4
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Name: "p" + strconv.Itoa(i)})
			if err != nil {
				t.Errorf("Create while Prune runs: %v", err)
				return
			}
			if got := run(t, sb, "echo ok"); got != "ok" {
				t.Errorf("sandbox %d: %q", i, got)
			}
		}()
	}
	wg.Wait()
	close(stop)
	pruned.Wait()
	if st := statusOf(t, m); len(st) != n {
		t.Errorf("after creates under Prune: %v, want %d running", st, n)
	}

	// A launcher that hangs: the sandbox stays creating, and Prune leaves it.
	hm, err := sandbox.Open(sandbox.Options{Paths: m.Paths(), Executor: testenv.Executor(t), Init: hangingInit(t)})
	if err != nil {
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() {
		_, err := hm.Create(ctx, sandbox.CreateOptions{Image: "busybox", Name: "hung"})
		created <- err
	}()
	var id string
	for deadline := time.Now().Add(time.Minute); id == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hanging launcher never started")
		}
		select {
		case err := <-created:
			t.Fatalf("Create with a hanging launcher ended before its launcher was seen: %v", err)
		default:
		}
		if sb, err := m.Get(ctx, "hung"); err == nil && sb.LauncherPid != 0 {
			id = sb.ID
		}
	}
	switch st := statusOf(t, m)[id]; st {
	case "":
		t.Fatalf("the sandbox whose launcher hangs vanished: Create: %v", <-created)
	case sandbox.StatusCreating:
	default:
		t.Errorf("status while the launcher hangs: %s, want creating", st)
	}
	if removed, err := m.Prune(ctx); err != nil || slices.Contains(removed, id) {
		t.Errorf("Prune removed a sandbox being created: %v %v", removed, err)
	}
	if err := m.Remove(ctx, id, false); !errors.Is(err, sandbox.ErrRunning) {
		t.Errorf("rm of a creating sandbox: %v, want ErrRunning", err)
	}
	if err := m.Remove(ctx, id, true); err != nil {
		t.Errorf("rm -f of a creating sandbox: %v", err)
	}
	if err := <-created; err == nil {
		t.Error("Create succeeded although rm -f ended its launcher")
	}
	if _, err := m.Get(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("after rm -f: %v", err)
	}
}

// rm -f kills whatever is in the sandbox's cgroups, not only its PID 1 (and
// so never fails on a busy cgroup whose processes it can kill): here a
// process of the test's own, moved into the sandbox's cgroups from outside
// its pid namespace, as an init left by a killed launcher is.
func TestRemoveKillsStrays(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	dirs := cgroupDirs(sb)
	if len(dirs) == 0 {
		t.Fatalf("sandbox has no cgroup of its own (%s): this test needs one", sb.LimitsIgnored)
	}
	stray := exec.Command("sleep", "1000")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	defer stray.Process.Kill()
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(stray.Process.Pid)), 0); err != nil {
			t.Fatalf("move the stray into %s: %v", d, err)
		}
	}
	if err := m.Remove(ctx, sb.ID, true); err != nil {
		t.Fatalf("rm -f with a stray in the cgroup: %v", err)
	}
	if err := stray.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the stray in the sandbox's cgroup: %v, want killed", err)
	}
	if left := cgroupDirs(sb); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	assertGone(t, m, sb)
}

// PruneSlurmJob (an Epilog=) removes the sandboxes of exactly the job it
// is given: the Epilog of an array's meta task, whose own job ID is the
// array's, leaves its sibling tasks' sandboxes running; ARRAY_TASK and
// ARRAY_* select one task and every task.
func TestPruneSlurmJob(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	create := func(name string, job sandbox.SlurmJob) string {
		sb, err := m.Create(ctx, sandbox.CreateOptions{Name: name, Image: "busybox", Slurm: &job})
		if err != nil {
			t.Fatal(err)
		}
		return sb.ID
	}
	meta := create("meta", sandbox.SlurmJob{JobID: "7", ArrayJobID: "7", ArrayTaskID: "2"})
	task0 := create("task0", sandbox.SlurmJob{JobID: "8", ArrayJobID: "7", ArrayTaskID: "0"})
	task1 := create("task1", sandbox.SlurmJob{JobID: "9", ArrayJobID: "7", ArrayTaskID: "1"})
	other := create("other", sandbox.SlurmJob{JobID: "70"})
	for _, c := range []struct {
		sel     string
		removed []string
	}{
		{"7", []string{meta}},
		{"7_", nil},
		{"_0", nil},
		{"7_0", []string{task0}},
		{"7_*", []string{task1}},
		{"70", []string{other}},
	} {
		removed, err := m.PruneSlurmJob(ctx, c.sel)
		if err != nil {
			t.Fatalf("PruneSlurmJob(%q): %v", c.sel, err)
		}
		if !slices.Equal(removed, c.removed) {
			t.Errorf("PruneSlurmJob(%q) removed %v, want %v", c.sel, removed, c.removed)
		}
		// The others still run, untouched.
		left := statusOf(t, m)
		for _, id := range c.removed {
			if st, ok := left[id]; ok {
				t.Errorf("PruneSlurmJob(%q): %s still listed (%s)", c.sel, id[:12], st)
			}
		}
		for id, st := range left {
			if st != sandbox.StatusRunning {
				t.Errorf("after PruneSlurmJob(%q): %s is %s, want running", c.sel, id[:12], st)
			}
		}
	}
	if _, err := m.PruneSlurmJob(ctx, ""); err == nil {
		t.Error("PruneSlurmJob(\"\"): no error")
	}
}
