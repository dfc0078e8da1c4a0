package info

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/cgroup"
)

type fakeActivity struct{ started, last time.Time }

func (a fakeActivity) Started() time.Time    { return a.started }
func (a fakeActivity) LastActive() time.Time { return a.last }

type fakeProcesses struct {
	running int
	main    *api.MainInfo
}

func (p fakeProcesses) Running() int        { return p.running }
func (p fakeProcesses) Main() *api.MainInfo { return p.main }

type fakePlugins []api.PluginState

func (p fakePlugins) States() []api.PluginState { return p }

var (
	_ Activity  = fakeActivity{}
	_ Processes = fakeProcesses{}
	_ Plugins   = fakePlugins{}
)

// serve answers one request with the service's routes.
func serve(s *Service, method, path string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	for _, rt := range s.Routes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, rt.Handler)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func TestAliveListsPlugins(t *testing.T) {
	s := New(Options{Plugins: fakePlugins{}, Cgroup: cgroup.Noop{}})
	if rec := serve(s, "GET", "/alive"); rec.Code != 200 || rec.Body.String() != `{"status":"ok"}`+"\n" {
		t.Fatalf("alive without plugins: %d %q", rec.Code, rec.Body)
	}
	states := fakePlugins{{Name: "a", State: api.PluginStarting}, {Name: "b", State: api.PluginUnavailable, Error: "not in this build"}, {Name: "c", State: api.PluginStarting}}
	s = New(Options{Plugins: states, Cgroup: cgroup.Noop{}})
	var a api.Alive
	if rec := serve(s, "GET", "/alive"); rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &a) != nil ||
		a.Status != "ok" || !slices.Equal(a.Starting, []string{"a", "c"}) || !slices.Equal(a.Plugins, states) {
		t.Fatalf("alive with plugins: %d %s", rec.Code, rec.Body)
	}
}

func TestInfoFromItsSources(t *testing.T) {
	start := time.Now().Add(-time.Hour)
	code := 3
	s := New(Options{
		Version: "v9", Reaper: "global",
		Activity:  fakeActivity{started: start, last: start.Add(30 * time.Minute)},
		Processes: fakeProcesses{running: 2, main: &api.MainInfo{PID: 7, ExitCode: &code}},
		Plugins:   fakePlugins{{Name: "a", State: api.PluginRunning}},
		Cgroup:    cgroup.FS{Root: t.TempDir()}, // a cgroup without counters: /proc figures
	})
	info := s.Info()
	if info.Version != "v9" || info.Reaper != "global" || info.Processes != 2 || info.Main.PID != 7 ||
		info.UptimeSeconds < 3599 || info.IdleSeconds < 1799 || info.IdleSeconds > 1900 || info.Memory.Source != "meminfo" || info.CPU.Source != "proc" {
		t.Fatalf("info: %+v", info)
	}
	rec := serve(s, "GET", "/server_info")
	var si api.ServerInfo
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &si) != nil || si.Uptime < 3599 || len(si.Plugins) != 1 ||
		!strings.Contains(rec.Body.String(), `"plugins":[{"name":"a","state":"running"}]`) {
		t.Fatalf("server_info: %d %s", rec.Code, rec.Body)
	}
}
