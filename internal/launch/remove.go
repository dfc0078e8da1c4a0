package launch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// RemoveArg turns the binary into a remover: files that a sandbox under a
// subordinate-id mapping wrote belong to ids the caller cannot touch from
// outside, so they are removed from inside a namespace with the same mapping.
const RemoveArg = "__bothy_remove"

func removeMain() int {
	if err := waitMapped(); err != nil {
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
func RemoveTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// RemoveAs removes dirs from inside a user namespace mapped as m, by
// re-executing init (which must call Reexec).
func RemoveAs(init string, m Mapping, dirs ...string) error {
	if m.Mode != MapSubID {
		var errs []error
		for _, d := range dirs {
			if err := RemoveTree(d); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return errs[0]
		}
		return nil
	}
	// Most of what a sandbox writes belongs to its root, which is the
	// caller: try from here first, and pay for a namespace (two setuid
	// helpers and a re-execution, ~10 ms) only when something is left.
	var left []string
	for _, d := range dirs {
		if RemoveTree(d) != nil {
			left = append(left, d)
		}
	}
	if len(left) == 0 {
		return nil
	}
	var stderr bytes.Buffer
	cmd := exec.Command(init, append([]string{RemoveArg}, left...)...)
	cmd.Stderr = &stderr
	if err := Start(cmd, m); err != nil {
		return fmt.Errorf("remove %v: %w", left, err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("remove %v: %v: %s", left, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
