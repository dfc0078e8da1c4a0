package sandbox

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// MountKind is what a volume spec mounts.
type MountKind string

const (
	// MountBind bind-mounts a host directory or file.
	MountBind MountKind = "bind"
	// MountVolume bind-mounts a named volume that bothy manages.
	MountVolume MountKind = "volume"
	// MountOverlay mounts a host directory as the read-only lower layer of
	// an overlay whose upper directory belongs to the sandbox: the host
	// directory is never modified.
	MountOverlay MountKind = "overlay"
	// MountTmpfs mounts a fresh tmpfs.
	MountTmpfs MountKind = "tmpfs"
)

// ErrInvalidVolume is wrapped by every error about a volume or tmpfs spec.
var ErrInvalidVolume = errors.New("invalid volume")

// Mount is one parsed volume or tmpfs spec. Source is a host path (bind,
// overlay), a volume name (volume) or empty (tmpfs); Create resolves it.
type Mount struct {
	Kind     MountKind `json:"kind"`
	Source   string    `json:"source,omitempty"`
	Target   string    `json:"target"`
	ReadOnly bool      `json:"read_only,omitempty"`
	// Size and Mode are tmpfs options, as mount(8) writes them (size=64m,
	// mode=1777).
	Size string `json:"size,omitempty"`
	Mode string `json:"mode,omitempty"`
	// Spec is the spec as given, for messages.
	Spec string `json:"spec"`

	// Filled in by Create.
	//
	// HostPath is the directory bind-mounted or used as lower layer: the
	// absolute host path, or the named volume's data directory.
	HostPath string `json:"host_path,omitempty"`
	// Upper is an overlay volume's upper directory: what the sandbox
	// changed (see Manager.Diff).
	Upper string `json:"upper,omitempty"`
	// Layers are an overlay volume's snapshot layers, top-most first,
	// between HostPath and Upper: what the sandbox it was forked or
	// snapshotted from had written there (see snapshotVolumeLayers).
	Layers []string `json:"layers,omitempty"`
}

// volumePrefix introduces a named volume: volume:NAME:CTR[:ro].
const volumePrefix = "volume:"

// ParseVolume parses one -v spec: HOST:CTR[:MODE] or volume:NAME:CTR[:MODE].
// MODE is a list of ro, rw and overlay separated by ',' or '+' (ro,overlay:
// an overlay the sandbox cannot write either). Host paths are checked later,
// by Create; everything that can be checked without the host is checked here.
func ParseVolume(spec string) (Mount, error) {
	m := Mount{Spec: spec}
	bad := func(format string, a ...any) (Mount, error) {
		return Mount{}, fmt.Errorf("%w %q: %s", ErrInvalidVolume, spec, fmt.Sprintf(format, a...))
	}
	if strings.IndexByte(spec, 0) >= 0 {
		return bad("NUL byte")
	}
	rest := spec
	m.Kind = MountBind
	if strings.HasPrefix(spec, volumePrefix) {
		m.Kind = MountVolume
		rest = spec[len(volumePrefix):]
	}
	parts := strings.Split(rest, ":")
	if len(parts) < 2 || len(parts) > 3 {
		if m.Kind == MountVolume {
			return bad("want volume:NAME:CONTAINER_PATH[:ro]")
		}
		return bad("want HOST_PATH:CONTAINER_PATH[:ro|rw|overlay] or volume:NAME:CONTAINER_PATH[:ro]")
	}
	m.Source, m.Target = parts[0], parts[1]
	if m.Source == "" {
		return bad("empty source")
	}
	if m.Kind == MountVolume {
		if err := validateVolumeName(m.Source); err != nil {
			return bad("%v", err)
		}
	}
	if len(parts) == 3 {
		var rw, overlay bool
		for _, opt := range strings.FieldsFunc(parts[2], func(r rune) bool { return r == ',' || r == '+' }) {
			switch opt {
			case "ro":
				m.ReadOnly = true
			case "rw":
				rw = true
			case "overlay", "O":
				overlay = true
			default:
				return bad("unknown mode %q: use ro, rw, overlay or ro,overlay", opt)
			}
		}
		if parts[2] == "" {
			return bad("empty mode")
		}
		if rw && m.ReadOnly {
			return bad("both ro and rw")
		}
		if overlay {
			if m.Kind == MountVolume {
				return bad("overlay applies to host directories, not named volumes")
			}
			m.Kind = MountOverlay
		}
	}
	target, err := checkTarget(m.Target)
	if err != nil {
		return bad("%v", err)
	}
	m.Target = target
	return m, nil
}

