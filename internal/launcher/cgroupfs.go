package launcher

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
)

// hideUnusedControllers unmounts, in the launcher's private mount namespace,
// the cgroup v1 hierarchies the sandbox has no use for, so that libcontainer
// neither creates nor joins a cgroup in them (nor binds them into the
// sandbox): each one is a directory to create and remove, a cgroup.procs
// write and two mounts inside the sandbox at every start. A hierarchy is
// kept when the sandbox's resources set one of its limits. The host's mount
// table is untouched. Locked mounts (a rootless launcher's inherited ones)
// cannot be unmounted; they are left (see joinDelegatedOnly).
func hideUnusedControllers(r *cgroups.Resources) {
	if cgroups.IsCgroup2UnifiedMode() {
		return
	}
	keep := joinedControllers(r)
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup"))
	if err != nil {
		return // nothing hidden: libcontainer joins every hierarchy
	}
	for _, m := range mounts {
		used := func(opt string) bool { return slices.Contains(keep, opt) }
		if !slices.ContainsFunc(strings.Split(m.VFSOptions, ","), used) {
			_ = unix.Unmount(m.Mountpoint, unix.MNT_DETACH)
		}
	}
}

// joinedControllers are the cgroup v1 controllers a root sandbox with
// resources r joins: devices and ipc.RootlessControllers, and those whose limits
// r sets.
func joinedControllers(r *cgroups.Resources) []string {
	keep := append([]string{"devices"}, ipc.RootlessControllers...)
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
	return keep
}

// joinDelegatedOnly lets a rootless sandbox skip the cgroup v1 hierarchies
// that were not delegated to its user. libcontainer refuses any error in a
// hierarchy when the cgroup is named by Path, but drops a hierarchy it may
// not write when the same cgroup is named by Parent and Name: so a user
// needs a delegated directory only in the hierarchies bothy uses (see
// scripts/delegate-cgroups.sh), and joins no other, however many the host
// mounts. A limit set in a dropped hierarchy still fails, in Set.
//
// A sandbox with no cgroup of its own (no Path: no delegated subtree, or in
// a Slurm job) is given one named at the hierarchies' roots, which an
// unprivileged user may not create: libcontainer drops every hierarchy and
// the sandbox stays in the launcher's cgroups. A relative name would have
// libcontainer make a cgroup below the launcher's wherever that is
// writable, as a Slurm job step's is: Slurm would then neither see the
// sandbox's processes in the step nor remove the step's cgroup.
func joinDelegatedOnly(c *cgroups.Cgroup) {
	if c == nil || c.Systemd || cgroups.IsCgroup2UnifiedMode() {
		return
	}
	if c.Path == "" {
		if !mapsHostRoot() {
			c.Parent = "/bothy-no-cgroup"
		}
		return
	}
	c.Parent, c.Name, c.Path = path.Dir(c.Path), path.Base(c.Path), ""
}

// mapsHostRoot reports whether this process's effective uid is the host's
// root, through its user namespace's map (root running a sandbox under a
// rootless mapping), who could create any cgroup.
func mapsHostRoot() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return true
	}
	euid := uint64(os.Geteuid())
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		in, err1 := strconv.ParseUint(f[0], 10, 32)
		host, err2 := strconv.ParseUint(f[1], 10, 32)
		n, err3 := strconv.ParseUint(f[2], 10, 33)
		if err1 != nil || err2 != nil || err3 != nil {
			return true
		}
		if euid >= in && euid < in+n {
			return host+(euid-in) == 0
		}
	}
	return true
}

// makeCgroups makes a cgroup v1 sandbox's cgroups now, joined by no
// process yet (libcontainer joins them when it starts the init), for
// ownCgroupView and commandsCgroup, which need to know where they are: a
// rootless manager drops, with ErrRootless, the hierarchies its user may
// not write, as libcontainer's own does. nil on a cgroup v2 host, or with
// systemd's driver. On error, nothing made is left.
func makeCgroups(c *cgroups.Cgroup) (cgroups.Manager, error) {
	if c == nil || c.Systemd || cgroups.IsCgroup2UnifiedMode() {
		return nil, nil
	}
	m, err := fs.NewManager(c, nil)
	if err != nil {
		return nil, fmt.Errorf("sandbox's cgroups: %w", err)
	}
	if err := m.Apply(-1); err != nil && !errors.Is(err, cgroups.ErrRootless) {
		_ = m.Destroy()
		return nil, fmt.Errorf("make the sandbox's cgroups: %w", err)
	}
	return m, nil
}

