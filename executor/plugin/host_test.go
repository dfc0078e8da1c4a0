package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/plugins"
)

// echo is a small real plugin: its service executes the "echo" action
// (the observation's content is the action's args) and serves GET /hello
// (its name and the path it saw). Start may be made to wait, fail, or
// ignore its context.
type echo struct {
	name    string
	actions []string
	starts  atomic.Int32
	gate    chan struct{} // Start waits for it (or ctx) when not nil
	deaf    bool          // Start ignores ctx while it waits
	err     error         // Start fails with it
	closed  atomic.Bool
}

var (
	_ plugins.Plugin  = (*echo)(nil)
	_ plugins.Service = (*echoService)(nil)
	_ plugins.Tokener = (*echoService)(nil)
)

func (p *echo) Name() string { return p.name }
func (p *echo) Recipe() plugins.Recipe {
	return plugins.Recipe{Name: p.name, Description: "echo", Check: "true"}
}
func (p *echo) Actions() []string { return p.actions }

func (p *echo) Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	p.starts.Add(1)
	if p.gate != nil {
		if p.deaf {
			<-p.gate
		} else {
			select {
			case <-p.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	if p.err != nil {
		return nil, p.err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s saw %s in %s", p.name, r.URL.Path, env.Cwd)
	})
	return &echoService{p: p, mux: mux}, nil
}

type echoService struct {
	p   *echo
	mux *http.ServeMux
}

func (s *echoService) Execute(ctx context.Context, a *api.Action) (*api.Observation, error) {
	return api.NewObservation(a.Action, "echoed", string(a.Args), nil), nil
}
func (s *echoService) Handler() http.Handler   { return s.mux }
func (s *echoService) ConnectionToken() string { return "tok-" + s.p.name }
func (s *echoService) Close() error            { s.p.closed.Store(true); return nil }

func action(kind string) *api.Action {
	return &api.Action{Action: kind, Args: json.RawMessage(`{"x":1}`)}
}

func state(h *Host, name string) api.PluginState {
	for _, st := range h.States() {
		if st.Name == name {
			return st
		}
	}
	return api.PluginState{}
}

// listening is echo listening on the port $ECHO_PORT names (plugins.Listener).
type listening struct{ echo }

func (p *listening) Port(environ []string) (int, error) {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "ECHO_PORT="); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no ECHO_PORT")
}

