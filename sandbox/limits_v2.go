package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Cgroup v2 placement. Written to the kernel's and systemd's documented
// delegation model but not exercised by the test suite, which runs on a
// cgroup v1 host (see docs/operator.md).

const unifiedMount = "/sys/fs/cgroup"

// planCgroupV2 places the sandbox on a unified (v2-only) host:
//   - BOTHY_CGROUP_MANAGER=systemd: a transient scope bothy-ID.scope that
//     systemd creates (the user's systemd instance when rootless);
//   - root: /bothy/ID (or under BOTHY_CGROUP_PARENT);
//   - rootless: under BOTHY_CGROUP_PARENT, else /bothy-UID when an operator
//     delegated it, else under the subtree systemd delegates to the user,
//     /user.slice/user-UID.slice/user@UID.service/bothy.
//
// Each controller a limit needs must be listed in the parent's
// cgroup.controllers, else the sandbox is refused (unless ignore).
func planCgroupV2(id string, rootless bool, l Limits, ignore bool) (cgroupPlan, error) {
	plan := cgroupPlan{Version: 2}
	if os.Getenv(CgroupManagerEnv) == "systemd" {
		// libcontainer's "slice:prefix:name" form; the empty slice is
		// system.slice for root and user.slice for the user's instance.
		plan.Systemd, plan.Path = true, ":bothy:"+id
		return plan.finish(l, nil, ignore)
	}
	parent := os.Getenv(CgroupParentEnv)
	if parent == "" {
		parent = "/bothy"
		if rootless {
			// A subtree an operator delegated (scripts/delegate-cgroups.sh),
			// else the one systemd delegates to the user's instance.
			parent = fmt.Sprintf("/bothy-%d", os.Getuid())
			if unix.Access(unifiedMount+parent+"/cgroup.procs", unix.W_OK) != nil {
				parent = fmt.Sprintf("/user.slice/user-%d.slice/user@%d.service/bothy", os.Getuid(), os.Getuid())
			}
		}
	}
	if !filepath.IsAbs(parent) || filepath.Clean(parent) != parent || parent == "/" {
		return cgroupPlan{}, fmt.Errorf("invalid %s %q: give a clean absolute cgroup path", CgroupParentEnv, parent)
	}
	// The controllers the parent can hand down: those of the nearest
	// existing ancestor (libcontainer creates the rest of the path).
	avail := availableV2(unifiedMount + parent)
	var problems []string
	need := func(controller, flag string, drop func()) {
		if !slices.Contains(avail, controller) {
			problems = append(problems, fmt.Sprintf("%s needs the %s controller, which %s does not delegate", flag, controller, parent))
			drop()
		}
	}
	if l.Memory > 0 {
		need("memory", "--memory", func() { l.Memory, l.MemorySwap = 0, 0 })
	}
	if l.PidsLimit > 0 {
		need("pids", "--pids-limit", func() { l.PidsLimit = 0 })
	}
	if l.CPUs > 0 {
		need("cpu", "--cpus", func() { l.CPUs = 0 })
	}
	plan.Path = parent + "/" + id
	if rootless && !writableAncestor(unifiedMount+parent) {
		why := fmt.Sprintf("no cgroup v2 subtree is delegated to uid %d at %s: enable systemd user delegation (Delegate=yes in user@.service) and set %s=systemd, or chown a subtree to the user and point %s at it (see docs/operator.md)",
			os.Getuid(), parent, CgroupManagerEnv, CgroupParentEnv)
		if !l.IsZero() {
			problems = append(problems, why)
		}
		plan.Path, plan.Missing, l = "", why, Limits{}
	}
	return plan.finish(l, problems, ignore)
}

// availableV2 returns cgroup.controllers of dir or its nearest existing
// ancestor.
func availableV2(dir string) []string {
	for d := dir; strings.HasPrefix(d, unifiedMount); d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "cgroup.controllers")); err == nil {
			return strings.Fields(string(data))
		}
		if d == unifiedMount {
			break
		}
	}
	return nil
}

// writableAncestor reports whether dir exists and is writable, or its
// nearest existing ancestor is (so that it can be created).
func writableAncestor(dir string) bool {
	for d := dir; strings.HasPrefix(d, unifiedMount); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			return unix.Access(d, unix.W_OK|unix.X_OK) == nil &&
				unix.Access(filepath.Join(d, "cgroup.procs"), unix.W_OK) == nil
		}
		if d == unifiedMount {
			break
		}
	}
	return false
}
