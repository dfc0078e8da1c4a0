package launcher

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
)

func TestJoinedControllers(t *testing.T) {
	base := []string{"devices", "memory", "pids", "cpu", "cpuacct", "freezer"}
	for _, tc := range []struct {
		r    *cgroups.Resources
		want []string
	}{
		{nil, base},
		{&cgroups.Resources{Memory: 1 << 20, CpuQuota: 1000}, base},
		{&cgroups.Resources{CpusetCpus: "0", BlkioWeight: 100, HugetlbLimit: []*cgroups.HugepageLimit{{Pagesize: "2MB", Limit: 1}}},
			append(slices.Clone(base), "cpuset", "blkio", "hugetlb")},
	} {
		if got := joinedControllers(tc.r); !slices.Equal(got, tc.want) {
			t.Errorf("joinedControllers(%+v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}

func TestJoinDelegatedOnly(t *testing.T) {
	if cgroups.IsCgroup2UnifiedMode() {
		t.Skip("requires a cgroup v1 host: the conversion applies to v1 only")
	}
	c := &cgroups.Cgroup{Path: "/bothy-1001/abc"}
	joinDelegatedOnly(c)
	if c.Path != "" || c.Parent != "/bothy-1001" || c.Name != "abc" {
		t.Errorf("joinDelegatedOnly: %+v", c)
	}
}

// TestJoinDelegatedOnlyNoCgroup: a rootless sandbox with no cgroup of its
// own is named at the hierarchies' roots (which libcontainer drops, as the
// caller may not write there), never below the launcher's own cgroup, which
// may be writable (a Slurm job step's); root, who could create it, is left
// as it was.
func TestJoinDelegatedOnlyNoCgroup(t *testing.T) {
	if cgroups.IsCgroup2UnifiedMode() {
		t.Skip("requires a cgroup v1 host: the conversion applies to v1 only")
	}
	c := &cgroups.Cgroup{Name: "abc"}
	joinDelegatedOnly(c)
	want := "/bothy-no-cgroup"
	if os.Geteuid() == 0 {
		want = ""
	}
	if c.Path != "" || c.Parent != want || c.Name != "abc" {
		t.Errorf("joinDelegatedOnly: %+v, want Parent %q", c, want)
	}
}

// TestCgroupBinds: the sandbox's view of cgroup v1 is a tmpfs with a bind of
// its own cgroup per hierarchy (a merged hierarchy's names bound too), of
// this process's where the sandbox has none, and nothing of a hierarchy
// where that would be the root or a cgroup the mount does not show.
func TestCgroupBinds(t *testing.T) {
	if cgroups.IsCgroup2UnifiedMode() {
		t.Skip("requires a cgroup v1 host: the view is of v1 hierarchies")
	}
	fs := t.TempDir()
	mp := func(name string) string { return filepath.Join(fs, name) }
	own := func(name string) string {
		dir := filepath.Join(mp(name), "bothy", "sb1")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	paths := map[string]string{
		"cpu": own("cpu,cpuacct"), "cpuacct": own("cpu,cpuacct"), "memory": own("memory"),
		"pids": filepath.Join(fs, "dropped"), // a hierarchy a rootless manager dropped: never made
	}
	hierarchies := []cgroups.Mount{
		{Mountpoint: mp("cpu,cpuacct"), Root: "/", Subsystems: []string{"cpu", "cpuacct"}},
		{Mountpoint: mp("memory"), Root: "/", Subsystems: []string{"memory"}},
		{Mountpoint: mp("pids"), Root: "/", Subsystems: []string{"pids"}},       // this process at the root
		{Mountpoint: mp("devices"), Root: "/", Subsystems: []string{"devices"}}, // the same
		{Mountpoint: mp("cpuset"), Root: "/", Subsystems: []string{"cpuset"}},   // a Slurm job's
		{Mountpoint: mp("systemd"), Root: "/", Subsystems: []string{"systemd"}}, // a named hierarchy
		{Mountpoint: mp("freezer"), Root: "/job", Subsystems: []string{"freezer"}},
		{Mountpoint: mp("blkio"), Root: "/sub", Subsystems: []string{"blkio"}}, // a subtree this process is not in
	}
	self := map[string]string{
		"cpu,cpuacct": "/", "memory": "/", "pids": "/", "devices": "/",
		"cpuset": "/slurm/uid_1001/job_5", "name=systemd": "/user.slice", "freezer": "/job/step_0", "blkio": "/other",
	}
	mnt := &configs.Mount{Device: "cgroup", Destination: "/sys/fs/cgroup", Flags: unix.MS_RDONLY, PropagationFlags: []int{unix.MS_PRIVATE}}
	got, err := cgroupBinds(mnt, paths, hierarchies, self)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range got {
		if m.Device == "bind" && m.Flags != unix.MS_BIND|unix.MS_REC|unix.MS_RDONLY {
			t.Errorf("bind of %s: flags %#x, want the cgroup mount's (read-only) and MS_BIND|MS_REC", m.Destination, m.Flags)
		}
		lines = append(lines, m.Device+" "+strings.TrimPrefix(m.Source, fs)+" "+m.Destination)
	}
	want := []string{
		"tmpfs tmpfs /sys/fs/cgroup",
		"bind /cpu,cpuacct/bothy/sb1 /sys/fs/cgroup/cpu,cpuacct",
		"bind /cpu,cpuacct/bothy/sb1 /sys/fs/cgroup/cpu",
		"bind /cpu,cpuacct/bothy/sb1 /sys/fs/cgroup/cpuacct",
		"bind /memory/bothy/sb1 /sys/fs/cgroup/memory",
		"bind /cpuset/slurm/uid_1001/job_5 /sys/fs/cgroup/cpuset",
		"bind /systemd/user.slice /sys/fs/cgroup/systemd",
		"bind /freezer/step_0 /sys/fs/cgroup/freezer",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("cgroupBinds:\n  %s\nwant:\n  %s", strings.Join(lines, "\n  "), strings.Join(want, "\n  "))
	}
}
