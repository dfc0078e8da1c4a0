// Command bothy-init is what bothy re-executes for every sandbox: the
// launcher (package launcher), libcontainer's container init, and the
// helpers that read or remove what a sandbox wrote under its id mapping
// (package userns). The first argument names the role (see internal/ipc);
// it is not meant to be run by hand. It carries only these, so the copy
// libcontainer makes of it at each start stays small.
package main

import (
	"fmt"
	"os"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	// Registers the launcher and the container init, and through package
	// userns the helpers.
	_ "github.com/bothy-sandbox/bothy/internal/launcher"
	"github.com/bothy-sandbox/bothy/internal/trace"
)

func main() {
	// The launcher's own environment: its marks, as bothy's (BOTHY_TRACE,
	// BOTHY_KILL_AT).
	trace.Configure(trace.FromEnv())
	ipc.Dispatch()
	fmt.Fprintln(os.Stderr, "bothy-init is started by bothy; it is not a command")
	os.Exit(2)
}
