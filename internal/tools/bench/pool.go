package main

import (
	"context"
	"time"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// benchPoolSize is the pool the claim figures are taken from.
const benchPoolSize = 32

// measurePool takes the warm-pool figures: claim-to-ready of a claim in
// process (sandbox.Manager.Claim: from the call until the executor has
// answered its claim and serves with the claimed key, the record
// rewritten), and of `bothy run --pool POOL -d` (the CLI's start-up and
// the start of the detached refill included). The pool is filled before
// each claim, outside the timing, and claimed sandboxes are removed.
func measurePool(r *result, m *sandbox.Manager, bothy func(...string) (string, error), n int) {
	ctx := context.Background()
	logf("%s: pool claims", r.Mode)
	if _, err := bothy("pool", "create", "benchpool", "--size", "32", "busybox"); err != nil {
		logf("pool create: %v", err)
		r.Notes["pool/claim"] = "failed"
		return
	}
	defer func() { _, _ = bothy("pool", "rm", "benchpool") }()
	waitFull := func() bool {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			p, err := m.GetPool(ctx, "benchpool")
			if err == nil && p.Ready == p.Size && !p.Filler {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	var claimed []string
	release := func() {
		if len(claimed) > 0 {
			_, _ = bothy(append([]string{"rm", "-f"}, claimed...)...)
			claimed = claimed[:0]
		}
	}
	defer release()
	for i := range n + 3 {
		t0 := time.Now()
		sb, _, err := m.Claim(ctx, sandbox.ClaimOptions{Pool: "benchpool", NoColdStart: true, Env: []string{"BENCH=1"}, Workdir: "/tmp"})
		d := time.Since(t0)
		if err != nil {
			logf("claim: %v", err)
			r.Notes["pool/claim"] = "failed"
			return
		}
		claimed = append(claimed, sb.ID)
		if i >= 3 { // warm-up
			r.add("pool/claim", d)
		}
		if len(claimed) >= benchPoolSize/2 {
			release()
			if _, err := bothy("pool", "fill", "benchpool"); err != nil {
				logf("pool fill: %v", err)
			}
		}
	}
	release()
	if _, err := bothy("pool", "fill", "benchpool"); err != nil {
		logf("pool fill: %v", err)
	}
	for i := range n/2 + 2 {
		if !waitFull() {
			logf("pool not refilled")
			break
		}
		t0 := time.Now()
		id, err := bothy("run", "--pool", "benchpool", "-d", "-e", "BENCH=1")
		d := time.Since(t0)
		if err != nil {
			logf("run --pool: %v", err)
			r.Notes["pool/claim-cli"] = "failed"
			break
		}
		claimed = append(claimed, id)
		if i >= 2 {
			r.add("pool/claim-cli", d)
		}
	}
}
