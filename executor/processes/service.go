// Package processes is the executor's processes service: the
// /v1/processes routes, which run commands (argv or shell) to completion
// (wait), stream their output as events (stream), or keep them in the
// background with their output retained for later reads, stdin writes and
// signals; and the sandbox's main command. Each process's output goes to
// one sink, by mode: a capture, a stream or an outputLog.
package processes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/cgroup"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/internal/passwd"
)

// Options configure the processes service; every field is required (the
// server fills in its defaults).
type Options struct {
	// Env is the base environment of started processes (nil: none).
	Env []string
	// Shell runs RunRequest.Cmd as Shell -c Cmd.
	Shell string
	// MaxOutput caps the captured output per stream (wait mode) and what
	// a request's max_output may ask for.
	MaxOutput int
	// MaxRetained is the output retained per background process when the
	// request does not set max_output.
	MaxRetained int
	// MaxProcesses caps the processes running at once.
	MaxProcesses int
	// MaxFinished is how many finished background processes are kept.
	MaxFinished int
	// WaitDelay bounds how long output is still read after a process has
	// exited, when a descendant keeps its pipes open.
	WaitDelay time.Duration
	// Reaper starts and waits for every process.
	Reaper *reap.Reaper
	// Output bounds the output retained across processes.
	Output *budget.Output
	// Bodies reads JSON bodies.
	Bodies *httpapi.Bodies
	// Cgroup tells OOM kills.
	Cgroup cgroup.Reader
	Log    *slog.Logger
	// User is who processes run as when a request names nobody (the
	// image's User, or --user): nil is the executor's own (root).
	// LookupUser resolves the user a request names (RunRequest.User).
	User       *passwd.Cred
	LookupUser func(spec string) (*passwd.Cred, error)
}

// Service runs processes.
type Service struct {
	opts    Options
	devNull *os.File
	table   procTable
	nextID  atomic.Uint64
	running atomic.Int64 // processes started and not yet done
	closing atomic.Bool  // no new processes

	mainMu sync.Mutex
	main   *mainProc
}

// New returns the processes service.
func New(opts Options) (*Service, error) {
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	if opts.Env == nil {
		opts.Env = []string{} // not nil: os.StartProcess would give the executor's own
	}
	s := &Service{opts: opts, devNull: devNull}
	s.table.byID = make(map[string]*process)
	return s, nil
}

// Routes lists the routes of the service.
func (s *Service) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: "GET", Path: "/v1/processes", Summary: "list processes", Handler: s.handleList},
		{Method: "POST", Path: "/v1/processes", Summary: "start a process (wait, stream or background)", Handler: s.handleStart},
		{Method: "GET", Path: "/v1/processes/{id}", Summary: "process status", Handler: s.handleGet},
		{Method: "DELETE", Path: "/v1/processes/{id}", Summary: "kill if running and forget a process", Handler: s.handleDelete},
		{Method: "GET", Path: "/v1/processes/{id}/output", Summary: "read or follow a background process's output", Handler: s.handleOutput},
		{Method: "POST", Path: "/v1/processes/{id}/stdin", Summary: "write to or close a process's stdin", Handler: s.handleStdin},
		{Method: "POST", Path: "/v1/processes/{id}/signal", Summary: "signal a process (group)", Handler: s.handleSignal},
		{Method: "POST", Path: "/v1/processes/{id}/wait", Summary: "wait for a process to exit", Handler: s.handleWait},
	}
}

// Shutdown refuses new processes from now on.
func (s *Service) Shutdown() { s.closing.Store(true) }

// Close refuses new processes and kills every process started (process
// groups, SIGKILL), without waiting for the kills to be reaped.
func (s *Service) Close() error {
	s.closing.Store(true)
	for _, p := range s.table.all() {
		p.kill()
	}
	return s.devNull.Close()
}

// Running counts the processes running.
func (s *Service) Running() int { return s.table.running() }

func (s *Service) handleStart(w http.ResponseWriter, r *http.Request) {
	req, res, err := httpapi.DecodeWith(s.opts.Bodies, w, r, decodeRunRequest)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	switch req.Mode() {
	case api.ModeWait:
		s.runWait(w, r, &req, res)
	case api.ModeStream:
		s.runStream(w, r, &req, res)
	default:
		p, err := s.start(&req, res, newOutputLog(s.retainCap(&req), s.opts.Output))
		if err != nil {
			httpapi.Error(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusCreated, p.snapshot())
	}
}

// runWait runs a process to completion; a request that goes away kills it.
func (s *Service) runWait(w http.ResponseWriter, r *http.Request, req *api.RunRequest, res *budget.Reservation) {
	out := newCapture(s.outputCap(req), s.opts.Output)
	p, err := s.start(req, res, out)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	defer s.table.remove(p)
	defer out.free()
	stop := context.AfterFunc(r.Context(), p.kill)
	<-p.done
	stop()
	writeRunResult(w, &api.RunResult{
		ID: p.id, PID: p.proc.Pid, ExitCode: p.status.Code(),
		Signal: api.SignalName(p.status.Signal), TimedOut: p.timedOut.Load(),
		OOMKilled:  p.status.OOMKilled,
		DurationMS: float64(p.finished.Sub(p.started).Microseconds()) / 1000,
	}, out.stdout, out.stderr)
}

// runStream streams a process's output as events; a request that goes away
// kills it.
func (s *Service) runStream(w http.ResponseWriter, r *http.Request, req *api.RunRequest, res *budget.Reservation) {
	ctx := r.Context()
	out := newStream(ctx)
	p, err := s.start(req, res, out)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	defer s.table.remove(p)
	stop := context.AfterFunc(ctx, p.kill)
	defer stop()

	ew := newEventWriter(w, r)
	w.WriteHeader(http.StatusOK)
	ok := ew.write(&api.Event{Type: api.EventStart, ID: p.id, PID: p.proc.Pid}) == nil && ew.flush() == nil
	var off int64
	var ev api.Event
	for c := range out.chunks {
		if !ok {
			continue // drain until the killed process is gone
		}
		outputEvent(&ev, c.stream, off, c.data)
		off += int64(len(c.data))
		if ew.write(&ev) != nil {
			ok = false
			p.kill()
			continue
		}
		if len(out.chunks) == 0 && ew.flush() != nil {
			ok = false
			p.kill()
		}
	}
	if ok {
		ew.write(p.exitEvent(off))
		ew.flush()
	}
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	list := api.ProcessList{Processes: []api.Process{}}
	for _, p := range s.table.all() {
		list.Processes = append(list.Processes, p.snapshot())
	}
	httpapi.WriteJSON(w, http.StatusOK, &list)
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) {
	p, err := s.table.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, p.snapshot())
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) {
	p, err := s.table.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	p.kill()
	select {
	case <-p.done:
	case <-r.Context().Done():
		return
	}
	s.table.remove(p)
	httpapi.WriteJSON(w, http.StatusOK, p.snapshot())
}

