package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/bothy-sandbox/bothy/internal/ctxio"
)

// DefaultFileMode is the mode of a file Write creates when no mode is given.
const DefaultFileMode fs.FileMode = 0o644

// DefaultDirMode is the mode of the parent directories Write creates.
const DefaultDirMode fs.FileMode = 0o755

// Owner is a numeric user and group.
type Owner struct {
	UID int
	GID int
}

// WriteOptions controls Write.
type WriteOptions struct {
	// Mode sets the permission bits; setuid, setgid and sticky may be given
	// as Go's fs.ModeSetuid, fs.ModeSetgid, fs.ModeSticky or as Unix's
	// 0o4000, 0o2000, 0o1000. 0 keeps the mode of an existing file and gives
	// a new one DefaultFileMode.
	Mode fs.FileMode
	// Owner sets the file's owner, and that of the parent directories Write
	// creates. nil keeps the owner of an existing file (when permitted) and
	// leaves new files to the caller's uid and gid.
	Owner *Owner
	// NewOwner, when Owner is nil, owns the file if Write creates it, and
	// the parent directories it creates: the sandbox's default user. An
	// existing file keeps its owner.
	NewOwner *Owner
	// Append adds to the end of the file (created if missing) in place,
	// instead of replacing it atomically.
	Append bool
	// Exclusive fails with ErrExists when the file exists.
	Exclusive bool
	// MaxBytes fails the write with ErrTooLarge, leaving any existing file
	// untouched, when the stream is longer; 0 means no limit.
	MaxBytes int64
}

// Write writes the stream r to the file path, creating missing parent
// directories. Unless Append is set, the data goes to a temporary file in the
// same directory that is renamed over the target, so readers see the old or
// the new content and never a mix. A final symlink is followed, as open(2)
// would. It returns the new file's Info.
func Write(ctx context.Context, path string, r io.Reader, opts WriteOptions) (*Info, error) {
	p, err := absPath(path)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	in, err := write(ctx, p, r, opts)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", p, err)
	}
	return in, nil
}

func write(ctx context.Context, p string, r io.Reader, opts WriteOptions) (*Info, error) {
	if p == "/" {
		return nil, ErrIsDir
	}
	target := p
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if resolved, err := filepath.EvalSymlinks(p); err == nil {
			target = resolved
		}
	}
	old, err := os.Stat(target)
	switch {
	case err == nil && old.IsDir():
		return nil, ErrIsDir
	case err == nil && opts.Exclusive:
		return nil, ErrExists
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		old = nil
	default:
		return nil, classify(err)
	}
	if opts.Owner == nil && opts.NewOwner != nil {
		if err := mkdirParents(filepath.Dir(target), opts.NewOwner); err != nil {
			return nil, err
		}
		if old == nil { // an existing file keeps its owner
			opts.Owner = opts.NewOwner
		}
	}
	if err := mkdirParents(filepath.Dir(target), opts.Owner); err != nil {
		return nil, err
	}
	src := ctxio.Reader(ctx, r)
	if opts.MaxBytes > 0 {
		src = io.LimitReader(src, opts.MaxBytes+1)
	}
	if opts.Append {
		err = appendTo(target, src, old, opts)
	} else {
		err = replace(target, src, old, opts)
	}
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(target)
	if err != nil {
		return nil, classify(err)
	}
	in := newInfo(target, filepath.Base(target), fi)
	return &in, nil
}

func tooLong(n int64, opts WriteOptions) error {
	if opts.MaxBytes > 0 && n > opts.MaxBytes {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, opts.MaxBytes)
	}
	return nil
}

func replace(target string, src io.Reader, old fs.FileInfo, opts WriteOptions) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".bothy-*")
	if err != nil {
		return classify(err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, src)
	if err != nil {
		return err
	}
	if err := tooLong(n, opts); err != nil {
		return err
	}
	mode := DefaultFileMode
	switch {
	case opts.Mode != 0:
		mode = goMode(opts.Mode)
	case old != nil:
		mode = goMode(old.Mode())
	}
	// chown before chmod: chown clears setuid/setgid bits.
	if err := chownLike(tmp, old, opts.Owner); err != nil {
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return classify(os.Rename(tmp.Name(), target))
}

func appendTo(target string, src io.Reader, old fs.FileInfo, opts WriteOptions) error {
	mode := DefaultFileMode
	if opts.Mode != 0 {
		mode = goMode(opts.Mode)
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, mode.Perm())
	if err != nil {
		return classify(err)
	}
	defer f.Close()
	n, err := io.Copy(f, src)
	if err != nil {
		return err
	}
	if err := tooLong(n, opts); err != nil {
		return err // the bytes up to the limit stay appended
	}
	if opts.Owner != nil {
		if err := f.Chown(opts.Owner.UID, opts.Owner.GID); err != nil {
			return err
		}
	}
	if opts.Mode != 0 || old == nil {
		if err := f.Chmod(mode); err != nil {
			return err
		}
	}
	return f.Close()
}

// chownLike gives f the requested owner, or the owner of the file it
// replaces. Keeping an old owner is best effort: without the privilege to
// chown, the new file stays the caller's.
func chownLike(f *os.File, old fs.FileInfo, owner *Owner) error {
	if owner != nil {
		return f.Chown(owner.UID, owner.GID)
	}
	if old == nil {
		return nil
	}
	st, ok := old.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid()) {
		return nil
	}
	if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, fs.ErrPermission) {
		return err
	}
	return nil
}

// mkdirParents creates dir and its missing parents with DefaultDirMode,
// chowning the ones it creates to owner when given.
func mkdirParents(dir string, owner *Owner) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return ErrNotDir
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return classify(err)
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := os.Mkdir(d, DefaultDirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return classify(err)
		}
		if owner != nil {
			if err := os.Lchown(d, owner.UID, owner.GID); err != nil {
				return err
			}
		}
	}
	return nil
}
