package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// executorLog quotes the end of the executor's log, from a whole line,
// with what a terminal would act on escaped; a symlink in its place is not
// followed.
func TestExecutorLogTail(t *testing.T) {
	dir := t.TempDir()
	sb := &Sandbox{ID: strings.Repeat("a", 64), Dir: dir}
	if got := sb.executorLog(); !strings.HasPrefix(got, "no executor log") {
		t.Errorf("no log: %q", got)
	}
	log := strings.Repeat("old line\n", 400) + "level=INFO msg=serving\n\x1b]0;title\x07\x1b[2Jpanic: boom\n\tgoroutine 1\n"
	if err := os.WriteFile(filepath.Join(dir, "executor.log"), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got := sb.executorLog()
	if !strings.HasPrefix(got, "executor log: …old line\n") || !strings.HasSuffix(got, "msg=serving\n\\x1b]0;title\\x07\\x1b[2Jpanic: boom\n\tgoroutine 1") {
		t.Errorf("tail: %q", got)
	}
	if len(got) > executorLogTail+64 || strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("tail of %d bytes, or with control characters: %q", len(got), got)
	}
	other := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(other, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "executor.log"))
	if err := os.Symlink(other, filepath.Join(dir, "executor.log")); err != nil {
		t.Fatal(err)
	}
	if got := sb.executorLog(); strings.Contains(got, "secret") || !strings.HasPrefix(got, "no executor log") {
		t.Errorf("through a symlink: %q", got)
	}
}
