package executor

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/cgroup"
	"github.com/bothy-sandbox/bothy/executor/internal/users"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/internal/passwd"
	"github.com/bothy-sandbox/bothy/plugins"
)

// Defaults of Options.
const (
	DefaultMaxOutput      = 16 << 20
	DefaultMaxRetained    = 4 << 20
	DefaultMaxRequestBody = 8 << 20
	DefaultRequestMemory  = 32 << 20
	DefaultOutputMemory   = 32 << 20
	DefaultMaxConns       = 256
	DefaultMaxProcesses   = 1024
	DefaultMaxSessions    = 16
	DefaultWaitDelay      = 500 * time.Millisecond
	DefaultMaxFinished    = 64
	DefaultShell          = "/bin/sh"
	DefaultMaxUpload      = 4 << 30
)

// APIKeyEnv is the environment variable that may carry the API key; it is
// never passed on to processes.
const APIKeyEnv = "BOTHY_API_KEY"

// Version is reported by GET /v1/info; cmd/bothy-executor may set it at
// link time (-X).
var Version = "dev"

// Options configure a Server. The zero value serves without auth, with the
// defaults above, and its own Reaper.
type Options struct {
	// APIKey, when set, is required in the X-Session-API-Key header of every
	// request except GET /alive.
	APIKey string
	// Env is the base environment of started processes (commands,
	// sessions, plugins, the main command); nil is none. The package never
	// reads the executor's own environment: cmd/bothy-executor passes it,
	// without BOTHY_API_KEY.
	Env []string
	// Reaper starts and waits for every process; nil means reap.New with
	// Auto mode (global when PID 1). A Reaper passed in is not closed by
	// the Server.
	Reaper *reap.Reaper
	// MaxOutput caps the captured output per stream (wait mode) and what a
	// request's max_output may ask for.
	MaxOutput int
	// MaxRetained is the output retained per background process when the
	// request does not set max_output.
	MaxRetained int
	// MaxRequestBody caps JSON request bodies (and OpenHands' list_files
	// body); a larger one is refused with 413 before it is read. Large
	// content goes through the streaming routes (PUT /v1/files, uploads,
	// stdin as application/octet-stream), which copy in bounded chunks.
	MaxRequestBody int64
	// RequestMemory bounds the memory that requests in flight may hold at
	// once for JSON bodies, file contents and editor work: each reserves
	// its estimate first and waits its turn while the budget is taken.
	RequestMemory int64
	// OutputMemory bounds the process output retained in memory across
	// processes (wait-mode captures, background output) beyond 4 KiB per
	// stream: output that finds it spent is dropped and reported truncated.
	OutputMemory int64
	// MaxProcesses caps the processes started through the API that are
	// running at once (each costs the executor about 20 KiB).
	MaxProcesses int
	// MaxSessions caps the bash sessions (default included): creating one
	// more is refused with 409.
	MaxSessions int
	// MaxConns caps the connections served at once; further ones wait to
	// be accepted.
	MaxConns int
	// WaitDelay bounds how long output is still read after a process has
	// exited, when a descendant that outlives it keeps its pipes open.
	WaitDelay time.Duration
	// MaxFinished is how many finished background processes are kept for
	// status and output reads; the oldest are forgotten first.
	MaxFinished int
	// Shell runs RunRequest.Cmd as Shell -c Cmd.
	Shell string
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
	// Cwd is the working directory of new bash sessions, and where the
	// OpenHands dialect resolves relative paths when no session has
	// changed directory; empty means the executor's.
	Cwd string
	// NoChangeTimeout is the sessions' default no-change timeout; zero
	// means 10 s (bash.DefaultNoChangeTimeout).
	NoChangeTimeout time.Duration
	// MaxUpload caps an uploaded or written file and an unpacked archive
	// (DefaultMaxUpload, 4 GiB, when zero).
	MaxUpload int64
	// Plugins are the enabled plugins (see package plugins): they serve
	// the OpenHands actions the core does not (Jupyter, browser), the VS
	// Code token, and their own routes under /plugins/NAME/. Each starts
	// on first use, or with the server when EagerPlugins is set or it is
	// named in EagerPluginNames; a start is bounded by PluginStartTimeout
	// (plugin.DefaultStartTimeout when zero).
	Plugins            []plugins.Plugin
	EagerPlugins       bool
	EagerPluginNames   []string
	PluginStartTimeout time.Duration
	// PluginServer is the path of bothy-plugin, in which the plugins whose
	// service links heavy libraries run it (plugins.StartProcess); empty,
	// those plugins are unavailable.
	PluginServer string
	// User is who processes (commands, sessions, the main command) run as
	// unless a request says otherwise: the image's User, or bothy run
	// --user; nil is the executor's own (root). LookupUser resolves the
	// users requests name (users.Lookup when nil).
	User       *passwd.Cred
	LookupUser func(spec string) (*passwd.Cred, error)
	// Cgroup reads the sandbox's cgroup (memory, CPU, I/O, OOM kills);
	// nil means cgroup.Default, the one at /sys/fs/cgroup.
	Cgroup cgroup.Reader
	// NetworkInfo is the file the host writes the sandbox's attached
	// network to, read for /v1/info and /server_info (api.NetworkInfoPath
	// when empty).
	NetworkInfo string
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	setDefault(&o.MaxOutput, DefaultMaxOutput)
	setDefault(&o.MaxRetained, min(DefaultMaxRetained, o.MaxOutput))
	setDefault(&o.MaxRequestBody, DefaultMaxRequestBody)
	setDefault(&o.RequestMemory, DefaultRequestMemory)
	setDefault(&o.OutputMemory, DefaultOutputMemory)
	setDefault(&o.MaxConns, DefaultMaxConns)
	setDefault(&o.MaxProcesses, DefaultMaxProcesses)
	setDefault(&o.MaxSessions, DefaultMaxSessions)
	setDefault(&o.WaitDelay, DefaultWaitDelay)
	setDefault(&o.MaxFinished, DefaultMaxFinished)
	setDefault(&o.MaxUpload, DefaultMaxUpload)
	if o.Shell == "" {
		o.Shell = DefaultShell
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Cgroup == nil {
		o.Cgroup = cgroup.Default
	}
	if o.LookupUser == nil {
		o.LookupUser = users.Lookup
	}
	if o.Env == nil {
		o.Env = []string{} // not nil: os.StartProcess would give the executor's own
	}
	if o.Cwd == "" {
		if wd, err := os.Getwd(); err == nil {
			o.Cwd = wd
		} else {
			o.Cwd = "/"
		}
	}
	return o
}

// setDefault sets *v to def when it is zero or negative.
func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// NoChangeTimeoutEnv is api.NoChangeTimeoutEnv.
const NoChangeTimeoutEnv = api.NoChangeTimeoutEnv

// NoChangeTimeoutFromEnv reads NoChangeTimeoutEnv from env (KEY=VALUE
// entries, the last one winning); ok is false when it is not set.
func NoChangeTimeoutFromEnv(env []string) (d time.Duration, ok bool, err error) {
	val := ""
	for _, kv := range env {
		if v, found := strings.CutPrefix(kv, NoChangeTimeoutEnv+"="); found {
			val, ok = v, true
		}
	}
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(val))
	if err != nil || n < 1 || n > 1e6 {
		return 0, true, fmt.Errorf("%s=%q: want a whole number of seconds from 1 to 1000000", NoChangeTimeoutEnv, val)
	}
	return time.Duration(n) * time.Second, true, nil
}

// LookupUser resolves spec (NAME|UID[:GROUP|GID]) in the sandbox's
// /etc/passwd and /etc/group, and checks that its ids are mapped in the
// executor's user namespace.
func LookupUser(spec string) (*passwd.Cred, error) { return users.Lookup(spec) }
