package ipc

// ExecutorReady is the executor's one frame on its ready pipe
// (ExecutorReadyFD), sent once its socket answers (and its main command, if
// any, has started); it then closes the pipe.
type ExecutorReady struct{}

// MessageType implements Message.
func (ExecutorReady) MessageType() string { return "executor.ready" }

// SeccompProgram is the one frame of the file the executor gets as
// --seccomp-fd: a compiled seccomp filter that it loads before anything
// else. The launcher keeps these frames as they are in its cache.
type SeccompProgram struct {
	// Flags are the SECCOMP_FILTER_FLAG_* bits to load it with (the
	// executor always adds TSYNC).
	Flags uint32 `json:"flags"`
	// Filter is the program: struct sock_filter entries in the host's byte
	// order.
	Filter []byte `json:"filter"`
}

// MessageType implements Message.
func (SeccompProgram) MessageType() string { return "seccomp.program" }
