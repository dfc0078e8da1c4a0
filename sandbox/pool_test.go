package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// newPool makes and fills a pool of size busybox sandboxes with env, and
// returns its members.
func newPool(t *testing.T, m *sandbox.Manager, name string, size int, env ...string) []*sandbox.Sandbox {
	t.Helper()
	ctx := context.Background()
	if _, err := m.CreatePool(ctx, name, size, sandbox.CreateOptions{Image: "busybox", Env: env}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.RemovePool(context.Background(), name) })
	if err := m.Fill(ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	members := poolSandboxes(t, m, name)
	if len(members) != size {
		t.Fatalf("%d sandboxes in pool %s, want %d", len(members), name, size)
	}
	return members
}

// poolSandboxes are the sandboxes whose record says they wait in pool.
func poolSandboxes(t *testing.T, m *sandbox.Manager, pool string) []*sandbox.Sandbox {
	t.Helper()
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(list, func(sb *sandbox.Sandbox) bool { return sb.Pool != pool })
}

// TestPoolClaim: a pooled sandbox serves nothing before its claim, even to
// the holder of its pre-claim key; a claim gives it its name, environment,
// working directory, labels and key, and it is no longer the pool's; a
// claimed sandbox has nothing of another tenant (files, processes,
// sessions, environment), and a released one never goes back to the pool;
// a claim refused for its own options leaves the pool as it was.
func TestPoolClaim(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	members := newPool(t, m, "p", 2, "FROM_POOL=yes")
	for _, sb := range members {
		if sb.Status != sandbox.StatusRunning {
			t.Fatalf("member %s is %s", sb.ShortID(), sb.Status)
		}
		// Not usable before its claim, even with its pre-claim key.
		if _, err := sb.Client().Run(ctx, api.RunRequest{Cmd: "true", Wait: true}); !errors.Is(err, api.ErrForbidden) {
			t.Fatalf("run in an unclaimed member: %v, want forbidden", err)
		}
	}

	// Refused for its own options: nothing taken.
	if _, _, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "p", Workdir: "relative"}); err == nil {
		t.Fatal("claim with a relative workdir succeeded")
	}
	if _, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Name: "taken"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "p", Name: "taken"}); !errors.Is(err, sandbox.ErrNameInUse) {
		t.Fatalf("claim with a name in use: %v, want ErrNameInUse", err)
	}
	// Refused by the executor (a NUL in the environment), after the
	// record the claim keeps for a reboot was written: the member goes
	// back without it.
	if _, _, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "p", Env: []string{"A=\x00"}}); !errors.Is(err, api.ErrBadRequest) {
		t.Fatalf("claim with a NUL in its environment: %v, want a bad request", err)
	}
	if p, err := m.GetPool(ctx, "p"); err != nil || p.Ready != 2 {
		t.Fatalf("pool after refused claims: %+v %v, want 2 ready", p, err)
	}
	// (The members' empty files their claims write through are there too.)
	if kept, _ := filepath.Glob(filepath.Join(m.Paths().Data, "records", "*.json")); len(kept) != 1 { // "taken"'s
		t.Fatalf("kept records after refused claims: %v, want taken's only", kept)
	}

	a, how, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "p", Name: "tenant-a", Env: []string{"TENANT=a"}, Workdir: "/work/a",
		Labels: map[string]string{"job": "1"}, APIKey: "key-a"})
	if err != nil {
		t.Fatal(err)
	}
	if how.Cold {
		t.Fatalf("claim from a full pool was cold: %+v", how)
	}
	if !slices.ContainsFunc(members, func(sb *sandbox.Sandbox) bool { return sb.ID == a.ID }) {
		t.Fatalf("claimed %s, not a member of the pool", a.ShortID())
	}
	got, err := m.Get(ctx, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != a.ID || got.Pool != "" || got.FromPool != "p" || got.APIKey != "key-a" || got.Labels["job"] != "1" || got.Workdir != "/work/a" {
		t.Fatalf("claimed record: %+v", got)
	}
	if out := run(t, got, "echo $FROM_POOL $TENANT; pwd"); out != "yes a\n/work/a" {
		t.Fatalf("claimed env and workdir: %q", out)
	}
	// The pre-claim key opens nothing.
	pre := *got
	pre.APIKey = members[slices.IndexFunc(members, func(sb *sandbox.Sandbox) bool { return sb.ID == a.ID })].APIKey
	if _, err := pre.Client().Run(ctx, api.RunRequest{Cmd: "true", Wait: true}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("pre-claim key after the claim: %v, want forbidden", err)
	}
	// Tenant a leaves a file, a process and an exported
	// variable behind.
	run(t, got, "echo secret > /tmp/secret; echo secret > /work/a/secret")
	c := got.Client()
	if _, err := c.Start(ctx, api.RunRequest{Cmd: "export LEAK=1; sleep 1000"}); err != nil {
		t.Fatal(err)
	}
	// (busybox has no bash: no session can be made; the second tenant's
	// list is checked all the same.)
	if err := m.Remove(ctx, a.ID, true); err != nil {
		t.Fatal(err)
	}

	b, _, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "p", Name: "tenant-b", Workdir: "/work/a"})
	if err != nil {
		t.Fatal(err)
	}
	if b.ID == a.ID {
		t.Fatal("the pool gave out a released sandbox again")
	}
	if out := run(t, b, "ls /tmp /work/a; echo LEAK=$LEAK TENANT=$TENANT; ps -o comm | grep -c sleep || true"); out != "/tmp:\n\n/work/a:\nLEAK= TENANT=\n0" {
		t.Fatalf("second tenant sees the first's leftovers: %q", out)
	}
	procs, err := b.Client().Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The run above is the only process, and it has ended.
	for _, p := range procs {
		if p.Running {
			t.Fatalf("a process of another tenant: %+v", p)
		}
	}
	sessions, err := b.Client().Sessions(ctx)
	if err != nil && !errors.Is(err, api.ErrUnsupported) {
		t.Fatal(err)
	}
	if len(sessions) > 0 {
		t.Fatalf("sessions of another tenant: %+v", sessions)
	}
	// Refill: back to two members, neither of them a claimed one.
	if err := m.Fill(ctx, "p", nil); err != nil {
		t.Fatal(err)
	}
	for _, sb := range poolSandboxes(t, m, "p") {
		if sb.ID == a.ID || sb.ID == b.ID {
			t.Fatalf("claimed sandbox %s is back in the pool", sb.ShortID())
		}
	}
}

