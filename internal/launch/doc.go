// Package launch is what the bothy CLI and the launcher share: the launch
// request, the user namespace mapping and how to start a process in it, and
// the helpers bothy-init runs under a subordinate-id mapping (removal, diff,
// changes).
//
// It does not link libcontainer (package launcher does), so that the CLI
// starts fast.
package launch
