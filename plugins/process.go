package plugins

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/proc"
)

// A plugin whose service links heavy libraries (a DevTools client, ZMQ) runs
// it in bothy-plugin, a process of its own that the executor starts on the
// plugin's first use: the executor, which every sandbox starts, then loads
// none of them (linked in, they cost each of its starts about 1 ms). The
// plugin's package keeps what the executor needs to know (name, recipe,
// actions, routes) and its Start calls StartProcess; the service's package
// registers it with RegisterServer and is linked into bothy-plugin only.
// internal/ipc describes the contract.

// DefaultServer is where bothy mounts bothy-plugin in a sandbox.
const DefaultServer = "/.bothy/bin/bothy-plugin"

// Routes of a plugin process besides the service's own.
const (
	executePath = "/.bothy-plugin/execute"
	// workingDirHeader carries Env.WorkingDir to the plugin process with
	// each request.
	workingDirHeader = "X-Bothy-Working-Dir"
)

// closeGrace is how long Close waits for the plugin process to close its
// service and exit before it kills it.
const closeGrace = 10 * time.Second

// ServerFunc starts a plugin's service; in bothy-plugin, its Env has the
// plugin process's working directory, environment and a reaper of its own.
type ServerFunc func(ctx context.Context, env Env) (Service, error)

var servers = map[string]ServerFunc{}

// RegisterServer makes the service of the named plugin known to
// bothy-plugin; the service's package calls it in its init. It panics on a
// name taken twice.
func RegisterServer(name string, start ServerFunc) {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := servers[name]; ok {
		panic(fmt.Sprintf("plugin %s: server registered twice", name))
	}
	servers[name] = start
}

// StartProcess starts the named plugin's service in bothy-plugin
// (env.Server), through env.Reaper, and returns once it serves, or with the
// error of its start: one wrapping ErrUnavailable when the plugin cannot run
// here. ctx bounds the start: when it ends first, the process is killed.
func StartProcess(ctx context.Context, env Env, name string) (Service, error) {
	if env.Server == "" || env.Reaper == nil {
		return nil, fmt.Errorf("%w: this executor runs no bothy-plugin, which plugin %s's service runs in", ErrUnavailable, name)
	}
	if _, err := os.Stat(env.Server); err != nil {
		return nil, fmt.Errorf("%w: plugin %s runs in bothy-plugin, which this sandbox lacks (bothy mounts the host's, from beside bothy-executor, where a plugin is enabled): %v", ErrUnavailable, name, err)
	}
	dir, err := os.MkdirTemp("", "bothy-plugin-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s, err := startProcess(ctx, env, name, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func startProcess(ctx context.Context, env Env, name, dir string) (*processService, error) {
	sock := filepath.Join(dir, "api.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	ln.SetUnlinkOnClose(false) // the process serves it
	lnFile, err := ln.File()
	ln.Close()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// The child's ends, closed here once it has them.
	var theirs []*os.File
	defer func() {
		for _, f := range theirs {
			f.Close()
		}
	}()
	theirs = append(theirs, lnFile)
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer readyR.Close()
	theirs = append(theirs, readyW)
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	theirs = append(theirs, stdinR)
	logR, logW, err := os.Pipe()
	if err != nil {
		stdinW.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	theirs = append(theirs, logW)
	cmd := exec.Command(env.Server, name)
	cmd.Dir, cmd.Env = env.Cwd, env.Environ
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, logW, logW
	cmd.ExtraFiles = []*os.File{lnFile, readyW} // ipc.PluginListenFD, ipc.PluginReadyFD
	proc, err := env.Reaper.Start(cmd)
	for _, f := range theirs {
		f.Close()
	}
	theirs = nil
	if err != nil {
		stdinW.Close()
		logR.Close()
		return nil, fmt.Errorf("start %s: %w", env.Server, err)
	}
	s := &processService{name: name, proc: proc, stdin: stdinW, dir: dir, workingDir: env.WorkingDir, log: &logTail{}}
	s.logDone = make(chan struct{})
	go s.log.copy(logR, env.Log, name, s.logDone)
	s.transport = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 16,
	}
	s.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "plugin"
			pr.Out.Header.Del(api.APIKeyHeader)
			s.setWorkingDir(pr.Out.Header)
		},
		Transport:     s.transport,
		FlushInterval: -1, // streamed answers (a cell's outputs) as they come
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			httpapi.WriteError(w, http.StatusBadGateway, api.CodeInternal, s.failure(err).Error())
		},
	}

	type result struct {
		ready ipc.PluginReady
		err   error
	}
	res := make(chan result, 1)
	go func() {
		var r result
		_, r.err = ipc.Receive(readyR, &r.ready)
		res <- r
	}()
	var r result
	select {
	case r = <-res:
	case <-ctx.Done():
		s.kill()
		return nil, fmt.Errorf("start %s: %w", name, ctx.Err())
	}
	switch {
	case r.err != nil:
		s.kill()
		return nil, fmt.Errorf("start %s: %w", name, s.failure(r.err))
	case r.ready.Error != "":
		s.kill()
		if r.ready.Unavailable {
			return nil, fmt.Errorf("%w: %s", ErrUnavailable, r.ready.Error)
		}
		return nil, errors.New(r.ready.Error)
	}
	return s, nil
}

