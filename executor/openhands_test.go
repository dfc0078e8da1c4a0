package executor_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/plugins"
)

// noChange is the no-change timeout of the agent test servers: short, so
// that tests of it are quick; commands that must complete print at once.
const noChange = 300 * time.Millisecond

func needBash(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("requires bash: the sessions are bash")
	}
}

// agentServer is a test server for sessions and the OpenHands dialect,
// working in a fresh directory.
func agentServer(t *testing.T, opts executor.Options) (*testServer, string) {
	t.Helper()
	needBash(t)
	dir := t.TempDir()
	if opts.Cwd == "" {
		opts.Cwd = dir
	}
	if opts.NoChangeTimeout == 0 {
		opts.NoChangeTimeout = noChange
	}
	return newServer(t, opts), dir
}

// action sends one action and returns the raw observation and its
// decoded form.
func (ts *testServer) action(t *testing.T, kind string, args any, timeout float64) (map[string]any, *api.Observation) {
	t.Helper()
	a := map[string]any{"action": kind, "args": args}
	if timeout > 0 {
		a["timeout"] = timeout
	}
	body, _ := json.Marshal(map[string]any{"action": a})
	status, resp := ts.raw(t, "POST", "/execute_action", string(body))
	if status != 200 {
		t.Fatalf("%s %v: status %d: %s", kind, args, status, resp)
	}
	var raw map[string]any
	var obs api.Observation
	if err := json.Unmarshal(resp, &raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(resp, &obs); err != nil {
		t.Fatal(err)
	}
	return raw, &obs
}

func (ts *testServer) cmd(t *testing.T, args map[string]any, timeout float64) (*api.Observation, api.CmdOutputExtras) {
	t.Helper()
	_, obs := ts.action(t, "run", args, timeout)
	var ex api.CmdOutputExtras
	if obs.Observation == api.ObservationRun {
		if err := obs.DecodeExtras(&ex); err != nil {
			t.Fatal(err)
		}
	}
	return obs, ex
}

// keysInOrder returns the top-level keys of a JSON object in order.
func keysInOrder(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.Token()
	var keys []string
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	return keys
}

func TestOpenHandsRunObservation(t *testing.T) {
	ts, dir := agentServer(t, executor.Options{})
	body := `{"action":{"action":"run","args":{"command":"echo hi","is_input":false,"thought":"","blocking":false,"is_static":false,"cwd":null,"hidden":false,"confirmation_state":"confirmed","security_risk":-1},"timeout":120,"id":5,"source":"agent","message":"Running command: echo hi"}}`
	status, resp := ts.raw(t, "POST", "/execute_action", body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, resp)
	}
	if keys := keysInOrder(t, resp); !slices.Equal(keys, []string{"message", "observation", "content", "extras", "success"}) {
		t.Errorf("keys %v", keys)
	}
	var got struct {
		Message, Observation, Content string
		Success                       bool
		Extras                        struct {
			Command  string
			Hidden   bool
			Metadata map[string]any
		}
	}
	if err := json.Unmarshal(resp, &got); err != nil {
		t.Fatal(err)
	}
	md := got.Extras.Metadata
	if got.Message != "Command `echo hi` executed with exit code 0." || got.Observation != "run" || got.Content != "hi" ||
		!got.Success || got.Extras.Command != "echo hi" || got.Extras.Hidden {
		t.Fatalf("observation %s", resp)
	}
	if md["exit_code"] != 0.0 || md["pid"] != -1.0 || md["working_dir"] != dir || md["prefix"] != "" ||
		md["suffix"] != "\n[The command completed with exit code 0.]" {
		t.Fatalf("metadata %v", md)
	}
	for _, k := range []string{"username", "hostname", "py_interpreter_path"} {
		if _, ok := md[k].(string); !ok {
			t.Errorf("metadata %s = %v, want a string", k, md[k])
		}
	}

	// A failing command, and hidden echoed back.
	obs, ex := ts.cmd(t, map[string]any{"command": "cd /; false", "hidden": true}, 0)
	if *obs.Success || ex.Metadata.ExitCode != 1 || !ex.Hidden || *ex.Metadata.WorkingDir != "/" ||
		obs.Message != "Command `cd /; false` executed with exit code 1." ||
		ex.Metadata.Suffix != "\n[The command completed with exit code 1.]" {
		t.Fatalf("failing command: %+v %+v", obs, ex)
	}
	// Several commands are refused with an ErrorObservation.
	raw, obs := ts.action(t, "run", map[string]any{"command": "echo a\necho b"}, 0)
	if obs.Observation != "error" || !strings.HasPrefix(obs.Content, "ERROR: Cannot execute multiple commands at once.") ||
		obs.Message != obs.Content || obs.Success != nil || raw["extras"].(map[string]any)["error_id"] != "" {
		t.Fatalf("multiple commands: %v", raw)
	}
	// A static command runs in a fresh shell in its cwd.
	obs, ex = ts.cmd(t, map[string]any{"command": "pwd", "is_static": true, "cwd": dir}, 0)
	if obs.Content != dir || ex.Metadata.ExitCode != 0 {
		t.Fatalf("static: %+v", obs)
	}
}

