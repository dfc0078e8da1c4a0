// Package vscode is the VS Code plugin: a VS Code server in the sandbox,
// whose connection token the executor serves on
// /vscode/connection_token. Its recipe installs code-server with npm from
// the npm registry on top of Debian's Node.js. This build of the executor
// does not run code-server yet: Start reports the plugin unavailable, and
// the token is null, as OpenHands answers without VS Code.
package vscode

import (
	"context"
	"fmt"

	"github.com/bothy-sandbox/bothy/plugins"
)

// Plugin is the VS Code plugin.
type Plugin struct{}

func init() { plugins.Register(Plugin{}) }

// Name is "vscode".
func (Plugin) Name() string { return "vscode" }

// Recipe installs code-server with npm on Debian's nodejs.
func (Plugin) Recipe() plugins.Recipe {
	return plugins.Recipe{
		Name:        "vscode",
		Description: "VS Code in the browser (code-server from npm, on Debian's nodejs)",
		Packages:    []string{"nodejs", "npm", "git"},
		Run:         []string{"npm install --global --unsafe-perm --no-audit --no-fund code-server@4", "npm cache clean --force"},
		Check:       "command -v code-server >/dev/null",
	}
}

// Actions: none; the plugin serves a connection token.
func (Plugin) Actions() []string { return nil }

// Start reports the plugin unavailable: this build does not run
// code-server.
func (Plugin) Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	return nil, fmt.Errorf("start vscode: %w: this build of bothy-executor does not run code-server", plugins.ErrUnavailable)
}
