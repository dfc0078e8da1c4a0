package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// parseMounts parses and checks every -v, --volumes and --tmpfs spec of opts
// against the host, before anything is created: a malformed spec, a missing
// host path or a reserved target fails the whole sandbox, naming the spec.
func (m *Manager) parseMounts(opts CreateOptions) ([]Mount, error) {
	var mounts []Mount
	for _, spec := range opts.Volumes {
		mnt, err := ParseVolume(spec)
		if err != nil {
			return nil, err
		}
		if err := m.checkSource(&mnt); err != nil {
			return nil, err
		}
		mounts = append(mounts, mnt)
	}
	for _, spec := range opts.Tmpfs {
		mnt, err := ParseTmpfs(spec)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, mnt)
	}
	if err := checkMounts(mounts); err != nil {
		return nil, err
	}
	// Parents before children: a volume at /a/b lands on the one at /a.
	slices.SortStableFunc(mounts, func(a, b Mount) int {
		return strings.Count(a.Target, "/") - strings.Count(b.Target, "/")
	})
	return mounts, nil
}

// checkSource resolves a bind or overlay source to an absolute host path
// that exists.
func (m *Manager) checkSource(mnt *Mount) error {
	if mnt.Kind != MountBind && mnt.Kind != MountOverlay {
		return nil
	}
	abs, err := filepath.Abs(mnt.Source)
	if err != nil {
		return fmt.Errorf("%w %q: %v", ErrInvalidVolume, mnt.Spec, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		hint := ""
		if !strings.Contains(mnt.Source, "/") {
			hint = fmt.Sprintf(" (for a named volume write volume:%s:%s)", mnt.Source, mnt.Target)
		}
		return fmt.Errorf("%w %q: host path %s: %v%s", ErrInvalidVolume, mnt.Spec, abs, errors.Unwrap(err), hint)
	}
	if mnt.Kind == MountOverlay {
		if !st.IsDir() {
			return fmt.Errorf("%w %q: host path %s is not a directory: an overlay needs one", ErrInvalidVolume, mnt.Spec, abs)
		}
		// The kernel refuses an upper directory inside a lower one.
		if data, err := filepath.Abs(m.paths.Data); err == nil && (data == abs || strings.HasPrefix(data, strings.TrimSuffix(abs, "/")+"/")) {
			return fmt.Errorf("%w %q: host path %s holds bothy's data directory %s, where the sandbox's writes go: overlay a directory below it", ErrInvalidVolume, mnt.Spec, abs, data)
		}
	}
	mnt.HostPath = abs
	return nil
}

// volumeDirs is where a sandbox's overlay volume i keeps its upper and work
// directories (beside the rootfs's, removed with it) and its merged mount
// point (in the runtime directory; the mount lives in the sandbox's mount
// namespace only).
func (m *Manager) volumeDirs(id string, i int) (upper, work, merged string) {
	base := filepath.Join(m.paths.upperRoot(id), "volumes", strconv.Itoa(i))
	return filepath.Join(base, "upper"), filepath.Join(base, "work"), filepath.Join(m.paths.dir(id), "volumes", strconv.Itoa(i))
}

// setupMounts creates what the mounts need on the host: named volumes on first
// use, overlay upper, work and mount point directories. The caller holds the
// volume lock shared. With reuse (a sandbox started again), the overlay
// volumes' upper directories are there, with what the sandbox wrote.
// layers are the overlay volumes' snapshot layers by target, top-most
// first (snapshotVolumeLayers): they go between the host directory and the
// upper.
func (m *Manager) setupMounts(id string, mounts []Mount, reuse bool, layers map[string][]string) ([]ipc.Overlay, error) {
	var overlays []ipc.Overlay
	for i := range mounts {
		mnt := &mounts[i]
		switch mnt.Kind {
		case MountVolume:
			v, err := m.createVolume(mnt.Source, true)
			if err != nil {
				return nil, fmt.Errorf("volume %q: %w", mnt.Spec, err)
			}
			mnt.HostPath = v.Mountpoint
		case MountOverlay:
			upper, work, merged := m.volumeDirs(id, i)
			mnt.Layers = layers[mnt.Target]
			// The upper directory's attributes are those of the
			// mount's root inside: the host directory's, or the
			// top snapshot layer's (the root as it was forked).
			attrs := mnt.HostPath
			if len(mnt.Layers) > 0 {
				attrs = mnt.Layers[0]
			}
			stat := os.Stat
			if len(mnt.Layers) > 0 {
				stat = os.Lstat
			}
			st, err := stat(attrs)
			if err != nil {
				return nil, fmt.Errorf("volume %q: %w", mnt.Spec, err)
			}
			for _, d := range []string{work, merged} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					return nil, fmt.Errorf("volume %q: %w", mnt.Spec, err)
				}
			}
			if reuse {
				if st, err := os.Lstat(upper); err != nil || !st.IsDir() {
					return nil, fmt.Errorf("volume %q: its upper directory is gone: %w", mnt.Spec, cmp.Or(err, errors.New("not a directory")))
				}
				mnt.Upper = upper
				overlays = append(overlays, ipc.Overlay{Lower: mnt.HostPath, Layers: mnt.Layers, Upper: upper, Work: work, Target: merged})
				continue
			}
			if err := os.Mkdir(upper, 0o700); err != nil {
				return nil, fmt.Errorf("volume %q: %w", mnt.Spec, err)
			}
			if err := os.Chmod(upper, st.Mode().Perm()|st.Mode()&os.ModeSticky); err != nil {
				return nil, fmt.Errorf("volume %q: %w", mnt.Spec, err)
			}
			if sys, ok := st.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
				_ = os.Lchown(upper, int(sys.Uid), int(sys.Gid))
			}
			mnt.Upper = upper
			overlays = append(overlays, ipc.Overlay{Lower: mnt.HostPath, Layers: mnt.Layers, Upper: upper, Work: work, Target: merged})
		}
	}
	return overlays, nil
}

// specMounts are the runtime-spec mounts of the volumes, in order.
func (m *Manager) specMounts(id string, mounts []Mount) []specs.Mount {
	var out []specs.Mount
	for i, mnt := range mounts {
		switch mnt.Kind {
		case MountBind, MountVolume, MountOverlay:
			src := mnt.HostPath
			if mnt.Kind == MountOverlay {
				_, _, src = m.volumeDirs(id, i)
			}
			// Not "rw": clearing a read-only flag the host mount has
			// locked fails in a user namespace, and is not ours to do.
			opts := []string{"rbind", "nosuid", "nodev"}
			if mnt.ReadOnly {
				// rro: submounts of the host directory are read-only too.
				opts = append(opts, "ro", "rro")
			}
			out = append(out, specs.Mount{Destination: mnt.Target, Type: "bind", Source: src, Options: opts})
		case MountTmpfs:
			opts := []string{"nosuid", "nodev"}
			if mnt.Size != "" {
				opts = append(opts, "size="+mnt.Size)
			}
			if mnt.Mode != "" {
				opts = append(opts, "mode="+mnt.Mode)
			}
			if mnt.ReadOnly {
				opts = append(opts, "ro")
			}
			out = append(out, specs.Mount{Destination: mnt.Target, Type: "tmpfs", Source: "tmpfs", Options: opts})
		}
	}
	return out
}