func TestOpenHandsRunTimeoutsAndInput(t *testing.T) {
	ts, _ := agentServer(t, executor.Options{})
	// No new output for the no-change timeout: the output so far, still running.
	obs, ex := ts.cmd(t, map[string]any{"command": `read -p "name? " x; echo "hello $x"`}, 0)
	if ex.Metadata.ExitCode != -1 || ex.Metadata.Username != nil || ex.Metadata.WorkingDir != nil ||
		!strings.Contains(obs.Content, "name?") ||
		!strings.HasPrefix(ex.Metadata.Suffix, "\n[The command has no new output after 0.3 seconds. You may wait longer") ||
		*obs.Success || obs.Message != "Command `read -p \"name? \" x; echo \"hello $x\"` executed with exit code -1." {
		t.Fatalf("no-change timeout: %+v %+v", obs, ex)
	}
	// A new command is refused while it runs.
	obs, ex = ts.cmd(t, map[string]any{"command": "ls"}, 0)
	if !strings.Contains(ex.Metadata.Suffix, `[Your command "ls" is NOT executed.`) {
		t.Fatalf("refusal: %+v", ex)
	}
	// Input goes to the program.
	obs, ex = ts.cmd(t, map[string]any{"command": "bob", "is_input": true}, 0)
	if ex.Metadata.ExitCode != 0 || !strings.Contains(obs.Content, "hello bob") {
		t.Fatalf("input: %q %+v", obs.Content, ex)
	}
	// Nothing runs: a poll says so.
	obs, ex = ts.cmd(t, map[string]any{"command": ""}, 0)
	if obs.Content != "ERROR: No previous running command to retrieve logs from." || ex.Command != "" {
		t.Fatalf("poll with nothing running: %+v", obs)
	}

	// The action's timeout is a hard timeout; blocking ignores the no-change one.
	obs, ex = ts.cmd(t, map[string]any{"command": "echo start; sleep 30", "blocking": true}, 0.6)
	if !strings.HasPrefix(ex.Metadata.Suffix, "\n[The command timed out after 0.6 seconds.") || !strings.Contains(obs.Content, "start") {
		t.Fatalf("hard timeout: %q %+v", obs.Content, ex)
	}
	// Polling continues the output; C-c ends the command.
	obs, ex = ts.cmd(t, map[string]any{"command": ""}, 0)
	if ex.Metadata.Prefix != "[Below is the output of the previous command.]\n" || ex.Metadata.ExitCode != -1 {
		t.Fatalf("poll: %+v", ex)
	}
	obs, ex = ts.cmd(t, map[string]any{"command": "C-c", "is_input": true}, 0)
	if ex.Metadata.ExitCode != 130 || ex.Metadata.Suffix != "\n[The command completed with exit code 130. CTRL+C was sent.]" {
		t.Fatalf("C-c: %+v %+v", obs, ex)
	}
}

