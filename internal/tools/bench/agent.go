package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/proc"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// measureAgent takes the executor figures of the agent API on the default
// image (bash sessions need bash): session round trip, output throughput,
// idle executor memory, concurrent sessions.
func measureAgent(r *result, m *sandbox.Manager, bothy func(...string) (string, error)) {
	ctx := context.Background()
	id, err := bothy("run", "-d", "default")
	if err != nil {
		logf("agent: %v", err)
		return
	}
	defer bothy("rm", "-f", id)
	sb, err := m.Get(ctx, id)
	if err != nil {
		logf("agent: %v", err)
		return
	}
	// Idle executor: resident memory of PID 1 before any request.
	if rss := vmRSS(sb.Pid); rss > 0 {
		r.Notes["agent/rss"] = fmt.Sprintf("%.1f MB", float64(rss)/1e6)
	}
	c := sb.Client()
	defer c.Close()

	for i := range 300 {
		t0 := time.Now()
		res, err := c.RunSession(ctx, "default", api.SessionRunRequest{Command: "true"})
		if err != nil || res.ExitCode != 0 {
			logf("session: %v", err)
			break
		}
		if i >= 20 {
			r.add("agent/session", time.Since(t0))
		}
	}

	const size = 10 << 20
	for range 5 {
		t0 := time.Now()
		code, err := c.Stream(ctx, api.RunRequest{Cmd: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", size), Stream: true}, io.Discard, io.Discard, nil)
		if err != nil || code != 0 {
			logf("throughput: %v %d", err, code)
			break
		}
		r.add("agent/10mb", time.Since(t0))
	}

	// As many sessions as the executor keeps by default (16, its default
	// session included), created and used at once.
	const sessions = 15
	t0 := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "s" + strconv.Itoa(i)
			_, err := c.CreateSession(ctx, api.SessionCreateRequest{Name: name})
			if err == nil {
				var res *api.SessionResult
				res, err = c.RunSession(ctx, name, api.SessionRunRequest{Command: "echo " + name})
				if err == nil && !strings.Contains(res.Output, name) {
					err = fmt.Errorf("session %s answered %q", name, res.Output)
				}
			}
			if err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed == 0 {
		r.add("agent/sessions", time.Since(t0))
		if rss := vmRSS(sb.Pid); rss > 0 {
			r.Notes["agent/sessions"] = fmt.Sprintf("executor RSS after: %.1f MB", float64(rss)/1e6)
		}
	} else {
		r.Notes["agent/sessions"] = fmt.Sprintf("%d of %d failed", failed, sessions)
	}
}

// vmRSS is process pid's resident memory in bytes (0 once it is gone).
func vmRSS(pid int) int64 {
	rss, _ := proc.RSS(pid)
	return rss
}
