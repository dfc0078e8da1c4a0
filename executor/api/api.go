package api

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// APIKeyHeader carries the session API key on every request except /alive.
const APIKeyHeader = "X-Session-API-Key"

// Version is the version of the native API served under /v1.
const Version = "v1"

// Process modes, as reported in Process.Mode.
const (
	ModeWait       = "wait"       // POST /v1/processes with "wait": true
	ModeStream     = "stream"     // POST /v1/processes with "stream": true
	ModeBackground = "background" // POST /v1/processes with neither
)

// Event types of streamed output.
const (
	EventStart  = "start"  // first event of a streamed run: ID and PID
	EventStdout = "stdout" // a chunk of standard output
	EventStderr = "stderr" // a chunk of standard error
	EventExit   = "exit"   // last event: the exit status
	EventError  = "error"  // the stream failed; Error says why (last event)
)

// Alive is the body of GET /alive.
type Alive struct {
	Status string `json:"status"` // always "ok": the socket answers
	// Starting names the plugins still starting (their actions wait for
	// them); absent once every plugin is ready.
	Starting []string `json:"starting,omitempty"`
	// Plugins is the state of each enabled plugin; absent when none is.
	Plugins []PluginState `json:"plugins,omitempty"`
}

// States of a plugin.
const (
	PluginStopped     = "stopped"     // enabled, not started yet: it starts on first use
	PluginStarting    = "starting"    // its actions wait for it
	PluginRunning     = "running"     // serving
	PluginFailed      = "failed"      // its start failed; Error says why
	PluginUnavailable = "unavailable" // it cannot run here (not in this build, or its recipe is not installed); Error says why
)

// PluginState is the state of an enabled plugin, in GET /alive and
// GET /server_info.
type PluginState struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// RSS is the resident memory of the processes the plugin runs, in
	// bytes, once it runs (absent before, and for a plugin that does not
	// report its processes).
	RSS *int64 `json:"rss_bytes,omitempty"`
	// Port is the TCP port the plugin's service listens on in the
	// sandbox (VS Code's), for a plugin that has one: published (bothy
	// run -p PORT), it is where the host reaches the service.
	Port int `json:"port,omitempty"`
}

// RunRequest is the body of POST /v1/processes. Exactly one of Argv and Cmd
// is set. Wait and Stream are exclusive; with neither, the process runs in
// the background and the response is a Process.
type RunRequest struct {
	// Argv is the command and its arguments; Argv[0] without a slash is
	// looked up in PATH (of the merged environment).
	Argv []string `json:"argv,omitempty"`
	// Cmd is a shell command line run with /bin/sh -c.
	Cmd string `json:"cmd,omitempty"`
	// Env is merged onto the executor's environment (values replace).
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the working directory; empty means the executor's.
	Cwd string `json:"cwd,omitempty"`
	// User runs the process as NAME|UID[:GROUP|GID], resolved in the
	// sandbox's /etc/passwd and /etc/group; "root" (or "0") as the
	// executor itself. Empty: the sandbox's default user (the image's
	// User, or bothy run --user), else root.
	User string `json:"user,omitempty"`
	// Timeout in seconds; at the deadline the whole process group is
	// killed with SIGKILL and TimedOut is reported. Zero means none.
	Timeout float64 `json:"timeout,omitempty"`
	// Stdin (text) or StdinB64 (bytes) is written to the process's
	// standard input, which is then closed unless StdinOpen is set.
	// Without either, stdin is /dev/null unless StdinOpen is set.
	Stdin    string `json:"stdin,omitempty"`
	StdinB64 []byte `json:"stdin_b64,omitempty"`
	// StdinOpen keeps standard input open as a pipe written with
	// POST /v1/processes/{id}/stdin (stream and background modes).
	StdinOpen bool `json:"stdin_open,omitempty"`
	// Wait runs the process to completion and answers a RunResult.
	Wait bool `json:"wait,omitempty"`
	// Stream answers a stream of Events (NDJSON, or SSE when the request
	// accepts text/event-stream) ending with an exit event.
	Stream bool `json:"stream,omitempty"`
	// MaxOutput caps the captured bytes per output stream (wait mode) or
	// the retained output (background mode); zero means the server's
	// default (16 MiB and 4 MiB), values over the server's cap are lowered
	// to it.
	MaxOutput int `json:"max_output,omitempty"`
}

