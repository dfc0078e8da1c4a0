package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/sandbox"
	"github.com/bothy-sandbox/bothy/serve"
)

// debianImage points the test's bothy at the Debian default image (bash and
// python3, which OpenHands' actions and the in-sandbox servers need).
// It returns a CLI on it (newCLI's, with that default image).
func debianCLI(t *testing.T) *cli {
	t.Helper()
	img := os.Getenv("BOTHY_DEFAULT_IMAGE")
	if img == "" || strings.Contains(img, "busybox") {
		t.Skip("requires the Debian default image in BOTHY_DEFAULT_IMAGE (make build; make test sets it)")
	}
	if _, err := os.Stat(img); err != nil {
		t.Skipf("requires the Debian default image: %v", err)
	}
	c := newCLI(t)
	t.Setenv("BOTHY_DEFAULT_IMAGE", img)
	// Import it now: a /start should not wait for it.
	c.ok("run", "--rm", "--", "true")
	return c
}

// sandboxManager opens the manager of c's state.
func sandboxManager(c *cli) (*sandbox.Manager, error) {
	opts, err := managerOptions(c.root)
	if err != nil {
		return nil, err
	}
	return sandbox.Open(opts)
}

// serveProc is a `bothy serve` child process.
type serveProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	log  *bytes.Buffer
}

