package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"golang.org/x/sys/unix"
)

// CommandsCgroup is the name of the cgroup v1 pids sub-cgroup a sandbox's
// commands run in, below the sandbox's own cgroup where the executor is.
const CommandsCgroup = "commands"

// ExecutorPidsReserve is how many of a sandbox's pids limit its commands
// leave to the executor: an eighth of the limit, at least 32 and at most
// 128, never more than half. The executor (a Go program) needs 6 to 12
// threads, and the Go runtime aborts when it cannot create one, which would
// end the sandbox: a fork bomb must stop short of that.
func ExecutorPidsReserve(limit int64) int64 {
	return min(max(limit/8, 32), 128, limit/2)
}

// commandsCgroup prepares, for a sandbox with a pids limit on a cgroup v1
// host, the pids cgroup its commands count against: the sandbox's cgroup
// (created here, before libcontainer joins it) and a sub-cgroup
// CommandsCgroup in it, limited to the sandbox's limit less
// ExecutorPidsReserve. It returns that sub-cgroup's tasks file, open for
// writing, for the executor (--commands-cgroup-fd), who moves the thread it
// starts commands from into it; nil when there is no such limit, on cgroup
// v2 (see docs/security.md), or when the hierarchy is not the caller's to
// write (a rootless sandbox without a delegated pids hierarchy, where
// libcontainer drops it too). The directories go with the sandbox's cgroup
// (libcontainer's Destroy and bothy rm remove sub-cgroups first); remove,
// when not nil, removes them before libcontainer has joined them.
func commandsCgroup(c *cgroups.Cgroup) (tasks *os.File, remove func(), err error) {
	if c == nil || c.Resources == nil || c.Resources.PidsLimit == nil || *c.Resources.PidsLimit <= 0 || c.Systemd || cgroups.IsCgroup2UnifiedMode() {
		return nil, nil, nil
	}
	limit := *c.Resources.PidsLimit
	reserve := ExecutorPidsReserve(limit)
	if reserve <= 0 {
		return nil, nil, nil
	}
	m, err := fs.NewManager(c, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("commands' pids cgroup: %w", err)
	}
	dir := m.Path("pids")
	if dir == "" {
		return nil, nil, nil
	}
	var made []string
	remove = func() {
		for i := len(made) - 1; i >= 0; i-- {
			_ = unix.Rmdir(made[i])
		}
	}
	for _, d := range []string{dir, filepath.Join(dir, CommandsCgroup)} {
		switch err := unix.Mkdir(d, 0o755); {
		case err == nil:
			made = append(made, d)
		case errors.Is(err, unix.EEXIST):
		case errors.Is(err, unix.ENOENT) && d == dir:
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, nil, skipUnwritable(c, err)
			}
			made = append(made, d)
		default:
			remove()
			return nil, nil, skipUnwritable(c, err)
		}
	}
	sub := filepath.Join(dir, CommandsCgroup)
	if err := os.WriteFile(filepath.Join(sub, "pids.max"), []byte(strconv.FormatInt(limit-reserve, 10)), 0); err != nil {
		remove()
		return nil, nil, fmt.Errorf("limit the commands' pids cgroup: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(sub, "tasks"), os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		remove()
		return nil, nil, fmt.Errorf("open the commands' pids cgroup: %w", err)
	}
	return f, remove, nil
}

// skipUnwritable is nil for a permission error of a rootless sandbox's
// cgroup (not delegated: no reserve, as libcontainer drops the hierarchy),
// err otherwise.
func skipUnwritable(c *cgroups.Cgroup, err error) error {
	if c.Rootless && (errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EROFS)) {
		return nil
	}
	return fmt.Errorf("commands' pids cgroup: %w", err)
}
