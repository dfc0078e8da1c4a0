package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReplace: a first write creates dst, a second replaces its content,
// and the temporary file is gone after each; a missing tmp is an error
// that leaves dst as it was.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "state.json")
	for _, content := range []string{"first", "second"} {
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Replace(tmp, dst); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(dst); err != nil || string(got) != content {
			t.Fatalf("dst holds %q (%v), want %q", got, err, content)
		}
		if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
			t.Fatalf("temporary file left after replacing with %q: %v", content, err)
		}
	}
	if err := Replace(filepath.Join(dir, ".missing"), dst); err == nil {
		t.Fatal("replace from a missing file succeeded")
	}
	if got, _ := os.ReadFile(dst); string(got) != "second" {
		t.Fatalf("dst holds %q after a failed replace, want %q", got, "second")
	}
}