// Mode reports the mode the request asks for.
func (r *RunRequest) Mode() string {
	switch {
	case r.Wait:
		return ModeWait
	case r.Stream:
		return ModeStream
	default:
		return ModeBackground
	}
}

// StdinBytes returns the initial standard input, whichever form it came in.
func (r *RunRequest) StdinBytes() []byte {
	if r.StdinB64 != nil {
		return r.StdinB64
	}
	if r.Stdin != "" {
		return []byte(r.Stdin)
	}
	return nil
}

// Validate checks the request for contradictions and values the kernel
// would refuse. It does not check that the command exists.
func (r *RunRequest) Validate() error {
	switch {
	case len(r.Argv) == 0 && r.Cmd == "":
		return errors.New("one of argv and cmd is required")
	case len(r.Argv) > 0 && r.Cmd != "":
		return errors.New("argv and cmd are exclusive")
	case len(r.Argv) > 0 && r.Argv[0] == "":
		return errors.New("argv[0] is empty")
	case r.Wait && r.Stream:
		return errors.New("wait and stream are exclusive")
	case r.Wait && r.StdinOpen:
		return errors.New("stdin_open needs stream or background mode")
	case r.Stdin != "" && r.StdinB64 != nil:
		return errors.New("stdin and stdin_b64 are exclusive")
	case r.Timeout < 0 || r.Timeout != r.Timeout || r.Timeout > 1e9:
		return fmt.Errorf("timeout %v out of range", r.Timeout)
	case r.MaxOutput < 0:
		return fmt.Errorf("max_output %d is negative", r.MaxOutput)
	}
	for i, a := range r.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("argv[%d] contains a NUL byte", i)
		}
	}
	if strings.IndexByte(r.Cmd, 0) >= 0 {
		return errors.New("cmd contains a NUL byte")
	}
	if strings.IndexByte(r.Cwd, 0) >= 0 {
		return errors.New("cwd contains a NUL byte")
	}
	for k, v := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env name %q is invalid", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("env %s contains a NUL byte", k)
		}
	}
	return nil
}

// TimeoutDuration converts Timeout to a duration (zero means none).
func (r *RunRequest) TimeoutDuration() time.Duration {
	return time.Duration(r.Timeout * float64(time.Second))
}

// RunResult is the answer to a RunRequest with Wait set.
//
// ExitCode follows the shell: the exit status, or 128+n when the process
// was killed by signal n (then Signal names it, e.g. "SIGKILL").
// Output that is valid UTF-8 is in Stdout/Stderr; otherwise it is in
// StdoutB64/StderrB64 (base64) and the text field is empty. Output over the
// cap keeps its head and tail around a marker line
// "\n[... bothy: N bytes truncated ...]\n" and sets *Truncated.
type RunResult struct {
	ID              string  `json:"id,omitempty"`
	PID             int     `json:"pid"`
	ExitCode        int     `json:"exit_code"`
	Signal          string  `json:"signal,omitempty"`
	TimedOut        bool    `json:"timed_out"`
	OOMKilled       bool    `json:"oom_killed,omitempty"`
	Stdout          string  `json:"stdout"`
	StdoutB64       []byte  `json:"stdout_b64,omitempty"`
	StdoutTruncated bool    `json:"stdout_truncated,omitempty"`
	Stderr          string  `json:"stderr"`
	StderrB64       []byte  `json:"stderr_b64,omitempty"`
	StderrTruncated bool    `json:"stderr_truncated,omitempty"`
	DurationMS      float64 `json:"duration_ms"`
}

// StdoutBytes returns standard output, whichever form it came in.
func (r *RunResult) StdoutBytes() []byte { return pick(r.Stdout, r.StdoutB64) }

