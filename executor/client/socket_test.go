package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/internal/testenv"
)

// TestSocketIdentity replaces a live executor's socket file with what a
// sandbox could have put there and checks that a client bound to the
// recorded identity refuses each one before sending anything.
func TestSocketIdentity(t *testing.T) {
	sock := sockPath(t)
	dir := filepath.Dir(sock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := executor.New(executor.Options{APIKey: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, err := executor.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ctx, ln)
	id, err := client.StatSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	if id.UID != uint32(os.Getuid()) || id.Ino == 0 {
		t.Fatalf("identity %+v", id)
	}
	newClient := func(id client.SocketIdentity) *client.Client {
		c := client.New(sock, client.WithAPIKey("s3cret"), client.WithSocketIdentity(id), client.WithMaxIdleConns(1))
		t.Cleanup(func() { c.Close() })
		return c
	}
	if _, err := newClient(id).Info(ctx); err != nil {
		t.Fatalf("the recorded socket: %v", err)
	}

	real := filepath.Join(dir, "real.sock")
	swap := func(t *testing.T, replace func()) {
		if err := os.Rename(sock, real); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			os.Remove(sock)
			if err := os.Rename(real, sock); err != nil {
				t.Fatal(err)
			}
		})
		replace()
	}
	refused := func(t *testing.T, c *client.Client, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.Info(ctx)
		if !errors.Is(err, client.ErrUntrustedSocket) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Info: %v, want ErrUntrustedSocket saying %q", err, want)
		}
	}

	t.Run("symlink to another socket", func(t *testing.T) {
		d := testenv.NewDecoy(t, filepath.Join(dir, "decoy.sock"))
		swap(t, func() {
			if err := os.Symlink(d.Path, sock); err != nil {
				t.Fatal(err)
			}
		})
		refused(t, newClient(id), "symlink")
		d.Untouched(t)
	})
	t.Run("symlink to the executor's own socket", func(t *testing.T) {
		swap(t, func() {
			if err := os.Symlink(real, sock); err != nil {
				t.Fatal(err)
			}
		})
		refused(t, newClient(id), "symlink")
	})
	t.Run("regular file", func(t *testing.T) {
		swap(t, func() {
			if err := os.WriteFile(sock, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		})
		refused(t, newClient(id), "not a socket")
	})
	t.Run("directory", func(t *testing.T) {
		swap(t, func() {
			if err := os.Mkdir(sock, 0o700); err != nil {
				t.Fatal(err)
			}
		})
		refused(t, newClient(id), "not a socket")
	})
	t.Run("another socket", func(t *testing.T) {
		var d *testenv.Decoy
		swap(t, func() { d = testenv.NewDecoy(t, sock) })
		refused(t, newClient(id), "another socket")
		d.Untouched(t)
	})
	t.Run("another owner", func(t *testing.T) {
		other := id
		other.UID++
		refused(t, newClient(other), "owned by uid")
	})
	t.Run("nothing recorded", func(t *testing.T) {
		refused(t, newClient(client.SocketIdentity{}), "no socket identity")
	})
	t.Run("back in place", func(t *testing.T) {
		if _, err := newClient(id).Run(ctx, api.RunRequest{Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestStatSocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.StatSocket(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("StatSocket of a file: %v", err)
	}
	if _, err := client.StatSocket(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("StatSocket of nothing: %v", err)
	}
}

// BenchmarkDial compares a first request (a new connection) with and
// without the socket identity check.
func BenchmarkDial(b *testing.B) {
	dir, err := os.MkdirTemp("", "bxc")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "e.sock")
	s, err := executor.New(executor.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ln, err := executor.Listen(sock)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Serve(ctx, ln)
	id, err := client.StatSocket(sock)
	if err != nil {
		b.Fatal(err)
	}
	for name, opts := range map[string][]client.Option{"plain": nil, "verified": {client.WithSocketIdentity(id)}} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				c := client.New(sock, opts...)
				if err := c.Alive(ctx); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}
