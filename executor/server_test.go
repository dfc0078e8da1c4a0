package executor_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

// testServer is an executor served in-process on a temporary socket.
type testServer struct {
	*executor.Server
	socket string
	c      *client.Client
	hc     *http.Client
	key    string
}

// socketDir returns a short temporary directory (sun_path has 108 bytes).
func socketDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "bx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newServer(t testing.TB, opts executor.Options) *testServer {
	t.Helper()
	if opts.Reaper == nil {
		opts.Reaper = globalReaper
	}
	if opts.WaitDelay == 0 {
		opts.WaitDelay = 100 * time.Millisecond
	}
	s, err := executor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(socketDir(t), "e.sock")
	ln, err := executor.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Serve(ctx, ln); err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	ts := &testServer{Server: s, socket: sock, key: opts.APIKey}
	ts.c = client.New(sock, client.WithAPIKey(opts.APIKey))
	ts.hc = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	t.Cleanup(func() {
		ts.c.Close()
		ts.hc.CloseIdleConnections()
		s.Close()
		cancel()
		<-done
	})
	return ts
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// raw sends a request and returns the status and body.
func (ts *testServer) raw(t testing.TB, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(testCtx(t), method, "http://x"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if ts.key != "" && req.Header.Get(api.APIKeyHeader) == "" {
		req.Header.Set(api.APIKeyHeader, ts.key)
	}
	resp, err := ts.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// wantError checks a JSON error answer.
func wantError(t *testing.T, status int, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error == nil {
		t.Fatalf("status %d body %q: not a JSON error (%v)", status, body, err)
	}
	if status != wantStatus || eb.Error.Code != wantCode || eb.Error.Message == "" {
		t.Fatalf("got %d %+v, want %d %s", status, eb.Error, wantStatus, wantCode)
	}
}

func (ts *testServer) run(t *testing.T, req api.RunRequest) *api.RunResult {
	t.Helper()
	res, err := ts.c.Run(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// gone waits until pid no longer runs (reaped, or a zombie).
func gone(t *testing.T, pid int) {
	t.Helper()
	ctx := testCtx(t)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("process %d still runs", pid)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestAlive(t *testing.T) {
	ts := newServer(t, executor.Options{APIKey: "k"})
	status, body := ts.raw(t, "GET", "/alive", "", api.APIKeyHeader, "wrong")
	if status != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Fatalf("alive: %d %s", status, body)
	}
	if err := client.WaitReady(testCtx(t), ts.socket); err != nil {
		t.Fatal(err)
	}
}

func TestAuth(t *testing.T) {
	ts := newServer(t, executor.Options{APIKey: "s3cret"})
	for _, key := range []string{"", "wrong", "s3cret2", "s3cre"} {
		req, _ := http.NewRequest("GET", "http://x/v1/info", nil)
		if key != "" {
			req.Header.Set(api.APIKeyHeader, key)
		}
		resp, err := ts.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantError(t, resp.StatusCode, body, 403, api.CodeForbidden)
	}
	// Unknown routes are behind auth too.
	req, _ := http.NewRequest("GET", "http://x/nope", nil)
	resp, err := ts.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("unknown route without key: %d, want 403", resp.StatusCode)
	}
	if _, err := ts.c.Info(testCtx(t)); err != nil {
		t.Fatalf("with the right key: %v", err)
	}
	bad := client.New(ts.socket, client.WithAPIKey("nope"))
	defer bad.Close()
	if _, err := bad.Run(testCtx(t), api.RunRequest{Argv: []string{"true"}}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("wrong key: %v, want ErrForbidden", err)
	}
}

func TestRunArgvAndShell(t *testing.T) {
	ts := newServer(t, executor.Options{})
	res := ts.run(t, api.RunRequest{Argv: []string{"echo", "hello", "world"}})
	if res.ExitCode != 0 || res.Stdout != "hello world\n" || res.Stderr != "" || res.PID == 0 || res.TimedOut {
		t.Fatalf("argv: %+v", res)
	}
	res = ts.run(t, api.RunRequest{Cmd: "echo out; echo err >&2; exit 3"})
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.Signal != "" {
		t.Fatalf("shell: %+v", res)
	}
	res = ts.run(t, api.RunRequest{Cmd: "kill -9 $$"})
	if res.ExitCode != 137 || res.Signal != "SIGKILL" {
		t.Fatalf("killed: %+v", res)
	}
}

func TestRunEnvCwd(t *testing.T) {
	ts := newServer(t, executor.Options{Env: []string{"PATH=" + os.Getenv("PATH"), "KEEP=1", "OVER=old"}})
	dir := t.TempDir()
	res := ts.run(t, api.RunRequest{
		Cmd: `echo "$KEEP $OVER $NEW"; pwd`, Cwd: dir,
		Env: map[string]string{"OVER": "new", "NEW": "x y"},
	})
	want := "1 new x y\n" + dir + "\n"
	if res.Stdout != want {
		t.Fatalf("stdout %q, want %q", res.Stdout, want)
	}
	// The default environment never carries the API key.
	t.Setenv(executor.APIKeyEnv, "leak")
	ts2 := newServer(t, executor.Options{})
	if res := ts2.run(t, api.RunRequest{Cmd: "echo ${BOTHY_API_KEY:-none}"}); res.Stdout != "none\n" {
		t.Fatalf("API key leaked to children: %q", res.Stdout)
	}
}

func TestStartFailed(t *testing.T) {
	ts := newServer(t, executor.Options{})
	_, err := ts.c.Run(testCtx(t), api.RunRequest{Argv: []string{"no-such-binary-bothy"}})
	if !errors.Is(err, api.ErrStartFailed) {
		t.Fatalf("missing binary: %v", err)
	}
	_, err = ts.c.Run(testCtx(t), api.RunRequest{Argv: []string{"true"}, Cwd: "/nonexistent/dir"})
	if !errors.Is(err, api.ErrStartFailed) {
		t.Fatalf("missing cwd: %v", err)
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	ts := newServer(t, executor.Options{})
	// The background sleep holds stdout; the foreground one keeps sh busy.
	res := ts.run(t, api.RunRequest{Cmd: "sleep 300 & echo $!; sleep 300; echo never", Timeout: 0.3})
	if !res.TimedOut || res.Signal != "SIGKILL" || res.ExitCode != 137 {
		t.Fatalf("timeout: %+v", res)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("stdout %q: %v", res.Stdout, err)
	}
	gone(t, pid)
}

func TestConcurrentExitCodes(t *testing.T) {
	ts := newServer(t, executor.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			res, err := ts.c.Run(testCtx(t), api.RunRequest{Cmd: "echo " + strconv.Itoa(i) + "; exit " + strconv.Itoa(i)})
			if err != nil {
				errs <- err
				return
			}
			if res.ExitCode != i || res.Stdout != strconv.Itoa(i)+"\n" {
				errs <- fmt.Errorf("command %d: exit %d stdout %q", i, res.ExitCode, res.Stdout)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// readEvents decodes a stream of events.
func readEvents(t *testing.T, r io.Reader) []api.Event {
	t.Helper()
	var evs []api.Event
	dec := json.NewDecoder(r)
	for {
		var ev api.Event
		if err := dec.Decode(&ev); err == io.EOF {
			return evs
		} else if err != nil {
			t.Fatalf("decode event: %v", err)
		}
		evs = append(evs, ev)
	}
}

func TestStreamOrderAndExitLast(t *testing.T) {
	ts := newServer(t, executor.Options{})
	status, body := ts.raw(t, "POST", "/v1/processes",
		`{"cmd":"for i in 1 2 3 4 5; do echo o$i; echo e$i >&2; done; exit 4","stream":true}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	evs := readEvents(t, bytes.NewReader(body))
	if len(evs) < 3 || evs[0].Type != api.EventStart || evs[0].ID == "" || evs[0].PID == 0 {
		t.Fatalf("first event: %+v", evs)
	}
	last := evs[len(evs)-1]
	if last.Type != api.EventExit || last.ExitCode == nil || *last.ExitCode != 4 {
		t.Fatalf("last event: %+v", last)
	}
	var stdout, stderr strings.Builder
	var off int64
	for _, ev := range evs[1 : len(evs)-1] {
		if ev.Offset != off {
			t.Fatalf("event at offset %d, want %d", ev.Offset, off)
		}
		off += int64(len(ev.Bytes()))
		switch ev.Type {
		case api.EventStdout:
			stdout.Write(ev.Bytes())
		case api.EventStderr:
			stderr.Write(ev.Bytes())
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
	}
	if stdout.String() != "o1\no2\no3\no4\no5\n" || stderr.String() != "e1\ne2\ne3\ne4\ne5\n" || last.Offset != off {
		t.Fatalf("stdout %q stderr %q exit offset %d/%d", stdout.String(), stderr.String(), last.Offset, off)
	}
	// The streamed process is forgotten once done.
	if _, err := ts.c.Process(testCtx(t), evs[0].ID); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("streamed process after the stream: %v", err)
	}
}

func TestStreamSSE(t *testing.T) {
	ts := newServer(t, executor.Options{})
	status, body := ts.raw(t, "POST", "/v1/processes", `{"argv":["echo","hi"],"stream":true}`, "Accept", "text/event-stream")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	s := string(body)
	if !strings.HasPrefix(s, "event: start\ndata: {") || !strings.Contains(s, "event: stdout\ndata: {") ||
		!strings.Contains(s, `"data":"hi\n"`) || !strings.Contains(s, "event: exit\ndata: {") || !strings.HasSuffix(s, "}\n\n") {
		t.Fatalf("SSE body:\n%s", s)
	}
}

func TestStreamClientStdinAndSignals(t *testing.T) {
	ts := newServer(t, executor.Options{})
	var out, errOut bytes.Buffer
	code, err := ts.c.Stream(testCtx(t), api.RunRequest{Cmd: "tr a-z A-Z; echo done >&2"}, &out, &errOut, strings.NewReader("hello\n"))
	if err != nil || code != 0 || out.String() != "HELLO\n" || errOut.String() != "done\n" {
		t.Fatalf("stream with stdin: code %d err %v out %q err %q", code, err, out.String(), errOut.String())
	}

	// Signal forwarding: SIGINT reaches the shell (and its sleep), as
	// Ctrl-C would. (A trap, because a SIGINT that lands between dash's
	// fork and exec of a foreground command is lost by the child.)
	sigs := make(chan os.Signal, 1)
	started := make(chan string, 1)
	script := `trap "exit 42" INT; echo ready; while :; do sleep 0.05; done`
	code, err = ts.c.StreamWith(testCtx(t), api.RunRequest{Cmd: script}, client.StreamIO{
		Stdout: writerFunc(func(p []byte) (int, error) {
			if strings.Contains(string(p), "ready") {
				sigs <- syscall.SIGINT
			}
			return len(p), nil
		}),
		Signals: sigs,
		Started: func(id string, pid int) { started <- id },
	})
	if err != nil || code != 42 {
		t.Fatalf("stream with SIGINT: code %d err %v", code, err)
	}
	if id := <-started; id == "" {
		t.Fatal("no id from the start event")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestStreamDisconnectKills(t *testing.T) {
	ts := newServer(t, executor.Options{})
	ctx, cancel := context.WithCancel(testCtx(t))
	pids := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		_, err := ts.c.StreamWith(ctx, api.RunRequest{Cmd: "sleep 300"}, client.StreamIO{
			Started: func(id string, pid int) { pids <- pid },
		})
		done <- err
	}()
	pid := <-pids
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("stream after cancel: %v", err)
	}
	gone(t, pid)
}

// An interrupted command leaves nothing of its process group, not even the
// background job sh starts ignoring SIGINT; a command that exits on its own
// leaves its background jobs running.
func TestInterruptedGroupLeavesNothing(t *testing.T) {
	ts := newServer(t, executor.Options{})
	bgPid := func(out string) int {
		pid, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("background pid %q", out)
		}
		return pid
	}
	sigs := make(chan os.Signal, 1)
	var out bytes.Buffer
	// exec: a SIGINT that lands between dash's fork and exec of a
	// foreground command is lost by the child (see TestStream's trap).
	code, err := ts.c.StreamWith(testCtx(t), api.RunRequest{Cmd: "sleep 300 & echo $!; exec sleep 300"}, client.StreamIO{
		Stdout: writerFunc(func(p []byte) (int, error) {
			out.Write(p)
			// Once: the output may come in more than one piece.
			select {
			case sigs <- syscall.SIGINT:
			default:
			}
			return len(p), nil
		}),
		Signals: sigs,
	})
	if err != nil || code != 130 {
		t.Fatalf("interrupted: code %d err %v", code, err)
	}
	gone(t, bgPid(out.String()))

	// Background mode, interrupted by SIGTERM.
	ctx := testCtx(t)
	p, err := ts.c.Start(ctx, api.RunRequest{Cmd: "sleep 300 & echo $!; sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for line == "" && ctx.Err() == nil {
		ts.c.Output(ctx, p.ID, 0, false, func(ev *api.Event) error { line += string(ev.Bytes()); return nil })
	}
	if err := ts.c.Signal(ctx, p.ID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.c.Wait(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	gone(t, bgPid(line))

	// Not interrupted: the background job outlives sh.
	res := ts.run(t, api.RunRequest{Cmd: "sleep 300 >/dev/null 2>&1 & echo $!"})
	pid := bgPid(res.Stdout)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the background job of a command that exited on its own: %v", err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

func TestBinaryOutput(t *testing.T) {
	ts := newServer(t, executor.Options{})
	want := []byte{0xff, 0xfe, 0, 'a', 'b', 'c', '\n'}
	res := ts.run(t, api.RunRequest{Cmd: `printf '\377\376\000abc\n'`})
	if res.Stdout != "" || !bytes.Equal(res.StdoutB64, want) || !bytes.Equal(res.StdoutBytes(), want) {
		t.Fatalf("binary wait: %+v", res)
	}
	var out bytes.Buffer
	if _, err := ts.c.Stream(testCtx(t), api.RunRequest{Cmd: `printf '\377\376\000abc\n'`}, &out, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("binary stream: %q", out.Bytes())
	}
	// Text split across reads stays text.
	res = ts.run(t, api.RunRequest{Cmd: `printf '\303'; sleep 0.05; printf '\251\n'`})
	if res.Stdout != "é\n" {
		t.Fatalf("split character: %+v", res)
	}
}

func TestOutputCapTruncation(t *testing.T) {
	ts := newServer(t, executor.Options{MaxOutput: 1 << 20})
	res := ts.run(t, api.RunRequest{Argv: []string{"seq", "1", "200000"}, MaxOutput: 1000})
	if !res.StdoutTruncated || res.ExitCode != 0 {
		t.Fatalf("not truncated: %+v", res.StdoutTruncated)
	}
	if !strings.HasPrefix(res.Stdout, "1\n2\n3\n") || !strings.HasSuffix(res.Stdout, "199999\n200000\n") ||
		!strings.Contains(res.Stdout, "bytes truncated ...]") || len(res.Stdout) > 1100 {
		t.Fatalf("truncated output (%d bytes): %q", len(res.Stdout), res.Stdout)
	}
}

func TestStdin(t *testing.T) {
	ts := newServer(t, executor.Options{})
	res := ts.run(t, api.RunRequest{Argv: []string{"cat"}, Stdin: "hello stdin"})
	if res.Stdout != "hello stdin" {
		t.Fatalf("wait stdin: %+v", res)
	}
	res = ts.run(t, api.RunRequest{Argv: []string{"od", "-An", "-tx1"}, StdinB64: []byte{0, 0xff}})
	if strings.TrimSpace(res.Stdout) != "00 ff" {
		t.Fatalf("binary stdin: %+v", res)
	}
	// Without stdin, the process reads /dev/null.
	if res = ts.run(t, api.RunRequest{Argv: []string{"cat"}}); res.Stdout != "" || res.ExitCode != 0 {
		t.Fatalf("no stdin: %+v", res)
	}

	ctx := testCtx(t)
	p, err := ts.c.Start(ctx, api.RunRequest{Argv: []string{"cat"}, Stdin: "first ", StdinOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	if !p.StdinOpen {
		t.Fatalf("stdin not open: %+v", p)
	}
	if err := ts.c.WriteStdin(ctx, p.ID, []byte("second "), false); err != nil {
		t.Fatal(err)
	}
	status, body := ts.raw(t, "POST", "/v1/processes/"+p.ID+"/stdin", `{"data":"third","close":true}`)
	if status != 200 || !strings.Contains(string(body), `"written":5`) {
		t.Fatalf("JSON stdin: %d %s", status, body)
	}
	if fin, err := ts.c.Wait(ctx, p.ID); err != nil || fin.ExitCode == nil || *fin.ExitCode != 0 {
		t.Fatalf("wait: %+v %v", fin, err)
	}
	var out bytes.Buffer
	if _, err := ts.c.Output(ctx, p.ID, 0, false, func(ev *api.Event) error {
		out.Write(ev.Bytes())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "first second third" {
		t.Fatalf("output %q", out.String())
	}
	if err := ts.c.WriteStdin(ctx, p.ID, []byte("late"), false); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("stdin after exit: %v", err)
	}
}

func TestSignals(t *testing.T) {
	ts := newServer(t, executor.Options{})
	ctx := testCtx(t)
	p, err := ts.c.Start(ctx, api.RunRequest{Cmd: "sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	status, body := ts.raw(t, "POST", "/v1/processes/"+p.ID+"/signal", `{"signal":"NOPE"}`)
	wantError(t, status, body, 400, api.CodeBadRequest)
	if err := ts.c.Signal(ctx, p.ID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	fin, err := ts.c.Wait(ctx, p.ID)
	if err != nil || fin.Running || fin.Signal != "SIGTERM" || *fin.ExitCode != 143 {
		t.Fatalf("after SIGTERM: %+v %v", fin, err)
	}
	if err := ts.c.Signal(ctx, p.ID, syscall.SIGTERM); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("signal after exit: %v", err)
	}
	if err := ts.c.Signal(ctx, "p999999", syscall.SIGTERM); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("signal unknown: %v", err)
	}
}

func TestBackgroundLifecycle(t *testing.T) {
	ts := newServer(t, executor.Options{})
	ctx := testCtx(t)
	p, err := ts.c.Start(ctx, api.RunRequest{Cmd: "echo out; echo err >&2; read x; echo after $x", StdinOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.ID == "" || p.PID == 0 || !p.Running || p.Mode != api.ModeBackground {
		t.Fatalf("start: %+v", p)
	}
	list, err := ts.c.Processes(ctx)
	if err != nil || len(list) != 1 || list[0].ID != p.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	// A wait with a timeout answers the running state.
	status, body := ts.raw(t, "POST", "/v1/processes/"+p.ID+"/wait?timeout=0.01", "")
	if status != 200 || !strings.Contains(string(body), `"running":true`) {
		t.Fatalf("wait with timeout: %d %s", status, body)
	}

	// Follow the output while feeding stdin.
	var out strings.Builder
	var exit *api.Event
	next, err := ts.c.Output(ctx, p.ID, 0, true, func(ev *api.Event) error {
		switch ev.Type {
		case api.EventExit:
			exit = ev
		default:
			out.Write(ev.Bytes())
			if strings.Contains(out.String(), "out\n") && strings.Contains(out.String(), "err\n") && !strings.Contains(out.String(), "after") {
				go ts.c.WriteStdin(ctx, p.ID, []byte("x\n"), true)
			}
		}
		return nil
	})
	if err != nil || exit == nil || *exit.ExitCode != 0 {
		t.Fatalf("follow: %v exit %+v", err, exit)
	}
	got := out.String()
	if len(got) != 16 || !strings.Contains(got, "out\n") || !strings.Contains(got, "err\n") || !strings.HasSuffix(got, "after x\n") || next != 16 {
		t.Fatalf("output %q next %d", got, next)
	}
	// Reading again from an offset.
	var tail strings.Builder
	if _, err := ts.c.Output(ctx, p.ID, 8, false, func(ev *api.Event) error {
		if ev.Type != api.EventExit {
			tail.Write(ev.Bytes())
		}
		return nil
	}); err != nil || tail.String() != "after x\n" {
		t.Fatalf("output from offset 8: %q %v", tail.String(), err)
	}
	st, err := ts.c.Process(ctx, p.ID)
	if err != nil || st.Running || *st.ExitCode != 0 || st.OutputBytes != 16 || st.FinishedAt == nil {
		t.Fatalf("status: %+v %v", st, err)
	}
	if _, err := ts.c.Remove(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.c.Process(ctx, p.ID); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}

	// DELETE kills a running process.
	p, err = ts.c.Start(ctx, api.RunRequest{Cmd: "sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	fin, err := ts.c.Remove(ctx, p.ID)
	if err != nil || fin.Running || fin.Signal != "SIGKILL" {
		t.Fatalf("delete running: %+v %v", fin, err)
	}
}

func TestBackgroundTimeout(t *testing.T) {
	ts := newServer(t, executor.Options{})
	ctx := testCtx(t)
	p, err := ts.c.Start(ctx, api.RunRequest{Cmd: "sleep 300", Timeout: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	fin, err := ts.c.Wait(ctx, p.ID)
	if err != nil || !fin.TimedOut || fin.Signal != "SIGKILL" {
		t.Fatalf("background timeout: %+v %v", fin, err)
	}
}

func TestOutputOfStreamedProcessConflicts(t *testing.T) {
	ts := newServer(t, executor.Options{})
	ctx := testCtx(t)
	ids := make(chan string, 1)
	release := make(chan struct{})
	go ts.c.StreamWith(ctx, api.RunRequest{Cmd: "read x"}, client.StreamIO{
		Stdin:   readerFunc(func(p []byte) (int, error) { <-release; return 0, io.EOF }),
		Started: func(id string, pid int) { ids <- id },
	})
	id := <-ids
	defer close(release)
	status, body := ts.raw(t, "GET", "/v1/processes/"+id+"/output", "")
	wantError(t, status, body, 409, api.CodeConflict)
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestMalformedRequests(t *testing.T) {
	ts := newServer(t, executor.Options{MaxRequestBody: 1 << 10})
	for _, body := range []string{
		`{bad`, ``, `{"argv":["true"]} {}`, `{"argv":["true"],"bogus":1}`, `{"argv":"true"}`,
		`{"argv":["true"],"cmd":"true"}`, `{"cmd":"x","wait":true,"stream":true}`, `{"cmd":"x","timeout":-1}`,
		`{"argv":[""]}`, `{"cmd":"x","env":{"A=B":"1"}}`, `{"cmd":"x\u0000y"}`,
	} {
		status, resp := ts.raw(t, "POST", "/v1/processes", body)
		wantError(t, status, resp, 400, api.CodeBadRequest)
	}
	status, resp := ts.raw(t, "POST", "/v1/processes", `{"cmd":"`+strings.Repeat("x", 2<<10)+`"}`)
	wantError(t, status, resp, 413, api.CodeTooLarge)
	status, resp = ts.raw(t, "GET", "/v1/nope", "")
	wantError(t, status, resp, 404, api.CodeNotFound)
	status, resp = ts.raw(t, "PUT", "/v1/processes", "")
	wantError(t, status, resp, 405, api.CodeMethodNotAllowed)
	status, resp = ts.raw(t, "GET", "/v1/processes/p1", "")
	wantError(t, status, resp, 404, api.CodeNotFound)
	status, resp = ts.raw(t, "GET", "/v1/processes/p1/output?offset=-1", "")
	wantError(t, status, resp, 404, api.CodeNotFound)
}

func TestSocketMode(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "sub", "e.sock")
	ln, err := executor.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600 socket", fi.Mode())
	}
	if _, err := executor.Listen(sock); !errors.Is(err, executor.ErrSocketInUse) {
		t.Fatalf("second listen on a live socket: %v", err)
	}
	// A stale socket (nobody listens) is replaced.
	stale, err := net.Listen("unix", filepath.Join(dir, "stale.sock"))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	ln2, err := executor.Listen(filepath.Join(dir, "stale.sock"))
	if err != nil {
		t.Fatalf("listen over a stale socket: %v", err)
	}
	ln2.Close()
	ln.Close()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Close: %v", err)
	}
	// A regular file is never removed.
	reg := filepath.Join(dir, "file")
	os.WriteFile(reg, nil, 0o600)
	if _, err := executor.Listen(reg); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
}

func TestInfo(t *testing.T) {
	ts := newServer(t, executor.Options{})
	ts.run(t, api.RunRequest{Argv: []string{"true"}})
	info, err := ts.c.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.API != "v1" || info.PID != os.Getpid() || info.CPUs < 1 || info.Memory.Source == "" ||
		info.Memory.UsedBytes == 0 || info.Disk.TotalBytes == 0 || info.UptimeSeconds <= 0 || info.Reaper == "" || info.Main != nil {
		t.Fatalf("info: %+v", info)
	}
}

func TestMainCommandInfo(t *testing.T) {
	ts := newServer(t, executor.Options{})
	logPath := filepath.Join(t.TempDir(), "main.log")
	if err := ts.StartMain([]string{"sh", "-c", "echo from main; exit 5"}, logPath); err != nil {
		t.Fatal(err)
	}
	<-ts.MainDone()
	info, err := ts.c.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Main == nil || info.Main.Running || info.Main.ExitCode == nil || *info.Main.ExitCode != 5 || info.Main.FinishedAt == nil {
		t.Fatalf("main: %+v", info.Main)
	}
	if b, _ := os.ReadFile(logPath); string(b) != "from main\n" {
		t.Fatalf("main log %q", b)
	}
}

// TestUnderGlobalReaper reruns the process tests in a child test binary
// that is a child subreaper with a global wait4(-1) Reaper, as PID 1 would
// be.
func TestUnderGlobalReaper(t *testing.T) {
	if globalReaper != nil {
		t.Skip("already under the global reaper")
	}
	if testing.Short() {
		t.Skip("short mode")
	}
	cmd := exec.Command(os.Args[0], "-test.count=1", "-test.v",
		"-test.run=^(TestRun|TestTimeout|TestConcurrent|TestStream|TestStdin|TestSignals|TestBackground|TestMainCommand|TestSessions|TestOpenHandsRun)")
	cmd.Env = append(os.Environ(), reaperEnv+"=subreaper")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tests under the global reaper: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	n := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "--- PASS") {
			n++
		}
	}
	if n < 10 {
		t.Fatalf("only %d tests passed under the global reaper:\n%s", n, out)
	}
}

// TestDescendantHoldsPipes: a background descendant keeps stdout and a
// full stdin pipe open; the request still ends (after WaitDelay) with the
// output written before the exit.
func TestDescendantHoldsPipes(t *testing.T) {
	ts := newServer(t, executor.Options{})
	big := strings.Repeat("x", 256<<10) // more than a pipe holds
	res := ts.run(t, api.RunRequest{Cmd: "sleep 300 <&0 & echo $!", Stdin: big})
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("result %+v: %v", res, err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	gone(t, pid)
}

// Connections beyond MaxConns wait to be accepted: with one allowed, a
// second client is answered only once the first has gone.
func TestConnectionLimit(t *testing.T) {
	ts := newServer(t, executor.Options{MaxConns: 1})
	first, err := net.Dial("unix", ts.socket)
	if err != nil {
		t.Fatal(err)
	}
	// An unfinished request keeps the first connection busy.
	if _, err := first.Write([]byte("GET /alive HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	answered := make(chan int, 1)
	go func() {
		resp, err := ts.hc.Get("http://x/alive")
		if err != nil {
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	select {
	case status := <-answered:
		t.Fatalf("second connection answered (%d) while the first is open", status)
	case <-time.After(300 * time.Millisecond):
	}
	first.Close()
	if status := <-answered; status != 200 {
		t.Fatalf("second connection: %d", status)
	}
}
