package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/disk"
	"github.com/bothy-sandbox/bothy/network"
)

// Paths inside every sandbox.
const (
	// ExecutorPath is where the executor binary is bind-mounted, read-only.
	// Nothing else of bothy's is mounted into a sandbox but /etc/hosts,
	// /etc/hostname, /etc/resolv.conf, with a main process MainDir, and,
	// on an attached network, the network's description
	// (api.NetworkInfoPath, read-only), and with CreateOptions.CACerts the
	// CA file (CACertsPath, read-only): the executor's socket is inherited
	// (see listenSocket), and, in a sandbox that enables a plugin,
	// bothy-plugin (PluginServerPath, read-only).
	ExecutorPath = "/.bothy/bin/bothy-executor"
	// PluginServerPath is where bothy-plugin is bind-mounted, read-only:
	// the executor's default --plugin-server (plugins.DefaultServer).
	PluginServerPath = "/.bothy/bin/bothy-plugin"
)

// Network modes, as package network names them.
const (
	NetworkNone   = string(network.None)
	NetworkHost   = string(network.Host)
	NetworkBridge = string(network.Bridge)
)

// defaultCaps is the capability set of Docker and Podman's default profile.
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// specInput is what a bundle is generated from.
type specInput struct {
	ID, Hostname string
	Rootfs       string
	Rootless     bool
	Network      *network.Plan
	Env          []string // image env, then the user's
	Workdir      string
	Executor     string // host path of the executor binary
	PluginServer string // host path of bothy-plugin, mounted at PluginServerPath; "": not mounted
	EtcDir       string // host directory holding hosts, hostname, resolv.conf
	CACerts      string // host file mounted read-only at CACertsPath; "": none
	MainDir      string // host directory mounted at MainDir, "" without a main process
	Args         []string
	Mounts       []specs.Mount // volumes, mounted after bothy's own
	Cgroup       cgroupPlan
	Security     Security
	// DiskQuota: the upper directory is under a project quota, which the
	// sandbox must not move its files out of (see DiskLimit).
	DiskQuota bool
	// Host is what the spec depends on of the host.
	Host hostFacts
}

// hostFacts are what a sandbox's spec depends on of the host bothy runs on,
// looked up by the caller: the same input renders the same spec anywhere.
type hostFacts struct {
	// CgroupNS: the host is cgroup v2 only, and runc's spec gives the
	// sandbox a cgroup namespace.
	CgroupNS bool
	// LowerOOMScore: bothy may lower OOM scores (CAP_SYS_RESOURCE), and
	// the executor gets -999.
	LowerOOMScore bool
}

// buildSpec returns the runtime spec of a sandbox: runc's defaults (masked
// and read-only paths, the default capability set, no_new_privs), adjusted
// for rootless operation and the executor's mounts.
func buildSpec(in specInput) (*specs.Spec, error) {
	spec := runcSpec(in.Rootless, in.Host.CgroupNS)
	spec.Root = &specs.Root{Path: in.Rootfs}
	spec.Hostname = in.Hostname
	spec.Process.Terminal = false
	spec.Process.Args = in.Args
	spec.Process.Env = mergeEnv(append([]string{defaultPath, "HOSTNAME=" + in.Hostname, "HOME=/root"}, in.Env...))
	spec.Process.Cwd = in.Workdir
	if spec.Process.Cwd == "" {
		spec.Process.Cwd = "/"
	}
	if !filepath.IsAbs(spec.Process.Cwd) {
		return nil, fmt.Errorf("working directory %q must be absolute", in.Workdir)
	}
	// The executor answers; it must not die first when memory runs out.
	// Lowering the score needs CAP_SYS_RESOURCE, which rootless callers (and
	// root on some hosts) lack.
	if in.Host.LowerOOMScore {
		adj := -999
		spec.Process.OOMScoreAdj = &adj
	}

	if in.Rootless {
		// The launcher is already in a user namespace (the caller mapped to
		// root) where it mounted the overlay; the sandbox shares it.
		spec.Linux.Namespaces = slices.DeleteFunc(spec.Linux.Namespaces, func(ns specs.LinuxNamespace) bool {
			return ns.Type == specs.UserNamespace
		})
		spec.Linux.UIDMappings, spec.Linux.GIDMappings = nil, nil
	}
	in.Network.Apply(spec)
	// Docker's default capability set (root in the sandbox can chown,
	// install packages and drop privileges, but not mount, load modules or
	// trace the host), no_new_privs, seccomp; cgroup and limits.
	if err := applySecurity(spec, in.Security); err != nil {
		return nil, err
	}
	if in.DiskQuota && spec.Linux.Seccomp != nil {
		disk.DenyProjectChanges(spec.Linux.Seccomp)
	}
	applyLimits(spec, in.Cgroup)
	applyDevices(spec, in.Security.Devices)

	spec.Mounts = append(spec.Mounts,
		specs.Mount{Destination: ExecutorPath, Type: "bind", Source: in.Executor, Options: []string{"bind", "ro", "nosuid", "nodev"}},
		specs.Mount{Destination: "/etc/hosts", Type: "bind", Source: filepath.Join(in.EtcDir, "hosts"), Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
		specs.Mount{Destination: "/etc/hostname", Type: "bind", Source: filepath.Join(in.EtcDir, "hostname"), Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
		specs.Mount{Destination: "/etc/resolv.conf", Type: "bind", Source: filepath.Join(in.EtcDir, "resolv.conf"), Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
	)
	if in.PluginServer != "" {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: PluginServerPath, Type: "bind", Source: in.PluginServer, Options: []string{"bind", "ro", "nosuid", "nodev"}})
	}
	if in.MainDir != "" {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: MainDir, Type: "bind", Source: in.MainDir, Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}})
	}
	if in.CACerts != "" {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: CACertsPath, Type: "bind", Source: in.CACerts, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
	}
	if in.Network.Attach != nil {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: api.NetworkInfoPath, Type: "bind", Source: filepath.Join(in.EtcDir, networkInfoFile), Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
	}
	spec.Mounts = append(spec.Mounts, in.Mounts...)
	return spec, nil
}

