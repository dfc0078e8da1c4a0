package client_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/client"
)

// serve runs an executor in-process; its "sandbox" is this machine, so
// copies land in temporary directories.
func serve(t *testing.T) *client.Client {
	t.Helper()
	sock := sockPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := executor.New(executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := executor.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	c := client.New(sock)
	t.Cleanup(func() { c.Close(); s.Close(); cancel(); <-done })
	return c
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCopyToAndFrom(t *testing.T) {
	c := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, box, back := t.TempDir(), t.TempDir(), t.TempDir()

	src := filepath.Join(host, "proj")
	write(t, filepath.Join(src, "run.sh"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(src, "sub", "data.txt"), "data", 0o600)
	os.Symlink("sub/data.txt", filepath.Join(src, "rel"))
	os.Symlink("/etc/hostname", filepath.Join(src, "abs"))

	// A directory to a new path, then into an existing directory.
	res, err := c.CopyTo(ctx, src, filepath.Join(box, "copy"))
	if err != nil || !res.Dir || res.Dst != filepath.Join(box, "copy") || res.Files != 2 || res.Symlinks != 2 {
		t.Fatalf("CopyTo: %+v %v", res, err)
	}
	if read(t, filepath.Join(box, "copy", "sub", "data.txt")) != "data" {
		t.Fatal("content")
	}
	if fi, _ := os.Stat(filepath.Join(box, "copy", "run.sh")); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", fi.Mode())
	}
	if l, _ := os.Readlink(filepath.Join(box, "copy", "abs")); l != "/etc/hostname" {
		t.Errorf("absolute symlink into the sandbox: %q", l)
	}
	if res, err = c.CopyTo(ctx, src, box); err != nil || res.Dst != filepath.Join(box, "proj") {
		t.Fatalf("CopyTo an existing directory: %+v %v", res, err)
	}
	// Contents only, with "/.".
	if _, err = c.CopyTo(ctx, src+"/.", filepath.Join(box, "flat")); err != nil || read(t, filepath.Join(box, "flat", "sub", "data.txt")) != "data" {
		t.Fatalf("CopyTo contents: %v", err)
	}
	// A file, into a directory and to a new name.
	f := filepath.Join(src, "run.sh")
	if res, err = c.CopyTo(ctx, f, box+"/"); err != nil || res.Dst != filepath.Join(box, "run.sh") || res.Bytes != 10 {
		t.Fatalf("CopyTo a file: %+v %v", res, err)
	}
	if _, err = c.CopyTo(ctx, f, filepath.Join(box, "renamed.sh")); err != nil || read(t, filepath.Join(box, "renamed.sh")) != "#!/bin/sh\n" {
		t.Fatalf("CopyTo a file to a new name: %v", err)
	}
	if _, err = c.CopyTo(ctx, f, filepath.Join(box, "nodir")+"/"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("CopyTo a missing directory: %v", err)
	}
	if _, err = c.CopyTo(ctx, src, filepath.Join(box, "renamed.sh")); err == nil {
		t.Fatal("CopyTo a directory over a file")
	}

	// Back out: the symlink leading out of the tree is skipped.
	res, err = c.CopyFrom(ctx, filepath.Join(box, "copy"), filepath.Join(back, "out"))
	if err != nil || !res.Dir || res.Skipped != 1 || res.Symlinks != 1 || res.Files != 2 {
		t.Fatalf("CopyFrom: %+v %v", res, err)
	}
	if read(t, filepath.Join(back, "out", "rel")) != "data" {
		t.Fatal("relative symlink")
	}
	if _, err := os.Lstat(filepath.Join(back, "out", "abs")); !os.IsNotExist(err) {
		t.Fatalf("absolute symlink copied to the host: %v", err)
	}
	if res, err = c.CopyFrom(ctx, filepath.Join(box, "copy", "sub", "data.txt"), back); err != nil || res.Dst != filepath.Join(back, "data.txt") {
		t.Fatalf("CopyFrom a file: %+v %v", res, err)
	}
	if fi, _ := os.Stat(filepath.Join(back, "data.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if _, err = c.CopyFrom(ctx, filepath.Join(box, "nope"), back); err == nil {
		t.Fatal("CopyFrom a missing path")
	}
}
