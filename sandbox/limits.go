package sandbox

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/docker/go-units"
	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Limits are a sandbox's resource limits, enforced by its cgroup. Zero
// means no limit, but for PidsLimit.
type Limits struct {
	// Memory is the memory limit in bytes (RAM and page cache).
	Memory int64 `json:"memory,omitempty"`
	// MemorySwap is the limit of memory plus swap in bytes, as Docker's
	// --memory-swap: -1 allows unlimited swap; 0 leaves swap unlimited
	// too unless the kernel accounts swap, when Docker's default (twice
	// Memory) applies. It needs Memory.
	MemorySwap int64 `json:"memory_swap,omitempty"`
	// PidsLimit caps the number of processes and threads. Asked for in
	// CreateOptions, 0 means DefaultPidsLimit, applied wherever the pids
	// cgroup controller is available to the caller (and skipped with a
	// reason where it is not, see Sandbox.LimitsNotEnforced), and -1 means
	// no limit. In a sandbox's record it is the limit in force, 0 for none.
	PidsLimit int64 `json:"pids_limit,omitempty"`
	// CPUs is the CPU bandwidth in cores (1.5: one and a half cores).
	CPUs float64 `json:"cpus,omitempty"`
	// Disk caps, in bytes, what the sandbox writes to its root filesystem
	// and overlay volumes (see DiskLimit); it needs root.
	Disk int64 `json:"disk,omitempty"`
}

// DefaultPidsLimit is the pids limit of a sandbox that asks for none
// (podman's default is 2048): a fork bomb stops there instead of
// exhausting the host's pid space. The executor's own threads count
// against it.
const DefaultPidsLimit = 4096

// IsZero reports whether no limit is set.
func (l Limits) IsZero() bool { return l == Limits{} }

// needsCgroup reports whether a limit was asked for that only a cgroup of
// the sandbox's own can enforce (defaults aside).
func (l Limits) needsCgroup() bool { return l.Memory > 0 || l.PidsLimit > 0 || l.CPUs > 0 }

// ParseBytes reads a size as Docker's --memory does: a number with an
// optional b, k, m or g suffix (binary units); "-1" is returned as -1.
func ParseBytes(s string) (int64, error) {
	if strings.TrimSpace(s) == "-1" {
		return -1, nil
	}
	n, err := units.RAMInBytes(s)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: use a number with an optional b, k, m or g suffix", s)
	}
	return n, nil
}

// ParseCPUs reads --cpus: a positive decimal number of cores.
func ParseCPUs(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("invalid --cpus %q: give a positive number of cores, e.g. 0.5 or 2", s)
	}
	return f, nil
}

// minMemory is the smallest memory limit a sandbox starts with: the
// executor alone needs a few megabytes (Docker's floor is 6 MiB).
const minMemory = 6 << 20

func (l Limits) validate() error {
	switch {
	case l.Memory < 0:
		return fmt.Errorf("invalid --memory %d: must be positive", l.Memory)
	case l.Memory > 0 && l.Memory < minMemory:
		return fmt.Errorf("invalid --memory %s: the minimum is 6MiB", units.BytesSize(float64(l.Memory)))
	case l.MemorySwap != 0 && l.Memory == 0:
		return errors.New("--memory-swap needs --memory: it limits memory plus swap")
	case l.MemorySwap > 0 && l.MemorySwap < l.Memory:
		return fmt.Errorf("invalid --memory-swap %s: it is memory plus swap, so it must be at least --memory (%s)",
			units.BytesSize(float64(l.MemorySwap)), units.BytesSize(float64(l.Memory)))
	case l.MemorySwap < -1:
		return fmt.Errorf("invalid --memory-swap %d: give a size, or -1 for unlimited swap", l.MemorySwap)
	case l.PidsLimit < -1:
		return fmt.Errorf("invalid --pids-limit %d: give a positive number, or 0 for no limit", l.PidsLimit)
	case l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0):
		return fmt.Errorf("invalid --cpus %v: must be a positive number of cores", l.CPUs)
	case l.CPUs > 0 && l.CPUs*cpuPeriod < 1000:
		return fmt.Errorf("invalid --cpus %v: the minimum is 0.01", l.CPUs)
	case l.Disk < 0:
		return fmt.Errorf("invalid --disk %d: must be positive", l.Disk)
	case l.Disk > 0 && l.Disk < minDisk:
		return fmt.Errorf("invalid --disk %s: the minimum is %s", units.BytesSize(float64(l.Disk)), units.BytesSize(minDisk))
	}
	return nil
}

const cpuPeriod = 100000 // µs, the kernel's default CFS period

