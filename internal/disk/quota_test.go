package disk

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestProjectQuota sets a project quota on a real ext4 filesystem made with
// project quotas and mounted with prjquota, and checks what bothy relies on:
// writes and file creations past the limit fail with EDQUOT; ext4 lets a
// process with CAP_SYS_RESOURCE past the limit, but overlayfs does not let
// root's writes through it go past, but for writes through a shared mapping
// by a process with the capability (package sandbox gives a sandbox under
// a quota none); through the overlay, root can move a file out of the
// project with FS_IOC_FSSETXATTR (which package sandbox denies with
// seccomp). Unprivileged, the filesystem's support is visible and a
// user may tag its own directory, but setting or reading a limit is refused
// (EPERM): a rootless bothy cannot use project quotas.
func TestProjectQuota(t *testing.T) {
	withQuotaDir(t, func(t *testing.T, dir string) {
		if os.Getuid() == 0 {
			projectQuotaRoot(t, dir)
		} else {
			projectQuotaUser(t, dir)
		}
	})
}

// capless runs fn on a thread of its own without CAP_SYS_RESOURCE (with
// which ext4 lets a process past quotas); the thread ends with it.
// Capabilities belong to a thread, and this one is never unlocked.
func capless(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		err := unix.Capget(&hdr, &data[0])
		data[0].Effective &^= 1 << unix.CAP_SYS_RESOURCE
		data[0].Permitted &^= 1 << unix.CAP_SYS_RESOURCE
		if err == nil {
			err = unix.Capset(&hdr, &data[0])
		}
		if err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// mmapFill makes path size bytes long and writes every page of it through a
// shared mapping: blocks are allocated, and quotas charged, as the pages
// fault, with the credentials of the writer.
func mmapFill(path string, size int) (err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		return err
	}
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(b)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fault writing the mapping (SIGBUS): %v", r)
		}
	}()
	for i := 0; i < size; i += os.Getpagesize() {
		b[i] = 1
	}
	return unix.Msync(b, unix.MS_SYNC)
}

// fill writes up to n MiB to path and returns how many it wrote and the
// error that stopped it.
func fill(path string, n int) (int, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{7}, 1<<20)
	for i := range n {
		if _, err := f.Write(chunk); err != nil {
			return i, err
		}
	}
	return n, f.Sync()
}

