// Package ipc holds the contracts between bothy's processes: what the CLI
// (package sandbox) hands the launcher (package launcher, run as bothy-init),
// the descriptors it passes down to the executor, and what the launcher
// reports back.
//
// It links neither libcontainer nor the image code, so that both sides can
// import it.
package ipc
