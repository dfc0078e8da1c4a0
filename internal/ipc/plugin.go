package ipc

// Descriptors of a plugin process (bothy-plugin, started by the executor's
// plugin host for a plugin whose service runs out of the executor): its
// listening socket, on which it serves the service over HTTP, and its ready
// pipe. Its stdin is a pipe the executor holds open: end of file there is
// the executor gone, and the plugin process closes its service and exits.
const (
	PluginListenFD = 3
	PluginReadyFD  = 4
)

// PluginReady is a plugin process's one frame on its ready pipe
// (PluginReadyFD), sent once its service's start has ended; it then closes
// the pipe. Error says why the service did not start (the process then
// exits); Unavailable, that it cannot run in this sandbox (what the plugin
// needs is not installed).
type PluginReady struct {
	Error       string `json:"error,omitempty"`
	Unavailable bool   `json:"unavailable,omitempty"`
}

// MessageType implements Message.
func (PluginReady) MessageType() string { return "plugin.ready" }