func projectQuotaRoot(t *testing.T, dir string) {
	root, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := ProjectQuotas(root); err != nil {
		t.Fatal(err)
	}
	const id = 1<<24 + 42
	p := filepath.Join(dir, "p")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	pd, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	if err := SetProject(pd, id); err != nil {
		t.Fatal(err)
	}
	if got, err := Project(pd); err != nil || got != id {
		t.Fatalf("project of %s: %d %v", p, got, err)
	}
	if err := SetProjectLimit(root, id, 4<<20, 64); err != nil {
		t.Fatal(err)
	}
	if u, err := ProjectUsage(root, id); err != nil || u.ByteLimit != 4<<20 || u.InodeLimit != 64 || u.Inodes != 1 {
		t.Fatalf("usage %+v %v", u, err)
	}

	// Root with CAP_SYS_RESOURCE goes past the limit (ext4's
	// ignore_hardlimit)...
	if n, err := fill(filepath.Join(p, "root"), 6); err != nil {
		t.Errorf("root with CAP_SYS_RESOURCE stopped at %d MiB: %v (ext4 used to let it through)", n, err)
	} else {
		t.Logf("root with CAP_SYS_RESOURCE wrote %d MiB under a 4 MiB quota", n)
	}
	os.Remove(filepath.Join(p, "root"))
	// ...a thread without it does not, in a subdirectory either: new files
	// inherit the project.
	sub := filepath.Join(p, "sub")
	os.Mkdir(sub, 0o755)
	var n int
	err = capless(func() (err error) { n, err = fill(filepath.Join(sub, "f"), 8); return err })
	if !errors.Is(err, unix.EDQUOT) || n > 4 {
		t.Errorf("writing 8 MiB under a 4 MiB quota: %v after %d MiB", err, n)
	}
	t.Logf("without CAP_SYS_RESOURCE: %v after %d MiB", err, n)
	if u, err := ProjectUsage(root, id); err != nil || u.Bytes > 4<<20 || u.Bytes < 3<<20 {
		t.Errorf("usage after the fill: %+v %v", u, err)
	}
	os.Remove(filepath.Join(sub, "f"))
	err = capless(func() error {
		for i := range 100 {
			if err := os.WriteFile(filepath.Join(sub, strconv.Itoa(i)), nil, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, unix.EDQUOT) {
		t.Errorf("creating 100 files under a 64-inode quota: %v", err)
	}

	// An overlay whose upper directory is in the project, mounted by root:
	// root's writes through it stop at the limit, copy-ups included
	// (overlayfs drops CAP_SYS_RESOURCE from the credentials it writes
	// with), but not a process with CAP_SYS_RESOURCE that writes through a
	// shared mapping (its page faults allocate the blocks, as itself): a
	// sandbox under a project quota must not have the capability.
	if err := SetProjectLimit(root, id, 0, 0); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(sub)
	if err := SetProjectLimit(root, id, 4<<20, 1000); err != nil {
		t.Fatal(err)
	}
	lower, upper, work, merged := filepath.Join(dir, "lower"), filepath.Join(p, "upper"), filepath.Join(p, "work"), filepath.Join(dir, "merged")
	for _, d := range []string{lower, upper, work, merged} {
		os.Mkdir(d, 0o755)
	}
	if _, err := fill(filepath.Join(lower, "big"), 3); err != nil {
		t.Fatal(err)
	}
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Fatalf("mount overlay: %v", err)
	}
	defer unix.Unmount(merged, unix.MNT_DETACH)
	if n, err := fill(filepath.Join(merged, "big"), 4); !errors.Is(err, unix.EDQUOT) || n > 1 {
		t.Errorf("root appending 4 MiB to a 3 MiB lower file through the overlay: %v after %d MiB", err, n)
	}
	os.Remove(filepath.Join(merged, "big"))
	if n, err := fill(filepath.Join(merged, "new"), 8); !errors.Is(err, unix.EDQUOT) || n > 4 {
		t.Errorf("root writing 8 MiB through the overlay: %v after %d MiB", err, n)
	} else {
		t.Logf("root through the overlay: %v after %d MiB", err, n)
	}
	os.Remove(filepath.Join(merged, "new"))
	if err := mmapFill(filepath.Join(merged, "mapped"), 8<<20); err != nil {
		t.Errorf("root with CAP_SYS_RESOURCE writing 8 MiB through a mapping: %v (ext4 used to let it through)", err)
	} else {
		t.Log("root with CAP_SYS_RESOURCE wrote 8 MiB through a mapping under a 4 MiB quota")
	}
	os.Remove(filepath.Join(merged, "mapped"))
	if err := capless(func() error { return mmapFill(filepath.Join(merged, "mapped"), 8<<20) }); err == nil {
		t.Error("a process without CAP_SYS_RESOURCE wrote 8 MiB through a mapping under a 4 MiB quota")
	} else {
		t.Logf("without CAP_SYS_RESOURCE, through a mapping: %v", err)
	}
	os.Remove(filepath.Join(merged, "mapped"))
	if n, err := fill(filepath.Join(merged, "new"), 3); err != nil {
		t.Fatalf("writing 3 MiB through the overlay again: %v after %d MiB", err, n)
	}
	// Root moves a file out of the project through the overlay, then
	// writes past the limit: the escape seccomp closes in bothy's
	// sandboxes.
	f, err := os.OpenFile(filepath.Join(merged, "new"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fa fsxattr
	_, _, e1 := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIOCFSGetXAttr, uintptr(unsafe.Pointer(&fa)))
	fa.ProjID = 0
	_, _, e2 := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIOCFSSetXAttr, uintptr(unsafe.Pointer(&fa)))
	f.Close()
	if e1 != 0 || e2 != 0 {
		t.Errorf("FS_IOC_FSSETXATTR through the overlay: %v %v (the kernel refuses it now: the seccomp rule may be moot)", e1, e2)
	} else if n, err := fill(filepath.Join(merged, "new"), 2); err != nil {
		t.Errorf("after leaving the project: %v after %d MiB", err, n)
	} else {
		t.Logf("root through the overlay moved a file to project 0 and wrote %d MiB more", n)
	}

	// A user namespace cannot move files between projects.
	// (bothy's rootless sandboxes; checked in package sandbox.)

	// Lifting the limit.
	if err := SetProjectLimit(root, id, 0, 0); err != nil {
		t.Fatal(err)
	}
	if u, err := ProjectUsage(root, id); err != nil || u.ByteLimit != 0 || u.InodeLimit != 0 {
		t.Errorf("usage after lifting the limit: %+v %v", u, err)
	}
}

func projectQuotaUser(t *testing.T, dir string) {
	root, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := ProjectQuotas(root); err != nil {
		t.Errorf("an unprivileged caller does not see the project quotas: %v", err)
	}
	p := filepath.Join(dir, "mine")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	pd, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	// Its owner may tag a directory (in the initial user namespace)...
	if err := SetProject(pd, 1<<24+7); err != nil {
		t.Errorf("tagging its own directory: %v", err)
	}
	// ...but only CAP_SYS_ADMIN sets or reads a project's limit.
	if err := SetProjectLimit(root, 1<<24+7, 1<<20, 10); !errors.Is(err, unix.EPERM) {
		t.Errorf("unprivileged SetProjectLimit: %v, want EPERM", err)
	}
	if _, err := ProjectUsage(root, 1<<24+7); !errors.Is(err, unix.EPERM) {
		t.Errorf("unprivileged ProjectUsage: %v, want EPERM", err)
	}
}
