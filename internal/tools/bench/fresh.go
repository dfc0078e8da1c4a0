package main

import (
	"io"
	"os"
	"path/filepath"
)

// executables are the binaries of a bin directory that a sandbox's start
// runs: the CLI finds the others beside itself.
var executables = []string{"bothy", "bothy-images", "bothy-init", "bothy-executor", "bothy-plugin"}

// freshCopy copies the executables of dir into a new directory and returns
// it. Every build under measurement runs from such copies, so that none
// carries its file's history: bin/bothy-init after a day of test suites
// (and profilers) started each sandbox 3 to 5 ms slower, in the same loop,
// than a byte-identical copy of it, and a baseline that make bench
// BASELINE= had just built looked that much faster than this tree. The
// file's page cache, not its code: after POSIX_FADV_DONTNEED and a read of
// it the gap fell to about 1 ms.
func freshCopy(dir string) (string, error) {
	fresh, err := os.MkdirTemp("", "bench-bin")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(fresh, 0o755); err != nil { // a launcher in its user namespace reaches the executor through it
		os.RemoveAll(fresh)
		return "", err
	}
	for _, name := range executables {
		if err := copyExecutable(filepath.Join(dir, name), filepath.Join(fresh, name)); err != nil && !os.IsNotExist(err) {
			os.RemoveAll(fresh)
			return "", err
		}
	}
	return fresh, nil
}

// copyExecutable copies the file from to a new file to, mode 0755.
func copyExecutable(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
