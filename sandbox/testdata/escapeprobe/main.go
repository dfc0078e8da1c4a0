// Command escapeprobe tries one escape from inside a sandbox and reports
// whether the kernel let it through. It is built static (CGO_ENABLED=0) by
// sandbox/escape_test.go and copied into the sandbox.
//
// Usage: escapeprobe CASE [ARG]. It prints "blocked: ERRNO" and exits 0 when
// the attempt failed, prints "ESCAPED: ..." and exits 1 when it succeeded,
// and exits 2 on a usage error. "escapeprobe errno N" makes syscall N without
// arguments and prints "errno: E", E the number it returned (0 for none).
//
// Two cases attack the executor's socket: "host-binds" lists the writable
// bind mounts of directories (a host directory the sandbox could plant
// files in that the host reads or connects to) and "hijack-socket PATH"
// takes over the socket at PATH, as root in the sandbox could when the
// socket's directory was the host's: it renames whatever is there, listens
// in its place, touches PATH.ready and logs every connection to PATH.log.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Syscall numbers the syscall package lacks or names differently.
var nr = map[string]map[string]uintptr{
	"amd64": {"init_module": 175, "finit_module": 313, "keyctl": 250, "add_key": 248, "bpf": 321,
		"perf_event_open": 298, "pivot_root": 155, "open_by_handle_at": 304, "unshare": 272},
	"arm64": {"init_module": 105, "finit_module": 273, "keyctl": 219, "add_key": 217, "bpf": 280,
		"perf_event_open": 241, "pivot_root": 41, "open_by_handle_at": 265, "unshare": 97},
}

func sys(name string, a ...uintptr) error {
	n, ok := nr[runtime.GOARCH][name]
	if !ok {
		fmt.Fprintf(os.Stderr, "no syscall number for %s on %s\n", name, runtime.GOARCH)
		os.Exit(2)
	}
	args := [6]uintptr{}
	copy(args[:], a)
	_, _, e := syscall.Syscall6(n, args[0], args[1], args[2], args[3], args[4], args[5])
	if e != 0 {
		return e
	}
	return nil
}

func str(s string) uintptr {
	b := append([]byte(s), 0)
	return uintptr(unsafe.Pointer(&b[0]))
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: escapeprobe CASE [ARG]")
		os.Exit(2)
	}
	arg := ""
	if len(os.Args) > 2 {
		arg = os.Args[2]
	}
	if os.Args[1] == "errno" {
		// errno N: make syscall N with no arguments and print what it
		// returned, whatever that was.
		n, _ := strconv.Atoi(arg)
		_, _, e := syscall.Syscall6(uintptr(n), 0, 0, 0, 0, 0, 0)
		fmt.Println("errno:", int(e))
		return
	}
	switch os.Args[1] {
	case "host-binds":
		hostBinds()
		return
	case "hijack-socket":
		hijack(arg)
		return
	}
	err := try(os.Args[1], arg)
	if err == nil {
		fmt.Println("ESCAPED:", os.Args[1], arg)
		os.Exit(1)
	}
	fmt.Println("blocked:", err)
}

