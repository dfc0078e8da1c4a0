package sandbox

import (
	"os"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// cgroupLayout is what limits planning reads of the host's cgroups: which
// hierarchies are mounted, which files exist, which directories the caller
// may create cgroups in. The host's is hostCgroups; tests plan against fake
// hosts (cgroup v1 and v2, delegated or not) without root.
type cgroupLayout interface {
	// Unified reports a cgroup v2 only host.
	Unified() bool
	// Hierarchies lists the mounted cgroup hierarchies (every v1
	// hierarchy, and the v2 one).
	Hierarchies() ([]hierarchy, error)
	// Exists reports whether a cgroup file or directory exists.
	Exists(path string) bool
	// Access is access(2) for the caller: nil when it may (mode: unix.W_OK,
	// unix.X_OK...).
	Access(path string, mode uint32) error
	// ReadFile reads a cgroup file (cgroup.controllers).
	ReadFile(path string) ([]byte, error)
}

// hostCgroups is the cgroup layout of the host bothy runs on.
type hostCgroups struct{}

var _ cgroupLayout = hostCgroups{}

func (hostCgroups) Unified() bool                     { return cgroups.IsCgroup2UnifiedMode() }
func (hostCgroups) Hierarchies() ([]hierarchy, error) { return cgroupHierarchies() }
func (hostCgroups) Access(path string, mode uint32) error {
	return unix.Access(path, mode)
}
func (hostCgroups) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }
func (hostCgroups) Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
