package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Some kernel features bothy uses are missing from the test machine's
// kernel: ext4 project quotas need CONFIG_QFMT_V2 (and XFS's,
// CONFIG_XFS_QUOTA). Tests of them run, where the host kernel lacks them,
// in a User-mode Linux kernel (Debian's user-mode-linux package, built with
// both) that RunInUML boots with the test binary as its init, on the host's
// root directory read-only (hostfs) and an image the test made as its block
// device /dev/ubda: a real kernel, and no privilege needed on the host.

// umlEnv is "root" or "user" in the environment of init in UML, and "child"
// in the test process it starts.
const umlEnv = "BOTHY_UML"

// QuotaDirEnv names, in UML, the directory where /dev/ubda (an ext4 image
// made with project quotas) is mounted with prjquota.
const QuotaDirEnv = "BOTHY_QUOTA_DIR"

// UMLUser is the uid the tests run as in UML when the host caller is
// unprivileged.
const UMLUser = 1000

// InUML reports whether the test runs in User-mode Linux.
func InUML() bool { return os.Getenv(umlEnv) == "child" }

// UMLInit returns at once, unless the process is init in UML started by
// RunInUML: then it sets the machine up (proc, sys, dev, a tmpfs on /run
// with TMPDIR in it, cgroup v1 hierarchies, the quota and overlay modules,
// /dev/ubda with prjquota on $BOTHY_QUOTA_DIR), runs the test binary again as a child
// (as root, or as UMLUser), prints its exit status and powers off. Call it
// first thing in TestMain, before anything that could act as init.
func UMLInit() {
	mode := os.Getenv(umlEnv)
	if os.Getpid() != 1 || (mode != "root" && mode != "user") {
		return
	}
	code := 1
	if err := umlSetup(mode); err != nil {
		fmt.Println("bothy-uml-setup:", err)
	} else {
		// /proc/self/exe: the binary stays reachable whatever is mounted.
		cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.Env = append(os.Environ(), umlEnv+"=child")
		if mode == "user" {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: UMLUser, Gid: UMLUser}}
		}
		if err := cmd.Run(); err != nil {
			fmt.Println("bothy-uml-run:", err)
		}
		if cmd.ProcessState != nil {
			code = cmd.ProcessState.ExitCode()
		}
	}
	fmt.Printf("\nbothy-uml-exit %d\n", code)
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func umlSetup(mode string) error {
	mount := func(fs, target, data string) error {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(fs, target, fs, 0, data); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s on %s: %w", fs, target, err)
		}
		return nil
	}
	// The host's /tmp stays visible (read-only): the test may have built
	// files there for this run. Writable: /run (TMPDIR is /run/tmp).
	for _, m := range []struct{ fs, target string }{{"proc", "/proc"}, {"sysfs", "/sys"}, {"devtmpfs", "/dev"},
		{"tmpfs", "/run"}, {"tmpfs", "/dev/shm"}, {"devpts", "/dev/pts"}, {"tmpfs", "/sys/fs/cgroup"}} {
		if err := mount(m.fs, m.target, ""); err != nil {
			return err
		}
	}
	for _, c := range []string{"memory", "pids", "cpu", "cpuacct", "freezer", "devices"} {
		if err := mount("cgroup", "/sys/fs/cgroup/"+c, c); err != nil {
			return err
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
	dir := "/run/quota"
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir("/run/tmp", 0o1777); err != nil {
		return err
	}
	os.Chmod("/run/tmp", 0o1777)
	if err := unix.Mount("/dev/ubda", dir, "ext4", 0, "prjquota"); err != nil {
		return fmt.Errorf("mount the image with prjquota: %w", err)
	}
	os.Setenv(QuotaDirEnv, dir)
	os.Setenv("TMPDIR", "/run/tmp")
	os.Setenv("HOME", "/run/tmp")
	if os.Getenv("PATH") == "" {
		os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if mode == "user" {
		return os.Chown(dir, UMLUser, UMLUser)
	}
	return nil
}

// RunInUML runs the calling test in User-mode Linux, with img (an ext4
// image with project quotas) mounted with prjquota on $BOTHY_QUOTA_DIR, as
// root or, when the caller is unprivileged, as UMLUser; env is added to the
// environment the test sees there (with the caller's BOTHY_ variables). It
// fails with what the test printed if it did not pass, and skips, naming the
// package, if user-mode-linux is not installed. The test binary's TestMain
// must call UMLInit first.
func RunInUML(t *testing.T, img string, env ...string) {
	t.Helper()
	uml, err := exec.LookPath("linux.uml")
	if err != nil {
		uml = "/usr/bin/linux.uml"
		if _, err := os.Stat(uml); err != nil {
			t.Skip("requires user-mode-linux (make setup installs it): this kernel lacks ext4 project quotas (CONFIG_QFMT_V2)")
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
	args := []string{"mem=1G", "root=/dev/root", "rootfstype=hostfs", "rootflags=/", "ro",
		"ubd0=" + img, "init=" + self, "con=null", "con0=null,fd:1", umlEnv + "=" + mode}
	// init's environment comes from the kernel's command line: words
	// without spaces, at most 32 of them.
	for _, kv := range append(os.Environ(), env...) {
		if (strings.HasPrefix(kv, "BOTHY_") || strings.HasPrefix(kv, "PATH=")) && !strings.HasPrefix(kv, umlEnv+"=") && !strings.ContainsAny(kv, " \t\n") {
			args = append(args, kv)
		}
	}
	args = append(args, "--", "-test.run=^"+t.Name()+"$", "-test.v")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // a safety net only
	defer cancel()
	cmd := exec.CommandContext(ctx, uml, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "TMPDIR=/dev/shm") // where UML keeps its memory file
	// UML's processes are host processes: they all go with its group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	runErr := cmd.Run()
	text := out.String()
	m := regexp.MustCompile(`bothy-uml-exit (\d+)`).FindStringSubmatch(text)
	// UML itself now and then dies of SIGABRT once the guest has halted:
	// the test's own report, before, is what counts then.
	if halted := regexp.MustCompile(`bothy-uml-exit 0\n(?s:.*)reboot: System halted`).MatchString(text); halted && isSignal(runErr) {
		runErr = nil
	}
	if runErr != nil || m == nil || m[1] != "0" || !strings.Contains(text, "--- PASS: "+t.Name()) {
		t.Fatalf("in User-mode Linux (%s): %v:\n%s", mode, runErr, umlTestOutput(text))
	}
	t.Logf("passed in User-mode Linux (%s):\n%s", mode, umlTestOutput(text))
}

// isSignal reports whether err is a process's death by a signal.
func isSignal(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// umlTestOutput is what the test printed in UML, without the kernel's boot
// messages, each line marked (so that it is not taken for the host test's).
func umlTestOutput(text string) string {
	if i := strings.Index(text, "=== RUN"); i >= 0 {
		text = text[i:]
	} else if len(text) > 6000 {
		text = text[len(text)-6000:]
	}
	return "uml| " + strings.ReplaceAll(strings.TrimSpace(text), "\n", "\numl| ")
}
