package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	list := psRecords(k.ok("ps", "-a", "--format", "json"))
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
	list := psRecords(k.ok("ps", "-a", "--format", "json"))
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
	list := psRecords(k.ok("ps", "-a", "--format", "json"))
	for _, sb := range list {
		if sb.Pool == pool {
			return sb.ID
		}
	}
	k.t.Fatalf("no sandbox waits in pool %s", pool)
	return ""
}

// waitFilled waits until pool has all its members ready and no filler
// at work (the detached bothy pool fill has exited).
func (k *killEnv) waitFilled(pool string) {
	k.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var pools []poolView
		if err := json.Unmarshal([]byte(k.ok("pool", "ls", "--format", "json")), &pools); err != nil {
			k.t.Fatal(err)
		}
		for _, p := range pools {
			if p.Name == pool && p.Ready == p.Size && !p.Filling {
				return
			}
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("pool %s not refilled: %+v", pool, pools)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPoolCLI: bothy pool create, ls; bothy run --pool with a command
// and with -d, given its name, environment, working directory and labels;
// the refill by a detached process that exits once the pool is full; a
// cold start from an empty pool, said on stderr; the run flags a claim
// refuses; ps hides the waiting sandboxes, ps -a shows them.
func TestPoolCLI(t *testing.T) {
	k := newKillEnv(t, true)
	k.ok("pool", "create", "web", "--size", "1", "-e", "A=1")
	if out := k.ok("pool", "ls"); !strings.Contains(out, "web") {
		t.Fatalf("pool ls: %q", out)
	}
	if out := k.ok("ps"); strings.Count(out, "\n") != 1 {
		t.Fatalf("ps lists a waiting sandbox:\n%s", out)
	}
	if out := k.ok("ps", "-a"); strings.Count(out, "\n") != 2 {
		t.Fatalf("ps -a does not list the waiting sandbox:\n%s", out)
	}
	out := k.ok("run", "--pool", "web", "--name", "x", "-e", "B=2", "-w", "/srv", "--label", "team=ml", "--", "sh", "-c", "echo $A $B; pwd")
	if out != "1 2\n/srv\n" {
		t.Fatalf("run --pool: %q", out)
	}
	var sbs []inspectView
	if err := json.Unmarshal([]byte(k.ok("inspect", "x")), &sbs); err != nil || len(sbs) != 1 {
		t.Fatal(err)
	}
	sb := sbs[0]
	if sb.FromPool != "web" || sb.Config.Labels["team"] != "ml" || sb.Pool != "" {
		t.Fatalf("claimed record: from %q labels %v pool %q", sb.FromPool, sb.Config.Labels, sb.Pool)
	}
	// The claim's refill ran detached, and exited once the pool was full.
	k.waitFilled("web")
	id := strings.TrimSpace(k.ok("run", "--pool", "web", "-d", "--name", "y"))
	for _, ref := range []string{"y", id} {
		if got := strings.TrimSpace(k.ok("exec", ref, "--", "sh", "-c", "echo $A")); got != "1" {
			t.Fatalf("exec in a claimed sandbox: %q", got)
		}
	}
	k.waitFilled("web")
	// Empty: a cold start, said so.
	k.ok("rm", "-f", k.poolMember("web"))
	_, errOut, err := k.bothy("run", "--pool", "web", "-d", "--name", "z", "-e", "C=3")
	if err != nil || !strings.Contains(errOut, "pool web has no sandbox ready") || !strings.Contains(errOut, "cold start") {
		t.Fatalf("claim from an empty pool: %v: %s", err, errOut)
	}
	if got := strings.TrimSpace(k.ok("exec", "z", "--", "sh", "-c", "echo $A$C")); got != "13" {
		t.Fatalf("cold claim's environment: %q", got)
	}
	k.waitFilled("web")
	// rm -af (and stop -a, kill -a) leave the pool's waiting sandbox:
	// claimed ones go, it stays.
	member := k.poolMember("web")
	k.ok("rm", "-af")
	if left := k.list(); len(left) != 1 || left[0].ID != member {
		t.Fatalf("after rm -af: %+v, want the pool's waiting sandbox %s alone", left, member)
	}
	for _, bad := range [][]string{
		{"run", "--pool", "web", "--network", "host", "-d"},
		{"run", "--pool", "web", "-m", "1g", "-d"},
		{"run", "--pool", "web", "-d", "busybox"},
		{"run", "--pool", "nosuch", "-d"},
		{"pool", "create", "web"},
		{"pool", "create", "bad/name"},
		{"pool", "create", "n", "--size", "0"},
	} {
		if _, errOut, err := k.bothy(bad...); err == nil {
			t.Errorf("bothy %s succeeded", strings.Join(bad, " "))
		} else {
			t.Logf("bothy %s: %s", strings.Join(bad, " "), strings.TrimSpace(errOut))
		}
	}
	k.ok("pool", "rm", "web")
	// Nothing is left (x, y and z went with rm -af). A filler still at
	// work (the one z's claim started may be) removes the member it was
	// making once it finds the pool gone.
	deadline := time.Now().Add(time.Minute)
	for {
		out := k.ok("ps", "-a")
		if strings.Count(out, "\n") == 1 { // the header
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after pool rm:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
