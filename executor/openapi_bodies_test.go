package executor_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/plugins"
	jupyterplugin "github.com/bothy-sandbox/bothy/plugins/jupyter"
)

// contractPlugin is a Plugin for the schema test: a Jupyter stand-in that
// answers run_ipython, or a VS Code one with a token, or one that never
// becomes ready (its Start waits for ready).
type contractPlugin struct {
	name    string
	actions []string
	ready   chan struct{}
	token   string
	routes  []plugins.Route
}

var (
	_ plugins.Plugin  = (*contractPlugin)(nil)
	_ plugins.Router  = (*contractPlugin)(nil)
	_ plugins.Tokener = contractService{}
)

func (p *contractPlugin) Routes() []plugins.Route { return p.routes }

func (p *contractPlugin) Name() string           { return p.name }
func (p *contractPlugin) Actions() []string      { return p.actions }
func (p *contractPlugin) Recipe() plugins.Recipe { return plugins.Recipe{Name: p.name, Check: "true"} }
func (p *contractPlugin) Start(ctx context.Context, _ plugins.Env) (plugins.Service, error) {
	if p.ready != nil {
		select {
		case <-p.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return contractService{p}, nil
}

type contractService struct{ p *contractPlugin }

func (s contractService) ConnectionToken() string { return s.p.token }
func (s contractService) Handler() http.Handler {
	if s.p.name == "jupyter" {
		return contractKernels()
	}
	return nil
}

// contractKernels answers the Jupyter plugin's native routes as the real
// plugin does (its handler needs an IPython kernel, which the sandbox
// tests run), with the wire types of package api.
func contractKernels() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/kernels", func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, 200, []api.Kernel{{ID: "default", Pid: 7, Python: "/usr/bin/python3", RSS: 60 << 20}})
	})
	mux.HandleFunc("DELETE /v1/kernels/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "default" {
			httpapi.WriteError(w, 404, api.CodeNotFound, "kernel: no such kernel")
			return
		}
		w.WriteHeader(204)
	})
	mux.HandleFunc("POST /v1/kernels/{id}/execute", func(w http.ResponseWriter, r *http.Request) {
		var req api.KernelExecuteRequest
		if err := httpapi.Decode(r.Body, &req); err != nil {
			httpapi.Error(w, httpapi.BadRequest(err))
			return
		}
		out := api.KernelEvent{Type: api.KernelStdout, Text: "hi\n"}
		res := api.KernelEvent{Type: api.KernelResult, ExecutionCount: 1, Data: map[string]any{"text/plain": "2", "image/png": "iVBORw0KGgo="}}
		fail := api.KernelEvent{Type: api.KernelError, Name: "ValueError", Value: "no", Traceback: []string{"\x1b[31mValueError\x1b[0m: no"}}
		rep := api.KernelReply{Status: "error", ExecutionCount: 1, Interrupted: true, Restarted: true}
		if req.Stream {
			w.Header().Set("Content-Type", "application/x-ndjson")
			enc := json.NewEncoder(w)
			for _, ev := range []api.KernelEvent{out, res, fail, {Type: api.KernelEnd, Reply: &rep}} {
				enc.Encode(ev)
			}
			return
		}
		httpapi.WriteJSON(w, 200, api.KernelExecution{Results: []api.KernelEvent{res}, Logs: api.KernelLogs{Stdout: []string{"hi\n"}, Stderr: []string{}}, Error: &fail, Reply: rep, Truncated: true})
	})
	return mux
}
func (s contractService) Close() error { return nil }
func (s contractService) Execute(ctx context.Context, a *api.Action) (*api.Observation, error) {
	return api.NewObservation(api.ObservationRunIPython, "Code executed in IPython cell.", "2",
		map[string]any{"code": "1+1", "image_urls": nil}), nil
}

// inv marks a request as deliberately breaking the contract.
var inv = []string{invalidHeader, "1"}

// expect sends a request (body "" for none) and fails unless it is
// answered with status want.
func (c *contractConn) expect(t *testing.T, want int, method, path, body string, hdr ...string) reply {
	t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	rep := c.do(t, method, path, b, hdr...)
	if rep.status != want {
		t.Fatalf("%s %s %.200s: status %d, want %d: %.500s", method, path, body, rep.status, want, rep.body)
	}
	return rep
}

// jsonField decodes a JSON answer and returns its field name as a string.
func jsonField(t *testing.T, b []byte, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	s, _ := m[name].(string)
	return s
}

func q(path string) string { return url.QueryEscape(path) }

