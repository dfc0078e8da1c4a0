package files

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// Sentinel errors. Errors returned by this package wrap one of them where it
// applies; match with errors.Is.
var (
	// ErrNotFound: the path (or a parent) does not exist.
	ErrNotFound = errors.New("no such file or directory")
	// ErrIsDir: a file was expected but the path is a directory.
	ErrIsDir = errors.New("is a directory")
	// ErrNotDir: a directory was expected (or a parent component is a file).
	ErrNotDir = errors.New("not a directory")
	// ErrExists: the target already exists and overwriting was not requested.
	ErrExists = errors.New("already exists")
	// ErrInvalidPath: the path or an archive entry is not acceptable
	// (relative, escaping, device node, unsupported archive, ...).
	ErrInvalidPath = errors.New("invalid path")
	// ErrTooLarge: a size or count limit was exceeded.
	ErrTooLarge = errors.New("too large")
)

// Refinements of the sentinels above, for messages; each wraps one sentinel.
var (
	// ErrNotEmpty: a directory is not empty and recursion was not requested
	// (wraps ErrExists).
	ErrNotEmpty = fmt.Errorf("directory not empty: %w", ErrExists)
	// ErrUnsupportedArchive: extraction was requested but the stream is not a
	// zip or tar(.gz) archive (wraps ErrInvalidPath).
	ErrUnsupportedArchive = fmt.Errorf("not a zip or tar archive: %w", ErrInvalidPath)
	// ErrBadArchive: the archive is truncated or corrupt (wraps ErrInvalidPath).
	ErrBadArchive = fmt.Errorf("malformed archive: %w", ErrInvalidPath)
)

// classify maps an error from the os package to the matching sentinel, keeping
// the original error text when no sentinel applies.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotFound
	case errors.Is(err, syscall.ENOTDIR):
		return ErrNotDir
	case errors.Is(err, syscall.EISDIR):
		return ErrIsDir
	case errors.Is(err, syscall.ENOTEMPTY):
		return ErrNotEmpty
	case errors.Is(err, fs.ErrExist):
		return ErrExists
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("%w: name too long", ErrInvalidPath)
	}
	return err
}
