package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
)

// hugeBody is a JSON body of n bytes made on the fly, counting what the
// server reads of it.
type hugeBody struct {
	prefix string
	n, off int64
}

func (h *hugeBody) Read(p []byte) (int, error) {
	if h.off >= h.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), h.n-h.off)]
	for i := range p {
		switch off := h.off + int64(i); {
		case off < int64(len(h.prefix)):
			p[i] = h.prefix[off]
		case off >= h.n-2:
			p[i] = `"}`[off-(h.n-2)]
		default:
			p[i] = 'A'
		}
	}
	h.off += int64(len(p))
	return len(p), nil
}

// Every JSON route refuses a 60 MiB body with 413 and the JSON error body:
// announced (Content-Length), without reading any of it; sent chunked, after
// reading at most the cap (8 MiB by default), and without holding more than
// a few times the cap.
func TestHugeJSONBodies(t *testing.T) {
	const limit = DefaultMaxRequestBody
	if limit > 8<<20 {
		t.Fatalf("the default JSON body cap is %d, over 8 MiB", limit)
	}
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A process to address /stdin and /signal to.
	start := httptest.NewRecorder()
	s.Handler().ServeHTTP(start, httptest.NewRequest("POST", "/v1/processes", strings.NewReader(`{"argv":["sleep","30"],"stdin_open":true}`)))
	var p api.Process
	if err := json.Unmarshal(start.Body.Bytes(), &p); err != nil || start.Code != http.StatusCreated {
		t.Fatalf("start: %d %s", start.Code, start.Body)
	}
	defer s.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("DELETE", "/v1/processes/"+p.ID, nil))
	routes := []struct{ path, prefix string }{
		{"/v1/processes", `{"cmd":"`},
		{"/v1/processes/" + p.ID + "/stdin", `{"data":"`},
		{"/v1/processes/" + p.ID + "/signal", `{"signal":"`},
		{"/v1/files/move", `{"src":"`},
		{"/v1/editor", `{"command":"create","path":"/tmp/x","file_text":"`},
		{"/v1/sessions", `{"name":"`},
		{"/v1/sessions/default/run", `{"command":"`},
		{"/execute_action", `{"action":{"action":"write","args":{"path":"/tmp/x","content":"`},
		{"/list_files", `{"path":"`},
	}
	const huge = 60 << 20
	for _, rt := range routes {
		for _, announced := range []bool{true, false} {
			body := &hugeBody{prefix: rt.prefix, n: huge}
			req := httptest.NewRequest("POST", rt.path, body)
			req.Header.Set("Content-Type", "application/json")
			req.ContentLength = -1
			if announced {
				req.ContentLength = huge
			}
			rec := httptest.NewRecorder()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			s.Handler().ServeHTTP(rec, req)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			var eb api.ErrorBody
			if rec.Code != http.StatusRequestEntityTooLarge || json.Unmarshal(rec.Body.Bytes(), &eb) != nil ||
				eb.Error == nil || eb.Error.Code != api.CodeTooLarge {
				t.Errorf("%s (announced %v): %d %s, want 413 too_large", rt.path, announced, rec.Code, rec.Body.Bytes())
			}
			switch {
			case announced && (body.off != 0 || alloc > 256<<10):
				t.Errorf("%s: announced 60 MiB body: read %d bytes, allocated %d, want none read and little allocated", rt.path, body.off, alloc)
			case !announced && (body.off > limit+1 || alloc > 6*limit):
				t.Errorf("%s: chunked 60 MiB body: read %d bytes, allocated %d; want at most the cap (%d) read, a few times it allocated", rt.path, body.off, alloc, limit)
			}
		}
	}
	if s.reqMem.InUse() != 0 {
		t.Errorf("request memory in use after the requests: %d", s.reqMem.InUse())
	}
	// The error names the limit and the way around it.
	req := httptest.NewRequest("POST", "/v1/processes", &hugeBody{prefix: `{"cmd":"`, n: huge})
	req.ContentLength = huge
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if !strings.Contains(rec.Body.String(), fmt.Sprintf("over the limit of %d", limit)) || !strings.Contains(rec.Body.String(), "octet-stream") {
		t.Errorf("413 message: %s", rec.Body.String())
	}
}

