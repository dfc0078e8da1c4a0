package plugins_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/internal/proc"
	"github.com/bothy-sandbox/bothy/plugins"
)

// serveEnv, set in its environment, makes this test binary bothy-plugin:
// StartProcess runs it as Env.Server with the fake services below.
const serveEnv = "BOTHY_PLUGINS_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		os.Exit(plugins.ServeProcess(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func init() {
	plugins.RegisterServer("echo", startEcho)
	plugins.RegisterServer("widget", func(context.Context, plugins.Env) (plugins.Service, error) {
		return nil, fmt.Errorf("%w: no widget installed", plugins.ErrUnavailable)
	})
	plugins.RegisterServer("broken", func(context.Context, plugins.Env) (plugins.Service, error) {
		return nil, errors.New("the widget is broken")
	})
	plugins.RegisterServer("slow", func(ctx context.Context, _ plugins.Env) (plugins.Service, error) {
		<-ctx.Done() // until the executor kills it
		return nil, ctx.Err()
	})
}

// echo is a service with a child process (sleep), routes, a streamed
// answer and an action that makes its process exit.
type echo struct {
	env   plugins.Env
	child *reap.Proc
}

func startEcho(_ context.Context, env plugins.Env) (plugins.Service, error) {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // as the real services' children
	child, err := env.Reaper.Start(cmd)
	if err != nil {
		return nil, err
	}
	return &echo{env: env, child: child}, nil
}

func (e *echo) Execute(_ context.Context, a *api.Action) (*api.Observation, error) {
	switch a.Action {
	case "exit":
		e.env.Log.Info("exiting as asked")
		os.Exit(3)
	case "fail":
		return nil, errors.New("it failed, as asked")
	case "bad":
		return nil, httpapi.BadRequest(errors.New("bad action, as asked"))
	}
	return &api.Observation{Observation: a.Action, Content: a.Action + " in " + e.env.WorkingDir() + ", cwd " + e.env.Cwd}, nil
}

func (e *echo) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pid", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, os.Getpid())
	})
	// /stream writes "first", then the rest once the file its client
	// names exists: the client can only see "first" before it makes the
	// file if the answer is streamed.
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "first")
		w.(http.Flusher).Flush()
		for {
			if _, err := os.Stat(r.URL.Query().Get("go")); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Fprintln(w, "second")
	})
	return mux
}

func (e *echo) Close() error {
	_ = e.child.Signal(syscall.SIGKILL)
	_, err := e.child.Wait(context.Background())
	return err
}

