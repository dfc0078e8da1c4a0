package rootfs

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Walking a tree a sandbox writes (an overlay upper directory) from the host:
// every lookup is of one name in a directory held open, with O_NOFOLLOW, so a
// symlink the sandbox planted anywhere — or swapped in for a directory while
// the walk runs — is an entry, never a way out of the tree.

// openDirAt opens the directory name in dir without following a symlink.
func openDirAt(dir *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openRegularAt opens the regular file name in dir for reading without
// following a symlink and without ever opening anything else: the entry is
// first taken as an O_PATH handle, which opens nothing, and checked to be a
// regular file; the handle is then reopened for reading through
// /proc/self/fd. A device node or FIFO the sandbox swapped in is refused
// before any open(2) of it could have a side effect (arming a watchdog,
// waking a FIFO's writer). st, when not nil, is what the caller saw of the
// entry: a different inode is refused as well.
func openRegularAt(dir *os.File, name string, st *unix.Stat_t) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	defer unix.Close(fd)
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if got.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: not a regular file (it changed while it was read)", name)
	}
	if st != nil && (got.Dev != st.Dev || got.Ino != st.Ino) {
		return nil, fmt.Errorf("%s: changed while it was read", name)
	}
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reopen %s: %w", name, err)
	}
	return f, nil
}

// attrPath is a path naming the entry name of the open directory dir for the
// l*xattr calls, which do not follow its last component: /proc/self/fd/N
// stands for dir itself, so no other component can be swapped.
func attrPath(dir *os.File, name string) string {
	return "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + name
}

// lstatAt is fstatat(2) of name in dir, not following a symlink.
func lstatAt(dir *os.File, name string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &os.PathError{Op: "fstatat", Path: name, Err: err}
	}
	return &st, nil
}

// readlinkAt reads the symlink name in dir.
func readlinkAt(dir *os.File, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
		if err != nil {
			return "", &os.PathError{Op: "readlinkat", Path: name, Err: err}
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
