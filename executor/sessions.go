package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/bash"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/environ"
)

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
func (s *Server) errTooManySessions() error {
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
func (s *Server) session(ctx context.Context, name string) (*bash.Session, error) {
	if err := api.ValidSessionName(name); err != nil {
		return nil, httpapi.BadRequest(err)
	}
	if name != api.DefaultSession {
		return s.sessions.Get(name)
	}
	if s.closing.Load() || s.baseCtx.Err() != nil {
		return nil, httpapi.ErrShuttingDown
	}
	// The shell outlives the request that starts it.
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if _, err := s.sessions.Get(name); err != nil && len(s.sessions.List()) >= s.opts.MaxSessions {
		return nil, s.errTooManySessions()
	}
	sess, err := s.sessions.GetOrCreate(context.WithoutCancel(ctx), bash.Options{Name: name})
	if err == nil {
		s.sessMeta.LoadOrStore(sess, time.Now())
	}
	return sess, err
}

func (s *Server) sessionInfo(sess *bash.Session) api.Session {
	out := api.Session{Name: sess.Name(), PID: sess.Pid(), Cwd: sess.Cwd(), Running: sess.Running()}
	select {
	case <-sess.Exited():
		out.Exited = true
	default:
	}
	if t, ok := s.sessMeta.Load(sess); ok {
		out.CreatedAt = t.(time.Time)
	}
	return out
}

func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	list := api.SessionList{Sessions: []api.Session{}}
	for _, name := range s.sessions.List() {
		if sess, err := s.sessions.Get(name); err == nil {
			list.Sessions = append(list.Sessions, s.sessionInfo(sess))
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, &list)
}

func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) {
	var req api.SessionCreateRequest
	body, mem, err := s.bodies.JSON(w, r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	err = httpapi.Decode(body, &req)
	mem.Release()
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	if err := req.Validate(); err != nil {
		httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("invalid request: %w", err)))
		return
	}
	if s.closing.Load() || s.baseCtx.Err() != nil {
		httpapi.Error(w, httpapi.ErrShuttingDown)
		return
	}
	opts := bash.Options{Name: req.Name, Cwd: req.Cwd, MaxOutput: req.MaxOutput}
	if req.Name == "" {
		opts.Name = api.DefaultSession
	}
	if len(req.Env) > 0 {
		opts.Env = sessionEnv(environ.Merge(s.env, req.Env))
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
	s.sessMu.Lock()
	if len(s.sessions.List()) >= s.opts.MaxSessions {
		s.sessMu.Unlock()
		httpapi.Error(w, s.errTooManySessions())
		return
	}
	sess, err := s.sessions.Create(context.WithoutCancel(r.Context()), opts)
	s.sessMu.Unlock()
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	s.sessMeta.Store(sess, time.Now())
	httpapi.WriteJSON(w, http.StatusCreated, s.sessionInfo(sess))
}

func (s *Server) handleSessionGet(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := api.ValidSessionName(name); err != nil {
		httpapi.Error(w, httpapi.BadRequest(err))
		return
	}
	sess, err := s.sessions.Get(name)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, s.sessionInfo(sess))
}

func (s *Server) handleSessionDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := api.ValidSessionName(name); err != nil {
		httpapi.Error(w, httpapi.BadRequest(err))
		return
	}
	sess, err := s.sessions.Get(name)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	info := s.sessionInfo(sess)
	if err := s.sessions.Delete(name); err != nil {
		httpapi.Error(w, err)
		return
	}
	s.sessMeta.Delete(sess)
	info.Running, info.Exited = false, true
	httpapi.WriteJSON(w, http.StatusOK, info)
}

func (s *Server) handleSessionRun(w http.ResponseWriter, r *http.Request) {
	body, mem, err := s.bodies.JSON(w, r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	req, err := decodeSessionRun(body)
	mem.Release() // the command may run for long; its text is handed over
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	sess, err := s.session(r.Context(), r.PathValue("name"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	res, oom, err := s.runSession(r.Context(), sess, bash.RunRequest{
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
