// Package launcher is the short-lived launcher process of a sandbox and the
// container init that libcontainer re-executes: both are bothy-init.
//
// It is kept free of the image code so that the binary libcontainer clones
// into a sealed memfd at every start (cmd/bothy-init) stays small.
package launcher
