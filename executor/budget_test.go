package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

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
	p, err := s.start(&api.RunRequest{Argv: []string{"sleep", "30"}, StdinOpen: true}, nil, newOutputLog(s.opts.MaxRetained, s.outMem))
	if err != nil {
		t.Fatal(err)
	}
	defer p.kill()
	routes := []struct{ path, prefix string }{
		{"/v1/processes", `{"cmd":"`},
		{"/v1/processes/" + p.id + "/stdin", `{"data":"`},
		{"/v1/processes/" + p.id + "/signal", `{"signal":"`},
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

// writeRunResult writes exactly what encoding the whole api.RunResult
// does, output included, for text, binary and truncated output.
func TestRunResultStreamedEncoding(t *testing.T) {
	ctrl := strings.Repeat("\x01<&>\u2028", 10000) // escaped as \u0001, kept as <&>
	for _, tc := range []struct {
		name           string
		stdout, stderr string
		max            int
	}{
		{"empty", "", "", 100},
		{"text", "héllo\n", "warn <b>&\n", 100},
		{"escapes", "q\"b\\ \b\f\t\r\n\x7f\x00\x1f\u2029 end", "", 100},
		{"control characters", ctrl, "", len(ctrl) + 1},
		{"binary", "\xff\xfe\x00ok", "", 100},
		{"truncated text", strings.Repeat("é€😀", 50000), "x", 1000},
		{"truncated binary", strings.Repeat("\xff", 5000), strings.Repeat("ab", 5000), 999},
		{"ring wraps in a character", strings.Repeat("a😀", 1000) + "é", "", 777},
	} {
		out, errOut := newCapBuffer(tc.max, nil), newCapBuffer(tc.max, nil)
		for _, c := range chunks(tc.stdout, 37) {
			out.Write([]byte(c))
		}
		errOut.Write([]byte(tc.stderr))
		res := api.RunResult{ID: "p1", PID: 7, ExitCode: 1, Signal: "SIGTERM", TimedOut: true, OOMKilled: true, DurationMS: 1.5}
		// What the whole result encodes to, built as runWait used to.
		want := res
		b, trunc := out.Bytes()
		setOutput(&want.Stdout, &want.StdoutB64, b)
		want.StdoutTruncated = trunc
		b, trunc = errOut.Bytes()
		setOutput(&want.Stderr, &want.StderrB64, b)
		want.StderrTruncated = trunc
		wantRec := httptest.NewRecorder()
		httpapi.WriteJSON(wantRec, 200, &want)

		rec := httptest.NewRecorder()
		writeRunResult(rec, &res, out, errOut)
		if rec.Body.String() != wantRec.Body.String() {
			t.Errorf("%s:\n got %.300q\nwant %.300q", tc.name, rec.Body.String(), wantRec.Body.String())
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
	}
}

func setOutput(text *string, b64 *[]byte, out []byte) {
	if utf8.Valid(out) {
		*text = string(out)
	} else {
		*b64 = out
	}
}

// appendJSONText escapes exactly as encoding/json does a string (HTML
// escaping off), valid UTF-8 or not.
func FuzzAppendJSONText(f *testing.F) {
	for _, seed := range []string{"", "plain", "q\"b\\ \b\f\t\r\n\x7f\x00\x1f", "\u2028\u2029<&>", "\xff\xc3(é€😀", strings.Repeat("é", 10000)} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(string(src))
		got := append(append([]byte{'"'}, appendJSONText(nil, src)...), '"', '\n')
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%q: got %q, want %q", src, got, want.Bytes())
		}
	})
}

func TestValidUTF8Segments(t *testing.T) {
	s := "a€😀é\xffz"
	for i := 0; i <= len(s); i++ {
		for j := i; j <= len(s); j++ {
			segs := [][]byte{[]byte(s[:i]), []byte(s[i:j]), []byte(s[j:])}
			if got, want := validUTF8(segs...), utf8.ValidString(s); got != want {
				t.Fatalf("%q|%q|%q: %v, want %v", s[:i], s[i:j], s[j:], got, want)
			}
			v := strings.ReplaceAll(s, "\xff", "")
			if i <= len(v) && j <= len(v) {
				segs = [][]byte{[]byte(v[:i]), []byte(v[i:j]), []byte(v[j:])}
				if !validUTF8(segs...) {
					t.Fatalf("%q|%q|%q: invalid", v[:i], v[i:j], v[j:])
				}
			}
		}
	}
}

