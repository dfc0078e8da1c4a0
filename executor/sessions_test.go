package executor_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
)

func TestSessionsAPI(t *testing.T) {
	ts, dir := agentServer(t, executor.Options{})
	ctx := testCtx(t)
	c := ts.c

	// "default" is created by its first run.
	res, err := c.RunSession(ctx, "default", api.SessionRunRequest{Command: "echo $PAGER $GIT_PAGER; pwd"})
	if err != nil || res.Status != api.StatusCompleted || res.ExitCode != 0 || res.Output != "cat cat\n"+dir ||
		res.Metadata.WorkingDir != dir || !strings.HasSuffix(res.Observation, "[Command finished with exit code 0]") {
		t.Fatalf("default run: %+v %v", res, err)
	}

	s, err := c.CreateSession(ctx, api.SessionCreateRequest{Name: "s1", Cwd: "/", Env: map[string]string{"FOO": "bar"}, NoChangeTimeout: 0.2})
	if err != nil || s.Name != "s1" || s.PID == 0 || s.Cwd != "/" || s.CreatedAt.IsZero() {
		t.Fatalf("create: %+v %v", s, err)
	}
	if _, err := c.CreateSession(ctx, api.SessionCreateRequest{Name: "s1"}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("duplicate: %v", err)
	}
	res, err = c.RunSession(ctx, "s1", api.SessionRunRequest{Command: "echo $FOO; false"})
	if err != nil || res.Output != "bar" || res.ExitCode != 1 {
		t.Fatalf("s1 run: %+v %v", res, err)
	}
	list, err := c.Sessions(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "default" || list[1].Name != "s1" {
		t.Fatalf("list: %+v %v", list, err)
	}

	// A long command: no-change timeout, poll, input refused as a new
	// command, then C-c.
	res, _ = c.RunSession(ctx, "s1", api.SessionRunRequest{Command: "echo begin; sleep 30"})
	if res.Status != api.StatusNoChangeTimeout || res.ExitCode != -1 || res.Output != "begin" ||
		!strings.Contains(res.Metadata.Suffix, "no new output after 0.2 seconds") {
		t.Fatalf("no-change timeout: %+v", res)
	}
	if s, _ := c.Session(ctx, "s1"); !s.Running {
		t.Fatalf("session while running: %+v", s)
	}
	res, _ = c.RunSession(ctx, "s1", api.SessionRunRequest{Command: "", NoChangeTimeout: 0.05})
	if res.Status != api.StatusNoChangeTimeout || res.Metadata.Prefix == "" {
		t.Fatalf("poll: %+v", res)
	}
	res, _ = c.RunSession(ctx, "s1", api.SessionRunRequest{Command: "ls"})
	if res.Status != api.StatusStillRunning {
		t.Fatalf("refusal: %+v", res)
	}
	res, _ = c.RunSession(ctx, "s1", api.SessionRunRequest{Command: "C-c"})
	if res.Status != api.StatusCompleted || res.ExitCode != 130 {
		t.Fatalf("C-c: %+v", res)
	}
	res, _ = c.RunSession(ctx, "s1", api.SessionRunRequest{Command: "echo a; echo b\necho c"})
	if res.Status != api.StatusMultipleCommands || !strings.HasPrefix(res.Output, "ERROR: Cannot execute multiple commands") {
		t.Fatalf("multiple: %+v", res)
	}

	if err := c.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		c.DeleteSession(ctx, "s1"),
		func() error { _, err := c.Session(ctx, "s1"); return err }(),
		func() error { _, err := c.RunSession(ctx, "s1", api.SessionRunRequest{Command: "true"}); return err }(),
	} {
		if !errors.Is(err, api.ErrNotFound) {
			t.Errorf("after delete: %v, want not found", err)
		}
	}

	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/sessions", `{"name":"a/b"}`},
		{"POST", "/v1/sessions", `{"name":"x","cwd":"/nonexistent"}`},
		{"POST", "/v1/sessions", `{"bogus":1}`},
		{"POST", "/v1/sessions/default/run", `{"command":"true","timeout":-1}`},
		{"POST", "/v1/sessions/default/run", `{"command":"true","extra":1}`},
		{"POST", "/v1/sessions/default/run", `{"command":1}`},
		{"POST", "/v1/sessions/bad%20name/run", `{"command":"true"}`},
	} {
		status, body := ts.raw(t, tc.method, tc.path, tc.body)
		wantError(t, status, body, 400, api.CodeBadRequest)
	}

	// The shell's exit ends the session; "default" comes back on next use.
	res, err = c.RunSession(ctx, "default", api.SessionRunRequest{Command: "exit 3"})
	if err != nil || res.Status != api.StatusExited {
		t.Fatalf("exit: %+v %v", res, err)
	}
	res, err = c.RunSession(ctx, "default", api.SessionRunRequest{Command: "echo back"})
	if err != nil || res.Output != "back" {
		t.Fatalf("after exit: %+v %v", res, err)
	}
}

// Sessions hold a shell and their output in the executor: at most
// MaxSessions (16 by default) at once; one more is refused with 409 until
// one is deleted.
func TestSessionLimit(t *testing.T) {
	ts, _ := agentServer(t, executor.Options{MaxSessions: 2})
	ctx := testCtx(t)
	for i := range 2 {
		if _, err := ts.c.CreateSession(ctx, api.SessionCreateRequest{Name: fmt.Sprint("s", i)}); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	_, err := ts.c.CreateSession(ctx, api.SessionCreateRequest{Name: "one-more"})
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "2 sessions exist") {
		t.Fatalf("third session: %v, want 409 naming the limit", err)
	}
	if _, err := ts.c.RunSession(ctx, api.DefaultSession, api.SessionRunRequest{Command: "true"}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("default session beyond the limit: %v", err)
	}
	if err := ts.c.DeleteSession(ctx, "s0"); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.c.CreateSession(ctx, api.SessionCreateRequest{Name: "one-more"}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	if executor.DefaultMaxSessions != 16 {
		t.Errorf("default session limit %d, documented 16", executor.DefaultMaxSessions)
	}
}