// TestPoolClaimFiles: a member's claim rewrites its records through the
// two files made with it (no file created on the claim's path): they are
// there while it waits, gone once it is claimed, its state and kept record
// written; a member removed with its pool leaves neither.
func TestPoolClaimFiles(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	members := newPool(t, m, "p", 2)
	records := filepath.Join(m.Paths().Data, "records")
	files := func(id string) []string {
		var there []string
		for _, f := range []string{filepath.Join(m.Paths().State, "sb", id, ".state-claim"), filepath.Join(records, "."+id+".claim.tmp")} {
			if _, err := os.Lstat(f); err == nil {
				there = append(there, f)
			}
		}
		return there
	}
	for _, sb := range members {
		if got := files(sb.ID); len(got) != 2 {
			t.Fatalf("member %s has %v, want its two claim files", sb.ShortID(), got)
		}
	}
	sb, _, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "p", Name: "claimed", NoColdStart: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := files(sb.ID); len(got) != 0 {
		t.Fatalf("claimed sandbox still has %v: the claim made files of its own", got)
	}
	if got, err := m.Get(ctx, "claimed"); err != nil || got.ID != sb.ID || got.Pool != "" {
		t.Fatalf("claimed sandbox's record: %+v %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(records, sb.ID+".json")); err != nil {
		t.Fatalf("claimed sandbox's kept record: %v", err)
	}
	if err := m.RemovePool(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	for _, other := range members {
		if other.ID != sb.ID {
			if got := files(other.ID); len(got) != 0 {
				t.Fatalf("removed member left %v", got)
			}
		}
	}
}

// TestPoolParallelClaims: parallel claims never share a sandbox; an empty
// pool gives a cold start, reported (or ErrPoolEmpty when asked); parallel
// fillers never overfill the pool.
func TestPoolParallelClaims(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	const size = 6
	newPool(t, m, "par", size)
	var mu sync.Mutex
	ids := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, size)
	for i := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, _, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "par", NoColdStart: true, Env: []string{"I=" + string(rune('a'+i))}})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			ids[sb.ID]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("parallel claim: %v", err)
	}
	if len(ids) != size {
		t.Fatalf("%d claims got %d sandboxes: %v", size, len(ids), ids)
	}
	if _, _, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "par", NoColdStart: true}); !errors.Is(err, sandbox.ErrPoolEmpty) {
		t.Fatalf("claim from an empty pool with NoColdStart: %v", err)
	}
	cold, how, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "par", Env: []string{"X=cold"}, Workdir: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	if !how.Cold || !strings.Contains(how.ColdReason, "no sandbox ready") || cold.FromPool != "par" {
		t.Fatalf("claim from an empty pool: %+v %+v", how, cold)
	}
	if out := run(t, cold, "echo $X; pwd"); out != "cold\n/w" {
		t.Fatalf("cold claim: %q", out)
	}
	// Three fillers at once: exactly size members.
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Fill(ctx, "par", nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := m.Fill(ctx, "par", nil); err != nil { // whichever lost the lock left it to the others
		t.Fatal(err)
	}
	if n := len(poolSandboxes(t, m, "par")); n != size {
		t.Fatalf("after parallel fills: %d sandboxes in the pool, want %d", n, size)
	}
}

