package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/internal/launcher"
	"github.com/bothy-sandbox/bothy/internal/proc"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// buildProbe builds testdata/escapeprobe, a static binary that makes the
// syscalls busybox cannot.
func buildProbe(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("requires the go tool to build the escape probe: not in PATH")
	}
	out := filepath.Join(testenv.ShortTempDir(t), "escapeprobe")
	cmd := exec.Command(goTool, "build", "-trimpath", "-o", out, ".")
	cmd.Dir = "testdata/escapeprobe"
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off")
	if home, err := os.UserHomeDir(); err != nil || home == "" {
		cmd.Env = append(cmd.Env, "GOCACHE="+filepath.Join(os.TempDir(), "bothy-probe-gocache"))
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build escape probe: %v: %s", err, msg)
	}
	return out
}

// createLimited starts a sandbox with limits, skipping (with the fix) when
// the caller has no delegated cgroup: make test-rootless creates one.
func createLimited(t *testing.T, m *sandbox.Manager, opts sandbox.CreateOptions) *sandbox.Sandbox {
	t.Helper()
	sb, err := m.Create(context.Background(), opts)
	if errors.Is(err, sandbox.ErrLimits) && os.Getuid() != 0 {
		t.Skipf("requires a cgroup delegated to uid %d (make test-rootless creates it as root; see docs/operator.md): %v", os.Getuid(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// installProbe copies the probe into the sandbox as /probe.
func installProbe(t *testing.T, sb *sandbox.Sandbox, probe string) {
	t.Helper()
	f, err := os.Open(probe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := sb.Client().WriteFile(context.Background(), "/probe", f, client.WriteOptions{Mode: 0o755}); err != nil {
		t.Fatalf("copy probe into sandbox: %v", err)
	}
}

func runIn(t *testing.T, sb *sandbox.Sandbox, req api.RunRequest) *api.RunResult {
	t.Helper()
	req.Wait = true
	if req.Timeout == 0 {
		req.Timeout = 30
	}
	res, err := sb.Client().Run(context.Background(), req)
	if err != nil {
		t.Fatalf("run %q %q: %v", req.Argv, req.Cmd, err)
	}
	return res
}

// hostCgroupFile reads a file of the sandbox's cgroup from the host.
func hostCgroupFile(t *testing.T, sb *sandbox.Sandbox, controller, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, sb.Cgroup, file))
	if err != nil {
		t.Fatalf("read host cgroup file: %v", err)
	}
	return strings.TrimSpace(string(data))
}

// TestEscapeSuite attacks the host from inside a sandbox with the default
// hardening, --network none, --memory and --pids-limit, and checks the
// host after each attempt. docs/security.md lists each case with the
// mechanism that stops it.
func TestEscapeSuite(t *testing.T) {
	probe := buildProbe(t)
	m := newManager(t)
	const memLimit = 128 << 20
	const pidsLimit = 64
	sb := createLimited(t, m, sandbox.CreateOptions{Image: "busybox", Network: network.Options{Mode: sandbox.NetworkNone},
		Limits: sandbox.Limits{Memory: memLimit, PidsLimit: pidsLimit}})
	installProbe(t, sb, probe)

	// Host fixtures the sandbox must not reach.
	hostDir := testenv.ShortTempDir(t)
	secret := filepath.Join(hostDir, "secret")
	secretText := "host secret " + randHex(t)
	if err := os.WriteFile(secret, []byte(secretText), 0o644); err != nil {
		t.Fatal(err)
	}
	passwdBefore, _ := os.ReadFile("/etc/passwd")

	victim := exec.Command("sleep", "600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })

	var accepted atomic.Int64
	abstract := "bothy-escape-" + randHex(t)
	ul, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	for _, l := range []net.Listener{ul, tl} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
	}

	// Each probe case must print "blocked: …" and exit 0.
	probes := []struct {
		name string
		argv []string
	}{
		{"read host file", []string{"read", secret}},
		{"chroot escape to host file", []string{"chroot-escape", secret}},
		{"open_by_handle_at", []string{"open_by_handle_at"}},
		{"mount tmpfs", []string{"mount"}},
		{"mount proc", []string{"mount-proc"}},
		{"remount cgroupfs writable", []string{"remount-cgroup"}},
		{"umount", []string{"umount", "/etc/hosts"}},
		{"pivot_root", []string{"pivot_root"}},
		{"unshare user namespace", []string{"unshare-userns"}},
		{"init_module", []string{"init_module"}},
		{"finit_module", []string{"finit_module"}},
		{"keyctl", []string{"keyctl"}},
		{"add_key", []string{"add_key"}},
		{"bpf", []string{"bpf"}},
		{"perf_event_open", []string{"perf_event_open"}},
		{"ptrace host process", []string{"ptrace", strconv.Itoa(victim.Process.Pid)}},
		{"kill host process", []string{"kill", strconv.Itoa(victim.Process.Pid)}},
		{"ptrace the executor", []string{"ptrace", "1"}},
		{"read the executor's environment", []string{"read", "/proc/1/environ"}},
		{"host abstract unix socket", []string{"unix-abstract", abstract}},
		{"host network", []string{"tcp", tl.Addr().String()}},
		{"write cgroup memory limit", []string{"write", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}},
		{"write cgroup pids limit", []string{"write", "/sys/fs/cgroup/pids/pids.max"}},
		{"write cgroup.procs", []string{"write", "/sys/fs/cgroup/memory/cgroup.procs"}},
		{"sysrq-trigger", []string{"write", "/proc/sysrq-trigger"}},
		{"write /proc/sys", []string{"write", "/proc/sys/kernel/domainname"}},
		{"write /sys", []string{"write", "/sys/kernel/uevent_helper"}},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			res := runIn(t, sb, api.RunRequest{Argv: append([]string{"/probe"}, p.argv...)})
			if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "blocked:") {
				t.Fatalf("%v: exit %d: %s%s", p.argv, res.ExitCode, res.Stdout, res.Stderr)
			}
			t.Logf("%v → %s", p.argv, strings.TrimSpace(res.Stdout))
		})
	}

	t.Run("write host files", func(t *testing.T) {
		// The same paths inside the sandbox are the sandbox's own.
		res := runIn(t, sb, api.RunRequest{Cmd: fmt.Sprintf("mkdir -p %s && echo pwned > %s && echo pwned >> /etc/passwd && cat %s",
			hostDir, secret, secret)})
		if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "pwned" {
			t.Fatalf("exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
		if got, _ := os.ReadFile(secret); string(got) != secretText {
			t.Errorf("host file changed: %q", got)
		}
		if got, _ := os.ReadFile("/etc/passwd"); !bytes.Equal(got, passwdBefore) {
			t.Error("host /etc/passwd changed")
		}
	})

	t.Run("fill /dev/shm", func(t *testing.T) {
		res := runIn(t, sb, api.RunRequest{Cmd: "dd if=/dev/zero of=/dev/shm/fill bs=1M count=200; du -k /dev/shm/fill; rm -f /dev/shm/fill"})
		if res.ExitCode == 0 && !strings.Contains(res.Stderr, "No space left") {
			t.Fatalf("filling /dev/shm did not fail: %s%s", res.Stdout, res.Stderr)
		}
		var kb int
		fmt.Sscanf(res.Stdout, "%d", &kb)
		if kb > sandbox.DefaultShmSize>>10 {
			t.Errorf("/dev/shm took %d KiB, over its %d KiB", kb, sandbox.DefaultShmSize>>10)
		}
	})

	t.Run("memory bomb", func(t *testing.T) {
		res := runIn(t, sb, api.RunRequest{Cmd: "dd if=/dev/zero of=/dev/null bs=300M count=1"})
		if res.ExitCode != 137 || !res.OOMKilled {
			t.Fatalf("memory bomb: exit %d, oom_killed %v: %s", res.ExitCode, res.OOMKilled, res.Stderr)
		}
		if peak, _ := strconv.ParseInt(hostCgroupFile(t, sb, "memory", "memory.max_usage_in_bytes"), 10, 64); peak > memLimit {
			t.Errorf("peak memory %d over the %d limit", peak, memLimit)
		}
		got, err := m.Inspect(context.Background(), sb.ID)
		if err != nil || got.Usage == nil || got.Usage.OOMKills < 1 || got.Usage.MemoryPeak < memLimit/2 {
			t.Fatalf("inspect after OOM: %+v %v", got.Usage, err)
		}
	})

	t.Run("fork bomb", func(t *testing.T) {
		res := runIn(t, sb, api.RunRequest{Cmd: "f() { f | f & }; f; exec sleep 60", Timeout: 3, MaxOutput: 4096})
		// Either the timeout ends it, or the bomb's own shell gives up
		// when it cannot fork (busybox sh exits 2): both are the limit
		// at work; a clean exit would not be.
		if !res.TimedOut && res.ExitCode == 0 {
			t.Fatalf("fork bomb exited 0 before its timeout")
		}
		if !strings.Contains(res.Stderr, "an't fork") && !strings.Contains(res.Stderr, "resource temporarily unavailable") {
			t.Errorf("fork bomb never hit the pids limit: %.300s", res.Stderr)
		}
		if n, _ := strconv.Atoi(hostCgroupFile(t, sb, "pids", "pids.current")); n > pidsLimit {
			t.Errorf("pids.current %d over the limit %d", n, pidsLimit)
		}
	})

	// The sandbox is still usable, and the host still whole.
	if got := run(t, sb, "echo usable"); got != "usable" {
		t.Fatalf("sandbox after the attacks: %q", got)
	}
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("host process died: %v", err)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("host listeners accepted %d connections from the sandbox", n)
	}
	if got := hostCgroupFile(t, sb, "memory", "memory.limit_in_bytes"); got != strconv.Itoa(memLimit) {
		t.Errorf("memory limit on the host is %s, want %d", got, memLimit)
	}
	if got := hostCgroupFile(t, sb, "pids", "pids.max"); got != strconv.Itoa(pidsLimit) {
		t.Errorf("pids limit on the host is %s, want %d", got, pidsLimit)
	}
	if got, _ := os.ReadFile(secret); string(got) != secretText {
		t.Errorf("host file changed: %q", got)
	}
}

func randHex(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// TestSeccompProgram checks the compiled seccomp program the executor loads
// (internal/launcher, precompiledSeccomp): the executor itself runs under it,
// a syscall the profile denies gets EPERM, one newer than any the profile
// names gets ENOSYS, as under libcontainer's own filter, and the profile is
// compiled once for many sandboxes.
func TestSeccompProgram(t *testing.T) {
	const mseal = 462 // Linux 6.10, the same number on every architecture
	probe := buildProbe(t)
	m := newManager(t)
	ctx := context.Background()
	var sbs []*sandbox.Sandbox
	for range 2 {
		sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
		if err != nil {
			t.Fatal(err)
		}
		sbs = append(sbs, sb)
	}
	sb := sbs[1]
	installProbe(t, sb, probe)
	if got := run(t, sb, "grep '^Seccomp:' /proc/1/status"); !strings.HasSuffix(got, "2") {
		t.Errorf("the executor is not filtered: %q", got)
	}
	if res := runIn(t, sb, api.RunRequest{Argv: []string{"/probe", "keyctl"}}); strings.TrimSpace(res.Stdout) != "blocked: operation not permitted" {
		t.Errorf("keyctl: %s%s", res.Stdout, res.Stderr)
	}
	if got := run(t, sb, fmt.Sprintf("/probe errno %d", mseal)); got != "errno: 38" {
		t.Errorf("mseal, newer than the profile: %q, want ENOSYS (38)", got)
	}
	data := filepath.Dir(filepath.Dir(m.LayerDir()))
	if progs, _ := filepath.Glob(filepath.Join(data, "seccomp", "*.bpf")); len(progs) != 1 {
		t.Errorf("compiled programs after two sandboxes: %v, want one", progs)
	}

	// Unconfined, the kernel answers (mseal(0, 0, 0) is a no-op).
	open, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Security: sandbox.Security{Seccomp: sandbox.SeccompUnconfined}})
	if err != nil {
		t.Fatal(err)
	}
	installProbe(t, open, probe)
	if got := run(t, open, fmt.Sprintf("/probe errno %d", mseal)); got == "errno: 38" || got == "errno: 1" {
		t.Errorf("mseal unconfined: %q: this kernel lacks it, or a filter is loaded", got)
	}
}

