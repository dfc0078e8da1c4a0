// Package jupyter is the Jupyter plugin: an IPython kernel for OpenHands'
// run_ipython actions. Its recipe installs Debian's ipykernel and Jupyter
// client into a runtime image. This build of the executor has no kernel
// service yet: Start reports the plugin unavailable, and the executor
// answers run_ipython as OpenHands does without Jupyter.
package jupyter

import (
	"context"
	"fmt"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/plugins"
)

// Plugin is the Jupyter plugin.
type Plugin struct{}

func init() { plugins.Register(Plugin{}) }

// Name is "jupyter".
func (Plugin) Name() string { return "jupyter" }

// Recipe installs an IPython kernel and a Jupyter client from Debian's
// packages.
func (Plugin) Recipe() plugins.Recipe {
	return plugins.Recipe{
		Name:        "jupyter",
		Description: "IPython kernel and Jupyter client (run_ipython actions)",
		Packages:    []string{"python3-ipykernel", "python3-jupyter-client"},
		Check:       "python3 -c 'import ipykernel, jupyter_client' 2>/dev/null",
	}
}

// Actions are OpenHands' run_ipython.
func (Plugin) Actions() []string { return []string{api.ActionRunIPython} }

// Start reports the plugin unavailable: this build has no kernel service.
func (Plugin) Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	return nil, fmt.Errorf("start jupyter: %w: this build of bothy-executor has no Jupyter kernel service", plugins.ErrUnavailable)
}
