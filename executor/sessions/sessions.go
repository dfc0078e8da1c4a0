// Package sessions is the executor's sessions service: the /v1/sessions
// routes over persistent bash sessions (package executor/bash, which
// runs the shell and splits and checks commands), "default" created on
// first use; and, for the OpenHands dialect, Run (a command in a named
// session) and RunStatic (a command in a fresh shell). A command that
// dies of SIGKILL while the sandbox's OOM-kill count rises is reported
// OOM-killed.
package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/bash"
	"github.com/bothy-sandbox/bothy/executor/cgroup"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/environ"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/internal/passwd"
)

// Options configure the sessions service.
type Options struct {
	// Cwd is the working directory of new sessions.
	Cwd string
	// Env is the base environment (sessions add sessionDefaults).
	Env []string
	// NoChangeTimeout is the sessions' default no-change timeout; zero
	// means bash.DefaultNoChangeTimeout.
	NoChangeTimeout time.Duration
	// MaxSessions caps the sessions (default included).
	MaxSessions int
	// Reaper starts the shells and owns their waits.
	Reaper *reap.Reaper
	// Bodies reads JSON bodies.
	Bodies *httpapi.Bodies
	// Cgroup tells OOM kills.
	Cgroup cgroup.Reader
	// User is who the shells run as (nil: the executor's user).
	User *passwd.Cred
}

// Service keeps bash sessions.
type Service struct {
	opts    Options
	mgr     *bash.Manager
	meta    sync.Map      // *bash.Session → time.Time of creation
	mu      sync.Mutex    // serializes session creation against MaxSessions
	static  chan struct{} // OpenHands' is_static shells running at once
	closing atomic.Bool   // no new sessions
}

// New returns the sessions service.
func New(opts Options) *Service {
	return &Service{
		opts: opts,
		mgr: bash.NewManager(bash.Options{
			Cwd:             opts.Cwd,
			Env:             sessionEnv(opts.Env),
			NoChangeTimeout: opts.NoChangeTimeout,
			MaxBuffer:       sessionMaxBuffer,
			Reaper:          opts.Reaper,
			Cred:            opts.User,
		}),
		static: make(chan struct{}, maxStaticSessions),
	}
}

// Routes lists the routes of the service.
func (s *Service) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: "GET", Path: "/v1/sessions", Summary: "list bash sessions", Handler: s.handleList},
		{Method: "POST", Path: "/v1/sessions", Summary: "create a bash session", Handler: s.handleCreate},
		{Method: "GET", Path: "/v1/sessions/{name}", Summary: "state of a bash session", Handler: s.handleGet},
		{Method: "DELETE", Path: "/v1/sessions/{name}", Summary: "close a bash session (kills its jobs)", Handler: s.handleDelete},
		{Method: "POST", Path: "/v1/sessions/{name}/run", Summary: "run, poll, type into or interrupt a command in a session", Handler: s.handleRun},
	}
}

// Shutdown refuses new sessions from now on.
func (s *Service) Shutdown() { s.closing.Store(true) }

// Close refuses new sessions and closes every session (their jobs are
// killed).
func (s *Service) Close() error {
	s.closing.Store(true)
	s.mgr.Close()
	return nil
}

// Run runs req in the named session ("default" is created on first use)
// and reports whether the command it ended was OOM-killed.
func (s *Service) Run(ctx context.Context, name string, req bash.RunRequest) (*bash.Result, bool, error) {
	sess, err := s.session(ctx, name)
	if err != nil {
		return nil, false, err
	}
	return s.run(ctx, sess, req)
}

