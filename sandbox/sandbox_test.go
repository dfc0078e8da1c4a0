package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/ipc"
	// The launcher, the container init and the helpers, for ipc.Dispatch.
	_ "github.com/bothy-sandbox/bothy/internal/launcher"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// The test binary is the launcher and container init of the sandboxes it
// starts, as runc's libcontainer/integration tests do.
func TestMain(m *testing.M) {
	trace.Configure(trace.FromEnv()) // as bothy-init's main does
	ipc.Dispatch()
	os.Exit(testenv.Run(m))
}

// newManager returns a manager over fresh directories with busybox imported.
func newManager(t *testing.T) *sandbox.Manager {
	return newManagerNS(t, "")
}

// newManagerNS returns a manager whose rootless sandboxes use the given
// user namespace mode ("" for the best available).
func newManagerNS(t *testing.T, userns string) *sandbox.Manager {
	t.Helper()
	return newManagerWith(t, sandbox.Options{UserNS: userns})
}

// newManagerWith is newManager with opts, whose Paths, Executor and Init
// it fills in.
func newManagerWith(t testing.TB, opts sandbox.Options) *sandbox.Manager {
	t.Helper()
	root := testenv.ShortTempDir(t)
	self, _ := os.Executable()
	opts.Paths, opts.Executor, opts.Init = sandbox.PathsUnder(root), testenv.Executor(t), self
	// make test builds the default image (the tests that need it skip
	// without it).
	opts.DefaultArchive = os.Getenv("BOTHY_DEFAULT_IMAGE")
	m, err := sandbox.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		list, _ := m.List(ctx)
		for _, sb := range list {
			_ = m.Remove(ctx, sb.ID, true)
		}
	})
	if _, err := m.Store().ImportOCIArchive(context.Background(), testenv.BusyboxArchive(t), "busybox:latest"); err != nil {
		t.Fatal(err)
	}
	return m
}

