package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/bothy-sandbox/bothy/internal/ctxio"
)

// MoveOptions controls Move.
type MoveOptions struct {
	// Overwrite replaces an existing destination file or empty directory, as
	// rename(2) does. A non-empty destination directory is never replaced.
	Overwrite bool
}

// rename is os.Rename, replaceable in tests to simulate EXDEV.
var rename = os.Rename

// Move renames src to dst (dst is the new path, not a directory to move
// into), creating dst's missing parents. Across filesystems it copies the
// tree (modes, times, symlinks and, when permitted, owners) next to dst,
// renames the copy into place and removes src.
func Move(ctx context.Context, src, dst string, opts MoveOptions) error {
	s, err := absPath(src)
	if err != nil {
		return fmt.Errorf("move %s: %w", src, err)
	}
	d, err := absPath(dst)
	if err != nil {
		return fmt.Errorf("move %s to %s: %w", s, dst, err)
	}
	if err := move(ctx, s, d, opts); err != nil {
		return fmt.Errorf("move %s to %s: %w", s, d, err)
	}
	return nil
}

func move(ctx context.Context, s, d string, opts MoveOptions) error {
	sfi, err := os.Lstat(s)
	if err != nil {
		return classify(err)
	}
	if s == d {
		return nil
	}
	if s == "/" || strings.HasPrefix(d, s+"/") {
		return fmt.Errorf("%w: cannot move a directory into itself", ErrInvalidPath)
	}
	if dfi, err := os.Lstat(d); err == nil {
		switch {
		case !opts.Overwrite:
			return ErrExists
		case dfi.IsDir() && !sfi.IsDir():
			return ErrIsDir
		case !dfi.IsDir() && sfi.IsDir():
			return ErrNotDir
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return classify(err)
	}
	if err := mkdirParents(filepath.Dir(d), nil); err != nil {
		return err
	}
	if sfi.IsDir() && opts.Overwrite {
		// os.Rename refuses to replace any directory; rename(2) would
		// replace an empty one, which is what removing it first does.
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if errors.Is(err, syscall.EEXIST) {
				err = syscall.ENOTEMPTY
			}
			return classify(err)
		}
	}
	err = rename(s, d)
	if !errors.Is(err, syscall.EXDEV) {
		return classify(err)
	}
	// Different filesystems: copy next to the destination, then swap in.
	tmp := filepath.Join(filepath.Dir(d), "."+filepath.Base(d)+".bothy-move")
	os.RemoveAll(tmp)
	if err := copyTree(ctx, s, tmp); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("copy across filesystems: %w", err)
	}
	if err := os.Rename(tmp, d); err != nil {
		os.RemoveAll(tmp)
		return classify(err)
	}
	return classify(os.RemoveAll(s))
}

// copyTree copies src (file, symlink or directory) to dst, which must not exist.
func copyTree(ctx context.Context, src, dst string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
	case m.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyTree(ctx, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
	case m.IsRegular():
		if err := copyFile(ctx, src, dst); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: cannot copy special file %s", ErrInvalidPath, src)
	}
	return copyMeta(dst, fi)
}

func copyFile(ctx context.Context, src, dst string) error {
	in, _, err := OpenRegular(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, ctxio.Reader(ctx, in)); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyMeta gives dst the owner (best effort), mode and times of fi.
func copyMeta(dst string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	if err := os.Chmod(dst, goMode(fi.Mode())); err != nil {
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}

// DeleteOptions controls Delete.
type DeleteOptions struct {
	// Recursive removes a non-empty directory and everything in it.
	Recursive bool
}

// Delete removes a file, symlink (not its target) or directory. A non-empty
// directory needs Recursive (ErrNotEmpty otherwise); "/" is refused.
func Delete(ctx context.Context, path string, opts DeleteOptions) error {
	p, err := absPath(path)
	if err != nil {
		return fmt.Errorf("delete %s: %w", path, err)
	}
	if p == "/" {
		return fmt.Errorf("delete %s: %w: refusing to delete /", p, ErrInvalidPath)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("delete %s: %w", p, classify(err))
	}
	if fi.IsDir() && opts.Recursive {
		err = os.RemoveAll(p)
	} else {
		err = os.Remove(p)
		if errors.Is(err, syscall.EEXIST) {
			err = syscall.ENOTEMPTY // some filesystems say EEXIST
		}
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", p, classify(err))
	}
	return nil
}
