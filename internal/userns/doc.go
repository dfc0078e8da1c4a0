// Package userns starts processes in a user namespace with a sandbox's id
// mapping (the caller mapped to root, single-id or a subordinate range), and
// holds the helpers bothy-init runs under that mapping to read or remove what
// a sandbox wrote: RemoveAs, DiffAs and ChangesAs start them, and they
// register themselves with ipc.Handle. Their requests and replies are ipc
// frames (see internal/ipc).
//
// It does not link libcontainer (package launcher does), so that the CLI
// starts fast.
package userns
