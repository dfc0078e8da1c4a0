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

// Env is what the executor gives a plugin's service.
type Env struct {
	// Cwd is the executor's working directory.
	Cwd string
	// Environ is the base environment of the processes it starts.
	Environ []string
	// Reaper starts and waits for every process in the sandbox: a
	// service starts its processes through it.
	Reaper *reap.Reaper
	// Log receives the service's log.
	Log *slog.Logger
}

// ErrUnavailable: the plugin cannot run here.
var ErrUnavailable = errors.New("plugin not available")
