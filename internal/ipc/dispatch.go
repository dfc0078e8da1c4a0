package ipc

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
)

// Names a binary is re-executed under, as its first argument: bothy-init
// (and the test binaries that stand in for it) become the process the name
// says. Every name but libcontainer's "init" starts with ReexecPrefix.
const (
	// ReexecInit is libcontainer's container init (package launcher).
	ReexecInit = "init"
	// ReexecLaunch is the launcher (package launcher).
	ReexecLaunch = ReexecPrefix + "launch"
	// ReexecRemove, ReexecDiff, ReexecChanges and ReexecMerge are the
	// helpers that read, remove or merge what a sandbox wrote from inside
	// a user namespace with its id mapping (package userns).
	ReexecRemove  = ReexecPrefix + "remove"
	ReexecDiff    = ReexecPrefix + "diff"
	ReexecChanges = ReexecPrefix + "changes"
	ReexecMerge   = ReexecPrefix + "merge"

	// ReexecPrefix marks bothy's own names: an argument with it that no
	// package registered is an error, never a command line to go on with.
	ReexecPrefix = "__bothy_"
)

// registry maps re-exec names to what the process then does.
type registry struct {
	mu       sync.Mutex
	handlers map[string]func() int
}

var reexecs registry

// Handle registers fn as what the binary does when it is started with name
// as its first argument: Dispatch runs it and exits with its result. Packages
// register their processes in init. Handle panics on a name registered
// twice, or one that is neither ReexecInit nor starts with ReexecPrefix.
func Handle(name string, fn func() int) { reexecs.handle(name, fn) }

// Dispatch runs the handler that os.Args[1] names and exits with its code,
// or returns when the process was not started under a re-exec name. An
// argument that starts with ReexecPrefix but that no package registered
// (a binary that does not link it) exits 2 with a message that says so.
// Call it first thing in main, and in TestMain of tests whose binary stands
// in for bothy-init (importing package launcher for its registrations).
func Dispatch() {
	if code, ok := reexecs.dispatch(os.Args, os.Stderr); ok {
		os.Exit(code)
	}
}

func (r *registry) handle(name string, fn func() int) {
	if name != ReexecInit && (!strings.HasPrefix(name, ReexecPrefix) || name == ReexecPrefix) {
		panic(fmt.Sprintf("ipc.Handle: re-exec name %q does not start with %q", name, ReexecPrefix))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[name]; dup {
		panic(fmt.Sprintf("ipc.Handle: re-exec name %q registered twice", name))
	}
	if r.handlers == nil {
		r.handlers = map[string]func() int{}
	}
	r.handlers[name] = fn
}

// dispatch runs the handler args[1] names; ok reports whether the process
// was started as one (and must exit with code).
func (r *registry) dispatch(args []string, stderr io.Writer) (code int, ok bool) {
	if len(args) < 2 {
		return 0, false
	}
	name := args[1]
	r.mu.Lock()
	fn := r.handlers[name]
	known := r.names()
	r.mu.Unlock()
	switch {
	case fn != nil:
		return fn(), true
	case strings.HasPrefix(name, ReexecPrefix):
		fmt.Fprintf(stderr, "%s: started as %q, which this binary does not provide (it provides: %s); is it bothy-init, of the same version as bothy?\n",
			args[0], name, strings.Join(known, ", "))
		return 2, true
	}
	return 0, false
}

func (r *registry) names() []string {
	var names []string
	for n := range r.handlers {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		names = []string{"none"}
	}
	return names
}
