package disk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// BytesPerInode is the size per inode of a loop image's filesystem, and of
// a project's inode limit: a sandbox can fill its limit with files of 8 KiB
// on average, and no more files than that (mkfs.ext4 -i; its default is 16
// KiB).
const BytesPerInode = 8192

// MinImageSize is the smallest image CreateImage makes.
const MinImageSize = 16 << 20

// MkfsPath finds mkfs.ext4: in PATH, or in the sbin directories a user's
// PATH often lacks.
func MkfsPath() (string, error) {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("mkfs.ext4 not found: install e2fsprogs")
}

// CreateImage makes path, a new file, a sparse image of size bytes holding an
// empty ext4 filesystem: no journal (its content is a sandbox's scratch
// space, gone with it), no blocks reserved for root, one inode per
// BytesPerInode, inode tables left for the kernel to treat as zero (the file
// is sparse). It takes only the blocks the filesystem's metadata and the
// sandbox's files use.
func CreateImage(ctx context.Context, path string, size int64) error {
	if size < MinImageSize {
		return fmt.Errorf("create disk image: %d bytes is below the minimum of %d MiB", size, MinImageSize>>20)
	}
	mkfs, err := MkfsPath()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create disk image: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create disk image %s: %w", path, err)
	}
	cmd := exec.CommandContext(ctx, mkfs, "-q", "-F", "-t", "ext4", "-O", "^has_journal", "-m", "0",
		"-i", strconv.Itoa(BytesPerInode), "-E", "lazy_itable_init=1,nodiscard", "-L", "bothy", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make the filesystem of disk image %s: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// MountImage attaches the image at path to a free loop device, which
// detaches itself when its last user goes (LO_FLAGS_AUTOCLEAR: the mount,
// once unmounted), and mounts its filesystem on target (nosuid, nodev).
// Only root can.
// Nothing is left attached if it fails.
func MountImage(path, target string) error {
	// noinit_itable: the inode tables of a sparse file read as zeros
	// already; the kernel would write them out in the background.
	return mountImage(path, target, "noinit_itable")
}

func mountImage(path, target, data string) error {
	img, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("mount disk image: %w", err)
	}
	defer img.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("mount disk image: %w", err)
	}
	defer ctl.Close()
	for range 10 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("mount disk image: find a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		loop, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("mount disk image: %w", err)
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], path)
		if err := unix.IoctlLoopConfigure(int(loop.Fd()), &cfg); err != nil {
			loop.Close()
			if errors.Is(err, unix.EBUSY) {
				continue // taken by another process meanwhile
			}
			return fmt.Errorf("mount disk image: attach %s: %w", dev, err)
		}
		// From here the mount holds the device; closing ours detaches it
		// if the mount failed.
		err = unix.Mount(dev, target, "ext4", unix.MS_NOSUID|unix.MS_NODEV, data)
		loop.Close()
		if err != nil {
			return fmt.Errorf("mount disk image %s on %s: %w", path, target, err)
		}
		return nil
	}
	return errors.New("mount disk image: no loop device stayed free")
}

// UnmountImage unmounts target when the image at path is mounted there, and
// reports whether it was; a mount of anything else on target is left alone,
// and reported. A mount still in use (a process with its working directory
// in it) is detached lazily: the loop device goes with its last user.
func UnmountImage(path, target string) (bool, error) {
	n, err := mountedAt(path, target)
	if err != nil || n == 0 {
		return false, err
	}
	for range n { // mounted twice: both go
		err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(target, unix.UMOUNT_NOFOLLOW|unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return true, fmt.Errorf("unmount disk image %s: %w", target, err)
		}
	}
	return true, nil
}

// mountedAt returns how many times the image at path is mounted on target,
// and an error if anything else is.
func mountedAt(path, target string) (int, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target))
	if err != nil {
		return 0, fmt.Errorf("find the mounts on %s: %w", target, err)
	}
	for _, m := range mounts {
		if !strings.HasPrefix(m.Source, "/dev/loop") || !slices.Contains(LoopDevices(path), m.Source) {
			return 0, fmt.Errorf("%s is mounted on %s, not the disk image %s: left alone", m.Source, target, path)
		}
	}
	return len(mounts), nil
}

// LoopDevices lists the loop devices (/dev/loopN) whose backing file is the
// image at path, whether it still exists or not.
func LoopDevices(path string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		backing := strings.TrimSuffix(strings.TrimSpace(string(data)), " (deleted)")
		if backing == path {
			out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return out
}

// ImageUsage returns what the filesystem of the image at path, mounted on
// target, uses, as df counts it (its own metadata included), and its size.
func ImageUsage(path, target string) (Usage, error) {
	if n, err := mountedAt(path, target); err != nil || n == 0 {
		return Usage{}, fmt.Errorf("read disk usage: the disk image %s is not mounted on %s (%v)", path, target, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return Usage{}, fmt.Errorf("read disk usage of %s: %w", target, err)
	}
	bs := uint64(st.Bsize)
	return Usage{Bytes: (st.Blocks - st.Bfree) * bs, Inodes: st.Files - st.Ffree, ByteLimit: st.Blocks * bs, InodeLimit: st.Files}, nil
}
