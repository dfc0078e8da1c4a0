package executor_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
)

func TestFilesAPI(t *testing.T) {
	ts := newServer(t, executor.Options{MaxUpload: 1 << 20})
	ctx := testCtx(t)
	c := ts.c
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "f.txt")

	in, err := c.WriteFile(ctx, p, strings.NewReader("one\ntwo\nthree\n"), client.WriteOptions{Mode: 0o640})
	if err != nil || in.Size != 14 || in.Mode != 0o640 || in.Type != api.FileTypeFile {
		t.Fatalf("write: %+v %v", in, err)
	}
	if _, err := c.WriteFile(ctx, p, strings.NewReader("x"), client.WriteOptions{Exclusive: true}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("exclusive write over a file: %v", err)
	}
	if _, err := c.WriteFile(ctx, p, strings.NewReader("four\n"), client.WriteOptions{Append: true}); err != nil {
		t.Fatal(err)
	}
	rd, err := c.ReadFile(ctx, p, client.ReadOptions{Start: 2, End: 3})
	if err != nil || rd.Content != "two\nthree\n" || rd.Start != 2 || rd.End != 3 || rd.Kind != api.KindText {
		t.Fatalf("read: %+v %v", rd, err)
	}
	st, err := c.Stat(ctx, p)
	if err != nil || st.Size != 19 || st.Mode != 0o640 {
		t.Fatalf("stat: %+v %v", st, err)
	}
	os.Symlink("f.txt", filepath.Join(dir, "sub", "link"))
	if st, err := c.StatFollow(ctx, filepath.Join(dir, "sub", "link")); err != nil || st.Type != api.FileTypeFile {
		t.Fatalf("stat follow: %+v %v", st, err)
	}
	list, err := c.ListFiles(ctx, dir, client.ListOptions{Recursive: true})
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
	}
	if err != nil || !slices.Equal(names, []string{"sub", "sub/f.txt", "sub/link"}) {
		t.Fatalf("list: %v %v", names, err)
	}
	moved := filepath.Join(dir, "g.txt")
	if in, err := c.Move(ctx, p, moved, false); err != nil || in.Path != moved {
		t.Fatalf("move: %+v %v", in, err)
	}
	if err := c.Delete(ctx, dir, false); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("delete a non-empty directory: %v", err)
	}
	if err := c.Delete(ctx, filepath.Join(dir, "sub"), true); err != nil {
		t.Fatal(err)
	}

	// Errors map to statuses.
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v1/files?path=" + dir + "/nope", 404, api.CodeNotFound},
		{"GET", "/v1/files?path=" + dir, 400, api.CodeBadRequest},
		{"GET", "/v1/files?path=rel/x", 400, api.CodeBadRequest},
		{"GET", "/v1/files", 400, api.CodeBadRequest},
		{"GET", "/v1/files?path=/x&start=0", 400, api.CodeBadRequest},
		{"GET", "/v1/files?path=/x&bogus=1", 400, api.CodeBadRequest},
		{"GET", "/v1/files/stat?path=" + dir + "/nope", 404, api.CodeNotFound},
		{"GET", "/v1/files/list?path=" + moved, 400, api.CodeBadRequest},
		{"DELETE", "/v1/files?path=/", 400, api.CodeBadRequest},
		{"PUT", "/v1/files?path=" + moved + "/x", 400, api.CodeBadRequest},
		{"PUT", "/v1/files?path=" + moved + "&mode=999", 400, api.CodeBadRequest},
		{"GET", "/v1/files/download?path=" + dir + "&format=rar", 400, api.CodeBadRequest},
	} {
		status, body := ts.raw(t, tc.method, tc.path, "")
		wantError(t, status, body, tc.status, tc.code)
	}
	status, body := ts.raw(t, "POST", "/v1/files/move", `{"src":"`+moved+`","dst":"`+dir+`"}`)
	wantError(t, status, body, 409, api.CodeConflict)
	status, body = ts.raw(t, "PUT", "/v1/files?path="+dir+"/big", strings.Repeat("x", 2<<20))
	wantError(t, status, body, 413, api.CodeTooLarge)

	// Images come back as data: URLs.
	os.WriteFile(filepath.Join(dir, "i.gif"), []byte("GIF89a..."), 0o644)
	if rd, err := c.ReadFile(ctx, filepath.Join(dir, "i.gif"), client.ReadOptions{}); err != nil || rd.Kind != api.KindImage ||
		!strings.HasPrefix(rd.Content, "data:image/gif;base64,") {
		t.Fatalf("read image: %+v %v", rd, err)
	}
}

