package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// fakeManager keeps sandboxes in memory; Create records its options.
type fakeManager struct {
	sbs     map[string]*sandbox.Sandbox
	created []sandbox.CreateOptions
	paused  map[string]bool
	snaps   []*sandbox.Snapshot
	forkErr error
}

var _ Manager = (*fakeManager)(nil)

func newFake() *fakeManager {
	return &fakeManager{sbs: map[string]*sandbox.Sandbox{}, paused: map[string]bool{}}
}

func (f *fakeManager) Create(_ context.Context, o sandbox.CreateOptions) (*sandbox.Sandbox, error) {
	for _, sb := range f.sbs {
		if o.Name != "" && sb.Name == o.Name {
			return nil, sandbox.ErrNameInUse
		}
	}
	f.created = append(f.created, o)
	id := strings.Repeat("0", 31) + string(rune('a'+len(f.created)))
	sb := &sandbox.Sandbox{ID: id, Name: o.Name, Image: "img", Labels: o.Labels, Status: sandbox.StatusRunning, APIKey: "sk-" + id}
	f.sbs[id] = sb
	return sb, nil
}

func (f *fakeManager) Get(_ context.Context, ref string) (*sandbox.Sandbox, error) {
	if sb, ok := f.sbs[ref]; ok {
		return sb, nil
	}
	return nil, sandbox.ErrNotFound
}

func (f *fakeManager) List(context.Context) ([]*sandbox.Sandbox, error) {
	var out []*sandbox.Sandbox
	for _, sb := range f.sbs {
		out = append(out, sb)
	}
	return out, nil
}

func (f *fakeManager) Remove(_ context.Context, ref string, _ bool) error {
	if _, ok := f.sbs[ref]; !ok {
		return sandbox.ErrNotFound
	}
	delete(f.sbs, ref)
	return nil
}

func (f *fakeManager) Pause(_ context.Context, ref string) error  { f.paused[ref] = true; return nil }
func (f *fakeManager) Resume(_ context.Context, ref string) error { f.paused[ref] = false; return nil }
func (f *fakeManager) Paused(sb *sandbox.Sandbox) (bool, error)   { return f.paused[sb.ID], nil }
func (f *fakeManager) Image(_ context.Context, ref string) (*oci.Image, error) {
	if ref == "present:1" {
		return &oci.Image{}, nil
	}
	return nil, oci.ErrNotFound
}

func (f *fakeManager) GetPool(_ context.Context, name string) (*sandbox.Pool, error) {
	return nil, sandbox.ErrPoolNotFound
}

func (f *fakeManager) Claim(context.Context, sandbox.ClaimOptions) (*sandbox.Sandbox, sandbox.Claimed, error) {
	return nil, sandbox.Claimed{}, sandbox.ErrPoolEmpty
}

