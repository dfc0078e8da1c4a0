package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/internal/testimage"
	"github.com/bothy-sandbox/bothy/rootfs"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// runCode runs cmd in the sandbox and returns its exit code and output,
// failing only if the executor does not answer.
func runCode(t *testing.T, sb *sandbox.Sandbox, cmd string) (int, string) {
	t.Helper()
	res, err := sb.Client().Run(context.Background(), api.RunRequest{Cmd: cmd, Wait: true, Timeout: 30})
	if err != nil {
		t.Fatalf("run %q: %v", cmd, err)
	}
	return res.ExitCode, strings.TrimSpace(res.Stdout + res.Stderr)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestVolumes(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	base := t.TempDir()
	rw, ro := filepath.Join(base, "rw"), filepath.Join(base, "ro")
	writeFiles(t, rw, map[string]string{"old": "old\n"})
	writeFiles(t, ro, map[string]string{"file": "original\n", "sub/deep": "deep\n"})
	roBefore := testenv.Snapshot(t, ro)

	sb, err := m.Create(ctx, sandbox.CreateOptions{
		Image:   "busybox",
		Volumes: []string{rw + ":/rw", ro + ":/ro:ro", "volume:cache:/cache", rw + "/old:/etc/old-file:ro"},
		Tmpfs:   []string{"/scratch:size=1m,mode=700"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Bind, read-write: both ways.
	if got := run(t, sb, "cat /rw/old; echo new > /rw/new; cat /etc/old-file"); got != "old\nold" {
		t.Errorf("rw volume reads %q", got)
	}
	if data, err := os.ReadFile(filepath.Join(rw, "new")); err != nil || string(data) != "new\n" {
		t.Errorf("write to rw volume: host reads %q, %v", data, err)
	}
	// Bind, read-only: readable, nothing writable, not even below.
	if got := run(t, sb, "cat /ro/file /ro/sub/deep"); got != "original\ndeep" {
		t.Errorf("ro volume reads %q", got)
	}
	for _, cmd := range []string{"echo x > /ro/file", "echo x > /ro/new", "rm /ro/sub/deep", "mkdir /ro/d", "touch /ro/sub/deep"} {
		if code, out := runCode(t, sb, cmd); code == 0 {
			t.Errorf("%q in a read-only volume succeeded: %s", cmd, out)
		}
	}
	if got := testenv.Snapshot(t, ro); got != roBefore {
		t.Errorf("read-only host directory changed:\n%s\nwas:\n%s", got, roBefore)
	}
	// Named volume: created on first use, under the data directory.
	// Files of other users in the sandbox belong to subordinate ids on the
	// host (rootless, subordinate ids; a single-id mapping cannot chown):
	// removing the volume must still work.
	run(t, sb, "echo kept > /cache/f && mkdir -m 700 /cache/p && touch /cache/p/x && { chown -R 1000:1000 /cache/p 2>/dev/null || true; }")
	v, err := m.InspectVolume(ctx, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(v.Mountpoint, "f")); err != nil || string(data) != "kept\n" {
		t.Errorf("named volume on host: %q %v", data, err)
	}
	if !strings.HasPrefix(v.Mountpoint, m.Paths().Volumes()) || !v.Running || !slices.Equal(v.UsedBy, []string{sb.ID}) {
		t.Errorf("volume %+v", v)
	}
	if err := m.RemoveVolume(ctx, "cache", true); !errors.Is(err, sandbox.ErrVolumeInUse) {
		t.Errorf("rm of a volume a running sandbox mounts: %v, want ErrVolumeInUse", err)
	}
	if removed, err := m.PruneVolumes(ctx); err != nil || len(removed) != 0 {
		t.Errorf("prune removed %v (%v) while the volume is in use", removed, err)
	}
	// tmpfs with size and mode.
	if got := run(t, sb, "stat -c %a /scratch; grep ' /scratch ' /proc/mounts | cut -d' ' -f3"); got != "700\ntmpfs" {
		t.Errorf("tmpfs: %q", got)
	}
	if code, _ := runCode(t, sb, "dd if=/dev/zero of=/scratch/f bs=1k count=2048"); code == 0 {
		t.Error("wrote 2 MiB to a 1 MiB tmpfs")
	}

	// The named volume outlives the sandbox and is found by the next one.
	if err := m.Remove(ctx, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	sb2, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Volumes: []string{"volume:cache:/c:ro"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, sb2, "cat /c/f"); got != "kept" {
		t.Errorf("named volume in the next sandbox: %q", got)
	}
	if err := m.Stop(ctx, sb2.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveVolume(ctx, "cache", false); !errors.Is(err, sandbox.ErrVolumeInUse) {
		t.Errorf("rm of a volume a stopped sandbox names, without force: %v", err)
	}
	if err := m.Remove(ctx, sb2.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateVolume(ctx, "cache"); !errors.Is(err, sandbox.ErrVolumeExists) {
		t.Errorf("create of an existing volume: %v", err)
	}
	if _, err := m.CreateVolume(ctx, "unused"); err != nil {
		t.Fatal(err)
	}
	removed, err := m.PruneVolumes(ctx)
	slices.Sort(removed)
	if err != nil || !slices.Equal(removed, []string{"cache", "unused"}) {
		t.Errorf("prune: %v %v", removed, err)
	}
	if _, err := os.Stat(v.Mountpoint); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pruned volume's directory: %v", err)
	}
	if vols, err := m.ListVolumes(ctx); err != nil || len(vols) != 0 {
		t.Errorf("volumes after prune: %v %v", vols, err)
	}
}

func TestOverlayVolume(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	host := filepath.Join(t.TempDir(), "project")
	writeFiles(t, host, map[string]string{"main.go": "package main\n", "docs/a.md": "a\n", "docs/b.md": "b\n", "keep/k": "k\n"})
	before := testenv.Snapshot(t, host)

	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Volumes: []string{host + ":/work:overlay", host + ":/ref:ro,overlay"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sb, "cd /work && echo '// edited' >> main.go && rm -r docs && mkdir -p new/dir && echo n > new/dir/f && echo 1 > keep/added && mkdir docs && echo c > docs/c.md")
	if got := run(t, sb, "cat /work/main.go; ls /work/docs"); got != "package main\n// edited\nc.md" {
		t.Errorf("sandbox sees %q", got)
	}
	if got := testenv.Snapshot(t, host); got != before {
		t.Errorf("host directory under an overlay volume changed:\n%s\nwas:\n%s", got, before)
	}
	// ro,overlay: the sandbox cannot write it at all, and sees the host's
	// files, not the other overlay's changes.
	if code, _ := runCode(t, sb, "echo x > /ref/main.go"); code == 0 {
		t.Error("wrote to a ro,overlay volume")
	}
	if got := run(t, sb, "cat /ref/main.go; ls /ref/docs"); got != "package main\na.md\nb.md" {
		t.Errorf("ro,overlay volume reads %q", got)
	}

	d, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{Target: "/work/"})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range d.Changes {
		lines = append(lines, c.String())
	}
	want := []string{"C /work/docs", "D /work/docs/a.md", "D /work/docs/b.md", "A /work/docs/c.md", "C /work/keep", "A /work/keep/added",
		"C /work/main.go", "A /work/new", "A /work/new/dir", "A /work/new/dir/f"}
	if !slices.Equal(lines, want) {
		t.Errorf("diff /work:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if d, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{Target: "/ref"}); err != nil || len(d.Changes) != 0 {
		t.Errorf("diff of the untouched ro,overlay volume: %v %v", d, err)
	}
	if _, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{Target: "/nowhere"}); !errors.Is(err, sandbox.ErrNoOverlay) {
		t.Errorf("diff of a path without an overlay: %v", err)
	}
	// The root filesystem's diff leaves bothy's own mount points out.
	run(t, sb, "echo x > /etc/motd && rm /etc/group")
	rd, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lines = lines[:0]
	for _, c := range rd.Changes {
		lines = append(lines, c.String())
	}
	if want := []string{"C /etc", "D /etc/group", "A /etc/motd"}; !slices.Equal(lines, want) {
		t.Errorf("diff /:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// Export, then removal: the exported files stay, the upper dirs go,
	// the host directory is as it was.
	export := filepath.Join(t.TempDir(), "export")
	if _, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{Target: "/work", Export: export}); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Snapshot(t, export); !strings.Contains(got, `main.go -rw-r--r-- "package main\n// edited\n"`) ||
		!strings.Contains(got, `new/dir/f -rw-r--r-- "n\n"`) || !strings.Contains(got, `docs/c.md`) || strings.Contains(got, "a.md") {
		t.Errorf("export:\n%s", got)
	}
	if _, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{Target: "/work", Export: export}); err == nil {
		t.Error("export into a non-empty directory succeeded")
	}
	// The root filesystem's export holds the kept changes only.
	rootExport := filepath.Join(t.TempDir(), "root")
	if _, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{Export: rootExport}); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Snapshot(t, rootExport); !strings.Contains(got, `etc/motd -rw-r--r-- "x\n"`) || strings.Contains(got, "hosts") || strings.Contains(got, "work") {
		t.Errorf("root filesystem export:\n%s", got)
	}
	upper := d.Upper
	// Files of other users in the upper dir, as in the volume test: the
	// diff reads them (from the sandbox's user namespace when rootless),
	// and removal removes them.
	run(t, sb, "mkdir -m 700 /work/p /home/p && echo s > /work/p/x && echo s > /home/p/x && "+
		"{ chown -R 1000:1000 /work/p /home/p 2>/dev/null || true; } && chmod 600 /work/p/x")
	priv := filepath.Join(t.TempDir(), "priv")
	if d, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{Target: "/work", Export: priv}); err != nil || !slices.Contains(d.Changes, rootfs.Change{Kind: rootfs.Added, Path: "/work/p/x"}) {
		t.Errorf("diff of files private to another user: %v %v", d, err)
	}
	if data, err := os.ReadFile(filepath.Join(priv, "p", "x")); err != nil || string(data) != "s\n" {
		t.Errorf("export of a file private to another user: %q %v", data, err)
	}
	if d, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{}); err != nil || !slices.Contains(d.Changes, rootfs.Change{Kind: rootfs.Added, Path: "/home/p/x"}) {
		t.Errorf("root filesystem diff with files private to another user: %v %v", d, err)
	}
	if err := m.Remove(ctx, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	assertGone(t, m, sb)
	if _, err := os.Stat(upper); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("overlay volume upper dir after rm: %v", err)
	}
	if got := testenv.Snapshot(t, host); got != before {
		t.Errorf("host directory changed after rm:\n%s", got)
	}
}

func TestVolumeSpecsRefused(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFiles(t, dir, map[string]string{"file": "x"})
	for _, tc := range []struct {
		volumes, tmpfs []string
		want           string // in the error, beside the spec
	}{
		{volumes: []string{dir + "/missing:/x"}, want: "no such file"},
		{volumes: []string{"missing:/x"}, want: "volume:missing:/x"},
		{volumes: []string{dir + ":/x:rwx"}, want: "unknown mode"},
		{volumes: []string{dir}, want: "want HOST_PATH"},
		{volumes: []string{dir + ":relative"}, want: "not absolute"},
		{volumes: []string{dir + ":/proc"}, want: "reserved"},
		{volumes: []string{dir + ":/proc/sys/kernel"}, want: "reserved"},
		{volumes: []string{dir + ":/dev"}, want: "reserved"},
		{volumes: []string{dir + ":/dev/pts"}, want: "reserved"},
		{volumes: []string{dir + ":/sys"}, want: "reserved"},
		{volumes: []string{dir + ":/sys/fs/cgroup:ro"}, want: "reserved"},
		{volumes: []string{dir + ":/.bothy/run"}, want: "reserved"},
		{volumes: []string{dir + ":/.bothy"}, want: "reserved"},
		{volumes: []string{dir + ":/x/../proc"}, want: ".."},
		{volumes: []string{file + ":/x:overlay"}, want: "not a directory"},
		{volumes: []string{dir + ":/x", dir + ":/x/"}, want: "already the target"},
		{volumes: []string{"volume:fresh:/ok", dir + ":/dev/shm"}, want: "reserved"},
		{tmpfs: []string{"/dev/shm:size=1m"}, want: "reserved"},
		{tmpfs: []string{"/t:size=lots"}, want: "size"},
		{volumes: []string{"volume:fresh:/ok"}, tmpfs: []string{"/sys/x"}, want: "reserved"},
	} {
		_, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Volumes: tc.volumes, Tmpfs: tc.tmpfs})
		all := append(slices.Clone(tc.volumes), tc.tmpfs...)
		bad := all[len(all)-1] // each case's last spec is the bad one
		if err == nil || !errors.Is(err, sandbox.ErrInvalidVolume) || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("volumes %q tmpfs %q: %v, want ErrInvalidVolume naming %q and %q", tc.volumes, tc.tmpfs, err, bad, tc.want)
		}
	}
	// Nothing was created: no sandbox, no directory, no named volume.
	if list, _ := m.List(ctx); len(list) != 0 {
		t.Errorf("%d sandboxes left by refused specs", len(list))
	}
	for _, d := range []string{filepath.Join(m.Paths().Data, "sandboxes"), filepath.Join(m.Paths().State, "sb")} {
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Errorf("%s holds %d entries after refused specs", d, len(entries))
		}
	}
	if vols, _ := m.ListVolumes(ctx); len(vols) != 0 {
		t.Errorf("named volume created for a refused sandbox: %v", vols[0].Name)
	}
}

