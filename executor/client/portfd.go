package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// portSocketTimeout bounds PortSocket when its context has no deadline:
// the descriptor comes from the sandbox, which must not hold a caller
// forever.
const portSocketTimeout = 10 * time.Second

// ErrNotTCPSocket: what the executor passed back is not a connected TCP
// socket (a pipe, a Unix socket, a UDP socket, a file...). It was closed
// unused.
var ErrNotTCPSocket = errors.New("the executor passed back no TCP socket")

// PortSocket connects to port on the sandbox's loopback through the
// executor (GET /v1/ports/{port}/fd, upgraded to "fd") and returns the
// connected socket itself, passed over the executor's Unix socket with
// SCM_RIGHTS: the caller copies between it and its own connections with
// no executor in between (bothy's builtin port forwarder does, with
// splice(2)). The socket lives in the sandbox's network namespace. What
// comes back is checked before it is used (CheckTCPSocket): anything but
// one TCP stream socket of AF_INET or AF_INET6 is ErrNotTCPSocket. The
// exchange is bounded by ctx, and by 10 s when ctx has no deadline. A port
// nothing listens on is an *api.Error with code api.CodeBadGateway.
func (c *Client) PortSocket(ctx context.Context, port int) (*net.TCPConn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, portSocketTimeout)
		defer cancel()
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	fail := func(err error) (*net.TCPConn, error) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("port %d's socket: %w", port, ctx.Err())
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// The socket's deadline is ctx's, which may fire first.
			return nil, fmt.Errorf("port %d's socket: %w (%v)", port, context.DeadlineExceeded, err)
		}
		return nil, fmt.Errorf("port %d's socket: %w", port, err)
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fail(errors.New("the executor's connection is not a Unix socket"))
	}
	dl, _ := ctx.Deadline()
	_ = uc.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = uc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := "GET /v1/ports/" + strconv.Itoa(port) + "/fd HTTP/1.1\r\nHost: executor\r\n" +
		"Connection: Upgrade\r\nUpgrade: " + api.UpgradeFD + "\r\n"
	if c.key != "" {
		req += api.APIKeyHeader + ": " + c.key + "\r\n"
	}
	if _, err := io.WriteString(uc, req+"\r\n"); err != nil {
		return fail(err)
	}
	head, fds, err := readHead(uc)
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(bytes.NewReader(head), uc)), nil)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return fail(answerError(resp))
	}
	if len(fds) != 1 {
		return fail(fmt.Errorf("%w: %d descriptors with the answer", ErrNotTCPSocket, len(fds)))
	}
	if err := CheckTCPSocket(fds[0]); err != nil {
		return fail(err)
	}
	f := os.NewFile(uintptr(fds[0]), "port "+strconv.Itoa(port))
	fds = nil
	nc, err := net.FileConn(f) // a duplicate; f's own descriptor is closed
	f.Close()
	if err != nil {
		return fail(err)
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return fail(fmt.Errorf("%w: a %T", ErrNotTCPSocket, nc))
	}
	return tc, nil
}

// readHead reads an answer's head (up to its blank line, at most 16 KiB)
// with recvmsg(2), collecting the descriptors that come with it; a
// truncated set of descriptors is an error (the kernel closed the rest).
func readHead(uc *net.UnixConn) (head []byte, fds []int, err error) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for !bytes.Contains(head, []byte("\r\n\r\n")) {
		if len(head) > 16<<10 {
			return head, fds, errors.New("the executor's answer has no end of head")
		}
		n, oobn, flags, _, rerr := uc.ReadMsgUnix(buf, oob)
		n, oobn = max(n, 0), max(oobn, 0)
		head = append(head, buf[:n]...)
		if oobn > 0 {
			msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
			if perr != nil {
				return head, fds, fmt.Errorf("control message: %w", perr)
			}
			for _, m := range msgs {
				got, perr := unix.ParseUnixRights(&m)
				if perr == nil {
					fds = append(fds, got...)
				}
			}
		}
		if flags&unix.MSG_CTRUNC != 0 {
			return head, fds, fmt.Errorf("%w: more descriptors than one", ErrNotTCPSocket)
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) && n == 0 {
				return head, fds, io.ErrUnexpectedEOF
			}
			if n == 0 {
				return head, fds, rerr
			}
		}
	}
	return head, fds, nil
}

// CheckTCPSocket accepts a descriptor that came from a sandbox only if it
// is a TCP stream socket: fstat says a socket, and SO_DOMAIN is AF_INET or
// AF_INET6, SO_TYPE SOCK_STREAM, SO_PROTOCOL IPPROTO_TCP, not listening
// and connected (it has a peer). Anything else (a pipe, a file, a Unix or
// UDP socket, a listening or unconnected TCP socket) is ErrNotTCPSocket.
func CheckTCPSocket(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%w: fstat: %v", ErrNotTCPSocket, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("%w: not a socket (mode %#o)", ErrNotTCPSocket, st.Mode&unix.S_IFMT)
	}
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return fmt.Errorf("%w: SO_DOMAIN: %v", ErrNotTCPSocket, err)
	}
	if domain != unix.AF_INET && domain != unix.AF_INET6 {
		return fmt.Errorf("%w: address family %d", ErrNotTCPSocket, domain)
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_STREAM {
		return fmt.Errorf("%w: socket type %d (%v)", ErrNotTCPSocket, typ, err)
	}
	proto, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	if err != nil || proto != unix.IPPROTO_TCP {
		return fmt.Errorf("%w: protocol %d (%v)", ErrNotTCPSocket, proto, err)
	}
	if listening, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || listening != 0 {
		return fmt.Errorf("%w: a listening socket (%v)", ErrNotTCPSocket, err)
	}
	if _, err := unix.Getpeername(fd); err != nil {
		return fmt.Errorf("%w: not connected (%v)", ErrNotTCPSocket, err)
	}
	return nil
}
