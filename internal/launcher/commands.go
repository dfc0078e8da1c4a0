package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/opencontainers/cgroups"
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
// host, the pids cgroup its commands count against: a sub-cgroup
// CommandsCgroup of the sandbox's cgroup (cg, made by makeCgroups),
// limited to the sandbox's limit less ExecutorPidsReserve. It returns that
// sub-cgroup's tasks file, open for writing, for the executor
// (--commands-cgroup-fd), who moves the thread it starts commands from
// into it; nil when there is no such limit, on cgroup v2 (no cg; see
// docs/security.md), or when the hierarchy is not the caller's to write (a
// rootless sandbox without a delegated pids hierarchy, which cg drops as
// libcontainer does). The sub-cgroup goes with the sandbox's cgroup (its
// removal, cg's Destroy included, removes sub-cgroups first).
func commandsCgroup(c *cgroups.Cgroup, cg cgroups.Manager) (*os.File, error) {
	if cg == nil || c.Resources == nil || c.Resources.PidsLimit == nil || *c.Resources.PidsLimit <= 0 {
		return nil, nil
	}
	limit := *c.Resources.PidsLimit
	reserve := ExecutorPidsReserve(limit)
	dir := cg.Path("pids")
	if reserve <= 0 || dir == "" {
		return nil, nil
	}
	sub := filepath.Join(dir, CommandsCgroup)
	if err := unix.Mkdir(sub, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, skipUnwritable(c, err)
	}
	if err := os.WriteFile(filepath.Join(sub, "pids.max"), []byte(strconv.FormatInt(limit-reserve, 10)), 0); err != nil {
		return nil, fmt.Errorf("limit the commands' pids cgroup: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(sub, "tasks"), os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the commands' pids cgroup: %w", err)
	}
	return f, nil
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