// startServe starts `bothy serve` on addr ("" for a free port) with key in
// an API key file, and extra flags, and waits until it listens.
func startServe(t *testing.T, c *cli, addr, key string, extra ...string) *serveProc {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := c.child(append([]string{"serve", "--listen", addr, "--api-key-file", keyFile, "--memory-per-factor", "512m"}, extra...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{t: t, cmd: cmd, log: &bytes.Buffer{}}
	t.Cleanup(p.kill)
	br := bufio.NewReader(stderr)
	re := regexp.MustCompile(`listening on http://(\S+)`)
	for {
		line, err := br.ReadString('\n')
		p.log.WriteString(line)
		if m := re.FindStringSubmatch(line); m != nil {
			p.addr = m[1]
			break
		}
		if err != nil {
			t.Fatalf("bothy serve did not start: %v\n%s", err, p.log)
		}
	}
	go io.Copy(p.log, br) //nolint:errcheck // the log, for failures
	return p
}

// kill ends the server with SIGKILL, as a crash would.
func (p *serveProc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// oh is an HTTP client that speaks to bothy serve as OpenHands'
// RemoteRuntime does: X-API-Key on every request of its session, and the
// runtime's session key added once /start answered.
type oh struct {
	t       *testing.T
	api     string
	headers http.Header
	hc      *http.Client
}

func newOH(t *testing.T, base, key string) *oh {
	return &oh{t: t, api: "http://" + base, headers: http.Header{"X-Api-Key": {key}}, hc: &http.Client{Timeout: 3 * time.Minute}}
}

// do sends a request and returns the status and the body, decoded into out
// when out is not nil.
func (o *oh) do(method, url string, body any, out any) int {
	o.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		o.t.Fatal(err)
	}
	for k, v := range o.headers {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := o.hc.Do(req)
	if err != nil {
		o.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			o.t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	}
	return resp.StatusCode
}

// waitAlive is RemoteRuntime's _wait_until_alive: GET /runtime/{id} until
// pod_status is ready, then GET {url}/alive.
func (o *oh) waitAlive(rt *serve.Runtime) {
	o.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var info serve.Runtime
		if code := o.do("GET", o.api+"/runtime/"+rt.RuntimeID, nil, &info); code == 200 && info.RuntimeID == rt.RuntimeID && info.PodStatus == serve.PodReady {
			if o.do("GET", rt.URL+"/alive", nil, nil) == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	o.t.Fatalf("runtime %s never became alive", rt.RuntimeID)
}

// run sends a CmdRunAction through the runtime URL and returns the
// observation's content (and the HTTP status).
func (o *oh) run(rt *serve.Runtime, command string) (string, int) {
	o.t.Helper()
	var obs struct {
		Observation string `json:"observation"`
		Content     string `json:"content"`
	}
	code := o.do("POST", rt.URL+"/execute_action", map[string]any{"action": map[string]any{
		"action": "run", "args": map[string]any{"command": command, "blocking": true, "timeout": 30},
	}}, &obs)
	return obs.Content, code
}

// v0Command is the command RemoteRuntime sends (its action execution
// server, which the executor replaces).
var v0Command = []string{"/openhands/micromamba/bin/micromamba", "run", "-n", "openhands", "poetry", "run",
	"python", "-u", "-m", "openhands.runtime.action_execution_server", "60000",
	"--working-dir", "/workspace", "--plugins", "agent_skills", "jupyter", "--username", "root", "--user-id", "0"}

// TestServeRemoteRuntime drives bothy serve with OpenHands' RemoteRuntime
// call sequence against real sandboxes: look up the session, registry
// prefix and image, /start, wait until alive through the runtime URL, run
// actions through it, restart the server mid-way (SIGKILL) and find the
// runtime again, pause (503 through the URL) and resume, refuse wrong
// keys, and /stop.
func TestServeRemoteRuntime(t *testing.T) {
	c := debianCLI(t)
	srv := startServe(t, c, "", "runtime-api-key")
	o := newOH(t, srv.addr, "runtime-api-key")
	sid := "oh-session-1"

	// Keys: none or a wrong one is refused on every API route.
	bad := newOH(t, srv.addr, "wrong")
	for _, path := range []string{"/list", "/sessions/" + sid, "/registry_prefix"} {
		if code := bad.do("GET", bad.api+path, nil, nil); code != 401 {
			t.Errorf("GET %s with a wrong key: %d, want 401", path, code)
		}
	}
	if code := bad.do("POST", bad.api+"/start", map[string]any{"session_id": "x"}, nil); code != 401 {
		t.Errorf("POST /start with a wrong key: %d, want 401", code)
	}

	// _check_existing_runtime: none yet.
	if code := o.do("GET", o.api+"/sessions/"+sid, nil, nil); code != 404 {
		t.Fatalf("GET /sessions/%s before start: %d, want 404", sid, code)
	}
	// _build_runtime's look-ups.
	var prefix struct {
		RegistryPrefix string `json:"registry_prefix"`
	}
	if code := o.do("GET", o.api+"/registry_prefix", nil, &prefix); code != 200 || prefix.RegistryPrefix == "" {
		t.Errorf("GET /registry_prefix: %d %+v", code, prefix)
	}
	var exists struct {
		Exists bool `json:"exists"`
	}
	if code := o.do("GET", o.api+"/image_exists?image=no-such-image:1", nil, &exists); code != 200 || exists.Exists {
		t.Errorf("GET /image_exists of a missing image: %d %+v", code, exists)
	}

	// _start_runtime, then _wait_until_alive (the default image was
	// imported by debianCLI, so that the figure is a start's).
	start := time.Now()
	var rt serve.Runtime
	code := o.do("POST", o.api+"/start", map[string]any{
		"image": "", "command": v0Command, "working_dir": "/openhands/code/",
		"environment": map[string]string{"DEBUG": "true", "TASK": "42", "NO_CHANGE_TIMEOUT_SECONDS": "1"}, "session_id": sid, "resource_factor": 1,
	}, &rt)
	if code != 201 || rt.RuntimeID == "" || rt.SessionAPIKey == "" || !strings.HasSuffix(rt.URL, "/"+rt.RuntimeID) {
		t.Fatalf("POST /start: %d %+v\n%s", code, rt, srv.log)
	}
	if len(rt.WorkHosts) != 2 {
		t.Errorf("work_hosts: %v", rt.WorkHosts)
	}
	o.headers.Set("X-Session-API-Key", rt.SessionAPIKey)
	o.waitAlive(&rt)
	t.Logf("/start to /alive through the runtime URL: %v", time.Since(start).Round(time.Millisecond))
	if code := o.do("GET", o.api+"/image_exists?image=bothy-default:latest", nil, &exists); code != 200 || !exists.Exists {
		t.Errorf("GET /image_exists of the started image: %d %+v", code, exists)
	}

	// Actions through the URL: environment and working directory mapped.
	if out, code := o.run(&rt, "echo $TASK; pwd"); code != 200 || out != "42\n/workspace" {
		t.Errorf("run through the runtime URL: %d %q", code, out)
	}
	// NO_CHANGE_TIMEOUT_SECONDS in the environment: a silent command
	// answers after 1 s, as OpenHands' server does.
	var obs struct {
		Extras struct {
			Metadata struct {
				Suffix string `json:"suffix"`
			} `json:"metadata"`
		} `json:"extras"`
	}
	o.do("POST", rt.URL+"/execute_action", map[string]any{"action": map[string]any{"action": "run", "args": map[string]any{"command": "sleep 30"}}}, &obs)
	if !strings.Contains(obs.Extras.Metadata.Suffix, "no new output after 1 seconds") {
		t.Errorf("no-change timeout from NO_CHANGE_TIMEOUT_SECONDS=1: suffix %q", obs.Extras.Metadata.Suffix)
	}
	o.do("POST", rt.URL+"/execute_action", map[string]any{"action": map[string]any{"action": "run", "args": map[string]any{"command": "C-c", "is_input": true}}}, nil)
	// Memory limit from resource_factor 1 × --memory-per-factor 512m.
	if out, _ := o.run(&rt, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max"); out != "536870912" {
		t.Errorf("memory limit of resource_factor 1: %q, want 536870912", out)
	}

	// A wrong or missing session key on the URL: refused by serve, before
	// the sandbox.
	wrongSession := newOH(t, srv.addr, "runtime-api-key")
	wrongSession.headers.Set("X-Session-API-Key", "not-the-key")
	if _, code := wrongSession.run(&rt, "true"); code != 401 {
		t.Errorf("action with a wrong session key: %d, want 401", code)
	}
	if _, code := newOH(t, srv.addr, "runtime-api-key").run(&rt, "true"); code != 401 {
		t.Errorf("action without a session key: %d, want 401", code)
	}

	// The server dies; a new one on the same address serves the runtime.
	o.run(&rt, "echo before > /tmp/mark")
	srv.kill()
	srv = startServe(t, c, srv.addr, "runtime-api-key")
	var again serve.Runtime
	if code := o.do("GET", o.api+"/sessions/"+sid, nil, &again); code != 200 || again.RuntimeID != rt.RuntimeID || again.Status != serve.StatusRunning || again.URL != rt.URL || again.SessionAPIKey != rt.SessionAPIKey {
		t.Fatalf("GET /sessions/%s after a restart: %d %+v", sid, code, again)
	}
	if out, code := o.run(&rt, "cat /tmp/mark"); code != 200 || out != "before" {
		t.Errorf("action after a restart: %d %q", code, out)
	}
	// A second /start of the session answers the same runtime.
	var dup serve.Runtime
	if code := o.do("POST", o.api+"/start", map[string]any{"command": v0Command, "session_id": sid}, &dup); code/100 != 2 || dup.RuntimeID != rt.RuntimeID {
		t.Errorf("second POST /start of the session: %d %+v", code, dup)
	}
	var list struct {
		Runtimes []serve.Runtime `json:"runtimes"`
	}
	if code := o.do("GET", o.api+"/list", nil, &list); code != 200 || len(list.Runtimes) != 1 || list.Runtimes[0].SessionID != sid {
		t.Errorf("GET /list: %d %+v", code, list)
	}
	var batch []serve.Runtime
	if code := o.do("GET", o.api+"/sessions/batch?ids="+sid+"&ids=nope", nil, &batch); code != 200 || len(batch) != 1 || batch[0].RuntimeID != rt.RuntimeID {
		t.Errorf("GET /sessions/batch: %d %+v", code, batch)
	}

	// close() with pause_closed_runtimes: /pause; the URL answers 503
	// (RemoteRuntime resumes on it); /resume brings it back.
	o.run(&rt, "sh -c 'while :; do date +%s%N > /tick; sleep 0.05; done' > /dev/null 2>&1 &")
	// "ticking" once /tick has been seen written: a second look could
	// land between the loop's truncation of /tick and its write (it did,
	// once, on a loaded machine).
	if out, _ := o.run(&rt, "for i in $(seq 100); do [ -s /tick ] && { echo ticking; break; }; sleep 0.05; done"); out != "ticking" {
		t.Fatalf("the background loop did not start: %q", out)
	}
	if code := o.do("POST", o.api+"/pause", map[string]string{"runtime_id": rt.RuntimeID}, nil); code != 200 {
		t.Fatalf("POST /pause: %d\n%s", code, srv.log)
	}
	if code := o.do("GET", o.api+"/sessions/"+sid, nil, &again); code != 200 || again.Status != serve.StatusPaused {
		t.Errorf("status of a paused runtime: %d %q", code, again.Status)
	}
	if _, code := o.run(&rt, "true"); code != 503 {
		t.Errorf("action on a paused runtime: %d, want 503", code)
	}
	frozenTick := readSandboxFile(t, c, rt.RuntimeID, "/tick")
	time.Sleep(300 * time.Millisecond)
	if tick := readSandboxFile(t, c, rt.RuntimeID, "/tick"); tick != frozenTick {
		t.Errorf("a paused sandbox's loop still ran: %q then %q", frozenTick, tick)
	}
	var resumed serve.Runtime
	if code := o.do("POST", o.api+"/resume", map[string]string{"runtime_id": rt.RuntimeID}, &resumed); code != 200 || resumed.Status != serve.StatusRunning || resumed.SessionAPIKey != rt.SessionAPIKey {
		t.Fatalf("POST /resume: %d %+v", code, resumed)
	}
	o.waitAlive(&rt)
	if out, code := o.run(&rt, "echo back"); code != 200 || out != "back" {
		t.Errorf("action after resume: %d %q", code, out)
	}

	// Proxied latency against the socket directly.
	proxied, direct := measureProxy(t, c, o, &rt)
	t.Logf("GET /alive median: proxied through bothy serve %v, on the socket directly %v", proxied, direct)

	// /start to /alive against `bothy run -d` (the CLI, a process, with
	// the same limits) until it returns, interleaved: the figure's context.
	var viaServe, viaRun []time.Duration
	for i := range 3 {
		s := time.Now()
		var b serve.Runtime
		if code := o.do("POST", o.api+"/start", map[string]any{"command": v0Command, "session_id": fmt.Sprintf("bench-%d", i), "resource_factor": 1}, &b); code != 201 {
			t.Fatalf("POST /start: %d", code)
		}
		if code := o.do("GET", b.URL+"/alive", nil, nil); code != 200 {
			t.Fatalf("GET /alive: %d", code)
		}
		viaServe = append(viaServe, time.Since(s))
		s = time.Now()
		if out, err := c.child("run", "-d", "--memory", "512m", "--cpus", "1").CombinedOutput(); err != nil {
			t.Fatalf("bothy run -d: %v %s", err, out)
		}
		viaRun = append(viaRun, time.Since(s))
		o.do("POST", o.api+"/stop", map[string]string{"runtime_id": b.RuntimeID}, nil)
	}
	t.Logf("/start to /alive: %v; bothy run -d, interleaved: %v", viaServe, viaRun)

	// close(): /stop removes the runtime; its URL is gone.
	if code := o.do("POST", o.api+"/stop", map[string]string{"runtime_id": rt.RuntimeID}, nil); code != 200 {
		t.Fatalf("POST /stop: %d", code)
	}
	if code := o.do("GET", o.api+"/sessions/"+sid, nil, nil); code != 404 {
		t.Errorf("GET /sessions after /stop: %d, want 404", code)
	}
	if code := o.do("GET", rt.URL+"/alive", nil, nil); code != 404 {
		t.Errorf("runtime URL after /stop: %d, want 404", code)
	}
	if code := o.do("POST", o.api+"/stop", map[string]string{"runtime_id": rt.RuntimeID}, nil); code != 404 {
		t.Errorf("second /stop: %d, want 404", code)
	}
}

// readSandboxFile reads a file a sandbox wrote in its root filesystem from
// its upper directory on the host: the executor of a frozen sandbox
// answers nothing.
func readSandboxFile(t *testing.T, c *cli, id, path string) string {
	t.Helper()
	out := c.ok("inspect", id)
	var sbs []struct {
		UpperDir string `json:"UpperDir"`
	}
	if err := json.Unmarshal([]byte(out), &sbs); err != nil || len(sbs) != 1 {
		t.Fatalf("inspect: %v %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(sbs[0].UpperDir, path))
	if err != nil {
		t.Fatalf("read %s in the sandbox's upper directory: %v", path, err)
	}
	return string(b)
}

// measureProxy times GET /alive through the runtime URL and on the
// sandbox's socket directly (medians of 200, keep-alive both ways).
func measureProxy(t *testing.T, c *cli, o *oh, rt *serve.Runtime) (proxied, direct time.Duration) {
	t.Helper()
	m, err := sandboxManager(c)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := m.Get(t.Context(), rt.RuntimeID)
	if err != nil {
		t.Fatal(err)
	}
	sc := sb.Client()
	defer sc.Close()
	median := func(f func()) time.Duration {
		var d []time.Duration
		for range 200 {
			s := time.Now()
			f()
			d = append(d, time.Since(s))
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	proxied = median(func() {
		if code := o.do("GET", rt.URL+"/alive", nil, nil); code != 200 {
			t.Fatalf("proxied /alive: %d", code)
		}
	})
	direct = median(func() {
		if err := sc.Alive(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	return proxied, direct
}

// agentServer stands in for OpenHands' agent server (and the agent's web
// apps): an HTTP server on 127.0.0.1 at each port given, answering /health
// and, elsewhere, the request's path and headers as JSON.
const agentServer = `
import http.server, json, os, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok" if self.path == "/health" else json.dumps({"port": self.server.server_port, "path": self.path, "headers": dict(self.headers), "key": os.environ.get("OH_SESSION_API_KEYS_0")}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
ports = [int(p) for p in sys.argv[1:] if p.isdigit()]
for p in ports[1:]:
    threading.Thread(target=http.server.ThreadingHTTPServer(("127.0.0.1", p), H).serve_forever, daemon=True).start()
http.server.ThreadingHTTPServer(("127.0.0.1", ports[0]), H).serve_forever()
`

// TestServeAgentServer starts a runtime whose command is not OpenHands' V0
// action server (APIRemoteWorkspace's agent server, here a Python HTTP
// server on --port): its URL reaches that port inside a sandbox with no
// network, through the executor's port forwarding. /health answers
// without the session key (the SDK polls it so), the rest needs it, and
// serve's own key never reaches the sandbox. The work ports under the URL
// are forwarded too, a browser's ?tkn= setting a cookie.
func TestServeAgentServer(t *testing.T) {
	c := debianCLI(t)
	srv := startServe(t, c, "", "k1")
	o := newOH(t, srv.addr, "k1")
	var rt serve.Runtime
	code := o.do("POST", o.api+"/start", map[string]any{
		"image": "", "command": `python3 -c "$AGENT_PY" --port 60000 12000`, "working_dir": "/", "session_id": "agent-server-1",
		"run_as_user": 10001, "fs_group": 10001, "image_pull_policy": "IfNotPresent", "runtime_class": "sysbox-runc",
		"environment": map[string]string{"AGENT_PY": agentServer},
	}, &rt)
	if code != 201 {
		t.Fatalf("POST /start: %d\n%s", code, srv.log)
	}
	// APIRemoteWorkspace's wait: /sessions/{id} until ready, then
	// {url}/health with no key.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var info serve.Runtime
		o.do("GET", o.api+"/sessions/agent-server-1", nil, &info)
		resp, err := http.Get(rt.URL + "/health")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if info.PodStatus == serve.PodReady && resp.StatusCode == 200 && string(b) == "ok" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent server never healthy: %v\n%s", err, srv.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out := c.ok("inspect", rt.RuntimeID); !strings.Contains(out, `"NetworkMode": "none"`) {
		t.Errorf("the runtime's sandbox is not on --network none: %s", out)
	}
	var echo struct {
		Port    int               `json:"port"`
		Path    string            `json:"path"`
		Headers map[string]string `json:"headers"`
		Key     string            `json:"key"`
	}
	if code := o.do("GET", rt.URL+"/api/conversations", nil, nil); code != 401 {
		t.Errorf("agent server without the session key: %d, want 401", code)
	}
	o.headers.Set("X-Session-API-Key", rt.SessionAPIKey)
	if code := o.do("GET", rt.URL+"/api/conversations?x=1", nil, &echo); code != 200 || echo.Port != 60000 || echo.Path != "/api/conversations?x=1" {
		t.Fatalf("agent server through the URL: %d %+v", code, echo)
	}
	if echo.Key != rt.SessionAPIKey {
		t.Errorf("the agent server's OH_SESSION_API_KEYS_0 is %q, not the session key", echo.Key)
	}
	if echo.Headers[http.CanonicalHeaderKey("X-Session-API-Key")] != rt.SessionAPIKey {
		t.Errorf("the session key did not reach the agent server: %v", echo.Headers)
	}
	for k := range echo.Headers {
		if strings.EqualFold(k, "X-API-Key") {
			t.Errorf("serve's own key reached the sandbox: %v", echo.Headers)
		}
	}
	// A browser on work-1: ?tkn= once, then the cookie.
	jar := &cookieJar{}
	hc := &http.Client{Jar: jar}
	for _, u := range []string{rt.URL + "/work-1/app?tkn=" + rt.SessionAPIKey, rt.URL + "/work-1/next"} {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"port": 12000`) {
			t.Errorf("GET %s: %d %s", u, resp.StatusCode, b)
		}
	}
	if resp, err := http.Get(rt.URL + "/work-1/app"); err != nil || resp.StatusCode != 401 {
		t.Errorf("work-1 without key or cookie: %v %v", resp.StatusCode, err)
	}
	// Nothing listens on work-2: 502, said so.
	if code := o.do("GET", rt.URL+"/work-2/", nil, nil); code != 502 {
		t.Errorf("work-2 with nothing listening: %d, want 502", code)
	}
	if code := o.do("POST", o.api+"/stop", map[string]string{"runtime_id": rt.RuntimeID}, nil); code != 200 {
		t.Errorf("POST /stop: %d", code)
	}
}

// cookieJar keeps cookies per path prefix, enough for one host.
type cookieJar struct{ cookies []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) { j.cookies = append(j.cookies, cs...) }
func (j *cookieJar) Cookies(u *url.URL) []*http.Cookie {
	var out []*http.Cookie
	for _, c := range j.cookies {
		if strings.HasPrefix(u.Path, c.Path) {
			out = append(out, c)
		}
	}
	return out
}

// TestPortForward forwards a host port to a port inside a sandbox with no
// network (bothy port-forward, a child process until interrupted): an HTTP
// server inside answers through it, many connections at once; a port
// nothing listens on closes the connection and says why on stderr.
func TestPortForward(t *testing.T) {
	c := debianCLI(t)
	id := strings.TrimSpace(c.ok("run", "-d", "--name", "fwd", "--network", "none", "--no-change-timeout", "7"))
	if out := c.ok("inspect", "fwd"); !strings.Contains(out, "NO_CHANGE_TIMEOUT_SECONDS=7") {
		t.Errorf("bothy run --no-change-timeout 7 did not set NO_CHANGE_TIMEOUT_SECONDS: %s", out)
	}
	c.ok("exec", "-e", "AGENT_PY="+agentServer, "fwd", "--", "sh", "-c", `(python3 -c "$AGENT_PY" 8000 >/dev/null 2>&1 &); `+
		`for i in $(seq 100); do python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8000))' 2>/dev/null && exit 0; sleep 0.1; done; exit 1`)
	for _, tc := range []struct{ port, want string }{{"8000", `"port": 8000`}, {"8001", ""}} {
		cmd := c.child("port-forward", id[:12], "127.0.0.1:0:"+tc.port)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(stderr)
		line, err := br.ReadString('\n')
		m := regexp.MustCompile(`Forwarding from (\S+) -> ` + tc.port).FindStringSubmatch(line)
		if m == nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("port-forward: %q %v", line, err)
		}
		if tc.want != "" {
			errs := make(chan error, 8)
			for range 8 {
				go func() {
					resp, err := http.Get("http://" + m[1] + "/x")
					if err != nil {
						errs <- err
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if !strings.Contains(string(b), tc.want) {
						err = fmt.Errorf("answer %q", b)
					}
					errs <- err
				}()
			}
			for range 8 {
				if err := <-errs; err != nil {
					t.Errorf("through port-forward: %v", err)
				}
			}
		} else {
			conn, err := net.Dial("tcp", m[1])
			if err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := conn.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("connection to a closed port: read %d %v, want EOF", n, err)
			}
			conn.Close()
			line, _ := br.ReadString('\n')
			if !strings.Contains(line, "connect to port 8001 in the sandbox") {
				t.Errorf("port-forward's report of a closed port: %q", line)
			}
		}
		cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Errorf("port-forward after SIGINT: %v", err)
		}
	}
}

func TestParseForward(t *testing.T) {
	for in, want := range map[string]string{
		"8080:80": "127.0.0.1:8080", "0.0.0.0:0:3000": "0.0.0.0:0", "[::1]:9000:22": "[::1]:9000",
	} {
		if got, _, err := parseForward(in); err != nil || got != want {
			t.Errorf("parseForward(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"80", "x:80", "8080:0", "8080:70000", ":80:80", "-1:80"} {
		if _, _, err := parseForward(in); err == nil {
			t.Errorf("parseForward(%q): no error", in)
		}
	}
}

// TestServePool: with --pool, a V0 /start whose image, network and limits
// are a pool's claims one of its sandboxes, which gets the session's name,
// environment, working directory and key; the pool is refilled; a /start
// asking for other limits starts a sandbox cold.
func TestServePool(t *testing.T) {
	c := debianCLI(t)
	c.ok("pool", "create", "oh", "--size", "1", "-m", "512m", "--cpus", "1") // a runtime of resource_factor 1
	t.Cleanup(func() { c.run("", "pool", "rm", "oh") })
	srv := startServe(t, c, "", "pool-api-key", "--pool", "oh")
	o := newOH(t, srv.addr, "pool-api-key")
	start := func(sid string, factor float64) (*serve.Runtime, string) {
		t.Helper()
		var rt serve.Runtime
		code := o.do("POST", o.api+"/start", map[string]any{
			"image": "", "command": v0Command, "environment": map[string]string{"TASK": sid}, "session_id": sid, "resource_factor": factor,
		}, &rt)
		if code != 201 {
			t.Fatalf("POST /start %s: %d\n%s", sid, code, srv.log)
		}
		s := newOH(t, srv.addr, "pool-api-key")
		s.headers.Set("X-Session-API-Key", rt.SessionAPIKey)
		s.waitAlive(&rt)
		if out, code := s.run(&rt, "echo $TASK; pwd"); code != 200 || out != sid+"\n/workspace" {
			t.Errorf("run in %s: %d %q", sid, code, out)
		}
		var got []struct {
			Name     string `json:"Name"`
			FromPool string `json:"FromPool"`
		}
		if err := json.Unmarshal([]byte(c.ok("inspect", rt.RuntimeID)), &got); err != nil || len(got) != 1 || got[0].Name != sid {
			t.Fatalf("inspect %s: %v %+v", sid, err, got)
		}
		return &rt, got[0].FromPool
	}
	if _, from := start("pooled-1", 1); from != "oh" {
		t.Errorf("a /start that fits the pool: from_pool %q, want oh", from)
	}
	if _, from := start("cold-1", 2); from != "" {
		t.Errorf("a /start with twice the pool's memory: from_pool %q, want a cold start", from)
	}
	// The claim started the pool's filler.
	deadline := time.Now().Add(2 * time.Minute)
	ready := func() int {
		var pools []struct {
			Ready int `json:"ready"`
		}
		if err := json.Unmarshal([]byte(c.ok("pool", "ls", "--format", "json")), &pools); err != nil || len(pools) != 1 {
			t.Fatalf("pool ls: %v %+v", err, pools)
		}
		return pools[0].Ready
	}
	for ready() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the pool was not refilled: %s", c.ok("pool", "ls"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, from := start("pooled-2", 1); from != "oh" {
		t.Errorf("a /start after the refill: from_pool %q, want oh", from)
	}
}

// TestServeForkSnapshot drives bothy's fork and snapshot routes of bothy
// serve against real sandboxes: POST /fork of a runtime with n 2 answers
// two runtimes that serve actions through their URLs with keys of their
// own, see the parent's file as it was at the fork, and keep their writes
// from the parent and from each other; the parent answers again at the
// same URL. POST /snapshot names the parent's files; a /start with that
// snapshot sees them; GET /snapshots lists it; DELETE is refused (409)
// while a runtime is on it and done once they are stopped.
func TestServeForkSnapshot(t *testing.T) {
	c := debianCLI(t)
	srv := startServe(t, c, "", "fork-key")
	o := newOH(t, srv.addr, "fork-key")
	client := func(rt *serve.Runtime) *oh {
		t.Helper()
		s := newOH(t, srv.addr, "fork-key")
		s.headers.Set("X-Session-API-Key", rt.SessionAPIKey)
		s.waitAlive(rt)
		return s
	}
	run := func(s *oh, rt *serve.Runtime, cmd string) string {
		t.Helper()
		out, code := s.run(rt, cmd)
		if code != 200 {
			t.Fatalf("run %q in %s: %d %q\n%s", cmd, rt.SessionID, code, out, srv.log)
		}
		return out
	}
	var parent serve.Runtime
	if code := o.do("POST", o.api+"/start", map[string]any{"image": "", "command": v0Command, "session_id": "fork-parent"}, &parent); code != 201 {
		t.Fatalf("POST /start: %d\n%s", code, srv.log)
	}
	p := client(&parent)
	run(p, &parent, "echo p0 > /workspace/f")

	var fr serve.ForkResponse
	if code := o.do("POST", o.api+"/fork", map[string]any{"runtime_id": parent.RuntimeID, "n": 2}, &fr); code != 201 || len(fr.Runtimes) != 2 {
		t.Fatalf("POST /fork: %d %+v\n%s", code, fr, srv.log)
	}
	if fr.Runtime.RuntimeID != parent.RuntimeID || fr.Runtime.URL != parent.URL || fr.Runtime.SessionAPIKey != parent.SessionAPIKey {
		t.Errorf("the parent after its fork: %+v", fr.Runtime)
	}
	p.waitAlive(&parent)
	run(p, &parent, "echo p1 > /workspace/f")
	kids := make([]*oh, 2)
	for i := range fr.Runtimes {
		rt := &fr.Runtimes[i]
		if rt.SessionAPIKey == parent.SessionAPIKey || rt.URL == parent.URL {
			t.Errorf("child %d shares the parent's key or URL: %+v", i, rt)
		}
		kids[i] = client(rt)
		run(kids[i], rt, fmt.Sprintf("echo c%d >> /workspace/f", i))
	}
	for i := range fr.Runtimes {
		if got := run(kids[i], &fr.Runtimes[i], "cat /workspace/f"); got != fmt.Sprintf("p0\nc%d", i) {
			t.Errorf("child %d sees %q", i, got)
		}
	}
	if got := run(p, &parent, "cat /workspace/f"); got != "p1" {
		t.Errorf("the parent sees %q after its children wrote", got)
	}

	var sr serve.SnapshotResponse
	if code := o.do("POST", o.api+"/snapshot", map[string]any{"runtime_id": parent.RuntimeID, "name": "oh-setup"}, &sr); code != 201 || sr.Snapshot.Name != "oh-setup" || sr.Snapshot.Depth != 2 {
		t.Fatalf("POST /snapshot: %d %+v\n%s", code, sr, srv.log)
	}
	var from serve.Runtime
	if code := o.do("POST", o.api+"/start", map[string]any{"image": "some/other:1", "command": v0Command, "session_id": "from-snap", "snapshot": "oh-setup"}, &from); code != 201 {
		t.Fatalf("POST /start with a snapshot: %d\n%s", code, srv.log)
	}
	if got := run(client(&from), &from, "cat /workspace/f"); got != "p1" {
		t.Errorf("a runtime on the snapshot sees %q", got)
	}
	var list struct {
		Snapshots []serve.SnapshotInfo `json:"snapshots"`
	}
	if code := o.do("GET", o.api+"/snapshots", nil, &list); code != 200 || !slices.ContainsFunc(list.Snapshots, func(s serve.SnapshotInfo) bool { return s.Name == "oh-setup" && s.Sandboxes == 2 }) {
		t.Errorf("GET /snapshots: %d %+v", code, list)
	}
	if code := o.do("DELETE", o.api+"/snapshots/oh-setup", nil, nil); code != 409 {
		t.Errorf("DELETE of a snapshot in use: %d, want 409", code)
	}
	for _, id := range []string{parent.RuntimeID, from.RuntimeID} {
		if code := o.do("POST", o.api+"/stop", map[string]any{"runtime_id": id}, nil); code != 200 {
			t.Fatalf("POST /stop %s: %d", id, code)
		}
	}
	if code := o.do("DELETE", o.api+"/snapshots/oh-setup", nil, nil); code != 200 {
		t.Errorf("DELETE of a snapshot no longer used: %d\n%s", code, srv.log)
	}
}
