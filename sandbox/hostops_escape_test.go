package sandbox_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// TestEscapeDiffExport: a running sandbox plants symlinks to a host file and
// a host directory in its upper directory (absolute and relative, at the top
// and deep) and keeps replacing a directory it changed with a symlink to the
// host directory while `bothy diff --export-dir DIR` runs, for the root
// filesystem and for an overlay volume. No export holds the host file's
// content, nothing is written outside the export directories, and the host
// directory is unchanged; the links are exported as links. Stopped by: the
// upper directory is walked one name at a time in directories held open
// with O_NOFOLLOW, and read and exported through os.Root on both sides, the
// export's files created with O_EXCL (rootfs.Changes, rootfs.Export).
func TestEscapeDiffExport(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	host := t.TempDir()
	secret := "HOST SECRET " + filepath.Base(t.TempDir())
	writeFiles(t, host, map[string]string{"secret": secret, "dir/f": secret, "dir/g": secret})
	hostFile, hostDir := filepath.Join(host, "secret"), filepath.Join(host, "dir")
	overlay := t.TempDir()
	writeFiles(t, overlay, map[string]string{"data": "lower\n"})
	before := testenv.Snapshot(t, host)

	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Volumes: []string{overlay + ":/ov:overlay"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, top := range []string{"", "/ov"} {
		run(t, sb, fmt.Sprintf(`set -e
mkdir -p %[1]s/deep/er
ln -s %[2]q %[1]s/leak
ln -s %[3]q %[1]s/leakdir
ln -s ../../../../../../../../../..%[2]s %[1]s/leakrel
ln -s %[2]q %[1]s/deep/er/leak
ln -s %[3]q %[1]s/deep/dir
echo sandbox > %[1]s/deep/er/own`, top, hostFile, hostDir))
		// Swap a changed directory for a link to the host directory, and
		// back, for as long as the sandbox runs.
		if _, err := sb.Client().Start(ctx, api.RunRequest{Timeout: 600, Cmd: fmt.Sprintf(
			`while :; do rm -rf %[1]s/swap; mkdir %[1]s/swap; echo sandbox > %[1]s/swap/f; echo sandbox > %[1]s/swap/g; rm -rf %[1]s/swap; ln -s %[2]q %[1]s/swap; done`,
			top, hostDir)}); err != nil {
			t.Fatal(err)
		}
	}

	exports := t.TempDir()
	for _, target := range []string{"/", "/ov"} {
		exported := 0
		for i := range 20 {
			dst := filepath.Join(exports, fmt.Sprintf("%s-%d", strings.Trim(target, "/"), i))
			d, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{Target: target, Export: dst})
			if err != nil {
				continue // the sandbox changed a path while it was read: refused, never followed
			}
			exported++
			prefix := strings.TrimSuffix(target, "/")
			for _, c := range []string{"/leak", "/leakdir", "/deep/er/leak"} {
				found := false
				for _, ch := range d.Changes {
					found = found || ch.Path == prefix+c
				}
				if !found {
					t.Errorf("diff of %s lacks %s%s", target, prefix, c)
				}
			}
			if got, err := os.Readlink(filepath.Join(dst, "leak")); err != nil || got != hostFile {
				t.Errorf("export %s: leak is %q, %v; want a link to %s", dst, got, err, hostFile)
			}
		}
		if exported == 0 {
			t.Errorf("no diff of %s succeeded", target)
		}
	}
	err = filepath.WalkDir(exports, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(data), secret) {
				t.Errorf("export %s holds the host file's content", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := testenv.Snapshot(t, host); got != before {
		t.Errorf("host directory changed:\n%s\nwas:\n%s", got, before)
	}
	if err := m.Remove(ctx, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Snapshot(t, host); got != before {
		t.Errorf("host directory changed by the removal:\n%s\nwas:\n%s", got, before)
	}
}

// TestEscapeVolumeRemove: a named volume and an overlay volume whose sandbox
// filled them with symlinks to a host directory and a host file, and with a
// directory of mode 000 (so that an unprivileged removal has to make
// directories writable first): removing the sandbox and the volume removes
// them, and the host directory keeps its entries and modes. Stopped by:
// userns.RemoveTree (os.RemoveAll never follows a symlink; the chmod pass
// goes through an os.Root), run in a namespace with the sandbox's mapping.
func TestEscapeVolumeRemove(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	host := t.TempDir()
	writeFiles(t, host, map[string]string{"secret": "keep\n", "dir/f": "keep\n"})
	if err := os.Chmod(filepath.Join(host, "dir"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(host, "dir"), 0o755) })
	overlay := t.TempDir()
	before := testenv.Snapshot(t, host)
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Volumes: []string{"volume:trap:/v", overlay + ":/ov:overlay"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/v", "/ov", "/"} {
		run(t, sb, fmt.Sprintf(`set -e
mkdir -p %[1]s/locked/in
ln -s %[2]q %[1]s/locked/in/dir
ln -s %[3]q %[1]s/locked/file
ln -s ../../../../../../../../..%[2]s %[1]s/up
chmod 000 %[1]s/locked/in %[1]s/locked`, strings.TrimSuffix(d, "/"), filepath.Join(host, "dir"), filepath.Join(host, "secret")))
	}
	upper := sb.UpperDir
	if err := m.Remove(ctx, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(upper); !os.IsNotExist(err) {
		t.Errorf("upper directory left: %v", err)
	}
	if err := m.RemoveVolume(ctx, "trap", false); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Snapshot(t, host); got != before {
		t.Errorf("host directory changed:\n%s\nwas:\n%s", got, before)
	}
}
