package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/internal/names"
	"github.com/bothy-sandbox/bothy/internal/proc"
)

// maxRequest caps a request's body (the cell's code).
const maxRequest = 8 << 20

// validKernelID reports whether id may be a kernel's: a name (names.Valid)
// of at most 64 bytes. Not a regexp: compiled at every executor start, it
// cost what the check never does.
func validKernelID(id string) bool { return len(id) <= 64 && names.Valid(id) }

// Handler serves the native API's /v1/kernels routes (and the same under
// /plugins/jupyter/).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/kernels", s.handleList)
	mux.HandleFunc("POST /v1/kernels/{id}/execute", s.handleExecute)
	mux.HandleFunc("DELETE /v1/kernels/{id}", s.handleDelete)
	return mux
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var out []api.Kernel
	for id, slot := range s.kernels {
		select {
		case <-slot.ready:
			if slot.k != nil && slot.k.alive() {
				pid := slot.k.pid()
				rss, _ := proc.RSS(pid)
				out = append(out, api.Kernel{ID: id, Pid: pid, Python: s.python, RSS: rss})
			}
		default:
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b api.Kernel) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	if out == nil {
		out = []api.Kernel{}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.stop(id); errors.Is(err, errNoKernel) {
		httpapi.Error(w, httpapi.WithStatus(http.StatusNotFound, api.CodeNotFound, fmt.Errorf("kernel %q: %w", id, err)))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) handleExecute(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validKernelID(id) {
		httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("kernel id %q: use 1 to 64 letters, digits, dots, dashes and underscores", id)))
		return
	}
	var req api.KernelExecuteRequest
	if r.ContentLength > maxRequest {
		httpapi.Error(w, httpapi.WithStatus(http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Errorf("execute request: %d bytes, more than %d", r.ContentLength, maxRequest)))
		return
	}
	if err := httpapi.Decode(io.LimitReader(r.Body, maxRequest), &req); err != nil {
		httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("execute request: %w", err)))
		return
	}
	timeout := DefaultTimeout
	if req.Timeout > 0 {
		timeout = api.Seconds(req.Timeout)
	}
	slot, err := s.kernel(r.Context(), id)
	if err != nil {
		httpapi.Error(w, fmt.Errorf("kernel %s: %w", id, err))
		return
	}
	if req.Stream {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		enc := json.NewEncoder(w)
		flusher, _ := w.(http.Flusher)
		emit := func(ev api.KernelEvent) {
			enc.Encode(ev)
			if flusher != nil {
				flusher.Flush()
			}
		}
		rep, err := s.runCell(r.Context(), slot, req.Code, req.Cwd, "", timeout, emit)
		if err != nil {
			emit(api.KernelEvent{Type: api.KernelError, Name: "KernelError", Value: err.Error()})
			rep.Status = "error"
		}
		emit(api.KernelEvent{Type: api.KernelEnd, Reply: &rep})
		return
	}
	ex := api.KernelExecution{Results: []api.KernelEvent{}, Logs: api.KernelLogs{Stdout: []string{}, Stderr: []string{}}}
	size := 0
	rep, err := s.runCell(r.Context(), slot, req.Code, req.Cwd, "", timeout, func(ev api.KernelEvent) {
		if size += eventSize(ev); size > maxCollected {
			ex.Truncated = true
			return
		}
		switch ev.Type {
		case api.KernelStdout:
			ex.Logs.Stdout = append(ex.Logs.Stdout, ev.Text)
		case api.KernelStderr:
			ex.Logs.Stderr = append(ex.Logs.Stderr, ev.Text)
		case api.KernelError:
			ex.Error = &ev
		default:
			ex.Results = append(ex.Results, ev)
		}
	})
	if err != nil {
		httpapi.Error(w, fmt.Errorf("kernel %s: %w", id, err))
		return
	}
	ex.Reply = rep
	httpapi.WriteJSON(w, http.StatusOK, &ex)
}

// maxCollected caps the outputs a non-streamed execution collects; the
// rest is dropped and the execution says it is truncated.
const maxCollected = 16 << 20

// eventSize estimates what an event holds.
func eventSize(ev api.KernelEvent) int {
	n := len(ev.Text) + len(ev.Value)
	for _, t := range ev.Traceback {
		n += len(t)
	}
	for k, v := range ev.Data {
		n += len(k)
		if s, ok := v.(string); ok {
			n += len(s)
		} else {
			n += 64
		}
	}
	return n
}