// Large JSON requests take their turn in the request memory budget: with
// room for one at a time, the second waits until the first is done, and a
// small request does not wait at all.
func TestLargeBodiesWaitTheirTurn(t *testing.T) {
	s, err := New(Options{MaxRequestBody: 1 << 20, RequestMemory: httpapi.JSONCost(1 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hold, err := s.reqMem.Acquire(context.Background(), s.opts.RequestMemory)
	if err != nil {
		t.Fatal(err)
	}
	large := `{"argv":["true"],"wait":true,"env":{"X":"` + strings.Repeat("x", 100<<10) + `"}}`
	done := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/processes", strings.NewReader(large)))
		done <- rec.Code
	}()
	for s.reqMem.Waiting() != 1 {
		runtime.Gosched()
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/processes", strings.NewReader(`{"argv":["true"],"wait":true}`)))
	if rec.Code != 200 {
		t.Fatalf("small request while the budget is taken: %d %s", rec.Code, rec.Body)
	}
	select {
	case code := <-done:
		t.Fatalf("large request answered (%d) while the budget was taken", code)
	default:
	}
	hold.Release()
	if code := <-done; code != 200 {
		t.Fatalf("large request: %d", code)
	}
	if s.reqMem.InUse() != 0 {
		t.Fatalf("request memory in use: %d", s.reqMem.InUse())
	}
}

// The budgets shrink with the sandbox's memory limit, and the soft limit
// is at most half of it.
func TestFitToSandbox(t *testing.T) {
	for _, tc := range []struct {
		limit          uint64
		req, out, body int64
	}{
		{0, 0, 0, 0}, // no limit: New's defaults
		{1 << 30, DefaultRequestMemory, DefaultOutputMemory, DefaultMaxRequestBody},
		{256 << 20, 32 << 20, 32 << 20, 8 << 20},
		{64 << 20, 8 << 20, 8 << 20, 2 << 20},
		{4 << 20, 1 << 20, 1 << 20, 256 << 10},
	} {
		var o Options
		fitToSandbox(&o, tc.limit)
		if o.RequestMemory != tc.req || o.OutputMemory != tc.out || o.MaxRequestBody != tc.body {
			t.Errorf("limit %d: request %d output %d body %d; want %d %d %d", tc.limit, o.RequestMemory, o.OutputMemory, o.MaxRequestBody, tc.req, tc.out, tc.body)
		}
	}
	o := Options{RequestMemory: 1 << 30}
	fitToSandbox(&o, 64<<20)
	if o.RequestMemory != 1<<30 || o.MaxRequestBody != DefaultMaxRequestBody {
		t.Errorf("explicit request memory changed: %+v", o)
	}
	for _, tc := range []struct {
		configured int64
		env        string
		cgroup     uint64
		want       int64
	}{
		{0, "", 0, DefaultMemoryLimit}, {0, "", 1 << 30, DefaultMemoryLimit}, {0, "", 100 << 20, 50 << 20},
		{-1, "", 0, 0}, {0, "200MiB", 0, 0}, {64 << 20, "", 0, 64 << 20},
	} {
		if got := memoryLimit(tc.configured, tc.env, tc.cgroup); got != tc.want {
			t.Errorf("memoryLimit(%d, %q, %d) = %d, want %d", tc.configured, tc.env, tc.cgroup, got, tc.want)
		}
	}
}

// File requests take their turn among budget.MaxFileCalls: with that many
// uploads held open, a stat waits for one of them to end, while a route
// outside the file system answers at once. (Each request blocked in a file
// system call holds an OS thread, which a sandbox's pids limit counts.)
func TestFileRequestsTakeTurns(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := t.TempDir()
	var writers []*io.PipeWriter
	uploads := make(chan int, budget.MaxFileCalls)
	for i := range budget.MaxFileCalls {
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		go func() {
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest("PUT", fmt.Sprintf("/v1/files?path=%s/f%d", dir, i), pr))
			uploads <- rec.Code
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); len(s.fileCalls) != budget.MaxFileCalls; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d uploads under way hold %d file places, want %d", budget.MaxFileCalls, len(s.fileCalls), budget.MaxFileCalls)
		}
	}
	stat := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/files/stat?path="+dir, nil))
		stat <- rec.Code
	}()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/info", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("info while the file requests are taken: %d %s", rec.Code, rec.Body)
	}
	select {
	case code := <-stat:
		t.Fatalf("a stat answered (%d) while %d uploads held every place", code, budget.MaxFileCalls)
	case <-time.After(100 * time.Millisecond):
	}
	writers[0].Close()
	if code := <-uploads; code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("upload: %d", code)
	}
	if code := <-stat; code != http.StatusOK {
		t.Fatalf("stat after an upload ended: %d", code)
	}
	for _, w := range writers[1:] {
		w.Close()
	}
	for range budget.MaxFileCalls - 1 {
		<-uploads
	}
	if n := len(s.fileCalls); n != 0 {
		t.Errorf("%d file places still taken after every request ended", n)
	}
}
