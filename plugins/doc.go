// Package plugins is the contract between bothy and its plugins, and
// their registry. A plugin is one package (plugins/jupyter,
// plugins/browser, plugins/vscode) that holds, side by side, what it
// installs into a runtime image (its Recipe, run by `bothy build
// --plugins`) and the service it runs in the sandbox (Start, run by the
// executor's plugin host, executor/plugin, on first use or with the
// executor). Each registers itself in its init; plugins/builtin imports
// every plugin bothy ships, so a binary that imports it knows them all.
//
// A service that links heavy libraries lives in the plugin's server
// package (plugins/jupyter/server, plugins/browser/server), registered
// with RegisterServer and linked into bothy-plugin only; the plugin's
// Start is StartProcess, which runs it there, in a process of its own, and
// hands the host a Service that forwards to it (process.go; the contract
// is in internal/ipc).
//
// This package holds only that contract (Plugin, Service, Env, the plugin
// process), the recipe data type and the registry; it links neither
// image-building code nor any plugin's service. A recipe is part of a runtime image's
// lock hash: changing one rebuilds the images that use it.
package plugins