func run(t *testing.T, sb *sandbox.Sandbox, cmd string) string {
	t.Helper()
	res, err := sb.Client().Run(context.Background(), api.RunRequest{Cmd: cmd, Wait: true, Timeout: 30})
	if err != nil {
		t.Fatalf("run %q: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("run %q: exit %d: %s%s", cmd, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(res.Stdout)
}

func TestSandboxLifecycle(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Name: "life", Image: "busybox", Env: []string{"FOO=bar"}, Workdir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Status != sandbox.StatusRunning {
		t.Fatalf("status %s, want running", sb.Status)
	}
	if got := run(t, sb, "id -u"); got != "0" {
		t.Errorf("uid in sandbox = %s, want 0", got)
	}
	if got := run(t, sb, "cat /proc/1/cmdline | tr '\\0' ' '"); !strings.HasPrefix(got, sandbox.ExecutorPath) {
		t.Errorf("PID 1 is %q, want the executor", got)
	}
	if got := run(t, sb, "echo $FOO; pwd; hostname"); got != "bar\n/tmp\nlife" {
		t.Errorf("env, cwd, hostname = %q", got)
	}
	// --network none: loopback only, and up.
	if got := run(t, sb, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"); got != "lo" {
		t.Errorf("interfaces = %q, want lo only", got)
	}
	if got := run(t, sb, "ip -o link show lo"); !strings.Contains(got, "UP") && !strings.Contains(got, "LOWER_UP") {
		t.Errorf("lo is not up: %s", got)
	}
	// runc's default hardening: masked paths, no_new_privs.
	if got := run(t, sb, "grep NoNewPrivs /proc/self/status | tr -d ' \\t'"); got != "NoNewPrivs:1" {
		t.Errorf("no_new_privs: %q", got)
	}
	// Masked: /dev/null is mounted over /proc/timer_list (which the host has).
	if got := run(t, sb, "stat -c %t,%T /proc/timer_list; wc -c < /proc/timer_list"); got != "1,3\n0" {
		t.Errorf("/proc/timer_list is not masked: %q", got)
	}
	if got := run(t, sb, "echo h 2>/dev/null > /proc/sysrq-trigger && echo writable || echo refused"); got != "refused" {
		t.Errorf("/proc/sysrq-trigger is %s", got)
	}
	if os.Geteuid() == 0 {
		// The sandbox joins the controllers it uses and no others: each
		// joined hierarchy is work at every start.
		cg := run(t, sb, "cat /proc/1/cgroup")
		for _, ctrl := range []string{"devices", "memory", "pids"} {
			if !strings.Contains(cg, ":"+ctrl+":/bothy/"+sb.ID+"\n") && !strings.HasSuffix(cg, ":"+ctrl+":/bothy/"+sb.ID) {
				t.Errorf("sandbox not in its %s cgroup:\n%s", ctrl, cg)
			}
		}
		if !strings.Contains(cg, ":blkio:/\n") {
			t.Errorf("sandbox joined a blkio cgroup it does not use:\n%s", cg)
		}
	}
	// The executor binary is read-only inside.
	res, err := sb.Client().Run(ctx, api.RunRequest{Cmd: "echo x >> " + sandbox.ExecutorPath, Wait: true})
	if err != nil || res.ExitCode == 0 {
		t.Errorf("executor binary is writable inside the sandbox: %v %+v", err, res)
	}
	st, err := os.Stat(sb.Socket)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("socket %s: %v mode %v, want 0600", sb.Socket, err, st.Mode())
	}

	got, err := m.Get(ctx, "life")
	if err != nil || got.ID != sb.ID {
		t.Fatalf("Get by name: %v %v", got, err)
	}
	if err := m.Remove(ctx, sb.ID, false); !errors.Is(err, sandbox.ErrRunning) {
		t.Errorf("Remove of a running sandbox without force: %v, want ErrRunning", err)
	}
	if err := m.Stop(ctx, "life", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get(ctx, sb.ID); got.Status != sandbox.StatusExited {
		t.Errorf("after stop: %s", got.Status)
	}
	if err := m.Remove(ctx, sb.ShortID(), false); err != nil {
		t.Fatal(err)
	}
	assertGone(t, m, sb)
	// The name is free again.
	sb2, err := m.Create(ctx, sandbox.CreateOptions{Name: "life", Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, sandbox.CreateOptions{Name: "life", Image: "busybox"}); !errors.Is(err, sandbox.ErrNameInUse) {
		t.Errorf("second sandbox with the same name: %v, want ErrNameInUse", err)
	}
	if err := m.Remove(ctx, sb2.ID, true); err != nil {
		t.Fatal(err)
	}
	assertGone(t, m, sb2)
}

// assertGone checks that nothing of the sandbox is left on the host.
func assertGone(t *testing.T, m *sandbox.Manager, sb *sandbox.Sandbox) {
	t.Helper()
	for _, p := range []string{sb.Dir, filepath.Dir(sb.UpperDir)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists after removal (%v)", p, err)
		}
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(data), sb.ID) {
		t.Errorf("a mount of sandbox %s is visible on the host", sb.ID)
	}
	if _, err := os.Stat("/proc/" + fmt.Sprint(sb.Pid)); err == nil {
		if data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", sb.Pid)); !strings.Contains(string(data), ") Z") {
			if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", sb.Pid)); strings.Contains(string(cmdline), "bothy-executor") {
				t.Errorf("sandbox PID 1 (%d) still runs", sb.Pid)
			}
		}
	}
	if os.Geteuid() == 0 {
		for _, ctrl := range []string{"memory", "pids", "cpu"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", ctrl, "bothy", sb.ID)); err == nil {
				t.Errorf("cgroup %s/bothy/%s left behind", ctrl, sb.ID)
			}
		}
	}
}

func TestSecondSandboxSharesLayers(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	a, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	layers := dirSize(t, m.LayerDir())
	b, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if after := dirSize(t, m.LayerDir()); after != layers {
		t.Errorf("layer cache grew from %d to %d bytes for a second sandbox", layers, after)
	}
	if n := dirSize(t, b.UpperDir); n > 64<<10 {
		t.Errorf("second sandbox's upper dir holds %d bytes: layer data was copied", n)
	}
	run(t, a, "echo only-a > /etc/marker && rm /bin/vi")
	if got := run(t, b, "cat /etc/marker 2>/dev/null || echo absent; test -e /bin/vi && echo vi"); got != "absent\nvi" {
		t.Errorf("sandboxes share writes: %q", got)
	}
	if _, err := os.Stat(filepath.Join(a.UpperDir, "etc", "marker")); err != nil {
		t.Errorf("write not in a's upper dir: %v", err)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func TestNetworkHost(t *testing.T) {
	m := newManager(t)
	sb, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Network: network.Options{Mode: sandbox.NetworkHost}})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.ReadFile("/proc/net/dev")
	want := strings.Count(string(host), "\n") - 2
	got := run(t, sb, "tail -n +3 /proc/net/dev | wc -l")
	if got != fmt.Sprint(want) {
		t.Errorf("sandbox sees %s interfaces, host has %d", got, want)
	}
}

