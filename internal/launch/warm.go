package launch

import (
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// warmCgroupMigration moves the launcher into a cgroup of bothy's own, in the
// background, so that the kernel's grace period for cgroup migrations is
// spent while the launcher mounts the overlay and starts libcontainer
// instead of on the critical path.
//
// Every write to cgroup.procs takes the kernel's global
// cgroup_threadgroup_rwsem for writing; after a quiet spell, the first such
// write waits for an RCU grace period (rcu_sync_enter): 4-18 ms on this
// machine class, a third of a sandbox's start when libcontainer's own write
// of the init's pid paid for it. Writes during the following grace period
// are fast. The launcher is short-lived and its sandbox gets cgroups of its
// own; children it starts meanwhile are moved there by libcontainer. Only
// where a cgroup v1 hierarchy is mounted and writable (root); elsewhere it
// does nothing.
func warmCgroupMigration() {
	for _, ctrl := range []string{"freezer", "pids", "cpu"} {
		h := filepath.Join("/sys/fs/cgroup", ctrl)
		var st unix.Statfs_t
		if unix.Statfs(h, &st) != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
			continue
		}
		target := filepath.Join(h, "bothy")
		go func() {
			if err := os.Mkdir(target, 0o755); err != nil && !os.IsExist(err) {
				return
			}
			_ = os.WriteFile(filepath.Join(target, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
		}()
		return
	}
}
