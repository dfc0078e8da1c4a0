package executor_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
)

// The executor forwards a port behind its API key, and passes a client's
// half-close on through its connection limit.
func TestPortForwardThroughServer(t *testing.T) {
	ts := newServer(t, executor.Options{APIKey: "k"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // until the client's half-close
		io.WriteString(c, "got "+string(b))
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	if _, err := client.New(ts.socket, client.WithAPIKey("wrong")).DialPort(context.Background(), port); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("DialPort with a wrong key: %v, want forbidden", err)
	}
	conn, err := ts.c.DialPort(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "abc")
	if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil || !strings.HasPrefix(string(b), "got abc") {
		t.Errorf("through the executor: %q %v", b, err)
	}
}