// handleOutput sends the retained output of a background process from
// ?offset=N as events; with ?follow=1 it keeps sending until the process
// ends. An exit event ends the output of a finished process.
func (s *Service) handleOutput(w http.ResponseWriter, r *http.Request) {
	p, err := s.table.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	log, ok := p.out.(*outputLog)
	if !ok {
		httpapi.Error(w, fmt.Errorf("process %s: %w", p.id, ErrNoOutputLog))
		return
	}
	q := r.URL.Query()
	var off int64
	if v := q.Get("offset"); v != "" {
		if off, err = strconv.ParseInt(v, 10, 64); err != nil || off < 0 {
			httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("offset %q is not a non-negative integer", v)))
			return
		}
	}
	follow := queryBool(q.Get("follow"))
	ctx := r.Context()
	ew := newEventWriter(w, r)
	w.WriteHeader(http.StatusOK)
	var ev api.Event
	for {
		chunks, next, closed, wake := log.read(off, 64)
		for _, c := range chunks {
			outputEvent(&ev, c.stream, c.off, c.data)
			if ew.write(&ev) != nil {
				return
			}
		}
		off = next
		if len(chunks) > 0 {
			continue
		}
		if closed {
			<-p.done // closed before the log
			ew.write(p.exitEvent(off))
			ew.flush()
			return
		}
		if !follow {
			ew.flush()
			return
		}
		if ew.flush() != nil {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// handleStdin writes to a process's stdin: an application/octet-stream
// body is copied as it arrives, in pipe-sized pieces, however large; a
// JSON body carries its data inline (up to MaxRequestBody).
func (s *Service) handleStdin(w http.ResponseWriter, r *http.Request) {
	p, err := s.table.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	var in io.Reader
	var closeIt bool
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/octet-stream" {
		in, closeIt = r.Body, queryBool(r.URL.Query().Get("close"))
	} else {
		body, res, err := s.opts.Bodies.JSON(w, r)
		if err != nil {
			httpapi.Error(w, err)
			return
		}
		defer res.Release()
		var req api.StdinRequest
		if err := httpapi.Decode(body, &req); err != nil {
			httpapi.Error(w, err)
			return
		}
		if req.Data != "" && req.B64 != nil {
			httpapi.Error(w, httpapi.BadRequest(errors.New("data and b64 are exclusive")))
			return
		}
		closeIt = req.Close
		if req.B64 != nil {
			in = bytes.NewReader(req.B64)
		} else {
			in = strings.NewReader(req.Data)
		}
	}
	n, err := p.copyStdin(r.Context(), in, closeIt)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.StdinResult{Written: int(n), Closed: closeIt})
}

func (s *Service) handleSignal(w http.ResponseWriter, r *http.Request) {
	p, err := s.table.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	var req api.SignalRequest
	if err := s.opts.Bodies.Decode(w, r, &req); err != nil {
		httpapi.Error(w, err)
		return
	}
	sig, err := api.ParseSignal(req.Signal)
	if err != nil {
		httpapi.Error(w, httpapi.BadRequest(err))
		return
	}
	if p.exited() {
		httpapi.Error(w, fmt.Errorf("signal process %s: %w", p.id, ErrExited))
		return
	}
	if req.Group == nil || *req.Group {
		if terminating(sig) {
			p.killGroup.Store(true) // nothing of an interrupted command is left
		}
		err = p.proc.SignalGroup(sig)
	} else {
		err = p.proc.Signal(sig)
	}
	if errors.Is(err, reap.ErrDone) || errors.Is(err, syscall.ESRCH) {
		err = ErrExited
	}
	if err != nil {
		httpapi.Error(w, fmt.Errorf("signal process %s: %w", p.id, err))
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, p.snapshot())
}

// handleWait waits for the process to end, or ?timeout=SECONDS, and
// answers its state (running is still true after a timeout).
func (s *Service) handleWait(w http.ResponseWriter, r *http.Request) {
	p, err := s.table.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	var timeout <-chan time.Time
	if v := r.URL.Query().Get("timeout"); v != "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs < 0 || secs != secs {
			httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("timeout %q is not a non-negative number of seconds", v)))
			return
		}
		t := time.NewTimer(time.Duration(secs * float64(time.Second)))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-p.done:
	case <-timeout:
	case <-r.Context().Done():
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, p.snapshot())
}

// terminating reports whether sig is one a user sends to stop a command.
func terminating(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGKILL:
		return true
	}
	return false
}

func queryBool(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b || v == "yes"
}