// RunStatic runs req in a fresh shell in cwd (the sessions' when empty),
// closed once the command has answered (OpenHands' is_static, which
// leaves it running). At most maxStaticSessions run at once; the others
// wait their turn until ctx is done.
func (s *Service) RunStatic(ctx context.Context, cwd string, req bash.RunRequest) (*bash.Result, error) {
	if s.closing.Load() {
		return nil, httpapi.ErrShuttingDown
	}
	if cwd == "" {
		cwd = s.opts.Cwd
	}
	select {
	case s.static <- struct{}{}:
		defer func() { <-s.static }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	sess, err := bash.New(context.WithoutCancel(ctx), bash.Options{
		Name: "static", Cwd: cwd, Env: sessionEnv(s.opts.Env),
		NoChangeTimeout: s.opts.NoChangeTimeout, MaxBuffer: sessionMaxBuffer, Reaper: s.opts.Reaper,
		Cred: s.opts.User,
	})
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	res, _, err := s.run(ctx, sess, req)
	return res, err
}

// WorkingDir is the default session's working directory, else the
// sessions'.
func (s *Service) WorkingDir() string {
	if sess, err := s.mgr.Get(api.DefaultSession); err == nil {
		if cwd := sess.Cwd(); cwd != "" {
			return cwd
		}
	}
	return s.opts.Cwd
}

// sessionDefaults are added to the environment of bash sessions unless it
// sets them: agents read output, not pagers (OpenHands aliases
// git="git --no-pager"; the variables also cover scripts and other tools).
// TERM defaults to xterm (package bash).
var sessionDefaults = []string{"PAGER=cat", "GIT_PAGER=cat"}

// Bounds on sessions, each of which holds a shell, a terminal and its
// output in the executor: OpenHands' one-command (is_static) shells at
// once, and the raw output kept per command (the result an agent reads is
// 30000 characters by default). Options.MaxSessions bounds the others.
const (
	maxStaticSessions = 4
	sessionMaxBuffer  = 512 << 10
)

// errTooManySessions refuses a session beyond MaxSessions.
func (s *Service) errTooManySessions() error {
	return fmt.Errorf("create session: %d sessions exist, the most the executor keeps (delete one): %w", s.opts.MaxSessions, httpapi.ErrLimit)
}

// sessionEnv returns the base environment of bash sessions.
func sessionEnv(env []string) []string { return environ.WithDefaults(env, sessionDefaults...) }

// decodeSessionRun decodes and validates the body of
// POST /v1/sessions/{name}/run.
func decodeSessionRun(r io.Reader) (api.SessionRunRequest, error) {
	var req api.SessionRunRequest
	if err := httpapi.Decode(r, &req); err != nil {
		return req, err
	}
	if err := req.Validate(); err != nil {
		return req, httpapi.BadRequest(fmt.Errorf("invalid request: %w", err))
	}
	return req, nil
}

// session returns the named session; "default" is created on first use
// (and re-created when its shell has exited).
func (s *Service) session(ctx context.Context, name string) (*bash.Session, error) {
	if err := api.ValidSessionName(name); err != nil {
		return nil, httpapi.BadRequest(err)
	}
	if name != api.DefaultSession {
		return s.mgr.Get(name)
	}
	if s.closing.Load() {
		return nil, httpapi.ErrShuttingDown
	}
	// The shell outlives the request that starts it.
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.mgr.Get(name); err != nil && len(s.mgr.List()) >= s.opts.MaxSessions {
		return nil, s.errTooManySessions()
	}
	sess, err := s.mgr.GetOrCreate(context.WithoutCancel(ctx), bash.Options{Name: name})
	if err == nil {
		s.meta.LoadOrStore(sess, time.Now())
	}
	return sess, err
}

func (s *Service) sessionInfo(sess *bash.Session) api.Session {
	out := api.Session{Name: sess.Name(), PID: sess.Pid(), Cwd: sess.Cwd(), Running: sess.Running()}
	select {
	case <-sess.Exited():
		out.Exited = true
	default:
	}
	if t, ok := s.meta.Load(sess); ok {
		out.CreatedAt = t.(time.Time)
	}
	return out
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	list := api.SessionList{Sessions: []api.Session{}}
	for _, name := range s.mgr.List() {
		if sess, err := s.mgr.Get(name); err == nil {
			list.Sessions = append(list.Sessions, s.sessionInfo(sess))
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, &list)
}

func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req api.SessionCreateRequest
	if err := s.opts.Bodies.Decode(w, r, &req); err != nil {
		httpapi.Error(w, err)
		return
	}
	if err := req.Validate(); err != nil {
		httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("invalid request: %w", err)))
		return
	}
	if s.closing.Load() {
		httpapi.Error(w, httpapi.ErrShuttingDown)
		return
	}
	opts := bash.Options{Name: req.Name, Cwd: req.Cwd, MaxOutput: req.MaxOutput}
	if req.Name == "" {
		opts.Name = api.DefaultSession
	}
	if len(req.Env) > 0 {
		opts.Env = sessionEnv(environ.Merge(s.opts.Env, req.Env))
	}
	if req.NoChangeTimeout < 0 {
		opts.NoChangeTimeout = -1
	} else {
		opts.NoChangeTimeout = api.Seconds(req.NoChangeTimeout)
	}
	if req.Cwd != "" {
		if fi, err := os.Stat(req.Cwd); err != nil || !fi.IsDir() {
			httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("cwd %q is not a directory", req.Cwd)))
			return
		}
	}
	s.mu.Lock()
	if len(s.mgr.List()) >= s.opts.MaxSessions {
		s.mu.Unlock()
		httpapi.Error(w, s.errTooManySessions())
		return
	}
	sess, err := s.mgr.Create(context.WithoutCancel(r.Context()), opts)
	s.mu.Unlock()
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	s.meta.Store(sess, time.Now())
	httpapi.WriteJSON(w, http.StatusCreated, s.sessionInfo(sess))
}

