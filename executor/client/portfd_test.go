package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
)

// fakeExecutor answers every connection on a Unix socket with a 101 that
// carries give()'s descriptors (closed after sending), as a hostile
// executor could: PortSocket must refuse what is not one TCP socket.
func fakeExecutor(t *testing.T, give func() []int) string {
	t.Helper()
	sock := sockPath(t)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			_, _ = c.Read(buf) // the request
			fds := give()
			var oob []byte
			if len(fds) > 0 {
				oob = unix.UnixRights(fds...)
			}
			_, _, _ = c.WriteMsgUnix([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: fd\r\n\r\n"), oob, nil)
			for _, fd := range fds {
				unix.Close(fd)
			}
			c.Close()
		}
	}()
	return sock
}

// TestPortSocketRefusesNonTCP: a pipe, a Unix socket, a UDP socket, a
// regular file, no descriptor and two descriptors passed back as "the
// connected socket" are each refused with ErrNotTCPSocket, and none of
// them stays open in the caller.
func TestPortSocketRefusesNonTCP(t *testing.T) {
	cases := map[string]func() []int{
		"pipe": func() []int {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				t.Error(err)
			}
			unix.Close(p[1])
			return p[:1]
		},
		"unix socket": func() []int {
			p, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Error(err)
			}
			unix.Close(p[1])
			return p[:1]
		},
		"udp socket": func() []int {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Error(err)
			}
			return []int{fd}
		},
		"file": func() []int {
			fd, err := unix.Open(os.Args[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Error(err)
			}
			return []int{fd}
		},
		"nothing": func() []int { return nil },
		"unconnected tcp socket": func() []int {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Error(err)
			}
			return []int{fd}
		},
		"listening tcp socket": func() []int {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err == nil {
				err = unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
			}
			if err == nil {
				err = unix.Listen(fd, 1)
			}
			if err != nil {
				t.Error(err)
			}
			return []int{fd}
		},
		"two tcp sockets": func() []int {
			a, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			b, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			return []int{a, b}
		},
	}
	for name, give := range cases {
		t.Run(name, func(t *testing.T) {
			c := client.New(fakeExecutor(t, give))
			defer c.Close()
			before := openFDs(t)
			conn, err := c.PortSocket(context.Background(), 80)
			if err == nil {
				conn.Close()
				t.Fatalf("accepted a %s as the port's socket", name)
			}
			if !errors.Is(err, client.ErrNotTCPSocket) {
				t.Errorf("error %v, want ErrNotTCPSocket", err)
			}
			if after := openFDs(t); after != before {
				t.Errorf("%d descriptors open after, %d before: the refused one was kept", after, before)
			}
		})
	}
}

// TestPortSocketSilentExecutor: an executor that never answers does not
// hold PortSocket past its context.
func TestPortSocketSilentExecutor(t *testing.T) {
	sock := sockPath(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(time.Minute)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := client.New(sock).PortSocket(ctx, 80); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("PortSocket on a silent executor: %v, want the deadline", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("PortSocket still waiting on a silent executor")
	}
}

// TestPortSocket: the real executor passes back the socket it connected,
// behind its API key; bytes go both ways on it with the executor out of
// the path (its own connection is closed at once); a port nothing listens
// on is bad_gateway.
func TestPortSocket(t *testing.T) {
	sock := sockPath(t)
	s, err := executor.New(executor.Options{APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, err := executor.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Serve(ctx, ln)
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				_, _ = c.Write(append([]byte("got "), b...))
			}()
		}
	}()
	port := srv.Addr().(*net.TCPAddr).Port
	if _, err := client.New(sock, client.WithAPIKey("wrong")).PortSocket(ctx, port); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("PortSocket with a wrong key: %v, want forbidden", err)
	}
	c := client.New(sock, client.WithAPIKey("k"))
	conn, err := c.PortSocket(ctx, port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if conn.RemoteAddr().String() != srv.Addr().String() {
		t.Errorf("socket connected to %s, want %s", conn.RemoteAddr(), srv.Addr())
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = conn.Write([]byte("abc"))
	_ = conn.CloseWrite()
	if b, err := io.ReadAll(conn); err != nil || string(b) != "got abc" {
		t.Errorf("on the passed socket: %q %v", b, err)
	}
	srv.Close()
	var ae *api.Error
	if _, err := c.PortSocket(ctx, port); !errors.As(err, &ae) || ae.Code != api.CodeBadGateway {
		t.Errorf("PortSocket to a closed port: %v, want bad_gateway", err)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	time.Sleep(20 * time.Millisecond) // the fake's goroutine closes its copies
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(d)
}
