package server

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/plugins"
)

func init() { plugins.RegisterServer("jupyter", Start) }

var (
	_ plugins.Service   = (*Service)(nil)
	_ plugins.Processes = (*Service)(nil)
)

// Start finds python3 and starts the default kernel: the Jupyter plugin's
// service, run in bothy-plugin, runs once a kernel answers. Without python3
// or its ipykernel module the plugin is unavailable, and the error names
// what to install.
func Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
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
