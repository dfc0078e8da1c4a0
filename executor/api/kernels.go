package api

// The Jupyter plugin's native API: IPython kernels by id, each created on
// first use (POST /v1/kernels/{id}/execute). The kernel "default" is the
// one OpenHands' run_ipython actions run in.

// DefaultKernel is the kernel run_ipython uses.
const DefaultKernel = "default"

// KernelExecuteRequest is the body of POST /v1/kernels/{id}/execute.
type KernelExecuteRequest struct {
	// Code is the cell.
	Code string `json:"code"`
	// Timeout in seconds (0: 120): past it the kernel is interrupted
	// (SIGINT), and restarted if the cell does not stop.
	Timeout float64 `json:"timeout,omitempty"`
	// Cwd, when set, is where the kernel's working directory moves before
	// the cell.
	Cwd string `json:"cwd,omitempty"`
	// Stream answers application/x-ndjson: one KernelEvent per line as the
	// kernel sends it, then one of type "end" that carries the reply.
	Stream bool `json:"stream,omitempty"`
}

// Types of KernelEvent.
const (
	KernelStdout  = "stdout"  // Text
	KernelStderr  = "stderr"  // Text
	KernelDisplay = "display" // Data (display_data)
	KernelResult  = "result"  // Data, ExecutionCount (execute_result)
	KernelError   = "error"   // Name, Value, Traceback
	KernelEnd     = "end"     // Reply: the last event of a stream
)

// KernelEvent is one output of a cell.
type KernelEvent struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// Data is display data or a result by MIME type (text/plain, text/html,
	// image/png as base64, application/json as JSON, …).
	Data           map[string]any `json:"data,omitempty"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	// Name, Value and Traceback are an error's; the traceback's lines as
	// the kernel formats them (with ANSI colours).
	Name      string   `json:"ename,omitempty"`
	Value     string   `json:"evalue,omitempty"`
	Traceback []string `json:"traceback,omitempty"`
	// Reply ends a stream.
	Reply *KernelReply `json:"reply,omitempty"`
}

// KernelReply is how a cell ended.
type KernelReply struct {
	// Status is the kernel's (ok, error, aborted), or timeout.
	Status         string `json:"status"`
	ExecutionCount int    `json:"execution_count,omitempty"`
	// Interrupted: the cell ran past its timeout and was interrupted;
	// Restarted: it did not stop within 3 s, and the kernel was restarted
	// (its state is lost).
	Interrupted bool `json:"interrupted,omitempty"`
	Restarted   bool `json:"restarted,omitempty"`
}

// KernelExecution is the answer of POST /v1/kernels/{id}/execute without
// stream, in the shape of E2B's code interpreter's Execution.
type KernelExecution struct {
	// Results are the cell's display data and its result, in order.
	Results []KernelEvent `json:"results"`
	// Logs are its stdout and stderr, chunk by chunk.
	Logs KernelLogs `json:"logs"`
	// Error is the cell's error, if it raised.
	Error *KernelEvent `json:"error,omitempty"`
	Reply KernelReply  `json:"reply"`
	// Truncated: outputs beyond 16 MiB were dropped (stream them instead).
	Truncated bool `json:"truncated,omitempty"`
}

// KernelLogs are a cell's streams.
type KernelLogs struct {
	Stdout []string `json:"stdout"`
	Stderr []string `json:"stderr"`
}

// Kernel describes a running kernel, in GET /v1/kernels.
type Kernel struct {
	ID  string `json:"id"`
	Pid int    `json:"pid"`
	// Python is the interpreter it runs.
	Python string `json:"python"`
	// RSS is its resident memory, in bytes.
	RSS int64 `json:"rss_bytes"`
}
