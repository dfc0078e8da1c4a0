package executor_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"mime/multipart"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bothy-sandbox/bothy/executor"
)

// updateGolden rewrites the golden files instead of comparing with them:
// go test ./executor -run Golden -update
var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenDir holds one file per case of TestOpenHandsGolden.
const goldenDir = "testdata/golden/openhands"

// goldenNoChange is the no-change timeout of the golden servers: long
// enough that a command which completes is never cut short on a loaded
// machine; the cases that show the timeout use commands that print
// nothing, so that what they answer does not depend on time.
const goldenNoChange = 2 * time.Second

// workdirMark stands for the case's working directory, a fresh temporary
// directory, in requests (replaced before sending) and in golden files.
const workdirMark = "$WORKDIR"

// goldenStep is one request of a golden case. Body is sent as is, after
// workdirMark is replaced; Note stands for a body that is neither JSON nor
// text (a multipart upload) in the golden file.
type goldenStep struct {
	Method, Path string
	Body         string
	Header       []string
	Note         string
}

// goldenCase is a sequence of requests to one fresh executor whose
// working directory setup has filled.
type goldenCase struct {
	name  string
	setup func(t *testing.T, dir string)
	steps []goldenStep
}

// act is POST /execute_action of an action with args (a JSON object).
func act(kind, args string) goldenStep {
	return goldenStep{Method: "POST", Path: "/execute_action", Body: `{"action":{"action":"` + kind + `","args":` + args + `}}`}
}

// actTimeout is act with the action's hard timeout in seconds.
func actTimeout(kind, args string, timeout float64) goldenStep {
	return goldenStep{Method: "POST", Path: "/execute_action",
		Body: `{"action":{"action":"` + kind + `","args":` + args + `,"timeout":` + strconv.FormatFloat(timeout, 'f', -1, 64) + `}}`}
}

func executeRaw(body string) goldenStep {
	return goldenStep{Method: "POST", Path: "/execute_action", Body: body}
}

func getStep(path string) goldenStep { return goldenStep{Method: "GET", Path: path} }

// goldenBoundary makes multipart bodies the same at every run.
const goldenBoundary = "bothy-golden-boundary"

// uploadStep is POST /upload_file of one file part.
func uploadStep(t *testing.T, query, filename string, data []byte, note string) goldenStep {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.SetBoundary(goldenBoundary); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", filename)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	mw.Close()
	return goldenStep{Method: "POST", Path: "/upload_file" + query, Body: buf.String(),
		Header: []string{"Content-Type", mw.FormDataContentType()}, Note: note}
}