func newTestServer(t *testing.T) (*fakeManager, *httptest.Server) {
	t.Helper()
	f := newFake()
	s, err := New(Options{Manager: f, APIKey: "key", MemoryPerFactor: 1 << 30, CPUsPerFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return f, ts
}

func call(t *testing.T, ts *httptest.Server, method, path, key, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func TestAPIKey(t *testing.T) {
	_, ts := newTestServer(t)
	for _, key := range []string{"", "nope", "key2"} {
		if code := call(t, ts, "GET", "/list", key, "", nil); code != 401 {
			t.Errorf("GET /list with key %q: %d, want 401", key, code)
		}
	}
	if code := call(t, ts, "GET", "/list", "key", "", nil); code != 200 {
		t.Errorf("GET /list with the key: %d", code)
	}
	if _, err := New(Options{Manager: newFake()}); err == nil {
		t.Error("New without an API key: no error")
	}
}

// The mapping of /start onto a sandbox (docs/serve.md).
func TestStartMapping(t *testing.T) {
	f, ts := newTestServer(t)
	var rt Runtime
	code := call(t, ts, "POST", "/start", "key", `{"image":"ghcr.io/x/runtime:1","command":["python","-m","openhands.runtime.action_execution_server","60000","--working-dir","/workspace/","--plugins","agent_skills","jupyter","vscode","other","--username","openhands"],
		"working_dir":"/openhands/code/","environment":{"A":"1"},"session_id":"s1","resource_factor":2,"runtime_class":"sysbox-runc"}`, &rt)
	if code != 201 || rt.Status != StatusRunning || rt.PodStatus != PodReady || rt.SessionID != "s1" || !strings.HasSuffix(rt.URL, "/"+rt.RuntimeID) || rt.SessionAPIKey == "" {
		t.Fatalf("/start: %d %+v", code, rt)
	}
	o := f.created[0]
	if o.Image != "ghcr.io/x/runtime:1" || o.Name != "s1" || o.Workdir != "/workspace" || len(o.Cmd) != 0 ||
		!slices.Equal(o.Env, []string{"A=1", "VSCODE_PORT=60001"}) || o.Limits.Memory != 2<<30 || o.Limits.CPUs != 2 || o.Labels[LabelSession] != "s1" || o.Labels[LabelPort] != "" ||
		!slices.Equal(o.OptionalPlugins, []string{"jupyter", "vscode"}) || len(o.Plugins) != 0 {
		t.Errorf("V0 start: %+v", o)
	}
	// The SDK's agent server: a shell string, its --port reached.
	code = call(t, ts, "POST", "/start", "key", `{"image":"agent:1","command":"/usr/local/bin/openhands-agent-server --port 8123","working_dir":"/","session_id":"agent-server-x y"}`, &rt)
	o = f.created[1]
	if code != 201 || !slices.Equal(o.Cmd, []string{"/bin/sh", "-c", "/usr/local/bin/openhands-agent-server --port 8123"}) || o.Labels[LabelPort] != "8123" || o.Name != "" || o.Workdir != "/" || o.Limits.Memory != 1<<30 ||
		len(o.APIKey) != 64 || !slices.Contains(o.Env, "OH_SESSION_API_KEYS_0="+o.APIKey) {
		t.Errorf("agent start: %d %+v", code, o)
	}
	// The same session again: the same runtime, nothing created.
	var again Runtime
	if code := call(t, ts, "POST", "/start", "key", `{"session_id":"s1"}`, &again); code != 200 || len(f.created) != 2 {
		t.Errorf("second /start of a session: %d, %d created", code, len(f.created))
	}
	// A sandbox of the user's own named like the session: the runtime
	// gets no name.
	f.sbs["ffffffffffffffffffffffffffffffff"] = &sandbox.Sandbox{ID: "ffffffffffffffffffffffffffffffff", Name: "mine", Status: sandbox.StatusRunning}
	if code := call(t, ts, "POST", "/start", "key", `{"session_id":"mine"}`, &again); code != 201 || f.created[len(f.created)-1].Name != "" || again.SessionID != "mine" {
		t.Errorf("/start of a session named like another sandbox: %d %+v", code, again)
	}
	for _, body := range []string{`{}`, `{"session_id":"a/b"}`, `{"session_id":"x","resource_factor":-1}`, `{"session_id":"x","environment":{"A=B":"1"}}`,
		`{"session_id":"x","command":"srv --port 0"}`, `{"session_id":"x","command":["srv"],"working_dir":"rel"}`, `not json`} {
		if code := call(t, ts, "POST", "/start", "key", body, nil); code != 400 {
			t.Errorf("/start %s: %d, want 400", body, code)
		}
	}
}

func TestLifecycleRoutes(t *testing.T) {
	f, ts := newTestServer(t)
	var rt Runtime
	call(t, ts, "POST", "/start", "key", `{"session_id":"s1"}`, &rt)
	body := `{"runtime_id":"` + rt.RuntimeID + `"}`
	if code := call(t, ts, "POST", "/pause", "key", body, nil); code != 200 || !f.paused[rt.RuntimeID] {
		t.Errorf("/pause: %d", code)
	}
	var got Runtime
	if call(t, ts, "GET", "/sessions/s1", "key", "", &got); got.Status != StatusPaused {
		t.Errorf("status when paused: %q", got.Status)
	}
	// The runtime URL answers 503 while paused.
	req, _ := http.NewRequest("GET", rt.URL+"/alive", nil)
	req.Host = ts.Listener.Addr().String()
	resp, err := http.Get(ts.URL + "/" + rt.RuntimeID + "/alive")
	if err != nil || resp.StatusCode != 503 {
		t.Errorf("runtime URL when paused: %v %v", resp.StatusCode, err)
	}
	if code := call(t, ts, "POST", "/resume", "key", body, &got); code != 200 || got.Status != StatusRunning {
		t.Errorf("/resume: %d %+v", code, got)
	}
	if code := call(t, ts, "GET", "/runtime/"+rt.RuntimeID, "key", "", &got); code != 200 || got.PodStatus != PodReady {
		t.Errorf("/runtime: %d %+v", code, got)
	}
	var batch []Runtime
	if code := call(t, ts, "GET", "/sessions/batch?ids=s1&ids=s2", "key", "", &batch); code != 200 || len(batch) != 1 {
		t.Errorf("/sessions/batch: %d %+v", code, batch)
	}
	var exists map[string]any
	if call(t, ts, "GET", "/image_exists?image=present:1", "key", "", &exists); exists["exists"] != true {
		t.Errorf("/image_exists of a present image: %v", exists)
	}
	if call(t, ts, "GET", "/image_exists?image=absent:1", "key", "", &exists); exists["exists"] != false {
		t.Errorf("/image_exists of an absent image: %v", exists)
	}
	if code := call(t, ts, "POST", "/stop", "key", body, nil); code != 200 || len(f.sbs) != 0 {
		t.Errorf("/stop: %d", code)
	}
	for _, path := range []string{"/stop", "/pause", "/resume"} {
		if code := call(t, ts, "POST", path, "key", body, nil); code != 404 {
			t.Errorf("%s of a removed runtime: %d, want 404", path, code)
		}
	}
	if code := call(t, ts, "GET", "/sessions/s1", "key", "", nil); code != 404 {
		t.Errorf("/sessions of a removed runtime: %d", code)
	}
	var nf map[string]string
	if code := call(t, ts, "GET", "/runtime/"+rt.RuntimeID, "key", "", &nf); code != 404 || nf["pod_status"] != "not found" {
		t.Errorf("/runtime of a removed runtime: %d %v", code, nf)
	}
}

func TestTarget(t *testing.T) {
	o := Options{VSCodePort: 60001, WorkPorts: [2]int{12000, 12001}}
	v0 := &sandbox.Sandbox{Labels: map[string]string{LabelSession: "s"}}
	agent := &sandbox.Sandbox{Labels: map[string]string{LabelSession: "s", LabelPort: "60000"}}
	for _, tc := range []struct {
		sb         *sandbox.Sandbox
		rest, path string
		port       int
	}{
		{v0, "/execute_action", "/execute_action", 0},
		{v0, "/vscode", "/", 60001},
		{v0, "/vscode/static/x.js", "/static/x.js", 60001},
		{v0, "/vscodex", "/vscodex", 0},
		{agent, "/api/conversations", "/api/conversations", 60000},
		{agent, "/work-2/a", "/a", 12001},
	} {
		if port, path := target(tc.sb, tc.rest, o); port != tc.port || path != tc.path {
			t.Errorf("target(%q) = %d %q, want %d %q", tc.rest, port, path, tc.port, tc.path)
		}
	}
}

func FuzzStartRequest(f *testing.F) {
	f.Add(`{"image":"x","command":["a","--port","1"],"session_id":"s","environment":{"A":"1"},"resource_factor":1}`)
	f.Add(`{"command":"a --port=99 --working-dir /w","session_id":"s"}`)
	f.Fuzz(func(t *testing.T, body string) {
		var req StartRequest
		if json.Unmarshal([]byte(body), &req) != nil || req.validate() != nil {
			return
		}
		s := &Server{opts: Options{MemoryPerFactor: 1 << 30}}
		opts, err := s.createOptions(&req)
		if err != nil {
			return
		}
		if opts.Labels[LabelSession] != req.SessionID {
			t.Fatalf("session label %q", opts.Labels[LabelSession])
		}
		if opts.Workdir != "" && !strings.HasPrefix(opts.Workdir, "/") {
			t.Fatalf("relative workdir %q", opts.Workdir)
		}
	})
}

// Forks and snapshots, in memory: Fork starts N children through Create
// with the parent's labels and environment, adjusted by Each.
func (f *fakeManager) Fork(ctx context.Context, ref string, o sandbox.ForkOptions) (*sandbox.Snapshot, []*sandbox.Sandbox, error) {
	parent, ok := f.sbs[ref]
	if !ok {
		return nil, nil, sandbox.ErrNotFound
	}
	if f.forkErr != nil {
		return nil, nil, f.forkErr
	}
	var kids []*sandbox.Sandbox
	for i := range o.N {
		opts := sandbox.CreateOptions{Labels: maps.Clone(parent.Labels), Env: slices.Clone(f.created[0].Env), APIKey: ""}
		o.Each(i, &opts)
		c, err := f.Create(ctx, opts)
		if err != nil {
			return nil, kids, err
		}
		kids = append(kids, c)
	}
	return &sandbox.Snapshot{ID: strings.Repeat("f", 64)}, kids, nil
}

func (f *fakeManager) TakeSnapshot(_ context.Context, ref string, o sandbox.SnapshotOptions) (*sandbox.Snapshot, error) {
	if _, ok := f.sbs[ref]; !ok {
		return nil, sandbox.ErrNotFound
	}
	s := &sandbox.Snapshot{ID: strings.Repeat("5", 64), Name: o.Name, Image: "img", Depth: 1, Complete: true, Users: []string{ref}}
	f.snaps = append(f.snaps, s)
	return s, nil
}

func (f *fakeManager) ListSnapshots(context.Context) ([]*sandbox.Snapshot, error) {
	return f.snaps, nil
}

func (f *fakeManager) GetSnapshot(_ context.Context, ref string) (*sandbox.Snapshot, error) {
	for _, s := range f.snaps {
		if s.Name == ref || s.ID == ref {
			return s, nil
		}
	}
	return nil, sandbox.ErrSnapshotNotFound
}

func (f *fakeManager) RemoveSnapshot(ctx context.Context, ref string) error {
	s, err := f.GetSnapshot(ctx, ref)
	if err != nil {
		return err
	}
	if len(s.Users) > 0 {
		return sandbox.ErrSnapshotInUse
	}
	f.snaps = slices.DeleteFunc(f.snaps, func(x *sandbox.Snapshot) bool { return x == s })
	return nil
}

// TestForkRoutes: POST /fork starts N children, each with a session of its
// own (given or made), named by it; an agent server's children get keys
// of their own, in the environment too; bad requests are refused before
// anything is forked, with their status; the manager's refusals map to 409
// and 404.
func TestForkRoutes(t *testing.T) {
	f, ts := newTestServer(t)
	var parent Runtime
	if code := call(t, ts, "POST", "/start", "key", `{"session_id":"s1","command":"python -m openhands.agent_server --port 8000"}`, &parent); code != 201 {
		t.Fatalf("start: %d", code)
	}
	var resp ForkResponse
	if code := call(t, ts, "POST", "/fork", "key", `{"runtime_id":"`+parent.RuntimeID+`","n":3}`, &resp); code != 201 {
		t.Fatalf("fork: %d", code)
	}
	if len(resp.Runtimes) != 3 || resp.Runtime.RuntimeID != parent.RuntimeID || resp.SnapshotID == "" {
		t.Fatalf("fork answered %+v", resp)
	}
	parentKey := f.created[0].APIKey
	for i, rt := range resp.Runtimes {
		o := f.created[i+1]
		if !strings.HasPrefix(rt.SessionID, "s1-fork-") || !strings.HasSuffix(rt.SessionID, fmt.Sprintf("-%d", i+1)) || o.Name != rt.SessionID {
			t.Errorf("child %d: session %q name %q", i, rt.SessionID, o.Name)
		}
		if o.APIKey == "" || o.APIKey == parentKey || !slices.Contains(o.Env, "SESSION_API_KEY="+o.APIKey) || slices.Contains(o.Env, "SESSION_API_KEY="+parentKey) {
			t.Errorf("child %d's key %q, env %v (parent's key %q)", i, o.APIKey, o.Env, parentKey)
		}
	}
	if code := call(t, ts, "POST", "/fork", "key", `{"runtime_id":"`+parent.RuntimeID+`","session_ids":["a","b"]}`, &resp); code != 201 || resp.Runtimes[1].SessionID != "b" {
		t.Errorf("fork with session_ids: %d %+v", code, resp.Runtimes)
	}
	before := len(f.created)
	for body, want := range map[string]int{
		`{"runtime_id":"` + parent.RuntimeID + `","n":65}`:                    400,
		`{"runtime_id":"` + parent.RuntimeID + `","n":2,"session_ids":["x"]}`: 400,
		`{"runtime_id":"` + parent.RuntimeID + `","session_ids":["x","x"]}`:   400,
		`{"runtime_id":"` + parent.RuntimeID + `","session_ids":["s1"]}`:      409,
		`{"runtime_id":"` + parent.RuntimeID + `","session_ids":["a/b"]}`:     400,
		`{"runtime_id":"` + parent.RuntimeID + `","volumes":"copy"}`:          400,
		`{"runtime_id":"` + strings.Repeat("9", 64) + `"}`:                    404,
		`{"runtime_id":`: 400,
	} {
		if code := call(t, ts, "POST", "/fork", "key", body, nil); code != want {
			t.Errorf("fork %s: %d, want %d", body, code, want)
		}
	}
	f.forkErr = fmt.Errorf("fork x: %w: its volumes /a:/b …", sandbox.ErrForkVolumes)
	var e map[string]string
	if code := call(t, ts, "POST", "/fork", "key", `{"runtime_id":"`+parent.RuntimeID+`"}`, &e); code != 409 || !strings.Contains(e["detail"], "/a:/b") {
		t.Errorf("fork refused for its volumes: %d %v", code, e)
	}
	if len(f.created) != before {
		t.Errorf("refused forks created %d sandboxes", len(f.created)-before)
	}
	if code := call(t, ts, "POST", "/fork", "", `{"runtime_id":"`+parent.RuntimeID+`"}`, nil); code != 401 {
		t.Errorf("fork without the key: %d", code)
	}
}

// TestSnapshotRoutes: POST /snapshot names a runtime's snapshot and answers
// it with the runtime; GET /snapshots lists; DELETE refuses one in use
// (409) and an unknown one (404); /start with a snapshot starts on it,
// with no image and not from a pool.
func TestSnapshotRoutes(t *testing.T) {
	f, ts := newTestServer(t)
	var rt Runtime
	if code := call(t, ts, "POST", "/start", "key", `{"session_id":"s1"}`, &rt); code != 201 {
		t.Fatalf("start: %d", code)
	}
	if code := call(t, ts, "POST", "/snapshot", "key", `{"runtime_id":"`+rt.RuntimeID+`","name":"../x"}`, nil); code != 400 {
		t.Errorf("snapshot with a bad name: %d", code)
	}
	var sr SnapshotResponse
	if code := call(t, ts, "POST", "/snapshot", "key", `{"runtime_id":"`+rt.RuntimeID+`","name":"setup"}`, &sr); code != 201 || sr.Snapshot.Name != "setup" || sr.Runtime.RuntimeID != rt.RuntimeID {
		t.Fatalf("snapshot: %d %+v", code, sr)
	}
	var list struct {
		Snapshots []SnapshotInfo `json:"snapshots"`
	}
	if code := call(t, ts, "GET", "/snapshots", "key", "", &list); code != 200 || len(list.Snapshots) != 1 || list.Snapshots[0].Sandboxes != 1 {
		t.Errorf("snapshots: %d %+v", code, list)
	}
	if code := call(t, ts, "DELETE", "/snapshots/setup", "key", "", nil); code != 409 {
		t.Errorf("delete of a snapshot in use: %d", code)
	}
	if code := call(t, ts, "DELETE", "/snapshots/nope", "key", "", nil); code != 404 {
		t.Errorf("delete of no snapshot: %d", code)
	}
	var from Runtime
	if code := call(t, ts, "POST", "/start", "key", `{"session_id":"s2","image":"ignored:1","snapshot":"setup"}`, &from); code != 201 {
		t.Fatalf("start from the snapshot: %d", code)
	}
	if o := f.created[len(f.created)-1]; o.FromSnapshot != "setup" || o.Image != "" {
		t.Errorf("start from a snapshot: from %q image %q", o.FromSnapshot, o.Image)
	}
	f.snaps[0].Users = nil
	if code := call(t, ts, "DELETE", "/snapshots/setup", "key", "", nil); code != 200 || len(f.snaps) != 0 {
		t.Errorf("delete of an unused snapshot: %d, %d left", code, len(f.snaps))
	}
}

// FuzzForkRequest sends bodies to POST /fork of a runtime: the answer is a
// refusal or N children with N distinct sessions of their own, never the
// parent's.
func FuzzForkRequest(f *testing.F) {
	f.Add(`{"n":3}`)
	f.Add(`{"session_ids":["a","b"],"volumes":"share"}`)
	f.Add(`{"n":2,"session_ids":["a","a"]}`)
	f.Add(`{"n":-1}`)
	f.Fuzz(func(t *testing.T, body string) {
		fm := newFake()
		s, err := New(Options{Manager: fm, APIKey: "key"})
		if err != nil {
			t.Fatal(err)
		}
		parent, _ := fm.Create(context.Background(), sandbox.CreateOptions{Labels: map[string]string{LabelSession: "p"}})
		var fields map[string]any
		if json.Unmarshal([]byte(body), &fields) != nil || fields == nil {
			return
		}
		fields["runtime_id"] = parent.ID
		b, _ := json.Marshal(fields)
		req := httptest.NewRequest("POST", "/fork", strings.NewReader(string(b)))
		req.Header.Set("X-API-Key", "key")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		switch w.Code {
		case 400, 404, 409:
			return
		case 201:
		default:
			t.Fatalf("POST /fork %s: %d %s", b, w.Code, w.Body)
		}
		var resp ForkResponse
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{"p": true}
		for _, rt := range resp.Runtimes {
			if seen[rt.SessionID] || rt.SessionID == "" {
				t.Fatalf("POST /fork %s: session %q twice or the parent's", b, rt.SessionID)
			}
			seen[rt.SessionID] = true
		}
		if len(resp.Runtimes) < 1 || len(resp.Runtimes) > MaxForkChildren {
			t.Fatalf("POST /fork %s: %d children", b, len(resp.Runtimes))
		}
	})
}
