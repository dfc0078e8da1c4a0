// Package jupyter is the Jupyter plugin: IPython kernels (Debian's
// python3-ipykernel) in the sandbox, driven by its service (package
// plugins/jupyter/server, run in bothy-plugin, a process of its own) over
// Jupyter's messaging protocol (ZMQ on the sandbox's loopback, through the pure-Go
// github.com/go-zeromq/zmq4, messages signed with HMAC-SHA256). It runs
// OpenHands' run_ipython actions in the kernel "default", with OpenHands'
// semantics, and serves the native API's /v1/kernels routes. Its recipe
// installs Debian's ipykernel into a runtime image.
package jupyter

import (
	"context"
	"net/http"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/plugins"
)

// Plugin is the Jupyter plugin.
type Plugin struct{}

func init() { plugins.Register(Plugin{}) }

var (
	_ plugins.Plugin = Plugin{}
	_ plugins.Router = Plugin{}
)

// Name is "jupyter".
func (Plugin) Name() string { return "jupyter" }

// Recipe installs an IPython kernel from Debian's packages.
func (Plugin) Recipe() plugins.Recipe {
	return plugins.Recipe{
		Name:        "jupyter",
		Description: "IPython kernel (run_ipython actions, /v1/kernels)",
		Packages:    []string{"python3-ipykernel"},
		Check:       "python3 -c 'import ipykernel' 2>/dev/null",
	}
}

// Actions are OpenHands' run_ipython.
func (Plugin) Actions() []string { return []string{api.ActionRunIPython} }

// Routes are the native API's kernel routes.
func (Plugin) Routes() []plugins.Route {
	return []plugins.Route{
		{Method: http.MethodGet, Path: "/v1/kernels", Summary: "list the running IPython kernels"},
		{Method: http.MethodPost, Path: "/v1/kernels/{id}/execute", Summary: "run a cell in kernel id (started on first use), its outputs streamed or collected"},
		{Method: http.MethodDelete, Path: "/v1/kernels/{id}", Summary: "stop kernel id"},
	}
}

// Start runs the service in bothy-plugin (package server).
func (Plugin) Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	return plugins.StartProcess(ctx, env, "jupyter")
}
