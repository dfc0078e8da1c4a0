package executor_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/plugins"
	_ "github.com/bothy-sandbox/bothy/plugins/builtin"
)

// The plugins bothy ships, enabled where they cannot run (a build without
// their services, a host without Chromium): each reports itself unavailable, and the executor answers
// their actions as OpenHands does without them.
func TestBuiltinPluginsUnavailable(t *testing.T) {
	enabled, err := plugins.Select("jupyter,browser,vscode")
	if err != nil {
		t.Fatal(err)
	}
	// browser and jupyter run their service in bothy-plugin, which says
	// why it cannot.
	ts, _ := agentServer(t, executor.Options{Plugins: enabled, EagerPlugins: true, PluginServer: testenv.PluginServer(t)})
	var a *api.Alive
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if a, err = ts.c.AliveStatus(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(a.Plugins, func(p api.PluginState) bool { return p.State != api.PluginUnavailable }) || time.Now().After(deadline) {
			break
		}
	}
	if len(a.Plugins) != 3 || len(a.Starting) != 0 {
		t.Fatalf("alive: %+v", a)
	}
	for _, p := range a.Plugins {
		// The services are built in: here, on the host, there is no
		// Chromium, python3 has no ipykernel and there is no code-server
		// (the sandbox tests run them on images that have).
		want := map[string]string{"browser": "no Chromium", "jupyter": "ipykernel", "vscode": "no code-server"}[p.Name]
		if p.State != api.PluginUnavailable || !strings.Contains(p.Error, want) {
			t.Errorf("plugin state %+v", p)
		}
	}
	if _, obs := ts.action(t, "run_ipython", map[string]any{"code": "1+1"}, 0); !strings.HasPrefix(obs.Content, "JupyterRequirement not found. Unable to run IPython action.\n") ||
		!strings.Contains(obs.Content, "python3-ipykernel") {
		t.Errorf("run_ipython: %+v", obs)
	}
	if _, obs := ts.action(t, "browse", map[string]any{"url": "http://x"}, 0); !strings.HasPrefix(obs.Content, "Browser functionality is not supported or disabled.\n") {
		t.Errorf("browse: %+v", obs)
	}
	if status, resp := ts.raw(t, "GET", "/vscode/connection_token", ""); status != 200 || strings.TrimSpace(string(resp)) != `{"token":null}` {
		t.Errorf("token: %d %s", status, resp)
	}
	status, resp := ts.raw(t, "GET", "/plugins/jupyter/api/kernels", "")
	wantError(t, status, resp, 501, api.CodeUnsupported)
	si, err := ts.c.ServerInfo(testCtx(t))
	if err != nil || len(si.Plugins) != 3 {
		t.Fatalf("server_info: %+v %v", si, err)
	}
}
