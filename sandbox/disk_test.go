package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/disk"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// createEnv, set, makes this test binary create one sandbox with a disk
// limit under the BOTHY_ROOT-style directory it names, and exit: the
// process TestDiskLimitKilled kills at a step of the creation.
const createEnv = "BOTHY_TEST_DISK_CREATE"

func init() {
	// TestDiskQuota runs in User-mode Linux where the host kernel has no
	// project quotas: there, this binary is init first.
	testenv.UMLInit()
	root := os.Getenv(createEnv)
	if root == "" {
		return
	}
	trace.Configure(trace.FromEnv())
	// The launcher this binary becomes again must not come here.
	os.Unsetenv(createEnv)
	os.Unsetenv(trace.KillEnv)
	self, _ := os.Executable()
	m, err := sandbox.Open(sandbox.Options{Paths: sandbox.PathsUnder(root), Executor: os.Getenv("BOTHY_EXECUTOR"), Init: self})
	if err == nil {
		_, err = m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Disk: 32 << 20}})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "create:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// mountsUnder lists the mount points below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	return out
}

// eventually waits for cond, polling; the deadline is a safety net against
// a hang, never a measure.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// checkDiskGone checks that nothing of sandbox id's disk limit is left: no
// mount on its upper root, no loop device on its image, no image, no upper
// root.
func checkDiskGone(t *testing.T, m *sandbox.Manager, id string) {
	t.Helper()
	upperRoot := filepath.Join(m.Paths().Data, "sandboxes", id)
	img := filepath.Join(m.Paths().Data, "disks", id+".img")
	if ms := mountsUnder(t, upperRoot); len(ms) != 0 {
		t.Errorf("mounts left: %v", ms)
	}
	if !eventually(func() bool { return len(disk.LoopDevices(img)) == 0 }) {
		t.Errorf("loop devices left on %s: %v", img, disk.LoopDevices(img))
	}
	for _, p := range []string{img, upperRoot, filepath.Join(m.Paths().State, "sb", id)} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left: %v", p, err)
		}
	}
}

// TestDiskLimit: --disk as root on an ordinary data directory (a loop-mounted
// image; a project quota if the data filesystem has them): writes past the
// limit, to the root filesystem or an overlay volume, fail with ENOSPC (or
// EDQUOT) inside, the executor and the next command work, another sandbox
// is unaffected, inspect shows the limit and the usage, and rm leaves no
// mount, loop device or file. Unprivileged: refused, saying why and what to
// do, or waived with --ignore-limits.
func TestDiskLimit(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	if os.Getuid() != 0 {
		_, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Disk: 64 << 20}})
		if !errors.Is(err, sandbox.ErrLimits) || !strings.Contains(err.Error(), "--disk needs root") ||
			!strings.Contains(err.Error(), "CAP_SYS_ADMIN") || !strings.Contains(err.Error(), "operator") ||
			!strings.Contains(err.Error(), "--ignore-limits") {
			t.Fatalf("rootless --disk: %v", err)
		}
		if list, _ := m.List(ctx); len(list) != 0 {
			t.Errorf("a refused sandbox left %d records", len(list))
		}
		sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Disk: 64 << 20}, IgnoreLimits: true})
		if err != nil {
			t.Fatal(err)
		}
		if sb.Limits.Disk != 0 || sb.Disk != nil || !strings.Contains(sb.LimitsIgnored, "--disk needs root") {
			t.Errorf("--disk waived: limits %+v, disk %+v, ignored %q", sb.Limits, sb.Disk, sb.LimitsIgnored)
		}
		return
	}

	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "lower"), []byte("from the host\n"), 0o644)
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Disk: 64 << 20},
		Volumes: []string{host + ":/ov:overlay"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Limits.Disk != 64<<20 || sb.Disk == nil || sb.Disk.Inodes != 64<<20/disk.BytesPerInode {
		t.Fatalf("record: limits %+v, disk %+v", sb.Limits, sb.Disk)
	}
	upperRoot := filepath.Join(m.Paths().Data, "sandboxes", sb.ID)
	switch sb.Disk.Mode {
	case sandbox.DiskLoop:
		if ms := mountsUnder(t, upperRoot); len(ms) != 1 || ms[0] != upperRoot {
			t.Errorf("mounts on the upper root: %v", ms)
		}
		if devs := disk.LoopDevices(sb.Disk.Image); len(devs) != 1 {
			t.Errorf("loop devices on %s: %v", sb.Disk.Image, devs)
		}
	case sandbox.DiskQuota:
		t.Logf("the test's data directory has project quotas: project %d", sb.Disk.Project)
	default:
		t.Fatalf("disk mode %q", sb.Disk.Mode)
	}

	// 40 MiB in the overlay volume fit; 100 more in / do not.
	if got := run(t, sb, "dd if=/dev/zero of=/ov/a bs=1M count=40 2>&1 && cat /ov/lower"); !strings.Contains(got, "40+0 records out") || !strings.Contains(got, "from the host") {
		t.Fatalf("40 MiB into the overlay volume: %s", got)
	}
	res := runIn(t, sb, api.RunRequest{Cmd: "dd if=/dev/zero of=/big bs=1M count=100"})
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") && !strings.Contains(res.Stderr, "Disk quota exceeded") {
		t.Fatalf("100 MiB more into /: exit %d %s", res.ExitCode, res.Stderr)
	}
	if got := run(t, sb, "echo alive"); got != "alive" {
		t.Fatalf("after the disk filled: %q", got)
	}
	if _, err := os.ReadFile(filepath.Join(host, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the overlay volume wrote to the host directory: %v", err)
	}
	got, err := m.Inspect(ctx, sb.ID)
	if err != nil || got.Usage == nil || got.Usage.DiskBytes < 48<<20 || got.Usage.DiskBytes > 64<<20 || got.Usage.DiskInodes == 0 {
		t.Errorf("inspect: %v %+v", err, got.Usage)
	}
	if got := run(t, sb, "rm /big /ov/a && dd if=/dev/zero of=/small bs=1M count=1 2>&1 | tail -1 && echo written"); !strings.HasSuffix(got, "written") {
		t.Errorf("after freeing space: %q", got)
	}

	// Another sandbox, without a limit, writes what this one cannot.
	other, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, other, "dd if=/dev/zero of=/big bs=1M count=100 2>&1; rm /big"); !strings.Contains(got, "100+0 records out") {
		t.Errorf("the other sandbox: %s", got)
	}

	if err := m.Remove(ctx, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	checkDiskGone(t, m, sb.ID)
}

