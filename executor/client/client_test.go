package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
)

func sockPath(t *testing.T) string {
	dir, err := os.MkdirTemp("", "bxc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "e.sock")
}

func TestWaitReadyThenRun(t *testing.T) {
	sock := sockPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := executor.New(executor.Options{APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ready := make(chan error, 1)
	go func() { ready <- client.WaitReady(ctx, sock) }()
	// The socket appears after the client started polling.
	time.Sleep(20 * time.Millisecond)
	ln, err := executor.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ctx, ln)
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	c := client.New(sock, client.WithAPIKey("k"))
	defer c.Close()
	res, err := c.Run(ctx, api.RunRequest{Argv: []string{"sh", "-c", "echo hi; exit 2"}})
	if err != nil || res.ExitCode != 2 || res.Stdout != "hi\n" {
		t.Fatalf("run: %+v %v", res, err)
	}
	if _, err := c.Process(ctx, "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown process: %v", err)
	}
	var ae *api.Error
	if _, err := c.Process(ctx, "nope"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("status of the error: %v", err)
	}
}

func TestWaitReadyGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := client.WaitReady(ctx, sockPath(t)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady on a missing socket: %v", err)
	}
}

func TestNonJSONError(t *testing.T) {
	sock := sockPath(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "teapot", http.StatusTeapot)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	c := client.New(sock)
	defer c.Close()
	var ae *api.Error
	if err := c.Alive(context.Background()); !errors.As(err, &ae) || ae.Status != 418 || ae.Code != "http_418" || ae.Message != "teapot" {
		t.Fatalf("non-JSON error: %v", err)
	}
}
