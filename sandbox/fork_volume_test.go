package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// TestForkOverlayVolume: an overlay volume forks as the root filesystem
// does. Each child sees the volume as the parent had it at the fork (its
// files, and a host file it deleted staying deleted); the parent's, the
// children's and each other's later writes stay their own; the host
// directory is never written; a snapshot of a child carries both layers to
// a sandbox run from it with the same -v, while another target starts
// empty above the host directory; a restart keeps the layers; diff of a
// child's volume lists only the child's own changes.
func TestForkOverlayVolume(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "host"), []byte("h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ov := host + ":/ov:overlay"
	parent, err := m.Create(ctx, sandbox.CreateOptions{Name: "vparent", Image: "busybox", Volumes: []string{ov}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, parent, "echo p0 > /ov/p0; rm /ov/host; mkdir /ov/d")

	_, children, err := m.Fork(ctx, "vparent", sandbox.ForkOptions{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := m.Get(ctx, "vparent")
	run(t, p, "echo p1 > /ov/p1")
	run(t, children[0], "echo c1 > /ov/c1")
	run(t, children[1], "echo c2 > /ov/c2; echo c2 > /ov/p0")

	views := []struct {
		name string
		sb   *sandbox.Sandbox
		want string
	}{
		{"parent", p, "d p0 p1 p0"},
		{"child 1", children[0], "c1 d p0 p0"},
		{"child 2", children[1], "c2 d p0 c2"},
	}
	for _, v := range views {
		if got := run(t, v.sb, "echo $(ls /ov) $(cat /ov/p0)"); got != v.want {
			t.Errorf("%s sees %q in its volume, want %q", v.name, got, v.want)
		}
	}
	if entries, _ := os.ReadDir(host); len(entries) != 1 || entries[0].Name() != "host" {
		t.Fatalf("the host directory was written: %v", entries)
	}
	d, err := m.Diff(ctx, children[0].ID, sandbox.DiffOptions{Target: "/ov"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Changes) != 1 || d.Changes[0].String() != "A /ov/c1" {
		t.Errorf("diff of child 1's volume: %v, want only A /ov/c1", d.Changes)
	}

	// Two levels: a snapshot of child 1, run with the same volume and
	// with the host directory at another target.
	if _, err := m.TakeSnapshot(ctx, children[0].ID, sandbox.SnapshotOptions{Name: "vsnap"}); err != nil {
		t.Fatal(err)
	}
	c1, err := m.Get(ctx, children[0].ID) // started again: a new socket
	if err != nil {
		t.Fatal(err)
	}
	run(t, c1, "echo later > /ov/later")
	from, err := m.Create(ctx, sandbox.CreateOptions{FromSnapshot: "vsnap", Volumes: []string{ov, host + ":/other:overlay"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, from, "echo $(ls /ov) $(cat /ov/p0) / $(ls /other)"); got != "c1 d p0 p0 / host" {
		t.Errorf("from the child's snapshot: %q", got)
	}

	// A restart keeps the parent's volume stack.
	if err := m.Stop(ctx, "vparent", 0); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "vparent", sandbox.StatusExited)
	again, _, err := m.Start(ctx, "vparent")
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, again, "echo $(ls /ov) $(cat /ov/p0)"); got != "d p0 p1 p0" {
		t.Errorf("parent after restart: %q", got)
	}
}

// TestForkBindVolumes: a bind mount or named volume makes a fork refused by
// default, naming the volume and the flag; with ForkVolumesShare the
// children mount the same host directory, and see the parent's writes.
func TestForkBindVolumes(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	host := t.TempDir()
	if _, err := m.Create(ctx, sandbox.CreateOptions{Name: "bparent", Image: "busybox", Volumes: []string{host + ":/b"}}); err != nil {
		t.Fatal(err)
	}
	_, _, err := m.Fork(ctx, "bparent", sandbox.ForkOptions{})
	if err == nil || !strings.Contains(err.Error(), host+":/b") || !strings.Contains(err.Error(), "--volumes share") {
		t.Fatalf("fork with a bind mount: %v", err)
	}
	_, children, err := m.Fork(ctx, "bparent", sandbox.ForkOptions{N: 1, Volumes: sandbox.ForkVolumesShare})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := m.Get(ctx, "bparent")
	run(t, p, "echo shared > /b/f")
	if got := run(t, children[0], "cat /b/f"); got != "shared" {
		t.Fatalf("child of a shared bind sees %q", got)
	}
	if _, _, err := m.Fork(ctx, "bparent", sandbox.ForkOptions{Volumes: "copy"}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", "copy")) {
		t.Fatalf("fork --volumes copy: %v", err)
	}
}