// StderrBytes returns standard error, whichever form it came in.
func (r *RunResult) StderrBytes() []byte { return pick(r.Stderr, r.StderrB64) }

func pick(s string, b []byte) []byte {
	if b != nil {
		return b
	}
	return []byte(s)
}

// Process describes a process started through POST /v1/processes. It is the
// answer to a background start (201), to GET/DELETE /v1/processes/{id} and
// to POST /v1/processes/{id}/wait and /signal.
type Process struct {
	ID         string     `json:"id"`
	PID        int        `json:"pid"`
	Mode       string     `json:"mode"`
	Argv       []string   `json:"argv,omitempty"`
	Cmd        string     `json:"cmd,omitempty"`
	Cwd        string     `json:"cwd,omitempty"`
	Running    bool       `json:"running"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// ExitCode is set once the process has exited (shell convention, see
	// RunResult).
	ExitCode  *int   `json:"exit_code,omitempty"`
	Signal    string `json:"signal,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	OOMKilled bool   `json:"oom_killed,omitempty"`
	StdinOpen bool   `json:"stdin_open"`
	// OutputBytes is the offset just past the last output byte (stdout and
	// stderr together) of a background process.
	OutputBytes int64 `json:"output_bytes"`
}

// ProcessList is the body of GET /v1/processes.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// Event is one line of a streamed run (POST /v1/processes with stream) or
// of GET /v1/processes/{id}/output.
//
// Output events (stdout, stderr) carry Data (UTF-8 text) or B64 (bytes that
// are not valid UTF-8, base64) and Offset, the position of their first byte
// in the process's combined output; the next byte's offset is Offset plus
// the chunk length. The exit event carries the exit status and, in Offset,
// the end of the output. The start event carries ID and PID.
type Event struct {
	Type      string `json:"type"`
	ID        string `json:"id,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Offset    int64  `json:"offset"`
	Data      string `json:"data,omitempty"`
	B64       []byte `json:"b64,omitempty"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Signal    string `json:"signal,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	OOMKilled bool   `json:"oom_killed,omitempty"`
	Error     *Error `json:"error,omitempty"`
}

// Bytes returns an output event's payload, whichever form it came in.
func (e *Event) Bytes() []byte { return pick(e.Data, e.B64) }

// StdinRequest is the JSON body of POST /v1/processes/{id}/stdin. (The
// route also takes raw bytes with Content-Type application/octet-stream and
// ?close=1.)
type StdinRequest struct {
	Data  string `json:"data,omitempty"`
	B64   []byte `json:"b64,omitempty"`
	Close bool   `json:"close,omitempty"`
}

// StdinResult is the answer to POST /v1/processes/{id}/stdin.
type StdinResult struct {
	Written int  `json:"written"`
	Closed  bool `json:"closed"`
}

// SignalRequest is the body of POST /v1/processes/{id}/signal. Signal is a
// name ("SIGINT", "INT") or a number ("2"). Group (default true) signals the
// whole process group, as a terminal does for Ctrl-C.
type SignalRequest struct {
	Signal string `json:"signal"`
	Group  *bool  `json:"group,omitempty"`
}

// Info is the body of GET /v1/info.
type Info struct {
	Version       string    `json:"version"`
	API           string    `json:"api"`
	PID           int       `json:"pid"`
	Hostname      string    `json:"hostname"`
	User          User      `json:"user"`
	CPUs          int       `json:"cpus"`
	CPU           CPU       `json:"cpu"`
	StartedAt     time.Time `json:"started_at"`
	UptimeSeconds float64   `json:"uptime_seconds"`
	// IdleSeconds is the time since the last request other than
	// GET /alive and GET /v1/info began or ended.
	IdleSeconds float64 `json:"idle_seconds"`
	Memory      Memory  `json:"memory"`
	Disk        Disk    `json:"disk"`
	// Processes counts the running processes started through the API.
	Processes int `json:"processes"`
	// Reaper is "global" (the executor owns every wait: PID 1 or
	// subreaper) or "per-process".
	Reaper string    `json:"reaper"`
	Main   *MainInfo `json:"main,omitempty"`
	// Network is the sandbox's attached network (bridge, pasta,
	// slirp4netns) as the host set it up: absent on none and host.
	Network *NetworkInfo `json:"network,omitempty"`
}

// NetworkInfoPath is where the host puts the sandbox's NetworkInfo, read
// only, for the executor to report: written before the executor starts.
const NetworkInfoPath = "/.bothy/network.json"

// NetworkInfo is the sandbox's attached network: its address and what the
// host publishes of it, so that an agent can tell its user the URL.
type NetworkInfo struct {
	// Mode is the --network mode (bridge, bridge:NAME, pasta, slirp4netns).
	Mode string `json:"mode"`
	// Driver is what attaches it: bridge, pasta or slirp4netns.
	Driver string `json:"driver"`
	// Address is the sandbox's, with its prefix length.
	Address string `json:"address,omitempty"`
	Gateway string `json:"gateway,omitempty"`
	// Ports are the published ports.
	Ports []PublishedPort `json:"ports,omitempty"`
}

// PublishedPort is a port of the sandbox published on the host:
// HostIP:HostPort reaches ContainerPort.
type PublishedPort struct {
	HostIP        string `json:"host_ip"`
	HostPort      int    `json:"host_port"`
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol"`
}

