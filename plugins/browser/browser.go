// Package browser is the browser plugin: a headless Chromium for
// OpenHands' browse and browse_interactive actions. Its recipe installs
// Debian's chromium into a runtime image. This build of the executor has
// no browser service yet: Start reports the plugin unavailable, and the
// executor answers the browse actions as OpenHands does without a browser.
package browser

import (
	"context"
	"fmt"

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

// Start reports the plugin unavailable: this build has no browser service.
func (Plugin) Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	return nil, fmt.Errorf("start browser: %w: this build of bothy-executor has no browser service", plugins.ErrUnavailable)
}
