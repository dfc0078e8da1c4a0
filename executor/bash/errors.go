package bash

import "errors"

// Sentinel errors.
var (
	// ErrClosed: the session was closed.
	ErrClosed = errors.New("bash: session closed")
	// ErrExited: the shell exited (the agent ran `exit`, or it was
	// killed); the session cannot run commands any more.
	ErrExited = errors.New("bash: shell exited")
	// ErrNoShell: no bash was found.
	ErrNoShell = errors.New("bash: no bash shell found")
	// ErrHandshake: the shell did not complete the start-up handshake (it
	// is not bash ≥ 4, or it exited at once).
	ErrHandshake = errors.New("bash: shell did not complete the start-up handshake")
	// ErrNotFound: no session has that name.
	ErrNotFound = errors.New("bash: no such session")
	// ErrExists: a session with that name already exists.
	ErrExists = errors.New("bash: session already exists")
)
