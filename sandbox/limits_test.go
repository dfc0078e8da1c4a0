package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/launcher"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// TestLimitsEnforced starts a sandbox with every limit and reads them back
// from the host's cgroup files, then through Stats and Inspect.
func TestLimitsEnforced(t *testing.T) {
	m := newManager(t)
	limits := sandbox.Limits{Memory: 96 << 20, MemorySwap: 128 << 20, PidsLimit: 40, CPUs: 0.5}
	sb := createLimited(t, m, sandbox.CreateOptions{Image: "busybox", Limits: limits})
	if sb.Cgroup == "" || !strings.HasSuffix(sb.Cgroup, "/"+sb.ID) || sb.LimitsIgnored != "" || sb.Limits != limits {
		t.Fatalf("record: cgroup %q, limits %+v, ignored %q", sb.Cgroup, sb.Limits, sb.LimitsIgnored)
	}
	for _, c := range []struct{ ctrl, file, want string }{
		{"memory", "memory.limit_in_bytes", strconv.Itoa(96 << 20)},
		{"memory", "memory.memsw.limit_in_bytes", strconv.Itoa(128 << 20)},
		{"pids", "pids.max", "40"},
		{"cpu", "cpu.cfs_quota_us", "50000"},
		{"cpu", "cpu.cfs_period_us", "100000"},
	} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c.ctrl, sb.Cgroup, c.file)); errors.Is(err, os.ErrNotExist) && c.file == "memory.memsw.limit_in_bytes" {
			continue // no swap accounting: --memory-swap was refused below
		}
		if got := hostCgroupFile(t, sb, c.ctrl, c.file); got != c.want {
			t.Errorf("%s/%s = %s, want %s", c.ctrl, c.file, got, c.want)
		}
	}
	// The sandbox's processes are in that cgroup, and see it read-only.
	procs := hostCgroupFile(t, sb, "pids", "cgroup.procs")
	if !strings.Contains("\n"+procs+"\n", "\n"+strconv.Itoa(sb.Pid)+"\n") {
		t.Errorf("executor %d not in the sandbox's cgroup: %q", sb.Pid, procs)
	}
	if got := run(t, sb, "cat /sys/fs/cgroup/pids/pids.max"); got != "40" {
		t.Errorf("pids.max inside = %q", got)
	}
	// Its /sys/fs/cgroup shows its own cgroups and never a hierarchy's
	// root (the only cgroup with a cgroup.sane_behavior), which would show
	// it every cgroup on the host: rootless, the hierarchies not delegated
	// to the user were bound whole.
	view := run(t, sb, "ls /sys/fs/cgroup; ls /sys/fs/cgroup/*/cgroup.sane_behavior 2>&1; cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
	if strings.Contains(view, "/cgroup.sane_behavior\n") || !strings.Contains(view, "No such file") ||
		!strings.HasSuffix(view, "\n"+strconv.Itoa(96<<20)) || !strings.Contains(view, "\npids\n") {
		t.Errorf("the sandbox's /sys/fs/cgroup:\n%s", view)
	}

	// A busy loop shows up as CPU use, capped near half a core.
	c := runIn(t, sb, api.RunRequest{Cmd: "timeout 2 sh -c 'while :; do :; done'; true", Timeout: 10})
	if c.ExitCode != 0 {
		t.Fatalf("busy loop: %d %s", c.ExitCode, c.Stderr)
	}
	stats, err := m.Stats(context.Background(), []string{sb.ID}, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := stats[0]
	if st.Memory.Limit != 96<<20 || st.Pids.Limit != 40 || st.CPU.Limit != 0.5 || st.Pids.Current < 1 || st.Memory.Usage == 0 {
		t.Errorf("stats: %+v", st)
	}
	// 2 s of wall time at 0.5 cores: about 1 s of CPU, never 2.
	if st.CPU.UsageSeconds < 0.3 || st.CPU.UsageSeconds > 1.6 {
		t.Errorf("cpu time after a 2 s busy loop at --cpus 0.5: %.2fs", st.CPU.UsageSeconds)
	}
	got, err := m.Inspect(context.Background(), sb.ID)
	if err != nil || got.Usage == nil || got.Usage.MemoryPeak == 0 || got.Usage.OOMKills != 0 {
		t.Fatalf("inspect: %+v %v", got.Usage, err)
	}

	// rm removes the cgroup in every hierarchy.
	if err := m.Remove(context.Background(), sb.ID, true); err != nil {
		t.Fatal(err)
	}
	for _, ctrl := range []string{"memory", "pids", "cpu", "freezer"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", ctrl, sb.Cgroup)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s%s left after rm: %v", ctrl, sb.Cgroup, err)
		}
	}
}

