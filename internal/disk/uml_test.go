package disk

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Project quotas need a kernel built with CONFIG_QFMT_V2 (ext4) or
// CONFIG_XFS_QUOTA; the test machine's has neither. When the host cannot
// mount a project-quota filesystem, the quota tests boot a User-mode Linux
// kernel (Debian's user-mode-linux package, built with both) with this test
// binary as its init, on the host's root directory read-only (hostfs) and
// the test's image as its block device: a real kernel's quota code, with no
// privilege needed on the host.

// umlEnv, in the environment of init in UML, says to run the tests there:
// "root" as root, "user" as uid umlUser.
const umlEnv = "BOTHY_UML"

// quotaDirEnv names the directory on the project-quota filesystem that the
// tests run in UML use.
const quotaDirEnv = "BOTHY_QUOTA_DIR"

const umlUser = 1000

func TestMain(m *testing.M) {
	if os.Getpid() == 1 && os.Getenv(umlEnv) != "" {
		umlInit(m)
	}
	os.Exit(m.Run())
}

// umlInit is PID 1 in UML: it mounts what the tests need, the image with
// prjquota, runs the tests (m) and powers off; it never returns.
func umlInit(m *testing.M) {
	code := 1
	defer func() {
		fmt.Printf("\nbothy-uml-exit %d\n", code)
		unix.Sync()
		unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
		select {}
	}()
	if err := umlSetup(); err != nil {
		fmt.Println("bothy-uml-setup:", err)
		return
	}
	if os.Getenv(umlEnv) == "root" {
		code = m.Run()
		return
	}
	// The tests run as an unprivileged user in a child: init stays root
	// to power off.
	// /proc/self/exe: the binary's path may be under the tmpfs on /tmp.
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), umlEnv+"=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: umlUser, Gid: umlUser}}
	if err := cmd.Run(); err != nil {
		fmt.Println("bothy-uml-run:", err)
	}
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
}

func umlSetup() error {
	for _, m := range []struct{ fs, target string }{{"proc", "/proc"}, {"sysfs", "/sys"}, {"devtmpfs", "/dev"}, {"tmpfs", "/tmp"}} {
		if err := unix.Mount(m.fs, m.target, m.fs, 0, ""); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s: %w", m.target, err)
		}
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	modules := "/usr/lib/uml/modules/" + unix.ByteSliceToString(uts.Release[:]) + "/kernel/fs/"
	for _, mod := range []string{"quota/quota_tree.ko", "quota/quota_v2.ko", "overlayfs/overlay.ko"} {
		f, err := os.Open(modules + mod)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("load %s: %w", mod, err)
		}
	}
	dir := "/tmp/quota"
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("/dev/ubda", dir, "ext4", 0, "prjquota"); err != nil {
		return fmt.Errorf("mount the image with prjquota: %w", err)
	}
	os.Setenv(quotaDirEnv, dir)
	os.Setenv("TMPDIR", "/tmp")
	if os.Getenv(umlEnv) == "user" {
		return os.Chown(dir, umlUser, umlUser)
	}
	return nil
}

// quotaImage makes a sparse ext4 image with project quotas (the quota and
// project features), as an operator would for bothy's data directory.
func quotaImage(t *testing.T) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "quota.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(64 << 20)
	f.Close()
	mkfs, err := mkfsPath()
	if err != nil {
		t.Skipf("requires mkfs.ext4 (make setup installs e2fsprogs): %v", err)
	}
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
	if dir := os.Getenv(quotaDirEnv); dir != "" {
		body(t, dir) // in UML
		return
	}
	img := quotaImage(t)
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
	runInUML(t, img)
}

// runInUML runs the calling test in UML on the image, and fails with what it
// printed if the test did not pass there.
func runInUML(t *testing.T, img string) {
	t.Helper()
	uml, err := exec.LookPath("linux.uml")
	if err != nil {
		uml = "/usr/bin/linux.uml"
		if _, err := os.Stat(uml); err != nil {
			t.Skip("requires user-mode-linux (make setup installs it): this kernel cannot mount ext4 with prjquota (it lacks CONFIG_QFMT_V2)")
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mode := "root"
	if os.Getuid() != 0 {
		mode = "user"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a safety net only
	defer cancel()
	cmd := exec.CommandContext(ctx, uml, "mem=256M", "root=/dev/root", "rootfstype=hostfs", "rootflags=/", "ro",
		"ubd0="+img, "init="+self, "con=null", "con0=null,fd:1", umlEnv+"="+mode,
		"--", "-test.run=^"+t.Name()+"$", "-test.v")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "TMPDIR=/dev/shm")
	// UML runs its processes as host processes: they all go with its group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	runErr := cmd.Run()
	text := out.String()
	m := regexp.MustCompile(`bothy-uml-exit (\d+)`).FindStringSubmatch(text)
	if runErr != nil || m == nil || m[1] != "0" || !strings.Contains(text, "--- PASS: "+t.Name()) {
		t.Fatalf("in User-mode Linux (%s): %v:\n%s", mode, runErr, umlTestOutput(text))
	}
	t.Logf("passed in User-mode Linux (%s):\n%s", mode, umlTestOutput(text))
}

// umlTestOutput is what the test printed in UML, without the kernel's boot
// messages.
func umlTestOutput(text string) string {
	if i := strings.Index(text, "=== RUN"); i >= 0 {
		return text[i:]
	}
	if len(text) > 4000 {
		text = text[len(text)-4000:]
	}
	return text
}
