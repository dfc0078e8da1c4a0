package sandbox

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/moby/profiles/seccomp"
	"github.com/moby/sys/capability"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// Security adjusts a sandbox's hardening baseline. The zero value is the
// default: Docker's capability set and seccomp profile, no_new_privs, a
// writable root filesystem and a 64 MiB /dev/shm.
type Security struct {
	// CapAdd and CapDrop change the capability set, as Docker's --cap-add
	// and --cap-drop: names with or without CAP_, any case, or ALL.
	CapAdd  []string `json:"cap_add,omitempty"`
	CapDrop []string `json:"cap_drop,omitempty"`
	// Seccomp is "" for the default profile, "unconfined" for none, or the
	// path of a profile in Docker's JSON format.
	Seccomp string `json:"seccomp,omitempty"`
	// NewPrivileges lets setuid binaries and file capabilities raise
	// privileges (--security-opt no-new-privileges=false).
	NewPrivileges bool `json:"new_privileges,omitempty"`
	// ReadOnly mounts the root filesystem read-only (--read-only), as
	// Docker does: nothing but volumes, /dev/shm and the executor's own
	// mounts stays writable.
	ReadOnly bool `json:"read_only,omitempty"`
	// ShmSize is the size of /dev/shm in bytes (default 64 MiB).
	ShmSize int64 `json:"shm_size,omitempty"`
	// Devices are host device nodes passed in (--device).
	Devices []Device `json:"devices,omitempty"`
}

// SeccompUnconfined turns seccomp filtering off.
const SeccompUnconfined = "unconfined"

// DefaultShmSize is /dev/shm's size unless ShmSize says otherwise (Docker's).
const DefaultShmSize = 64 << 20

// BrowserShmSize is /dev/shm's size, unless ShmSize says otherwise, in a
// sandbox that enables the browser plugin (--plugin or its image's): room
// for Chromium's shared memory, which it keeps in /tmp (slower, and on the
// upper directory's disk) when /dev/shm is under 512 MiB. Like any tmpfs,
// it holds only what is written to it, charged to the sandbox's memory.
const BrowserShmSize = 1 << 30

// ParseSecurityOpt applies one --security-opt value, in Docker's syntax:
// seccomp=unconfined|FILE, no-new-privileges[=true|false].
func (s *Security) ParseSecurityOpt(opt string) error {
	key, val, hasVal := strings.Cut(opt, "=")
	if !hasVal {
		key, val, hasVal = strings.Cut(opt, ":") // Docker's legacy form
	}
	switch key {
	case "seccomp":
		if val == "" {
			return fmt.Errorf("invalid --security-opt %q: give seccomp=unconfined or seccomp=PROFILE.json", opt)
		}
		s.Seccomp = val
	case "no-new-privileges":
		switch {
		case !hasVal || val == "true":
			s.NewPrivileges = false
		case val == "false":
			s.NewPrivileges = true
		default:
			return fmt.Errorf("invalid --security-opt %q: no-new-privileges takes true or false", opt)
		}
	default:
		return fmt.Errorf("unsupported --security-opt %q: bothy knows seccomp=unconfined|FILE and no-new-privileges[=true|false]", opt)
	}
	return nil
}

// validate checks names and files before anything is created.
func (s Security) validate() error {
	if _, err := capabilitySet(s.CapAdd, s.CapDrop); err != nil {
		return err
	}
	if s.Seccomp != "" && s.Seccomp != SeccompUnconfined {
		if _, err := os.Stat(s.Seccomp); err != nil {
			return fmt.Errorf("seccomp profile %s: %w", s.Seccomp, err)
		}
	}
	if s.ShmSize < 0 {
		return fmt.Errorf("invalid --shm-size %d: must be positive", s.ShmSize)
	}
	return nil
}

// capName normalizes "net_admin", "NET_ADMIN" or "CAP_NET_ADMIN" to
// CAP_NET_ADMIN; "all" to ALL.
func capName(s string) (string, error) {
	up := strings.ToUpper(strings.TrimSpace(s))
	if up == "ALL" {
		return "ALL", nil
	}
	if !strings.HasPrefix(up, "CAP_") {
		up = "CAP_" + up
	}
	for _, c := range capability.ListKnown() {
		if "CAP_"+strings.ToUpper(c.String()) == up {
			return up, nil
		}
	}
	return "", fmt.Errorf("unknown capability %q: use a name such as NET_ADMIN, or ALL", s)
}