// processService is the Service of a plugin process, seen from the executor.
type processService struct {
	name       string
	proc       *reap.Proc
	stdin      *os.File // held open while the process should live
	dir        string   // its socket's
	workingDir func() string
	transport  *http.Transport
	proxy      *httputil.ReverseProxy
	log        *logTail
	logDone    chan struct{}
	closeOnce  sync.Once
}

func (s *processService) setWorkingDir(h http.Header) {
	h.Del(workingDirHeader)
	if s.workingDir != nil {
		if d := s.workingDir(); d != "" {
			h.Set(workingDirHeader, d)
		}
	}
}

// failure is err, or why the plugin process is gone when it is, with the
// end of its log.
func (s *processService) failure(err error) error {
	select {
	case <-s.proc.Done():
	case <-time.After(100 * time.Millisecond):
		return err
	}
	st, _ := s.proc.Status()
	s.waitLog()
	return fmt.Errorf("plugin %s's process (bothy-plugin) ended, %s; its log: %s", s.name, describe(st), s.log.String())
}

// describe says how a process ended.
func describe(st reap.Status) string {
	if st.Exited {
		return fmt.Sprintf("exit status %d", st.ExitCode)
	}
	return "killed by " + st.Signal.String()
}

// Execute asks the plugin process to run a.
func (s *processService) Execute(ctx context.Context, a *api.Action) (*api.Observation, error) {
	body, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://plugin"+executePath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	s.setWorkingDir(req.Header)
	resp, err := s.transport.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.failure(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Message == "" {
			return nil, fmt.Errorf("plugin %s: %s: %s", s.name, resp.Status, bytes.TrimSpace(b))
		}
		err := errors.New(e.Error.Message)
		if e.Error.Code == api.CodeBadRequest {
			// The action's fault, as the service said in-process.
			return nil, httpapi.BadRequest(err)
		}
		return nil, err
	}
	var obs api.Observation
	if err := json.NewDecoder(resp.Body).Decode(&obs); err != nil {
		return nil, s.failure(fmt.Errorf("read its observation: %w", err))
	}
	return &obs, nil
}

// Handler forwards the plugin's routes to the plugin process.
func (s *processService) Handler() http.Handler { return s.proxy }

// PIDs are the plugin process and its live descendants: the processes its
// service runs (a kernel, Chromium's tree).
func (s *processService) PIDs() []int { return proc.Tree(s.proc.Pid) }

// Close has the plugin process close its service and exit (its stdin
// ends), and kills it if it has not within closeGrace.
func (s *processService) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.stdin.Close()
		select {
		case <-s.proc.Done():
		case <-time.After(closeGrace):
			err = fmt.Errorf("plugin %s's process did not exit within %v of its close: killed", s.name, closeGrace)
			_ = s.proc.Signal(syscall.SIGKILL)
			<-s.proc.Done()
		}
		s.transport.CloseIdleConnections()
		os.RemoveAll(s.dir)
	})
	return err
}

// kill ends a process whose start failed.
func (s *processService) kill() {
	s.stdin.Close()
	_ = s.proc.Signal(syscall.SIGKILL)
	<-s.proc.Done()
	s.waitLog()
}

// waitLog waits a moment for the end of the plugin process's log: its last
// words, unless a process it left holds the pipe.
func (s *processService) waitLog() {
	select {
	case <-s.logDone:
	case <-time.After(time.Second):
	}
}

