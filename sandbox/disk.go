package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/disk"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
)

// A sandbox's disk limit (--disk) bounds what it writes to its root
// filesystem and overlay volumes: its upper root (DATA/sandboxes/ID, which
// holds the overlays' upper and work directories, on one filesystem as
// overlayfs needs) is either
//   - DiskQuota: a directory of the data filesystem with a project id of
//     its own and a hard block and inode limit on it (ext4 or XFS mounted
//     with prjquota), or
//   - DiskLoop: the mount point of an ext4 image of its own
//     (DATA/disks/ID.img, sparse), loop-mounted by bothy in the host's
//     mount namespace for the sandbox's life.
//
// Both need root: setting a quota needs CAP_SYS_ADMIN, mounting an image
// root. Named volumes, bind mounts and tmpfs are not counted (tmpfs counts
// against --memory).

// Disk modes.
const (
	DiskQuota = "quota"
	DiskLoop  = "loop"
)

// DiskLimit is how a sandbox's Limits.Disk is enforced.
type DiskLimit struct {
	// Mode is DiskQuota or DiskLoop.
	Mode string `json:"mode"`
	// Inodes is the limit on files (one per disk.BytesPerInode of Limit).
	Inodes uint64 `json:"inodes"`
	// Project is the project id (DiskQuota).
	Project uint32 `json:"project,omitempty"`
	// Image is the filesystem image (DiskLoop).
	Image string `json:"image,omitempty"`
}

// minDisk is the smallest --disk: the smallest image worth a filesystem.
const minDisk = disk.MinImageSize

// projectIDBase and projectIDSpan are the range bothy draws project ids
// from, at random: high enough to stay clear of the ids an operator gives
// by hand (/etc/projid), wide enough that two data directories on one
// filesystem hardly ever draw the same id (and a drawn id already in use,
// with files or limits, is passed over).
const (
	projectIDBase = 1 << 24
	projectIDSpan = 1<<31 - projectIDBase
)

// diskImage is where a sandbox's filesystem image lives (DiskLoop).
func (p Paths) diskImage(id string) string { return filepath.Join(p.Data, "disks", id+".img") }

// projectClaims holds one symlink per project id in use, PROJECT -> sandbox
// ID: creating it is what claims the id, atomically, across processes.
func (p Paths) projectClaims() string { return filepath.Join(p.Data, "disks", "projects") }

// planDisk decides how the sandbox's disk limit (l.Disk) is enforced: ""
// when none is asked for. What cannot be is refused with ErrLimits, or with
// ignore left out and said in the returned reason.
func (m *Manager) planDisk(l Limits, sec Security, ignore bool) (mode, ignored string, err error) {
	if l.Disk == 0 {
		return "", "", nil
	}
	var why string
	if m.mapping.Mode != userns.MapHost {
		why = fmt.Sprintf("--disk needs root: a rootless sandbox's disk cannot be bounded on its own (setting a project quota needs CAP_SYS_ADMIN, mounting a filesystem image needs root); "+
			"to bound what uid %d's sandboxes write together, an operator puts %s on a filesystem of its own size, or under a project quota set as root (see docs/security.md)",
			os.Getuid(), m.paths.Data)
	} else {
		mode, why = m.diskMode(sec)
		if why == "" {
			return mode, "", nil
		}
	}
	if !ignore {
		return "", "", fmt.Errorf("%w: %s (or run with --ignore-limits to start without it)", ErrLimits, why)
	}
	return "", why, nil
}

// diskMode chooses how root bounds a sandbox's disk: a project quota where
// the data filesystem enforces them and the sandbox cannot get past one,
// else a loop-mounted image; why says what is missing for either.
func (m *Manager) diskMode(sec Security) (mode, why string) {
	// A project quota holds only if the sandbox can neither move its files
	// to another project (FS_IOC_FSSETXATTR, FS_IOC_SETFLAGS: bothy's
	// default seccomp profile denies them then) nor exceed it
	// (CAP_SYS_RESOURCE: ext4 lets its holder past quotas when it writes
	// through a shared mapping; overlayfs drops the capability for the
	// writes it makes itself).
	caps, _ := capabilitySet(sec.CapAdd, sec.CapDrop)
	if sec.Seccomp == "" && !slices.Contains(caps, "CAP_SYS_RESOURCE") {
		if f, err := os.Open(m.paths.uppers()); err == nil {
			err = disk.ProjectQuotas(f)
			f.Close()
			if err == nil {
				return DiskQuota, ""
			}
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "", "--disk needs project quotas on the data filesystem (" + m.paths.Data + ": ext4 or XFS mounted with prjquota) or loop devices (/dev/loop-control is missing: modprobe loop)"
	}
	if _, err := disk.MkfsPath(); err != nil {
		return "", "--disk needs project quotas on the data filesystem (" + m.paths.Data + ": ext4 or XFS mounted with prjquota) or mkfs.ext4 for an image: install e2fsprogs"
	}
	return DiskLoop, ""
}

// setupDisk bounds the sandbox's upper root, an empty directory, before
// anything is created in it. Every step leaves something removeDisk finds
// from the sandbox's ID alone, so that a creation killed at any point is
// cleaned up by rm or prune.
func (m *Manager) setupDisk(ctx context.Context, id, upperRoot, mode string, limit int64) (*DiskLimit, error) {
	inodes := uint64(limit) / disk.BytesPerInode
	switch mode {
	case DiskLoop:
		img := m.paths.diskImage(id)
		if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
			return nil, fmt.Errorf("create disk image: %w", err)
		}
		if err := disk.CreateImage(ctx, img, limit); err != nil {
			return nil, err
		}
		trace.Mark("bothy", "disk image made")
		if err := disk.MountImage(img, upperRoot); err != nil {
			return nil, err
		}
		trace.Mark("bothy", "disk image mounted")
		// The image's root is the upper root: private, and nothing else
		// in it.
		if err := os.Chmod(upperRoot, 0o700); err != nil {
			return nil, fmt.Errorf("set up disk image: %w", err)
		}
		if err := os.Remove(filepath.Join(upperRoot, "lost+found")); err != nil {
			return nil, fmt.Errorf("set up disk image: %w", err)
		}
		return &DiskLimit{Mode: DiskLoop, Inodes: inodes, Image: img}, nil
	case DiskQuota:
		dir, err := openDir(upperRoot)
		if err != nil {
			return nil, fmt.Errorf("set up disk quota: %w", err)
		}
		defer dir.Close()
		project, err := m.claimProject(id, dir)
		if err != nil {
			return nil, err
		}
		trace.Mark("bothy", "disk project claimed")
		if err := disk.SetProjectLimit(dir, project, uint64(limit), inodes); err != nil {
			return nil, err
		}
		trace.Mark("bothy", "disk quota set")
		return &DiskLimit{Mode: DiskQuota, Inodes: inodes, Project: project}, nil
	}
	return nil, nil
}

