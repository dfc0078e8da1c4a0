// Package ports is the executor's port forwarding service: a request to
// /v1/ports/{port}/connect with "Connection: Upgrade" and "Upgrade: tcp" is
// answered 101 once a TCP connection to that port on the sandbox's own
// loopback is open, and the request's connection then carries that TCP
// connection's bytes both ways. It reaches a web app, VS Code or an agent
// server inside a sandbox that has no network (--network none) through the
// executor's Unix socket: the host needs no port of its own.
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
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/internal/splice"
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

// wantsUpgrade reports whether r asks for the tcp upgrade.
func wantsUpgrade(r *http.Request) bool {
	hasUpgrade := false
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				hasUpgrade = true
			}
		}
	}
	return hasUpgrade && strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), api.UpgradeTCP)
}

func (s *Service) handleConnect(w http.ResponseWriter, r *http.Request) {
	port, err := ParsePort(r.PathValue("port"))
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	if !wantsUpgrade(r) {
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
