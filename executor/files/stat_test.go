package files

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestStat(t *testing.T) {
	d := t.TempDir()
	f := filepath.Join(d, "f")
	os.WriteFile(f, []byte("abc"), 0o640)
	os.Symlink("f", filepath.Join(d, "l"))
	in, err := Stat(context.Background(), f)
	if err != nil || in.Type != TypeFile || in.Size != 3 || in.Mode != 0o640 || in.Name != "f" || in.ModTime.IsZero() {
		t.Errorf("file: %+v %v", in, err)
	}
	in, err = Stat(context.Background(), filepath.Join(d, "l"))
	if err != nil || in.Type != TypeSymlink || in.LinkTarget != "f" {
		t.Errorf("symlink: %+v %v", in, err)
	}
	in, err = Stat(context.Background(), d)
	if err != nil || in.Type != TypeDir {
		t.Errorf("dir: %+v %v", in, err)
	}
	if _, err := Stat(context.Background(), filepath.Join(d, "nope")); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
}

func mkTree(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f)
		if f[len(f)-1] == '/' {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(f), 0o644)
	}
}

func names(in []Info) []string {
	out := []string{}
	for _, i := range in {
		out = append(out, i.Name)
	}
	return out
}

func TestList(t *testing.T) {
	d := t.TempDir()
	mkTree(t, d, "b.txt", "a/x", "a/sub/y", ".hidden/z", "a-b/", "c/")
	tests := []struct {
		opts ListOptions
		want []string
	}{
		{ListOptions{}, []string{".hidden", "a", "a-b", "b.txt", "c"}},
		{ListOptions{SkipHidden: true}, []string{"a", "a-b", "b.txt", "c"}},
		{ListOptions{Recursive: true}, []string{".hidden", ".hidden/z", "a", "a/sub", "a/sub/y", "a/x", "a-b", "b.txt", "c"}},
		{ListOptions{Recursive: true, MaxDepth: 2, SkipHidden: true}, []string{"a", "a/sub", "a/x", "a-b", "b.txt", "c"}},
	}
	for _, tt := range tests {
		got, err := List(context.Background(), d, tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(names(got), tt.want) {
			t.Errorf("List(%+v) = %v, want %v", tt.opts, names(got), tt.want)
		}
	}
	all, _ := List(context.Background(), d, ListOptions{})
	for _, in := range all {
		if in.Path != filepath.Join(d, in.Name) {
			t.Errorf("path %q for %q", in.Path, in.Name)
		}
	}
	if _, err := List(context.Background(), d, ListOptions{Recursive: true, Limit: 3}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("limit: %v", err)
	}
	if _, err := List(context.Background(), filepath.Join(d, "b.txt"), ListOptions{}); !errors.Is(err, ErrNotDir) {
		t.Errorf("file: %v", err)
	}
	if _, err := List(context.Background(), filepath.Join(d, "nope"), ListOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
}

func TestListNames(t *testing.T) {
	d := t.TempDir()
	mkTree(t, d, "b.txt", "A.txt", "a.txt", "Zdir/", "adir/", ".git/", ".env")
	os.Symlink("adir", filepath.Join(d, "link-to-dir"))
	os.Symlink("missing", filepath.Join(d, "dangling"))
	got, err := ListNames(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".git/", "adir/", "link-to-dir/", "Zdir/", ".env", "A.txt", "a.txt", "b.txt"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ListNames = %q\nwant %q", got, want)
	}
	for _, p := range []string{filepath.Join(d, "nope"), filepath.Join(d, "b.txt")} {
		got, err := ListNames(context.Background(), p)
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("ListNames(%q) = %#v, %v; want an empty list", p, got, err)
		}
	}
}