// named returns the existing session the request's path names.
func (s *Service) named(r *http.Request) (*bash.Session, error) {
	name := r.PathValue("name")
	if err := api.ValidSessionName(name); err != nil {
		return nil, httpapi.BadRequest(err)
	}
	return s.mgr.Get(name)
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) {
	sess, err := s.named(r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, s.sessionInfo(sess))
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) {
	sess, err := s.named(r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	info := s.sessionInfo(sess)
	if err := s.mgr.Delete(sess.Name()); err != nil {
		httpapi.Error(w, err)
		return
	}
	s.meta.Delete(sess)
	info.Running, info.Exited = false, true
	httpapi.WriteJSON(w, http.StatusOK, info)
}

func (s *Service) handleRun(w http.ResponseWriter, r *http.Request) {
	req, mem, err := httpapi.DecodeWith(s.opts.Bodies, w, r, decodeSessionRun)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	mem.Release() // the command may run for long; its text is handed over
	sess, err := s.session(r.Context(), r.PathValue("name"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	res, oom, err := s.run(r.Context(), sess, bash.RunRequest{
		Command:         req.Command,
		IsInput:         req.IsInput,
		Timeout:         api.Seconds(req.Timeout),
		NoChangeTimeout: api.Seconds(req.NoChangeTimeout),
		Blocking:        req.Blocking,
	})
	if err != nil {
		if errors.Is(err, bash.ErrExited) {
			err = fmt.Errorf("session %s: %w (delete it and create it again)", sess.Name(), err)
		}
		httpapi.Error(w, err)
		return
	}
	out := sessionResult(res)
	out.OOMKilled = oom
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func sessionResult(res *bash.Result) *api.SessionResult {
	md := res.Metadata
	return &api.SessionResult{
		Command:   res.Command,
		Status:    string(res.Status),
		Output:    res.Output,
		Truncated: res.Truncated,
		ExitCode:  res.ExitCode,
		Metadata: api.SessionMetadata{
			ExitCode: md.ExitCode, PID: md.PID, Username: md.Username, Hostname: md.Hostname,
			WorkingDir: md.WorkingDir, PyInterpreterPath: md.PyInterpreterPath,
			Prefix: md.Prefix, Suffix: md.Suffix,
		},
		Observation: res.AgentObservation(),
	}
}

// OOMNote is appended to a session command's suffix (and so to what an agent
// reads) when the OOM killer ended it.
const OOMNote = "\n[The command was killed by the OOM killer: the sandbox ran out of memory.]"

// runSession runs req in sess and reports whether the command it ended was
// OOM-killed: exit code 137 while the cgroup's OOM-kill count rose during
// the call. A kill between two calls for the same command (a poll after a
// timeout) is not seen.
func (s *Service) run(ctx context.Context, sess *bash.Session, req bash.RunRequest) (*bash.Result, bool, error) {
	before, known := s.opts.Cgroup.OOMKills()
	res, err := sess.Run(ctx, req)
	if err != nil || !known || res.ExitCode != 137 {
		return res, false, err
	}
	after, ok := s.opts.Cgroup.OOMKills()
	if !ok || after <= before {
		return res, false, nil
	}
	res.Metadata.Suffix += OOMNote
	return res, true, nil
}
