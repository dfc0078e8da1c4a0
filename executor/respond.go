package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/bash"
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/files"
)

// Sentinel errors of the process API; httpError maps them to statuses.
var (
	ErrNotFound     = errors.New("process not found")
	ErrExited       = errors.New("process has exited")
	ErrStdinClosed  = errors.New("stdin is closed or was not opened (start with stdin_open)")
	ErrNoOutputLog  = errors.New("output of this process is delivered to the request that started it")
	ErrShuttingDown = errors.New("executor is shutting down")
)

// badRequest marks an error caused by the request.
type badRequest struct{ err error }

func (e badRequest) Error() string { return e.err.Error() }
func (e badRequest) Unwrap() error { return e.err }

// startError marks a command that could not be started.
type startError struct{ err error }

func (e startError) Error() string { return e.err.Error() }
func (e startError) Unwrap() error { return e.err }

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "encode response: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// writeError is the one writer of error bodies:
// {"error":{"code":"…","message":"…"}}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(api.ErrorBody{Error: &api.Error{Code: code, Message: msg}, Detail: msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// httpError writes err with the status its kind calls for.
func httpError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	var br badRequest
	var se startError
	var te *editor.ToolError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, err.Error())
	case errors.As(err, &br):
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
	case errors.As(err, &se):
		writeError(w, http.StatusBadRequest, api.CodeStartFailed, err.Error())
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, api.CodeNotFound, err.Error())
	case errors.Is(err, ErrExited), errors.Is(err, ErrStdinClosed), errors.Is(err, ErrNoOutputLog):
		writeError(w, http.StatusConflict, api.CodeConflict, err.Error())
	case errors.Is(err, ErrShuttingDown):
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
	case errors.As(err, &te):
		writeError(w, http.StatusBadRequest, api.CodeToolError, te.Message)
	case errors.Is(err, files.ErrNotFound), errors.Is(err, bash.ErrNotFound):
		writeError(w, http.StatusNotFound, api.CodeNotFound, err.Error())
	case errors.Is(err, files.ErrIsDir), errors.Is(err, files.ErrNotDir), errors.Is(err, files.ErrInvalidPath):
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
	case errors.Is(err, files.ErrExists), errors.Is(err, bash.ErrExists), errors.Is(err, bash.ErrExited), errors.Is(err, bash.ErrClosed):
		writeError(w, http.StatusConflict, api.CodeConflict, err.Error())
	case errors.Is(err, files.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, err.Error())
	case errors.Is(err, bash.ErrNoShell):
		writeError(w, http.StatusNotImplemented, api.CodeUnsupported, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
	}
}

// decodeJSON decodes exactly one JSON value from r into v, refusing
// unknown fields and trailing data. Errors are badRequest (or the
// MaxBytesError of an oversized body).
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return badRequest{errors.New("decode request: empty body")}
		}
		return badRequest{fmt.Errorf("decode request: %w", err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return badRequest{errors.New("decode request: trailing data after the JSON value")}
	}
	return nil
}

// decodeRunRequest decodes and validates the body of POST /v1/processes.
func decodeRunRequest(r io.Reader) (api.RunRequest, error) {
	var req api.RunRequest
	if err := decodeJSON(r, &req); err != nil {
		return req, err
	}
	if err := req.Validate(); err != nil {
		return req, badRequest{fmt.Errorf("invalid request: %w", err)}
	}
	return req, nil
}

// eventWriter writes streamed events as NDJSON or, for clients that accept
// text/event-stream, as server-sent events.
type eventWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	sse bool
	buf bytes.Buffer
	enc *json.Encoder
}

func newEventWriter(w http.ResponseWriter, r *http.Request) *eventWriter {
	ew := &eventWriter{w: w, rc: http.NewResponseController(w)}
	ew.sse = strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	ew.enc = json.NewEncoder(&ew.buf)
	ew.enc.SetEscapeHTML(false)
	h := w.Header()
	if ew.sse {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	h.Set("X-Content-Type-Options", "nosniff")
	return ew
}

func (ew *eventWriter) write(ev *api.Event) error {
	ew.buf.Reset()
	if ew.sse {
		ew.buf.WriteString("event: ")
		ew.buf.WriteString(ev.Type)
		ew.buf.WriteString("\ndata: ")
	}
	if err := ew.enc.Encode(ev); err != nil { // ends with '\n'
		return err
	}
	if ew.sse {
		ew.buf.WriteByte('\n')
	}
	_, err := ew.w.Write(ew.buf.Bytes())
	return err
}

func (ew *eventWriter) flush() error { return ew.rc.Flush() }
