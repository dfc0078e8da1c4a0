package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// warmCgroupMigration starts, in the background, a cgroup migration of one
// of this process's threads into a cgroup of bothy's own, and lets the thread
// die there.
//
// Every write to cgroup.procs takes the kernel's global
// cgroup_threadgroup_rwsem for writing; after a quiet spell, the first such
// write waits for an RCU grace period (rcu_sync_enter), 4-18 ms on this
// machine class, and writes during the following grace period are fast.
// libcontainer writes the sandbox's init into its cgroups about 10 ms after
// `bothy run` starts creating it: started here, the grace period runs while
// the bundle is written and the launcher starts, instead of on the critical
// path. Only where a cgroup v1 hierarchy is mounted and bothy may write to it
// (root); elsewhere it does nothing.
func warmCgroupMigration() {
	var target string
	for _, ctrl := range []string{"freezer", "pids", "cpu"} {
		h := filepath.Join("/sys/fs/cgroup", ctrl)
		var st unix.Statfs_t
		if unix.Statfs(h, &st) == nil && st.Type == unix.CGROUP_SUPER_MAGIC {
			target = filepath.Join(h, "bothy")
			break
		}
	}
	if target == "" {
		return
	}
	go func() {
		// Never unlocked: the thread exits with the goroutine, so the
		// migrated thread leaves nothing behind in bothy's cgroup.
		runtime.LockOSThread()
		if err := os.Mkdir(target, 0o755); err != nil && !os.IsExist(err) {
			return
		}
		_ = os.WriteFile(filepath.Join(target, "tasks"), []byte(strconv.Itoa(unix.Gettid())), 0)
	}()
}
