package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/splice"
)

// DialSocket opens a new connection to the executor's socket, as every
// request does (the socket identity checked, when the client has one).
func (c *Client) DialSocket(ctx context.Context) (net.Conn, error) { return c.dial(ctx) }

// DialPort opens a TCP connection to port on the sandbox's own loopback,
// through the executor (GET /v1/ports/{port}/connect, upgraded): the
// returned connection carries that TCP connection's bytes. It works in a
// sandbox without a network. A port nothing listens on is an *api.Error
// with code api.CodeBadGateway.
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	// The handshake is bounded by ctx; the forwarded connection is not.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (net.Conn, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("forward port %d: %w", port, ctx.Err())
		}
		return nil, err
	}
	req := "GET /v1/ports/" + strconv.Itoa(port) + "/connect HTTP/1.1\r\nHost: executor\r\n" +
		"Connection: Upgrade\r\nUpgrade: " + api.UpgradeTCP + "\r\n"
	if c.key != "" {
		req += api.APIKeyHeader + ": " + c.key + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		return fail(fmt.Errorf("forward port %d: %w", port, err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fail(fmt.Errorf("forward port %d: %w", port, err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return fail(answerError(resp))
	}
	if !stop() {
		return fail(ctx.Err())
	}
	return &bufferedConn{Conn: conn, r: br}, nil
}

// bufferedConn is a connection whose first bytes were read into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the connection where the socket can.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// CloseRead shuts the reading side where the socket can.
func (c *bufferedConn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return nil
}

// Forward accepts connections on ln until ctx is done and forwards each to
// port on the sandbox's loopback (DialPort), as `bothy port-forward` does.
// A connection whose port cannot be reached is closed and reported to
// onError (which may be nil); the listener is closed when Forward returns.
func (c *Client) Forward(ctx context.Context, ln net.Listener, port int, onError func(error)) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	conns := map[net.Conn]struct{}{}
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		for conn := range conns {
			conn.Close()
		}
		mu.Unlock()
	}()
	for {
		in, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("forward port %d: accept: %w", port, err)
		}
		mu.Lock()
		conns[in] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				mu.Lock()
				delete(conns, in)
				mu.Unlock()
				in.Close()
			}()
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			out, err := c.DialPort(dctx, port)
			cancel()
			if err != nil {
				if onError != nil {
					onError(err)
				}
				return
			}
			defer out.Close()
			splice.Splice(in, out, nil)
		}()
	}
}
