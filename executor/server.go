package executor

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/cgroup"
	"github.com/bothy-sandbox/bothy/executor/editorserver"
	"github.com/bothy-sandbox/bothy/executor/fileserver"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/info"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
	"github.com/bothy-sandbox/bothy/executor/internal/environ"
	"github.com/bothy-sandbox/bothy/executor/plugin"
	"github.com/bothy-sandbox/bothy/executor/processes"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/executor/sessions"
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

// maxHeaderBytes caps a request's line and headers (a path of PATH_MAX
// bytes, escaped, fits).
const maxHeaderBytes = 32 << 10

// Version is reported by GET /v1/info; cmd/bothy-executor may set it at
// link time (-X).
var Version = "dev"

// Options configure a Server. The zero value serves without auth, with the
// defaults above, and its own Reaper.
type Options struct {
	// APIKey, when set, is required in the X-Session-API-Key header of every
	// request except GET /alive.
	APIKey string
	// Env is the base environment of started processes; nil means the
	// executor's own environment without BOTHY_API_KEY.
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
	// on first use, or with the server when EagerPlugins is set; a start
	// is bounded by PluginStartTimeout (plugin.DefaultStartTimeout when
	// zero).
	Plugins            []plugins.Plugin
	EagerPlugins       bool
	PluginStartTimeout time.Duration
	// Cgroup reads the sandbox's cgroup (memory, CPU, I/O, OOM kills);
	// nil means cgroup.Default, the one at /sys/fs/cgroup.
	Cgroup cgroup.Reader
}

// Route is one entry of the API. Every route the Server answers is in the
// table Routes returns, each service contributing its own.
type Route = httpapi.Route

// Server is the executor's HTTP API.
type Server struct {
	opts    Options
	reaper  *reap.Reaper
	ownReap bool
	env     []string
	log     *slog.Logger
	keyHash [sha256.Size]byte
	auth    bool
	handler http.Handler
	procs   *processes.Service
	active  *activity
	info    *info.Service
	baseCtx context.Context
	cancel  context.CancelFunc
	closing atomic.Bool     // shutting down: no new processes
	reqMem  *budget.Memory  // memory of requests in flight (Options.RequestMemory)
	outMem  *budget.Output  // retained process output (Options.OutputMemory)
	bodies  *httpapi.Bodies // JSON bodies, within reqMem
	cgroup  cgroup.Reader

	cwd      string
	sessions *sessions.Service
	files    *fileserver.Service
	edit     *editorserver.Service
	plugins  *plugin.Host

	closeOnce sync.Once
}

