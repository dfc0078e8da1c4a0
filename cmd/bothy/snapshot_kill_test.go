package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// TestKillStartSnapshotFork kills bothy with SIGKILL at each step of a
// start, of a snapshot and of a fork. After each, the sandbox's files are
// all there: a following bothy start finishes what was cut short (the
// sandbox runs, every file it was given since its creation reads back),
// and bothy prune removes what the killed command left (incomplete
// snapshots, half-made children) and nothing else that runs. At the end,
// rm, snapshot rm and prune leave nothing: no state, no layer, no cgroup,
// no process, no mount.
func TestKillStartSnapshotFork(t *testing.T) {
	k := newKillEnv(t, true)
	// An overlay volume too: its upper is renamed after the root
	// filesystem's ("snapshot: volume renamed").
	k.ok("run", "-d", "--name", "ks", "-v", t.TempDir()+":/ov:overlay")
	n := 0
	// write gives the sandbox one more file, and its volume one; check
	// reads them all back.
	write := func() {
		k.ok("exec", "ks", "--", "sh", "-c", fmt.Sprintf("echo %d > /root/f%d; echo %d > /ov/f%d", n, n, n, n))
		n++
	}
	check := func(after string) {
		t.Helper()
		var want []string
		for i := range n {
			want = append(want, fmt.Sprint(i))
		}
		slices.Sort(want)
		for _, dir := range []string{"/root", "/ov"} {
			out := k.ok("exec", "ks", "--", "sh", "-c", "cat "+dir+"/f*")
			if got := strings.Fields(out); !slices.Equal(got, want) {
				t.Fatalf("after %s: the sandbox's files in %s read %q, want %q", after, dir, got, want)
			}
		}
	}
	running := func(after string) []sandbox.Sandbox {
		t.Helper()
		list := psRecords(k.ok("ps", "-a", "--format", "json"))
		for _, sb := range list {
			if sb.Status != sandbox.StatusRunning {
				t.Fatalf("after %s and prune: sandbox %s is %s", after, sb.ID[:12], sb.Status)
			}
		}
		return list
	}
	snapshots := func() []snapshotView {
		t.Helper()
		var list []snapshotView
		if err := json.Unmarshal([]byte(k.ok("snapshot", "ls", "--format", "json")), &list); err != nil {
			t.Fatal(err)
		}
		return list
	}

	for _, mark := range []string{"start", "image resolved", "stopped sandbox taken down", "state written", "launcher started", "launcher reported", "ready"} {
		write()
		k.ok("stop", "ks")
		k.killedAt(mark, "start", "ks")
		k.ok("start", "ks")
		check("a start killed at " + mark)
	}
	named := 0
	for i, mark := range []string{"snapshot: record made", "snapshot: pending", "snapshot: stopped", "snapshot: layer renamed", "snapshot: volume renamed", "snapshot: done", "launcher started", "ready"} {
		write()
		k.killedAt(mark, "snapshot", "ks", fmt.Sprint("s", i))
		k.ok("start", "ks")
		check("a snapshot killed at " + mark)
		k.ok("prune")
		running("a snapshot killed at " + mark)
		// Kept: the snapshots whose layer was renamed, under their name;
		// gone: the others, and their names.
		complete := strings.HasPrefix(mark, "snapshot: layer") || strings.HasPrefix(mark, "snapshot: volume") || strings.HasPrefix(mark, "snapshot: done") || !strings.HasPrefix(mark, "snapshot:")
		if complete {
			named++
		}
		list := snapshots()
		if len(list) != named {
			t.Fatalf("after a snapshot killed at %s and prune: %d snapshots, want %d: %+v", mark, len(list), named, list)
		}
		for _, s := range list {
			if !s.Complete || s.Name == "" {
				t.Fatalf("after a snapshot killed at %s and prune: snapshot %+v", mark, s)
			}
		}
	}
	for _, mark := range []string{"snapshot: pending", "snapshot: layer renamed", "snapshot: volume renamed", "directory made", "state written", "launcher started", "ready"} {
		write()
		k.killedAt(mark, "fork", "ks", "-n", "2")
		k.ok("start", "ks")
		check("a fork killed at " + mark)
		k.ok("prune")
		for _, sb := range running("a fork killed at " + mark) {
			if sb.Name == "ks" {
				continue
			}
			// A child that was made whole sees the parent's files.
			k.ok("exec", sb.ID, "--", "cat", fmt.Sprintf("/root/f%d", n-1), fmt.Sprintf("/ov/f%d", n-1))
			k.ok("rm", "-f", sb.ID)
		}
	}

	// The CLI's other paths: restart, and a command run in the
	// foreground on a snapshot (the snapshot's image's command planned).
	k.ok("restart", "ks")
	check("restart")
	var last string
	for _, s := range snapshots() {
		if s.Name != "" {
			last = s.Name
		}
	}
	if out := k.ok("run", "--rm", "--from-snapshot", last, "--", "cat", "/root/f0"); strings.TrimSpace(out) != "0" {
		t.Fatalf("run --from-snapshot %s: %q", last, out)
	}
	if _, stderr, err := k.bothy("run", "--from-snapshot", last, "busybox", "--", "true"); err == nil || !strings.Contains(stderr, "--from-snapshot takes no IMAGE") {
		t.Fatalf("run --from-snapshot with an IMAGE: %v %s", err, stderr)
	}

	k.ok("rm", "-f", "ks")
	// Newest first: each is on the one before.
	for _, s := range slices.Backward(snapshots()) {
		if s.Name == "" {
			t.Fatalf("a fork's snapshot kept after its sandboxes' removal: %+v", s)
		}
		k.ok("snapshot", "rm", s.Name)
	}
	k.ok("prune")
	if l := k.leftovers(); !l.empty() {
		t.Fatalf("left after rm and prune:%s", l)
	}
	if left := readNames(filepath.Join(k.root, "data", "snapshots")); !slices.Equal(left, []string{"names"}) {
		t.Fatalf("snapshot directories left: %v", left)
	}
	if left := readNames(filepath.Join(k.root, "data", "snapshots", "names")); len(left) != 0 {
		t.Fatalf("snapshot names left: %v", left)
	}
}
