package sandbox

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseLimits(t *testing.T) {
	for in, want := range map[string]int64{"512m": 512 << 20, "2g": 2 << 30, "1024": 1024, "64MiB": 64 << 20, "-1": -1} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "12q", "-5m"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
	if c, err := ParseCPUs("1.5"); err != nil || c != 1.5 {
		t.Errorf("ParseCPUs(1.5) = %v, %v", c, err)
	}
	for _, bad := range []string{"0", "-1", "NaN", "Inf", "x"} {
		if _, err := ParseCPUs(bad); err == nil {
			t.Errorf("ParseCPUs(%q) accepted", bad)
		}
	}
	for _, bad := range []Limits{{Memory: 1 << 20}, {MemorySwap: 1 << 30}, {Memory: 64 << 20, MemorySwap: 32 << 20},
		{PidsLimit: -2}, {CPUs: 0.001}, {Memory: 64 << 20, MemorySwap: -2}} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	for _, good := range []Limits{{Memory: 64 << 20, MemorySwap: -1, PidsLimit: 10, CPUs: 0.25}, {PidsLimit: -1}} {
		if err := good.validate(); err != nil {
			t.Error(err)
		}
	}
}

func TestResources(t *testing.T) {
	r := Limits{Memory: 64 << 20, PidsLimit: 7, CPUs: 1.5}.resources(true)
	if *r.Memory.Limit != 64<<20 || *r.Memory.Swap != 128<<20 || *r.Pids.Limit != 7 || *r.CPU.Quota != 150000 || *r.CPU.Period != 100000 {
		t.Errorf("resources: %+v %+v %+v", r.Memory, r.Pids, r.CPU)
	}
	if r := (Limits{Memory: 64 << 20}).resources(false); r.Memory.Swap != nil {
		t.Error("swap limit set without swap accounting")
	}
}

func TestCapabilitySet(t *testing.T) {
	got, _ := capabilitySet(nil, nil)
	if want := slices.Sorted(slices.Values(defaultCaps)); !slices.Equal(got, want) {
		t.Errorf("default %v", got)
	}
	got, _ = capabilitySet([]string{"net_admin", "CAP_SYS_PTRACE"}, []string{"chown", "MKNOD"})
	if !slices.Contains(got, "CAP_NET_ADMIN") || !slices.Contains(got, "CAP_SYS_PTRACE") || slices.Contains(got, "CAP_CHOWN") || slices.Contains(got, "CAP_MKNOD") {
		t.Errorf("add/drop: %v", got)
	}
	got, _ = capabilitySet([]string{"kill"}, []string{"ALL"})
	if !slices.Equal(got, []string{"CAP_KILL"}) {
		t.Errorf("drop ALL add KILL: %v", got)
	}
	got, _ = capabilitySet([]string{"all"}, []string{"sys_admin"})
	if slices.Contains(got, "CAP_SYS_ADMIN") || !slices.Contains(got, "CAP_SYS_MODULE") {
		t.Errorf("add ALL drop SYS_ADMIN: %v", got)
	}
	if _, err := capabilitySet([]string{"CAP_NOPE"}, nil); err == nil || !strings.Contains(err.Error(), "CAP_NOPE") {
		t.Errorf("unknown capability: %v", err)
	}
}

