package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// SocketName is the name of the API socket, wherever it is bound: in the
// sandbox's state directory on the host (STATE/sb/ID/api.sock) or, for an
// executor started by another runtime, DefaultSocket.
const SocketName = "api.sock"

// DefaultSocket is where bothy-executor listens when it is given neither
// --socket nor --listen-fd. In a bothy sandbox it gets --listen-fd: the
// socket is bound on the host, in a directory the sandbox cannot reach.
const DefaultSocket = "/.bothy/run/" + SocketName

// ErrSocketInUse: another server answers on the socket path.
var ErrSocketInUse = errors.New("socket is in use by a live server")

// Listen creates a Unix socket at path with mode 0600 from the start (the
// socket's inode mode is set before bind, so no other user can ever
// connect) and listens on it. A stale socket at path is removed first; a
// live one is ErrSocketInUse. A missing parent directory is created with
// mode 0700. Closing the listener removes the socket.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("create socket: %w", err)
	}
	// bind(2) creates the file with the socket inode's mode minus umask.
	if err := unix.Fchmod(fd, 0o600); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind %s: %w", path, err)
	}
	// Belt and braces for kernels that ignore the fchmod: still before
	// listen(2), so nobody can have connected.
	if err := os.Chmod(path, 0o600); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := unix.Listen(fd, 1024); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return &unixListener{Listener: ln, path: path}, nil
}

// ListenFD returns the listener of an inherited descriptor: a Unix stream
// socket that is already listening, bound by whoever started the executor
// (bothy binds it in the sandbox's state directory on the host, where
// nothing in the sandbox can reach its file). The descriptor is duplicated
// close-on-exec and the original closed, so no process the executor starts
// inherits it. Closing the listener leaves the socket file alone: it is not
// the executor's.
func ListenFD(fd int) (net.Listener, error) {
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return nil, fmt.Errorf("listen fd %d: not a socket: %w", fd, err)
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return nil, fmt.Errorf("listen fd %d: %w", fd, err)
	}
	if domain != unix.AF_UNIX || typ != unix.SOCK_STREAM {
		return nil, fmt.Errorf("listen fd %d: not a Unix stream socket", fd)
	}
	if on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || on != 1 {
		return nil, fmt.Errorf("listen fd %d: the socket is not listening", fd)
	}
	f := os.NewFile(uintptr(fd), "listen-fd")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("listen fd %d: %w", fd, err)
	}
	return ln, nil
}

// removeStale removes a socket nobody answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("listen on %s: %w", path, fs.ErrExist)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("listen on %s: %w", path, ErrSocketInUse)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// unixListener removes its socket file on Close.
type unixListener struct {
	net.Listener
	path string
	once sync.Once
}

func (l *unixListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}
