package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/bash"
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/files"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
)

func TestDecode(t *testing.T) {
	type v struct {
		A int `json:"a"`
	}
	for _, tc := range []struct {
		body    string
		strict  bool
		wantErr string // "" for success
	}{
		{`{"a":1}`, true, ""},
		{` {"a":1} `, true, ""},
		{`{"a":1,"b":2}`, true, `unknown field "b"`},
		{`{"a":1,"b":2}`, false, ""},
		{``, true, "empty body"},
		{`  `, false, "empty body"},
		{`{"a":1} x`, true, "trailing data"},
		{`{"a":1}{}`, false, "trailing data"},
		{`{"a":"x"}`, true, "decode request: json"},
	} {
		var got v
		err := decode(strings.NewReader(tc.body), &got, tc.strict)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.body, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !IsBadRequest(err)):
			t.Errorf("%q (strict %v): %v, want a bad request saying %q", tc.body, tc.strict, err, tc.wantErr)
		}
	}
}

// Every kind of error has its status, code and message, in the one JSON
// envelope.
func TestError(t *testing.T) {
	notFound := NewError(http.StatusNotFound, api.CodeNotFound, "thing not found")
	for _, tc := range []struct {
		err    error
		status int
		code   string
		msg    string
	}{
		{fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 1}), 413, api.CodeTooLarge, "read: http: request body too large"},
		{BadRequest(errors.New("no")), 400, api.CodeBadRequest, "no"},
		{fmt.Errorf("thing %q: %w", "x", notFound), 404, api.CodeNotFound, `thing "x": thing not found`},
		{WithStatus(400, api.CodeStartFailed, errors.New("start x: no")), 400, api.CodeStartFailed, "start x: no"},
		{ErrShuttingDown, 503, api.CodeUnavailable, "executor is shutting down"},
		{fmt.Errorf("edit: %w", &editor.ToolError{Message: "agent text"}), 400, api.CodeToolError, "agent text"},
		{fmt.Errorf("stat: %w", files.ErrNotFound), 404, api.CodeNotFound, ""},
		{fmt.Errorf("get: %w", bash.ErrExited), 409, api.CodeConflict, ""},
		{files.ErrTooLarge, 413, api.CodeTooLarge, ""},
		{bash.ErrNoShell, 501, api.CodeUnsupported, ""},
		{errors.New("disk on fire"), 500, api.CodeInternal, "disk on fire"},
	} {
		rec := httptest.NewRecorder()
		Error(rec, tc.err)
		var eb api.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == nil {
			t.Fatalf("%v: body %s", tc.err, rec.Body)
		}
		if rec.Code != tc.status || eb.Error.Code != tc.code || tc.msg != "" && eb.Error.Message != tc.msg || eb.Detail != eb.Error.Message ||
			rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%v: %d %s, want %d %s %q", tc.err, rec.Code, rec.Body, tc.status, tc.code, tc.msg)
		}
	}
}

// A body announced over the cap is refused unread; a small one reserves
// nothing; a large one reserves its cost until released.
func TestBodies(t *testing.T) {
	mem := budget.NewMemory(1<<20, nil)
	b := &Bodies{Max: 64 << 10, Mem: mem}
	req := httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", 100<<10)))
	if _, _, err := b.JSON(httptest.NewRecorder(), req); !IsBadRequest(err) || !strings.Contains(err.Error(), "over the limit of 65536") {
		t.Fatalf("oversized: %v", err)
	}
	req = httptest.NewRequest("POST", "/", strings.NewReader(`{}`))
	if _, res, err := b.JSON(httptest.NewRecorder(), req); err != nil || res != nil || mem.InUse() != 0 {
		t.Fatalf("small: %v %v", res, err)
	}
	req = httptest.NewRequest("POST", "/", strings.NewReader(`{"a":"`+strings.Repeat("x", 32<<10)+`"}`))
	_, res, err := b.JSON(httptest.NewRecorder(), req)
	if err != nil || mem.InUse() != JSONCost(req.ContentLength) {
		t.Fatalf("large: in use %d, %v", mem.InUse(), err)
	}
	res.Release()
	var v map[string]string
	req = httptest.NewRequest("POST", "/", strings.NewReader(`{"a":"`+strings.Repeat("x", 32<<10)+`"}`))
	if err := b.Decode(httptest.NewRecorder(), req, &v); err != nil || len(v["a"]) != 32<<10 || mem.InUse() != 0 {
		t.Fatalf("decode: %v, in use %d", err, mem.InUse())
	}
}
