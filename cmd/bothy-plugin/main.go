// Command bothy-plugin runs, in a sandbox, the service of one plugin whose
// service links libraries the executor does without (go-rod, zmq4): the
// executor starts it on the plugin's first use (plugins.StartProcess) and
// bothy mounts it beside the executor, read-only, in the sandboxes that
// enable a plugin. Each such plugin's service package is imported here.
package main

import (
	"os"

	"github.com/bothy-sandbox/bothy/plugins"
	_ "github.com/bothy-sandbox/bothy/plugins/browser/server"
	_ "github.com/bothy-sandbox/bothy/plugins/jupyter/server"
)

func main() { os.Exit(plugins.ServeProcess(os.Args[1:])) }
