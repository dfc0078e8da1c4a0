// Package browser is the browser plugin: a headless Chromium for
// OpenHands' browse and browse_interactive actions. Its recipe installs
// Debian's chromium into a runtime image; its service starts that
// Chromium in the sandbox (through the executor's reaper) and drives it
// over the DevTools protocol with go-rod, which never downloads a
// browser. The actions are BrowserGym's high-level action set, the
// elements named by BrowserGym-style bid attributes, the observation
// OpenHands' BrowserOutputObservation. Native routes under
// /plugins/browser/ give the same as JSON.
package browser

import (
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/plugins"
)

// Plugin is the browser plugin.
type Plugin struct{}

func init() { plugins.Register(Plugin{}) }

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