// multipartFiles builds a multipart body of "file" parts (name, content
// pairs) and one other part, which the routes ignore.
func multipartFiles(t *testing.T, pairs ...string) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("comment", "ignored")
	for i := 0; i+1 < len(pairs); i += 2 {
		fw, err := mw.CreateFormFile("file", pairs[i])
		if err != nil {
			t.Fatal(err)
		}
		fw.Write([]byte(pairs[i+1]))
	}
	mw.Close()
	return buf.String(), mw.FormDataContentType()
}

func tarGz(t *testing.T, pairs ...string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for i := 0; i+1 < len(pairs); i += 2 {
		tw.WriteHeader(&tar.Header{Name: pairs[i], Mode: 0o644, Size: int64(len(pairs[i+1])), Typeflag: tar.TypeReg})
		tw.Write([]byte(pairs[i+1]))
	}
	tw.Close()
	gz.Close()
	return buf.String()
}

// TestOpenAPISchemas drives every route of the executor with
// representative requests (successes and errors, streams as NDJSON and
// as server-sent events, the Go client's requests among them) and checks
// each request body, each answer and each streamed event against
// docs/openapi.yaml: the operation and status are documented, the media
// types are, the JSON matches its schema, every error is the one
// ErrorBody shape with a code that goes with its status, and renaming
// any property the answers carry makes them fail.
func TestOpenAPISchemas(t *testing.T) {
	contractNeedBash(t)
	doc := loadOpenAPIFile(t, "../docs/openapi.yaml")
	rec := &recorder{}
	dir := t.TempDir()
	starting := &contractPlugin{name: "browser", actions: []string{api.ActionBrowse, api.ActionBrowseInteractive}, ready: make(chan struct{})}
	jupyter := &contractPlugin{name: "jupyter", actions: []string{api.ActionRunIPython}, routes: jupyterplugin.Plugin{}.Routes()}
	vscode := &contractPlugin{name: "vscode", token: "vs-token"}
	netInfo := filepath.Join(t.TempDir(), "network.json")
	if err := os.WriteFile(netInfo, []byte(`{"mode":"bridge","driver":"bridge","address":"10.77.0.2/16","gateway":"10.77.0.1","ports":[{"host_ip":"127.0.0.1","host_port":20001,"container_port":8000,"protocol":"tcp"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := contractServer(t, executor.Options{
		APIKey: "contract-key", Cwd: dir, NetworkInfo: netInfo, NoChangeTimeout: 5 * time.Second, MaxRequestBody: 64 << 10, MaxUpload: 64 << 10,
		Plugins: []plugins.Plugin{starting, jupyter, vscode}, EagerPlugins: true,
	}, rec)
	exerciseInfo(t, c)
	exerciseProcesses(t, c, dir)
	exercisePtys(t, c, dir)
	exerciseSessions(t, c, dir)
	exerciseFiles(t, c, dir)
	exerciseOpenHands(t, c, dir)
	exercisePorts(t, c)
	exerciseKernels(t, c)

	// A second executor without key or plugins, then shut down.
	dir2 := t.TempDir()
	c2 := contractServer(t, executor.Options{Cwd: dir2}, rec)
	c2.expect(t, 200, "POST", "/execute_action", `{"action":{"action":"run_ipython","args":{"code":"1"}}}`)
	c2.expect(t, 200, "GET", "/vscode/connection_token", "")
	c2.shutdown()
	c2.expect(t, 503, "POST", "/v1/processes", `{"cmd":"true","wait":true}`)
	c2.expect(t, 503, "POST", "/v1/sessions", `{"name":"s"}`)
	c2.expect(t, 503, "POST", "/v1/sessions/default/run", `{"command":"true"}`)
	c2.expect(t, 503, "POST", "/execute_action", `{"action":{"action":"run","args":{"command":"true"}}}`)

	exchanges := rec.all()
	for _, p := range checkExchanges(doc, exchanges) {
		t.Error(p)
	}
	// Every route was exercised with success.
	ok := map[string]bool{}
	for _, ex := range exchanges {
		if op, _ := doc.operation(ex.method, ex.path); op != nil && ex.status < 300 {
			ok[ex.method+" "+op.template] = true
		}
	}
	for _, rt := range c.routes {
		if strings.HasPrefix(rt, " /plugins/") {
			continue // a plugin's own routes (every method): its API, not the executor's
		}
		if !ok[rt] {
			t.Errorf("route %s was not exercised with a successful answer", rt)
		}
	}
	// What the document lists and no exchange showed (for the curious).
	shown := map[string]bool{}
	for _, ex := range exchanges {
		if op, _ := doc.operation(ex.method, ex.path); op != nil {
			shown[ex.method+" "+op.template+" "+strconv.Itoa(ex.status)] = true
		}
	}
	var unshown []string
	for _, p := range doc.paths {
		for m, op := range p.item {
			opm, ok := op.(map[string]any)
			if !ok {
				continue
			}
			resp, _ := opm["responses"].(map[string]any)
			for code := range resp {
				if k := strings.ToUpper(m) + " " + p.template + " " + code; !shown[k] {
					unshown = append(unshown, k)
				}
			}
		}
	}
	sort.Strings(unshown)
	t.Logf("%d exchanges checked; documented answers not exercised: %s", len(exchanges), strings.Join(unshown, ", "))
}

func exerciseInfo(t *testing.T, c *contractConn) {
	c.expect(t, 200, "GET", "/alive", "")
	c.expect(t, 200, "GET", "/alive", "", api.APIKeyHeader, "wrong")
	c.expect(t, 200, "GET", "/v1/info", "")
	c.expect(t, 403, "GET", "/v1/info", "", append(inv, api.APIKeyHeader, "wrong")...)
	c.expect(t, 403, "POST", "/v1/processes", `{"cmd":"true","wait":true}`, append(inv, api.APIKeyHeader, "")...)
	c.expect(t, 405, "DELETE", "/v1/info", "", inv...)
	c.expect(t, 405, "PUT", "/v1/processes", "", inv...)
	c.expect(t, 404, "GET", "/v1/nothing", "", inv...)
	c.expect(t, 404, "GET", "/", "", inv...)
}

func exerciseProcesses(t *testing.T, c *contractConn, dir string) {
	ctx := contractCtx(t)
	gc := c.goClient(t)
	// Wait mode: text, bytes, truncated, timed out, failed to start.
	if _, err := gc.Run(ctx, api.RunRequest{Cmd: "echo out; echo err >&2", Env: map[string]string{"K": "V"}, Cwd: dir, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Run(ctx, api.RunRequest{Argv: []string{"cat"}, StdinB64: []byte{0xff, 0xfe}, MaxOutput: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 200, "POST", "/v1/processes", `{"cmd":"printf '\\377\\376' >&2; head -c 10000 /dev/zero | tr '\\0' a","wait":true,"max_output":100}`)
	c.expect(t, 200, "POST", "/v1/processes", `{"argv":["sleep","30"],"wait":true,"timeout":0.1,"stdin":"x"}`)
	c.expect(t, 400, "POST", "/v1/processes", `{"argv":["/nonexistent/prog"],"wait":true}`)
	c.expect(t, 400, "POST", "/v1/processes", `{"command":"true"}`, inv...)
	c.expect(t, 400, "POST", "/v1/processes", `{"cmd":"true","wait":true,"stream":true}`, inv...)
	c.expect(t, 400, "POST", "/v1/processes", `{"cmd":`, inv...)
	c.expect(t, 400, "POST", "/v1/processes", "", inv...)
	c.expect(t, 413, "POST", "/v1/processes", `{"cmd":"true","wait":true,"stdin":"`+strings.Repeat("x", 70<<10)+`"}`)

	// Stream mode: NDJSON, server-sent events, and the Go client.
	c.expect(t, 200, "POST", "/v1/processes", `{"cmd":"echo a; printf '\\377' >&2; exit 3","stream":true}`)
	c.expect(t, 200, "POST", "/v1/processes", `{"cmd":"echo a; kill -TERM $$","stream":true}`, "Accept", "text/event-stream")
	var out bytes.Buffer
	if _, err := gc.StreamWith(ctx, api.RunRequest{Cmd: "cat", StdinOpen: true},
		client.StreamIO{Stdout: &out, Stdin: strings.NewReader("piped\n")}); err != nil {
		t.Fatal(err)
	}
	// The output of a streamed process goes to its stream: 409 for others.
	resp := c.open(t, "POST", "/v1/processes", []byte(`{"cmd":"sleep 30","stream":true}`))
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	id := jsonField(t, line, "id")
	c.expect(t, 409, "GET", "/v1/processes/"+id+"/output", "")
	resp.Body.Close() // kills it

	// Background: stdin, output, wait, signal, delete.
	p, err := gc.Start(ctx, api.RunRequest{Cmd: "cat; echo done >&2", StdinOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	base := "/v1/processes/" + p.ID
	c.expect(t, 200, "GET", "/v1/processes", "")
	c.expect(t, 200, "GET", base, "")
	c.expect(t, 200, "POST", base+"/stdin", `{"data":"hello\n"}`)
	c.expect(t, 200, "POST", base+"/stdin", `{"b64":"/w==","close":false}`)
	c.expect(t, 400, "POST", base+"/stdin", `{"data":"a","b64":"YQ=="}`, inv...)
	c.expect(t, 400, "POST", base+"/stdin", `{"text":"a"}`, inv...)
	if err := gc.WriteStdin(ctx, p.ID, []byte("more\n"), true); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 409, "POST", base+"/stdin", `{"data":"late"}`)
	c.expect(t, 200, "POST", base+"/wait?timeout=30", "")
	c.expect(t, 200, "GET", base+"/output", "")
	c.expect(t, 200, "GET", base+"/output?offset=3&follow=1", "")
	c.expect(t, 200, "GET", base+"/output", "", "Accept", "text/event-stream")
	c.expect(t, 400, "GET", base+"/output?offset=-1", "", inv...)
	c.expect(t, 409, "POST", base+"/signal", `{"signal":"SIGINT"}`)
	c.expect(t, 200, "DELETE", base, "")
	c.expect(t, 404, "DELETE", base, "")

	p, err = gc.Start(ctx, api.RunRequest{Argv: []string{"sleep", "30"}, MaxOutput: 1024})
	if err != nil {
		t.Fatal(err)
	}
	base = "/v1/processes/" + p.ID
	c.expect(t, 200, "POST", base+"/wait?timeout=0.01", "")
	c.expect(t, 400, "POST", base+"/wait?timeout=soon", "", inv...)
	c.expect(t, 200, "POST", base+"/signal", `{"signal":"CONT","group":false}`)
	c.expect(t, 400, "POST", base+"/signal", `{"signal":"SIGNOPE"}`)
	c.expect(t, 400, "POST", base+"/signal", `{}`, inv...)
	if err := gc.Signal(ctx, p.ID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 200, "POST", base+"/wait", "")
	c.expect(t, 200, "GET", "/v1/processes", "")
	c.expect(t, 200, "DELETE", base, "")
	for _, r := range [][2]string{{"GET", ""}, {"DELETE", ""}, {"GET", "/output"}, {"POST", "/stdin"}, {"POST", "/signal"}, {"POST", "/wait"}} {
		body := ""
		switch r[1] {
		case "/stdin":
			body = `{"data":"x"}`
		case "/signal":
			body = `{"signal":"INT"}`
		}
		c.expect(t, 404, r[0], "/v1/processes/p999"+r[1], body)
	}
}

func exerciseSessions(t *testing.T, c *contractConn, dir string) {
	ctx := contractCtx(t)
	gc := c.goClient(t)
	if _, err := gc.CreateSession(ctx, api.SessionCreateRequest{Name: "build", Cwd: dir, Env: map[string]string{"A": "1"}, NoChangeTimeout: 5, MaxOutput: 1000}); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 409, "POST", "/v1/sessions", `{"name":"build"}`)
	c.expect(t, 400, "POST", "/v1/sessions", `{"name":"bad name"}`)
	c.expect(t, 400, "POST", "/v1/sessions", `{"name":"x","cwd":"/nonexistent"}`)
	c.expect(t, 400, "POST", "/v1/sessions", `{"title":"x"}`, inv...)
	c.expect(t, 201, "POST", "/v1/sessions", `{}`) // "default"
	c.expect(t, 201, "POST", "/v1/sessions", `{"name":"quiet","no_change_timeout":-1}`)
	c.expect(t, 200, "GET", "/v1/sessions", "")
	c.expect(t, 200, "GET", "/v1/sessions/build", "")
	c.expect(t, 404, "GET", "/v1/sessions/nope", "")
	c.expect(t, 400, "GET", "/v1/sessions/bad!name", "", inv...)
	c.expect(t, 400, "DELETE", "/v1/sessions/bad!name", "", inv...)

	run := "/v1/sessions/build/run"
	if _, err := gc.RunSession(ctx, "build", api.SessionRunRequest{Command: "echo hi", Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 200, "POST", run, `{"command":"read x","no_change_timeout":0.2}`)
	c.expect(t, 200, "POST", run, `{"command":"ls"}`)
	c.expect(t, 200, "POST", run, `{"command":"typed","is_input":true}`)
	c.expect(t, 200, "POST", run, `{"command":""}`)
	c.expect(t, 200, "POST", run, `{"command":"echo a\necho b"}`)
	c.expect(t, 200, "POST", run, `{"command":"sleep 30","timeout":0.1,"blocking":true}`)
	c.expect(t, 200, "POST", run, `{"command":"C-c","is_input":true}`)
	c.expect(t, 200, "POST", run, `{"command":"for i in $(seq 300); do echo line $i; done"}`)
	c.expect(t, 400, "POST", run, `{"cmd":"ls"}`, inv...)
	c.expect(t, 400, "POST", run, `{"command":"ls","timeout":-1}`, inv...)
	c.expect(t, 200, "POST", "/v1/sessions/default/run", `{"command":"pwd"}`)
	c.expect(t, 404, "POST", "/v1/sessions/nope/run", `{"command":"pwd"}`)
	c.expect(t, 200, "POST", "/v1/sessions/quiet/run", `{"command":"exit"}`)
	c.expect(t, 409, "POST", "/v1/sessions/quiet/run", `{"command":"true"}`)
	c.expect(t, 200, "DELETE", "/v1/sessions/quiet", "")
	if err := gc.DeleteSession(ctx, "build"); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 404, "DELETE", "/v1/sessions/build", "")
}

func exerciseFiles(t *testing.T, c *contractConn, dir string) {
	ctx := contractCtx(t)
	gc := c.goClient(t)
	f := filepath.Join(dir, "files")
	a := filepath.Join(f, "a.txt")
	if _, err := gc.WriteFile(ctx, a, strings.NewReader("one\ntwo\nthree\n"), client.WriteOptions{Mode: 0o640}); err != nil {
		t.Fatal(err)
	}
	oct := []string{"Content-Type", "application/octet-stream"}
	c.expect(t, 200, "PUT", "/v1/files?path="+q(a)+"&append=1", "four\n", oct...)
	c.expect(t, 409, "PUT", "/v1/files?path="+q(a)+"&exclusive=true", "x", oct...)
	c.expect(t, 400, "PUT", "/v1/files?path=rel.txt", "x", oct...)
	big := strings.Repeat("x", 70<<10)
	c.expect(t, 413, "PUT", "/v1/files?path="+q(filepath.Join(f, "big")), big, oct...)
	c.expect(t, 400, "PUT", "/v1/files?path="+q(a)+"&colour=red", "x", append(inv, oct...)...)
	os.WriteFile(filepath.Join(f, "x.png"), []byte(pngHeader+strings.Repeat("\x00", 64)), 0o644)
	os.WriteFile(filepath.Join(f, "x.bin"), []byte("\x00\x01\x02"), 0o644)
	os.Symlink("a.txt", filepath.Join(f, "link"))
	os.MkdirAll(filepath.Join(f, "sub", "deep"), 0o755)
	os.WriteFile(filepath.Join(f, "sub", ".hidden"), nil, 0o644)

	if _, err := gc.ReadFile(ctx, a, client.ReadOptions{Start: 2, End: 3}); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 200, "GET", "/v1/files?path="+q(a)+"&max_bytes=5", "")
	c.expect(t, 200, "GET", "/v1/files?path="+q(filepath.Join(f, "x.png")), "")
	c.expect(t, 200, "GET", "/v1/files?path="+q(filepath.Join(f, "x.bin")), "")
	c.expect(t, 413, "GET", "/v1/files?path="+q(filepath.Join(f, "x.png"))+"&max_bytes=4", "")
	c.expect(t, 404, "GET", "/v1/files?path="+q(filepath.Join(f, "nope")), "")
	c.expect(t, 400, "GET", "/v1/files?path="+q(f), "")
	c.expect(t, 400, "GET", "/v1/files?path="+q(a)+"&start=0", "", inv...)

	if _, err := gc.StatFollow(ctx, filepath.Join(f, "link")); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 200, "GET", "/v1/files/stat?path="+q(filepath.Join(f, "link")), "")
	c.expect(t, 404, "GET", "/v1/files/stat?path="+q(filepath.Join(f, "nope")), "")
	c.expect(t, 400, "GET", "/v1/files/stat?path=rel", "")
	c.expect(t, 200, "GET", "/v1/files/list?path="+q(f)+"&recursive=1&max_depth=2&hidden=0", "")
	c.expect(t, 200, "GET", "/v1/files/list?path="+q(f), "")
	c.expect(t, 200, "GET", "/v1/files/list?path="+q(filepath.Join(f, "sub", "deep")), "")
	c.expect(t, 404, "GET", "/v1/files/list?path="+q(filepath.Join(f, "nope")), "")
	c.expect(t, 400, "GET", "/v1/files/list?path="+q(a), "")

	b := filepath.Join(f, "b.txt")
	if _, err := gc.Move(ctx, a, b, false); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 200, "POST", "/v1/files/move", `{"src":"`+b+`","dst":"`+a+`","overwrite":true}`)
	os.WriteFile(b, []byte("b"), 0o644)
	c.expect(t, 409, "POST", "/v1/files/move", `{"src":"`+a+`","dst":"`+b+`"}`)
	c.expect(t, 404, "POST", "/v1/files/move", `{"src":"`+filepath.Join(f, "nope")+`","dst":"`+b+`"}`)
	c.expect(t, 400, "POST", "/v1/files/move", `{"src":"`+a+`"}`, inv...)
	c.expect(t, 400, "POST", "/v1/files/move", `{"from":"/a","to":"/b"}`, inv...)

	up := filepath.Join(dir, "up")
	if _, err := gc.Upload(ctx, filepath.Join(up, "raw.txt"), strings.NewReader("raw"), client.UploadOptions{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Upload(ctx, filepath.Join(up, "tgz"), strings.NewReader(tarGz(t, "t/x.txt", "x")), client.UploadOptions{Extract: true, Format: "tar.gz"}); err != nil {
		t.Fatal(err)
	}
	body, ct := multipartFiles(t, "m1.txt", "1", "m2.txt", "2")
	c.expect(t, 200, "POST", "/v1/files/upload?path="+q(up+"/"), body, "Content-Type", ct)
	body, ct = multipartFiles(t, "p.zip", string(zipBytes(t, "z/", "", "z/y.txt", "y")))
	c.expect(t, 200, "POST", "/v1/files/upload?path="+q(filepath.Join(up, "zip"))+"&extract=1", body, "Content-Type", ct)
	body, ct = multipartFiles(t)
	c.expect(t, 400, "POST", "/v1/files/upload?path="+q(up+"/"), body, "Content-Type", ct)
	body, ct = multipartFiles(t, "one", "1", "two", "2")
	c.expect(t, 400, "POST", "/v1/files/upload?path="+q(filepath.Join(up, "single")), body, "Content-Type", ct)
	c.expect(t, 400, "POST", "/v1/files/upload?path="+q(filepath.Join(up, "raw.txt", "under")), "x", oct...)
	c.expect(t, 400, "POST", "/v1/files/upload?path="+q(filepath.Join(up, "bad"))+"&extract=1&format=zip", "not a zip", oct...)

	c.expect(t, 200, "GET", "/v1/files/download?path="+q(a), "")
	c.expect(t, 200, "GET", "/v1/files/download?path="+q(filepath.Join(f, "x.png")), "")
	c.expect(t, 200, "GET", "/v1/files/download?path="+q(up), "")
	c.expect(t, 200, "GET", "/v1/files/download?path="+q(up)+"&format=tar", "")
	c.expect(t, 200, "GET", "/v1/files/download?path="+q(up)+"&format=tar.gz", "")
	c.expect(t, 404, "GET", "/v1/files/download?path="+q(filepath.Join(f, "nope")), "")
	c.expect(t, 400, "GET", "/v1/files/download?path="+q(up)+"&format=rar", "", inv...)

	c.expect(t, 200, "DELETE", "/v1/files?path="+q(b), "")
	c.expect(t, 413, "POST", "/v1/files/upload?path="+q(filepath.Join(up, "big")), big, oct...)
	c.expect(t, 409, "DELETE", "/v1/files?path="+q(up), "")
	if err := gc.Delete(ctx, up, true); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 404, "DELETE", "/v1/files?path="+q(up), "")
	c.expect(t, 400, "DELETE", "/v1/files?path=/", "")

	// The editor.
	e := filepath.Join(dir, "e.py")
	text := "a = 1\nb = 2\n"
	if _, err := gc.Edit(ctx, api.EditorCommand{Command: "create", Path: e, FileText: &text}); err != nil {
		t.Fatal(err)
	}
	c.expect(t, 200, "POST", "/v1/editor", `{"command":"view","path":"`+e+`","view_range":[1,-1]}`)
	c.expect(t, 200, "POST", "/v1/editor", `{"command":"view","path":"`+dir+`"}`)
	c.expect(t, 200, "POST", "/v1/editor", `{"command":"str_replace","path":"`+e+`","old_str":"b = 2","new_str":"b = 3"}`)
	c.expect(t, 200, "POST", "/v1/editor", `{"command":"insert","path":"`+e+`","insert_line":1,"new_str":"c = 0"}`)
	c.expect(t, 200, "POST", "/v1/editor", `{"command":"undo_edit","path":"`+e+`"}`)
	c.expect(t, 400, "POST", "/v1/editor", `{"command":"str_replace","path":"`+e+`","old_str":"zzz","new_str":"y"}`)
	c.expect(t, 400, "POST", "/v1/editor", `{"command":"view","path":"rel.py"}`)
	c.expect(t, 400, "POST", "/v1/editor", `{"command":"view","file":"`+e+`"}`, inv...)
	c.expect(t, 400, "POST", "/v1/editor", `{"command":"frobnicate","path":"`+e+`"}`, inv...)
}

func exerciseOpenHands(t *testing.T, c *contractConn, dir string) {
	ctx := contractCtx(t)
	gc := c.goClient(t)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("l0\nl1\n"), 0o644)
	for _, a := range []struct{ kind, args string }{
		{"run", `{"command":"echo hi"}`},
		{"run", `{"command":"sleep 1 &"}`},
		{"run", `{"command":"echo a\necho b"}`},
		{"run", `{"command":"pwd","is_static":true,"cwd":"` + dir + `","hidden":true}`},
		{"read", `{"path":"notes.txt","start":0,"end":-1}`},
		{"read", `{"path":"` + dir + `/notes.txt","impl_source":"oh_aci","view_range":[1,1]}`},
		{"read", `{"path":"missing.txt"}`},
		{"write", `{"path":"w.txt","content":"x"}`},
		{"edit", `{"command":"create","path":"` + dir + `/oh.py","file_text":"x = 1\n"}`},
		{"edit", `{"command":"str_replace","path":"` + dir + `/oh.py","old_str":"x = 1","new_str":"x = 2"}`},
		{"edit", `{"command":"insert","path":"` + dir + `/oh.py","insert_line":"1","new_str":"y"}`},
		{"edit", `{"command":"str_replace","path":"` + dir + `/oh.py","old_str":"zzz","new_str":"y"}`},
		{"run_ipython", `{"code":"1+1"}`},
	} {
		act, err := api.NewAction(a.kind, json.RawMessage(a.args), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gc.ExecuteAction(ctx, act); err != nil {
			t.Fatalf("%s %s: %v", a.kind, a.args, err)
		}
	}
	c.expect(t, 200, "POST", "/execute_action", `{"action":{"action":"run","args":{"command":"true","thought":"","security_risk":-1},"timeout":30,"id":3,"source":"agent","message":"Running command: true"}}`)
	c.expect(t, 400, "POST", "/execute_action", `{"action":{"action":"message","args":{"content":"hi"}}}`, inv...)
	c.expect(t, 400, "POST", "/execute_action", `{"action":{"action":"run","args":{}}}`, inv...)
	c.expect(t, 400, "POST", "/execute_action", `{"action":{"action":"edit","args":{"path":"/x","impl_source":"oh_aci","insert_line":[1]}}}`, inv...)
	c.expect(t, 400, "POST", "/execute_action", `{}`, inv...)
	c.expect(t, 400, "POST", "/execute_action", `{"action":`, inv...)
	c.expect(t, 413, "POST", "/execute_action", `{"action":{"action":"write","args":{"path":"big","content":"`+strings.Repeat("x", 70<<10)+`"}}}`)

	c.expect(t, 200, "GET", "/server_info", "")
	c.expect(t, 200, "GET", "/vscode/connection_token", "")
	c.expect(t, 200, "POST", "/list_files", `{"path":"`+dir+`"}`)
	c.expect(t, 200, "POST", "/list_files", "")
	c.expect(t, 200, "POST", "/list_files", `{"path":"/nonexistent","other":1}`)
	c.expect(t, 400, "POST", "/list_files", `{"path":1}`, inv...)
	body, ct := multipartFiles(t, "a.txt", "hello")
	c.expect(t, 200, "POST", "/upload_file?destination="+q(filepath.Join(dir, "ohup")), body, "Content-Type", ct)
	body, ct = multipartFiles(t, "d.zip", string(zipBytes(t, "d/x.txt", "x")))
	c.expect(t, 200, "POST", "/upload_file?destination="+q(filepath.Join(dir, "ohup"))+"&recursive=true", body, "Content-Type", ct)
	c.expect(t, 400, "POST", "/upload_file?destination=rel", body, "Content-Type", ct)
	body, ct = multipartFiles(t, "big.txt", strings.Repeat("x", 70<<10))
	c.expect(t, 413, "POST", "/upload_file?destination="+q(filepath.Join(dir, "ohup")), body, "Content-Type", ct)
	c.expect(t, 400, "POST", "/upload_file", "raw", append(inv, "Content-Type", "text/plain")...)
	c.expect(t, 200, "GET", "/download_files?path="+q(filepath.Join(dir, "ohup")), "")
	c.expect(t, 200, "GET", "/download_files?path="+q(filepath.Join(dir, "notes.txt")), "")
	c.expect(t, 404, "GET", "/download_files?path="+q(filepath.Join(dir, "nope")), "")
	c.expect(t, 400, "GET", "/download_files?path=rel", "")
}

func exercisePtys(t *testing.T, c *contractConn, dir string) {
	ctx := contractCtx(t)
	gc := c.goClient(t)
	c.expect(t, 200, "GET", "/v1/ptys", "")
	rep := c.expect(t, 201, "POST", "/v1/ptys", `{"argv":["cat"],"env":{"K":"V"},"cwd":"`+dir+`","rows":30,"cols":100}`)
	id := jsonField(t, rep.body, "id")
	c.expect(t, 200, "GET", "/v1/ptys", "")
	c.expect(t, 200, "GET", "/v1/ptys/"+id, "")
	c.expect(t, 200, "POST", "/v1/ptys/"+id+"/input", `{"data":"hi\n"}`)
	c.expect(t, 200, "POST", "/v1/ptys/"+id+"/input", `{"b64":"/w=="}`)
	c.expect(t, 200, "POST", "/v1/ptys/"+id+"/input", "x\n", "Content-Type", "application/octet-stream")
	c.expect(t, 200, "POST", "/v1/ptys/"+id+"/resize", `{"rows":40,"cols":120}`)
	c.expect(t, 200, "POST", "/v1/ptys/"+id+"/wait?timeout=0", "")
	c.expect(t, 200, "GET", "/v1/ptys/"+id+"/output", "")
	c.expect(t, 400, "GET", "/v1/ptys/"+id+"/output?offset=-1", "")
	c.expect(t, 400, "POST", "/v1/ptys/"+id+"/resize", `{"rows":0,"cols":120}`, inv...)
	c.expect(t, 400, "POST", "/v1/ptys/"+id+"/signal", `{"signal":"SIGNOPE"}`)
	c.expect(t, 400, "GET", "/v1/ptys/"+id+"/attach", "")
	conn, err := gc.AttachPty(ctx, id, client.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("\x04")) // EOF: cat exits
	if st, err := conn.Copy(io.Discard); err != nil || *st.ExitCode != 0 {
		t.Fatalf("attached cat: %+v %v", st, err)
	}
	conn.Close()
	c.expect(t, 200, "GET", "/v1/ptys/"+id+"/output?follow=1", "")
	c.expect(t, 409, "POST", "/v1/ptys/"+id+"/input", `{"data":"late"}`)
	c.expect(t, 409, "POST", "/v1/ptys/"+id+"/signal", `{"signal":"SIGINT"}`)
	c.expect(t, 200, "DELETE", "/v1/ptys/"+id, "")
	c.expect(t, 404, "GET", "/v1/ptys/"+id, "")
	c.expect(t, 400, "POST", "/v1/ptys", `{"argv":["/nonexistent/prog"]}`)
	c.expect(t, 400, "POST", "/v1/ptys", `{"rows":70000}`, inv...)
	// A signal reaches the foreground group.
	rep = c.expect(t, 201, "POST", "/v1/ptys", `{"cmd":"sleep 30"}`)
	id = jsonField(t, rep.body, "id")
	c.expect(t, 200, "POST", "/v1/ptys/"+id+"/signal", `{"signal":"SIGTERM"}`)
	c.expect(t, 200, "POST", "/v1/ptys/"+id+"/wait", "")
}

func exercisePorts(t *testing.T, c *contractConn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if conn, err := ln.Accept(); err == nil {
			conn.Write([]byte("hi"))
			conn.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	up := []string{"Connection", "Upgrade", "Upgrade", "tcp"}
	if rep := c.expect(t, 101, "GET", "/v1/ports/"+port+"/connect", "", up...); string(rep.body) != "hi" {
		t.Errorf("forwarded bytes: %q", rep.body)
	}
	c.expect(t, 426, "GET", "/v1/ports/"+port+"/connect", "")
	c.expect(t, 400, "GET", "/v1/ports/0/connect", "", up...)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	cport := strconv.Itoa(closed.Addr().(*net.TCPAddr).Port)
	closed.Close()
	c.expect(t, 502, "GET", "/v1/ports/"+cport+"/connect", "", up...)
	// The socket itself (its descriptor is dropped by this plain read;
	// client.PortSocket takes it).
	go func() {
		if conn, err := ln.Accept(); err == nil {
			conn.Close()
		}
	}()
	fd := []string{"Connection", "Upgrade", "Upgrade", "fd"}
	c.expect(t, 101, "GET", "/v1/ports/"+port+"/fd", "", fd...)
	c.expect(t, 426, "GET", "/v1/ports/"+port+"/fd", "")
	c.expect(t, 400, "GET", "/v1/ports/0/fd", "", fd...)
	c.expect(t, 502, "GET", "/v1/ports/"+cport+"/fd", "", fd...)
}

// exerciseKernels drives the Jupyter plugin's native routes (answered by
// contractKernels) through the executor's router.
func exerciseKernels(t *testing.T, c *contractConn) {
	c.expect(t, 200, "GET", "/v1/kernels", "")
	c.expect(t, 200, "POST", "/v1/kernels/default/execute", `{"code":"1+1","timeout":5,"cwd":"/tmp"}`)
	c.expect(t, 200, "POST", "/v1/kernels/k2/execute", `{"code":"1+1","stream":true}`)
	c.expect(t, 204, "DELETE", "/v1/kernels/default", "")
	c.expect(t, 404, "DELETE", "/v1/kernels/nope", "")
}