// TestDiskLimitKilled kills (SIGKILL) a process creating a sandbox with a
// disk limit at each step of it, and a running sandbox's PID 1, and checks
// that prune, or rm -f, removes the image's mount, its loop device and the
// image. Unprivileged, --disk is
// refused before anything is made (TestDiskLimit).
func TestDiskLimitKilled(t *testing.T) {
	if os.Getuid() != 0 {
		m := newManager(t)
		_, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Disk: 32 << 20}})
		if !errors.Is(err, sandbox.ErrLimits) || !strings.Contains(err.Error(), "--disk needs root") {
			t.Fatalf("rootless --disk: %v", err)
		}
		return
	}
	m := newManager(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(m.Paths().Data)
	for i, step := range []string{"disk image made", "disk image mounted", "launcher started", "bundle written"} {
		t.Run(strings.ReplaceAll(step, " ", "-"), func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(os.Environ(), createEnv+"="+root, "BOTHY_EXECUTOR="+testenv.Executor(t),
				trace.KillEnv+"=bothy:"+step)
			cmd.Stderr = &stderr
			// Killed (SIGKILL) only at the mark: it reached the step.
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the creation never reached %q: %v: %s", step, err, stderr.String())
			}
			list, err := m.List(context.Background())
			if err != nil || len(list) != 1 {
				t.Fatalf("a killed creation left %d records (%v), want 1", len(list), err)
			}
			id := list[0].ID
			// Its launcher, if it had one, goes with it.
			if !eventually(func() bool {
				sb, err := m.Get(context.Background(), id)
				// Dead: killed before its executor ran (docs/operator.md).
				return err == nil && (sb.Status == sandbox.StatusExited || sb.Status == sandbox.StatusDead)
			}) {
				t.Fatalf("sandbox %s never exited", id)
			}
			if i%2 == 0 {
				removed, err := m.Prune(context.Background())
				if err != nil || len(removed) != 1 {
					t.Fatalf("prune: %v %v", removed, err)
				}
			} else if err := m.Remove(context.Background(), id, true); err != nil {
				t.Fatal(err)
			}
			checkDiskGone(t, m, id)
		})
	}
	// A running sandbox whose PID 1 is killed: prune removes it all.
	t.Run("sandbox-killed", func(t *testing.T) {
		sb, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Disk: 32 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		run(t, sb, "echo data > /file")
		syscall.Kill(sb.Pid, syscall.SIGKILL)
		if !eventually(func() bool {
			got, err := m.Get(context.Background(), sb.ID)
			return err == nil && got.Status == sandbox.StatusExited
		}) {
			t.Fatal("the killed sandbox never exited")
		}
		if removed, err := m.Prune(context.Background()); err != nil || len(removed) != 1 {
			t.Fatalf("prune: %v %v", removed, err)
		}
		checkDiskGone(t, m, sb.ID)
	})
}

// probeEnv passes the escape probe, built on the host, to TestDiskQuota in
// User-mode Linux.
const probeEnv = "BOTHY_TEST_PROBE"

