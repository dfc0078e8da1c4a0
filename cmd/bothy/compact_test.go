package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// TestCompactCLI: bothy snapshot starts no compaction below
// sandbox.CompactThreshold layers, and starts one in the background (the
// command does not wait for it) at the threshold, which ends with the
// snapshot compacted; the sandbox started again mounts one snapshot layer
// and reads every layer's file. bothy snapshot compact killed (SIGKILL)
// before its merge, after it and after its rename, each followed by bothy
// prune, leaves no temporary directory and the snapshot either not
// compacted or whole; run again, it finishes, or says it is done. rm,
// snapshot rm and prune leave no snapshot.
func TestCompactCLI(t *testing.T) {
	k := newKillEnv(t, true)
	k.ok("run", "-d", "--name", "deep")
	k.ok("stop", "deep")
	upper := inspectOne(t, k, "deep").UpperDir
	var names []string
	snapshot := func(i int) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(upper, fmt.Sprintf("layer%02d", i)), []byte(fmt.Sprintln(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, fmt.Sprint("s", i))
		out, errOut, err := k.bothy("snapshot", "deep", names[i])
		if err != nil {
			t.Fatalf("snapshot %d: %v: %s", i, err, errOut)
		}
		return strings.TrimSpace(out) + " " + errOut
	}
	snaps := func() map[string]snapshotView {
		t.Helper()
		var list []snapshotView
		if err := json.Unmarshal([]byte(k.ok("snapshot", "ls", "--format", "json")), &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]snapshotView{}
		for _, s := range list {
			out[s.Name] = s
		}
		return out
	}
	for i := range sandbox.CompactThreshold - 1 {
		if out := snapshot(i); strings.Contains(out, "compacting") {
			t.Fatalf("snapshot %d, %d layers deep, compacts: %s", i, i+1, out)
		}
	}
	out := snapshot(sandbox.CompactThreshold - 1)
	if !strings.Contains(out, "compacting it in the background") {
		t.Fatalf("snapshot %d layers deep: %q, want a background compaction", sandbox.CompactThreshold, out)
	}
	t.Logf("snapshot %d: %s", sandbox.CompactThreshold, out)
	top := names[len(names)-1]
	for deadline := time.Now().Add(2 * time.Minute); !snaps()[top].Compacted; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(snaps()[top].Dir, "compact.log"))
			t.Fatalf("snapshot %s not compacted in the background: %s", top, log)
		}
	}
	for name, s := range snaps() {
		if want := sandbox.CompactThreshold; name == top && (s.Stack != 1 || s.Depth != want) || name != top && s.Compacted {
			t.Fatalf("snapshot %s: depth %d, stack %d, compacted %v", name, s.Depth, s.Stack, s.Compacted)
		}
	}
	t.Logf("compacted in the background: %s", k.ok("snapshot", "ls"))
	k.ok("start", "deep")
	if got := inspectOne(t, k, "deep").SnapshotStack; got != 1 {
		t.Fatalf("the sandbox mounts %d snapshot layers, want 1", got)
	}
	var want []string
	for i := range sandbox.CompactThreshold {
		want = append(want, fmt.Sprint(i))
	}
	if got := strings.Fields(k.ok("exec", "deep", "--", "sh", "-c", "cat /layer*")); !slices.Equal(got, want) {
		t.Fatalf("on the compacted snapshot, the layers' files read %q", got)
	}
	k.ok("stop", "deep")

	// One more snapshot (two layers: the compacted one and its own),
	// compacted by a command killed at each step; the sandbox runs on it.
	snapshot(sandbox.CompactThreshold)
	k.ok("start", "deep") // prune removes a stopped sandbox
	last := names[len(names)-1]
	temps := func() []string {
		m, _ := filepath.Glob(filepath.Join(k.root, "data", "snapshots", "*", "compact.tmp-*"))
		return m
	}
	for _, mark := range []string{"compact: merging", "compact: merged", "compact: done"} {
		k.killedAt(mark, "snapshot", "compact", last)
		if mark == "compact: merged" && len(temps()) == 0 {
			t.Fatalf("killed at %q: no temporary directory to prune", mark)
		}
		k.ok("prune")
		if left := temps(); len(left) > 0 {
			t.Fatalf("killed at %q, then prune: %v left", mark, left)
		}
		if s := snaps()[last]; s.Compacted != (mark == "compact: done") {
			t.Fatalf("killed at %q, then prune: compacted %v", mark, s.Compacted)
		}
	}
	if _, errOut, err := k.bothy("snapshot", "compact", last); err != nil || !strings.Contains(errOut, "compacted already") {
		t.Fatalf("compact again: %v: %s", err, errOut)
	}

	k.ok("rm", "-f", "deep")
	slices.Reverse(names)
	k.ok(append([]string{"snapshot", "rm"}, names...)...)
	k.ok("prune")
	if left := snaps(); len(left) > 0 {
		t.Fatalf("snapshots left: %v", left)
	}
}

// inspectOne is bothy inspect of one sandbox.
func inspectOne(t *testing.T, k *killEnv, ref string) inspectView {
	t.Helper()
	var list []inspectView
	if err := json.Unmarshal([]byte(k.ok("inspect", ref)), &list); err != nil || len(list) != 1 {
		t.Fatalf("inspect %s: %d %v", ref, len(list), err)
	}
	return list[0]
}
