package executor_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
)

// termProg returns the argv of testdata/termprog.py in mode (raw or
// cooked), run by the host's Python.
func termProg(t *testing.T, mode string) []string {
	t.Helper()
	py := os.Getenv("PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if _, err := os.Stat(py); err != nil {
		t.Skipf("requires python3 (PYTHON=%s): the terminal test program is Python", py)
	}
	src, err := os.ReadFile("testdata/termprog.py")
	if err != nil {
		t.Fatal(err)
	}
	return []string{py, "-c", string(src), mode}
}

var errExitSeen = errors.New("exit event seen")

// screen collects a terminal's output.
type screen struct {
	mu  sync.Mutex
	buf strings.Builder
	ch  chan struct{}
}

func newScreen() *screen { return &screen{ch: make(chan struct{}, 1)} }

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf.Write(p)
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the output holds want.
func (s *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(s.String(), want) {
		select {
		case <-s.ch:
		case <-deadline:
			t.Fatalf("no %q in the terminal's output: %q", want, s.String())
		}
	}
}

// TestPtyAttach drives a raw-mode program over an attached connection: it
// sees the size it was created with, is in the foreground, gets each
// keystroke as typed, sees a resize (SIGWINCH) and its exit code comes back
// in the exit frame.
func TestPtyAttach(t *testing.T) {
	argv := termProg(t, "raw")
	ts := newServer(t, executor.Options{APIKey: "k"})
	ctx := testCtx(t)
	st, err := ts.c.CreatePty(ctx, api.PtyRequest{Argv: argv, Rows: 33, Cols: 101})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.Rows != 33 || st.Cols != 101 || st.PID <= 0 {
		t.Fatalf("created: %+v", st)
	}
	conn, err := ts.c.AttachPty(ctx, st.ID, client.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	scr := newScreen()
	type result struct {
		st  *api.Pty
		err error
	}
	res := make(chan result, 1)
	go func() {
		st, err := conn.Copy(scr)
		res <- result{st, err}
	}()
	scr.waitFor(t, "size 33x101")
	scr.waitFor(t, "fg True")
	scr.waitFor(t, "ready")
	// Raw mode: Ctrl-C and Ctrl-D are bytes like any other.
	if _, err := conn.Write([]byte("a\x03\x04")); err != nil {
		t.Fatal(err)
	}
	scr.waitFor(t, "key 61")
	scr.waitFor(t, "key 03")
	scr.waitFor(t, "key 04")
	if err := conn.Resize(40, 120); err != nil {
		t.Fatal(err)
	}
	scr.waitFor(t, "winch 40x120")
	if got, err := ts.c.Pty(ctx, st.ID); err != nil || got.Rows != 40 || got.Cols != 120 {
		t.Fatalf("after resize: %+v %v", got, err)
	}
	conn.Write([]byte("q"))
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.st.Running || r.st.ExitCode == nil || *r.st.ExitCode != 7 {
		t.Fatalf("exit frame: %+v", r.st)
	}
}

// TestPtyREST drives a cooked-mode program with plain requests: input,
// Ctrl-Z (SIGTSTP) and Ctrl-C (SIGINT) typed reach the program through the
// terminal's line discipline, Ctrl-D is end of file, a signal sent through
// the API reaches the foreground process group, the output can be read
// again from any offset, and each exit code is reported.
func TestPtyREST(t *testing.T) {
	argv := termProg(t, "cooked")
	ts := newServer(t, executor.Options{})
	ctx := testCtx(t)
	follow := func(id string) (*screen, <-chan *api.Event) {
		scr := newScreen()
		exit := make(chan *api.Event, 1)
		go func() {
			_, err := ts.c.PtyOutput(ctx, id, 0, true, func(ev *api.Event) error {
				if ev.Type == api.EventExit {
					exit <- ev
					return errExitSeen
				}
				scr.Write(ev.Bytes())
				return nil
			})
			if err != nil && err != errExitSeen {
				t.Error(err)
			}
			close(exit)
		}()
		return scr, exit
	}
	wantExit := func(exit <-chan *api.Event, code int) {
		t.Helper()
		ev := <-exit
		if ev == nil || ev.ExitCode == nil || *ev.ExitCode != code {
			t.Fatalf("exit event %+v, want code %d", ev, code)
		}
	}

	t.Run("keys", func(t *testing.T) {
		st, err := ts.c.CreatePty(ctx, api.PtyRequest{Argv: argv})
		if err != nil {
			t.Fatal(err)
		}
		scr, exit := follow(st.ID)
		scr.waitFor(t, "size 24x80") // the default size
		scr.waitFor(t, "ready")
		// One key at a time: Ctrl-C flushes what the terminal holds.
		for _, k := range []struct{ in, want string }{
			{"hello\n", `line b'hello\n'`}, {"\x1a", "sigtstp"},
		} {
			if err := ts.c.WritePty(ctx, st.ID, []byte(k.in)); err != nil {
				t.Fatal(err)
			}
			scr.waitFor(t, k.want)
		}
		// Ctrl-C: the handler exits 3. (What it writes may be discarded:
		// the terminal flushes its output on an interrupt, as a console
		// does, and the kernel signals before it flushes.)
		if err := ts.c.WritePty(ctx, st.ID, []byte("\x03")); err != nil {
			t.Fatal(err)
		}
		wantExit(exit, 3)
		// The output is kept after the exit, from any offset.
		var again strings.Builder
		if _, err := ts.c.PtyOutput(ctx, st.ID, 3, false, func(ev *api.Event) error {
			again.Write(ev.Bytes())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if full := scr.String(); again.String() != full[3:] {
			t.Fatalf("output from offset 3: %q, want %q", again.String(), full[3:])
		}
		if err := ts.c.WritePty(ctx, st.ID, []byte("x")); !errors.Is(err, &api.Error{Code: api.CodeConflict}) {
			t.Fatalf("input after exit: %v", err)
		}
	})
	t.Run("eof", func(t *testing.T) {
		st, err := ts.c.CreatePty(ctx, api.PtyRequest{Argv: argv})
		if err != nil {
			t.Fatal(err)
		}
		scr, exit := follow(st.ID)
		scr.waitFor(t, "ready")
		ts.c.WritePty(ctx, st.ID, []byte("\x04"))
		scr.waitFor(t, "eof")
		wantExit(exit, 5)
	})
	t.Run("api signal and resize", func(t *testing.T) {
		st, err := ts.c.CreatePty(ctx, api.PtyRequest{Argv: argv})
		if err != nil {
			t.Fatal(err)
		}
		scr, exit := follow(st.ID)
		scr.waitFor(t, "ready")
		if err := ts.c.ResizePty(ctx, st.ID, 50, 60); err != nil {
			t.Fatal(err)
		}
		scr.waitFor(t, "winch 50x60")
		if err := ts.c.SignalPty(ctx, st.ID, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		scr.waitFor(t, "sigint")
		wantExit(exit, 3)
		got, err := ts.c.WaitPty(ctx, st.ID)
		if err != nil || got.Running || *got.ExitCode != 3 {
			t.Fatalf("wait: %+v %v", got, err)
		}
		if _, err := ts.c.RemovePty(ctx, st.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.c.Pty(ctx, st.ID); !errors.Is(err, &api.Error{Code: api.CodeNotFound}) {
			t.Fatalf("after delete: %v", err)
		}
	})
}

// TestPtyShellJobControl: with no command the terminal runs an interactive
// shell; a program it starts in the foreground gets the terminal's Ctrl-C,
// the shell does not, and the shell's exit code comes back.
func TestPtyShellJobControl(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("requires /bin/bash: the interactive shell")
	}
	ts := newServer(t, executor.Options{})
	ctx := testCtx(t)
	st, err := ts.c.CreatePty(ctx, api.PtyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ts.c.AttachPty(ctx, st.ID, client.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	scr := newScreen()
	res := make(chan *api.Pty, 1)
	go func() {
		st, err := conn.Copy(scr)
		if err != nil {
			t.Error(err)
		}
		res <- st
	}()
	conn.Write([]byte("sleep 1000\n"))
	// Wait until sleep is the terminal's foreground process, then until
	// Ctrl-C has ended it (input typed before could be flushed with the
	// interrupt, as on a console).
	children := func(want bool) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(st.PID) + "/task/" + strconv.Itoa(st.PID) + "/children")
			if len(strings.Fields(string(b))) > 0 == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the shell's children: %q, want some: %v; terminal: %q", b, want, scr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	children(true)
	conn.Write([]byte("\x03"))
	children(false)
	conn.Write([]byte("echo after=$?\n"))
	scr.waitFor(t, "after=130")
	conn.Write([]byte("exit 9\n"))
	got := <-res
	if got == nil || *got.ExitCode != 9 {
		t.Fatalf("exit: %+v, output %q", got, scr.String())
	}
}

// TestPtyKillOnClose: a terminal's program counts as running in /v1/info; a
// client attached with kill_on_close that goes away leaves nothing running.
func TestPtyKillOnClose(t *testing.T) {
	ts := newServer(t, executor.Options{})
	ctx := testCtx(t)
	st, err := ts.c.CreatePty(ctx, api.PtyRequest{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := ts.c.Info(ctx); err != nil || info.Processes != 1 {
		t.Fatalf("info while the terminal's program runs: %+v %v", info, err)
	}
	conn, err := ts.c.AttachPty(ctx, st.ID, client.AttachOptions{KillOnClose: true})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := ts.c.WaitPty(wctx, st.ID)
	if err != nil || got.Running || got.Signal != "SIGKILL" {
		t.Fatalf("after the client went away: %+v %v", got, err)
	}
}

// TestPtyErrors: bad requests get clear errors.
func TestPtyErrors(t *testing.T) {
	ts := newServer(t, executor.Options{})
	ctx := testCtx(t)
	for _, c := range []struct{ body, want string }{
		{`{"rows":0,"cols":70000}`, "between 1 and 65535"},
		{`{"argv":["true"],"cmd":"true"}`, "exclusive"},
		{`{"argv":[""]}`, "argv[0] is empty"},
		{`{"argv":["/nonexistent/prog"]}`, "/nonexistent/prog"},
		{`{"rows":-1}`, "between"},
	} {
		status, body := ts.raw(t, "POST", "/v1/ptys", c.body)
		if status != http.StatusBadRequest || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", c.body, status, body, c.want)
		}
	}
	status, body := ts.raw(t, "GET", "/v1/ptys/t999", "")
	wantError(t, status, body, http.StatusNotFound, api.CodeNotFound)
	st, err := ts.c.CreatePty(ctx, api.PtyRequest{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	status, body = ts.raw(t, "GET", "/v1/ptys/"+st.ID+"/attach", "")
	wantError(t, status, body, http.StatusBadRequest, api.CodeBadRequest)
	status, body = ts.raw(t, "POST", "/v1/ptys/"+st.ID+"/resize", `{"rows":1,"cols":0}`)
	wantError(t, status, body, http.StatusBadRequest, api.CodeBadRequest)
	status, body = ts.raw(t, "POST", "/v1/ptys/"+st.ID+"/input", `{"data":"a","b64":"YQ=="}`)
	wantError(t, status, body, http.StatusBadRequest, api.CodeBadRequest)
	if _, err := ts.c.RemovePty(ctx, st.ID); err != nil {
		t.Fatal(err)
	}
}
