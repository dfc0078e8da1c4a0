// Package vscode is the VS Code plugin: a VS Code server in the sandbox,
// whose connection token the executor serves on
// /vscode/connection_token. Its recipe installs code-server with npm from
// the npm registry on top of Debian's Node.js, then moves VS Code's
// modules where code-server loads them (relocate.sh). The service runs the
// image's code-server with a fresh connection token as its password, on
// port VSCODE_PORT (default 8080) of the sandbox's addresses.
package vscode

import (
	_ "embed"

	"github.com/bothy-sandbox/bothy/plugins"
)

// relocate puts the node_modules of code-server's VS Code where it loads
// them from, after npm's global install left them in global packages of
// their own (see the script).
//
//go:embed relocate.sh
var relocate string

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
		// code-server's npm package builds its native modules at install
		// (node-gyp): a compiler, make, Python and Kerberos' headers.
		Packages: []string{"nodejs", "npm", "git", "build-essential", "pkg-config", "python3", "libkrb5-dev"},
		// 4.89.1 is the last code-server on Node.js 18, Debian 12's (later
		// ones require Node.js 20, then 22 and 24, and their install
		// script refuses another).
		Run: []string{"npm install --global --unsafe-perm --no-audit --no-fund code-server@4.89.1", relocate, "npm cache clean --force"},
		// code-server and its VS Code's modules where it loads them (an
		// image built before relocate lacks them: its workbench page
		// never answers).
		Check: `command -v code-server >/dev/null && v=$(dirname "$(readlink -f "$(command -v code-server)")")/../../lib/vscode && test -d "$v/node_modules/@microsoft/1ds-core-js"`,
	}
}

// Port is code-server's port: $VSCODE_PORT of environ, else DefaultPort
// (plugins.Listener).
func (Plugin) Port(environ []string) (int, error) { return vscodePort(environ) }

// Actions: none; the plugin serves a connection token.
func (Plugin) Actions() []string { return nil }
