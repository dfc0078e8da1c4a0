package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
	"github.com/bothy-sandbox/bothy/executor/reap"
)

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	body, res, err := s.bodies.JSON(w, r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	req, err := decodeRunRequest(body)
	if err != nil {
		res.Release()
		httpapi.Error(w, err)
		return
	}
	switch req.Mode() {
	case api.ModeWait:
		s.runWait(w, r, &req, res)
	case api.ModeStream:
		s.runStream(w, r, &req, res)
	default:
		p, err := s.start(&req, res, newOutputLog(s.retainCap(&req), s.outMem))
		if err != nil {
			httpapi.Error(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusCreated, p.snapshot())
	}
}

// runWait runs a process to completion; a request that goes away kills it.
func (s *Server) runWait(w http.ResponseWriter, r *http.Request, req *api.RunRequest, res *budget.Reservation) {
	out := newCapture(s.outputCap(req), s.outMem)
	p, err := s.start(req, res, out)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	defer s.procs.remove(p)
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
func (s *Server) runStream(w http.ResponseWriter, r *http.Request, req *api.RunRequest, res *budget.Reservation) {
	ctx := r.Context()
	out := newStream(ctx)
	p, err := s.start(req, res, out)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	defer s.procs.remove(p)
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

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	list := api.ProcessList{Processes: []api.Process{}}
	for _, p := range s.procs.all() {
		list.Processes = append(list.Processes, p.snapshot())
	}
	httpapi.WriteJSON(w, http.StatusOK, &list)
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	p, err := s.procs.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, p.snapshot())
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	p, err := s.procs.get(r.PathValue("id"))
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
	s.procs.remove(p)
	httpapi.WriteJSON(w, http.StatusOK, p.snapshot())
}

// handleOutput sends the retained output of a background process from
// ?offset=N as events; with ?follow=1 it keeps sending until the process
// ends. An exit event ends the output of a finished process.
func (s *Server) handleOutput(w http.ResponseWriter, r *http.Request) {
	p, err := s.procs.get(r.PathValue("id"))
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
func (s *Server) handleStdin(w http.ResponseWriter, r *http.Request) {
	p, err := s.procs.get(r.PathValue("id"))
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
		body, res, err := s.bodies.JSON(w, r)
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

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	p, err := s.procs.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	var req api.SignalRequest
	body, res, err := s.bodies.JSON(w, r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	err = httpapi.Decode(body, &req)
	res.Release()
	if err != nil {
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
func (s *Server) handleWait(w http.ResponseWriter, r *http.Request) {
	p, err := s.procs.get(r.PathValue("id"))
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
