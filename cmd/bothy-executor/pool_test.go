package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
)

// TestPoolModeClaim runs the executor as a pooled sandbox runs it (--pool,
// started with a pre-claim key): before the claim nothing but /alive and
// the claim is served, whoever asks and with whatever key; a bad claim
// changes nothing; the claim gives the API key, environment and working
// directory, after which the pre-claim key opens nothing and a second
// claim is refused.
func TestPoolModeClaim(t *testing.T) {
	e := start(t, "--pool")
	c := ctx(t)
	if err := e.c.Alive(c); err != nil {
		t.Fatalf("alive before the claim: %v", err)
	}
	// The pre-claim key opens nothing but the claim.
	if _, err := e.c.Info(c); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("info before the claim: %v, want forbidden", err)
	}
	if _, err := e.c.Run(c, api.RunRequest{Argv: []string{"true"}}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("run before the claim: %v, want forbidden", err)
	}
	wrong := client.New(e.socket, client.WithAPIKey("not-the-key"))
	defer wrong.Close()
	if err := wrong.Claim(c, api.PoolClaim{APIKey: "mine"}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("claim with a wrong key: %v, want forbidden", err)
	}
	// Refused claims leave it unclaimed.
	for _, bad := range []api.PoolClaim{
		{APIKey: ""},
		{APIKey: "k", Workdir: "relative"},
		{APIKey: "k", Env: []string{"NOEQUALS"}},
		{APIKey: "k", Env: []string{"BOTHY_API_KEY=x"}},
	} {
		if err := e.c.Claim(c, bad); !errors.Is(err, api.ErrBadRequest) {
			t.Fatalf("claim %+v: %v, want bad request", bad, err)
		}
	}
	work := filepath.Join(e.dir, "work", "dir")
	if err := e.c.Claim(c, api.PoolClaim{APIKey: "tenant-key", Env: []string{"TENANT=alice", "OUT=replaced"}, Workdir: work}); err != nil {
		t.Fatalf("claim: %v", err)
	}
	// The pre-claim key opens nothing any more, the claim is not served
	// again.
	if _, err := e.c.Info(c); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("info with the pre-claim key after the claim: %v, want forbidden", err)
	}
	if err := e.c.Claim(c, api.PoolClaim{APIKey: "thief"}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("second claim with the pre-claim key: %v, want forbidden", err)
	}
	tenant := client.New(e.socket, client.WithAPIKey("tenant-key"))
	defer tenant.Close()
	if err := tenant.Claim(c, api.PoolClaim{APIKey: "thief"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("second claim with the tenant's key: %v, want not found", err)
	}
	res, err := tenant.Run(c, api.RunRequest{Cmd: "echo $TENANT $OUT; pwd; env | grep -c BOTHY_API_KEY", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "alice replaced\n" + work + "\n0\n"
	if res.Stdout != want {
		t.Fatalf("claimed environment and workdir: %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}
	if fi, err := os.Stat(work); err != nil || !fi.IsDir() {
		t.Fatalf("workdir not made: %v", err)
	}
	if code := e.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestPoolModeStopUnclaimed: a pooled executor never claimed stops at once
// on SIGTERM with code 0; a main command is refused in pool mode.
func TestPoolModeStopUnclaimed(t *testing.T) {
	e := start(t, "--pool")
	if code := e.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	code, err := run([]string{"--pool", "--socket", filepath.Join(t.TempDir(), "s"), "--", "true"})
	if code != 2 || err == nil || !strings.Contains(err.Error(), "no main command") {
		t.Fatalf("pool mode with a main command: %d %v", code, err)
	}
}
