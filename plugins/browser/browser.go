// Package browser is the browser plugin: a headless Chromium for
// OpenHands' browse and browse_interactive actions. Its recipe installs
// Debian's chromium into a runtime image; its service (package
// plugins/browser/server, run in bothy-plugin, a process of its own) starts
// that Chromium in the sandbox and drives it over the DevTools protocol with
// go-rod, which never downloads a browser. The actions are BrowserGym's
// high-level action set, the elements named by BrowserGym-style bid
// attributes, the observation OpenHands' BrowserOutputObservation. Native
// routes under /plugins/browser/ give the same as JSON.
package browser

import (
	"context"
	"net/http"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/plugins"
)

// Plugin is the browser plugin.
type Plugin struct{}

func init() { plugins.Register(Plugin{}) }

var (
	_ plugins.Plugin = Plugin{}
	_ plugins.Router = Plugin{}
)

// Name is "browser".
func (Plugin) Name() string { return "browser" }

// Recipe installs a headless Chromium from Debian's packages.
func (Plugin) Recipe() plugins.Recipe {
	return plugins.Recipe{
		Name:        "browser",
		Description: "headless Chromium (browse, browse_interactive actions)",
		Packages:    []string{"chromium", "fonts-liberation"},
		Check:       "command -v chromium >/dev/null",
	}
}

// Actions are OpenHands' browse and browse_interactive.
func (Plugin) Actions() []string { return []string{api.ActionBrowse, api.ActionBrowseInteractive} }

// Routes are the native API's browser routes, each also served under
// /plugins/browser/ by its last element.
func (Plugin) Routes() []plugins.Route {
	return []plugins.Route{
		{Method: http.MethodPost, Path: "/v1/browser/navigate", Summary: "go to a URL in the browser (started on first use); answers the browser's state"},
		{Method: http.MethodPost, Path: "/v1/browser/actions", Summary: "run BrowserGym actions in the browser; answers the browser's state"},
		{Method: http.MethodGet, Path: "/v1/browser/screenshot", Summary: "the active page's viewport as PNG"},
	}
}

// Start runs the service in bothy-plugin (package server).
func (Plugin) Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	return plugins.StartProcess(ctx, env, "browser")
}