// Captured and retained output shares the output budget: two buffers that
// want more than it holds keep what it grants (and the floor each), report
// the rest as truncated, and give it all back when released.
func TestOutputBudget(t *testing.T) {
	budget := budget.NewOutput(100<<10, nil)
	a, b := newCapBuffer(1<<20, budget), newCapBuffer(1<<20, budget)
	chunk := bytes.Repeat([]byte("x"), 10<<10)
	for range 100 {
		a.Write(chunk)
		b.Write(chunk)
	}
	if used := budget.Used(); used > budget.Max() {
		t.Fatalf("budget used %d over its %d", used, budget.Max())
	}
	held := int64(cap(a.head) + len(a.tail) + cap(b.head) + len(b.tail))
	if held > budget.Max()+2*outputFloor {
		t.Fatalf("buffers hold %d bytes, more than the budget and two floors", held)
	}
	for _, c := range []*capBuffer{a, b} {
		got, trunc := c.Bytes()
		if !trunc || !bytes.Contains(got, []byte("bytes truncated")) || len(got) < outputFloor/2 {
			t.Fatalf("starved buffer: %d bytes, truncated %v", len(got), trunc)
		}
	}
	a.release()
	b.release()
	// A background log under the same budget retains less, newest first.
	l := newOutputLog(1<<20, budget)
	for i := range 100 {
		l.write(streamStdout, bytes.Repeat([]byte{byte('a' + i%26)}, 10<<10))
	}
	if used := budget.Used(); used > budget.Max() || l.mem > outputFloor+l.held {
		t.Fatalf("log: budget used %d, log holds %d with %d granted", used, l.mem, l.held)
	}
	if got, next, _, _ := l.read(0, 1000); next != l.end || got[len(got)-1].data[0] != byte('a'+99%26) {
		t.Fatal("log lost its newest output")
	}
	l.release()
	if used := budget.Used(); used != 0 {
		t.Fatalf("budget used %d after every release", used)
	}
	// A process writing a byte at a time is not charged a chunk a byte.
	small := newOutputLog(1<<20, nil)
	for range 100000 {
		small.write(streamStdout, []byte("y"))
	}
	if len(small.chunks) > 100000/2048 || small.mem > 2*100000 {
		t.Fatalf("byte-sized writes: %d chunks, %d bytes of memory for 100000 bytes", len(small.chunks), small.mem)
	}
}

// A wait-mode command whose output finds the output budget spent gets its
// output truncated instead of held, and the budget comes back.
func TestWaitOutputWithinBudget(t *testing.T) {
	s, err := New(Options{OutputMemory: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/processes",
		strings.NewReader(`{"cmd":"head -c 4000000 /dev/zero | tr '\\0' x","wait":true}`)))
	var res api.RunResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || rec.Code != 200 {
		t.Fatalf("%d %v", rec.Code, err)
	}
	if !res.StdoutTruncated || len(res.Stdout) > 64<<10+2*outputFloor+100 || !strings.Contains(res.Stdout, "bytes truncated") {
		t.Fatalf("stdout of 4 MB under a 64 KiB budget: %d bytes, truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
	if used := s.outMem.Used(); used != 0 {
		t.Fatalf("output budget in use after the request: %d", used)
	}
}

// Stdin sent as application/octet-stream is copied through, far beyond the
// JSON body cap.
func TestStdinStreamBeyondJSONCap(t *testing.T) {
	s, err := New(Options{MaxRequestBody: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := s.start(&api.RunRequest{Argv: []string{"wc", "-c"}, StdinOpen: true}, nil, newOutputLog(s.opts.MaxRetained, s.outMem))
	if err != nil {
		t.Fatal(err)
	}
	const n = 5 << 20
	req := httptest.NewRequest("POST", "/v1/processes/"+p.id+"/stdin?close=1", io.LimitReader(zeros{}, n))
	req.Header.Set("Content-Type", "application/octet-stream")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	var sr api.StdinResult
	if err := json.Unmarshal(rec.Body.Bytes(), &sr); err != nil || sr.Written != n || !sr.Closed {
		t.Fatalf("stdin: %d %s", rec.Code, rec.Body)
	}
	<-p.done
	chunks, _, _, _ := p.out.(*outputLog).read(0, 10)
	var out bytes.Buffer
	for _, c := range chunks {
		out.Write(c.data)
	}
	if got := strings.TrimSpace(out.String()); got != fmt.Sprint(n) {
		t.Fatalf("wc -c read %q bytes, want %d", got, n)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// The pipes are read only once they have data (a quiet process holds no
// read buffer); a character split between two writes still arrives whole.
func TestOutputAcrossQuietSpells(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/processes",
		strings.NewReader(`{"cmd":"printf 'a\\303'; sleep 0.2; printf '\\251b'; sleep 0.2; printf end >&2","wait":true}`)))
	var res api.RunResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || res.Stdout != "aéb" || res.Stderr != "end" {
		t.Fatalf("output %q %q (%v): %s", res.Stdout, res.Stderr, err, rec.Body)
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

// Processes running at once are capped: one more is refused with 409
// until one has finished.
func TestProcessLimit(t *testing.T) {
	s, err := New(Options{MaxProcesses: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := func(argv ...string) (*process, error) {
		return s.start(&api.RunRequest{Argv: argv}, nil, newOutputLog(s.opts.MaxRetained, s.outMem))
	}
	a, err := start("sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := start("sleep", "30"); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/processes", strings.NewReader(`{"argv":["true"]}`)))
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "2 processes are running") {
		t.Fatalf("third process: %d %s", rec.Code, rec.Body)
	}
	a.kill()
	<-a.done
	// A command that cannot start does not keep the place it took.
	if _, err := start("/nonexistent"); err == nil || errors.Is(err, httpapi.ErrLimit) {
		t.Fatalf("start /nonexistent: %v", err)
	}
	if _, err := start("true"); err != nil {
		t.Fatalf("after one finished: %v", err)
	}
}