// TestDiskQuota: --disk on a data directory with project quotas (an ext4
// filesystem the test makes with the quota and project features, mounted
// with prjquota; in User-mode Linux where the host kernel has no ext4
// project quotas): the sandbox's upper root gets a project of its own with
// the limit, writes past it fail with EDQUOT inside (the sandbox and the
// launcher that mounted its overlay are root), the sandbox cannot move its
// files out of the project (seccomp), and rm lifts the limit and releases
// the project. Unprivileged: refused.
func TestDiskQuota(t *testing.T) {
	if os.Getuid() != 0 {
		m := newManager(t)
		_, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Disk: 32 << 20}})
		if !errors.Is(err, sandbox.ErrLimits) || !strings.Contains(err.Error(), "project quota needs CAP_SYS_ADMIN") {
			t.Fatalf("rootless --disk: %v", err)
		}
		return
	}
	var root string
	if testenv.InUML() {
		root = filepath.Join(os.Getenv(testenv.QuotaDirEnv), "bothy")
	} else {
		mkfs, err := disk.MkfsPath()
		if err != nil {
			t.Skipf("requires mkfs.ext4 (make setup installs e2fsprogs): %v", err)
		}
		dir := testenv.ShortTempDir(t)
		img := filepath.Join(dir, "data.img")
		f, err := os.Create(img)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(512 << 20)
		f.Close()
		if out, err := exec.Command(mkfs, "-q", "-F", "-t", "ext4", "-O", "quota,project", "-E", "quotatype=prjquota", img).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4: %v: %s", err, out)
		}
		root = filepath.Join(dir, "root")
		os.Mkdir(root, 0o700)
		if out, err := exec.Command("mount", "-o", "loop,prjquota", img, root).CombinedOutput(); err != nil {
			t.Logf("this kernel cannot mount ext4 with prjquota (%v: %s): testing in User-mode Linux", err, bytes.TrimSpace(out))
			testenv.RunInUML(t, img, "BOTHY_EXECUTOR="+testenv.Executor(t), probeEnv+"="+buildProbe(t))
			return
		}
		t.Cleanup(func() {
			if err := syscall.Unmount(root, 0); err != nil {
				t.Errorf("unmount the test's filesystem: %v", err)
			}
		})
	}
	self, _ := os.Executable()
	m, err := sandbox.Open(sandbox.Options{Paths: sandbox.PathsUnder(root), Executor: testenv.Executor(t), Init: self})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		list, _ := m.List(context.Background())
		for _, sb := range list {
			m.Remove(context.Background(), sb.ID, true)
		}
	})
	if _, err := m.Store().ImportOCIArchive(context.Background(), testenv.BusyboxArchive(t), "busybox:latest"); err != nil {
		t.Fatal(err)
	}
	sb, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Disk: 32 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Disk == nil || sb.Disk.Mode != sandbox.DiskQuota || sb.Disk.Project < 1<<24 {
		t.Fatalf("disk %+v, want a project quota", sb.Disk)
	}
	upperRoot, err := os.Open(filepath.Join(m.Paths().Data, "sandboxes", sb.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer upperRoot.Close()
	if p, err := disk.Project(upperRoot); err != nil || p != sb.Disk.Project {
		t.Errorf("project of the upper root: %d %v", p, err)
	}
	if u, err := disk.ProjectUsage(upperRoot, sb.Disk.Project); err != nil || u.ByteLimit != 32<<20 || u.InodeLimit != sb.Disk.Inodes {
		t.Errorf("quota: %+v %v", u, err)
	}
	res := runIn(t, sb, api.RunRequest{Cmd: "dd if=/dev/zero of=/big bs=1M count=64"})
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Disk quota exceeded") {
		t.Errorf("64 MiB under a 32 MiB quota: exit %d %s", res.ExitCode, res.Stderr)
	}
	if u, err := disk.ProjectUsage(upperRoot, sb.Disk.Project); err != nil || u.Bytes > 32<<20 || u.Bytes < 24<<20 {
		t.Errorf("quota after the fill: %+v %v", u, err)
	}
	got, err := m.Inspect(context.Background(), sb.ID)
	if err != nil || got.Usage == nil || got.Usage.DiskBytes < 24<<20 || got.Usage.DiskBytes > 32<<20 {
		t.Errorf("inspect: %v %+v", err, got.Usage)
	}
	run(t, sb, "rm /big; echo small > /small")
	probe := os.Getenv(probeEnv)
	if probe == "" {
		probe = buildProbe(t)
	}
	installProbe(t, sb, probe)
	if got := run(t, sb, "/probe project /small; /probe project /"); strings.Contains(got, "ESCAPED") || strings.Count(got, "permission denied") != 4 {
		t.Errorf("moving files out of the project: %s", got)
	}
	if got := run(t, sb, "echo alive"); got != "alive" {
		t.Errorf("after the quota: %q", got)
	}
	if err := m.Remove(context.Background(), sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if u, err := disk.ProjectUsage(upperRoot, sb.Disk.Project); err != nil || u.ByteLimit != 0 || u.InodeLimit != 0 {
		t.Errorf("quota after rm: %+v %v", u, err)
	}
	if _, err := os.Lstat(filepath.Join(m.Paths().Data, "disks", "projects", fmt.Sprint(sb.Disk.Project))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("project claim left: %v", err)
	}
}
