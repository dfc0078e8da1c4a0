// Package serve is `bothy serve`: OpenHands' runtime API (the API that
// OpenHands' RemoteRuntime, the SDK's APIRemoteWorkspace and the app
// server's remote sandbox service call, with X-API-Key) over bothy's
// sandboxes, and a proxy from each runtime's URL to its sandbox through the
// sandbox's Unix socket.
//
// It keeps no state of its own: a runtime is a sandbox whose labels say
// which session it serves and what its URL reaches (the executor's
// OpenHands dialect, or a TCP port inside the sandbox through the
// executor's port forwarding), and every answer is read from bothy's state
// on disk and the sandbox's cgroup. A server killed and started again
// serves every sandbox as before. docs/serve.md describes the API and the
// mapping of its fields; docs/security.md how its connections reach the
// sockets.
package serve