// New returns a Server; Serve it on a listener.
func New(opts Options) (*Server, error) {
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.MaxRetained <= 0 {
		opts.MaxRetained = min(DefaultMaxRetained, opts.MaxOutput)
	}
	if opts.MaxRequestBody <= 0 {
		opts.MaxRequestBody = DefaultMaxRequestBody
	}
	if opts.RequestMemory <= 0 {
		opts.RequestMemory = DefaultRequestMemory
	}
	if opts.OutputMemory <= 0 {
		opts.OutputMemory = DefaultOutputMemory
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.MaxProcesses <= 0 {
		opts.MaxProcesses = DefaultMaxProcesses
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.WaitDelay <= 0 {
		opts.WaitDelay = DefaultWaitDelay
	}
	if opts.MaxFinished <= 0 {
		opts.MaxFinished = DefaultMaxFinished
	}
	if opts.Shell == "" {
		opts.Shell = DefaultShell
	}
	if opts.MaxUpload <= 0 {
		opts.MaxUpload = DefaultMaxUpload
	}
	freer := budget.NewReturner(time.Second)
	s := &Server{opts: opts, log: opts.Logger, active: newActivity(),
		reqMem: budget.NewMemory(opts.RequestMemory, freer.Schedule), outMem: budget.NewOutput(opts.OutputMemory, freer.Schedule),
		cgroup: opts.Cgroup}
	s.bodies = &httpapi.Bodies{Max: opts.MaxRequestBody, Mem: s.reqMem}
	if s.cgroup == nil {
		s.cgroup = cgroup.Default
	}
	if s.log == nil {
		s.log = discardLogger()
	}
	s.env = opts.Env
	if s.env == nil {
		s.env = environ.Without(os.Environ(), APIKeyEnv)
	}
	if opts.APIKey != "" {
		s.auth = true
		s.keyHash = sha256.Sum256([]byte(opts.APIKey))
	}
	s.reaper = opts.Reaper
	if s.reaper == nil {
		r, err := reap.New(reap.Options{})
		if err != nil {
			return nil, fmt.Errorf("start reaper: %w", err)
		}
		s.reaper, s.ownReap = r, true
	}
	procs, err := processes.New(processes.Options{
		Env: s.env, Shell: opts.Shell, MaxOutput: opts.MaxOutput, MaxRetained: opts.MaxRetained,
		MaxProcesses: opts.MaxProcesses, MaxFinished: opts.MaxFinished, WaitDelay: opts.WaitDelay,
		Reaper: s.reaper, Output: s.outMem, Bodies: s.bodies, Cgroup: s.cgroup, Log: s.log,
	})
	if err != nil {
		if s.ownReap {
			s.reaper.Close()
		}
		return nil, err
	}
	s.procs = procs
	s.cwd = opts.Cwd
	if s.cwd == "" {
		if s.cwd, err = os.Getwd(); err != nil {
			s.cwd = "/"
		}
	}
	s.sessions = sessions.New(sessions.Options{
		Cwd: s.cwd, Env: s.env, NoChangeTimeout: opts.NoChangeTimeout, MaxSessions: opts.MaxSessions,
		Reaper: s.reaper, Bodies: s.bodies, Cgroup: s.cgroup,
	})
	s.files = fileserver.New(fileserver.Options{MaxUpload: opts.MaxUpload, Bodies: s.bodies, Log: s.log})
	s.edit = editorserver.New(s.cwd, s.bodies)
	s.plugins, err = plugin.New(opts.Plugins, plugin.Options{
		Env:   plugins.Env{Cwd: s.cwd, Environ: s.env, Reaper: s.reaper, Log: s.log},
		Eager: opts.EagerPlugins, StartTimeout: opts.PluginStartTimeout, Reserved: coreActions,
	})
	if err != nil {
		s.sessions.Close()
		s.procs.Close()
		if s.ownReap {
			s.reaper.Close()
		}
		return nil, err
	}
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	s.info = info.New(info.Options{
		Version: Version, Reaper: s.reaper.Mode().String(), Activity: s.active,
		Processes: s.procs, Plugins: s.plugins, Cgroup: s.cgroup,
	})
	s.handler = s.buildHandler()
	return s, nil
}

// Reaper returns the Reaper through which every process must be started.
func (s *Server) Reaper() *reap.Reaper { return s.reaper }

// Handler returns the HTTP handler of the API (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Routes returns the route table.
func (s *Server) Routes() []Route { return s.routes() }

// routes lists every route of the API: the native API under /v1, then the
// OpenHands dialect.
func (s *Server) routes() []Route {
	rts := s.info.Routes()
	rts = append(rts, s.procs.Routes()...)
	rts = append(rts, s.sessions.Routes()...)
	rts = append(rts, s.files.Routes()...)
	rts = append(rts, s.edit.Routes()...)
	rts = append(rts, []Route{
		{Method: "POST", Path: "/execute_action", Summary: "OpenHands: execute an action, answer its observation", Handler: s.handleExecuteAction},
		{Method: "POST", Path: "/upload_file", Summary: "OpenHands: upload a file, or a zip unpacked when recursive", Handler: s.handleUploadFile},
		{Method: "GET", Path: "/download_files", Summary: "OpenHands: download a directory as zip (a file as itself)", Handler: s.handleDownloadFiles},
		{Method: "POST", Path: "/list_files", Summary: "OpenHands: names in a directory, directories first", Handler: s.handleListFiles},
		{Method: "GET", Path: "/vscode/connection_token", Quiet: true, Summary: "OpenHands: the VS Code connection token (null without the plugin)", Handler: s.handleVSCodeToken},
	}...)
	return append(rts, s.plugins.Routes()...)
}

func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	allow := map[string][]string{}
	var paths []string
	for _, rt := range s.routes() {
		if rt.Method == "" { // every method: a plugin's prefix
			mux.Handle(rt.Path, s.wrap(rt))
			continue
		}
		mux.Handle(rt.Method+" "+rt.Path, s.wrap(rt))
		if _, ok := allow[rt.Path]; !ok {
			paths = append(paths, rt.Path)
		}
		allow[rt.Path] = append(allow[rt.Path], rt.Method)
	}
	// The bare ServeMux answers 404 and 405 in plain text: answer them in
	// JSON (still behind auth, so the API surface is not probed for free).
	for _, p := range paths {
		methods := strings.Join(allow[p], ", ")
		mux.Handle(p, s.wrap(Route{Path: p, Handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", methods)
			httpapi.WriteError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed,
				fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, p, methods))
		}}))
	}
	mux.Handle("/", s.wrap(Route{Path: "/", Handler: func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, http.StatusNotFound, api.CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
	}}))
	return mux
}