func TestOpenHandsReadWrite(t *testing.T) {
	ts, dir := agentServer(t, executor.Options{})
	// write: a new file gets a newline after every line, mode 0664.
	raw, obs := ts.action(t, "write", map[string]any{"path": "notes/a.txt", "content": "one\ntwo"}, 0)
	p := filepath.Join(dir, "notes", "a.txt")
	if obs.Observation != "write" || obs.Content != "" || obs.Message != "I wrote to the file "+p+"." ||
		raw["extras"].(map[string]any)["path"] != p {
		t.Fatalf("write: %v", raw)
	}
	if b, _ := os.ReadFile(p); string(b) != "one\ntwo\n" {
		t.Fatalf("written %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o664 {
		t.Errorf("mode of a new file %v, want 0664", fi.Mode())
	}
	os.Chmod(p, 0o600)
	// An existing file: lines [start:end] replaced, mode kept.
	ts.action(t, "write", map[string]any{"path": p, "content": "TWO", "start": 1, "end": 2}, 0)
	if b, _ := os.ReadFile(p); string(b) != "one\nTWO\n" {
		t.Fatalf("rewritten %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after rewrite %v, want 0600", fi.Mode())
	}
	_, obs = ts.action(t, "write", map[string]any{"path": dir, "content": "x"}, 0)
	if obs.Observation != "error" || !strings.HasPrefix(obs.Content, "Path is a directory: ") {
		t.Fatalf("write to a directory: %+v", obs)
	}

	// read: lines start..end (0-based, end exclusive).
	os.WriteFile(p, []byte("l0\nl1\nl2\nl3\n"), 0o644)
	raw, obs = ts.action(t, "read", map[string]any{"path": p, "start": 1, "end": 3}, 0)
	ex := raw["extras"].(map[string]any)
	if obs.Observation != "read" || obs.Content != "l1\nl2\n" || ex["path"] != p || ex["impl_source"] != "default" ||
		obs.Message != "I read the file "+p+"." {
		t.Fatalf("read: %v", raw)
	}
	if _, obs = ts.action(t, "read", map[string]any{"path": "notes/a.txt"}, 0); obs.Content != "l0\nl1\nl2\nl3\n" {
		t.Fatalf("relative read: %+v", obs)
	}
	_, obs = ts.action(t, "read", map[string]any{"path": "missing.txt"}, 0)
	if obs.Observation != "error" || obs.Content != "File not found: "+filepath.Join(dir, "missing.txt")+". Your current working directory is "+dir+"." {
		t.Fatalf("read missing: %+v", obs)
	}
	_, obs = ts.action(t, "read", map[string]any{"path": dir}, 0)
	if obs.Content != "Path is a directory: "+dir+". You can only read files" {
		t.Fatalf("read dir: %+v", obs)
	}
	bin := filepath.Join(dir, "x.bin")
	os.WriteFile(bin, []byte("\x00\x01\x02"), 0o644)
	if _, obs = ts.action(t, "read", map[string]any{"path": bin}, 0); obs.Content != "ERROR_BINARY_FILE" || obs.Observation != "error" {
		t.Fatalf("read binary: %+v", obs)
	}
	png := filepath.Join(dir, "x.png")
	os.WriteFile(png, []byte("\x89PNG\r\n\x1a\nrest"), 0o644)
	if _, obs = ts.action(t, "read", map[string]any{"path": png}, 0); !strings.HasPrefix(obs.Content, "data:image/png;base64,iVBORw0KGg") {
		t.Fatalf("read image: %+v", obs)
	}
	// impl_source oh_aci: the editor's view.
	raw, obs = ts.action(t, "read", map[string]any{"path": p, "impl_source": "oh_aci", "view_range": []int{2, 3}}, 0)
	if !strings.HasPrefix(obs.Content, "Here's the result of running `cat -n` on "+p+":\n     2\tl1\n     3\tl2\n") ||
		raw["extras"].(map[string]any)["impl_source"] != "oh_aci" {
		t.Fatalf("oh_aci read: %q", obs.Content)
	}
	_, obs = ts.action(t, "read", map[string]any{"path": "rel.txt", "impl_source": "oh_aci"}, 0)
	if obs.Observation != "read" || !strings.HasPrefix(obs.Content, "ERROR:\nInvalid `path` parameter: rel.txt. The path should be an absolute path") {
		t.Fatalf("oh_aci relative read: %q", obs.Content)
	}
}

func TestOpenHandsEdit(t *testing.T) {
	ts, dir := agentServer(t, executor.Options{})
	p := filepath.Join(dir, "f.py")
	edit := func(args map[string]any) (api.FileEditExtras, *api.Observation) {
		t.Helper()
		args["path"] = p
		_, obs := ts.action(t, "edit", args, 0)
		var ex api.FileEditExtras
		if obs.Observation != "edit" {
			t.Fatalf("edit %v: %+v", args, obs)
		}
		if err := obs.DecodeExtras(&ex); err != nil {
			t.Fatal(err)
		}
		return ex, obs
	}
	ex, obs := edit(map[string]any{"command": "create", "file_text": "a = 1\nb = 2\n"})
	if ex.PrevExist || !strings.Contains(obs.Content, "File created successfully") || ex.ImplSource != "oh_aci" ||
		obs.Message != "I edited the file "+p+"." || ex.Diff == nil || !strings.HasPrefix(*ex.Diff, "--- "+p+"\n+++ "+p+"\n") {
		t.Fatalf("create: %+v %+v", obs, ex)
	}
	ex, obs = edit(map[string]any{"command": "str_replace", "old_str": "b = 2", "new_str": "b = 3"})
	if !ex.PrevExist || *ex.OldContent != "b = 2" || *ex.NewContent != "b = 3" ||
		*ex.Diff != "--- "+p+"\n+++ "+p+"\n@@ -2 +2 @@\n-b = 2\n+b = 3" ||
		!strings.Contains(obs.Content, "has been edited") || ex.DiffCache != nil {
		t.Fatalf("str_replace: %q %+v", obs.Content, ex)
	}
	// The editor's refusals are edit observations whose content starts with ERROR.
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"command": "str_replace", "old_str": "zzz", "new_str": "y"}, "ERROR:\nNo replacement was performed, old_str `zzz` did not appear verbatim in " + p + "."},
		{map[string]any{"command": "str_replace", "old_str": " = ", "new_str": "="}, "ERROR:\nNo replacement was performed. Multiple occurrences of old_str ` = ` in lines [1, 2]. Please ensure it is unique."},
		{map[string]any{"command": "str_replace", "old_str": "a", "new_str": "a"}, "ERROR:\nInvalid `new_str` parameter: a. No replacement was performed. `new_str` and `old_str` must be different."},
		{map[string]any{"command": "create", "file_text": "x"}, "ERROR:\nInvalid `path` parameter: " + p + ". File already exists at: " + p + ". Cannot overwrite files using command `create`."},
		{map[string]any{"command": "insert", "insert_line": "abc", "new_str": "x"}, "ERROR:\nInvalid insert_line value: 'abc'. Expected an integer."},
		{map[string]any{"command": "frobnicate"}, "ERROR:\nUnrecognized command frobnicate."},
	} {
		ex, obs := edit(tc.args)
		if !strings.HasPrefix(obs.Content, tc.want) || *ex.Diff != "" || ex.PrevExist {
			t.Errorf("edit %v: content %q, diff %q", tc.args, obs.Content, *ex.Diff)
		}
	}
	// insert_line as a numeric string, as newer OpenHands sends it.
	if _, obs = edit(map[string]any{"command": "insert", "insert_line": "1", "new_str": "c = 0"}); !strings.Contains(obs.Content, "has been edited") {
		t.Fatalf("insert: %q", obs.Content)
	}
	if b, _ := os.ReadFile(p); string(b) != "a = 1\nc = 0\nb = 3\n" {
		t.Fatalf("file after edits: %q", b)
	}
	// A missing file.
	args := map[string]any{"command": "view", "path": filepath.Join(dir, "nope.py")}
	if _, obs = ts.action(t, "edit", args, 0); !strings.Contains(obs.Content, "does not exist") {
		t.Fatalf("missing file: %q", obs.Content)
	}
	// LLM-based edits are the client's: refused.
	status, resp := ts.raw(t, "POST", "/execute_action", `{"action":{"action":"edit","args":{"path":"/x","impl_source":"llm_based_edit"}}}`)
	wantError(t, status, resp, 400, api.CodeBadRequest)
}