func try(what, arg string) error {
	switch what {
	case "mount":
		os.MkdirAll("/tmp/probe-mnt", 0o755)
		return syscall.Mount("none", "/tmp/probe-mnt", "tmpfs", 0, "")
	case "mount-proc":
		os.MkdirAll("/tmp/probe-proc", 0o755)
		return syscall.Mount("proc", "/tmp/probe-proc", "proc", 0, "")
	case "remount-cgroup":
		return syscall.Mount("", "/sys/fs/cgroup", "", syscall.MS_REMOUNT|syscall.MS_BIND, "")
	case "umount":
		return syscall.Unmount(arg, syscall.MNT_DETACH)
	case "pivot_root":
		os.MkdirAll("/tmp/probe-old", 0o755)
		return sys("pivot_root", str("/tmp"), str("/tmp/probe-old"))
	case "init_module":
		img := make([]byte, 64)
		return sys("init_module", uintptr(unsafe.Pointer(&img[0])), uintptr(len(img)), str(""))
	case "finit_module":
		f, err := os.Open("/bin/busybox")
		if err != nil {
			f, err = os.Open(os.Args[0])
		}
		if err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		return sys("finit_module", f.Fd(), str(""), 0)
	case "keyctl":
		// KEYCTL_JOIN_SESSION_KEYRING (1) with a new name: creates a keyring.
		return sys("keyctl", 1, str("bothy-probe"))
	case "add_key":
		payload := []byte("secret")
		return sys("add_key", str("user"), str("bothy-probe"), uintptr(unsafe.Pointer(&payload[0])), uintptr(len(payload)), ^uintptr(2)) // KEY_SPEC_SESSION_KEYRING = -3
	case "bpf":
		// BPF_MAP_CREATE (0) of an array map: the cheapest bpf object.
		attr := [48]byte{}
		*(*uint32)(unsafe.Pointer(&attr[0])) = 2  // BPF_MAP_TYPE_ARRAY
		*(*uint32)(unsafe.Pointer(&attr[4])) = 4  // key size
		*(*uint32)(unsafe.Pointer(&attr[8])) = 4  // value size
		*(*uint32)(unsafe.Pointer(&attr[12])) = 1 // max entries
		return sys("bpf", 0, uintptr(unsafe.Pointer(&attr[0])), uintptr(len(attr)))
	case "perf_event_open":
		// A software CPU clock counter on this process, any CPU.
		attr := [128]byte{}
		*(*uint32)(unsafe.Pointer(&attr[0])) = 1   // PERF_TYPE_SOFTWARE
		*(*uint32)(unsafe.Pointer(&attr[4])) = 128 // size
		return sys("perf_event_open", uintptr(unsafe.Pointer(&attr[0])), 0, ^uintptr(0), ^uintptr(0), 0)
	case "open_by_handle_at":
		h := make([]byte, 8+8)
		*(*uint32)(unsafe.Pointer(&h[0])) = 8
		*(*int32)(unsafe.Pointer(&h[4])) = 1  // FILEID_INO32_GEN
		*(*uint32)(unsafe.Pointer(&h[8])) = 2 // inode 2: the root of most filesystems
		f, err := os.Open("/")
		if err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		return sys("open_by_handle_at", f.Fd(), uintptr(unsafe.Pointer(&h[0])), 0)
	case "unshare-userns":
		return sys("unshare", syscall.CLONE_NEWUSER|syscall.CLONE_NEWNS)
	case "ptrace":
		pid, _ := strconv.Atoi(arg)
		return syscall.PtraceAttach(pid)
	case "kill":
		pid, _ := strconv.Atoi(arg)
		return syscall.Kill(pid, syscall.SIGKILL)
	case "chroot-escape":
		// The classic: chroot into a subdirectory, climb out with .., chroot
		// there, and look for a file only the host has.
		os.MkdirAll("/tmp/probe-jail", 0o755)
		if err := syscall.Chroot("/tmp/probe-jail"); err != nil {
			return err
		}
		for range 64 {
			syscall.Chdir("..")
		}
		if err := syscall.Chroot("."); err != nil {
			return err
		}
		_, err := os.Stat(arg)
		return err
	case "unix-abstract":
		c, err := net.DialTimeout("unix", "@"+arg, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	case "tcp":
		c, err := net.DialTimeout("tcp", arg, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	case "forkbomb":
		return forkBomb()
	case "project":
		return leaveProject(arg)
	case "write":
		return os.WriteFile(arg, []byte("1\n"), 0o644)
	case "read":
		_, err := os.ReadFile(arg)
		return err
	}
	fmt.Fprintln(os.Stderr, "unknown case", what)
	os.Exit(2)
	return nil
}

// ownFS are the filesystems a sandbox gets for itself (its overlay root,
// proc, /dev's tmpfs...): a writable mount of one of them at its root is no
// host directory.
var ownFS = map[string]bool{"overlay": true, "proc": true, "tmpfs": true, "devpts": true, "mqueue": true,
	"sysfs": true, "cgroup": true, "cgroup2": true}

// hostBinds prints "blocked: none" when /proc/self/mountinfo has no
// writable mount of a directory that is a bind of part of a filesystem
// (root other than /) or of a filesystem the sandbox does not own, and
// "ESCAPED: ..." with the mounts otherwise.
func hostBinds() {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		fmt.Println("setup:", err)
		os.Exit(2)
	}
	defer f.Close()
	var found []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 6 || len(tail) < 1 {
			continue
		}
		root, point, opts, fstype := fields[3], unescape(fields[4]), fields[5], tail[0]
		if !strings.HasPrefix(opts, "rw") || (root == "/" && ownFS[fstype]) {
			continue
		}
		if st, err := os.Stat(point); err != nil || !st.IsDir() {
			continue
		}
		found = append(found, fmt.Sprintf("%s (%s %s)", point, fstype, root))
	}
	if len(found) > 0 {
		fmt.Println("ESCAPED: writable host directories:", strings.Join(found, ", "))
		os.Exit(1)
	}
	fmt.Println("blocked: none")
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// hijack listens at path in place of whatever was there and logs the first
// line and the API key header of every request it receives, answering each
// with a forged result, for a minute.
func hijack(path string) {
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.Rename(path, path+".old")
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Println("setup:", err)
		os.Exit(2)
	}
	os.Chmod(path, 0o777)
	log, err := os.OpenFile(path+".log", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Println("setup:", err)
		os.Exit(2)
	}
	os.WriteFile(path+".ready", nil, 0o644)
	time.AfterFunc(time.Minute, func() { os.Exit(0) })
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		r := bufio.NewReader(c)
		line, _ := r.ReadString('\n')
		key := ""
		for {
			h, err := r.ReadString('\n')
			if err != nil || strings.TrimSpace(h) == "" {
				break
			}
			if k, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(k, "X-Session-API-Key") {
				key = strings.TrimSpace(v)
			}
		}
		fmt.Fprintf(log, "%s key=%q\n", strings.TrimSpace(line), key)
		body := `{"id":"p1","exit_code":0,"stdout":"hijacked\n","stderr":""}`
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		c.Close()
	}
}