// resources returns the runtime-spec resources for the limits.
func (l Limits) resources(swapAccounted bool) *specs.LinuxResources {
	r := &specs.LinuxResources{}
	if l.Memory > 0 {
		mem := l.Memory
		r.Memory = &specs.LinuxMemory{Limit: &mem}
		swap := l.MemorySwap
		if swap == 0 && swapAccounted {
			swap = 2 * l.Memory // Docker's default: as much swap as memory
		}
		if swap != 0 && swapAccounted {
			r.Memory.Swap = &swap
		}
	}
	if l.PidsLimit > 0 {
		pids := l.PidsLimit
		r.Pids = &specs.LinuxPids{Limit: &pids}
	}
	if l.CPUs > 0 {
		period := uint64(cpuPeriod)
		quota := int64(l.CPUs * cpuPeriod)
		r.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	return r
}

// ErrLimits: a limit was asked for that this host cannot enforce for the
// caller. The message says why and what to change.
var ErrLimits = errors.New("cannot enforce resource limits")

// CgroupOptions say where sandboxes' cgroups go (docs/operator.md, "Limits").
// The CLI takes them from $BOTHY_CGROUP_PARENT, $BOTHY_CGROUP_MANAGER and
// the caller's session.
type CgroupOptions struct {
	// Parent is the cgroup (relative to each hierarchy's root) under which
	// sandboxes get their cgroups. Default: /bothy for root, /bothy-UID for
	// other users on cgroup v1; on cgroup v2 other users get a systemd
	// scope unless it is set (see planCgroupV2).
	Parent string
	// Manager chooses the cgroup manager: "cgroupfs" (default) writes the
	// cgroup filesystem directly; "systemd" asks systemd for a scope
	// (cgroup v2 hosts whose users are not delegated a subtree otherwise).
	Manager string
	// UserSession: the caller has a systemd user instance to ask for a
	// scope (cgroup v2, rootless, neither Parent nor Manager set). The CLI
	// sets it when $DBUS_SESSION_BUS_ADDRESS is set or $XDG_RUNTIME_DIR/bus
	// is a socket.
	UserSession bool
	// SlurmJob is the Slurm job the caller runs in (SLURM_JOB_ID), if any.
	// Without a Parent, an unprivileged caller's sandbox then gets no
	// cgroup of its own: its processes stay in the job step's cgroups,
	// where Slurm's cgroup plugins (proctrack/cgroup) find and end them
	// with the job (scancel, time limit), instead of in a delegated
	// subtree outside the job. Limits that need a cgroup are refused.
	SlurmJob string
}

// parentName names Parent in messages, as the CLI's environment sets it.
const parentName = "BOTHY_CGROUP_PARENT"

// cgroupPlan is where a sandbox's cgroup goes, decided before launch.
type cgroupPlan struct {
	// Path is the runtime spec's cgroupsPath; empty: no cgroup of its own
	// (rootless without a delegated subtree and no limits asked for).
	Path    string
	Systemd bool
	// Version is 1 or 2.
	Version int
	// SwapAccounted: the kernel accounts swap (decides --memory-swap's
	// default); only looked up when a memory limit is asked for.
	SwapAccounted bool
	// Missing says why the sandbox has no cgroup, when Path is empty.
	Missing string
	// Limits are the limits to enforce: those asked for, minus the ones
	// --ignore-limits waived.
	Limits Limits
	// Ignored names the limits waived and why.
	Ignored string
	// NotEnforced names the defaults (DefaultPidsLimit) that could not be
	// applied, and why: they never refuse a sandbox.
	NotEnforced string
}

// hierarchy is one mounted cgroup hierarchy.
type hierarchy struct {
	Mountpoint  string
	Controllers []string // "memory", "cpu", "name=systemd"; empty for cgroup2
	V2          bool
}

// cgroupHierarchies lists the mounted cgroup hierarchies the kernel gives
// this process: every v1 hierarchy, and the v2 one.
func cgroupHierarchies() ([]hierarchy, error) {
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.FSType != "cgroup" && m.FSType != "cgroup2", false
	})
	if err != nil {
		return nil, fmt.Errorf("list cgroup mounts: %w", err)
	}
	seen := map[string]bool{}
	var out []hierarchy
	for _, m := range mounts {
		if seen[m.Mountpoint] || !strings.HasPrefix(m.Mountpoint, "/sys/fs/cgroup") {
			continue
		}
		seen[m.Mountpoint] = true
		h := hierarchy{Mountpoint: m.Mountpoint, V2: m.FSType == "cgroup2"}
		if !h.V2 {
			for _, opt := range strings.Split(m.VFSOptions, ",") {
				if knownController(opt) || strings.HasPrefix(opt, "name=") {
					h.Controllers = append(h.Controllers, opt)
				}
			}
		}
		out = append(out, h)
	}
	return out, nil
}

