package launch

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCgroupMounts(t *testing.T) {
	table := `43 42 254:0 / / rw,relatime - ext4 /dev/vda rw
25 24 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate
27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,xattr,name=systemd
28 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
29 25 0:26 / /sys/fs/cgroup/blkio rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,blkio
30 25 0:27 / /sys/fs/cgroup/odd\040dir rw - cgroup cgroup rw,clone_children,memory
bad line without separator
`
	got := parseCgroupMounts(strings.NewReader(table))
	want := []cgroupMount{
		{"/sys/fs/cgroup/systemd", []string{"name=systemd"}},
		{"/sys/fs/cgroup/cpu,cpuacct", []string{"cpu", "cpuacct"}},
		{"/sys/fs/cgroup/blkio", []string{"blkio"}},
		{"/sys/fs/cgroup/odd dir", []string{"memory"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseCgroupMounts:\n got %q\nwant %q", got, want)
	}
	for in, want := range map[string]string{`a\040b`: "a b", `\134`: `\`, `x\09`: `x\09`, `end\04`: `end\04`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
