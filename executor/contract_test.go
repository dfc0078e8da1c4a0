package executor_test

// The executor's wire contract, tested from the outside: the OpenHands
// dialect's observations against golden files (openhands_golden_test.go)
// and every request and response body against docs/openapi.yaml
// (openapi_schema_test.go). Both drive the executor only through HTTP on
// its Unix socket, so they hold whatever the packages behind the routes
// become. This file holds what they share: the one function that builds
// a server, the recorder of exchanges, and an ordered JSON tree.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
)

// contractConn is an executor under contract test and an HTTP client for
// its socket.
type contractConn struct {
	socket string
	key    string
	hc     *http.Client
	// routes are the "METHOD /path" pairs the executor serves.
	routes []string
	// shutdown closes the server as the executor's shutdown does: later
	// requests that would start something answer 503.
	shutdown func()
}

// contractServer builds an executor the way cmd/bothy-executor does
// (executor.New with Options) and serves its HTTP handler on a fresh Unix
// socket, behind rec when rec is not nil. It is the only place in the
// contract tests that knows how the executor is constructed: when the
// constructor moves, adapt this function and nothing else.
func contractServer(t testing.TB, opts executor.Options, rec *recorder) *contractConn {
	t.Helper()
	if opts.Reaper == nil {
		opts.Reaper = globalReaper // nil unless the tests run under a global reaper
	}
	if opts.Env == nil {
		opts.Env = os.Environ() // as cmd/bothy-executor passes its own
	}
	s, err := executor.New(opts)
	if err != nil {
		t.Fatalf("new executor: %v", err)
	}
	var routes []string
	for _, rt := range s.Routes() {
		routes = append(routes, rt.Method+" "+rt.Path)
	}
	h := s.Handler()
	if rec != nil {
		h = rec.wrap(h)
	}
	dir, err := os.MkdirTemp("", "bc") // short: sun_path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	ln, err := executor.Listen(sock)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	c := &contractConn{socket: sock, key: opts.APIKey, routes: routes, shutdown: func() { s.Close() }}
	c.hc = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	t.Cleanup(func() {
		c.hc.CloseIdleConnections()
		s.Close()
		srv.Close()
		<-done
		if rec != nil {
			rec.wait()
		}
		os.RemoveAll(dir)
	})
	return c
}

// contractNeedBash skips a test that needs bash (the sessions, OpenHands'
// run) where there is none.
func contractNeedBash(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("requires bash: the sessions are bash")
	}
}

// contractCtx bounds a test's requests.
func contractCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// goClient returns the Go client of the executor, with its key.
func (c *contractConn) goClient(t testing.TB) *client.Client {
	gc := client.New(c.socket, client.WithAPIKey(c.key))
	t.Cleanup(func() { gc.Close() })
	return gc
}

// invalidHeader marks a request the test sends knowing that it breaks the
// contract (malformed JSON, unknown fields, a missing key, ...): its body
// is not checked against the schema, and its answer must be an error.
const invalidHeader = "X-Contract-Invalid"

