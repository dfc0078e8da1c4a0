package disk

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// TestLoopImage makes an image, mounts it, fills it past its size (ENOSPC),
// reads its usage, and unmounts it leaving no mount and no loop device.
// Unprivileged, making the image works and mounting it is refused.
func TestLoopImage(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	if err := CreateImage(context.Background(), img, 1<<20); err == nil || !strings.Contains(err.Error(), "minimum") {
		t.Errorf("1 MiB image: %v", err)
	}
	if err := CreateImage(context.Background(), img, 32<<20); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil || st.Size != 32<<20 || st.Blocks*512 > 4<<20 {
		t.Errorf("image: size %d, %d bytes allocated (want sparse): %v", st.Size, st.Blocks*512, err)
	}
	if err := CreateImage(context.Background(), img, 32<<20); err == nil {
		t.Error("CreateImage overwrote an existing file")
	}
	target := filepath.Join(dir, "mnt")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	err := MountImage(img, target)
	if os.Getuid() != 0 {
		if err == nil {
			t.Fatal("an unprivileged caller mounted a loop image")
		}
		if !errors.Is(err, os.ErrPermission) {
			t.Errorf("unprivileged mount: %v, want a permission error", err)
		}
		if devs := LoopDevices(img); len(devs) != 0 {
			t.Errorf("loop devices left: %v", devs)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { UnmountImage(img, target) })
	if devs := LoopDevices(img); len(devs) != 1 {
		t.Fatalf("loop devices of the image: %v", devs)
	}

	// Fill it: ENOSPC before 32 MiB are written.
	f, err := os.Create(filepath.Join(target, "big"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{1}, 1<<20)
	written := 0
	for ; written < 64; written++ {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if !errors.Is(err, unix.ENOSPC) || written > 32 || written < 16 {
		t.Errorf("filling a 32 MiB image: %v after %d MiB", err, written)
	}
	u, err := ImageUsage(img, target)
	if err != nil || u.Bytes < 16<<20 || u.ByteLimit > 32<<20 || u.InodeLimit != 32<<20/BytesPerInode || u.Inodes == 0 {
		t.Errorf("usage %+v %v", u, err)
	}
	// Inodes run out too.
	var ierr error
	for i := range 10000 {
		if ierr = os.WriteFile(filepath.Join(target, "f"+strconv.Itoa(i)), nil, 0o600); ierr != nil {
			break
		}
	}
	if !errors.Is(ierr, unix.ENOSPC) {
		t.Errorf("creating 10000 files in 4096 inodes: %v", ierr)
	}

	// Another filesystem on the target is not ours to unmount.
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o700)
	if err := unix.Mount("tmpfs", other, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := UnmountImage(img, other); err == nil || !strings.Contains(err.Error(), "left alone") {
		t.Errorf("unmounting a tmpfs as the image: %v", err)
	}
	unix.Unmount(other, 0)

	if was, err := UnmountImage(img, target); !was || err != nil {
		t.Fatalf("unmount: %v %v", was, err)
	}
	if ms, _ := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target)); len(ms) != 0 {
		t.Errorf("still mounted: %+v", ms)
	}
	// The kernel frees an autoclear loop device once its last user is
	// gone, which a lazy unmount (or a busy machine) may leave to later.
	devs := LoopDevices(img)
	for deadline := time.Now().Add(10 * time.Second); len(devs) != 0 && time.Now().Before(deadline); devs = LoopDevices(img) {
		time.Sleep(50 * time.Millisecond)
	}
	if len(devs) != 0 {
		t.Errorf("loop devices left 10 s after unmount: %v", devs)
	}
	if was, err := UnmountImage(img, target); was || err != nil {
		t.Errorf("second unmount: %v %v", was, err)
	}
	if _, err := ImageUsage(img, target); err == nil {
		t.Error("usage of an image that is not mounted")
	}
}