func TestParseSecurityOpt(t *testing.T) {
	var s Security
	for _, o := range []string{"seccomp=unconfined", "no-new-privileges=false"} {
		if err := s.ParseSecurityOpt(o); err != nil {
			t.Fatal(err)
		}
	}
	if s.Seccomp != SeccompUnconfined || !s.NewPrivileges {
		t.Errorf("%+v", s)
	}
	if err := s.ParseSecurityOpt("no-new-privileges"); err != nil || s.NewPrivileges {
		t.Errorf("no-new-privileges: %+v %v", s, err)
	}
	for _, bad := range []string{"apparmor=unconfined", "seccomp=", "no-new-privileges=maybe", "label:disable"} {
		if err := s.ParseSecurityOpt(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// planCgroup for a rootless caller with nothing delegated: limits are
// refused with the fix, or waived with ignore; no limits need no cgroup.
func TestPlanCgroupUndelegated(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		t.Skip("requires a cgroup v1 host: /sys/fs/cgroup/memory is missing")
	}
	co := CgroupOptions{Parent: "/bothy-never-delegated-" + strconv.Itoa(os.Getpid())}
	_, err := planCgroup(hostCgroups{}, co, "abc", true, Limits{PidsLimit: 5}, false)
	if !errors.Is(err, ErrLimits) || !strings.Contains(err.Error(), "mkdir -p") {
		t.Fatalf("want the fix in ErrLimits, got %v", err)
	}
	plan, err := planCgroup(hostCgroups{}, co, "abc", true, Limits{PidsLimit: 5}, true)
	if err != nil || plan.Path != "" || plan.Ignored == "" || !plan.Limits.IsZero() {
		t.Fatalf("ignored: %+v %v", plan, err)
	}
	plan, err = planCgroup(hostCgroups{}, co, "abc", true, Limits{}, false)
	if err != nil || plan.Path != "" || plan.Missing == "" || plan.Ignored != "" {
		t.Fatalf("no limits: %+v %v", plan, err)
	}
	// The default pids limit cannot be enforced there: the sandbox starts,
	// and the plan says why it has no limit.
	if !plan.Limits.IsZero() || !strings.Contains(plan.NotEnforced, "default pids limit (4096) is not enforced") ||
		!strings.Contains(plan.NotEnforced, "mkdir -p") {
		t.Errorf("default pids limit without a cgroup: limits %+v, not enforced %q", plan.Limits, plan.NotEnforced)
	}
	// -1, no pids limit, asks for nothing.
	plan, err = planCgroup(hostCgroups{}, co, "abc", true, Limits{PidsLimit: -1}, false)
	if err != nil || plan.Path != "" || plan.NotEnforced != "" || !plan.Limits.IsZero() {
		t.Errorf("--pids-limit 0: %+v %v", plan, err)
	}
	co.Parent = "relative/path"
	if _, err := planCgroup(hostCgroups{}, co, "abc", true, Limits{}, false); err == nil {
		t.Error("relative BOTHY_CGROUP_PARENT accepted")
	}
}

// TestPlanCgroupHosts: where the cgroup goes and which limits hold, on fake
// cgroup v1 and v2 hosts, root and rootless, delegated or not: what the
// host offers decides, and what it cannot enforce is refused naming why and
// the fix, or waived with ignore. No root, no real cgroup.
func TestPlanCgroupHosts(t *testing.T) {
	uid := strconv.Itoa(os.Getuid())
	userParent := "/bothy-" + uid
	all := []string{"memory", "pids", "cpu", "freezer", "devices"}
	lim := Limits{Memory: 64 << 20, PidsLimit: 10, CPUs: 0.5}
	for _, tc := range []struct {
		name     string
		host     *fakeCgroups
		co       CgroupOptions
		rootless bool
		l        Limits
		ignore   bool
		// want: the plan's path and limits, or the error's words.
		path    string
		systemd bool
		limits  Limits
		swap    bool
		notEnf  string
		ignored string
		err     []string
	}{
		{name: "v1 root", host: v1Host(true, all...), l: lim,
			path: "/bothy/ID", limits: lim, swap: true},
		{name: "v1 root, defaults", host: v1Host(false, all...),
			path: "/bothy/ID", limits: Limits{PidsLimit: DefaultPidsLimit}},
		{name: "v1 root, parent set", host: v1Host(false, all...), co: CgroupOptions{Parent: "/jobs/42"},
			path: "/jobs/42/ID", limits: Limits{PidsLimit: DefaultPidsLimit}},
		{name: "v1 root, parent relative", host: v1Host(false, all...), co: CgroupOptions{Parent: "jobs"},
			err: []string{"invalid BOTHY_CGROUP_PARENT", `"jobs"`}},
		{name: "v1 no pids controller, default", host: v1Host(false, "memory", "cpu"),
			path: "/bothy/ID", notEnf: "the pids cgroup controller is not mounted"},
		{name: "v1 no pids controller, asked", host: v1Host(false, "memory", "cpu"), l: Limits{PidsLimit: 10},
			err: []string{"cannot enforce resource limits", "--pids-limit needs the pids cgroup controller", "--ignore-limits"}},
		{name: "v1 no pids controller, ignored", host: v1Host(false, "memory", "cpu"), l: Limits{PidsLimit: 10, Memory: 64 << 20}, ignore: true,
			path: "/bothy/ID", limits: Limits{Memory: 64 << 20}, ignored: "--pids-limit needs the pids cgroup controller"},
		{name: "v1 swap limit without swap accounting", host: v1Host(false, all...), l: Limits{Memory: 64 << 20, MemorySwap: 128 << 20},
			err: []string{"--memory-swap needs swap accounting", "swapaccount=1"}},
		{name: "v1 rootless, delegated", host: v1Host(true, all...).delegate(userParent), rootless: true, l: lim,
			path: userParent + "/ID", limits: lim, swap: true},
		{name: "v1 rootless, not delegated", host: v1Host(false, all...), rootless: true, l: Limits{Memory: 64 << 20},
			err: []string{"no cgroup is delegated to uid " + uid, "/sys/fs/cgroup/{memory,pids,cpu,cpuacct,freezer}" + userParent, "mkdir -p", "chown"}},
		{name: "v1 rootless, not delegated, defaults", host: v1Host(false, all...), rootless: true,
			notEnf: "default pids limit (4096) is not enforced: no cgroup is delegated"},
		{name: "v2 root", host: v2Host(map[string]string{"": "cpu memory pids"}), l: lim,
			path: "/bothy/ID", limits: lim},
		{name: "v2 root, cpu not delegated", host: v2Host(map[string]string{"": "memory pids"}), l: lim,
			err: []string{"--cpus needs the cpu cgroup controller, which /bothy does not delegate"}},
		{name: "v2 root, systemd", host: v2Host(map[string]string{"system.slice": "memory pids"}), co: CgroupOptions{Manager: "systemd"},
			path: ":bothy:ID", systemd: true, limits: Limits{PidsLimit: DefaultPidsLimit}},
		{name: "v2 rootless, user session", host: v2Host(map[string]string{"user.slice/user-" + uid + ".slice/user@" + uid + ".service": "memory pids"}),
			co: CgroupOptions{UserSession: true}, rootless: true,
			path: ":bothy:ID", systemd: true, limits: Limits{PidsLimit: DefaultPidsLimit}},
		{name: "v2 rootless, no session", host: v2Host(map[string]string{"": "memory pids"}), rootless: true, l: Limits{Memory: 64 << 20},
			err: []string{"no cgroup v2 subtree is delegated to uid " + uid, "loginctl enable-linger", "BOTHY_CGROUP_PARENT"}},
		{name: "v2 rootless, no session, defaults", host: v2Host(map[string]string{"": "memory pids"}), rootless: true,
			notEnf: "no cgroup v2 subtree is delegated"},
		{name: "v2 rootless, parent not writable", host: v2Host(map[string]string{"jobs": "memory pids"}), co: CgroupOptions{Parent: "/jobs"}, rootless: true,
			l: Limits{PidsLimit: 10}, err: []string{"/sys/fs/cgroup/jobs is not writable by uid " + uid}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := planCgroup(tc.host, tc.co, "ID", tc.rootless, tc.l, tc.ignore)
			if tc.err != nil {
				if err == nil {
					t.Fatalf("planned %+v, want an error", plan)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not say %q: %v", w, err)
					}
				}
				if strings.Contains(err.Error(), "enforce") && !errors.Is(err, ErrLimits) {
					t.Errorf("not ErrLimits: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if plan.Path != tc.path || plan.Systemd != tc.systemd || plan.Limits != tc.limits || plan.SwapAccounted != tc.swap {
				t.Errorf("plan: path %q systemd %v limits %+v swap %v; want %q %v %+v %v",
					plan.Path, plan.Systemd, plan.Limits, plan.SwapAccounted, tc.path, tc.systemd, tc.limits, tc.swap)
			}
			if !strings.Contains(plan.NotEnforced, tc.notEnf) || (tc.notEnf == "") != (plan.NotEnforced == "") {
				t.Errorf("not enforced: %q, want %q", plan.NotEnforced, tc.notEnf)
			}
			if !strings.Contains(plan.Ignored, tc.ignored) || (tc.ignored == "") != (plan.Ignored == "") {
				t.Errorf("ignored: %q, want %q", plan.Ignored, tc.ignored)
			}
		})
	}
}

// planCgroup in a Slurm job (CgroupOptions.SlurmJob), rootless, even with a
// delegated parent: no cgroup of its own (the sandbox stays in the job's),
// limits refused with the reason, no default pids limit and no warning;
// BOTHY_CGROUP_PARENT set, or root, plan as outside a job.
func TestPlanCgroupInSlurmJob(t *testing.T) {
	co := CgroupOptions{SlurmJob: "42"}
	plan, err := planCgroup(hostCgroups{}, co, "abc", true, Limits{}, false)
	if err != nil || plan.Path != "" || !strings.Contains(plan.Missing, "Slurm job 42") || plan.NotEnforced != "" || !plan.Limits.IsZero() {
		t.Fatalf("in a job: %+v %v", plan, err)
	}
	_, err = planCgroup(hostCgroups{}, co, "abc", true, Limits{Memory: 1 << 30}, false)
	if !errors.Is(err, ErrLimits) || !strings.Contains(err.Error(), "stays in the job's cgroup") {
		t.Fatalf("a limit in a job: want ErrLimits saying why, got %v", err)
	}
	if plan, err := planCgroup(hostCgroups{}, co, "abc", false, Limits{}, false); err != nil || plan.Path == "" {
		t.Errorf("root in a job: %+v %v; want a cgroup of its own", plan, err)
	}
	co.Parent = "/bothy-never-delegated-" + strconv.Itoa(os.Getpid())
	if plan, err := planCgroup(hostCgroups{}, co, "abc", true, Limits{}, false); err != nil || strings.Contains(plan.Missing, "Slurm") {
		t.Errorf("a job with BOTHY_CGROUP_PARENT: %+v %v; want the parent's plan", plan, err)
	}
}
