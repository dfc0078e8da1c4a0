package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSymlinkProbe: an exported store gets a probe that reads back; a store
// whose file system refuses or rewrites absolute symlinks (sshfs: EPERM, or
// -o transform_symlinks: a relative target) is refused by name; a store
// exported before the probe is not checked.
func TestSymlinkProbe(t *testing.T) {
	dir := t.TempDir()
	s := &SharedStore{root: dir}
	if err := s.checkSymlinks(); err != nil {
		t.Errorf("a store without the probe: %v", err)
	}
	if err := writeSymlinkProbe(dir); err != nil {
		t.Fatal(err)
	}
	if err := writeSymlinkProbe(dir); err != nil {
		t.Errorf("again: %v", err)
	}
	if err := s.checkSymlinks(); err != nil {
		t.Errorf("the probe as written: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Errorf("temporaries left: %v", left)
	}
	probe := filepath.Join(dir, symlinkProbe)
	for name, replace := range map[string]func() error{
		"rewritten relative": func() error { return os.Symlink("../bothy/store/absolute-symlink", probe) },
		"not a symlink":      func() error { return os.WriteFile(probe, nil, 0o644) },
	} {
		if err := os.Remove(probe); err != nil {
			t.Fatal(err)
		}
		if err := replace(); err != nil {
			t.Fatal(err)
		}
		if err := s.checkSymlinks(); err == nil || !strings.Contains(err.Error(), "does not keep absolute symlinks") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
