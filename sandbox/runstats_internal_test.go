package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpperUsage: the upper directory's size counts regular files and
// symlinks (their own size: never followed, however far they point) and
// every entry below; what the caller cannot read is skipped and said.
func TestUpperUsage(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a", "b", "f"), make([]byte, 1000), 0o644))
	must(os.WriteFile(filepath.Join(dir, "g"), make([]byte, 24), 0o644))
	// A symlink to a large tree outside, and one to a directory: their
	// targets are not counted, nor walked.
	must(os.Symlink("/usr", filepath.Join(dir, "usr")))
	must(os.Symlink("../../../../../../etc", filepath.Join(dir, "a", "up")))
	bytes, files, err := UpperUsage(dir)
	if err != nil || bytes != 1000+24+4+21 || files != 6 {
		t.Fatalf("UpperUsage = %d bytes, %d entries, %v; want %d, 6, nil", bytes, files, err, 1000+24+4+21)
	}
	if os.Geteuid() != 0 {
		// A directory the caller cannot read: skipped, said, the
		// rest counted.
		must(os.Mkdir(filepath.Join(dir, "closed"), 0o755))
		must(os.WriteFile(filepath.Join(dir, "closed", "h"), make([]byte, 500), 0o644))
		must(os.Chmod(filepath.Join(dir, "closed"), 0))
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "closed"), 0o755) })
		bytes, files, err = UpperUsage(dir)
		if err == nil || !strings.Contains(err.Error(), "unreadable") || bytes != 1000+24+4+21 || files != 7 {
			t.Errorf("with an unreadable directory: %d bytes, %d entries, %v; want the rest counted and an error", bytes, files, err)
		}
	}
	if _, _, err := UpperUsage(filepath.Join(dir, "missing")); err == nil {
		t.Error("UpperUsage of a missing directory: no error")
	}
}