// logTail forwards a plugin process's log to the executor's, line by line,
// and keeps its last lines for error messages.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

const tailLines = 20

func (t *logTail) copy(r *os.File, log *slog.Logger, name string, done chan<- struct{}) {
	defer close(done)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		t.mu.Lock()
		if len(t.lines) == tailLines {
			t.lines = t.lines[1:]
		}
		t.lines = append(t.lines, line)
		t.mu.Unlock()
		if log != nil {
			log.Info(line, "plugin", name)
		}
	}
}

func (t *logTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return "(empty)"
	}
	return strings.Join(t.lines, "\n")
}

// ServeProcess is bothy-plugin's main: it serves the service of the plugin
// named by its one argument, as StartProcess asks (internal/ipc), until its
// stdin ends or it gets SIGTERM, and returns its exit code.
func ServeProcess(args []string) int {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(os.Stderr, "usage: bothy-plugin PLUGIN\n\nRuns the service of a plugin for the executor that starts it (internal/ipc, \"Plugin process\"); not for use by hand.")
		return 2
	}
	name := args[0]
	ready := os.NewFile(ipc.PluginReadyFD, "ready")
	lnFile := os.NewFile(ipc.PluginListenFD, "listen")
	if ready == nil || lnFile == nil {
		fmt.Fprintln(os.Stderr, "bothy-plugin: no listening socket and ready pipe: it is started by the executor")
		return 2
	}
	syscall.CloseOnExec(ipc.PluginReadyFD)
	syscall.CloseOnExec(ipc.PluginListenFD)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	svc, err := startServer(name, lnFile, log)
	if err != nil {
		r := ipc.PluginReady{Error: err.Error(), Unavailable: errors.Is(err, ErrUnavailable)}
		if err := ipc.Send(ready, r); err != nil {
			log.Error("report the start", "err", err)
		}
		ready.Close()
		return 1
	}
	defer svc.close()
	if err := ipc.Send(ready, ipc.PluginReady{}); err != nil {
		log.Error("report the start", "err", err)
		return 1
	}
	ready.Close()
	<-svc.ctx.Done()
	return 0
}

// served is a service running in bothy-plugin.
type served struct {
	svc    Service
	srv    *http.Server
	reaper *reap.Reaper
	ctx    context.Context // ends when the executor is gone or asks for the end
	stop   context.CancelFunc
}

func startServer(name string, lnFile *os.File, log *slog.Logger) (*served, error) {
	mu.Lock()
	start, ok := servers[name]
	mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: this bothy-plugin has no service for plugin %q", ErrUnavailable, name)
	}
	ln, err := net.FileListener(lnFile)
	lnFile.Close()
	if err != nil {
		return nil, fmt.Errorf("start %s: its socket: %w", name, err)
	}
	r, err := reap.New(reap.Options{Mode: reap.PerProcess})
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &served{reaper: r}
	s.ctx, s.stop = signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		s.stop() // the executor closed its end, or is gone
	}()
	cwd, _ := os.Getwd()
	var wd atomic.Value
	wd.Store(cwd)
	env := Env{
		Cwd: cwd, Environ: os.Environ(), Reaper: r, Log: log,
		WorkingDir: func() string { return wd.Load().(string) },
	}
	s.svc, err = start(s.ctx, env)
	if err == nil && s.svc == nil {
		err = fmt.Errorf("start %s: no service", name)
	}
	if err != nil {
		ln.Close()
		r.Close()
		s.stop()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+executePath, func(w http.ResponseWriter, req *http.Request) {
		var a api.Action
		if err := json.NewDecoder(req.Body).Decode(&a); err != nil {
			httpapi.Error(w, httpapi.BadRequest(err))
			return
		}
		obs, err := s.svc.Execute(req.Context(), &a)
		if err != nil {
			httpapi.Error(w, err) // a bad action's status goes back with it
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(obs)
	})
	if h := s.svc.Handler(); h != nil {
		mux.Handle("/", h)
	}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if d := req.Header.Get(workingDirHeader); d != "" {
				wd.Store(d)
			}
			mux.ServeHTTP(w, req)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *served) close() {
	s.stop()
	_ = s.srv.Close()
	_ = s.svc.Close()
	_ = s.reaper.Close()
}
