package sandbox

import (
	"cmp"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Device is a host device node passed into a sandbox (--device), as
// Docker's: bound at Container (default: the host's path), and, for a root
// sandbox, allowed by its device cgroup with Access.
type Device struct {
	Host      string `json:"host"`
	Container string `json:"container"`
	// Access is what the device cgroup allows: any of r (read), w
	// (write) and m (mknod); default rwm.
	Access string `json:"access"`
	// Type ("c" or "b"), Major and Minor are the host node's, looked up
	// when the sandbox is created.
	Type  string `json:"type,omitempty"`
	Major int64  `json:"major,omitempty"`
	Minor int64  `json:"minor,omitempty"`
}

// ParseDevice reads Docker's --device syntax: HOST[:CONTAINER][:ACCESS].
func ParseDevice(s string) (Device, error) {
	parts := strings.Split(s, ":")
	d := Device{Host: parts[0], Access: "rwm"}
	switch {
	case len(parts) == 2 && validAccess(parts[1]):
		d.Access = parts[1]
	case len(parts) == 2:
		d.Container = parts[1]
	case len(parts) == 3:
		d.Container, d.Access = parts[1], parts[2]
	case len(parts) > 3:
		return Device{}, fmt.Errorf("invalid --device %q: give HOST[:CONTAINER][:ACCESS]", s)
	}
	d.Container = cmp.Or(d.Container, d.Host)
	if !filepath.IsAbs(d.Host) {
		return Device{}, fmt.Errorf("invalid --device %q: the host path must be absolute", s)
	}
	if err := checkDeviceTarget(d.Container); err != nil {
		return Device{}, fmt.Errorf("invalid --device %q: %w", s, err)
	}
	if !validAccess(d.Access) {
		return Device{}, fmt.Errorf("invalid --device %q: the access is any of r, w and m (e.g. rw)", s)
	}
	return d, nil
}

// checkDeviceTarget: a device goes where a volume may (checkTarget), or
// in /dev, but not on the file systems bothy mounts there.
func checkDeviceTarget(t string) error {
	if !strings.HasPrefix(t, "/dev/") {
		_, err := checkTarget(t)
		return err
	}
	if path.Clean(t) != t {
		return fmt.Errorf("container path %q is not clean", t)
	}
	for _, r := range []string{"/dev/pts", "/dev/shm", "/dev/mqueue"} {
		if t == r || strings.HasPrefix(t, r+"/") {
			return fmt.Errorf("container path %s is reserved: %s is a file system of the sandbox's own", t, r)
		}
	}
	return nil
}

// validAccess: a non-empty set of r, w and m, each at most once.
func validAccess(s string) bool {
	if s == "" || len(s) > 3 {
		return false
	}
	for i, c := range s {
		if !strings.ContainsRune("rwm", c) || strings.ContainsRune(s[i+1:], c) {
			return false
		}
	}
	return true
}

// checkDevices looks up each device's node on the host (following
// symlinks, as Docker does: /dev/dri/by-path/…) and refuses what the
// sandbox could not use as asked, or, for a device already looked up (a
// sandbox started again), a node that is not the same device. A rootless sandbox has no device cgroup
// of its own: it gets the device with the caller's own permissions on the
// node, so the caller must be able to open it as asked, and an access
// narrower than those permissions cannot be enforced.
func checkDevices(devs []Device, rootless bool) error {
	for i := range devs {
		d := &devs[i]
		if !validAccess(d.Access) {
			return fmt.Errorf("--device %s: invalid access %q: any of r, w and m", d.Host, d.Access)
		}
		d.Container = cmp.Or(d.Container, d.Host)
		if err := checkDeviceTarget(d.Container); err != nil {
			return fmt.Errorf("--device %s: %w", d.Host, err)
		}
		var st unix.Stat_t
		if err := unix.Stat(d.Host, &st); err != nil {
			return fmt.Errorf("--device %s: %w", d.Host, &fs.PathError{Op: "stat", Path: d.Host, Err: err})
		}
		typ := ""
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			typ = "c"
		case unix.S_IFBLK:
			typ = "b"
		default:
			return fmt.Errorf("--device %s: not a device node; mount files and directories with -v", d.Host)
		}
		major, minor := int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		// A sandbox started again gets the device it was created with.
		if d.Type != "" && (d.Type != typ || d.Major != major || d.Minor != minor) {
			return fmt.Errorf("--device %s: it is now %s %d:%d, not the %s %d:%d the sandbox was created with", d.Host, typ, major, minor, d.Type, d.Major, d.Minor)
		}
		d.Type, d.Major, d.Minor = typ, major, minor
		if !rootless {
			continue
		}
		for _, a := range []struct {
			c           rune
			mode        uint32
			verb, doing string
		}{{'r', unix.R_OK, "read", "reading"}, {'w', unix.W_OK, "write", "writing"}} {
			want := strings.ContainsRune(d.Access, a.c)
			can := unix.Faccessat(unix.AT_FDCWD, d.Host, a.mode, unix.AT_EACCESS) == nil
			switch {
			case want && !can:
				return fmt.Errorf("--device %s: this user may not %s it (mode %#o, owner %d:%d): a rootless sandbox gets a device with its user's permissions", d.Host, a.verb, st.Mode&0o7777, st.Uid, st.Gid)
			case !want && can:
				return fmt.Errorf("--device %s:%s: a rootless sandbox has no device cgroup of its own to keep it from %s the device, which this user may: give %s", d.Host, d.Access, a.doing, d.Access+string(a.c))
			}
		}
	}
	return nil
}

// applyDevices binds each device into the sandbox (without nodev: a
// node the kernel made, bound from the host's /dev, opens even in a user
// namespace, where a node made in the sandbox would not) and, for a root
// sandbox, allows it in the device cgroup.
func applyDevices(spec *specs.Spec, devs []Device) {
	for _, d := range devs {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: d.Container, Type: "bind", Source: d.Host, Options: []string{"bind", "nosuid", "noexec"}})
		if spec.Linux.Resources == nil || len(spec.Linux.Resources.Devices) == 0 {
			continue // no device cgroup: rootless
		}
		major, minor := d.Major, d.Minor
		spec.Linux.Resources.Devices = append(spec.Linux.Resources.Devices,
			specs.LinuxDeviceCgroup{Allow: true, Type: d.Type, Major: &major, Minor: &minor, Access: d.Access})
	}
}