// TestLimitsRefused: without a delegated cgroup a limit is refused with the
// fix, and --ignore-limits starts the sandbox without it, saying so.
func TestLimitsRefused(t *testing.T) {
	if os.Getuid() == 0 {
		// Root needs no delegation: check what it refuses instead.
		m := newManager(t)
		_, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{MemorySwap: 1 << 30}})
		if err == nil || !strings.Contains(err.Error(), "--memory-swap needs --memory") {
			t.Fatalf("--memory-swap alone: %v", err)
		}
		_, err = m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Memory: 1 << 20}})
		if err == nil || !strings.Contains(err.Error(), "minimum is 6MiB") {
			t.Fatalf("1 MiB: %v", err)
		}
		return
	}
	m := newManagerWith(t, sandbox.Options{Cgroups: sandbox.CgroupOptions{Parent: "/bothy-not-delegated-" + strconv.Itoa(os.Getuid())}})
	_, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Memory: 64 << 20}})
	if !errors.Is(err, sandbox.ErrLimits) || !strings.Contains(err.Error(), "chown") || !strings.Contains(err.Error(), "--ignore-limits") {
		t.Fatalf("want ErrLimits naming the fix, got %v", err)
	}
	if list, _ := m.List(context.Background()); len(list) != 0 {
		t.Errorf("a refused sandbox left %d records", len(list))
	}
	sb, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Memory: 64 << 20}, IgnoreLimits: true})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Cgroup != "" || !sb.Limits.IsZero() || !strings.Contains(sb.LimitsIgnored, "no cgroup is delegated") {
		t.Errorf("ignored limits: cgroup %q limits %+v ignored %q", sb.Cgroup, sb.Limits, sb.LimitsIgnored)
	}
	if _, err := m.Stats(context.Background(), []string{sb.ID}, 0); !errors.Is(err, sandbox.ErrNoCgroup) {
		t.Errorf("stats without a cgroup: %v", err)
	}
	// No limit asked for: no cgroup needed, no refusal. The default pids
	// limit cannot be enforced: the record says so and why.
	def, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if def.Cgroup != "" || def.Limits.PidsLimit != 0 || def.LimitsIgnored != "" ||
		!strings.Contains(def.LimitsNotEnforced, "default pids limit (4096) is not enforced: no cgroup is delegated") {
		t.Errorf("default limits without a cgroup: cgroup %q, limits %+v, ignored %q, not enforced %q",
			def.Cgroup, def.Limits, def.LimitsIgnored, def.LimitsNotEnforced)
	}
	if got, err := m.Inspect(context.Background(), def.ID); err != nil || got.LimitsNotEnforced != def.LimitsNotEnforced {
		t.Errorf("inspect: %v %+v", err, got)
	}
	// An explicit pids limit is still refused; --pids-limit 0 needs nothing.
	_, err = m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{PidsLimit: 100}})
	if !errors.Is(err, sandbox.ErrLimits) || !strings.Contains(err.Error(), "no cgroup is delegated") {
		t.Errorf("explicit --pids-limit without a cgroup: %v", err)
	}
	unl, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{PidsLimit: -1}})
	if err != nil || unl.LimitsNotEnforced != "" || unl.Cgroup != "" {
		t.Errorf("--pids-limit 0 without a cgroup: %v %+v", err, unl)
	}
}

