package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrUntrustedSocket: the file at the socket path is not the socket that
// was recorded when the sandbox was created (a symlink, another file,
// another socket, another owner). Nothing is sent to it.
var ErrUntrustedSocket = errors.New("refusing to connect to the executor socket")

// SocketIdentity names one socket file: the device and inode its path
// pointed to when it was bound, and the uid that owns it. bothy records it
// in a sandbox's state at create (sandbox.Sandbox's socket_identity).
type SocketIdentity struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
	UID uint32 `json:"uid"`
}

// StatSocket returns the identity of the socket at path, which must be a
// socket (a symlink is not followed).
func StatSocket(path string) (SocketIdentity, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return SocketIdentity{}, fmt.Errorf("stat socket %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return SocketIdentity{}, fmt.Errorf("stat socket %s: not a socket", path)
	}
	return SocketIdentity{Dev: st.Dev, Ino: st.Ino, UID: st.Uid}, nil
}

// check says why st is not the socket id names, or nil.
func (id SocketIdentity) check(st *unix.Stat_t) error {
	switch {
	case id.Ino == 0:
		return errors.New("no socket identity was recorded for it (a sandbox created by an older bothy: recreate it)")
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return errors.New("it is a symlink, not the socket the sandbox was created with")
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return errors.New("it is not a socket: the socket the sandbox was created with was replaced")
	case st.Uid != id.UID:
		return fmt.Errorf("it is owned by uid %d, not %d", st.Uid, id.UID)
	case st.Dev != id.Dev || st.Ino != id.Ino:
		return fmt.Errorf("it is another socket (inode %d, not %d): the socket the sandbox was created with was replaced", st.Ino, id.Ino)
	}
	return nil
}

// WithSocketIdentity makes the client connect only to the socket file id
// names. Every connection opens the path without following a symlink
// (O_PATH|O_NOFOLLOW), checks the file it got (a socket, owner, device and
// inode) and connects through /proc/self/fd/N, which reaches that same
// inode: the file cannot be swapped between the check and the connect. A
// mismatch is ErrUntrustedSocket, before anything (the API key included)
// is sent.
func WithSocketIdentity(id SocketIdentity) Option {
	return func(o *options) { o.identity = &id }
}

// dialVerified connects to the socket at path if it is the one id names.
func dialVerified(ctx context.Context, d *net.Dialer, path string, id SocketIdentity) (net.Conn, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open executor socket %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat executor socket %s: %w", path, err)
	}
	if err := id.check(&st); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrUntrustedSocket, path, err)
	}
	conn, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return nil, fmt.Errorf("connect to executor socket %s: %w", path, err)
	}
	return conn, nil
}
