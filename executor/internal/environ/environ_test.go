package environ

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMergeAndDefaults(t *testing.T) {
	base := []string{"PATH=/bin", "KEEP=1", "OVER=old"}
	got := Merge(base, map[string]string{"OVER": "new", "ADD": "x"})
	if want := []string{"PATH=/bin", "KEEP=1", "ADD=x", "OVER=new"}; !slices.Equal(got, want) {
		t.Errorf("Merge: %q, want %q", got, want)
	}
	if got := Without(base, "KEEP"); !slices.Equal(got, []string{"PATH=/bin", "OVER=old"}) || len(base) != 3 {
		t.Errorf("Without: %q (base %q)", got, base)
	}
	if got := WithDefaults(base, "PAGER=cat", "KEEP=2"); !slices.Equal(got, append(slices.Clone(base), "PAGER=cat")) {
		t.Errorf("WithDefaults: %q", got)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644)
	if p, err := LookPath("tool", []string{"PATH=/nonexistent:" + dir}, ""); err != nil || p != exe {
		t.Errorf("LookPath in PATH: %q %v", p, err)
	}
	if p, err := LookPath("tool", []string{"PATH=bin"}, filepath.Dir(dir)); err == nil {
		t.Errorf("relative PATH entry found %q outside cwd", p)
	}
	if p, err := LookPath("tool", []string{"PATH=" + filepath.Base(dir)}, filepath.Dir(dir)); err != nil || p != "./"+filepath.Join(filepath.Base(dir), "tool") {
		t.Errorf("relative PATH entry: %q %v", p, err)
	}
	if _, err := LookPath("plain", []string{"PATH=" + dir}, ""); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("not executable: %v", err)
	}
	if p, _ := LookPath("./x/y", nil, ""); p != "./x/y" {
		t.Errorf("a name with a slash is itself: %q", p)
	}
}
