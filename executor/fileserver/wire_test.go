package fileserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/files"
)

// The file and editor answers are the JSON the library types had when
// executor/api aliased them, byte for byte (the golden lines were written
// by encoding files.Info, files.ReadResult, files.UploadResult,
// files.ExtractResult and editor.Command before the wire types were split
// off), and every field of a library result reaches the wire.
func TestWireFormat(t *testing.T) {
	info := &files.Info{Path: "/a/b", Name: "b", Type: files.TypeSymlink, Size: 12, Mode: 0o4755,
		ModTime: time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC), UID: 1000, GID: 100, LinkTarget: "../c"}
	s, n := "s", 3
	var cmd api.EditorCommand
	for _, tc := range []struct {
		v    any
		want string
	}{
		{wireInfo(info), `{"path":"/a/b","name":"b","type":"symlink","size":12,"mode":2541,"mtime":"2024-01-02T03:04:05.000000006Z","uid":1000,"gid":100,"link_target":"../c"}`},
		{wireInfo(&files.Info{}), `{"path":"","name":"","type":"","size":0,"mode":0,"mtime":"0001-01-01T00:00:00Z","uid":0,"gid":0}`},
		{wireContent(&files.ReadResult{Path: "/a", Kind: files.KindText, MIME: "text/plain; charset=utf-8", Content: "x\n<&>\u2028", Size: 3, Start: 1, End: 2, TotalLines: 5, Truncated: true}),
			`{"path":"/a","kind":"text","mime":"text/plain; charset=utf-8","content":"x\n<&>\u2028","size":3,"start":1,"end":2,"total_lines":5,"truncated":true}`},
		{wireContent(&files.ReadResult{}), `{"path":"","kind":"","mime":"","content":"","size":0,"total_lines":0}`},
		{wireUpload(&files.UploadResult{Path: "/d", File: info, Archive: &files.ExtractResult{Files: 1, Dirs: 2, Symlinks: 3, Links: 4, Bytes: 5, Skipped: 6}}),
			`{"path":"/d","file":{"path":"/a/b","name":"b","type":"symlink","size":12,"mode":2541,"mtime":"2024-01-02T03:04:05.000000006Z","uid":1000,"gid":100,"link_target":"../c"},"archive":{"files":1,"dirs":2,"symlinks":3,"links":4,"bytes":5,"skipped":6}}`},
		{wireUpload(&files.UploadResult{}), `{"path":""}`},
		{api.ExtractResult(files.ExtractResult{}), `{"files":0,"dirs":0,"symlinks":0,"links":0,"bytes":0}`},
		{api.EditorCommand(editor.Command{Command: "insert", Path: "/p", FileText: &s, OldStr: &s, NewStr: &s, InsertLine: &n, ViewRange: []int{1, -1}}),
			`{"command":"insert","path":"/p","file_text":"s","old_str":"s","new_str":"s","insert_line":3,"view_range":[1,-1]}`},
		{cmd, `{"command":"","path":""}`},
	} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(tc.v); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSuffix(b.String(), "\n"); got != tc.want {
			t.Errorf("%T:\n got %s\nwant %s", tc.v, got, tc.want)
		}
	}
	// A field added to a library result without its wire twin fails here.
	for _, pair := range [][2]any{{files.Info{}, api.FileInfo{}}, {files.ReadResult{}, api.FileContent{}}, {files.UploadResult{}, api.UploadResult{}}} {
		lt, wt := reflect.TypeOf(pair[0]), reflect.TypeOf(pair[1])
		if lt.NumField() != wt.NumField() {
			t.Errorf("%v has %d fields, its wire type %v %d", lt, lt.NumField(), wt, wt.NumField())
		}
	}
}
