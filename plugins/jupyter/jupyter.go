// Package jupyter is the Jupyter plugin: IPython kernels (Debian's
// python3-ipykernel) in the sandbox, driven by the executor over Jupyter's
// messaging protocol (ZMQ on the sandbox's loopback, through the pure-Go
// github.com/go-zeromq/zmq4, messages signed with HMAC-SHA256). It runs
// OpenHands' run_ipython actions in the kernel "default", with OpenHands'
// semantics, and serves the native API's /v1/kernels routes. Its recipe
// installs Debian's ipykernel into a runtime image.
package jupyter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/plugins"
)

// Plugin is the Jupyter plugin.
type Plugin struct{}

func init() { plugins.Register(Plugin{}) }

var (
	_ plugins.Plugin    = Plugin{}
	_ plugins.Router    = Plugin{}
	_ plugins.Service   = (*Service)(nil)
	_ plugins.Processes = (*Service)(nil)
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

// Start finds python3 and starts the default kernel: the plugin runs once
// a kernel answers. Without python3 or its ipykernel module the plugin is
// unavailable, and the error names what to install.
func (Plugin) Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	if env.Reaper == nil {
		return nil, errors.New("start jupyter: no reaper to start the kernel with")
	}
	python, err := lookPython(env.Environ)
	if err != nil {
		return nil, fmt.Errorf("start jupyter: %w", err)
	}
	s := newService(env, python)
	if _, err := s.kernel(ctx, api.DefaultKernel); err != nil {
		s.Close()
		return nil, fmt.Errorf("start jupyter: %w", err)
	}
	return s, nil
}

// lookPython finds python3 in the PATH of environ.
func lookPython(environ []string) (string, error) {
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" || !strings.HasPrefix(dir, "/") {
			continue
		}
		if p, err := exec.LookPath(dir + "/python3"); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: no python3 in PATH (%s): install Debian's python3-ipykernel in the image (bothy build --plugins jupyter)", plugins.ErrUnavailable, path)
}

// errNoKernel: no kernel has that id.
var errNoKernel = errors.New("no such kernel")
