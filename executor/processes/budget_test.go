package processes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
)

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
	s, h := newService(t, Options{Output: budget.NewOutput(64<<10, nil)})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/processes",
		strings.NewReader(`{"cmd":"head -c 4000000 /dev/zero | tr '\\0' x","wait":true}`)))
	var res api.RunResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || rec.Code != 200 {
		t.Fatalf("%d %v", rec.Code, err)
	}
	if !res.StdoutTruncated || len(res.Stdout) > 64<<10+2*outputFloor+100 || !strings.Contains(res.Stdout, "bytes truncated") {
		t.Fatalf("stdout of 4 MB under a 64 KiB budget: %d bytes, truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
	if used := s.opts.Output.Used(); used != 0 {
		t.Fatalf("output budget in use after the request: %d", used)
	}
}

// Stdin sent as application/octet-stream is copied through, far beyond the
// JSON body cap.
func TestStdinStreamBeyondJSONCap(t *testing.T) {
	s, h := newService(t, Options{Bodies: &httpapi.Bodies{Max: 64 << 10, Mem: budget.NewMemory(1<<30, nil)}})
	p, err := s.start(&api.RunRequest{Argv: []string{"wc", "-c"}, StdinOpen: true}, nil, newOutputLog(s.opts.MaxRetained, s.opts.Output))
	if err != nil {
		t.Fatal(err)
	}
	const n = 5 << 20
	req := httptest.NewRequest("POST", "/v1/processes/"+p.id+"/stdin?close=1", io.LimitReader(zeros{}, n))
	req.Header.Set("Content-Type", "application/octet-stream")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
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
	_, h := newService(t, Options{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/processes",
		strings.NewReader(`{"cmd":"printf 'a\\303'; sleep 0.2; printf '\\251b'; sleep 0.2; printf end >&2","wait":true}`)))
	var res api.RunResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || res.Stdout != "aéb" || res.Stderr != "end" {
		t.Fatalf("output %q %q (%v): %s", res.Stdout, res.Stderr, err, rec.Body)
	}
}

// Processes running at once are capped: one more is refused with 409
// until one has finished.
func TestProcessLimit(t *testing.T) {
	s, h := newService(t, Options{MaxProcesses: 2})
	start := func(argv ...string) (*process, error) {
		return s.start(&api.RunRequest{Argv: argv}, nil, newOutputLog(s.opts.MaxRetained, s.opts.Output))
	}
	a, err := start("sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := start("sleep", "30"); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/processes", strings.NewReader(`{"argv":["true"]}`)))
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
