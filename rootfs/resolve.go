package rootfs

import (
	"errors"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// maxSymlinks bounds symlink expansion in the user-space walk, as the
// kernel's own limit does.
const maxSymlinks = 40

// inRoot resolves paths inside a directory as if it were "/": symlinks in
// intermediate components are followed but can never leave the directory.
// It is used single-threaded by one unpack.
type inRoot struct {
	fd int // O_PATH handle on the root directory
	// walkOnly forces the user-space walk (openat2 missing or blocked, or in
	// tests of the fallback).
	walkOnly bool
	// mkdirHook, when set, is called for every directory openDir creates.
	mkdirHook func(parent int, name string) error
}

func openInRoot(dir string, walkOnly bool) (*inRoot, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &inRoot{fd: fd, walkOnly: walkOnly}, nil
}

func (r *inRoot) close() { unix.Close(r.fd) }

// openDir returns a new O_PATH descriptor of directory p (a cleaned, relative,
// slash-separated path; "" is the root), resolved inside the root. When
// create is set, missing directories are created with mode 0755. The caller
// closes the descriptor.
func (r *inRoot) openDir(p string, create bool) (int, error) {
	if p == "" {
		p = "."
	}
	if !r.walkOnly {
		how := unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		}
		for {
			fd, err := unix.Openat2(r.fd, p, &how)
			switch {
			case err == nil:
				return fd, nil
			case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
				continue // EAGAIN: a rename raced the lookup; retry
			case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
				// Kernel before 5.6 or a seccomp filter that blocks openat2.
				r.walkOnly = true
			case errors.Is(err, unix.ENOENT) && create:
				// Create the missing components by walking.
			default:
				return -1, err
			}
			break
		}
	}
	return r.walk(p, create)
}

// walk resolves p one component at a time with O_NOFOLLOW, expanding
// symlinks itself: an absolute target restarts at the root and ".." never
// climbs above it. This gives RESOLVE_IN_ROOT semantics without openat2.
// It is safe because every step is relative to a descriptor inside the tree
// and nothing else modifies the tree while an unpack runs.
func (r *inRoot) walk(p string, create bool) (int, error) {
	root, err := unix.Openat(r.fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	stack := []int{root}
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	todo := strings.Split(p, "/")
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
			continue
		}
		cur := stack[len(stack)-1]
		fd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && create {
			merr := unix.Mkdirat(cur, c, 0o755)
			if merr == nil && r.mkdirHook != nil {
				merr = r.mkdirHook(cur, c)
			}
			if merr != nil && !errors.Is(merr, unix.EEXIST) {
				return -1, merr
			}
			fd, err = unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			stack = append(stack, fd)
		case unix.S_IFLNK:
			target, err := readlinkFd(fd)
			unix.Close(fd)
			if err != nil {
				return -1, err
			}
			if links++; links > maxSymlinks {
				return -1, unix.ELOOP
			}
			if strings.HasPrefix(target, "/") {
				for _, fd := range stack[1:] {
					unix.Close(fd)
				}
				stack = stack[:1]
			}
			todo = append(strings.Split(target, "/"), todo...)
		default:
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
	}
	fd := stack[len(stack)-1]
	stack = stack[:len(stack)-1]
	return fd, nil
}

// readlinkFd reads the target of the symlink opened (O_PATH|O_NOFOLLOW) as fd.
func readlinkFd(fd int) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// removeAllAt removes name in directory dirfd and, when it is a directory,
// everything below it. It never follows symlinks and makes directories it
// owns writable first, so read-only directories of a layer can be removed.
func removeAllAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if errors.Is(err, unix.EACCES) {
		// Not readable: make it ours to read. name is a directory (unlink
		// said so) and nothing else changes the tree, so chmod cannot be
		// redirected through a symlink.
		if err := unix.Fchmodat(dirfd, name, 0o700, 0); err != nil {
			return err
		}
		fd, err = unix.Openat(dirfd, name, flags, 0)
	}
	if err != nil {
		return err
	}
	dir := os.NewFile(uintptr(fd), name)
	defer dir.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&0o700 != 0o700 && int(st.Uid) == os.Geteuid() {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return err
		}
	}
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeAllAt(fd, n); err != nil {
			return err
		}
	}
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// removeTree removes the directory tree at path (its final component is not
// followed). A missing path is not an error.
func removeTree(path string) error {
	if err := removeAllAt(unix.AT_FDCWD, path); err != nil {
		return &os.PathError{Op: "remove", Path: path, Err: err}
	}
	return nil
}
