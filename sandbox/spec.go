package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/runc/libcontainer/specconv"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/bothy-sandbox/bothy/netns"
)

// Paths inside every sandbox.
const (
	// ExecutorPath is where the executor binary is bind-mounted, read-only.
	ExecutorPath = "/.bothy/bin/bothy-executor"
	// SocketDir is where the directory holding the API socket is mounted.
	SocketDir = "/.bothy/run"
)

// Network modes, as netns names them.
const (
	NetworkNone = string(netns.None)
	NetworkHost = string(netns.Host)
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
	Network      netns.Mode
	Env          []string // image env, then the user's
	Workdir      string
	Executor     string // host path of the executor binary
	SocketDir    string // host directory for the socket
	EtcDir       string // host directory holding hosts, hostname, resolv.conf
	Args         []string
	Mounts       []specs.Mount // volumes, mounted after bothy's own
	Cgroup       cgroupPlan
	Security     Security
}

// buildSpec returns the runtime spec of a sandbox: runc's defaults (masked
// and read-only paths, the default capability set, no_new_privs), adjusted
// for rootless operation and the executor's mounts.
func buildSpec(in specInput) (*specs.Spec, error) {
	spec := specconv.Example()
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
	if hasCapSysResource() {
		adj := -999
		spec.Process.OOMScoreAdj = &adj
	}

	if in.Rootless {
		specconv.ToRootless(spec)
		// The launcher is already in a user namespace (the caller mapped to
		// root) where it mounted the overlay; the sandbox shares it.
		spec.Linux.Namespaces = slices.DeleteFunc(spec.Linux.Namespaces, func(ns specs.LinuxNamespace) bool {
			return ns.Type == specs.UserNamespace
		})
		spec.Linux.UIDMappings, spec.Linux.GIDMappings = nil, nil
	}
	netns.Apply(spec, in.Network, in.Rootless)
	// Docker's default capability set (root in the sandbox can chown,
	// install packages and drop privileges, but not mount, load modules or
	// trace the host), no_new_privs, seccomp; cgroup and limits.
	if err := applySecurity(spec, in.Security); err != nil {
		return nil, err
	}
	applyLimits(spec, in.Cgroup)

	spec.Mounts = append(spec.Mounts,
		specs.Mount{Destination: ExecutorPath, Type: "bind", Source: in.Executor, Options: []string{"bind", "ro", "nosuid", "nodev"}},
		specs.Mount{Destination: SocketDir, Type: "bind", Source: in.SocketDir, Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
		specs.Mount{Destination: "/etc/hosts", Type: "bind", Source: filepath.Join(in.EtcDir, "hosts"), Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
		specs.Mount{Destination: "/etc/hostname", Type: "bind", Source: filepath.Join(in.EtcDir, "hostname"), Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
		specs.Mount{Destination: "/etc/resolv.conf", Type: "bind", Source: filepath.Join(in.EtcDir, "resolv.conf"), Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
	)
	spec.Mounts = append(spec.Mounts, in.Mounts...)
	return spec, nil
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