// fakePlugin is a Plugin for tests: its Start waits for ready (when not
// nil), its service executes its actions and has a token.
type fakePlugin struct {
	name    string
	actions []string
	ready   chan struct{}
	token   string
}

var (
	_ plugins.Plugin  = (*fakePlugin)(nil)
	_ plugins.Tokener = fakeService{}
)

func (p *fakePlugin) Name() string      { return p.name }
func (p *fakePlugin) Actions() []string { return p.actions }
func (p *fakePlugin) Recipe() plugins.Recipe {
	return plugins.Recipe{Name: p.name, Check: "true"}
}
func (p *fakePlugin) Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	if p.ready != nil {
		select {
		case <-p.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return fakeService{p}, nil
}

type fakeService struct{ p *fakePlugin }

func (s fakeService) ConnectionToken() string { return s.p.token }
func (s fakeService) Handler() http.Handler   { return nil }
func (s fakeService) Close() error            { return nil }
func (s fakeService) Execute(ctx context.Context, a *api.Action) (*api.Observation, error) {
	return api.NewObservation(api.ObservationRunIPython, "Code executed in IPython cell.", "ran "+string(a.Args), nil), nil
}

func TestOpenHandsPlugins(t *testing.T) {
	ts, _ := agentServer(t, executor.Options{})
	_, obs := ts.action(t, "run_ipython", map[string]any{"code": "1+1"}, 0)
	if obs.Observation != "error" || obs.Content != "JupyterRequirement not found. Unable to run IPython action." {
		t.Fatalf("run_ipython without jupyter: %+v", obs)
	}
	for _, kind := range []string{"browse", "browse_interactive"} {
		if _, obs = ts.action(t, kind, map[string]any{"url": "http://x"}, 0); obs.Content != "Browser functionality is not supported or disabled." {
			t.Fatalf("%s without a browser: %+v", kind, obs)
		}
	}
	for _, body := range []string{`{"action":{"action":"message","args":{"content":"hi"}}}`, `{"action":{"args":{}}}`, `{}`, `{"action":{"action":"run","args":{}}}`, `{"action":{"action":"run","args":{"command":1}}}`} {
		status, resp := ts.raw(t, "POST", "/execute_action", body)
		wantError(t, status, resp, 400, api.CodeBadRequest)
	}
	status, resp := ts.raw(t, "GET", "/vscode/connection_token", "")
	if status != 200 || strings.TrimSpace(string(resp)) != `{"token":null}` {
		t.Fatalf("token without vscode: %d %s", status, resp)
	}

	// A plugin claims an action; /alive says it is starting until ready.
	jup := &fakePlugin{name: "jupyter", actions: []string{"run_ipython"}, ready: make(chan struct{})}
	vs := &fakePlugin{name: "vscode", token: "tok"}
	ts2, _ := agentServer(t, executor.Options{Plugins: []plugins.Plugin{jup, vs}, EagerPlugins: true})
	for { // vscode starts at once, on its own goroutine
		a, err := ts2.c.AliveStatus(testCtx(t))
		if err != nil || len(a.Plugins) == 2 && a.Plugins[1].State == api.PluginRunning {
			break
		}
		time.Sleep(time.Millisecond)
	}
	a, err := ts2.c.AliveStatus(testCtx(t))
	if err != nil || a.Status != "ok" || !slices.Equal(a.Starting, []string{"jupyter"}) {
		t.Fatalf("alive while starting: %+v %v", a, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		_, obs := ts2.action(t, "run_ipython", map[string]any{"code": "1+1"}, 0)
		if obs.Observation != "run_ipython" || obs.Content != `ran {"code":"1+1"}` {
			t.Errorf("plugin observation: %+v", obs)
		}
	})
	time.Sleep(20 * time.Millisecond)
	close(jup.ready)
	wg.Wait()
	if a, _ := ts2.c.AliveStatus(testCtx(t)); len(a.Starting) != 0 {
		t.Fatalf("alive when ready: %+v", a)
	}
	status, resp = ts2.raw(t, "GET", "/vscode/connection_token", "")
	if strings.TrimSpace(string(resp)) != `{"token":"tok"}` {
		t.Fatalf("token: %d %s", status, resp)
	}
	if _, err := executor.New(executor.Options{Plugins: []plugins.Plugin{&fakePlugin{name: "x", actions: []string{"run"}}}}); err == nil {
		t.Fatal("a plugin claimed a core action")
	}
}

// multipartBody builds a multipart body with one "file" part.
func multipartBody(t *testing.T, filename string, data []byte) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", filename)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	mw.Close()
	return buf.String(), mw.FormDataContentType()
}