// A plugin with a port (VS Code's) reports it in its state before it
// starts; one without reports none.
func TestListenerPort(t *testing.T) {
	l := &listening{echo{name: "listening"}}
	h, err := New([]plugins.Plugin{l, &echo{name: "echo"}}, Options{Env: plugins.Env{Environ: []string{"A=1", "ECHO_PORT=8123"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if st := state(h, "listening"); st.Port != 8123 || st.State != api.PluginStopped {
		t.Errorf("listening: %+v", st)
	}
	if st := state(h, "echo"); st.Port != 0 {
		t.Errorf("echo: %+v", st)
	}
}

// waitState waits until the plugin is in state want.
func waitState(t *testing.T, h *Host, name, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for state(h, name).State != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %+v, want %s", name, state(h, name), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// A plugin starts on first use, once however many ask at the same time,
// and its state says so.
func TestLazyStart(t *testing.T) {
	p := &echo{name: "echo", actions: []string{"echo"}, gate: make(chan struct{})}
	h, err := New([]plugins.Plugin{p}, Options{Env: plugins.Env{Cwd: "/work"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if st := h.States(); len(st) != 1 || st[0] != (api.PluginState{Name: "echo", State: api.PluginStopped}) || p.starts.Load() != 0 {
		t.Fatalf("before use: %+v, %d starts", st, p.starts.Load())
	}
	// Asking for the token is a first use: the start begins, and the
	// asker gives up waiting when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, ok := h.ConnectionToken(ctx, "echo"); ok {
		t.Fatal("a token before the plugin runs")
	}
	if st := state(h, "echo"); st.State != api.PluginStarting || p.starts.Load() != 1 {
		t.Fatalf("after the token was asked for: %+v, %d starts", st, p.starts.Load())
	}
	if _, ok := h.ConnectionToken(context.Background(), "nothing"); ok {
		t.Fatal("a token of a plugin not enabled")
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			obs, err := h.Execute(context.Background(), action("echo"))
			if err != nil || obs.Content != `{"x":1}` {
				t.Errorf("execute: %+v %v", obs, err)
			}
		})
	}
	waitState(t, h, "echo", api.PluginStarting)
	close(p.gate)
	wg.Wait()
	if n := p.starts.Load(); n != 1 {
		t.Fatalf("started %d times", n)
	}
	if st := state(h, "echo"); st.State != api.PluginRunning || st.Error != "" {
		t.Fatalf("after use: %+v", st)
	}
	if tok, ok := h.ConnectionToken(context.Background(), "echo"); !ok || tok != "tok-echo" {
		t.Fatalf("token %q %v", tok, ok)
	}
	if !h.Claims("echo") || h.Claims("run") {
		t.Fatal("claims")
	}
	h.Close()
	if !p.closed.Load() {
		t.Fatal("Close left the service running")
	}
}

// With Eager, every plugin starts with the host, without being used.
func TestEagerStart(t *testing.T) {
	a, b := &echo{name: "a", gate: make(chan struct{})}, &echo{name: "b"}
	h, err := New([]plugins.Plugin{a, b}, Options{Eager: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	waitState(t, h, "b", api.PluginRunning)
	if st := state(h, "a"); st.State != api.PluginStarting {
		t.Fatalf("a: %+v", st)
	}
	close(a.gate)
	waitState(t, h, "a", api.PluginRunning)
	if a.starts.Load() != 1 || b.starts.Load() != 1 {
		t.Fatalf("starts: %d %d", a.starts.Load(), b.starts.Load())
	}
}

// A start that fails, a plugin that cannot run here, and a start that
// never returns (ignoring its context) all answer an error, promptly,
// never a hang; their states say why.
func TestStartFailures(t *testing.T) {
	broken := &echo{name: "broken", actions: []string{"b"}, err: errors.New("kernel crashed")}
	absent := &echo{name: "absent", actions: []string{"a"}, err: fmt.Errorf("start absent: %w: not in this build", plugins.ErrUnavailable)}
	stuck := &echo{name: "stuck", actions: []string{"s"}, gate: make(chan struct{}), deaf: true}
	defer close(stuck.gate)
	h, err := New([]plugins.Plugin{broken, absent, stuck}, Options{StartTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, tc := range []struct {
		action, name, state, msg string
		unavailable              bool
	}{
		{"b", "broken", api.PluginFailed, "kernel crashed", false},
		{"a", "absent", api.PluginUnavailable, "not in this build", true},
		{"s", "stuck", api.PluginFailed, "not serving after 100ms", false},
	} {
		start := time.Now()
		_, err := h.Execute(context.Background(), action(tc.action))
		if err == nil || !strings.Contains(err.Error(), tc.msg) || errors.Is(err, plugins.ErrUnavailable) != tc.unavailable {
			t.Errorf("%s: %v", tc.name, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: answered after %v", tc.name, d)
		}
		if st := state(h, tc.name); st.State != tc.state || !strings.Contains(st.Error, tc.msg) {
			t.Errorf("%s: state %+v", tc.name, st)
		}
	}
	// A failed plugin stays failed: no second start.
	h.Execute(context.Background(), action("b"))
	if broken.starts.Load() != 1 {
		t.Errorf("broken started %d times", broken.starts.Load())
	}
	// A caller that goes away stops waiting; the start goes on.
	slow := &echo{name: "slow", actions: []string{"w"}, gate: make(chan struct{})}
	h2, _ := New([]plugins.Plugin{slow}, Options{})
	defer h2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := h2.Execute(ctx, action("w")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("caller gone: %v", err)
	}
	close(slow.gate)
	waitState(t, h2, "slow", api.PluginRunning)
}

// A plugin's routes are served under /plugins/NAME/, started on first
// use; an unavailable plugin answers 501.
func TestRoutes(t *testing.T) {
	p := &echo{name: "echo"}
	absent := &echo{name: "absent", err: plugins.ErrUnavailable}
	h, err := New([]plugins.Plugin{p, absent}, Options{Env: plugins.Env{Cwd: "/work"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mux := http.NewServeMux()
	for _, rt := range h.Routes() {
		if rt.Method != "" {
			t.Fatalf("route %+v has a method", rt)
		}
		mux.Handle(rt.Path, rt.Handler)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/plugins/echo/hello")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "echo saw /hello in /work" {
		t.Fatalf("plugin route: %d %q", resp.StatusCode, b)
	}
	if resp, err = http.Get(srv.URL + "/plugins/absent/x"); err != nil || resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("unavailable plugin's route: %v %v", resp, err)
	}
	resp.Body.Close()
}

// Two plugins cannot share a name or an action, nor claim a reserved one.
func TestConflicts(t *testing.T) {
	for _, tc := range []struct {
		ps   []plugins.Plugin
		want string
	}{
		{[]plugins.Plugin{&echo{name: "a"}, &echo{name: "a"}}, "enabled twice"},
		{[]plugins.Plugin{&echo{name: "a", actions: []string{"x"}}, &echo{name: "b", actions: []string{"x"}}}, "claimed by plugin a"},
		{[]plugins.Plugin{&echo{name: "a", actions: []string{"run"}}}, "executed by the executor itself"},
	} {
		if _, err := New(tc.ps, Options{Reserved: []string{"run"}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want %q", err, tc.want)
		}
	}
}

// router is an echo plugin that also serves a native route, and whose
// service reports a process (this test's own).
type router struct{ echo }

var (
	_ plugins.Router    = (*router)(nil)
	_ plugins.Processes = (*procService)(nil)
)

func (p *router) Routes() []plugins.Route {
	return []plugins.Route{{Method: "GET", Path: "/v1/echo/{x}", Summary: "echo"}}
}

func (p *router) Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	svc, err := p.echo.Start(ctx, env)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/echo/{x}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "native ", r.PathValue("x")) })
	return &procService{echoService: svc.(*echoService), native: mux}, nil
}

type procService struct {
	*echoService
	native http.Handler
}

func (s *procService) Handler() http.Handler { return s.native }
func (s *procService) PIDs() []int           { return []int{os.Getpid()} }

// EagerNames starts the plugins named, and only those, with the host; a
// plugin's native routes are served with their path unchanged; the
// state of a plugin that reports its processes has their RSS once it
// runs.
func TestEagerNamesRoutesRSS(t *testing.T) {
	r, lazy := &router{echo{name: "r"}}, &echo{name: "lazy"}
	h, err := New([]plugins.Plugin{r, lazy}, Options{EagerNames: []string{"r"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	waitState(t, h, "r", api.PluginRunning)
	if st := state(h, "lazy"); st.State != api.PluginStopped || st.RSS != nil {
		t.Errorf("lazy: %+v", st)
	}
	if st := state(h, "r"); st.RSS == nil || *st.RSS < 1<<20 {
		t.Errorf("r: %+v", st)
	}
	mux := http.NewServeMux()
	var native bool
	for _, rt := range h.Routes() {
		native = native || rt.Path == "/v1/echo/{x}" && rt.Method == "GET"
		mux.Handle(strings.TrimSpace(rt.Method+" "+rt.Path), rt.Handler)
	}
	if !native {
		t.Fatalf("routes: %+v", h.Routes())
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/echo/hi")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "native hi" {
		t.Errorf("native route: %d %q", resp.StatusCode, b)
	}
	if _, err := New([]plugins.Plugin{lazy}, Options{EagerNames: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), "not enabled") {
		t.Errorf("eager name not enabled: %v", err)
	}
}
