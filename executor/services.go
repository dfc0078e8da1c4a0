package executor

import (
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/editorserver"
	"github.com/bothy-sandbox/bothy/executor/files"
	"github.com/bothy-sandbox/bothy/executor/fileserver"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/info"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
	"github.com/bothy-sandbox/bothy/executor/openhands"
	"github.com/bothy-sandbox/bothy/executor/plugin"
	"github.com/bothy-sandbox/bothy/executor/ports"
	"github.com/bothy-sandbox/bothy/executor/processes"
	"github.com/bothy-sandbox/bothy/executor/ptys"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/executor/sessions"
	"github.com/bothy-sandbox/bothy/plugins"
)

// services are the executor's services, each a package with its routes.
// To add one: make its package (New, Routes), build it in newServices and
// list it in routes; docs/extending.md walks through it.
type services struct {
	info      *info.Service
	procs     *processes.Service
	ptys      *ptys.Service
	sessions  *sessions.Service
	files     *fileserver.Service
	editor    *editorserver.Service
	openhands *openhands.Service
	ports     *ports.Service
	plugins   *plugin.Host
}

// newServices builds the services from the server's options (defaults
// applied) and the pieces they share.
func newServices(o Options, r *reap.Reaper, reqMem *budget.Memory, fileCalls budget.Calls, outMem *budget.Output, active info.Activity) (services, error) {
	var s services
	bodies := &httpapi.Bodies{Max: o.MaxRequestBody, Mem: reqMem, Files: fileCalls}
	// The plugins follow the default bash session's working directory,
	// once there are sessions.
	workingDir := func() string {
		if s.sessions == nil {
			return o.Cwd
		}
		return s.sessions.WorkingDir()
	}
	plugins, err := plugin.New(o.Plugins, plugin.Options{
		Env:   plugins.Env{Cwd: o.Cwd, WorkingDir: workingDir, Environ: o.Env, Reaper: r, Log: o.Logger, Server: o.PluginServer},
		Eager: o.EagerPlugins, EagerNames: o.EagerPluginNames, StartTimeout: o.PluginStartTimeout, Reserved: openhands.CoreActions,
	})
	if err != nil {
		return s, err
	}
	procs, err := processes.New(processes.Options{
		Env: o.Env, Shell: o.Shell, MaxOutput: o.MaxOutput, MaxRetained: o.MaxRetained,
		MaxProcesses: o.MaxProcesses, MaxFinished: o.MaxFinished, WaitDelay: o.WaitDelay,
		Reaper: r, Output: outMem, Bodies: bodies, Cgroup: o.Cgroup, Log: o.Logger,
		User: o.User, LookupUser: o.LookupUser,
	})
	if err != nil {
		plugins.Close()
		return s, err
	}
	s.plugins, s.procs = plugins, procs
	s.ptys = ptys.New(ptys.Options{
		Env: o.Env, Shell: o.Shell, MaxPtys: ptys.DefaultMaxPtys, MaxFinished: o.MaxFinished,
		MaxRetained: o.MaxRetained, WaitDelay: o.WaitDelay, Reaper: r, Bodies: bodies, Log: o.Logger,
		User: o.User, LookupUser: o.LookupUser,
	})
	s.sessions = sessions.New(sessions.Options{
		Cwd: o.Cwd, Env: o.Env, NoChangeTimeout: o.NoChangeTimeout, MaxSessions: o.MaxSessions,
		Reaper: r, Bodies: bodies, Cgroup: o.Cgroup, User: o.User,
	})
	// Files the API creates are the default user's, as its processes'.
	var owner *files.Owner
	if o.User != nil {
		owner = &files.Owner{UID: int(o.User.UID), GID: int(o.User.GID)}
	}
	s.files = fileserver.New(fileserver.Options{MaxUpload: o.MaxUpload, Bodies: bodies, Log: o.Logger, Owner: owner, LookupUser: o.LookupUser})
	s.editor = editorserver.New(o.Cwd, bodies, owner)
	s.openhands = openhands.New(openhands.Options{
		Cwd: o.Cwd, MaxUpload: o.MaxUpload, Owner: owner, Bodies: bodies, Log: o.Logger,
		Sessions: s.sessions, Editor: s.editor, Downloads: s.files, Plugins: s.plugins,
	})
	s.ports = ports.New(ports.Options{})
	s.info = info.New(info.Options{
		Version: Version, Reaper: r.Mode().String(), Activity: active,
		Processes: running{s.procs, s.ptys}, Plugins: s.plugins, Cgroup: o.Cgroup, NetworkInfo: o.NetworkInfo,
	})
	return s, nil
}

// The interfaces the dialect and the info service declare, met by the
// other services.
var (
	_ openhands.Sessions  = (*sessions.Service)(nil)
	_ openhands.Editor    = (*editorserver.Service)(nil)
	_ openhands.Downloads = (*fileserver.Service)(nil)
	_ openhands.Plugins   = (*plugin.Host)(nil)
	_ info.Processes      = running{}
	_ info.Plugins        = (*plugin.Host)(nil)
)

// running reports to the info service the processes started through the
// API and the programs on terminals.
type running struct {
	procs *processes.Service
	ptys  *ptys.Service
}

func (r running) Running() int        { return r.procs.Running() + r.ptys.Running() }
func (r running) Main() *api.MainInfo { return r.procs.Main() }

// routes is the route table: /alive first (info), the native API, the
// OpenHands dialect, the plugins.
func (s services) routes() []Route {
	var rts []Route
	for _, list := range [][]Route{
		s.info.Routes(), s.procs.Routes(), s.ptys.Routes(), s.sessions.Routes(), s.files.Routes(), s.editor.Routes(),
		s.ports.Routes(), s.openhands.Routes(), s.plugins.Routes(),
	} {
		rts = append(rts, list...)
	}
	return rts
}

// shutdown makes the services that start processes refuse new ones.
func (s services) shutdown() {
	s.procs.Shutdown()
	s.ptys.Shutdown()
	s.sessions.Shutdown()
}

// close stops the plugins and kills every process the services started.
func (s services) close() {
	s.plugins.Close()
	s.ports.Close()
	s.procs.Close()
	s.ptys.Close()
	s.sessions.Close()
}