func zipOf(t *testing.T, entries map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range entries {
		w, _ := zw.Create(name)
		w.Write([]byte(content))
	}
	zw.Close()
	return buf.Bytes()
}

func TestOpenHandsFileTransfer(t *testing.T) {
	ts, dir := agentServer(t, executor.Options{})
	dest := filepath.Join(dir, "up")
	body, ct := multipartBody(t, "a.txt", []byte("hello"))
	status, resp := ts.raw(t, "POST", "/upload_file?destination="+dest, body, "Content-Type", ct)
	if status != 200 || strings.TrimSpace(string(resp)) != `{"filename":"a.txt","destination":"`+dest+`","recursive":false}` {
		t.Fatalf("upload: %d %s", status, resp)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "a.txt")); string(b) != "hello" {
		t.Fatalf("uploaded %q", b)
	}
	// A zip stored as is, unless recursive.
	z := zipOf(t, map[string]string{"proj/x.txt": "x", "proj/sub/y.txt": "y"})
	body, ct = multipartBody(t, "tmpabc.zip", z)
	if status, resp = ts.raw(t, "POST", "/upload_file?destination="+dest+"&recursive=true", body, "Content-Type", ct); status != 200 {
		t.Fatalf("recursive upload: %d %s", status, resp)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "proj", "sub", "y.txt")); string(b) != "y" {
		t.Fatalf("unzipped %q", b)
	}
	if _, err := os.Stat(filepath.Join(dest, "tmpabc.zip")); !os.IsNotExist(err) {
		t.Errorf("the zip was left behind: %v", err)
	}
	// A file name is only ever a name in the destination.
	body, ct = multipartBody(t, "../evil", []byte("x"))
	if status, resp = ts.raw(t, "POST", "/upload_file?destination="+dest, body, "Content-Type", ct); status != 200 {
		t.Fatalf("upload ../evil: %d %s", status, resp)
	}
	if _, err := os.Stat(filepath.Join(dest, "evil")); err != nil {
		t.Fatalf("../evil not stored as evil: %v", err)
	}
	body, ct = multipartBody(t, "..", []byte("x"))
	status, resp = ts.raw(t, "POST", "/upload_file?destination="+dest, body, "Content-Type", ct)
	wantError(t, status, resp, 400, api.CodeBadRequest)
	status, resp = ts.raw(t, "POST", "/upload_file?destination=rel", body, "Content-Type", ct)
	wantError(t, status, resp, 400, api.CodeBadRequest)

	// download_files: a directory as a zip, a file as itself.
	status, resp = ts.raw(t, "GET", "/download_files?path="+filepath.Join(dest, "proj"), "")
	if status != 200 {
		t.Fatalf("download: %d %s", status, resp)
	}
	zr, err := zip.NewReader(bytes.NewReader(resp), int64(len(resp)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"sub/", "sub/y.txt", "x.txt"}) {
		t.Fatalf("zip entries %v", names)
	}
	if status, resp = ts.raw(t, "GET", "/download_files?path="+filepath.Join(dest, "a.txt"), ""); string(resp) != "hello" {
		t.Fatalf("download a file: %d %q", status, resp)
	}
	status, resp = ts.raw(t, "GET", "/download_files?path="+filepath.Join(dest, "nope"), "")
	wantError(t, status, resp, 404, api.CodeNotFound)
	status, resp = ts.raw(t, "GET", "/download_files?path=rel", "")
	wantError(t, status, resp, 400, api.CodeBadRequest)

	// list_files: directories first, relative to the working directory.
	os.Mkdir(filepath.Join(dest, "B"), 0o755)
	for path, want := range map[string]string{
		`{"path":"` + dest + `"}`: `["B/","proj/","a.txt","evil"]`,
		`{"path":"up"}`:           `["B/","proj/","a.txt","evil"]`,
		``:                        `["up/"]`,
		`{"path":"/nonexistent"}`: `[]`,
	} {
		status, resp := ts.raw(t, "POST", "/list_files", path)
		if status != 200 || strings.TrimSpace(string(resp)) != want {
			t.Errorf("list_files %s: %d %s, want %s", path, status, resp, want)
		}
	}
}