// User is the identity the executor runs as.
type User struct {
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Name string `json:"name,omitempty"`
	Home string `json:"home,omitempty"`
}

// Memory is the sandbox's memory use. Source says where it was read:
// "cgroup2" (memory.current, memory.max), "cgroup1" (memory.usage_in_bytes,
// memory.limit_in_bytes) or "meminfo" (/proc/meminfo: used = total -
// available). LimitBytes is zero when there is no limit.
type Memory struct {
	Source         string `json:"source"`
	UsedBytes      uint64 `json:"used_bytes"`
	LimitBytes     uint64 `json:"limit_bytes,omitempty"`
	TotalBytes     uint64 `json:"total_bytes,omitempty"`
	AvailableBytes uint64 `json:"available_bytes,omitempty"`
}

// CPU is the sandbox's processor use. Source says where it was read:
// "cgroup2" (cpu.stat usage_usec, cpu.max), "cgroup1" (cpuacct.usage,
// cpu.cfs_quota_us / cpu.cfs_period_us) or "proc" (/proc/stat: the whole
// machine). LimitCPUs is the quota in CPUs (1.5 = one and a half), zero
// when there is none.
type CPU struct {
	Source       string  `json:"source"`
	UsageSeconds float64 `json:"usage_seconds"`
	LimitCPUs    float64 `json:"limit_cpus,omitempty"`
}

// Disk is the statfs of a path (the root of the sandbox).
type Disk struct {
	Path           string `json:"path"`
	TotalBytes     uint64 `json:"total_bytes"`
	FreeBytes      uint64 `json:"free_bytes"`
	AvailableBytes uint64 `json:"available_bytes"`
}

// MainInfo is the state of the main command given to bothy-executor after
// "--".
type MainInfo struct {
	PID        int        `json:"pid"`
	Argv       []string   `json:"argv"`
	Running    bool       `json:"running"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Signal     string     `json:"signal,omitempty"`
	// Restarts is how many times the restart policy restarted it.
	Restarts int `json:"restarts,omitempty"`
}

// ParseRestart parses a restart policy for the main command: "no" (or
// empty), "on-failure" (restart without limit when it fails) or
// "on-failure:N" (at most N restarts).
func ParseRestart(s string) (onFailure bool, max int, err error) {
	switch {
	case s == "" || s == "no":
		return false, 0, nil
	case s == "on-failure":
		return true, 0, nil
	case strings.HasPrefix(s, "on-failure:"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, "on-failure:"))
		if err != nil || n < 1 || n > 1<<20 {
			return false, 0, fmt.Errorf("invalid restart policy %q: the count must be a positive number", s)
		}
		return true, n, nil
	}
	return false, 0, fmt.Errorf("invalid restart policy %q: want no, on-failure or on-failure:N", s)
}
