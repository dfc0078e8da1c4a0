package files

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestMove(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	mkTree(t, d, "src/a", "src/sub/b", "f", "g", "full/x", "empty/")
	if err := Move(ctx, filepath.Join(d, "f"), filepath.Join(d, "new", "dir", "f2"), MoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "new", "dir", "f2")); string(b) != "f" {
		t.Errorf("moved content %q", b)
	}
	if err := Move(ctx, filepath.Join(d, "src"), filepath.Join(d, "dst"), MoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "dst", "sub", "b")); err != nil {
		t.Error(err)
	}
	for _, tt := range []struct {
		src, dst string
		opts     MoveOptions
		want     error
	}{
		{"nope", "x", MoveOptions{}, ErrNotFound},
		{"g", "dst", MoveOptions{}, ErrExists},
		{"g", "dst", MoveOptions{Overwrite: true}, ErrIsDir},
		{"dst", "new/dir/f2", MoveOptions{Overwrite: true}, ErrNotDir},
		{"dst", "full", MoveOptions{Overwrite: true}, ErrNotEmpty},
		{"dst", "dst/inside", MoveOptions{}, ErrInvalidPath},
	} {
		err := Move(ctx, filepath.Join(d, tt.src), filepath.Join(d, tt.dst), tt.opts)
		if !errors.Is(err, tt.want) {
			t.Errorf("Move(%s, %s, %+v) = %v, want %v", tt.src, tt.dst, tt.opts, err, tt.want)
		}
	}
	if err := Move(ctx, filepath.Join(d, "g"), filepath.Join(d, "new", "dir", "f2"), MoveOptions{Overwrite: true}); err != nil {
		t.Errorf("overwrite file: %v", err)
	}
	if err := Move(ctx, filepath.Join(d, "dst"), filepath.Join(d, "empty"), MoveOptions{Overwrite: true}); err != nil {
		t.Errorf("overwrite empty dir: %v", err)
	}
	if err := Move(ctx, "rel", filepath.Join(d, "x"), MoveOptions{}); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("relative: %v", err)
	}
}

func TestMoveAcrossFilesystems(t *testing.T) {
	rename = func(string, string) error { return &os.LinkError{Op: "rename", Err: syscall.EXDEV} }
	defer func() { rename = os.Rename }()
	d := t.TempDir()
	src := filepath.Join(d, "src")
	mkTree(t, d, "src/a", "src/sub/b", "src/emptydir/")
	os.Chmod(filepath.Join(src, "a"), 0o751)
	os.Symlink("sub/b", filepath.Join(src, "link"))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(src, "sub", "b"), old, old)
	before := tree(t, src)

	dst := filepath.Join(d, "elsewhere", "dst")
	if err := Move(context.Background(), src, dst, MoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(src); !os.IsNotExist(err) {
		t.Errorf("source still there: %v", err)
	}
	after := tree(t, dst)
	if len(after) != len(before) {
		t.Fatalf("tree %v, want %v", after, before)
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %q, want %q", k, after[k], v)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dst, "sub", "b")); !fi.ModTime().Equal(old) {
		t.Errorf("mtime %v", fi.ModTime())
	}
	entries, _ := os.ReadDir(filepath.Dir(dst))
	if len(entries) != 1 {
		t.Errorf("leftovers next to dst: %v", entries)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	mkTree(t, d, "f", "empty/", "full/x/y", "target")
	os.Symlink("target", filepath.Join(d, "link"))
	for _, tt := range []struct {
		path string
		opts DeleteOptions
		want error
	}{
		{"nope", DeleteOptions{}, ErrNotFound},
		{"full", DeleteOptions{}, ErrNotEmpty},
		{"f", DeleteOptions{}, nil},
		{"empty", DeleteOptions{}, nil},
		{"link", DeleteOptions{}, nil},
		{"full", DeleteOptions{Recursive: true}, nil},
	} {
		err := Delete(ctx, filepath.Join(d, tt.path), tt.opts)
		if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("Delete(%s, %+v) = %v, want %v", tt.path, tt.opts, err, tt.want)
		}
	}
	if !errors.Is(ErrNotEmpty, ErrExists) {
		t.Error("ErrNotEmpty does not wrap ErrExists")
	}
	if _, err := os.Stat(filepath.Join(d, "target")); err != nil {
		t.Error("deleting a symlink removed its target")
	}
	entries, _ := os.ReadDir(d)
	if len(entries) != 1 {
		t.Errorf("left: %v", entries)
	}
	if err := Delete(ctx, "/", DeleteOptions{Recursive: true}); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("delete /: %v", err)
	}
}
