package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// Escape suite, volumes: from inside a sandbox, each attempt fails or stays
// contained, and the host is checked afterwards.

// TestEscapeReadOnlyVolume: a :ro volume cannot be written, remounted
// read-write or unmounted to reach what is below; the host file is unchanged.
// Stopped by: the bind mount's MS_RDONLY (recursive, mount_setattr), and
// the missing CAP_SYS_ADMIN for mount(2)/umount(2).
func TestEscapeReadOnlyVolume(t *testing.T) {
	m := newManager(t)
	host := t.TempDir()
	writeFiles(t, host, map[string]string{"data": "precious\n"})
	before := testenv.Snapshot(t, host)
	sb, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Volumes: []string{host + ":/ro:ro"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{
		"echo pwned > /ro/data",
		"echo pwned >> /ro/data",
		"rm -f /ro/data",
		"mv /ro/data /ro/moved",
		"chmod 777 /ro/data",
		"touch /ro/new",
		"mount -o remount,rw /ro && echo pwned > /ro/data",
		"mount -o remount,bind,rw /ro && echo pwned > /ro/data",
		"umount /ro && echo pwned > /ro/data",
		"umount -l /ro && echo pwned > /ro/data",
		"mount --bind /tmp /ro && echo pwned > /ro/data",
	} {
		if code, out := runCode(t, sb, cmd); code == 0 {
			t.Errorf("%q succeeded: %s", cmd, out)
		}
	}
	if got := run(t, sb, "cat /ro/data"); got != "precious" {
		t.Errorf("sandbox reads %q", got)
	}
	if got := testenv.Snapshot(t, host); got != before {
		t.Errorf("host directory behind a read-only volume changed:\n%s\nwas:\n%s", got, before)
	}
}

// TestEscapeOverlayVolume: whatever the sandbox does to an overlay volume,
// the host directory is unchanged. Stopped by: overlayfs writes only to the
// upper directory; the host directory is a lower layer.
func TestEscapeOverlayVolume(t *testing.T) {
	m := newManager(t)
	host := t.TempDir()
	writeFiles(t, host, map[string]string{"data": "precious\n", "dir/file": "f\n"})
	if err := os.Chmod(filepath.Join(host, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := testenv.Snapshot(t, host)
	sb, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Volumes: []string{host + ":/ov:overlay"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sb, "cd /ov && echo pwned > data && rm -rf dir && mkdir dir && echo new > dir/new && chmod 700 . && "+
		"ln -s /etc/passwd link && mv data data2 && truncate -s 0 data2 && touch -d 2000-01-01 data2")
	if code, out := runCode(t, sb, "umount /ov && echo pwned > /ov/data"); code == 0 {
		t.Errorf("umount of the overlay volume succeeded: %s", out)
	}
	if got := testenv.Snapshot(t, host); got != before {
		t.Errorf("host directory under an overlay volume changed:\n%s\nwas:\n%s", got, before)
	}
}

// TestEscapeVolumeSymlink: symlinks inside a volume that point outside it
// (relative or absolute) resolve inside the sandbox, never to the host files
// beside the volume. Stopped by: the sandbox's root (pivot_root into its
// rootfs) is where every absolute link and ".." starts and ends.
func TestEscapeVolumeSymlink(t *testing.T) {
	for _, mode := range []string{"rw", "overlay"} {
		t.Run(mode, func(t *testing.T) {
			m := newManager(t)
			parent := t.TempDir()
			vol := filepath.Join(parent, "vol")
			writeFiles(t, parent, map[string]string{"secret": "TOPSECRET\n"})
			if err := os.Mkdir(vol, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, target := range map[string]string{
				"up": "..", "upup": "../../../../../../..", "abs": parent, "absfile": filepath.Join(parent, "secret"), "root": "/",
			} {
				if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
					t.Fatal(err)
				}
			}
			before := testenv.Snapshot(t, parent)
			sb, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Volumes: []string{vol + ":/v:" + mode}})
			if err != nil {
				t.Fatal(err)
			}
			_, out := runCode(t, sb, "cat /v/up/secret /v/abs/secret /v/absfile /v/upup"+parent+"/secret /v/root"+parent+"/secret 2>&1")
			if strings.Contains(out, "TOPSECRET") {
				t.Errorf("sandbox read a host file beside its volume: %s", out)
			}
			if _, found := runCode(t, sb, "find / -name secret 2>/dev/null"); found != "" {
				t.Errorf("sandbox finds host files beside its volume: %s", found)
			}
			// Writes through the links land in the sandbox's rootfs.
			runCode(t, sb, "echo pwned > /v/up/pwned; mkdir -p /v/abs && echo pwned > /v/abs/pwned; echo pwned > /v/absfile; "+
				"echo pwned > /v/upup"+parent+"/pwned2; echo pwned > /v/root/pwned3")
			if got := testenv.Snapshot(t, parent); got != before {
				t.Errorf("host files beside the volume changed:\n%s\nwas:\n%s", got, before)
			}
			if _, err := os.Lstat("/pwned3"); !os.IsNotExist(err) {
				t.Errorf("host /pwned3: %v", err)
			}
		})
	}
}
