package userns

import "os"

// Reexec runs the helper a re-executed bothy-init was started as (removal,
// diff, changes under a subordinate-id mapping), and never returns in that
// case. launcher.Reexec calls it.
func Reexec() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case ChangesArg:
		os.Exit(changesMain())
	case RemoveArg:
		os.Exit(removeMain())
	case DiffArg:
		os.Exit(diffMain())
	}
}
