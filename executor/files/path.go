package files

import (
	"fmt"
	"path/filepath"
	"strings"
)

// absPath validates that p is absolute and returns it cleaned.
func absPath(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: empty path", ErrInvalidPath)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: path contains a NUL byte", ErrInvalidPath)
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: %q is not absolute", ErrInvalidPath, p)
	}
	return filepath.Clean(p), nil
}
