// Package ports is the executor's port forwarding service: a request to
// /v1/ports/{port}/connect with "Connection: Upgrade" and "Upgrade: tcp" is
// answered 101 once a TCP connection to that port on the sandbox's own
// loopback is open, and the request's connection then carries that TCP
// connection's bytes both ways. It reaches a web app, VS Code or an agent
// server inside a sandbox that has no network (--network none) through the
// executor's Unix socket: the host needs no port of its own.
//
// /v1/ports/{port}/fd, with "Upgrade: fd", connects the same way and hands
// the connected socket itself back over the Unix socket (SCM_RIGHTS): the
// host's port forwarder (bothy's "builtin" port driver) then copies
// between it and the host's connection in its own process, and no byte of
// the connection passes through the executor.
package ports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/internal/splice"
	"golang.org/x/sys/unix"
)

// Dialer opens the connection to a port; net.Dialer in the executor, a fake
// in tests.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

var _ Dialer = (*net.Dialer)(nil)

// Options configure the Service.
type Options struct {
	// Dialer connects to the sandbox's loopback; nil: a net.Dialer with a
	// 5 s timeout.
	Dialer Dialer
}

// Service forwards connections to ports on the sandbox's loopback.
type Service struct {
	dial Dialer
	mu   sync.Mutex
	open map[net.Conn]struct{}
	done bool
}

// New returns the service.
func New(opts Options) *Service {
	d := opts.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: 5 * time.Second}
	}
	return &Service{dial: d, open: map[net.Conn]struct{}{}}
}

// Routes lists the service's one route.
func (s *Service) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: "GET", Path: "/v1/ports/{port}/connect", Summary: "forward a TCP connection to a port on the sandbox's loopback (Upgrade: tcp)", Handler: s.handleConnect},
		{Method: "GET", Path: "/v1/ports/{port}/fd", Summary: "connect to a port on the sandbox's loopback and pass the socket back (Upgrade: fd, SCM_RIGHTS)", Handler: s.handleFD},
	}
}

// Close ends every forwarded connection.
func (s *Service) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	for c := range s.open {
		c.Close()
	}
}

func (s *Service) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return false
	}
	s.open[c] = struct{}{}
	return true
}

func (s *Service) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.open, c)
	s.mu.Unlock()
	c.Close()
}

// ParsePort reads a TCP port number, 1-65535.
func ParsePort(v string) (int, error) {
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != v {
		return 0, fmt.Errorf("invalid port %q: want a number from 1 to 65535", v)
	}
	return p, nil
}

// wantsUpgrade reports whether r asks for the upgrade to proto.
func wantsUpgrade(r *http.Request, proto string) bool {
	hasUpgrade := false
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				hasUpgrade = true
			}
		}
	}
	return hasUpgrade && strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), proto)
}

func (s *Service) handleConnect(w http.ResponseWriter, r *http.Request) {
	port, err := ParsePort(r.PathValue("port"))
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	if !wantsUpgrade(r, api.UpgradeTCP) {
		w.Header().Set("Upgrade", api.UpgradeTCP)
		httpapi.WriteError(w, http.StatusUpgradeRequired, api.CodeUpgradeRequired,
			"forwarding needs \"Connection: Upgrade\" and \"Upgrade: tcp\"")
		return
	}
	up, err := s.dialLoopback(r.Context(), port)
	if err != nil {
		httpapi.WriteError(w, http.StatusBadGateway, api.CodeBadGateway, err.Error())
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !s.track(conn) {
		conn.Close()
		up.Close()
		return
	}
	defer s.untrack(conn)
	defer up.Close()
	// The server's read and write deadlines were for the request.
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+api.UpgradeTCP+"\r\n\r\n"); err != nil {
		return
	}
	// What the client sent after its request, already read by the server.
	var pending []byte
	if n := brw.Reader.Buffered(); n > 0 {
		pending, _ = brw.Reader.Peek(n)
	}
	splice.Splice(conn, up, pending)
}

// handleFD connects to the port and passes the connected socket to the
// client over the executor's Unix socket, with the 101 answer's bytes in
// one sendmsg(2), then closes its own descriptor and the request's
// connection: it keeps nothing of the forwarded connection.
func (s *Service) handleFD(w http.ResponseWriter, r *http.Request) {
	port, err := ParsePort(r.PathValue("port"))
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	if !wantsUpgrade(r, api.UpgradeFD) {
		w.Header().Set("Upgrade", api.UpgradeFD)
		httpapi.WriteError(w, http.StatusUpgradeRequired, api.CodeUpgradeRequired,
			"passing a socket needs \"Connection: Upgrade\" and \"Upgrade: fd\"")
		return
	}
	if _, ok := r.Context().Value(http.LocalAddrContextKey).(*net.UnixAddr); !ok {
		httpapi.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, "a socket can only be passed over the executor's Unix socket")
		return
	}
	up, err := s.dialLoopback(r.Context(), port)
	if err != nil {
		httpapi.WriteError(w, http.StatusBadGateway, api.CodeBadGateway, err.Error())
		return
	}
	defer up.Close()
	sc, ok := up.(syscall.Conn)
	if !ok {
		httpapi.WriteError(w, http.StatusBadGateway, api.CodeBadGateway, fmt.Sprintf("connect to port %d in the sandbox: not a socket", port))
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		httpapi.WriteError(w, http.StatusBadGateway, api.CodeBadGateway, err.Error())
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	uc := unixConn(conn)
	if uc == nil {
		return // not reached: the local address was a Unix socket's
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	answer := []byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + api.UpgradeFD + "\r\n\r\n")
	_ = raw.Control(func(fd uintptr) {
		_, _, _ = uc.WriteMsgUnix(answer, unix.UnixRights(int(fd)), nil)
	})
}

// unixConn returns the *net.UnixConn under a connection the server
// accepted (through wrappers with a NetConn method), or nil.
func unixConn(c net.Conn) *net.UnixConn {
	for range 8 {
		switch v := c.(type) {
		case *net.UnixConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// dialLoopback connects to port on the loopback, IPv4 first, then IPv6.
func (s *Service) dialLoopback(ctx context.Context, port int) (net.Conn, error) {
	p := strconv.Itoa(port)
	c, err4 := s.dial.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", p))
	if err4 == nil {
		return c, nil
	}
	c, err6 := s.dial.DialContext(ctx, "tcp", net.JoinHostPort("::1", p))
	if err6 == nil {
		return c, nil
	}
	return nil, fmt.Errorf("connect to port %d in the sandbox: %w", port, errors.Join(err4, err6))
}
