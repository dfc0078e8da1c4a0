package plugins

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/reap"
)

// Plugin is one optional capability of a sandbox.
type Plugin interface {
	// Name names the plugin (lower-case letters, digits and dashes), as
	// --plugins does.
	Name() string
	// Recipe is what a runtime image needs inside for the plugin.
	Recipe() Recipe
	// Actions lists the OpenHands action types its service executes
	// (none for a plugin that only serves routes).
	Actions() []string
	// Start starts the plugin's service in the sandbox and returns once
	// it serves. The host calls it once, on the plugin's first use or
	// when the executor starts, and bounds it with ctx: a Start must
	// return when ctx is done. An error wrapping ErrUnavailable says the
	// plugin cannot run in this sandbox (its recipe is not installed, or
	// this build has no service for it); any other error is a failed
	// start.
	Start(ctx context.Context, env Env) (Service, error)
}

// Service is a plugin's running service.
type Service interface {
	// Execute runs one action of a type the plugin's Actions list and
	// answers its observation; an error is an internal failure.
	Execute(ctx context.Context, a *api.Action) (*api.Observation, error)
	// Handler answers the plugin's own routes, under /plugins/NAME/ (the
	// prefix stripped); nil for none.
	Handler() http.Handler
	// Close stops the service and what it started.
	Close() error
}

// Tokener is a Service with a connection token (VS Code's), served by the
// OpenHands dialect's GET /vscode/connection_token.
type Tokener interface {
	ConnectionToken() string
}

// Listener is a Plugin whose service listens on a TCP port of the
// sandbox's addresses (VS Code's server): the executor reports the port in
// the plugin's state, so that the host can say where the port is published.
// Port reads it from environ, the executor's environment; an error says
// the setting is wrong (the start fails with it too).
type Listener interface {
	Port(environ []string) (int, error)
}

// Router is a Plugin that serves routes of the native API besides its
// own under /plugins/NAME/ (Jupyter's /v1/kernels): while the plugin is
// enabled the executor serves each with the Service's Handler, the path
// unchanged, starting the plugin on first use.
type Router interface {
	Routes() []Route
}

// Route is one route of a Router: a method and a net/http ServeMux
// pattern path.
type Route struct {
	Method, Path, Summary string
}

// Processes is a Service that reports the processes it runs, whose
// resident memory the executor reports as the plugin's.
type Processes interface {
	PIDs() []int
}

// Env is what the executor gives a plugin's service.
type Env struct {
	// Cwd is the executor's working directory.
	Cwd string
	// WorkingDir, when set, reports the default bash session's working
	// directory now (Jupyter's kernel follows it, as in OpenHands).
	WorkingDir func() string
	// Environ is the base environment of the processes it starts.
	Environ []string
	// Reaper starts and waits for every process in the sandbox: a
	// service starts its processes through it.
	Reaper *reap.Reaper
	// Log receives the service's log.
	Log *slog.Logger
	// Server is the path of bothy-plugin, which StartProcess runs: the
	// executor's --plugin-server (DefaultServer, where bothy mounts it).
	// Empty: plugins whose service runs there are unavailable.
	Server string
}

// ErrUnavailable: the plugin cannot run here.
var ErrUnavailable = errors.New("plugin not available")