// forkBomb forks children that sleep until fork fails, then kills and reaps
// them and returns the error with the number of children it had. The
// children make raw syscalls only: nothing of the Go runtime runs after a
// raw fork.
func forkBomb() error {
	var pids []int
	var err error
	for {
		r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
		if e != 0 {
			err = e
			break
		}
		if r == 0 {
			for {
				syscall.RawSyscall6(syscall.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
			}
		}
		pids = append(pids, int(r))
	}
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	for range pids {
		syscall.Wait4(-1, nil, 0, nil)
	}
	return fmt.Errorf("%w after %d processes", err, len(pids))
}

// leaveProject tries to move the file or directory path out of its project
// quota: its project id to 0 (FS_IOC_FSSETXATTR), and the inheritance of it
// off (FS_IOC_SETFLAGS). It returns nil if either worked.
func leaveProject(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var fa struct {
		xflags, extsize, nextents, projid, cowextsize uint32
		pad                                           [8]byte
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), 0x801c581f, uintptr(unsafe.Pointer(&fa))); e != 0 {
		return fmt.Errorf("FS_IOC_FSGETXATTR: %w", e)
	}
	fa.projid = 0
	fa.xflags &^= 0x200 // FS_XFLAG_PROJINHERIT
	_, _, e1 := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), 0x401c5820, uintptr(unsafe.Pointer(&fa)))
	if e1 == 0 {
		return nil
	}
	var flags uint64
	_, _, e2 := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), 0x40086602, uintptr(unsafe.Pointer(&flags))) // FS_IOC_SETFLAGS, all off
	if e2 == 0 {
		return nil
	}
	return fmt.Errorf("FS_IOC_FSSETXATTR: %v; FS_IOC_SETFLAGS: %v", e1, e2)
}