// TestEscapeExecutorSocket attacks the executor's socket from inside as
// root: the sandbox must have no writable host directory mounted (once,
// /.bothy/run was the host directory holding the socket), and taking over
// the socket's old path must not divert the host's requests.
func TestEscapeExecutorSocket(t *testing.T) {
	probe := buildProbe(t)
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	installProbe(t, sb, probe)
	before, err := os.Lstat(sb.Socket)
	if err != nil {
		t.Fatal(err)
	}

	if res := runIn(t, sb, api.RunRequest{Argv: []string{"/probe", "host-binds"}}); res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "blocked:") {
		t.Errorf("host-binds: exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := run(t, sb, "test -e /.bothy/run && echo present || echo absent"); got != "absent" {
		t.Errorf("/.bothy/run is %s in the sandbox", got)
	}
	// Of the sandbox's state directory (the socket, state.json, the logs,
	// the bundle) only the three /etc files are mounted in: files the host
	// writes once at create and never reads back.
	for _, line := range strings.Split(run(t, sb, "cat /proc/self/mountinfo"), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.Contains(f[3], "/sb/"+sb.ID+"/") {
			continue
		}
		if name, ok := strings.CutPrefix(f[4], "/etc/"); !ok || !strings.HasSuffix(f[3], "/sb/"+sb.ID+"/etc/"+name) ||
			(name != "hosts" && name != "hostname" && name != "resolv.conf") {
			t.Errorf("a path of the state directory is mounted in the sandbox: %s", line)
		}
	}

	// Root in the sandbox renames what is at the socket's old path (and,
	// were it the host's directory, the socket) and listens there.
	const path = "/.bothy/run/api.sock"
	p, err := sb.Client().Start(ctx, api.RunRequest{Argv: []string{"/probe", "hijack-socket", path}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Client().Remove(context.Background(), p.ID) })
	// Once it listens, a request diverted to it is answered "hijacked".
	for i := 0; ; i++ {
		got := run(t, sb, "test -e "+path+".ready && echo ready || echo not")
		if got == "hijacked" {
			t.Fatal("the host's request was answered by the sandbox's listener")
		}
		if got == "ready" {
			break
		}
		if i > 200 {
			t.Fatal("the hijacking listener never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The host's requests still reach the executor, and the listener saw
	// none of them.
	if got := run(t, sb, "echo genuine"); got != "genuine" {
		t.Fatalf("the host's request was answered by the sandbox's listener: %q", got)
	}
	if got := run(t, sb, "cat "+path+".log"); got != "" {
		t.Errorf("the sandbox's listener received the host's requests:\n%s", got)
	}
	after, err := os.Lstat(sb.Socket)
	if err != nil || !os.SameFile(before, after) || after.Mode().Type() != os.ModeSocket {
		t.Errorf("the host's socket %s changed: %v %v", sb.Socket, after, err)
	}
}

// TestPidsLimitKeepsExecutorServing fills a sandbox's pids limit with
// commands and then loads the executor with concurrent requests, each of
// which may need a new OS thread: the Go runtime aborts when it cannot
// create one, and before commands had a pids cgroup of their own below the
// executor's, this ended the sandbox ("runtime: failed to create new OS
// thread", seen in CI as an escape suite's fork bomb that took the
// executor with it).
func TestPidsLimitKeepsExecutorServing(t *testing.T) {
	m := newManager(t)
	const pidsLimit = 64
	commandsMax := pidsLimit - launcher.ExecutorPidsReserve(pidsLimit)
	sb := createLimited(t, m, sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{PidsLimit: pidsLimit}})
	ctx := context.Background()
	c := sb.Client()

	if got := run(t, sb, "grep :pids: /proc/self/cgroup"); !strings.HasSuffix(got, "/"+sb.ID+"/"+launcher.CommandsCgroup) && !strings.HasSuffix(got, ":/"+launcher.CommandsCgroup) {
		t.Fatalf("a command's pids cgroup: %q, want the sandbox's %s", got, launcher.CommandsCgroup)
	}
	if got := hostCgroupFile(t, sb, "pids", launcher.CommandsCgroup+"/pids.max"); got != strconv.FormatInt(commandsMax, 10) {
		t.Fatalf("commands' pids.max %s, want %d", got, commandsMax)
	}

	// Start sleeps until a start fails: the commands' cgroup is full.
	var sleeps []string
	var full error
	for range pidsLimit {
		p, err := c.Start(ctx, api.RunRequest{Argv: []string{"sleep", "600"}})
		if err != nil {
			full = err
			break
		}
		sleeps = append(sleeps, p.ID)
	}
	if full == nil || !strings.Contains(full.Error(), "resource temporarily unavailable") {
		t.Fatalf("%d sleeps started in a sandbox limited to %d pids, the last start: %v", len(sleeps), pidsLimit, full)
	}
	if n, _ := strconv.Atoi(hostCgroupFile(t, sb, "pids", launcher.CommandsCgroup+"/pids.current")); n > int(commandsMax) {
		t.Errorf("commands' pids.current %d over their limit %d", n, commandsMax)
	}
	t.Logf("%d sleeps started before %v", len(sleeps), full)

	// The executor under load, at the commands' limit, its threads
	// counted meanwhile: they must stay within its reserve.
	reserve := launcher.ExecutorPidsReserve(pidsLimit)
	var maxThreads atomic.Int64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n, _ := proc.Threads(sb.Pid); int64(n) > maxThreads.Load() {
				maxThreads.Store(int64(n))
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for range 64 {
		wg.Go(func() {
			for range 10 {
				_, err := c.ListFiles(ctx, "/bin", client.ListOptions{})
				if err == nil {
					_, err = c.ReadFile(ctx, "/bin/busybox", client.ReadOptions{})
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stopSampling)
	<-sampled
	t.Logf("the executor ran at most %d threads under the load (its reserve: %d pids)", maxThreads.Load(), reserve)
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of 64 clients failed at the pids limit, the first with: %v", n, firstErr.Load())
	}
	if maxThreads.Load() > reserve {
		t.Errorf("the executor ran %d threads under the load, over the %d pids its commands leave it", maxThreads.Load(), reserve)
	}
	if err := c.Alive(ctx); err != nil {
		t.Fatalf("executor after the load: %v", err)
	}

	for _, id := range sleeps {
		if err := c.Signal(ctx, id, syscall.SIGKILL); err != nil {
			t.Fatalf("kill sleep %s: %v", id, err)
		}
		if _, err := c.Wait(ctx, id); err != nil {
			t.Fatalf("wait for sleep %s: %v", id, err)
		}
	}
	if got := run(t, sb, "echo usable"); got != "usable" {
		t.Fatalf("sandbox after its pids limit: %q", got)
	}
}
