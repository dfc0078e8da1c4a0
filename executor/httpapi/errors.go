package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/bash"
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/files"
)

// StatusError is an error answered with Status and Code. Services make
// their sentinels with NewError and wrap others with WithStatus.
type StatusError struct {
	Status int
	Code   string
	Err    error
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// NewError returns a sentinel error with message msg, answered with
// status and code (an api.Code* constant).
func NewError(status int, code, msg string) error {
	return &StatusError{Status: status, Code: code, Err: errors.New(msg)}
}

// WithStatus marks err to be answered with status and code.
func WithStatus(status int, code string, err error) error {
	return &StatusError{Status: status, Code: code, Err: err}
}

// Errors shared by the services.
var (
	// ErrShuttingDown refuses to start anything once shutdown has begun.
	ErrShuttingDown = NewError(http.StatusServiceUnavailable, api.CodeUnavailable, "executor is shutting down")
	// ErrLimit refuses what would go beyond one of the executor's limits.
	ErrLimit = NewError(http.StatusConflict, api.CodeConflict, "executor limit reached")
)

// RequestError marks an error caused by the request: answered 400.
type RequestError struct{ err error }

func (e *RequestError) Error() string { return e.err.Error() }
func (e *RequestError) Unwrap() error { return e.err }

// BadRequest marks err as caused by the request.
func BadRequest(err error) error { return &RequestError{err: err} }

// IsBadRequest reports whether err was caused by the request (or is an
// oversized body).
func IsBadRequest(err error) bool {
	var re *RequestError
	return errors.As(err, &re) || tooLarge(err)
}

// libraryErrors are the statuses of the sentinels of the libraries the
// services are built on.
var libraryErrors = []struct {
	err    error
	status int
	code   string
}{
	{files.ErrNotFound, http.StatusNotFound, api.CodeNotFound},
	{bash.ErrNotFound, http.StatusNotFound, api.CodeNotFound},
	{files.ErrIsDir, http.StatusBadRequest, api.CodeBadRequest},
	{files.ErrNotDir, http.StatusBadRequest, api.CodeBadRequest},
	{files.ErrInvalidPath, http.StatusBadRequest, api.CodeBadRequest},
	{files.ErrExists, http.StatusConflict, api.CodeConflict},
	{bash.ErrExists, http.StatusConflict, api.CodeConflict},
	{bash.ErrExited, http.StatusConflict, api.CodeConflict},
	{bash.ErrClosed, http.StatusConflict, api.CodeConflict},
	{files.ErrTooLarge, http.StatusRequestEntityTooLarge, api.CodeTooLarge},
	{bash.ErrNoShell, http.StatusNotImplemented, api.CodeUnsupported},
}

// Error writes err with the status its kind calls for: 413 for an
// oversized body, 400 for a RequestError, a StatusError's own, 400
// tool_error (with the agent's text) for an editor refusal, the status of
// a library sentinel, else 500.
func Error(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	var re *RequestError
	var se *StatusError
	var te *editor.ToolError
	switch {
	case errors.As(err, &mbe):
		WriteError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, err.Error())
	case errors.As(err, &re):
		WriteError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
	case errors.As(err, &se):
		WriteError(w, se.Status, se.Code, err.Error())
	case errors.As(err, &te):
		WriteError(w, http.StatusBadRequest, api.CodeToolError, te.Message)
	default:
		for _, le := range libraryErrors {
			if errors.Is(err, le.err) {
				WriteError(w, le.status, le.code, err.Error())
				return
			}
		}
		WriteError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
	}
}

// WriteError is the one writer of error bodies:
// {"error":{"code":"…","message":"…"},"detail":"…"}.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(api.ErrorBody{Error: &api.Error{Code: code, Message: msg}, Detail: msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
