package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// TestStartAfterReboot: a sandbox running when the host "reboots" (every
// process of it killed -9, its cgroups removed, its network's host side
// gone, the whole runtime tree wiped, as a reboot does to a tmpfs) lists as
// exited, saying why (runtime state lost; host rebooted once its record's
// boot ID is another's), under its name; start brings it back on its upper
// directory (its files and a whiteout survive), with its name, key,
// network re-attached and its host port kept; rm then leaves nothing, not
// even the record kept in the data tree. A second one, rebooted the same
// way, is removed by prune, wholly.
func TestStartAfterReboot(t *testing.T) {
	e := newNetEnv(t)
	ctx := context.Background()
	sb := e.create(sandbox.CreateOptions{Name: "web", Network: network.Options{Mode: "bridge", Publish: []string{"8000"}},
		Env: []string{"FOO=bar"}, Cmd: httpdCmd("served")})
	first := publishedURL(t, sb)
	if out, err := fetchHost(first); err != nil || out != "served" {
		t.Fatalf("published port: %q %v", out, err)
	}
	run(t, sb, "echo kept > /root/file && rm /bin/vi")
	other := e.create(sandbox.CreateOptions{Name: "other"})
	run(t, other, "echo other > /root/file")

	e.reboot(sb, other)
	m := reopen(t, e)
	// The kernel's boot ID is the same here: other's record says it was
	// kept in another boot, as after a real reboot.
	rec := keptRecord(m, other.ID)
	data, err := os.ReadFile(rec)
	if err != nil || !strings.Contains(string(data), `"boot_id":"`) {
		t.Fatalf("kept record of %s: %v", other.ShortID(), err)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	data = []byte(strings.Replace(string(data), strings.TrimSpace(string(boot)), "00000000-0000-0000-0000-000000000000", 1))
	if err := os.WriteFile(rec, data, 0o600); err != nil {
		t.Fatal(err)
	}

	list, err := m.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("ps -a after the reboot: %v %v", list, err)
	}
	for _, s := range list {
		want := map[string]string{"web": "exited (runtime state lost)", "other": "exited (host rebooted)"}[s.Name]
		if s.Status != sandbox.StatusExited || s.StatusLine() != want {
			t.Fatalf("after the reboot: %s %q %q, want %q", s.ShortID(), s.Name, s.StatusLine(), want)
		}
	}
	if got, err := m.Get(ctx, "web"); err != nil || got.ID != sb.ID {
		t.Fatalf("by name after the reboot: %v %v", got, err)
	}

	again, rep, err := m.Start(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != sandbox.StatusRunning || again.ID != sb.ID || again.Name != "web" || again.APIKey != sb.APIKey || again.Pid == sb.Pid {
		t.Fatalf("started after the reboot: %+v", again)
	}
	if out := run(t, again, "cat /root/file; echo $FOO; ls /bin/vi 2>&1 || true"); !strings.HasPrefix(out, "kept\nbar\n") || !strings.Contains(out, "No such file") {
		t.Fatalf("files, environment or whiteout lost: %q", out)
	}
	if len(rep.PortsMoved) != 0 || publishedURL(t, again) != first {
		t.Fatalf("host port not kept: %v → %v (%v)", sb.Ports(), again.Ports(), rep.PortsMoved)
	}
	if out, err := fetchHost(first); err != nil || out != "served" {
		t.Fatalf("published port after the start: %q %v", out, err)
	}
	if got, err := m.Get(ctx, "web"); err != nil || got.Status != sandbox.StatusRunning || got.RuntimeLost != "" {
		t.Fatalf("after the start: %+v %v", got, err)
	}

	// prune: the one not started goes, all of it; the running one stays.
	removed, err := m.Prune(ctx)
	if err != nil || !slices.Equal(removed, []string{other.ID}) {
		t.Fatalf("prune: %v %v, want %s", removed, err, other.ID)
	}
	for _, p := range []string{filepath.Dir(other.UpperDir), other.Dir, keptRecord(m, other.ID)} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("prune left %s: %v", p, err)
		}
	}
	if _, err := os.Lstat(keptRecord(m, sb.ID)); err != nil {
		t.Fatalf("a running sandbox's kept record: %v", err)
	}
	if err := m.Remove(ctx, "web", true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(keptRecord(m, sb.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("rm left the kept record: %v", err)
	}
}

// keptRecord is where the manager keeps sandbox id's record in the data
// tree.
func keptRecord(m *sandbox.Manager, id string) string {
	return filepath.Join(m.Paths().Data, "records", id+".json")
}

// reopen opens a manager on e's directories, as the first bothy after a
// reboot does.
func reopen(t *testing.T, e *netEnv) *sandbox.Manager {
	t.Helper()
	self, _ := os.Executable()
	m, err := sandbox.Open(sandbox.Options{Paths: e.m.Paths(), Executor: testenv.Executor(t), Init: self, Network: e.cfg})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return m
}

// reboot does to the sandboxes what a reboot does, and nothing to anything
// else: every process of theirs killed -9 (by pid and start time from
// their records, and from their own cgroups), their cgroups removed (their
// overlay mounts live only in their mount namespaces and went with their
// processes; they have no disk limit mounted on the host), as root the
// test network instance's bridge and nftables table removed, and the
// test's runtime tree (the manager's state directory, its own) wiped.
func (e *netEnv) reboot(sbs ...*sandbox.Sandbox) {
	t := e.t
	var cgroups []string
	for _, sb := range sbs {
		kill := []network.Process{{Pid: sb.Pid, Start: sb.PidStart}}
		if a := sb.NetworkAttachment; a != nil {
			if a.Helper != nil {
				kill = append(kill, a.Helper.Process, a.Helper.Watcher)
			}
			if a.Forwarder != nil {
				kill = append(kill, a.Forwarder.Process)
			}
		}
		for _, p := range kill {
			if p.Pid > 0 && processStart(p.Pid) == p.Start {
				_ = unix.Kill(p.Pid, unix.SIGKILL)
			}
		}
		if sb.Cgroup == "" {
			continue
		}
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", sb.Cgroup))
		if st, err := os.Stat(filepath.Join("/sys/fs/cgroup", sb.Cgroup, "cgroup.procs")); err == nil && !st.IsDir() {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", sb.Cgroup))
		}
		for _, d := range dirs {
			_ = filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
				if err == nil && de.IsDir() {
					cgroups = append(cgroups, p)
				}
				return nil
			})
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, d := range slices.Backward(cgroups) {
		for {
			data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			pids := strings.Fields(string(data))
			for _, p := range pids {
				if pid, err := strconv.Atoi(p); err == nil {
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("remove cgroup %s: %v (left: %v)", d, err, pids)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, sb := range sbs {
		for processStart(sb.Pid) == sb.PidStart {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still alive", sb.Pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if e.cfg.Instance != "" {
		links, _ := netlink.LinkList()
		for _, l := range links {
			if name := l.Attrs().Name; strings.HasPrefix(name, e.cfg.Instance) && name != e.upstream.hostEnd {
				if err := netlink.LinkDel(l); err != nil {
					t.Fatalf("remove link %s: %v", name, err)
				}
			}
		}
		c, err := nftables.New()
		if err != nil {
			t.Fatal(err)
		}
		tables, _ := c.ListTables()
		for _, tb := range tables {
			if tb.Name == e.cfg.Instance {
				c.DelTable(tb)
			}
		}
		if err := c.Flush(); err != nil {
			t.Fatalf("remove nftables tables %s: %v", e.cfg.Instance, err)
		}
	}
	if err := os.RemoveAll(e.m.Paths().State); err != nil {
		t.Fatalf("wipe the runtime tree: %v", err)
	}
}

// processStart is pid's start time in clock ticks since boot (0: gone or a
// zombie).
func processStart(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}