// wrap adds auth, activity tracking and panic recovery to a route.
func (s *Server) wrap(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.Public && s.auth && !s.authorized(r) {
			httpapi.WriteError(w, http.StatusForbidden, api.CodeForbidden, "missing or wrong "+api.APIKeyHeader)
			return
		}
		if !rt.Quiet {
			s.active.touch()
			defer s.active.touch()
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
				httpapi.WriteError(w, http.StatusInternalServerError, api.CodeInternal, "internal error")
			}
		}()
		rt.Handler(w, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	got := sha256.Sum256([]byte(r.Header.Get(api.APIKeyHeader)))
	return subtle.ConstantTimeCompare(got[:], s.keyHash[:]) == 1
}

// activity tracks when the server started and when a request that counts
// as activity last began or ended.
type activity struct {
	started time.Time
	last    atomic.Int64 // unix nanos
}

func newActivity() *activity {
	a := &activity{started: time.Now()}
	a.last.Store(a.started.UnixNano())
	return a
}

func (a *activity) touch()                { a.last.Store(time.Now().UnixNano()) }
func (a *activity) Started() time.Time    { return a.started }
func (a *activity) LastActive() time.Time { return time.Unix(0, a.last.Load()) }

// Info gathers what GET /v1/info answers.
func (s *Server) Info() *api.Info { return s.info.Info() }

// Serve answers on ln until ctx is done or Close is called, then stops
// accepting, gives open requests a moment and closes them. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Each connection costs memory (buffers, a goroutine, its headers):
	// their number and their headers are capped, and idle ones closed.
	ln = netutil.LimitListener(ln, s.opts.MaxConns)
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return s.baseCtx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	case <-s.baseCtx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// Close kills every process the Server started (process groups, SIGKILL),
// ends the requests in flight and releases the Server's resources. It does
// not wait for the kills to be reaped.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.plugins.Close()
		s.procs.Close()
		s.sessions.Close()
		if s.ownReap {
			s.reaper.Close()
		}
	})
	return nil
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// StartMain starts the sandbox's main command (see processes.StartMain)
// with its stdout and stderr appended to logPath, the executor's own when
// logPath is empty. Its state is reported in GET /v1/info; MainDone is
// closed when it exits.
func (s *Server) StartMain(argv []string, logPath string) error {
	if logPath == "" {
		return s.procs.StartMain(argv, os.Stdout, os.Stderr)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return fmt.Errorf("create main log directory: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open main log: %w", err)
	}
	defer f.Close() // the child has its own copy
	return s.procs.StartMain(argv, f, f)
}

// StartMainFile is StartMain with stdout and stderr going to out, a file
// the executor was handed (bothy opens the main log on the host, in the
// sandbox's state directory, and passes it down: --main-log-fd).
func (s *Server) StartMainFile(argv []string, out *os.File) error {
	return s.procs.StartMain(argv, out, out)
}

// MainDone returns a channel closed when the main command has exited, and
// nil when there is none.
func (s *Server) MainDone() <-chan struct{} { return s.procs.MainDone() }

// MainStatus returns the main command's exit status once it has exited.
func (s *Server) MainStatus() (reap.Status, bool) { return s.procs.MainStatus() }