// symlinkImage imports busybox plus the given symlinks as name.
func symlinkImage(t *testing.T, m *sandbox.Manager, name string, links map[string]string) {
	t.Helper()
	var rootfs bytes.Buffer
	if err := testimage.BusyboxTar(&rootfs); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "rootfs.tar")
	f, err := os.Create(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	tr, tw := tar.NewReader(&rootfs), tar.NewWriter(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range links {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: link, Linkname: target, Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	archive := filepath.Join(t.TempDir(), "image.oci.tar")
	if err := testimage.WriteOCIArchive(tarPath, archive, testimage.ArchiveOptions{Name: name, Cmd: []string{"/bin/sh"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Store().ImportOCIArchive(context.Background(), archive, name); err != nil {
		t.Fatal(err)
	}
}

// TestVolumeTargetSymlinks: a target whose path goes through a symlink in the
// image is resolved inside the rootfs, whatever the link says: the mount and
// its mount point land in the sandbox, never on the host.
func TestVolumeTargetSymlinks(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	hostDir := t.TempDir() // exists on the host; the links aim at it
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"marker": "from-volume\n"})
	rel := strings.Repeat("../", 12) + strings.TrimPrefix(hostDir, "/")
	symlinkImage(t, m, "links:latest", map[string]string{
		"to-etc": "/etc", "to-host": hostDir, "to-up": rel, "etc/up": "../../../..", "to-proc": "/proc",
	})
	etcProbe := fmt.Sprintf("bothy-escape-%d", time.Now().UnixNano())
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "links", Volumes: []string{
		src + ":/to-etc/" + etcProbe + ":ro", src + ":/to-host/m1:ro", src + ":/to-up/m2:ro", src + ":/etc/up/m3:ro",
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Inside, each mount is where the link leads within the rootfs.
	got := run(t, sb, fmt.Sprintf("cat /etc/%s/marker %s/m1/marker %s/m2/marker /m3/marker", etcProbe, hostDir, hostDir))
	if got != strings.Repeat("from-volume\n", 3)+"from-volume" {
		t.Errorf("mounts through symlinks read %q", got)
	}
	// On the host, nothing: no mount point, no mount.
	if _, err := os.Lstat("/etc/" + etcProbe); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host /etc/%s: %v", etcProbe, err)
	}
	if entries, _ := os.ReadDir(hostDir); len(entries) != 0 {
		t.Errorf("host directory the links aim at holds %v", entries)
	}
	if _, err := os.Lstat("/m3"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host /m3: %v", err)
	}
	if data, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(data), etcProbe) || strings.Contains(string(data), hostDir+"/m") {
		t.Error("a volume mount is visible on the host")
	}
	// A link to /proc does not get a volume into procfs: libcontainer
	// checks the resolved destination.
	if _, err := m.Create(ctx, sandbox.CreateOptions{Image: "links", Volumes: []string{src + ":/to-proc/sys:ro"}}); err == nil {
		t.Error("a volume through a symlink to /proc was mounted")
	}
}

// TestCreateVolumeRace: of many concurrent creations of one name, exactly
// one succeeds and the others are told it exists.
func TestCreateVolumeRace(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	const n = 16
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := m.CreateVolume(ctx, "race")
			errs <- err
		}()
	}
	ok := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			ok++
		case !errors.Is(err, sandbox.ErrVolumeExists):
			t.Errorf("concurrent create: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d concurrent creations succeeded, want 1", ok)
	}
	entries, _ := os.ReadDir(m.Paths().Volumes())
	for _, e := range entries {
		if e.Name() != "race" && e.Name() != ".lock" {
			t.Errorf("left in the volume directory: %s", e.Name())
		}
	}
}
