package api

import (
	"fmt"
	"net/http"
)

// Error codes carried in Error.Code.
const (
	CodeBadRequest       = "bad_request"        // 400: malformed or invalid request
	CodeStartFailed      = "start_failed"       // 400: the command could not be started
	CodeForbidden        = "forbidden"          // 403: missing or wrong API key
	CodeNotFound         = "not_found"          // 404: no such route or process
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeConflict         = "conflict"           // 409: wrong state (exited, stdin closed, …)
	CodeTooLarge         = "too_large"          // 413: request body, file or archive over a limit
	CodeToolError        = "tool_error"         // 400: the editor refused the command (message is the agent's text)
	CodeInternal         = "internal"           // 500
	CodeUnavailable      = "unavailable"        // 503: shutting down
	CodeUnsupported      = "unsupported"        // 501: the sandbox lacks what the request needs (bash)
)

// Error is the JSON error of every failed request, wrapped in ErrorBody:
//
//	{"error":{"code":"not_found","message":"process p7 not found"}}
//
// The client returns it (with Status set) for any non-2xx answer, so
// callers can test errors.Is(err, api.ErrNotFound).
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ErrorBody is the envelope of an Error on the wire. Detail repeats the
// message for OpenHands clients, which report the "detail" of a failed
// request.
type ErrorBody struct {
	Error  *Error `json:"error"`
	Detail string `json:"detail,omitempty"`
}

// Sentinels for errors.Is; they match any *Error with the same Code.
var (
	ErrBadRequest  = &Error{Status: http.StatusBadRequest, Code: CodeBadRequest}
	ErrStartFailed = &Error{Status: http.StatusBadRequest, Code: CodeStartFailed}
	ErrForbidden   = &Error{Status: http.StatusForbidden, Code: CodeForbidden}
	ErrNotFound    = &Error{Status: http.StatusNotFound, Code: CodeNotFound}
	ErrConflict    = &Error{Status: http.StatusConflict, Code: CodeConflict}
	ErrTooLarge    = &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge}
	ErrToolError   = &Error{Status: http.StatusBadRequest, Code: CodeToolError}
	ErrUnsupported = &Error{Status: http.StatusNotImplemented, Code: CodeUnsupported}
	ErrBadGateway  = &Error{Status: http.StatusBadGateway, Code: CodeBadGateway}
)

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("executor: %s (%d)", e.Code, e.Status)
	}
	return fmt.Sprintf("executor: %s: %s", e.Code, e.Message)
}

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}