// capabilitySet returns Docker's default set changed by add and drop, as
// Docker does: ALL in add starts from every capability, ALL in drop from
// none; then the named drops go and the named adds come.
func capabilitySet(add, drop []string) ([]string, error) {
	norm := func(list []string) ([]string, bool, error) {
		var out []string
		all := false
		for _, s := range list {
			n, err := capName(s)
			if err != nil {
				return nil, false, err
			}
			if n == "ALL" {
				all = true
				continue
			}
			out = append(out, n)
		}
		return out, all, nil
	}
	adds, addAll, err := norm(add)
	if err != nil {
		return nil, err
	}
	drops, dropAll, err := norm(drop)
	if err != nil {
		return nil, err
	}
	caps := slices.Clone(defaultCaps)
	if addAll {
		caps = nil
		for _, c := range capability.ListKnown() {
			caps = append(caps, "CAP_"+strings.ToUpper(c.String()))
		}
	}
	if dropAll {
		caps = nil
	}
	caps = slices.DeleteFunc(caps, func(c string) bool { return slices.Contains(drops, c) })
	for _, c := range adds {
		if !slices.Contains(caps, c) && !slices.Contains(drops, c) {
			caps = append(caps, c)
		}
	}
	slices.Sort(caps)
	return caps, nil
}

// applySecurity writes the hardening baseline into the spec: capabilities,
// no_new_privs, seccomp (after the capabilities: Docker's profile allows
// some syscalls only with the capability that governs them), a read-only
// root and /dev/shm's size.
func applySecurity(spec *specs.Spec, s Security) error {
	caps, err := capabilitySet(s.CapAdd, s.CapDrop)
	if err != nil {
		return err
	}
	spec.Process.Capabilities = &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps}
	spec.Process.NoNewPrivileges = !s.NewPrivileges
	spec.Root.Readonly = s.ReadOnly

	shm := s.ShmSize
	if shm == 0 {
		shm = DefaultShmSize
	}
	for i, m := range spec.Mounts {
		if m.Destination == "/dev/shm" {
			opts := slices.DeleteFunc(slices.Clone(m.Options), func(o string) bool { return strings.HasPrefix(o, "size=") })
			spec.Mounts[i].Options = append(opts, fmt.Sprintf("size=%d", shm))
		}
	}

	switch s.Seccomp {
	case SeccompUnconfined:
		spec.Linux.Seccomp = nil
	case "":
		spec.Linux.Seccomp, err = defaultSeccomp(spec)
		if err != nil {
			return fmt.Errorf("default seccomp profile: %w", err)
		}
	default:
		data, err := os.ReadFile(s.Seccomp)
		if err != nil {
			return fmt.Errorf("read seccomp profile: %w", err)
		}
		spec.Linux.Seccomp, err = seccomp.LoadProfile(string(data), spec)
		if err != nil {
			return fmt.Errorf("load seccomp profile %s: %w", s.Seccomp, err)
		}
	}
	return nil
}

// defaultSeccomp is Docker's default profile for the native architecture
// only: Docker's also admits the 32-bit ABIs (x86 and x32 beside x86_64,
// arm beside arm64), and compiling the filter for three ABIs costs
// libcontainer about 25 ms at every start on this class of machine (60 ms
// instead of 34 ms for the whole container start). Without them a 32-bit
// syscall (a 32-bit binary, or int 0x80 from a 64-bit one) kills the
// process with SIGSYS. Docker's own profile, with the 32-bit ABIs, is
// moby's default.json, given with --security-opt seccomp=FILE.
// The profile is converted from moby's Go value, not through its JSON: a
// round trip cost the CLI about 1 ms of CPU at every start.
func defaultSeccomp(spec *specs.Spec) (*specs.LinuxSeccomp, error) {
	sc, err := seccomp.GetDefaultProfile(spec)
	if err != nil || sc == nil {
		return sc, err
	}
	// The native architecture comes first, its sub-architectures after.
	sc.Architectures = sc.Architectures[:min(len(sc.Architectures), 1)]
	return sc, nil
}
