// Package launcher is the short-lived launcher process of a sandbox and the
// container init that libcontainer re-executes: both are bothy-init, which
// they register as with ipc.Handle. The launcher gets its request from the
// CLI over internal/ipc's launch contract, mounts the sandbox's overlays in a
// mount namespace of its own, starts the executor through libcontainer
// (handing it a seccomp program compiled once per profile), waits for it to
// be ready and reports its PID 1.
//
// It is kept free of the image code so that the binary libcontainer clones
// into a sealed memfd at every start (cmd/bothy-init) stays small.
package launcher