func TestConcurrentSandboxes(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ids := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Name: fmt.Sprintf("c%d", i)})
			if err != nil {
				errs <- err
				return
			}
			ids <- sb.ID
			res, err := sb.Client().Run(ctx, api.RunRequest{Cmd: fmt.Sprintf("echo %d > /f; cat /f; ls / | wc -l", i), Wait: true})
			if err != nil {
				errs <- err
				return
			}
			if !strings.HasPrefix(res.Stdout, fmt.Sprintf("%d\n", i)) {
				errs <- fmt.Errorf("sandbox %d read %q: overlays shared", i, res.Stdout)
			}
			if i%2 == 0 {
				errs <- m.Remove(ctx, sb.ID, true)
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(ids)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	list, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n/2 {
		t.Errorf("%d sandboxes listed, want %d", len(list), n/2)
	}
	removed, err := m.Prune(ctx)
	if err != nil || len(removed) != 0 {
		t.Errorf("prune removed running sandboxes: %v %v", removed, err)
	}
	for _, sb := range list {
		if err := m.Stop(ctx, sb.ID, time.Second); err != nil {
			t.Error(err)
		}
	}
	removed, err = m.Prune(ctx)
	if err != nil || len(removed) != n/2 {
		t.Errorf("prune removed %d (%v), want %d", len(removed), err, n/2)
	}
	if list, _ := m.List(ctx); len(list) != 0 {
		t.Errorf("%d sandboxes left after prune", len(list))
	}
}

