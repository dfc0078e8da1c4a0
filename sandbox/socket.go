package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/client"
)

// The executor's API socket and the main command's log are made here, on
// the host, in the sandbox's state directory (mode 0700, never mounted into
// the sandbox), and handed to the executor as inherited descriptors: nothing
// in the sandbox can rename, replace or redirect what the host connects to
// or reads. docs/security.md, "The executor socket and API keys".

// listenSocket binds and listens on a Unix socket at path, mode 0600 from
// the start (the socket inode's mode is set before bind(2) creates the
// file), owned by the caller, and returns its listening descriptor and the
// identity of its file.
func listenSocket(path string) (*os.File, client.SocketIdentity, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, client.SocketIdentity{}, fmt.Errorf("create executor socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), path)
	fail := func(err error) (*os.File, client.SocketIdentity, error) {
		f.Close()
		return nil, client.SocketIdentity{}, err
	}
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fail(fmt.Errorf("chmod executor socket: %w", err))
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return fail(fmt.Errorf("bind executor socket %s: %w", path, err))
	}
	// Belt and braces for kernels that ignore the fchmod, before
	// listen(2): nobody can have connected yet. The directory is the
	// caller's, 0700: the path is still the file just bound.
	if err := unix.Fchmodat(unix.AT_FDCWD, path, 0o600, 0); err != nil {
		return fail(fmt.Errorf("chmod executor socket %s: %w", path, err))
	}
	id, err := client.StatSocket(path)
	if err != nil {
		return fail(err)
	}
	if id.UID != uint32(os.Geteuid()) {
		return fail(fmt.Errorf("executor socket %s: owned by uid %d, not the caller", path, id.UID))
	}
	if err := unix.Listen(fd, 1024); err != nil {
		return fail(fmt.Errorf("listen on executor socket %s: %w", path, err))
	}
	return f, id, nil
}

// newAPIKey returns 32 random bytes in hex: every sandbox gets its own.
func newAPIKey() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// validateAPIKey accepts what can travel in an HTTP header unchanged.
func validateAPIKey(key string) error {
	if len(key) > 256 {
		return fmt.Errorf("invalid API key: %d bytes, at most 256", len(key))
	}
	for _, c := range []byte(key) {
		if c < 0x21 || c > 0x7e {
			return fmt.Errorf("invalid API key: use printable ASCII without spaces")
		}
	}
	return nil
}

// Client returns a client of the sandbox's executor that sends the
// sandbox's API key and connects only to the socket file recorded when the
// sandbox was created (client.WithSocketIdentity): a socket that something
// replaced is refused with client.ErrUntrustedSocket before the key is
// sent. opts come after bothy's and may add to them (timeouts, idle
// connections).
func (s *Sandbox) Client(opts ...client.Option) *client.Client {
	base := []client.Option{client.WithAPIKey(s.APIKey), client.WithSocketIdentity(s.SocketIdentity)}
	return client.New(s.Socket, append(base, opts...)...)
}
