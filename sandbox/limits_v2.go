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
//   - root: /bothy/ID (or under co.Parent), cgroupfs driver;
//   - co.Manager "systemd": a transient scope bothy-ID.scope that
//     systemd creates and moves the sandbox into (the user's instance when
//     rootless);
//   - rootless with co.Parent: under it, cgroupfs driver. v2 lets
//     a process move only between cgroups whose common ancestor's
//     cgroup.procs it may write, so the parent must be a subtree delegated
//     to the user that already holds the caller (a batch job's cgroup, or
//     user@UID.service for processes of the user's systemd instance);
//   - rootless otherwise: a systemd scope when the user has a systemd
//     instance (co.UserSession), the way rootless Podman does it.
//
// Each controller a limit needs must be listed in the parent's
// cgroup.controllers (cgroupfs driver), else the sandbox is refused (unless
// ignore); with systemd, libcontainer refuses what systemd cannot delegate.
//
// defaultPids: no pids limit was asked for, and DefaultPidsLimit applies
// where the pids controller is available (see planCgroup).
func planCgroupV2(host cgroupLayout, co CgroupOptions, id string, rootless bool, l Limits, ignore bool, defaultPids bool) (cgroupPlan, error) {
	plan := cgroupPlan{Version: 2}
	if l.Memory > 0 {
		if hs, err := host.Hierarchies(); err == nil {
			plan.SwapAccounted = swapAccounted(host, hs)
		}
	}
	parent, manager := co.Parent, co.Manager
	if manager == "" && rootless && parent == "" && co.UserSession {
		manager = "systemd"
	}
	if manager == "systemd" {
		// libcontainer's "slice:prefix:name" form; the empty slice is
		// system.slice for root and user.slice for the user's instance.
		plan.Systemd, plan.Path = true, ":bothy:"+id
		if defaultPids {
			slice := unifiedMount + "/system.slice"
			if rootless {
				uid := os.Getuid()
				slice = fmt.Sprintf("%s/user.slice/user-%d.slice/user@%d.service", unifiedMount, uid, uid)
			}
			plan.defaultPids(&l, slices.Contains(availableV2(host, slice), "pids"), "systemd does not delegate the pids controller to "+slice)
		}
		return plan.finish(l, nil, ignore)
	}
	if parent == "" {
		parent = "/bothy"
		if rootless {
			why := fmt.Sprintf("no cgroup v2 subtree is delegated to uid %d: run bothy in a systemd user session (loginctl enable-linger) so that it can ask systemd for a scope, or set %s to a delegated cgroup that holds your processes (see docs/operator.md)",
				os.Getuid(), parentName)
			var problems []string
			if l.needsCgroup() {
				problems = append(problems, why)
			}
			plan.Missing, l = why, Limits{}
			if defaultPids {
				plan.defaultPids(&l, false, why)
			}
			return plan.finish(l, problems, ignore)
		}
	}
	if !filepath.IsAbs(parent) || filepath.Clean(parent) != parent || parent == "/" {
		return cgroupPlan{}, fmt.Errorf("invalid %s %q: give a clean absolute cgroup path", parentName, parent)
	}
	// The controllers the parent can hand down: those of the nearest
	// existing ancestor (libcontainer creates the rest of the path).
	avail := availableV2(host, unifiedMount+parent)
	problems := l.checkControllers(func(c string) bool { return slices.Contains(avail, c) }, "which "+parent+" does not delegate")
	plan.Path = parent + "/" + id
	if rootless && !writableAncestor(host, unifiedMount+parent) {
		why := fmt.Sprintf("%s%s is not writable by uid %d: point %s at a cgroup delegated to you that holds your processes, or unset it and run bothy in a systemd user session (see docs/operator.md)",
			unifiedMount, parent, os.Getuid(), parentName)
		if l.needsCgroup() {
			problems = append(problems, why)
		}
		plan.Path, plan.Missing, l = "", why, Limits{}
	}
	if defaultPids {
		plan.defaultPids(&l, slices.Contains(avail, "pids"), parent+" does not delegate the pids controller")
	}
	return plan.finish(l, problems, ignore)
}

// availableV2 returns cgroup.controllers of dir or its nearest existing
// ancestor.
func availableV2(host cgroupLayout, dir string) []string {
	for d := dir; strings.HasPrefix(d, unifiedMount); d = filepath.Dir(d) {
		if data, err := host.ReadFile(filepath.Join(d, "cgroup.controllers")); err == nil {
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
func writableAncestor(host cgroupLayout, dir string) bool {
	for d := dir; strings.HasPrefix(d, unifiedMount); d = filepath.Dir(d) {
		if host.Exists(d) {
			return host.Access(d, unix.W_OK|unix.X_OK) == nil &&
				host.Access(filepath.Join(d, "cgroup.procs"), unix.W_OK) == nil
		}
		if d == unifiedMount {
			break
		}
	}
	return false
}