// reply is an HTTP answer, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with body (JSON unless a "Content-Type" is among
// hdr, name/value pairs) and reads the whole answer.
func (c *contractConn) do(t testing.TB, method, path string, body []byte, hdr ...string) reply {
	t.Helper()
	resp := c.open(t, method, path, body, hdr...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// open sends a request and returns the response, its body unread.
func (c *contractConn) open(t testing.TB, method, path string, body []byte, hdr ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(contractCtx(t), method, "http://executor"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set(api.APIKeyHeader, c.key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// exchange is one request and its answer as the server saw them.
type exchange struct {
	method   string
	path     string
	query    url.Values
	reqType  string // media type, without parameters
	reqBody  []byte
	invalid  bool // sent with invalidHeader
	status   int
	respType string // media type, without parameters
	respBody []byte
	aborted  bool // the handler cut the connection (panic)
}

func (e *exchange) String() string {
	s := e.method + " " + e.path
	if len(e.query) > 0 {
		s += "?" + e.query.Encode()
	}
	return fmt.Sprintf("%s → %d", s, e.status)
}

// recorder is an http.Handler wrapper that keeps every exchange.
type recorder struct {
	mu        sync.Mutex
	exchanges []*exchange
	inflight  sync.WaitGroup
}

// wait waits for the handlers still running (streams the client left).
func (rec *recorder) wait() { rec.inflight.Wait() }

// all returns the exchanges recorded so far, once no handler runs.
func (rec *recorder) all() []*exchange {
	rec.wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]*exchange(nil), rec.exchanges...)
}

func mediaType(v string) string {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return v
	}
	return mt
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.inflight.Add(1)
		defer rec.inflight.Done()
		ex := &exchange{
			method: r.Method, path: r.URL.Path, query: r.URL.Query(),
			reqType: mediaType(r.Header.Get("Content-Type")),
			invalid: r.Header.Get(invalidHeader) != "",
		}
		if r.Body != nil {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ex.reqBody = b
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rw := &recordingWriter{ResponseWriter: w}
		defer func() {
			ex.status, ex.respBody = rw.status, rw.buf.Bytes()
			if ex.status == 0 {
				ex.status = http.StatusOK
			}
			ex.respType = mediaType(rw.Header().Get("Content-Type"))
			if v := recover(); v != nil {
				ex.aborted = true
				defer panic(v)
			}
			rec.mu.Lock()
			rec.exchanges = append(rec.exchanges, ex)
			rec.mu.Unlock()
		}()
		h.ServeHTTP(rw, r)
	})
}

// recordingWriter copies what a handler writes. Unwrap lets
// http.ResponseController reach the connection (flushes, deadlines).
type recordingWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack records a connection taken over after an upgrade as a 101.
func (w *recordingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, brw, err
}

// An ordered JSON tree: objects keep their keys in the order the server
// wrote them, so that golden files pin the order too. Values are
// jsonObject, []any, json.Number, string, bool or nil.

// jsonObject is a JSON object with its keys in order.
type jsonObject []jsonMember

type jsonMember struct {
	key   string
	value any
}

// get returns the value of key, and whether it is there.
func (o jsonObject) get(key string) (any, bool) {
	for _, m := range o {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

// parseOrdered parses exactly one JSON value.
func parseOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := jsonObject{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			obj = append(obj, jsonMember{k.(string), v})
		}
		_, err := dec.Token()
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	}
	return tok, nil
}

// renderOrdered writes v as indented JSON, keys in their order, without
// HTML escapes.
func renderOrdered(v any) []byte {
	var b bytes.Buffer
	writeOrdered(&b, v, "")
	b.WriteByte('\n')
	return b.Bytes()
}

func writeOrdered(b *bytes.Buffer, v any, indent string) {
	switch v := v.(type) {
	case jsonObject:
		if len(v) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, m := range v {
			b.WriteString(indent + "  ")
			writeString(b, m.key)
			b.WriteString(": ")
			writeOrdered(b, m.value, indent+"  ")
			if i < len(v)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, e := range v {
			b.WriteString(indent + "  ")
			writeOrdered(b, e, indent+"  ")
			if i < len(v)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	case string:
		writeString(b, v)
	case json.Number:
		b.WriteString(v.String())
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	default:
		panic(fmt.Sprintf("renderOrdered: %T", v))
	}
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}

// mapOrdered rebuilds v bottom-up, replacing each value by f(path, value);
// path is the JSON pointer of the value ("/extras/metadata/pid").
func mapOrdered(v any, path string, f func(path string, v any) any) any {
	switch x := v.(type) {
	case jsonObject:
		out := make(jsonObject, len(x))
		for i, m := range x {
			out[i] = jsonMember{m.key, mapOrdered(m.value, path+"/"+pointerEscape(m.key), f)}
		}
		v = out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = mapOrdered(e, path+"/"+strconv.Itoa(i), f)
		}
		v = out
	}
	return f(path, v)
}

func pointerEscape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
