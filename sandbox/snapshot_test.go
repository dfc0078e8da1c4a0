package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// waitStatus waits until sandbox ref reads as want.
func waitStatus(t *testing.T, m *sandbox.Manager, ref string, want sandbox.Status) *sandbox.Sandbox {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		sb, err := m.Get(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if sb.Status == want {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is %s, want %s", ref, sb.Status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStartAfterStop: a stopped sandbox starts again with its ID, name,
// key, limits, environment and labels, on its files, and serves; its main
// command runs again; start of a running sandbox changes nothing; after a
// kill -9 of its PID 1, and through Restart, the same.
func TestStartAfterStop(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb := createLimited(t, m, sandbox.CreateOptions{
		Name: "again", Image: "busybox", Env: []string{"FOO=bar"}, Labels: map[string]string{"k": "v"},
		Limits: sandbox.Limits{Memory: 96 << 20},
		// The main process: it counts its starts in the upper directory.
		Cmd: []string{"sh", "-c", "echo start >> /root/starts; exec sleep 1000"}, ImageCommand: true,
	})
	run(t, sb, "echo kept > /root/file; mkdir -p /work && seq 1 1000 > /work/n && rm /bin/vi")
	if err := m.Stop(ctx, "again", time.Second); err != nil {
		t.Fatal(err)
	}
	stopped := waitStatus(t, m, "again", sandbox.StatusExited)
	list, err := m.List(ctx)
	if err != nil || len(list) != 1 || list[0].Status != sandbox.StatusExited {
		t.Fatalf("list after stop: %v %v", list, err)
	}

	check := func(how string, got *sandbox.Sandbox, oldPid int) {
		t.Helper()
		if got.Status != sandbox.StatusRunning || got.ID != sb.ID || got.Name != "again" || got.APIKey != sb.APIKey || got.Limits.Memory != 96<<20 || got.Labels["k"] != "v" {
			t.Fatalf("%s: %+v", how, got)
		}
		if got.Pid == oldPid {
			t.Fatalf("%s: PID 1 is still %d", how, oldPid)
		}
		if out := run(t, got, "cat /root/file; wc -l < /work/n; echo $FOO; ls /bin/vi 2>&1 || true"); !strings.HasPrefix(out, "kept\n1000\nbar\n") || !strings.Contains(out, "No such file") {
			t.Fatalf("%s: files, environment or whiteout lost: %q", how, out)
		}
	}
	got, _, err := m.Start(ctx, "again")
	if err != nil {
		t.Fatal(err)
	}
	check("start after stop", got, stopped.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for run(t, got, "cat /root/starts | wc -l") != "2" {
		if time.Now().After(deadline) {
			t.Fatalf("the main command did not run again: %q", run(t, got, "cat /root/starts"))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Started while running: the same sandbox, untouched (as podman).
	same, _, err := m.Start(ctx, "again")
	if err != nil || same.Pid != got.Pid {
		t.Fatalf("start of a running sandbox: pid %d → %v, %v", got.Pid, same, err)
	}

	// Its PID 1 killed from outside (as at a crash).
	if err := unix.Kill(got.Pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "again", sandbox.StatusExited)
	again, _, err := m.Start(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("start after kill -9", again, got.Pid)

	restarted, _, err := m.Restart(ctx, "again", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	check("restart", restarted, again.Pid)

	// Removed as any sandbox: nothing left.
	if err := m.Remove(ctx, "again", true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(restarted.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state directory left: %v", err)
	}
}

// TestSnapshotAndFork: a snapshot keeps a sandbox's files under a name and
// the sandbox goes on, on them; sandboxes started from the snapshot see
// them, and neither side sees the other's later writes; a snapshot is not
// removed while used; a fork of 8 starts 8 children that see the parent's
// files at fork time, each isolated from the parent and from each other;
// what is not used any more goes with prune.
func TestSnapshotAndFork(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	parent, err := m.Create(ctx, sandbox.CreateOptions{Name: "parent", Image: "busybox", Env: []string{"WHO=parent-env"}, Workdir: "/work"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, parent, "echo p0 > /root/a; echo gone > /root/deleted; mkdir -p /work/d && seq 1 100 > /work/d/n")

	snap, err := m.TakeSnapshot(ctx, "parent", sandbox.SnapshotOptions{Name: "setup"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Get(ctx, "parent")
	if err != nil || p.Status != sandbox.StatusRunning || p.Pid == parent.Pid || p.Snapshot != snap.ID {
		t.Fatalf("parent after its snapshot: %+v, %v", p, err)
	}
	if got := run(t, p, "cat /root/a /work/d/n | head -2"); got != "p0\n1" {
		t.Fatalf("parent's files after its snapshot: %q", got)
	}
	// The parent's upper directory is fresh: its files are in the layer.
	if entries, _ := os.ReadDir(p.UpperDir); len(entries) != 0 {
		t.Fatalf("parent's upper directory after its snapshot holds %d entries", len(entries))
	}

	child, err := m.Create(ctx, sandbox.CreateOptions{Name: "child", FromSnapshot: "setup"})
	if err != nil {
		t.Fatal(err)
	}
	if child.Image != "busybox" || child.Snapshot != snap.ID {
		t.Fatalf("child's record: image %q snapshot %q", child.Image, child.Snapshot)
	}
	run(t, p, "echo p1 > /root/a; rm /root/deleted")
	run(t, child, "echo c > /root/c")
	if got := run(t, child, "cat /root/a /root/deleted; ls /root"); got != "p0\ngone\na\nc\ndeleted" {
		t.Fatalf("child from the snapshot sees %q", got)
	}
	if got := run(t, p, "cat /root/a; ls /root"); got != "p1\na" {
		t.Fatalf("parent sees %q", got)
	}

	for _, ref := range []string{"setup", snap.ID[:12]} {
		if err := m.RemoveSnapshot(ctx, ref); !errors.Is(err, sandbox.ErrSnapshotInUse) {
			t.Fatalf("snapshot rm %s while used: %v", ref, err)
		}
	}
	if _, err := m.Create(ctx, sandbox.CreateOptions{FromSnapshot: "setup", Image: "bothy-default"}); err == nil {
		t.Fatal("a snapshot started with another image")
	}

	// A fork of 8: the parent's files at fork time, in each.
	fsnap, children, err := m.Fork(ctx, "parent", sandbox.ForkOptions{N: 8, NamePrefix: "kid"})
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 8 || fsnap.Parent != snap.ID || fsnap.Depth != 2 || fsnap.Name != "" {
		t.Fatalf("fork: %d children, snapshot %+v", len(children), fsnap)
	}
	p, _ = m.Get(ctx, "parent")
	run(t, p, "echo p2 > /root/a")
	for i, c := range children {
		if c.Name != fmt.Sprintf("kid-%d", i+1) || c.APIKey == p.APIKey || c.Status != sandbox.StatusRunning {
			t.Fatalf("child %d: %+v", i, c)
		}
		run(t, c, fmt.Sprintf("echo %d > /root/mine", i))
	}
	for i, c := range children {
		// The parent's environment and directory; its file as it was at
		// the fork; the whiteout of /root/deleted carried; its own write
		// only.
		if got := run(t, c, "echo $WHO; pwd; cat /root/a /root/mine; ls /root"); got != fmt.Sprintf("parent-env\n/work\np1\n%d\na\nmine", i) {
			t.Fatalf("child %d sees %q", i, got)
		}
	}
	if got := run(t, p, "cat /root/a; ls /root"); got != "p2\na" {
		t.Fatalf("parent after the fork sees %q", got)
	}

	all, err := m.ListSnapshots(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("snapshots: %v %v", all, err)
	}
	if users := all[1].Users; len(users) != 9 || !slices.Contains(users, p.ID) {
		t.Fatalf("fork snapshot used by %v", users)
	}
	if len(all[0].Users) != 1 || all[0].Users[0] != child.ID || !slices.Equal(all[0].Children, []string{fsnap.ID}) {
		t.Fatalf("named snapshot: users %v children %v", all[0].Users, all[0].Children)
	}

	// Once nothing uses them: the fork's goes with the last sandbox on it,
	// the named one with snapshot rm.
	for _, c := range children {
		if err := m.Remove(ctx, c.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Remove(ctx, "child", true); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveSnapshot(ctx, "setup"); !errors.Is(err, sandbox.ErrSnapshotInUse) {
		t.Fatalf("snapshot rm under a fork's snapshot: %v", err)
	}
	if err := m.Remove(ctx, "parent", true); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetSnapshot(ctx, fsnap.ID); !errors.Is(err, sandbox.ErrSnapshotNotFound) {
		t.Fatalf("fork snapshot after its last sandbox's removal: %v", err)
	}
	if err := m.RemoveSnapshot(ctx, "setup"); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(snap.Dir))
	if len(entries) != 1 || entries[0].Name() != "names" {
		t.Fatalf("left in the snapshots directory: %v", entries)
	}
}

// TestSnapshotDepth: a stopped sandbox is snapshotted without a start, as
// deep as MaxSnapshotDepth (past the 80 or so layers whose overlay options
// fit in a page: the launcher mounts it with one fsconfig call per layer),
// and then starts on all those layers with every layer's file read back
// and the top-most copy of a file rewritten at each level winning; a
// sandbox on a snapshot half-way down sees that level. One more snapshot
// compacts the stack first, in the foreground (no compaction ran: the
// library starts none of its own): the chain is 257 deep, and the sandbox
// starts on two snapshot layers, the compacted one and the new one, with
// every file there.
func TestSnapshotDepth(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Name: "deep", Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx, "deep", 0); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "deep", sandbox.StatusExited)
	var ids []string
	var s *sandbox.Snapshot
	for i := range sandbox.MaxSnapshotDepth + 1 {
		if i == sandbox.MaxSnapshotDepth {
			// 256 snapshot layers mounted: past it, compaction.
			got, _, err := m.Start(ctx, "deep")
			if err != nil {
				t.Fatal(err)
			}
			if out := run(t, got, "echo $(cat /layer*) / $(cat /top)"); out != depthWant(sandbox.MaxSnapshotDepth) || got.SnapshotStack != sandbox.MaxSnapshotDepth {
				t.Fatalf("%d layers deep (%d mounted), the sandbox reads %q", sandbox.MaxSnapshotDepth, got.SnapshotStack, out)
			}
			if err := m.Stop(ctx, "deep", 0); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, m, "deep", sandbox.StatusExited)
		}
		// Each layer holds one file of its own, and its copy of /top.
		for name, data := range map[string]string{fmt.Sprintf("layer%03d", i): fmt.Sprint(i), "top": fmt.Sprint(i)} {
			if err := os.WriteFile(filepath.Join(sb.UpperDir, name), []byte(data+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		s, err = m.TakeSnapshot(ctx, "deep", sandbox.SnapshotOptions{})
		if err != nil {
			t.Fatalf("snapshot %d: %v", i+1, err)
		}
		ids = append(ids, s.ID)
		if got, _ := m.Get(ctx, "deep"); got.Status != sandbox.StatusExited {
			t.Fatalf("a stopped sandbox is %s after its snapshot", got.Status)
		}
	}
	if s.Depth != sandbox.MaxSnapshotDepth+1 || s.Stack != 2 {
		t.Fatalf("the snapshot past the depth: depth %d stack %d, want %d and 2", s.Depth, s.Stack, sandbox.MaxSnapshotDepth+1)
	}
	if below, err := m.GetSnapshot(ctx, ids[sandbox.MaxSnapshotDepth-1]); err != nil || !below.Compacted || below.Stack != 1 {
		t.Fatalf("the snapshot below it: %+v %v, want it compacted", below, err)
	}
	got, _, err := m.Start(ctx, "deep")
	if err != nil {
		t.Fatal(err)
	}
	if out := run(t, got, "echo $(cat /layer*) / $(cat /top)"); out != depthWant(sandbox.MaxSnapshotDepth+1) || got.SnapshotStack != 2 {
		t.Fatalf("%d snapshots deep (%d layers mounted), the sandbox reads %q", sandbox.MaxSnapshotDepth+1, got.SnapshotStack, out)
	}
	half := sandbox.MaxSnapshotDepth / 2
	mid, err := m.Create(ctx, sandbox.CreateOptions{FromSnapshot: ids[half-1]})
	if err != nil {
		t.Fatal(err)
	}
	if out := run(t, mid, "echo $(cat /layer*) / $(cat /top)"); out != depthWant(half) || mid.SnapshotStack != half {
		t.Fatalf("on snapshot %d (%d layers mounted), the sandbox reads %q", half, mid.SnapshotStack, out)
	}
}

// depthWant is what a sandbox on the nth snapshot of TestSnapshotDepth
// reads: every layer's file, and the top-most layer's /top.
func depthWant(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d ", i)
	}
	return fmt.Sprintf("%s/ %d", b.String(), n-1)
}

// TestStartNetwork: a sandbox on an attached network (root: the bridge;
// rootless: slirp4netns) starts again with its network re-attached (it
// reaches outside, its main command serves on its published port) and its
// host port kept; a host port taken while it was stopped is published
// again on another, reported; rm leaves nothing of the network.
func TestStartNetwork(t *testing.T) {
	e := newNetEnv(t)
	ctx := context.Background()
	url := fmt.Sprintf("http://%s/", e.server("outside"))
	sb := e.create(sandbox.CreateOptions{Name: "web", Network: network.Options{Mode: "bridge", Publish: []string{"8000"}}, Cmd: httpdCmd("served")})
	first := publishedURL(t, sb)
	if out, err := fetchHost(first); err != nil || out != "served" {
		t.Fatalf("published port: %q %v", out, err)
	}
	if err := e.m.Stop(ctx, "web", time.Second); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.m, "web", sandbox.StatusExited)
	again, rep, err := e.m.Start(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.PortsMoved) != 0 || publishedURL(t, again) != first {
		t.Fatalf("host port not kept: %v → %v (%v)", sb.Ports(), again.Ports(), rep.PortsMoved)
	}
	if out, err := fetchHost(first); err != nil || out != "served" {
		t.Fatalf("published port after start: %q %v", out, err)
	}
	if out, err := fetchIn(again, url); err != nil || out != "outside" {
		t.Fatalf("outbound after start: %q %v", out, err)
	}

	if err := e.m.Stop(ctx, "web", time.Second); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.m, "web", sandbox.StatusExited)
	// Rootless, the helper that held the port ends with the sandbox, a
	// moment after it (its watcher).
	var taken net.Listener
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if taken, err = net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", sb.Ports()[0].HostPort)); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	moved, rep, err := e.m.Start(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	now := publishedURL(t, moved)
	if now == first || len(rep.PortsMoved) != 1 || !strings.Contains(rep.PortsMoved[0], fmt.Sprint(moved.Ports()[0].HostPort)) {
		t.Fatalf("a taken host port: %s → %s, reported %v", first, now, rep.PortsMoved)
	}
	if out, err := fetchHost(now); err != nil || out != "served" {
		t.Fatalf("published port after a move: %q %v", out, err)
	}
	if err := e.m.Remove(ctx, "web", true); err != nil {
		t.Fatal(err)
	}
}
