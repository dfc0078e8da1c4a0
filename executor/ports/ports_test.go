package ports_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/ports"
)

// serve answers the service's routes on a Unix socket and returns a client
// of it.
func serve(t *testing.T) (*client.Client, *ports.Service) {
	t.Helper()
	svc := ports.New(ports.Options{})
	mux := http.NewServeMux()
	for _, rt := range svc.Routes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, rt.Handler)
	}
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { svc.Close(); srv.Close() })
	c := client.New(sock)
	t.Cleanup(func() { c.Close() })
	return c, svc
}

// echoServer listens on the loopback and echoes each line back upper-cased,
// then half-closes when the client does.
func echoServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if line != "" {
						io.WriteString(c, strings.ToUpper(line))
					}
					if err != nil {
						io.WriteString(c, "bye\n")
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestDialPort(t *testing.T) {
	c, _ := serve(t)
	port := echoServer(t)
	conn, err := c.DialPort(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	// Bytes both ways, then a half-close passed on: the server's last
	// words still arrive.
	io.WriteString(conn, "hello\nworld\n")
	conn.(interface{ CloseWrite() error }).CloseWrite()
	b, err := io.ReadAll(conn)
	if err != nil || string(b) != "HELLO\nWORLD\nbye\n" {
		t.Errorf("through the forward: %q %v", b, err)
	}
}

func TestDialPortRefused(t *testing.T) {
	c, _ := serve(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, err := c.DialPort(context.Background(), port)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || ae.Code != api.CodeBadGateway || !strings.Contains(ae.Message, "connection refused") {
		t.Errorf("a closed port: %v, want 502 bad_gateway", err)
	}
}

func TestConnectNeedsUpgrade(t *testing.T) {
	svc := ports.New(ports.Options{})
	for path, want := range map[string]int{"/v1/ports/80/connect": http.StatusUpgradeRequired, "/v1/ports/0/connect": 400, "/v1/ports/65536/connect": 400, "/v1/ports/08/connect": 400} {
		mux := http.NewServeMux()
		rt := svc.Routes()[0]
		mux.HandleFunc(rt.Method+" "+rt.Path, rt.Handler)
		rec := &recorder{h: http.Header{}}
		req, _ := http.NewRequest("GET", path, nil)
		mux.ServeHTTP(rec, req)
		if rec.code != want {
			t.Errorf("GET %s without upgrade: %d, want %d", path, rec.code, want)
		}
	}
}

type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(c int)           { r.code = c }

// Close ends the forwarded connections.
func TestCloseEndsForwards(t *testing.T) {
	c, svc := serve(t)
	port := echoServer(t)
	conn, err := c.DialPort(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	svc.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("a forward outlived the service's Close")
	}
}

// Forward serves a listener: many connections at once.
func TestForward(t *testing.T) {
	c, _ := serve(t)
	port := echoServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Forward(ctx, ln, port, nil) }()
	errs := make(chan error, 10)
	for range 10 {
		go func() {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			io.WriteString(conn, "x\n")
			conn.(*net.TCPConn).CloseWrite()
			b, _ := io.ReadAll(conn)
			if string(b) != "X\nbye\n" {
				err = errors.New("got " + string(b))
			}
			errs <- err
		}()
	}
	for range 10 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Forward: %v", err)
	}
}

var _ = httpapi.Route{}