// env is the executor side's Env for a plugin process of this binary.
func env(t *testing.T) plugins.Env {
	t.Helper()
	r, err := reap.New(reap.Options{Mode: reap.PerProcess})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return plugins.Env{
		Cwd: t.TempDir(), WorkingDir: func() string { return "/the/session/dir" },
		Environ: append(os.Environ(), serveEnv+"=1"), Reaper: r, Server: self,
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	_, zombie, err := proc.Start(pid)
	return err == nil && !zombie
}

// gone waits a while for pids to end and reports those still running.
func gone(pids []int) []int {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := slices.DeleteFunc(slices.Clone(pids), func(p int) bool { return !alive(p) })
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}

// A plugin's service in a process of its own: the actions, the routes
// (streamed), the processes, and the close, which ends the service's
// processes and the plugin process.
func TestProcessService(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := env(t)
	svc, err := plugins.StartProcess(ctx, e, "echo")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			svc.Close()
		}
	}()

	obs, err := svc.Execute(ctx, &api.Action{Action: "look"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "look in /the/session/dir, cwd " + e.Cwd; obs.Content != want || obs.Observation != "look" {
		t.Errorf("observation %+v, want content %q", obs, want)
	}
	var reqErr *httpapi.RequestError
	if _, err := svc.Execute(ctx, &api.Action{Action: "fail"}); err == nil || err.Error() != "it failed, as asked" || errors.As(err, &reqErr) {
		t.Errorf("failing action: %v", err)
	}
	// A bad action is the request's fault on this side too (the
	// OpenHands dialect answers 400).
	if _, err := svc.Execute(ctx, &api.Action{Action: "bad"}); !errors.As(err, &reqErr) || err.Error() != "bad action, as asked" {
		t.Errorf("bad action: %v", err)
	}

	ts := httptest.NewServer(svc.Handler())
	defer ts.Close()
	_, b := get(t, ts.URL+"/pid")
	pid, err := strconv.Atoi(b)
	if err != nil || pid == os.Getpid() || !alive(pid) {
		t.Fatalf("GET /pid: %q %v", b, err)
	}
	goFile := filepath.Join(t.TempDir(), "go")
	resp, err := http.Get(ts.URL + "/stream?go=" + goFile)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); line != "first\n" || err != nil {
		t.Fatalf("first line %q %v", line, err)
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(rd); string(rest) != "second\n" || err != nil {
		t.Errorf("rest %q %v", rest, err)
	}
	resp.Body.Close()

	pids := svc.(plugins.Processes).PIDs()
	if len(pids) != 2 || pids[0] != pid || !alive(pids[1]) {
		t.Fatalf("PIDs %v: want the plugin process %d and its sleep", pids, pid)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	for _, p := range pids {
		if alive(p) {
			t.Errorf("process %d outlives the close", p)
		}
	}
	if status, b := get(t, ts.URL+"/pid"); status != http.StatusBadGateway {
		t.Errorf("route after the close: %d %s", status, b)
	}
}

// get GETs url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// A start that fails gives its error, ErrUnavailable when the plugin cannot
// run here, and leaves no process.
func TestProcessServiceStartFails(t *testing.T) {
	ctx := context.Background()
	e := env(t)
	_, err := plugins.StartProcess(ctx, e, "widget")
	if !errors.Is(err, plugins.ErrUnavailable) || !strings.Contains(err.Error(), "no widget installed") {
		t.Errorf("unavailable: %v", err)
	}
	_, err = plugins.StartProcess(ctx, e, "broken")
	if err == nil || errors.Is(err, plugins.ErrUnavailable) || !strings.Contains(err.Error(), "the widget is broken") {
		t.Errorf("broken: %v", err)
	}
	_, err = plugins.StartProcess(ctx, e, "nosuch")
	if !errors.Is(err, plugins.ErrUnavailable) || !strings.Contains(err.Error(), `no service for plugin "nosuch"`) {
		t.Errorf("unknown: %v", err)
	}
	e.Server = ""
	if _, err = plugins.StartProcess(ctx, e, "echo"); !errors.Is(err, plugins.ErrUnavailable) {
		t.Errorf("no server: %v", err)
	}
	e.Server = "/nonexistent/bothy-plugin"
	if _, err = plugins.StartProcess(ctx, e, "echo"); !errors.Is(err, plugins.ErrUnavailable) || !strings.Contains(err.Error(), "lacks") {
		t.Errorf("missing server: %v", err)
	}
	if live := e.Reaper.Live(); len(live) != 0 {
		t.Errorf("%d processes left", len(live))
	}
}

// A start that does not end in time is ended: the process is killed.
func TestProcessServiceStartTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	e := env(t)
	if _, err := plugins.StartProcess(ctx, e, "slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow start: %v", err)
	}
	if live := e.Reaper.Live(); len(live) != 0 {
		t.Errorf("%d processes left", len(live))
	}
}

// A plugin process that dies gives an error that says so, with its last
// words, to the action under way and to the next; never a hang.
func TestProcessServiceDies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := plugins.StartProcess(ctx, env(t), "echo")
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	pids := svc.(plugins.Processes).PIDs()
	for i, what := range []string{"exit", "look"} {
		_, err := svc.Execute(ctx, &api.Action{Action: what})
		if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "exiting as asked") {
			t.Errorf("action %d: %v", i, err)
		}
	}
	ts := httptest.NewServer(svc.Handler())
	defer ts.Close()
	if status, b := get(t, ts.URL+"/pid"); status != http.StatusBadGateway || !strings.Contains(b, "exit status 3") {
		t.Errorf("route: %d %s", status, b)
	}
	if left := gone(pids); len(left) > 0 {
		t.Errorf("processes of the plugin left running: %v", left)
	}
}