// runcSpec is the spec `runc spec` writes (`runc spec --rootless` when
// rootless): libcontainer/specconv's Example, and ToRootless for the caller's
// ids (cgroupNS: on a cgroup v2 only host, as specconv adds it). It is
// written out here so that the CLI does not link libcontainer; TestRuncSpec
// checks that the two still agree.
func runcSpec(rootless, cgroupNS bool) *specs.Spec {
	caps := []string{"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"}
	mount := func(dest, typ, src string, opts ...string) specs.Mount {
		return specs.Mount{Destination: dest, Type: typ, Source: src, Options: opts}
	}
	spec := &specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: "rootfs", Readonly: true},
		Process: &specs.Process{
			Terminal:        true,
			Args:            []string{"sh"},
			Env:             []string{defaultPath, "TERM=xterm"},
			Cwd:             "/",
			NoNewPrivileges: true,
			Capabilities: &specs.LinuxCapabilities{
				Bounding: slices.Clone(caps), Permitted: slices.Clone(caps), Effective: slices.Clone(caps),
			},
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
		},
		Hostname: "runc",
		Mounts: []specs.Mount{
			mount("/proc", "proc", "proc"),
			mount("/dev", "tmpfs", "tmpfs", "nosuid", "strictatime", "mode=755", "size=65536k"),
			mount("/dev/pts", "devpts", "devpts", "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"),
			mount("/dev/shm", "tmpfs", "shm", "nosuid", "noexec", "nodev", "mode=1777", "size=65536k"),
			mount("/dev/mqueue", "mqueue", "mqueue", "nosuid", "noexec", "nodev"),
			mount("/sys", "sysfs", "sysfs", "nosuid", "noexec", "nodev", "ro"),
			mount("/sys/fs/cgroup", "cgroup", "cgroup", "nosuid", "noexec", "nodev", "relatime", "ro"),
		},
		Linux: &specs.Linux{
			MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
			Resources:     &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace}},
		},
	}
	if cgroupNS {
		spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	}
	if !rootless {
		return spec
	}
	// ToRootless: no network namespace, a user namespace mapping the caller
	// to root, /sys bound from the host, no uid=/gid= mount options, no
	// cgroup settings.
	spec.Linux.Namespaces = append(slices.DeleteFunc(spec.Linux.Namespaces, func(ns specs.LinuxNamespace) bool {
		return ns.Type == specs.NetworkNamespace
	}), specs.LinuxNamespace{Type: specs.UserNamespace})
	spec.Linux.UIDMappings = []specs.LinuxIDMapping{{HostID: uint32(os.Geteuid()), Size: 1}}
	spec.Linux.GIDMappings = []specs.LinuxIDMapping{{HostID: uint32(os.Getegid()), Size: 1}}
	for i, m := range spec.Mounts {
		if m.Destination == "/sys" {
			spec.Mounts[i] = mount("/sys", "none", "/sys", "rbind", "nosuid", "noexec", "nodev", "ro")
			continue
		}
		spec.Mounts[i].Options = slices.DeleteFunc(m.Options, func(o string) bool {
			return strings.HasPrefix(o, "gid=") || strings.HasPrefix(o, "uid=")
		})
	}
	spec.Linux.Resources = nil
	return spec
}

// mergeEnv keeps the last value of each variable, in first-seen order.
func mergeEnv(env []string) []string {
	index := map[string]int{}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}
