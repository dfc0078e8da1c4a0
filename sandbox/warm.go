package sandbox

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/userns"
)

// warmCgroupMigration moves the launcher (pid, our unwaited child, so the pid
// cannot be reused meanwhile), in the background, into the sandbox's cgroup
// parent (/bothy, or a user's delegated /bothy-UID) in the freezer hierarchy,
// so that the kernel's grace period for cgroup migrations runs while the
// launcher starts, mounts the overlay and prepares libcontainer, instead of
// on the critical path.
//
// Every write to cgroup.procs takes the kernel's global
// cgroup_threadgroup_rwsem for writing; after a quiet spell, the first such
// write waits for an RCU grace period (rcu_sync_enter): 4-18 ms on this
// machine class, a quarter of a sandbox's start when libcontainer's own
// write of the init's pid paid for it. Writes during the following grace
// period are fast. The launcher is short-lived and has no cgroup of its own;
// libcontainer moves the sandbox's init into the sandbox's cgroups. Where the
// hierarchy or the directory is missing or not writable, nothing happens.
func warmCgroupMigration(pid int, parent string) {
	if target := freezerDir(parent); target != "" {
		go migrate(pid, target)
	}
}

// WarmCgroups is warmCgroupMigration for the calling process itself, for a
// short-lived caller that is about to create a sandbox (the bothy CLI calls
// it first thing): the grace period then starts a few milliseconds after the
// process does, and is over before libcontainer's own migration. The caller
// moves into the cgroup parent of the manager's sandboxes in the freezer
// hierarchy (no limits apply there); a long-lived caller that must keep its
// cgroups should not call it. Cgroup v1 only; elsewhere it does nothing.
func (m *Manager) WarmCgroups() {
	if cgroups.IsCgroup2UnifiedMode() {
		return
	}
	rootless := m.mapping.Mode != userns.MapHost
	if m.opts.Cgroups.SlurmJob != "" {
		// In a Slurm job the CLI stays in the job step's cgroups, where
		// Slurm signals it (and an unprivileged caller's sandboxes,
		// planInJob): moved out, a foreground `run` would outlive scancel
		// and hold the job in COMPLETING.
		return
	}
	if target := freezerDir(v1CgroupParent(m.opts.Cgroups.Parent, rootless)); target != "" {
		if rootless {
			// Only into a delegated parent that exists: a launcher in a
			// cgroup it may write, when the sandbox gets none of its
			// own, would have libcontainer make one below it.
			if _, err := os.Stat(target); err != nil {
				return
			}
		}
		// Launchers are then born in target: no need to move each.
		m.warmed.Store(true)
		go migrate(os.Getpid(), target)
	}
}

// freezerDir is parent in the freezer hierarchy, or "" when there is none.
func freezerDir(parent string) string {
	if parent == "" || parent == "/" || parent == "." {
		return ""
	}
	h := "/sys/fs/cgroup/freezer"
	var st unix.Statfs_t
	if unix.Statfs(h, &st) != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
		return ""
	}
	return filepath.Join(h, parent)
}

// migrate writes pid into the cgroup directory target.
func migrate(pid int, target string) {
	// Root's parent may not exist yet (libcontainer makes it on first use);
	// a delegated one does.
	if err := os.Mkdir(target, 0o755); err != nil && !os.IsExist(err) {
		return
	}
	_ = os.WriteFile(filepath.Join(target, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}
