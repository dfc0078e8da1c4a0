// Package server is the browser plugin's service (package plugins/browser
// is the plugin): Debian's Chromium, started in the sandbox with a DevTools
// pipe and driven with go-rod. It runs in bothy-plugin, never in the
// executor, which would otherwise load go-rod at every sandbox's start; it
// registers itself with plugins.RegisterServer.
package server
