// Package info is the executor's info service: GET /alive (liveness, and
// the state of each enabled plugin), GET /v1/info (the executor and the
// sandbox: uptime, idle time, CPU, memory, disk, processes, the main
// command) and OpenHands' GET /server_info. It reads the sandbox's figures
// from its cgroup (a cgroup.Reader) and falls back to /proc without one;
// what it reports of the other services comes through the small
// interfaces below.
package info

import (
	"encoding/json"
	"net/http"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/cgroup"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

// Activity says when the executor started and when it last served a
// request that counts as activity.
type Activity interface {
	Started() time.Time
	LastActive() time.Time
}

// Processes reports the processes started through the API.
type Processes interface {
	// Running counts those running.
	Running() int
	// Main is the state of the main command, nil without one.
	Main() *api.MainInfo
}

// Plugins reports the state of each enabled plugin.
type Plugins interface {
	States() []api.PluginState
}

// Options configure the info service.
type Options struct {
	// Version is the executor's version.
	Version string
	// Reaper is the reaper's mode ("global" or "per-process").
	Reaper    string
	Activity  Activity
	Processes Processes
	Plugins   Plugins
	// Cgroup reads the sandbox's cgroup (cgroup.Default when nil).
	Cgroup cgroup.Reader
	// NetworkInfo is the file the host writes the sandbox's network to
	// (api.NetworkInfoPath when empty).
	NetworkInfo string
}

// Service serves the info routes.
type Service struct{ opts Options }

// New returns the info service.
func New(opts Options) *Service {
	if opts.Cgroup == nil {
		opts.Cgroup = cgroup.Default
	}
	if opts.NetworkInfo == "" {
		opts.NetworkInfo = api.NetworkInfoPath
	}
	return &Service{opts: opts}
}

// Routes lists the routes of the service; /alive is public and first.
func (s *Service) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: "GET", Path: "/alive", Public: true, Quiet: true, Summary: "liveness (and plugins still starting)", Handler: s.handleAlive},
		{Method: "GET", Path: "/v1/info", Quiet: true, Summary: "executor and sandbox information", Handler: s.handleInfo},
		{Method: "GET", Path: "/server_info", Quiet: true, Summary: "OpenHands: uptime, idle time, resources", Handler: s.handleServerInfo},
	}
}

var aliveBody = []byte(`{"status":"ok"}` + "\n")

func (s *Service) handleAlive(w http.ResponseWriter, r *http.Request) {
	states := s.opts.Plugins.States()
	if len(states) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Write(aliveBody)
		return
	}
	a := api.Alive{Status: "ok", Plugins: states}
	for _, st := range states {
		if st.State == api.PluginStarting {
			a.Starting = append(a.Starting, st.Name)
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, &a)
}

func (s *Service) handleInfo(w http.ResponseWriter, r *http.Request) {
	httpapi.WriteJSON(w, http.StatusOK, s.Info())
}

// Info gathers what GET /v1/info answers.
func (s *Service) Info() *api.Info {
	now := time.Now()
	started := s.opts.Activity.Started()
	info := &api.Info{
		Version:       s.opts.Version,
		API:           api.Version,
		PID:           os.Getpid(),
		CPUs:          runtime.NumCPU(),
		CPU:           s.cpu(),
		StartedAt:     started,
		UptimeSeconds: now.Sub(started).Seconds(),
		IdleSeconds:   now.Sub(s.opts.Activity.LastActive()).Seconds(),
		Memory:        readMemory(s.opts.Cgroup),
		Disk:          statDisk("/"),
		Processes:     s.opts.Processes.Running(),
		Reaper:        s.opts.Reaper,
		Main:          s.opts.Processes.Main(),
		Network:       s.network(),
	}
	info.Hostname, _ = os.Hostname()
	info.User = api.User{UID: os.Getuid(), GID: os.Getgid()}
	if u, err := user.LookupId(strconv.Itoa(info.User.UID)); err == nil {
		info.User.Name, info.User.Home = u.Username, u.HomeDir
	}
	return info
}

func (s *Service) handleServerInfo(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	info := api.ServerInfo{
		Uptime:    now.Sub(s.opts.Activity.Started()).Seconds(),
		IdleTime:  now.Sub(s.opts.Activity.LastActive()).Seconds(),
		Resources: s.resources(r.Context()),
		Plugins:   s.opts.Plugins.States(),
		Network:   s.network(),
	}
	httpapi.WriteJSON(w, http.StatusOK, &info)
}

// network reads the sandbox's network as the host wrote it, nil when there
// is none (no file: none or host; an empty object before the host attached
// it).
func (s *Service) network() *api.NetworkInfo {
	b, err := os.ReadFile(s.opts.NetworkInfo)
	if err != nil {
		return nil
	}
	var n api.NetworkInfo
	if json.Unmarshal(b, &n) != nil || n.Mode == "" {
		return nil
	}
	return &n
}