// ParseTmpfs parses one --tmpfs spec: CTR[:OPTIONS], OPTIONS a comma-separated
// list of size=N[k|m|g|%], mode=OCTAL, ro and rw.
func ParseTmpfs(spec string) (Mount, error) {
	m := Mount{Kind: MountTmpfs, Spec: spec}
	bad := func(format string, a ...any) (Mount, error) {
		return Mount{}, fmt.Errorf("%w tmpfs %q: %s", ErrInvalidVolume, spec, fmt.Sprintf(format, a...))
	}
	if strings.IndexByte(spec, 0) >= 0 {
		return bad("NUL byte")
	}
	target, opts, hasOpts := strings.Cut(spec, ":")
	if hasOpts {
		if opts == "" {
			return bad("empty options")
		}
		for _, opt := range strings.Split(opts, ",") {
			k, v, _ := strings.Cut(opt, "=")
			switch k {
			case "size":
				if !validSize(v) {
					return bad("size %q: want a number of bytes with an optional k, m or g suffix, or a percentage", v)
				}
				m.Size = v
			case "mode":
				n, err := strconv.ParseUint(v, 8, 32)
				if err != nil || n > 0o7777 {
					return bad("mode %q: want an octal mode such as 1777", v)
				}
				m.Mode = fmt.Sprintf("%o", n)
			case "ro":
				m.ReadOnly = true
			case "rw":
				m.ReadOnly = false
			default:
				return bad("unknown option %q: use size=…, mode=…, ro or rw", opt)
			}
		}
	}
	t, err := checkTarget(target)
	if err != nil {
		return bad("%v", err)
	}
	m.Target = t
	return m, nil
}

func validSize(v string) bool {
	if v == "" {
		return false
	}
	num := strings.TrimRight(v, "kKmMgG%")
	if len(v)-len(num) > 1 || num == "" {
		return false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	return err == nil && n > 0
}

// SplitVolumes splits OpenHands' comma-separated SandboxConfig.volumes
// (SANDBOX_VOLUMES) into single specs: "/a:/work:rw,/b:/data:ro". A piece
// with no ':' that is a mode word (ro, rw, overlay) continues the mode of the
// spec before it, so "/c:/x:ro,overlay" stays one spec. Blank pieces are
// skipped. Each spec is parsed by [ParseVolume].
func SplitVolumes(list string) ([]string, error) {
	var specs []string
	for _, piece := range strings.Split(list, ",") {
		piece = strings.TrimSpace(piece)
		if piece == "" {
			continue
		}
		if !strings.Contains(piece, ":") && len(specs) > 0 && slices.Contains([]string{"ro", "rw", "overlay"}, piece) {
			last := specs[len(specs)-1]
			if strings.Count(strings.TrimPrefix(last, volumePrefix), ":") == 2 {
				specs[len(specs)-1] = last + "," + piece
			} else {
				specs[len(specs)-1] = last + ":" + piece
			}
			continue
		}
		specs = append(specs, piece)
	}
	return specs, nil
}

// ParseVolumeList parses OpenHands' comma-separated form (see [SplitVolumes]).
func ParseVolumeList(list string) ([]Mount, error) {
	specs, err := SplitVolumes(list)
	if err != nil {
		return nil, err
	}
	out := make([]Mount, 0, len(specs))
	for _, s := range specs {
		m, err := ParseVolume(s)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// reservedTargets are where nothing may be mounted over or under: the
// kernel filesystems libcontainer sets up (and masks), and the executor's
// own paths.
var reservedTargets = []string{"/proc", "/dev", "/sys", "/.bothy"}

// ownFiles are mounted by bothy into every sandbox: a volume may replace one
// (it is mounted later) but not hide all of them behind a directory.
var ownFiles = []string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"}

// checkTarget returns the cleaned container path, or why it cannot be a
// mount target.
func checkTarget(t string) (string, error) {
	if t == "" {
		return "", errors.New("empty container path")
	}
	if !path.IsAbs(t) {
		return "", fmt.Errorf("container path %q is not absolute", t)
	}
	for _, c := range strings.Split(t, "/") {
		if c == ".." {
			return "", fmt.Errorf("container path %q contains ..", t)
		}
	}
	clean := path.Clean(t)
	if clean == "/" {
		return "", errors.New("cannot mount over the root directory")
	}
	for _, r := range reservedTargets {
		if clean == r || strings.HasPrefix(clean, r+"/") {
			return "", fmt.Errorf("container path %s is reserved: nothing may be mounted on or under %s", clean, r)
		}
	}
	for _, f := range ownFiles {
		if strings.HasPrefix(f, clean+"/") {
			return "", fmt.Errorf("container path %s would hide %s, which bothy mounts; mount below it instead", clean, f)
		}
	}
	return clean, nil
}

// checkMounts refuses two mounts on the same target.
func checkMounts(mounts []Mount) error {
	seen := map[string]string{}
	for _, m := range mounts {
		if prev, ok := seen[m.Target]; ok {
			return fmt.Errorf("%w %q: %s is already the target of %q", ErrInvalidVolume, m.Spec, m.Target, prev)
		}
		seen[m.Target] = m.Spec
	}
	return nil
}
