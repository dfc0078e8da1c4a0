// Command bothy-init is the launcher and container init that bothy re-executes
// for every sandbox. It carries only the launcher, so the copy libcontainer
// makes of it at each start stays small. It is not meant to be run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/bothy-sandbox/bothy/internal/launcher"
	"github.com/bothy-sandbox/bothy/internal/trace"
)

func main() {
	// The launcher's own environment: its marks, as bothy's (BOTHY_TRACE,
	// BOTHY_KILL_AT).
	trace.Configure(trace.FromEnv())
	launcher.Reexec()
	fmt.Fprintln(os.Stderr, "bothy-init is started by bothy; it is not a command")
	os.Exit(2)
}