func knownController(s string) bool {
	switch s {
	case "cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "blkio", "perf_event",
		"net_prio", "hugetlb", "pids", "rdma", "misc":
		return true
	}
	return false
}

// v1Mount returns the mountpoint of a v1 controller, or "".
func v1Mount(hs []hierarchy, controller string) string {
	for _, h := range hs {
		for _, c := range h.Controllers {
			if c == controller {
				return h.Mountpoint
			}
		}
	}
	return ""
}

// planCgroup decides the sandbox's cgroup and checks that every limit asked
// for can be enforced there. ignore runs without the limits that cannot be
// (the returned plan's Missing then says which and why).
//
// A PidsLimit of 0 asks for DefaultPidsLimit: applied where the plan's
// cgroup has the pids controller, and otherwise skipped with the reason in
// the plan's NotEnforced, never refused, so that a rootless caller without a
// delegated cgroup can still start sandboxes; -1 asks for no pids limit.
func planCgroup(host cgroupLayout, co CgroupOptions, id string, rootless bool, l Limits, ignore bool) (cgroupPlan, error) {
	defaultPids := l.PidsLimit == 0
	l.PidsLimit = max(l.PidsLimit, 0)
	if co.SlurmJob != "" && co.Parent == "" && rootless {
		return planInJob(host, co.SlurmJob, l, ignore)
	}
	if host.Unified() {
		return planCgroupV2(host, co, id, rootless, l, ignore, defaultPids)
	}
	hs, err := host.Hierarchies()
	if err != nil {
		return cgroupPlan{}, err
	}
	plan := cgroupPlan{Version: 1}
	parent := v1CgroupParent(co.Parent, rootless)
	if !filepath.IsAbs(parent) || filepath.Clean(parent) != parent || parent == "/" {
		return cgroupPlan{}, fmt.Errorf("invalid %s %q: give a clean absolute cgroup path such as /bothy-%d", parentName, parent, os.Getuid())
	}

	// What the limits need from the kernel. Each limit that cannot be
	// enforced is named, and dropped only when the caller said so.
	problems := l.checkControllers(func(c string) bool { return v1Mount(hs, c) != "" }, "which is not mounted")
	if l.Memory > 0 {
		plan.SwapAccounted = swapAccounted(host, hs)
	}
	if l.MemorySwap > 0 && !plan.SwapAccounted {
		problems = append(problems, "--memory-swap needs swap accounting (memory.memsw.limit_in_bytes is missing): boot the kernel with swapaccount=1, or drop --memory-swap")
		l.MemorySwap = 0
	}
	plan.Path = parent + "/" + id

	// Rootless: the hierarchies of the controllers bothy uses need a
	// directory delegated to the caller; the launcher joins no others.
	if rootless {
		var missing []string
		for _, h := range hs {
			if !slices.ContainsFunc(h.Controllers, isRootlessController) {
				continue
			}
			dir := h.Mountpoint + parent
			if host.Access(dir, unix.W_OK|unix.X_OK) != nil {
				missing = append(missing, dir)
			}
		}
		if len(missing) > 0 {
			what := strings.Join(missing, ", ")
			if len(missing) > 1 {
				what = "/sys/fs/cgroup/{" + strings.Join(ipc.RootlessControllers, ",") + "}" + parent
			}
			why := fmt.Sprintf("no cgroup is delegated to uid %d (%s missing or not writable); as root, run %s",
				os.Getuid(), what, delegateCommand(parent))
			if l.needsCgroup() {
				problems = append(problems, why)
			}
			plan.Path, plan.Missing, l = "", why, Limits{}
		}
	}
	if defaultPids {
		plan.defaultPids(&l, v1Mount(hs, "pids") != "", "the pids cgroup controller is not mounted")
	}
	return plan.finish(l, problems, ignore)
}

// planInJob is an unprivileged caller's plan in Slurm job job: no cgroup
// of its own, so that the sandbox stays in the job's (CgroupOptions.SlurmJob).
func planInJob(host cgroupLayout, job string, l Limits, ignore bool) (cgroupPlan, error) {
	plan := cgroupPlan{Version: 1}
	if host.Unified() {
		plan.Version = 2
	}
	plan.Missing = fmt.Sprintf("in Slurm job %s a sandbox stays in the job's cgroup, so that it ends with the job (set %s to a delegated cgroup to give it one of its own, which the job's end does not reach)", job, parentName)
	var problems []string
	if l.needsCgroup() {
		problems = append(problems, plan.Missing)
	}
	// The default pids limit goes unsaid: the job's own limits apply.
	return plan.finish(Limits{}, problems, ignore)
}

