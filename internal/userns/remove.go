package userns

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
)

// RemoveArg turns the binary into a remover: files that a sandbox under a
// subordinate-id mapping wrote belong to ids the caller cannot touch from
// outside, so they are removed from inside a namespace with the same mapping.
const RemoveArg = "__bothy_remove"

func removeMain() int {
	if err := WaitMapped(); err != nil {
		fmt.Fprintln(os.Stderr, "bothy remove:", err)
		return 1
	}
	failed := 0
	for _, dir := range os.Args[2:] {
		if err := RemoveTree(dir); err != nil {
			fmt.Fprintln(os.Stderr, "bothy remove:", err)
			failed++
		}
	}
	return min(failed, 1)
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
// namespace mapped as m (by re-executing init, which must call Reexec) for
// what the caller cannot remove itself. The helper is killed when ctx is
// done: what it had not removed yet stays.
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
	if err := runInNS(ctx, init, m, append([]string{RemoveArg}, left...), nil, nil); err != nil {
		return fmt.Errorf("remove %v: %w", left, err)
	}
	return nil
}

// runInNS re-executes init (which must call Reexec) with args in new mount
// and user namespaces mapped as m, and waits for it; what it printed on
// stderr is in the error.
func runInNS(ctx context.Context, init string, m Mapping, args []string, stdin io.Reader, stdout io.Writer) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, init, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &stderr
	mapped, err := Start(cmd, m)
	if err != nil {
		return err
	}
	if err := mapped(); err != nil {
		_ = cmd.Wait()
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