func TestUploadDownload(t *testing.T) {
	ts := newServer(t, executor.Options{})
	ctx := testCtx(t)
	c := ts.c
	dir := t.TempDir()

	// Raw upload of a file, and of a tar unpacked.
	up, err := c.Upload(ctx, filepath.Join(dir, "a.bin"), bytes.NewReader([]byte{0, 1, 2}), client.UploadOptions{Mode: 0o600})
	if err != nil || up.File == nil || up.File.Size != 3 || up.File.Mode != 0o600 {
		t.Fatalf("upload: %+v %v", up, err)
	}
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "d/x", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.WriteHeader(&tar.Header{Name: "d/abs", Typeflag: tar.TypeSymlink, Linkname: "/etc/hostname"})
	tw.Close()
	up, err = c.Upload(ctx, filepath.Join(dir, "t"), &tb, client.UploadOptions{Extract: true})
	if err != nil || up.Archive == nil || up.Archive.Files != 1 || up.Archive.Dirs != 1 || up.Archive.Symlinks != 1 {
		t.Fatalf("upload tar: %+v %v", up, err)
	}
	if target, _ := os.Readlink(filepath.Join(dir, "t", "d", "abs")); target != "/etc/hostname" {
		t.Fatalf("symlink in an upload: %q", target)
	}
	status, body := ts.raw(t, "POST", "/v1/files/upload?path="+dir+"/u&extract=1", "not an archive")
	wantError(t, status, body, 400, api.CodeBadRequest)

	// Multipart: several files into a directory.
	var mb bytes.Buffer
	mw := multipart.NewWriter(&mb)
	for _, name := range []string{"m1.txt", "m2.txt"} {
		fw, _ := mw.CreateFormFile("file", name)
		io.WriteString(fw, "content of "+name)
	}
	mw.WriteField("other", "ignored")
	mw.Close()
	status, body = ts.raw(t, "POST", "/v1/files/upload?path="+dir+"/multi/", mb.String(), "Content-Type", mw.FormDataContentType())
	if status != 200 || strings.Count(string(body), `"name"`) != 2 {
		t.Fatalf("multipart: %d %s", status, body)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "multi", "m2.txt")); string(b) != "content of m2.txt" {
		t.Fatalf("multipart file: %q", b)
	}

	// Download: a file as itself with its metadata, a directory as tar or zip.
	d, err := c.Download(ctx, filepath.Join(dir, "a.bin"), "")
	if err != nil || d.Dir || d.Name != "a.bin" || d.Mode != 0o600 || d.Size != 3 || d.MIME != "application/octet-stream" {
		t.Fatalf("download a file: %+v %v", d, err)
	}
	if b, _ := io.ReadAll(d.Body); !bytes.Equal(b, []byte{0, 1, 2}) {
		t.Fatalf("downloaded %v", b)
	}
	d.Body.Close()
	d, err = c.Download(ctx, filepath.Join(dir, "t"), api.FormatTar)
	if err != nil || !d.Dir || d.Name != "t.tar" || d.MIME != "application/x-tar" {
		t.Fatalf("download a directory: %+v %v", d, err)
	}
	tr := tar.NewReader(d.Body)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	d.Body.Close()
	if !slices.Equal(names, []string{"d/", "d/abs", "d/x"}) {
		t.Fatalf("tar entries %v", names)
	}
	status, body = ts.raw(t, "GET", "/v1/files/download?path="+dir+"/t&format=zip", "")
	if _, err := zip.NewReader(bytes.NewReader(body), int64(len(body))); status != 200 || err != nil {
		t.Fatalf("zip download: %d %v", status, err)
	}
}

func TestEditorAPI(t *testing.T) {
	ts := newServer(t, executor.Options{})
	ctx := testCtx(t)
	p := filepath.Join(t.TempDir(), "e.txt")
	text, old, nw := "alpha\nbeta\n", "beta", "gamma"
	res, err := ts.c.Edit(ctx, api.EditorCommand{Command: "create", Path: p, FileText: &text})
	if err != nil || res.PrevExist || !strings.Contains(res.Output, "File created successfully") {
		t.Fatalf("create: %+v %v", res, err)
	}
	res, err = ts.c.Edit(ctx, api.EditorCommand{Command: "str_replace", Path: p, OldStr: &old, NewStr: &nw})
	if err != nil || !res.PrevExist || res.OldContent != text || res.NewContent != "alpha\ngamma\n" ||
		res.Diff != "--- "+p+"\n+++ "+p+"\n@@ -2 +2 @@\n-beta\n+gamma" {
		t.Fatalf("str_replace: %+v %v", res, err)
	}
	res, err = ts.c.Edit(ctx, api.EditorCommand{Command: "view", Path: p, ViewRange: []int{2, -1}})
	if err != nil || res.Output != "Here's the result of running `cat -n` on "+p+":\n     2\tgamma\n" || res.Diff != "" {
		t.Fatalf("view: %q %v", res.Output, err)
	}
	_, err = ts.c.Edit(ctx, api.EditorCommand{Command: "str_replace", Path: p, OldStr: &old, NewStr: &nw})
	var ae *api.Error
	if !errors.Is(err, api.ErrToolError) || !errors.As(err, &ae) || ae.Status != 400 ||
		!strings.HasPrefix(ae.Message, "No replacement was performed, old_str `beta` did not appear verbatim") {
		t.Fatalf("tool error: %v", err)
	}
	status, body := ts.raw(t, "POST", "/v1/editor", `{"command":"view","path":"/","bogus":1}`)
	wantError(t, status, body, 400, api.CodeBadRequest)
}
