// Package userns starts processes in a user namespace with a sandbox's id
// mapping (the caller mapped to root, single-id or a subordinate range), and
// holds the helpers bothy-init runs under that mapping: removal of upper
// directories, their diff and their change list.
//
// It does not link libcontainer (package launcher does), so that the CLI
// starts fast.
package userns
