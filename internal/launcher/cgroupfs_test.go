package launcher

import (
	"os"
	"slices"
	"testing"

	"github.com/opencontainers/cgroups"
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
