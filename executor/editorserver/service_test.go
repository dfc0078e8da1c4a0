package editorserver

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
)

// The route and Do share one editor: an edit through the route is undone
// through Do; a refusal is a 400 tool_error with the agent's text.
func TestEditorService(t *testing.T) {
	dir := t.TempDir()
	mem := budget.NewMemory(1<<20, nil)
	s := New(dir, &httpapi.Bodies{Max: 1 << 20, Mem: mem}, nil)
	p := filepath.Join(dir, "a.txt")
	post := func(body string) (int, string) {
		rec := httptest.NewRecorder()
		s.Routes()[0].Handler(rec, httptest.NewRequest("POST", "/v1/editor", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	code, body := post(`{"command":"create","path":"` + p + `","file_text":"one\n"}`)
	if code != 200 || !strings.Contains(body, `"prev_exist":false`) {
		t.Fatalf("create: %d %s", code, body)
	}
	code, body = post(`{"command":"str_replace","path":"` + p + `","old_str":"one","new_str":"two"}`)
	var res api.EditorResult
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || !strings.Contains(res.Diff, "+two") {
		t.Fatalf("str_replace: %d %s", code, body)
	}
	if _, err := s.Do(context.Background(), editor.Command{Command: "undo_edit", Path: p}); err != nil {
		t.Fatalf("undo through Do: %v", err)
	}
	if r, err := s.Do(context.Background(), editor.Command{Command: "view", Path: p}); err != nil || !strings.Contains(r.Output, "one") {
		t.Fatalf("view after undo: %+v %v", r, err)
	}
	code, body = post(`{"command":"view","path":"relative"}`)
	var eb api.ErrorBody
	if code != 400 || json.Unmarshal([]byte(body), &eb) != nil || eb.Error.Code != api.CodeToolError {
		t.Fatalf("relative path: %d %s", code, body)
	}
	if code, body = post(`{"command":"view","path":"/","bogus":1}`); code != 400 || !strings.Contains(body, "unknown field") {
		t.Fatalf("unknown field: %d %s", code, body)
	}
	if mem.InUse() != 0 {
		t.Fatalf("request memory in use: %d", mem.InUse())
	}
}