// hangingInit returns an init that hangs as the launcher and is the test
// binary otherwise (which also removes files under a subordinate-id mapping).
// Its shell runs privileged (-p): one started while the setuid helpers map
// its user namespace can see its real and effective ids differ (one read
// before the uid map, one after) and drop to the overflow id, and newgidmap
// then refuses a process no longer the caller's.
func hangingInit(t *testing.T) string {
	t.Helper()
	self, _ := os.Executable()
	hang := filepath.Join(t.TempDir(), "hang")
	script := "#!/bin/sh -p\ncase \"$1\" in " + ipc.ReexecLaunch + ") exec sleep 60;; esac\nexec " + self + " \"$@\"\n"
	if err := os.WriteFile(hang, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return hang
}

// A launcher that dies mid-create leaves a record that rm -f and prune clean.
func TestLauncherKilledMidCreate(t *testing.T) {
	m := newManager(t)
	hm, err := sandbox.Open(sandbox.Options{Paths: m.Paths(), Executor: testenv.Executor(t), Init: hangingInit(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := hm.Create(ctx, sandbox.CreateOptions{Image: "busybox", Name: "half"}); err == nil {
		t.Fatal("Create with a hanging launcher succeeded")
	}
	// Create cleaned up after itself.
	if list, _ := m.List(context.Background()); len(list) != 0 {
		t.Errorf("failed create left %d sandboxes", len(list))
	}
	if uppers, _ := os.ReadDir(filepath.Join(m.Paths().Data, "sandboxes")); len(uppers) != 0 {
		t.Errorf("failed create left %d upper directories", len(uppers))
	}
}

func TestBadInput(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	for _, tc := range []struct {
		opts sandbox.CreateOptions
		want string
	}{
		{sandbox.CreateOptions{Image: "nosuch:image"}, "not found"},
		{sandbox.CreateOptions{Image: "busybox", Name: "bad name/.."}, "invalid sandbox name"},
		{sandbox.CreateOptions{Image: "busybox", Network: network.Options{Mode: "nosuch"}}, "unknown network mode"},
		{sandbox.CreateOptions{Image: "busybox", Workdir: "relative"}, "must be absolute"},
	} {
		_, err := m.Create(ctx, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Create(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}
	if list, _ := m.List(ctx); len(list) != 0 {
		t.Errorf("failed creates left %d sandboxes", len(list))
	}
	if _, err := m.Get(ctx, "nosuch"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Get(nosuch) = %v", err)
	}
}

// Ownership inside matches the mapping: real ids as root, the image's ids
// under a subordinate range, root for everything under a single-id mapping.
// Removal works in every case, even for files owned by subordinate ids.
func TestIDMapping(t *testing.T) {
	modes := []string{""}
	if os.Geteuid() != 0 {
		modes = []string{userns.MapSingle, userns.MapSubID}
	}
	for _, mode := range modes {
		t.Run("mode="+mode, func(t *testing.T) {
			m := newManagerNS(t, mode)
			want := "1000:1000"
			switch m.Mapping().Mode {
			case userns.MapSingle:
				want = "0:0"
			case userns.MapSubID:
			case userns.MapHost:
			}
			ctx := context.Background()
			sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
			if err != nil {
				t.Fatal(err)
			}
			if got := run(t, sb, "stat -c %u:%g /home/user"); got != want {
				t.Errorf("%s mapping: /home/user owned by %s, want %s", m.Mapping().Mode, got, want)
			}
			// A file the sandbox gives to uid 1000 lands in the upper dir
			// owned by the host id that 1000 maps to.
			_, errOut := sb.Client().Run(ctx, api.RunRequest{Cmd: "touch /tmp/f && chown 1000:1000 /tmp/f && mkdir -p /tmp/d/e && chown -R 1000 /tmp/d && chmod 500 /tmp/d", Wait: true})
			if errOut != nil {
				t.Fatal(errOut)
			}
			if m.Mapping().Mode == userns.MapSubID {
				st, err := os.Stat(filepath.Join(sb.UpperDir, "tmp", "f"))
				if err != nil {
					t.Fatal(err)
				}
				wantUID := m.Mapping().UIDs[1].HostID + 999
				if uid := st.Sys().(*syscall.Stat_t).Uid; uid != wantUID {
					t.Errorf("upper file owned by host uid %d, want %d", uid, wantUID)
				}
			}
			if err := m.Remove(ctx, sb.ID, true); err != nil {
				t.Fatal(err)
			}
			assertGone(t, m, sb)
		})
	}
}

// TestStopRemoveCancelled: Stop and Remove with a context already done
// return its error and touch nothing: the sandbox still runs and answers,
// and stops and goes with a live context.
func TestStopRemoveCancelled(t *testing.T) {
	m := newManager(t)
	sb, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Stop(done, sb.ID, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop: %v, want context.Canceled", err)
	}
	if err := m.Remove(done, sb.ID, true); !errors.Is(err, context.Canceled) {
		t.Errorf("Remove -f: %v, want context.Canceled", err)
	}
	if got, err := m.Get(context.Background(), sb.ID); err != nil || got.Status != sandbox.StatusRunning {
		t.Fatalf("after cancelled stop and rm: %v %v, want running", got, err)
	}
	if got := run(t, sb, "echo ok"); got != "ok" {
		t.Errorf("the sandbox answers %q", got)
	}
	if err := m.Stop(context.Background(), sb.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(context.Background(), sb.ID, false); err != nil {
		t.Fatal(err)
	}
}

// bothy-plugin is found beside the executor by default, and is none (its
// plugins then unavailable) when it is not there.
func TestPluginServerBesideExecutor(t *testing.T) {
	dir := t.TempDir()
	exe, plugin := filepath.Join(dir, "bothy-executor"), filepath.Join(dir, "bothy-plugin")
	for _, f := range []string{exe, plugin} {
		if err := os.WriteFile(f, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, _ := os.Executable()
	open := func() *sandbox.Manager {
		m, err := sandbox.Open(sandbox.Options{Paths: sandbox.PathsUnder(t.TempDir()), Executor: exe, Init: self})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := open().PluginServer(); got != plugin {
		t.Errorf("PluginServer %q, want %q", got, plugin)
	}
	if err := os.Remove(plugin); err != nil {
		t.Fatal(err)
	}
	if got := open().PluginServer(); got != "" {
		t.Errorf("PluginServer %q without one beside the executor or the test binary", got)
	}
}
