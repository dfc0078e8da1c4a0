package sessions

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/bash"
	"github.com/bothy-sandbox/bothy/executor/cgroup"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
)

// What the OpenHands dialect uses: Run creates "default" on first use and
// its working directory becomes WorkingDir; RunStatic runs in a fresh
// shell in the sessions' directory; other sessions must exist; nothing
// starts once shut down.
func TestRunForTheDialect(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("requires bash: the sessions are bash")
	}
	dir := t.TempDir()
	s := New(Options{Cwd: dir, Env: os.Environ(), NoChangeTimeout: 5 * time.Second, MaxSessions: 2,
		Bodies: &httpapi.Bodies{Max: 1 << 20, Mem: budget.NewMemory(1<<20, nil)}, Cgroup: cgroup.Noop{}})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if wd := s.WorkingDir(); wd != dir {
		t.Fatalf("working dir before any session: %q", wd)
	}
	res, oom, err := s.Run(ctx, "default", bash.RunRequest{Command: "cd / && echo hi"})
	if err != nil || oom || res.Status != bash.StatusCompleted || strings.TrimSpace(res.Output) != "hi" {
		t.Fatalf("run: %+v %v %v", res, oom, err)
	}
	if wd := s.WorkingDir(); wd != "/" {
		t.Fatalf("working dir after cd: %q", wd)
	}
	if res, err := s.RunStatic(ctx, "", bash.RunRequest{Command: "pwd; echo $PAGER"}); err != nil || res.Output != dir+"\ncat" {
		t.Fatalf("static: %+v %v", res, err)
	}
	if _, _, err := s.Run(ctx, "other", bash.RunRequest{Command: "true"}); !errors.Is(err, bash.ErrNotFound) {
		t.Fatalf("a named session that does not exist: %v", err)
	}
	s.Shutdown()
	if _, err := s.RunStatic(ctx, "", bash.RunRequest{Command: "true"}); !errors.Is(err, httpapi.ErrShuttingDown) {
		t.Fatalf("static after shutdown: %v", err)
	}
}
