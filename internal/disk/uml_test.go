package disk

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/bothy-sandbox/bothy/internal/testenv"
)

// Project quotas need a kernel built with CONFIG_QFMT_V2 (ext4) or
// CONFIG_XFS_QUOTA; the test machine's has neither. Where the host cannot
// mount a project-quota filesystem, the quota tests run in User-mode Linux
// (testenv.RunInUML).

func TestMain(m *testing.M) {
	testenv.UMLInit()
	os.Exit(testenv.Run(m))
}

// quotaImage makes a sparse ext4 image with project quotas (the quota and
// project features), as an operator would for bothy's data directory.
func quotaImage(t *testing.T, size int64) string {
	t.Helper()
	mkfs, err := MkfsPath()
	if err != nil {
		t.Skipf("requires mkfs.ext4 (make setup installs e2fsprogs): %v", err)
	}
	img := filepath.Join(t.TempDir(), "quota.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	f.Close()
	if out, err := exec.Command(mkfs, "-q", "-F", "-t", "ext4", "-O", "quota,project", "-E", "quotatype=prjquota", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	return img
}

// withQuotaDir runs body in a directory of an ext4 filesystem mounted with
// prjquota: on the host when the caller is root and the kernel mounts it,
// otherwise in UML as root or, for an unprivileged caller, as an
// unprivileged user (body sees which in os.Getuid).
func withQuotaDir(t *testing.T, body func(t *testing.T, dir string)) {
	if testenv.InUML() {
		body(t, os.Getenv(testenv.QuotaDirEnv))
		return
	}
	img := quotaImage(t, 64<<20)
	if os.Getuid() == 0 {
		dir := t.TempDir()
		err := mountImage(img, dir, "prjquota")
		if err == nil {
			t.Cleanup(func() { UnmountImage(img, dir) })
			body(t, dir)
			return
		}
		t.Logf("this kernel cannot mount ext4 with prjquota (%v): testing in User-mode Linux", err)
	}
	testenv.RunInUML(t, img)
}