// zipBytes builds a zip of name/content pairs, in order; a name ending in
// "/" is a directory.
func zipBytes(t *testing.T, pairs ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := 0; i+1 < len(pairs); i += 2 {
		w, err := zw.Create(pairs[i])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(pairs[i+1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeFiles creates files under dir from name/content pairs.
func writeFiles(t *testing.T, dir string, pairs ...string) {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		p := filepath.Join(dir, pairs[i])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(pairs[i+1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pngHeader is the start of a PNG file (enough to be recognised).
const pngHeader = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"

// goldenCases are the OpenHands dialect's actions and routes, one file each.
func goldenCases(t *testing.T) []goldenCase {
	text := func(dir string) { writeFiles(t, dir, "notes.txt", "l0\nl1\nl2\nl3\n") }
	return []goldenCase{
		// run: CmdOutputObservation.
		{name: "run_echo", steps: []goldenStep{
			// A whole event_to_dict(CmdRunAction), as OpenHands sends it:
			// the keys other than action, args and timeout are ignored.
			executeRaw(`{"action":{"action":"run","args":{"command":"echo hi","is_input":false,"thought":"","blocking":false,"is_static":false,"cwd":null,"hidden":false,"confirmation_state":"confirmed","security_risk":-1},"timeout":120,"id":5,"source":"agent","message":"Running command: echo hi"}}`),
		}},
		{name: "run_exit_code", steps: []goldenStep{
			act("run", `{"command":"echo out; echo err >&2; (exit 3)"}`),
			act("run", `{"command":"false"}`),
		}},
		{name: "run_cwd", steps: []goldenStep{
			act("run", `{"command":"mkdir -p sub && cd sub"}`),
			act("run", `{"command":"pwd"}`),
		}},
		{name: "run_multiple_commands", steps: []goldenStep{
			act("run", `{"command":"echo a\necho b"}`),
		}},
		{name: "run_hidden", steps: []goldenStep{
			act("run", `{"command":"echo secret","hidden":true}`),
		}},
		// OpenHands truncates a long output in the middle (30000
		// characters), except for its hidden commands.
		{name: "run_hidden_long", steps: []goldenStep{
			act("run", `{"command":"head -c 30500 /dev/zero | tr '\\0' a; echo","hidden":true}`),
			act("run", `{"command":"head -c 30500 /dev/zero | tr '\\0' a; echo"}`),
		}},
		// An output taller than OpenHands' tmux history keeps its last
		// rows, said in the prefix (then the middle truncation).
		{name: "run_long_output", steps: []goldenStep{
			act("run", `{"command":"seq 1 50000"}`),
		}},
		{name: "run_static", setup: func(t *testing.T, dir string) { writeFiles(t, dir, "sub/x", "") }, steps: []goldenStep{
			act("run", `{"command":"pwd","is_static":true,"cwd":"$WORKDIR/sub"}`),
		}},
		{name: "run_background_pid", steps: []goldenStep{
			// $! is the metadata's pid, and bash's job notice prints it.
			act("run", `{"command":"sleep 60 &"}`),
		}},
		// The no-change timeout (soft): the command keeps running, a new
		// one is refused, input goes to it.
		{name: "run_no_change_timeout", steps: []goldenStep{
			act("run", `{"command":"read x; echo \"hello $x\""}`),
			act("run", `{"command":"ls"}`),
			act("run", `{"command":"bob","is_input":true}`),
			act("run", `{"command":""}`),
			act("run", `{"command":"more","is_input":true}`),
		}},
		// The action's timeout (hard), a poll, and C-c.
		{name: "run_hard_timeout", steps: []goldenStep{
			actTimeout("run", `{"command":"sleep 30","blocking":true}`, 0.5),
			act("run", `{"command":""}`),
			act("run", `{"command":"C-c","is_input":true}`),
		}},
		{name: "run_bad_args", steps: []goldenStep{
			act("run", `{}`),
			act("run", `{"command":1}`),
			actTimeout("run", `{"command":"true"}`, -1),
		}},

		// read: FileReadObservation, or ErrorObservation.
		{name: "read_lines", setup: func(t *testing.T, dir string) { text(dir) }, steps: []goldenStep{
			act("read", `{"path":"$WORKDIR/notes.txt","start":1,"end":3}`),
			act("read", `{"path":"notes.txt"}`),
			act("read", `{"path":"notes.txt","start":3,"end":-1}`),
		}},
		{name: "read_errors", setup: func(t *testing.T, dir string) {
			writeFiles(t, dir, "x.bin", "\x00\x01\x02", "sub/a", "")
		}, steps: []goldenStep{
			act("read", `{"path":"missing.txt"}`),
			act("read", `{"path":"$WORKDIR/sub"}`),
			act("read", `{"path":"$WORKDIR/x.bin"}`),
			act("read", `{}`),
			act("read", `{"path":"notes.txt","impl_source":"magic"}`),
		}},
		{name: "read_image", setup: func(t *testing.T, dir string) { writeFiles(t, dir, "x.png", pngHeader) }, steps: []goldenStep{
			act("read", `{"path":"$WORKDIR/x.png"}`),
		}},
		{name: "read_oh_aci", setup: func(t *testing.T, dir string) { text(dir); writeFiles(t, dir, "sub/a.txt", "a\n") }, steps: []goldenStep{
			act("read", `{"path":"$WORKDIR/notes.txt","impl_source":"oh_aci","view_range":[2,3]}`),
			act("read", `{"path":"$WORKDIR/notes.txt","impl_source":"oh_aci"}`),
			act("read", `{"path":"notes.txt","impl_source":"oh_aci"}`),
			act("read", `{"path":"$WORKDIR/sub","impl_source":"oh_aci"}`),
		}},

		// write: FileWriteObservation.
		{name: "write", setup: func(t *testing.T, dir string) { text(dir) }, steps: []goldenStep{
			act("write", `{"path":"new/a.txt","content":"one\ntwo"}`),
			act("read", `{"path":"new/a.txt"}`),
			act("write", `{"path":"$WORKDIR/notes.txt","content":"L1\nL2","start":1,"end":3}`),
			act("read", `{"path":"notes.txt"}`),
		}},
		{name: "write_errors", steps: []goldenStep{
			act("write", `{"path":"$WORKDIR","content":"x"}`),
			act("write", `{"path":"a.txt"}`),
		}},

		// edit (oh_aci): FileEditObservation, str_replace_editor commands.
		{name: "edit_view", setup: func(t *testing.T, dir string) {
			text(dir)
			writeFiles(t, dir, "sub/b.txt", "b\n", "sub/a.txt", "a\n")
		}, steps: []goldenStep{
			act("edit", `{"command":"view","path":"$WORKDIR/notes.txt"}`),
			act("edit", `{"command":"view","path":"$WORKDIR/notes.txt","view_range":[2,-1]}`),
			act("edit", `{"command":"view","path":"$WORKDIR/sub"}`),
			act("edit", `{"command":"view","path":"$WORKDIR/nope.py"}`),
			act("edit", `{"command":"view","path":"rel.py"}`),
		}},
		{name: "edit_create_replace_undo", steps: []goldenStep{
			act("edit", `{"command":"create","path":"$WORKDIR/f.py","file_text":"a = 1\nb = 2\n"}`),
			act("edit", `{"command":"create","path":"$WORKDIR/f.py","file_text":"x"}`),
			act("edit", `{"command":"str_replace","path":"$WORKDIR/f.py","old_str":"b = 2","new_str":"b = 3"}`),
			act("edit", `{"command":"undo_edit","path":"$WORKDIR/f.py"}`),
			act("edit", `{"command":"undo_edit","path":"$WORKDIR/f.py"}`),
			act("edit", `{"command":"view","path":"$WORKDIR/f.py"}`),
		}},
		{name: "edit_str_replace_errors", setup: func(t *testing.T, dir string) { writeFiles(t, dir, "f.py", "a = 1\nb = 2\n") }, steps: []goldenStep{
			act("edit", `{"command":"str_replace","path":"$WORKDIR/f.py","old_str":"zzz","new_str":"y"}`),
			act("edit", `{"command":"str_replace","path":"$WORKDIR/f.py","old_str":" = ","new_str":"="}`),
			act("edit", `{"command":"str_replace","path":"$WORKDIR/f.py","old_str":"a","new_str":"a"}`),
			act("edit", `{"command":"str_replace","path":"$WORKDIR/missing.py","old_str":"a","new_str":"b"}`),
		}},
		{name: "edit_insert", setup: func(t *testing.T, dir string) { writeFiles(t, dir, "f.py", "a = 1\nb = 2\n") }, steps: []goldenStep{
			act("edit", `{"command":"insert","path":"$WORKDIR/f.py","insert_line":1,"new_str":"c = 0"}`),
			act("edit", `{"command":"insert","path":"$WORKDIR/f.py","insert_line":"0","new_str":"# top"}`),
			act("edit", `{"command":"insert","path":"$WORKDIR/f.py","insert_line":"abc","new_str":"x"}`),
			act("edit", `{"command":"insert","path":"$WORKDIR/f.py","insert_line":99,"new_str":"x"}`),
			act("edit", `{"command":"view","path":"$WORKDIR/f.py"}`),
		}},
		{name: "edit_errors", setup: func(t *testing.T, dir string) { writeFiles(t, dir, "f.py", "a = 1\n") }, steps: []goldenStep{
			act("edit", `{"command":"frobnicate","path":"$WORKDIR/f.py"}`),
			act("edit", `{"command":"view"}`),
			act("edit", `{"path":"$WORKDIR/f.py","impl_source":"llm_based_edit","content":"x"}`),
			act("edit", `{"command":"insert","path":"$WORKDIR/f.py","insert_line":[1]}`),
		}},

		// Actions only plugins execute: without them, an error observation.
		{name: "unsupported_actions", steps: []goldenStep{
			act("run_ipython", `{"code":"1+1"}`),
			act("browse", `{"url":"http://example.invalid"}`),
			act("browse_interactive", `{"browser_actions":"goto(\"http://example.invalid\")"}`),
		}},
		{name: "unknown_action", steps: []goldenStep{
			act("message", `{"content":"hi"}`),
			act("frobnicate", `{}`),
		}},
		{name: "malformed_requests", steps: []goldenStep{
			executeRaw(`{"action":`),
			executeRaw(``),
			executeRaw(`{"action":{"action":"run","args":{"command":"true"}}} {}`),
			executeRaw(`{}`),
			executeRaw(`{"action":{"args":{}}}`),
			executeRaw(`[1]`),
			executeRaw(`{"action":{"action":"run","args":[]}}`),
		}},

		// The other routes of the dialect.
		{name: "alive", steps: []goldenStep{getStep("/alive")}},
		{name: "server_info", steps: []goldenStep{getStep("/server_info")}},
		{name: "vscode_connection_token", steps: []goldenStep{getStep("/vscode/connection_token")}},
		{name: "list_files", setup: func(t *testing.T, dir string) {
			writeFiles(t, dir, "up/b.txt", "", "up/A.txt", "", "up/.hidden", "", "up/Sub/x", "", "up/dir/y", "")
		}, steps: []goldenStep{
			{Method: "POST", Path: "/list_files", Body: `{"path":"$WORKDIR/up"}`},
			{Method: "POST", Path: "/list_files", Body: `{"path":"up"}`},
			{Method: "POST", Path: "/list_files"},
			{Method: "POST", Path: "/list_files", Body: `{"path":"/nonexistent"}`},
			{Method: "POST", Path: "/list_files", Body: `{"path":"$WORKDIR/up/b.txt"}`},
			{Method: "POST", Path: "/list_files", Body: `{"path":`},
		}},
		{name: "upload_file", steps: []goldenStep{
			uploadStep(t, "?destination=$WORKDIR/up", "a.txt", []byte("hello"), "multipart file a.txt: hello"),
			uploadStep(t, "?destination=$WORKDIR/up&recursive=true", "tmp123.zip",
				zipBytes(t, "proj/", "", "proj/x.txt", "x", "proj/sub/y.txt", "y"),
				"multipart file tmp123.zip: a zip of proj/, proj/x.txt, proj/sub/y.txt"),
			{Method: "POST", Path: "/list_files", Body: `{"path":"$WORKDIR/up"}`},
			uploadStep(t, "?destination=$WORKDIR/up", "../evil", []byte("x"), "multipart file ../evil"),
			uploadStep(t, "?destination=$WORKDIR/up", "..", []byte("x"), "multipart file .."),
			uploadStep(t, "?destination=rel", "a.txt", []byte("x"), "multipart file a.txt"),
			uploadStep(t, "?destination=$WORKDIR/up&recursive=maybe", "a.txt", []byte("x"), "multipart file a.txt"),
			{Method: "POST", Path: "/upload_file?destination=$WORKDIR/up", Body: "raw"},
		}},
		{name: "download_files", setup: func(t *testing.T, dir string) {
			writeFiles(t, dir, "proj/x.txt", "x", "proj/sub/y.txt", "y", "a.txt", "hello")
		}, steps: []goldenStep{
			getStep("/download_files?path=$WORKDIR/a.txt"),
			getStep("/download_files?path=$WORKDIR/proj"),
			getStep("/download_files?path=$WORKDIR/nope"),
			getStep("/download_files?path=rel"),
		}},
	}
}

// TestOpenHandsGolden pins the OpenHands dialect's answers, byte for byte
// after normaliseGolden, in testdata/golden/openhands (-update rewrites
// them).
func TestOpenHandsGolden(t *testing.T) {
	contractNeedBash(t)
	cases := goldenCases(t)
	names := map[string]bool{}
	for _, gc := range cases {
		names[gc.name+".json"] = true
		t.Run(gc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if gc.setup != nil {
				gc.setup(t, dir)
			}
			conn := contractServer(t, executor.Options{Cwd: dir, NoChangeTimeout: goldenNoChange}, nil)
			var steps []any
			for _, st := range gc.steps {
				steps = append(steps, runGoldenStep(t, conn, dir, st))
			}
			checkGolden(t, filepath.Join(goldenDir, gc.name+".json"), renderOrdered(steps))
		})
	}
	// A golden file no case writes is stale.
	t.Run("stale", func(t *testing.T) {
		entries, err := os.ReadDir(goldenDir)
		if err != nil && !*updateGolden {
			t.Fatal(err)
		}
		for _, e := range entries {
			if names[e.Name()] {
				continue
			}
			if *updateGolden {
				os.Remove(filepath.Join(goldenDir, e.Name()))
				continue
			}
			t.Errorf("%s/%s belongs to no case (go test ./executor -run Golden -update removes it)", goldenDir, e.Name())
		}
	})
}

// runGoldenStep sends one step and returns its golden record: the
// request, the status, the content type and the normalised answer.
func runGoldenStep(t *testing.T, conn *contractConn, dir string, st goldenStep) any {
	t.Helper()
	path := strings.ReplaceAll(st.Path, workdirMark, dir)
	var body []byte // nil: no body at all
	if st.Body != "" {
		body = []byte(strings.ReplaceAll(st.Body, workdirMark, dir))
	}
	rep := conn.do(t, st.Method, path, body, st.Header...)

	req := jsonObject{{"method", st.Method}, {"path", path}}
	switch {
	case st.Note != "":
		req = append(req, jsonMember{"body_note", st.Note})
	case body == nil:
	default:
		if v, err := parseOrdered(body); err == nil {
			req = append(req, jsonMember{"body", v})
		} else {
			req = append(req, jsonMember{"body_text", string(body)})
		}
	}
	rec := jsonObject{{"request", req}, {"status", json.Number(strconv.Itoa(rep.status))},
		{"content_type", rep.header.Get("Content-Type")}}
	switch ct := mediaType(rep.header.Get("Content-Type")); {
	case ct == "application/json":
		v, err := parseOrdered(rep.body)
		if err != nil {
			t.Fatalf("%s %s: answer is not JSON: %v: %q", st.Method, path, err, rep.body)
		}
		rec = append(rec, jsonMember{"response", v})
	case ct == "application/zip":
		rec = append(rec, jsonMember{"zip_entries", zipEntries(t, rep.body)})
	case utf8.Valid(rep.body):
		rec = append(rec, jsonMember{"response_text", string(rep.body)})
	default:
		rec = append(rec, jsonMember{"response_bytes", json.Number(strconv.Itoa(len(rep.body)))})
	}
	return normaliseGolden(rec, dir)
}

// zipEntries lists a zip's entries, in its order, with their contents.
func zipEntries(t *testing.T, b []byte) []any {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("answer is not a zip: %v", err)
	}
	out := []any{}
	for _, f := range zr.File {
		e := jsonObject{{"name", f.Name}}
		if !f.FileInfo().IsDir() {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			buf.ReadFrom(rc)
			rc.Close()
			e = append(e, jsonMember{"content", buf.String()})
		}
		out = append(out, e)
	}
	return out
}

// goldenBlanks is what normaliseGolden replaces, because it differs from
// one run, machine or user to the next:
//
//   - the case's working directory (a fresh temporary directory, and its
//     real path) in every string → "$WORKDIR";
//   - extras.metadata.pid of a run observation when it is a process id
//     ($! of a background job; -1 is kept) → "<pid>", and that id
//     wherever a string holds it (bash's job notice "[1] 4242");
//   - extras.metadata.username, hostname and py_interpreter_path when
//     set (null is kept: it says the command has not completed) →
//     "<username>", "<hostname>", "<py_interpreter_path>";
//   - every number of a /server_info answer (uptime, idle time, the
//     sandbox's resources) → "<number>".
//
// Nothing else is blanked: timestamps and durations appear in no
// observation, and the timeouts are fixed by the test.
var goldenBlanks = []string{"$WORKDIR", "<pid>", "<username>", "<hostname>", "<py_interpreter_path>", "<number>"}

// normaliseGolden applies goldenBlanks to a golden record.
func normaliseGolden(rec jsonObject, dir string) any {
	dirs := []string{dir}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		dirs = append(dirs, real)
	}
	var pids []string
	reqPath := ""
	if req, ok := rec.get("request"); ok {
		if p, ok := req.(jsonObject).get("path"); ok {
			reqPath = p.(string)
		}
	}
	// First pass: blank the metadata, collect the pids.
	v := mapOrdered(rec, "", func(path string, v any) any {
		switch {
		case path == "/response/extras/metadata/pid":
			if n, ok := v.(json.Number); ok && n.String() != "-1" {
				pids = append(pids, n.String())
				return "<pid>"
			}
		case path == "/response/extras/metadata/username", path == "/response/extras/metadata/hostname",
			path == "/response/extras/metadata/py_interpreter_path":
			if _, ok := v.(string); ok {
				return "<" + path[strings.LastIndexByte(path, '/')+1:] + ">"
			}
		case reqPath == "/server_info" && strings.HasPrefix(path, "/response/"):
			if _, ok := v.(json.Number); ok {
				return "<number>"
			}
		}
		return v
	})
	// Second pass: the strings.
	var pidRE *regexp.Regexp
	if len(pids) > 0 {
		pidRE = regexp.MustCompile(`\b(` + strings.Join(pids, "|") + `)\b`)
	}
	return mapOrdered(v, "", func(path string, v any) any {
		s, ok := v.(string)
		if !ok {
			return v
		}
		for _, d := range dirs {
			s = strings.ReplaceAll(s, d, workdirMark)
		}
		if pidRE != nil && !slices.Contains(goldenBlanks, s) {
			s = pidRE.ReplaceAllString(s, "<pid>")
		}
		return s
	})
}

// checkGolden compares got with the golden file at path, or rewrites it
// with -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file: %v (go test ./executor -run Golden -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the executor answers (go test ./executor -run Golden -update rewrites it):\n%s",
			path, lineDiff(string(want), string(got)))
	}
}

// lineDiff shows the first lines where want and got differ, with context.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	var b strings.Builder
	from := max(0, i-3)
	fmt.Fprintf(&b, "first difference at line %d\n", i+1)
	for k := from; k < i; k++ {
		fmt.Fprintf(&b, "  %s\n", w[k])
	}
	for k := i; k < min(len(w), i+6); k++ {
		fmt.Fprintf(&b, "- %s\n", w[k])
	}
	for k := i; k < min(len(g), i+6); k++ {
		fmt.Fprintf(&b, "+ %s\n", g[k])
	}
	return b.String()
}
