package userns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/bothy-sandbox/bothy/internal/ipc"
)

// removeHelper removes the directories of an ipc.RemoveRequest: files that
// a sandbox under a subordinate-id mapping wrote belong to ids the caller
// cannot touch from outside, so they are removed from inside a namespace
// with the same mapping.
func removeHelper(in io.Reader, _ io.Writer) error {
	var req ipc.RemoveRequest
	if _, err := ipc.Receive(in, &req); err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	var errs []error
	for _, dir := range req.Dirs {
		if err := RemoveTree(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveTree removes a directory tree, first making directories writable:
// overlay work directories and extracted layers may hold mode-000 dirs.
// Sandboxes write these trees: os.RemoveAll never follows a symlink
// (unlinkat, and openat with O_NOFOLLOW), and the directories are made
// writable through an [os.Root] on dir, whose Chmod does not follow one out
// of it either.
func RemoveTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	if root, err := os.OpenRoot(dir); err == nil {
		_ = fs.WalkDir(root.FS(), ".", func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = root.Chmod(path, 0o700)
			}
			return nil
		})
		root.Close()
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// RemoveAs removes dirs, under a subordinate-id mapping from inside a user
// namespace mapped as m (by re-executing init, which must call
// ipc.Dispatch) for what the caller cannot remove itself. The helper is
// killed when ctx is done: what it had not removed yet stays.
func RemoveAs(ctx context.Context, init string, m Mapping, dirs ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Most of what a sandbox writes belongs to its root, which is the
	// caller: try from here first, and pay for a namespace (two setuid
	// helpers and a re-execution, ~10 ms) only when something is left.
	var left []string
	var first error
	for _, d := range dirs {
		if err := RemoveTree(d); err != nil {
			left = append(left, d)
			first = cmp.Or(first, err)
		}
	}
	if len(left) == 0 || m.Mode != MapSubID {
		return first
	}
	if err := runInNS(ctx, init, m, ipc.ReexecRemove, ipc.RemoveRequest{Dirs: left}, nil); err != nil {
		return fmt.Errorf("remove %v: %w", left, err)
	}
	return nil
}