func TestOpenHandsServerInfo(t *testing.T) {
	ts, _ := agentServer(t, executor.Options{})
	status, resp := ts.raw(t, "GET", "/server_info", "")
	var m map[string]any
	if status != 200 || json.Unmarshal(resp, &m) != nil {
		t.Fatalf("server_info: %d %s", status, resp)
	}
	res, _ := m["resources"].(map[string]any)
	for _, k := range []string{"cpu_percent", "memory", "disk", "io"} {
		if _, ok := res[k]; !ok {
			t.Errorf("resources lack %s: %s", k, resp)
		}
	}
	info, err := ts.c.ServerInfo(testCtx(t))
	if err != nil || info.Uptime <= 0 || info.Resources.Disk.Total == 0 || info.Resources.Memory.RSS == 0 {
		t.Fatalf("server info: %+v %v", info, err)
	}
}

// Every route but /alive needs the key.
func TestAuthOnEveryRoute(t *testing.T) {
	ts, _ := agentServer(t, executor.Options{APIKey: "k"})
	for _, rt := range ts.Routes() {
		p := strings.NewReplacer("{id}", "p1", "{name}", "default").Replace(rt.Path)
		status, resp := ts.raw(t, rt.Method, p, "{}", api.APIKeyHeader, "wrong")
		if rt.Public {
			if status != 200 {
				t.Errorf("%s %s: %d", rt.Method, p, status)
			}
			continue
		}
		var eb api.ErrorBody
		if json.Unmarshal(resp, &eb); status != 403 || eb.Error == nil || eb.Error.Code != api.CodeForbidden || eb.Detail == "" {
			t.Errorf("%s %s without the key: %d %s", rt.Method, p, status, resp)
		}
	}
	if ts.Routes()[0].Path != "/alive" || !ts.Routes()[0].Public {
		t.Fatal("/alive is not the public route")
	}
}
