package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlanMounts: the mounts step resolves bind and overlay sources to
// absolute host paths that exist, orders parents before children, and
// refuses a missing source (with the named-volume hint for a bare name) or
// an overlay of a directory holding bothy's data; then it makes the overlay
// volumes' directories, the upper one with the host directory's mode.
func TestPlanMounts(t *testing.T) {
	m, _, _ := fakeManager(t)
	host := t.TempDir()
	if err := os.Chmod(host, 0o751); err != nil {
		t.Fatal(err)
	}
	t.Chdir(host)
	mounts, err := m.parseMounts(CreateOptions{
		Volumes: []string{host + ":/a/b/c:ro", ".:/a:overlay", "volume:cache:/a/b"},
		Tmpfs:   []string{"/t"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, mnt := range mounts {
		targets = append(targets, mnt.Target)
	}
	if !slices.Equal(targets, []string{"/a", "/t", "/a/b", "/a/b/c"}) {
		t.Errorf("order %v, want parents first", targets)
	}
	if mounts[0].HostPath != host {
		t.Errorf("overlay of . resolved to %q, want %q", mounts[0].HostPath, host)
	}

	for spec, want := range map[string]string{
		"/nonexistent/x:/x":             "host path /nonexistent/x",
		"cache:/x":                      "for a named volume write volume:cache:/x",
		m.paths.Data + "/..:/x:overlay": "holds bothy's data directory",
	} {
		if _, err := m.parseMounts(CreateOptions{Volumes: []string{spec}}); !errors.Is(err, ErrInvalidVolume) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrInvalidVolume saying %q", spec, err, want)
		}
	}

	id := newID()
	if err := os.MkdirAll(m.paths.upperRoot(id), 0o700); err != nil {
		t.Fatal(err)
	}
	unlock, err := m.lockVolumes(context.Background(), false) // as planMounts does
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	overlays, err := m.setupMounts(id, mounts, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	upper, work, merged := m.volumeDirs(id, 0)
	if len(overlays) != 1 || overlays[0].Lower != host || overlays[0].Upper != upper || overlays[0].Work != work || overlays[0].Target != merged {
		t.Errorf("overlays %+v", overlays)
	}
	if st, err := os.Stat(upper); err != nil || st.Mode().Perm() != 0o751 {
		t.Errorf("overlay upper: %v %v, want the host directory's mode 0751", st.Mode(), err)
	}
	if mounts[2].HostPath != filepath.Join(m.paths.Volumes(), "cache", volumeData) {
		t.Errorf("named volume at %q", mounts[2].HostPath)
	}
	if _, err := os.Stat(mounts[2].HostPath); err != nil {
		t.Errorf("named volume not made: %v", err)
	}
}
