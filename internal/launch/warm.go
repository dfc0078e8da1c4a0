package launch

import (
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// warmCgroupMigration moves the launcher, in the background, into parent
// (the sandbox's cgroup parent, "/bothy" or a user's delegated directory) in
// the first cgroup v1 hierarchy that has it, so that the kernel's grace
// period for cgroup migrations is spent while the launcher mounts the overlay
// and starts libcontainer instead of on the critical path.
//
// Every write to cgroup.procs takes the kernel's global
// cgroup_threadgroup_rwsem for writing; after a quiet spell, the first such
// write waits for an RCU grace period (rcu_sync_enter): 4-18 ms on this
// machine class, a third of a sandbox's start when libcontainer's own write
// of the init's pid paid for it. Writes during the following grace period
// are fast. The launcher is short-lived and its sandbox gets cgroups of its
// own; children it starts meanwhile are moved there by libcontainer. Where
// no hierarchy has the directory, or it is not writable, nothing happens.
func warmCgroupMigration(parent string) {
	if parent == "" || parent == "/" || parent == "." {
		return
	}
	for _, ctrl := range []string{"freezer", "pids", "cpu"} {
		h := filepath.Join("/sys/fs/cgroup", ctrl)
		var st unix.Statfs_t
		if unix.Statfs(h, &st) != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
			continue
		}
		target := filepath.Join(h, parent)
		go func() {
			// Root's parent may not exist yet (libcontainer makes it);
			// a delegated one always does.
			if err := os.Mkdir(target, 0o755); err != nil && !os.IsExist(err) {
				return
			}
			_ = os.WriteFile(filepath.Join(target, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
		}()
		return
	}
}