// TestDefaultPidsLimit: a sandbox that asks for no pids limit gets
// DefaultPidsLimit in its cgroup (read from the host) and a fork bomb stops
// there, leaving the sandbox usable; -1 (the CLI's --pids-limit 0) is no
// limit.
func TestDefaultPidsLimit(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Cgroup == "" && os.Getuid() != 0 {
		t.Skipf("requires a cgroup delegated to uid %d (make test-rootless creates it as root; see docs/operator.md): %s", os.Getuid(), sb.LimitsNotEnforced)
	}
	if sb.Limits.PidsLimit != sandbox.DefaultPidsLimit || sb.LimitsNotEnforced != "" {
		t.Fatalf("record: limits %+v, not enforced %q", sb.Limits, sb.LimitsNotEnforced)
	}
	if got := hostCgroupFile(t, sb, "pids", "pids.max"); got != "4096" {
		t.Fatalf("host pids.max = %s, want 4096", got)
	}
	// A bomb that forks (without exec: the shell's fork and exec would take
	// minutes on a loaded machine) until fork fails, then kills its
	// children. The timeout is only a safety net. Commands have the limit
	// less the executor's reserve (see TestPidsLimitKeepsExecutorServing).
	installProbe(t, sb, buildProbe(t))
	res := runIn(t, sb, api.RunRequest{Argv: []string{"/probe", "forkbomb"}, Timeout: 600})
	commandsMax := int(sandbox.DefaultPidsLimit - launcher.ExecutorPidsReserve(sandbox.DefaultPidsLimit))
	var n int
	if _, err := fmt.Sscanf(res.Stdout, "blocked: resource temporarily unavailable after %d processes", &n); err != nil ||
		n > commandsMax || n < commandsMax-16 {
		t.Errorf("fork bomb: %q %q (exit %d), want EAGAIN after nearly %d processes", res.Stdout, res.Stderr, res.ExitCode, commandsMax)
	}
	events := hostCgroupFile(t, sb, "pids", launcher.CommandsCgroup+"/pids.events")
	if n, err := strconv.Atoi(strings.TrimPrefix(events, "max ")); err != nil || n == 0 {
		t.Errorf("pids.events %q: the bomb never hit the limit", events)
	}
	if n, _ := strconv.Atoi(hostCgroupFile(t, sb, "pids", "pids.current")); n > sandbox.DefaultPidsLimit {
		t.Errorf("pids.current %d over the limit", n)
	}
	if got := run(t, sb, "echo usable"); got != "usable" {
		t.Fatalf("sandbox after the bomb: %q", got)
	}

	// -1: no pids limit.
	unl, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{PidsLimit: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := hostCgroupFile(t, unl, "pids", "pids.max"); got != "max" || unl.Limits.PidsLimit != 0 || unl.LimitsNotEnforced != "" {
		t.Errorf("no pids limit: host pids.max %s, record %+v %q", got, unl.Limits, unl.LimitsNotEnforced)
	}
}

// TestSecurityOptions checks the hardening knobs in a live sandbox.
func TestSecurityOptions(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	status := func(sb *sandbox.Sandbox, key string) string {
		out := run(t, sb, "grep '^"+key+":' /proc/self/status")
		return strings.TrimSpace(strings.TrimPrefix(out, key+":"))
	}
	def, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if got := status(def, "Seccomp"); got != "2" {
		t.Errorf("default seccomp mode %s, want 2 (filter)", got)
	}
	if got := status(def, "NoNewPrivs"); got != "1" {
		t.Errorf("NoNewPrivs %s", got)
	}
	if got := status(def, "CapEff"); got != "00000000a80425fb" {
		t.Errorf("default CapEff %s, want Docker's 00000000a80425fb", got)
	}
	// Rootless, the launcher holds every capability of its namespace as an
	// ambient one (userns.allCaps): none may reach the sandbox, whose PID 1
	// (the executor) and commands have the spec's sets only.
	for _, f := range []string{"/proc/self/status", "/proc/1/status"} {
		if got := run(t, def, "grep -E '^Cap(Amb|Inh):' "+f+" | tr -d ' \t\n'"); got != "CapInh:0000000000000000CapAmb:0000000000000000" {
			t.Errorf("%s: %s, want no inheritable or ambient capability", f, got)
		}
	}
	if got := run(t, def, "df -k /dev/shm | tail -1 | awk '{print $2}'"); got != "65536" {
		t.Errorf("/dev/shm size %s KiB, want 65536", got)
	}
	if got := run(t, def, "ls /dev | tr '\\n' ' '"); strings.Contains(got, "sda") || strings.Contains(got, "mem ") || strings.Contains(got, "kmsg") {
		t.Errorf("/dev is not minimal: %s", got)
	}

	profile := filepath.Join(t.TempDir(), "deny-mkdir.json")
	os.WriteFile(profile, []byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`), 0o644)
	os.Chmod(filepath.Dir(profile), 0o755)
	custom, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Security: sandbox.Security{
		CapDrop: []string{"ALL"}, CapAdd: []string{"net_admin", "CAP_KILL"}, Seccomp: profile, ShmSize: 1 << 20, ReadOnly: true,
		NewPrivileges: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := status(custom, "CapEff"); got != "0000000000001020" {
		t.Errorf("--cap-drop ALL --cap-add NET_ADMIN,KILL: CapEff %s", got)
	}
	if got := status(custom, "NoNewPrivs"); got != "0" {
		t.Errorf("no-new-privileges=false: NoNewPrivs %s", got)
	}
	if res := runIn(t, custom, api.RunRequest{Cmd: "mkdir /dev/shm/d"}); res.ExitCode == 0 {
		t.Error("the profile denies mkdir, but mkdir worked")
	}
	if res := runIn(t, custom, api.RunRequest{Cmd: "touch /rootfile"}); res.ExitCode == 0 || !strings.Contains(res.Stderr, "Read-only") {
		t.Errorf("--read-only: touch / gave %d %s", res.ExitCode, res.Stderr)
	}
	if got := run(t, custom, "echo ok > /dev/shm/f && cat /dev/shm/f && df -k /dev/shm | tail -1 | awk '{print $2}'"); got != "ok\n1024" {
		t.Errorf("--shm-size 1m: %q", got)
	}

	open, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Security: sandbox.Security{Seccomp: sandbox.SeccompUnconfined}})
	if err != nil {
		t.Fatal(err)
	}
	if got := status(open, "Seccomp"); got != "0" {
		t.Errorf("seccomp=unconfined: mode %s", got)
	}

	// The bundle says it too (what docs/security.md promises).
	var spec specs.Spec
	data, err := os.ReadFile(filepath.Join(def.Dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/proc/sysrq-trigger", "/proc/sys", "/proc/irq", "/proc/bus"} {
		if !contains(spec.Linux.ReadonlyPaths, p) {
			t.Errorf("%s is not read-only", p)
		}
	}
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/sys/firmware"} {
		if !contains(spec.Linux.MaskedPaths, p) {
			t.Errorf("%s is not masked", p)
		}
	}
	if spec.Linux.Seccomp == nil || spec.Linux.Seccomp.DefaultAction != specs.ActErrno || len(spec.Linux.Seccomp.Syscalls) < 10 {
		t.Fatalf("default seccomp profile: %+v", spec.Linux.Seccomp)
	}
	// The native ABI only (see defaultSeccomp).
	if archs := spec.Linux.Seccomp.Architectures; len(archs) != 1 || (archs[0] != specs.ArchX86_64 && archs[0] != specs.ArchAARCH64) {
		t.Errorf("seccomp architectures %v, want the native one only", archs)
	}

	for _, bad := range []sandbox.Security{{CapAdd: []string{"CAP_BOGUS"}}, {Seccomp: "/nonexistent/profile.json"}} {
		if _, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Security: bad}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
