package launch

import (
	"bufio"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// alwaysJoined are the cgroup v1 controllers every sandbox joins: devices
// (device access control for root sandboxes: never optional), memory, pids
// and cpu accounting (stats and limits), freezer (pause, reliable kill).
var alwaysJoined = []string{"devices", "memory", "pids", "cpu", "cpuacct", "freezer"}

// hideUnusedControllers unmounts, in the launcher's private mount namespace,
// the cgroup v1 hierarchies the sandbox has no use for, so that libcontainer
// neither creates nor joins a cgroup in them (nor binds them into the
// sandbox). Joining a blkio cgroup alone costs 4-18 ms on this kernel class
// (measured: python mkdir + cgroup.procs write, kernel 6.18), a third of a
// sandbox's start; a hierarchy is kept when the sandbox's resources set one
// of its limits. The host's mount table is untouched. Locked mounts (a
// rootless launcher's inherited ones) cannot be unmounted; they are left.
func hideUnusedControllers(r *cgroups.Resources) {
	if cgroups.IsCgroup2UnifiedMode() {
		return
	}
	keep := slices.Clone(alwaysJoined)
	if r != nil {
		if r.CpusetCpus != "" || r.CpusetMems != "" {
			keep = append(keep, "cpuset")
		}
		if r.BlkioWeight != 0 || r.BlkioLeafWeight != 0 || len(r.BlkioWeightDevice) > 0 ||
			len(r.BlkioThrottleReadBpsDevice) > 0 || len(r.BlkioThrottleWriteBpsDevice) > 0 ||
			len(r.BlkioThrottleReadIOPSDevice) > 0 || len(r.BlkioThrottleWriteIOPSDevice) > 0 {
			keep = append(keep, "blkio")
		}
		if len(r.HugetlbLimit) > 0 {
			keep = append(keep, "hugetlb")
		}
		if r.NetClsClassid != 0 {
			keep = append(keep, "net_cls")
		}
		if len(r.NetPrioIfpriomap) > 0 {
			keep = append(keep, "net_prio")
		}
		if len(r.Rdma) > 0 {
			keep = append(keep, "rdma")
		}
	}
	for _, m := range cgroupV1Mounts() {
		if !slices.ContainsFunc(m.controllers, func(c string) bool { return slices.Contains(keep, c) }) {
			_ = unix.Unmount(m.point, unix.MNT_DETACH)
		}
	}
}

// joinDelegatedOnly lets a rootless sandbox skip the cgroup v1 hierarchies
// that were not delegated to its user. libcontainer refuses any error in a
// hierarchy when the cgroup is named by Path, but drops a hierarchy it may
// not write when the same cgroup is named by Parent and Name: so a user
// needs a delegated directory only in the hierarchies bothy uses (see
// scripts/delegate-cgroups.sh), and joins no other, however many the host
// mounts. A limit set in a dropped hierarchy still fails, in Set.
func joinDelegatedOnly(c *cgroups.Cgroup) {
	if c == nil || c.Path == "" || c.Systemd || cgroups.IsCgroup2UnifiedMode() {
		return
	}
	c.Parent, c.Name, c.Path = path.Dir(c.Path), path.Base(c.Path), ""
}

type cgroupMount struct {
	point       string
	controllers []string // named hierarchies as "name=systemd"
}

// cgroupV1Mounts lists the cgroup v1 mounts of the calling process's mount
// namespace.
func cgroupV1Mounts() []cgroupMount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseCgroupMounts(f)
}

// parseCgroupMounts picks the cgroup v1 mounts out of a mountinfo table.
func parseCgroupMounts(r io.Reader) []cgroupMount {
	var out []cgroupMount
	s := bufio.NewScanner(r)
	for s.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 || tail[0] != "cgroup" {
			continue
		}
		var ctrls []string
		for _, o := range strings.Split(tail[2], ",") {
			switch o {
			case "rw", "ro", "nosuid", "nodev", "noexec", "relatime", "noatime", "clone_children", "xattr":
			default:
				ctrls = append(ctrls, o)
			}
		}
		out = append(out, cgroupMount{point: unescapeMount(fields[4]), controllers: ctrls})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, ok := octal(s[i+1 : i+4]); ok {
				b.WriteByte(n)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	var n int
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		n = n*8 + int(c-'0')
	}
	return byte(n), n < 256
}