// TestPoolRemoveAndPrune: rm of a pool removes its waiting sandboxes and
// leaves the claimed ones; prune removes a member left unlisted (a killed
// filler's), a member that died, and the sandboxes of a pool whose
// directory is gone.
func TestPoolRemoveAndPrune(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	newPool(t, m, "gone", 3)
	claimed, _, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	members := poolSandboxes(t, m, "gone")
	// A member whose file is gone, as a filler killed before it added it
	// leaves it; one that died.
	if err := os.Remove(filepath.Join(m.Paths().State, "pools", "gone", "members", members[0].ID)); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx, members[1].ID, 0); err != nil {
		t.Fatal(err)
	}
	removed, err := m.PrunePools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{members[0].ID, members[1].ID}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Fatalf("prune removed %v, want %v", removed, want)
	}
	if err := m.RemovePool(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if left := poolSandboxes(t, m, "gone"); len(left) != 0 {
		t.Fatalf("pool rm left %d sandboxes", len(left))
	}
	if _, err := m.GetPool(ctx, "gone"); !errors.Is(err, sandbox.ErrPoolNotFound) {
		t.Fatalf("removed pool: %v", err)
	}
	if sb, err := m.Get(ctx, claimed.ID); err != nil || sb.Status != sandbox.StatusRunning {
		t.Fatalf("claimed sandbox after pool rm: %v", err)
	}
	if _, _, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "gone"}); !errors.Is(err, sandbox.ErrPoolNotFound) {
		t.Fatalf("claim from a removed pool: %v", err)
	}
	// Bad input.
	for _, bad := range []struct {
		name string
		size int
		opts sandbox.CreateOptions
	}{
		{"../x", 1, sandbox.CreateOptions{}},
		{"ok", 0, sandbox.CreateOptions{}},
		{"ok", 1, sandbox.CreateOptions{Name: "n"}},
		{"ok", 1, sandbox.CreateOptions{Cmd: []string{"true"}}},
	} {
		if _, err := m.CreatePool(ctx, bad.name, bad.size, bad.opts); err == nil {
			t.Errorf("CreatePool(%q, %d, %+v) succeeded", bad.name, bad.size, bad.opts)
		}
	}
	if _, err := m.CreatePool(ctx, "twice", 1, sandbox.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreatePool(ctx, "twice", 1, sandbox.CreateOptions{}); !errors.Is(err, sandbox.ErrPoolExists) {
		t.Fatalf("second pool of the same name: %v", err)
	}
	if err := m.RemovePool(ctx, "twice"); err != nil {
		t.Fatal(err)
	}
}

