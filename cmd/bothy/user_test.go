package main

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/internal/testimage"
)

// tarLayer is a layer of the entries write puts in a tar.
func tarLayer(t *testing.T, write func(*tar.Writer)) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	write(tw)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// busyboxLayer is the busybox root filesystem as one layer.
func busyboxLayer(t *testing.T) v1.Layer {
	return tarLayer(t, func(tw *tar.Writer) {
		var rootfs bytes.Buffer
		if err := testimage.BusyboxTar(&rootfs); err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(&rootfs)
		for {
			h, err := tr.Next()
			if err != nil {
				return
			}
			tw.WriteHeader(h)
			io.Copy(tw, tr)
		}
	})
}

// loadImage loads an image of layers with config cfg into c's store as name.
func loadImage(t *testing.T, c *cli, name string, cfg v1.Config, layers ...v1.Layer) {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	c.ok("load", dir, name)
}

// TestDefaultUserFiles: in a sandbox of an image whose config says User
// 1000 and WorkingDir /home/app, what the API creates is that user's, as
// its processes are: bothy cp (a file, a directory, a tar stream), the
// editor, PUT /v1/files (with ?user=root for root's), and a terminal
// (exec -it) runs as 1000 in /home/app, as root with -u root. A file that
// exists keeps its owner.
func TestDefaultUserFiles(t *testing.T) {
	c := newCLI(t)
	home := tarLayer(t, func(tw *tar.Writer) {
		tw.WriteHeader(&tar.Header{Name: "home/", Typeflag: tar.TypeDir, Mode: 0o755})
		tw.WriteHeader(&tar.Header{Name: "home/app/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: 1000, Gid: 1000})
	})
	loadImage(t, c, "app:1", v1.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"/bin/sh"}, User: "1000", WorkingDir: "/home/app"}, busyboxLayer(t), home)
	c.ok("run", "-d", "--name", "app", "app:1")
	owner := func(paths ...string) string {
		return c.ok(append([]string{"exec", "app", "--", "stat", "-c", "%u:%g %n"}, paths...)...)
	}
	if out := c.ok("exec", "app", "--", "sh", "-c", "id -u; pwd"); out != "1000\n/home/app\n" {
		t.Fatalf("exec: %q, want 1000 in /home/app", out)
	}

	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "f"), []byte("f\n"), 0o644)
	os.MkdirAll(filepath.Join(host, "d", "sub"), 0o755)
	os.WriteFile(filepath.Join(host, "d", "sub", "g"), []byte("g\n"), 0o644)
	c.ok("cp", filepath.Join(host, "f"), "app:/home/app/new/dirs/f")
	c.ok("cp", filepath.Join(host, "d"), "app:/home/app/")
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "t.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
	tw.Write([]byte("t\n"))
	tw.Close()
	if _, errOut, code := c.run(tb.String(), "cp", "-", "app:/home/app/tar"); code != 0 {
		t.Fatalf("cp -: %d %s", code, errOut)
	}
	want := "1000:1000 /home/app/new\n1000:1000 /home/app/new/dirs\n1000:1000 /home/app/new/dirs/f\n" +
		"1000:1000 /home/app/d\n1000:1000 /home/app/d/sub/g\n1000:1000 /home/app/tar\n1000:1000 /home/app/tar/t.txt\n"
	if out := owner("/home/app/new", "/home/app/new/dirs", "/home/app/new/dirs/f", "/home/app/d", "/home/app/d/sub/g", "/home/app/tar", "/home/app/tar/t.txt"); out != want {
		t.Errorf("owners of what bothy cp made:\n%s\nwant\n%s", out, want)
	}
	// An existing file (root's) keeps its owner.
	c.ok("exec", "-u", "root", "app", "--", "sh", "-c", "echo old > /tmp/rootfile")
	c.ok("cp", filepath.Join(host, "f"), "app:/tmp/rootfile")
	if out := owner("/tmp/rootfile"); out != "0:0 /tmp/rootfile\n" {
		t.Errorf("a replaced file of root's: %q", out)
	}

	m, err := sandboxManager(c)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := m.Get(context.Background(), "app")
	if err != nil {
		t.Fatal(err)
	}
	ec := sb.Client()
	defer ec.Close()
	ctx := context.Background()
	if _, err := ec.WriteFile(ctx, "/home/app/put", strings.NewReader("x"), client.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.WriteFile(ctx, "/home/app/put-root", strings.NewReader("x"), client.WriteOptions{User: "root"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.Edit(ctx, apiEdit("/home/app/edited/e.py")); err != nil {
		t.Fatal(err)
	}
	want = "1000:1000 /home/app/put\n0:0 /home/app/put-root\n1000:1000 /home/app/edited\n1000:1000 /home/app/edited/e.py\n"
	if out := owner("/home/app/put", "/home/app/put-root", "/home/app/edited", "/home/app/edited/e.py"); out != want {
		t.Errorf("owners of what the API made:\n%s\nwant\n%s", out, want)
	}
	if _, err := ec.WriteFile(ctx, "/home/app/x", strings.NewReader("x"), client.WriteOptions{User: "nosuchuser"}); err == nil || !strings.Contains(err.Error(), "nosuchuser") {
		t.Errorf("a write as an unknown user: %v", err)
	}

	// A terminal: the default user and directory, or root with -u root.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "-it", "app", "--", "sh", "-c", "echo \"u=$(id -u) d=$(pwd) tty=$(stat -c %u $(tty))\""}, "u=1000 d=/home/app tty=1000"},
		{[]string{"exec", "-it", "-u", "root", "app", "--", "sh", "-c", "echo \"u=$(id -u)\""}, "u=0"},
	} {
		h := newHostTerm(t, 24, 80)
		cmd := c.child(tc.args...)
		h.start(cmd)
		h.waitFor(tc.want)
		if code := waitCode(t, cmd); code != 0 {
			t.Errorf("bothy %s: exit %d; terminal: %q", strings.Join(tc.args, " "), code, h.String())
		}
	}
}

func apiEdit(path string) api.EditorCommand {
	text := "print(1)\n"
	return api.EditorCommand{Command: "create", Path: path, FileText: &text}
}