// claimProject gives dir a project id no one uses, claimed for sandbox id.
// The id is set on dir first, then claimed: removeDisk reads it from there.
func (m *Manager) claimProject(id string, dir *os.File) (uint32, error) {
	claims := m.paths.projectClaims()
	if err := os.MkdirAll(claims, 0o700); err != nil {
		return 0, fmt.Errorf("claim a project id: %w", err)
	}
	for range 20 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		project := projectIDBase + binary.LittleEndian.Uint32(b[:])%projectIDSpan
		claim := filepath.Join(claims, strconv.FormatUint(uint64(project), 10))
		if _, err := os.Lstat(claim); err == nil {
			continue
		}
		if u, err := disk.ProjectUsage(dir, project); err != nil || u != (disk.Usage{}) {
			continue // someone else's, or unreadable
		}
		if err := disk.SetProject(dir, project); err != nil {
			return 0, err
		}
		if err := os.Symlink(id, claim); err != nil {
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return 0, fmt.Errorf("claim project id %d: %w", project, err)
		}
		return project, nil
	}
	return 0, errors.New("claim a project id: no free id found in 20 draws")
}

// removeDisk undoes setupDisk for sandbox id, from what is on disk (its
// state may be gone): it unmounts the sandbox's image from its upper root
// and deletes it, or lifts and releases its project quota. It runs before
// the upper root is removed, and does nothing for a sandbox without a disk
// limit.
func (m *Manager) removeDisk(ctx context.Context, id string) error {
	upperRoot := m.paths.upperRoot(id)
	img := m.paths.diskImage(id)
	var errs []error
	if was, err := disk.UnmountImage(img, upperRoot); err != nil {
		errs = append(errs, err)
	} else if was {
		// The loop device goes once no mount namespace holds the
		// filesystem: the sandbox's (or a launcher's) may be going away
		// still. Give it a moment, so that rm leaves none; the kernel
		// detaches it later otherwise.
		for i := 0; i < 20 && len(disk.LoopDevices(img)) > 0; i++ {
			if sleepCtx(ctx, 100*time.Millisecond) != nil {
				break
			}
		}
	}
	if err := os.Remove(img); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove disk image: %w", err))
	}
	if dir, err := openDir(upperRoot); err == nil {
		errs = append(errs, m.releaseProject(id, dir))
		dir.Close()
	}
	return errors.Join(errs...)
}

// releaseProject lifts the quota of dir's project and releases its claim,
// when sandbox id holds it.
func (m *Manager) releaseProject(id string, dir *os.File) error {
	project, err := disk.Project(dir)
	if err != nil || project < projectIDBase {
		return nil // not a filesystem with project ids, or not one of ours
	}
	claim := filepath.Join(m.paths.projectClaims(), strconv.FormatUint(uint64(project), 10))
	if owner, err := os.Readlink(claim); err != nil || owner != id {
		return nil // the id was drawn but never claimed: no limit was set
	}
	if err := disk.SetProjectLimit(dir, project, 0, 0); err != nil {
		return err
	}
	if err := os.Remove(claim); err != nil {
		return fmt.Errorf("release project id %d: %w", project, err)
	}
	return nil
}

// openDir opens a directory of bothy's own (an upper root) without
// following a symlink.
func openDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// readDiskUsage reads what the sandbox's root filesystem and overlay volumes
// use against its disk limit.
func (m *Manager) readDiskUsage(sb *Sandbox) (disk.Usage, error) {
	upperRoot := m.paths.upperRoot(sb.ID)
	switch sb.Disk.Mode {
	case DiskLoop:
		return disk.ImageUsage(sb.Disk.Image, upperRoot)
	case DiskQuota:
		dir, err := openDir(upperRoot)
		if err != nil {
			return disk.Usage{}, err
		}
		defer dir.Close()
		return disk.ProjectUsage(dir, sb.Disk.Project)
	}
	return disk.Usage{}, fmt.Errorf("unknown disk mode %q", sb.Disk.Mode)
}