// poolClaimsEnv sets the number of claims of TestPoolManyClaims (default
// 40; the figure is 1000: BOTHY_POOL_CLAIMS=1000).
const poolClaimsEnv = "BOTHY_POOL_CLAIMS"

// TestPoolManyClaims claims, two at a time, from a pool of 32 refilled by
// a filler running alongside (as the detached bothy pool fill does), and
// releases each claimed sandbox: no claim fails, each gets a sandbox no
// other claim got, answering with its own key and environment. It reports
// how many were warm and the claim-to-ready median (never fails on time).
func TestPoolManyClaims(t *testing.T) {
	n := 40
	if s := os.Getenv(poolClaimsEnv); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("%s=%q: give a number of claims", poolClaimsEnv, s)
		}
	}
	m := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	newPool(t, m, "many", 32)
	// The filler: as the detached process does, fill until full; again
	// whenever claims took some.
	fillerDone := make(chan struct{})
	go func() {
		defer close(fillerDone)
		for ctx.Err() == nil {
			if err := m.Fill(ctx, "many", nil); err != nil && ctx.Err() == nil {
				t.Errorf("fill: %v", err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var (
		mu    sync.Mutex
		seen  = map[string]bool{}
		warm  int
		times []time.Duration
	)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				key := fmt.Sprintf("key-%d", i)
				t0 := time.Now()
				sb, how, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "many", APIKey: key, Env: []string{fmt.Sprintf("CLAIM=%d", i)}})
				d := time.Since(t0)
				if err != nil {
					t.Errorf("claim %d: %v", i, err)
					continue
				}
				res, err := sb.Client().Run(ctx, api.RunRequest{Cmd: "echo $CLAIM", Wait: true})
				if err != nil || strings.TrimSpace(res.Stdout) != strconv.Itoa(i) {
					t.Errorf("claim %d: sandbox %s answers %+v %v", i, sb.ShortID(), res, err)
				}
				mu.Lock()
				if seen[sb.ID] {
					t.Errorf("claim %d: sandbox %s given twice", i, sb.ShortID())
				}
				seen[sb.ID] = true
				if !how.Cold {
					warm++
					times = append(times, d)
				}
				mu.Unlock()
				if err := m.Remove(context.Background(), sb.ID, true); err != nil {
					t.Errorf("remove claimed %s: %v", sb.ShortID(), err)
				}
			}
		}()
	}
	for i := range n {
		if t.Failed() {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	cancel()
	<-fillerDone
	slices.Sort(times)
	var median time.Duration
	if len(times) > 0 {
		median = times[len(times)/2]
	}
	t.Logf("%d claims from a pool of 32: %d warm (claim-to-ready median %v), %d cold", n, warm, median, n-warm)
}

// TestPoolMemberRemoved: a member removed by rm -f (its file left in the
// pool) is not ready any more: the pool counts one fewer, a fill makes a
// new one, and a claim never gets the removed one.
func TestPoolMemberRemoved(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	members := newPool(t, m, "rmd", 2)
	if err := m.Remove(ctx, members[0].ID, true); err != nil {
		t.Fatal(err)
	}
	if p, err := m.GetPool(ctx, "rmd"); err != nil || p.Ready != 1 {
		t.Fatalf("ready after rm -f of a member: %+v %v", p, err)
	}
	if err := m.Fill(ctx, "rmd", nil); err != nil {
		t.Fatal(err)
	}
	now := poolSandboxes(t, m, "rmd")
	if p, err := m.GetPool(ctx, "rmd"); err != nil || p.Ready != 2 || len(now) != 2 || slices.ContainsFunc(now, func(sb *sandbox.Sandbox) bool { return sb.ID == members[0].ID }) {
		t.Fatalf("after a fill: %+v %v, members %d", p, err, len(now))
	}
	for range 2 {
		sb, how, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "rmd", NoColdStart: true})
		if err != nil || sb.ID == members[0].ID || how.Cold {
			t.Fatalf("claim: %v %+v %v", sb, how, err)
		}
	}
}