// ownCgroupView puts in config, in place of its `cgroup` mount, what
// libcontainer would have made of that mount for the cgroups of cg
// (makeCgroups), less the hierarchies' roots. libcontainer binds,
// read-only, the init's own cgroup of every hierarchy mounted; where the
// sandbox has no cgroup of its own (a rootless sandbox in a hierarchy not
// delegated to its user: cpuset, devices, blkio, name=systemd here), that
// is the hierarchy's root, which shows the sandbox every cgroup on the
// host: other users' sandboxes, Slurm's jobs, systemd's units. Those are
// left out, and with them two mounts each at every start. Without cg, or
// without a cgroup mount, config is left as it is.
func ownCgroupView(config *configs.Config, cg cgroups.Manager) error {
	i := slices.IndexFunc(config.Mounts, func(m *configs.Mount) bool { return m.Device == "cgroup" })
	if i < 0 || cg == nil {
		return nil
	}
	binds, err := ownCgroupMounts(config.Mounts[i], cg.GetPaths())
	if err != nil {
		return err
	}
	config.Mounts = slices.Replace(config.Mounts, i, i+1, binds...)
	return nil
}

// ownCgroupMounts are libcontainer's mounts for a cgroup v1 `cgroup` mount
// (see mountCgroupV1 in runc's libcontainer/rootfs_linux.go): a tmpfs, and
// in it a bind of the sandbox's cgroup of each hierarchy mounted here,
// with the mount's flags, where paths (subsystem to directory) names the
// sandbox's cgroup, else the one it shares with this process. A hierarchy
// in which that is the root is left out. Where libcontainer links a
// merged hierarchy's names (cpu and cpuacct to cpu,cpuacct), they are
// bound too.
func ownCgroupMounts(mnt *configs.Mount, paths map[string]string) ([]*configs.Mount, error) {
	hierarchies, err := cgroups.GetCgroupMounts(false)
	if err != nil {
		return nil, fmt.Errorf("list cgroup hierarchies: %w", err)
	}
	self, err := cgroups.ParseCgroupFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read this process's cgroups: %w", err)
	}
	return cgroupBinds(mnt, paths, hierarchies, self)
}

// cgroupBinds is ownCgroupMounts for the hierarchies mounted and this
// process's cgroups, self (/proc/self/cgroup). A hierarchy whose mount does
// not show this process's cgroup (a mount of a subtree it is not in) is left
// out too.
func cgroupBinds(mnt *configs.Mount, paths map[string]string, hierarchies []cgroups.Mount, self map[string]string) ([]*configs.Mount, error) {
	out := []*configs.Mount{{Source: "tmpfs", Device: "tmpfs", Destination: mnt.Destination,
		Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, Data: "mode=755", PropagationFlags: mnt.PropagationFlags}}
	for _, h := range hierarchies {
		dir := ""
		for _, ss := range h.Subsystems {
			// A named hierarchy's cgroup is joined only if it exists
			// (libcontainer's NameGroup makes none).
			if p := cmp.Or(paths[ss], paths[cgroups.CgroupNamePrefix+ss]); p != "" && cgroups.PathExists(p) {
				dir = p
				break
			}
		}
		if dir == "" {
			own, err := h.GetOwnCgroup(self)
			if err != nil {
				return nil, fmt.Errorf("this process's cgroup in %s: %w", h.Mountpoint, err)
			}
			rel, err := filepath.Rel(h.Root, own)
			if err != nil {
				return nil, fmt.Errorf("this process's cgroup in %s: %w", h.Mountpoint, err)
			}
			if rel == ".." || strings.HasPrefix(rel, "../") {
				continue // not under this mount: Join would name a directory outside it
			}
			dir = filepath.Join(h.Mountpoint, rel)
		}
		if h.Root == "/" && dir == h.Mountpoint {
			continue
		}
		name := filepath.Base(h.Mountpoint)
		names := []string{name}
		if strings.Contains(name, ",") {
			names = append(names, strings.Split(name, ",")...)
		}
		for _, n := range names {
			out = append(out, &configs.Mount{Source: dir, Device: "bind", Destination: path.Join(mnt.Destination, n),
				Flags: unix.MS_BIND | unix.MS_REC | mnt.Flags, PropagationFlags: mnt.PropagationFlags})
		}
	}
	return out, nil
}
