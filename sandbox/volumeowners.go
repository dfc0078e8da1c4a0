package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/bothy-sandbox/bothy/internal/userns"
)

// maxOwnerScan bounds the entries CheckVolumeOwners looks at per volume.
const maxOwnerScan = 20000

// ErrUnmappedOwner says a read-write overlay volume holds files whose owner
// or group the sandbox's user namespace cannot represent.
var ErrUnmappedOwner = errors.New("unmapped owner")

// CheckVolumeOwners looks, in each read-write overlay volume's host
// directory (at most maxOwnerScan entries each, never following a
// symlink), for an entry whose owner or group the sandbox's id mapping
// does not map. Overlayfs copies an entry up with its owner to change it,
// or a directory to create an entry in it, and refuses an owner the user
// namespace does not map with EOVERFLOW, which programs in the sandbox
// report as "Value too large for defined data type". The error names the
// first such path, its ids and the mapping, and what to do.
func (sb *Sandbox) CheckVolumeOwners() error {
	if sb.IDMap.Mode == userns.MapHost || sb.IDMap.Mode == "" {
		return nil // real ids: every owner is one
	}
	var errs []error
	for _, mnt := range sb.Mounts {
		if mnt.Kind != MountOverlay || mnt.ReadOnly || mnt.HostPath == "" {
			continue
		}
		if err := checkOwners(mnt, sb.IDMap); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkOwners(mnt Mount, m userns.Mapping) error {
	var first string
	var uid, gid uint32
	n, seen := 0, 0
	_ = filepath.WalkDir(mnt.HostPath, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == mnt.HostPath {
			return nil // unreadable: skipped; the root is the upper directory's, ours
		}
		if seen++; seen > maxOwnerScan {
			return filepath.SkipAll
		}
		fi, err := d.Info() // lstat: WalkDir follows no symlink
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || (mapped(m.UIDs, st.Uid) && mapped(m.GIDs, st.Gid)) {
			return nil
		}
		if n == 0 {
			first, uid, gid = path, st.Uid, st.Gid
		}
		n++
		return nil
	})
	if n == 0 {
		return nil
	}
	more := ""
	if n > 1 {
		more = fmt.Sprintf(" (and %d more entries", n-1)
		if seen > maxOwnerScan {
			more += fmt.Sprintf(" among the first %d", maxOwnerScan)
		}
		more += ")"
	}
	return fmt.Errorf("%w: overlay volume %q: %s is owned by uid %d gid %d%s, which this sandbox's user namespace (uids %s, gids %s) cannot represent: "+
		"changing it, or creating entries in it, fails in the sandbox with EOVERFLOW (\"Value too large for defined data type\"); "+
		"chown such files to ids the sandbox maps (yours, or your subordinate range with subordinate ids), or mount the directory read-only (:ro) or as a bind volume (without :O) instead",
		ErrUnmappedOwner, mnt.Spec, first, uid, gid, more, describeIDs(m.UIDs), describeIDs(m.GIDs))
}

// mapped reports whether host id is in one of ranges.
func mapped(ranges []specs.LinuxIDMapping, id uint32) bool {
	for _, r := range ranges {
		if id >= r.HostID && id-r.HostID < r.Size {
			return true
		}
	}
	return false
}

// describeIDs writes ranges as "1001→0, 100000-165535→1-65536".
func describeIDs(ranges []specs.LinuxIDMapping) string {
	s := ""
	for i, r := range ranges {
		if i > 0 {
			s += ", "
		}
		if r.Size == 1 {
			s += fmt.Sprintf("host %d→%d", r.HostID, r.ContainerID)
		} else {
			s += fmt.Sprintf("host %d-%d→%d-%d", r.HostID, r.HostID+r.Size-1, r.ContainerID, r.ContainerID+r.Size-1)
		}
	}
	return s
}