// defaultPids sets DefaultPidsLimit in l when the plan has a cgroup and it
// has the pids controller (has), and otherwise says in NotEnforced why not
// (why: why it has not).
func (p *cgroupPlan) defaultPids(l *Limits, has bool, why string) {
	switch {
	case p.Path == "":
		why = p.Missing
	case has:
		l.PidsLimit = DefaultPidsLimit
		return
	}
	p.NotEnforced = fmt.Sprintf("the default pids limit (%d) is not enforced: %s", DefaultPidsLimit, why)
}

// v1CgroupParent is the cgroup (relative to each hierarchy's root) that a
// cgroup v1 sandbox's cgroup goes under: parent (CgroupOptions.Parent), else
// the default.
func v1CgroupParent(parent string, rootless bool) string {
	if parent != "" {
		return parent
	}
	if rootless {
		return "/bothy-" + strconv.Itoa(os.Getuid())
	}
	return "/bothy"
}

// checkControllers names each limit whose cgroup controller has reports
// missing (why says how), and drops it from l, so that --ignore-limits can
// run without it.
func (l *Limits) checkControllers(has func(controller string) bool, why string) []string {
	var problems []string
	for _, c := range []struct {
		set              bool
		controller, flag string
		drop             func()
	}{
		{l.Memory > 0, "memory", "--memory", func() { l.Memory, l.MemorySwap = 0, 0 }},
		{l.PidsLimit > 0, "pids", "--pids-limit", func() { l.PidsLimit = 0 }},
		{l.CPUs > 0, "cpu", "--cpus", func() { l.CPUs = 0 }},
	} {
		if c.set && !has(c.controller) {
			problems = append(problems, fmt.Sprintf("%s needs the %s cgroup controller, %s", c.flag, c.controller, why))
			c.drop()
		}
	}
	return problems
}

// finish refuses the plan when a limit cannot be enforced, unless ignore.
func (p cgroupPlan) finish(l Limits, problems []string, ignore bool) (cgroupPlan, error) {
	if len(problems) > 0 {
		if !ignore {
			return cgroupPlan{}, fmt.Errorf("%w: %s (or run with --ignore-limits to start without them)", ErrLimits, strings.Join(problems, "; "))
		}
		p.Ignored = strings.Join(problems, "; ")
	}
	p.Limits = l
	return p, nil
}

func isRootlessController(c string) bool { return slices.Contains(ipc.RootlessControllers, c) }

// delegateCommand is the shell an operator runs (as root) to give the
// calling user a cgroup v1 subtree at parent in the hierarchies it needs.
func delegateCommand(parent string) string {
	return fmt.Sprintf("`for c in %s; do mkdir -p /sys/fs/cgroup/$c%s && chown -R %d:%d /sys/fs/cgroup/$c%s; done` (scripts/delegate-cgroups.sh; see docs/operator.md)",
		strings.Join(ipc.RootlessControllers, " "), parent, os.Getuid(), os.Getgid(), parent)
}

// swapAccounted reports whether the kernel accounts swap in cgroups (hs:
// the mounted hierarchies).
func swapAccounted(host cgroupLayout, hs []hierarchy) bool {
	if m := v1Mount(hs, "memory"); m != "" {
		return host.Exists(filepath.Join(m, "memory.memsw.limit_in_bytes"))
	}
	for _, h := range hs {
		if h.V2 {
			// The root cgroup has no memory.swap.max; look at ours.
			return host.Exists(filepath.Join(h.Mountpoint, "memory.swap.max")) ||
				host.Exists(filepath.Join(h.Mountpoint, "init.scope", "memory.swap.max"))
		}
	}
	return false
}

// applyLimits writes the plan's cgroup and limits into the spec.
func applyLimits(spec *specs.Spec, plan cgroupPlan) {
	spec.Linux.CgroupsPath = plan.Path
	if plan.Path == "" {
		// No cgroup of its own: any limit was waived with --ignore-limits.
		return
	}
	r := plan.Limits.resources(plan.SwapAccounted)
	if spec.Linux.Resources == nil {
		spec.Linux.Resources = r
		return
	}
	spec.Linux.Resources.Memory, spec.Linux.Resources.Pids, spec.Linux.Resources.CPU = r.Memory, r.Pids, r.CPU
}
