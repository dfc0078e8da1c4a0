package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// killedAt runs bothy with BOTHY_KILL_AT=bothy:mark and checks that it was
// killed there.
func (k *killEnv) killedAt(mark string, args ...string) {
	k.t.Helper()
	cmd := exec.Command(k.bin, args...)
	cmd.Env = append(k.env, trace.KillEnv+"=bothy:"+mark)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
		k.t.Fatalf("bothy %s with a kill at %q: %v (not killed): %s", strings.Join(args, " "), mark, err, out)
	}
}

// checkPool checks, after a prune, that every sandbox left runs, and that
// each still waiting in pool is one of its ready members; it returns the
// number of members.
func (k *killEnv) checkPool(pool, after string) int {
	k.t.Helper()
	var list []sandbox.Sandbox
	if err := json.Unmarshal([]byte(k.ok("ps", "-a", "--format", "json")), &list); err != nil {
		k.t.Fatal(err)
	}
	members := 0
	for _, sb := range list {
		if sb.Status != sandbox.StatusRunning {
			k.t.Fatalf("after %s and prune: sandbox %s is %s", after, sb.ID[:12], sb.Status)
		}
		if sb.Pool == "" {
			continue
		}
		if sb.Pool != pool {
			k.t.Fatalf("after %s and prune: sandbox %s of pool %q left", after, sb.ID[:12], sb.Pool)
		}
		if _, err := os.Stat(filepath.Join(k.root, "run", "pools", pool, "members", sb.ID)); err != nil {
			k.t.Fatalf("after %s and prune: sandbox %s waits in pool %s but is not a member: %v", after, sb.ID[:12], pool, err)
		}
		members++
	}
	return members
}

// TestKillPool kills bothy with SIGKILL at each step of a claim (run
// --pool), of a refill (pool fill) and of a pool's removal (pool rm); after
// each, bothy prune leaves only running sandboxes: the pool's ready
// members and those claimed whole. At the end, rm of the pool and of the
// claimed sandboxes and a prune leave nothing at all: no state, no
// cgroup, no process, no mount.
func TestKillPool(t *testing.T) {
	k := newKillEnv(t, true)
	k.ok("pool", "create", "kp", "--size", "2")
	if n := k.checkPool("kp", "create"); n != 2 {
		t.Fatalf("%d members after create, want 2", n)
	}
	for i, mark := range []string{"claim", "member locked", "executor claimed", "claimed"} {
		k.killedAt(mark, "run", "--pool", "kp", "-d", "--name", "claim"+string(rune('a'+i)))
		k.ok("prune")
		k.checkPool("kp", "a kill at "+mark)
		k.ok("pool", "fill", "kp")
		if n := k.checkPool("kp", "refill"); n != 2 {
			t.Fatalf("%d members after a refill, want 2", n)
		}
	}
	for _, mark := range []string{"directory made", "state written", "launcher started", "ready", "member made"} {
		// One member gone; the filler is killed on its way.
		k.ok("rm", "-f", k.poolMember("kp"))
		k.killedAt(mark, "pool", "fill", "kp")
		k.ok("prune")
		k.checkPool("kp", "a filler killed at "+mark)
		k.ok("pool", "fill", "kp")
		if n := k.checkPool("kp", "refill"); n != 2 {
			t.Fatalf("%d members after a refill, want 2", n)
		}
	}
	k.killedAt("pool hidden", "pool", "rm", "kp")
	k.ok("prune")
	if n := k.checkPool("kp", "a kill at pool hidden"); n != 0 {
		t.Fatalf("%d members of a removed pool left", n)
	}
	var list []sandbox.Sandbox
	if err := json.Unmarshal([]byte(k.ok("ps", "-a", "--format", "json")), &list); err != nil {
		t.Fatal(err)
	}
	for _, sb := range list {
		k.ok("rm", "-f", sb.ID)
	}
	k.ok("prune")
	if l := k.leftovers(); !l.empty() {
		t.Fatalf("left after rm and prune:%s", l)
	}
	if left := readNames(filepath.Join(k.root, "run", "pools")); len(left) != 0 {
		t.Fatalf("pool directories left: %v", left)
	}
}

// poolMember returns the ID of a sandbox waiting in pool.
func (k *killEnv) poolMember(pool string) string {
	k.t.Helper()
	var list []sandbox.Sandbox
	if err := json.Unmarshal([]byte(k.ok("ps", "-a", "--format", "json")), &list); err != nil {
		k.t.Fatal(err)
	}
	for _, sb := range list {
		if sb.Pool == pool {
			return sb.ID
		}
	}
	k.t.Fatalf("no sandbox waits in pool %s", pool)
	return ""
}
