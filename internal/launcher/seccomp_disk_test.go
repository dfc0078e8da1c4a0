package launcher

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/disk"
)

const retEACCES = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)

// runProgramArgs runs prog, as the kernel would, on the seccomp_data of
// syscall nr with arguments args made by an arch caller. x/net/bpf's machine
// loads words big-endian, so each 32-bit field is stored that way at the
// offset where the kernel's (native) loads find it.
func runProgramArgs(t *testing.T, prog []byte, arch, nr uint32, args [6]uint64) uint32 {
	t.Helper()
	raw := make([]bpf.RawInstruction, len(prog)/8)
	if _, err := binary.Decode(prog, binary.NativeEndian, raw); err != nil {
		t.Fatal(err)
	}
	insns := make([]bpf.Instruction, len(raw))
	for i, r := range raw {
		insns[i] = r.Disassemble()
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("not a valid program: %v", err)
	}
	data := make([]byte, 64) // struct seccomp_data
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], arch)
	littleEndian := binary.NativeEndian.Uint16([]byte{1, 0}) == 1
	for i, a := range args {
		lo, hi := 16+8*i, 20+8*i
		if !littleEndian {
			lo, hi = hi, lo
		}
		binary.BigEndian.PutUint32(data[lo:], uint32(a))
		binary.BigEndian.PutUint32(data[hi:], uint32(a>>32))
	}
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(ret)
}

// TestDiskQuotaSeccomp compiles Docker's default profile (native ABI, as
// bothy's default) changed as for a sandbox under a project quota, and
// checks that the ioctls that move a file out of its project are denied
// (EACCES), whatever the request's upper 32 bits, while every other ioctl
// stays allowed, and other syscalls are judged as before.
func TestDiskQuotaSeccomp(t *testing.T) {
	native, ok := nativeAudit[runtime.GOARCH]
	if !ok {
		t.Skipf("requires amd64 or arm64, where bothy compiles profiles itself: this is %s", runtime.GOARCH)
	}
	spec := &specs.Spec{Process: &specs.Process{NoNewPrivileges: true, Capabilities: &specs.LinuxCapabilities{
		Bounding: []string{"CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE"}}}, Linux: &specs.Linux{}}
	var err error
	if spec.Linux.Seccomp, err = seccomp.GetDefaultProfile(spec); err != nil {
		t.Fatal(err)
	}
	spec.Linux.Seccomp.Architectures = spec.Linux.Seccomp.Architectures[:1] // the native ABI
	disk.DenyProjectChanges(spec.Linux.Seccomp)
	f, err := precompiledSeccomp(spec, t.TempDir())
	if err != nil || f == nil {
		t.Fatalf("precompiledSeccomp: %v %v", f, err)
	}
	prog := receiveProgram(t, f).Filter
	ioctl := sysno(t, "ioctl")
	for _, c := range []struct {
		what string
		req  uint64
		want uint32
	}{
		{"FS_IOC_FSSETXATTR", disk.IoctlFSSetXAttr, retEACCES},
		{"FS_IOC_FSSETXATTR, high bits set", disk.IoctlFSSetXAttr | 0xdead<<32, retEACCES},
		{"FS_IOC_SETFLAGS", disk.IoctlSetFlags, retEACCES},
		{"FS_IOC32_SETFLAGS", disk.IoctlSetFlags32, retEACCES},
		{"FS_IOC32_SETFLAGS, high bits set", disk.IoctlSetFlags32 | 1<<63, retEACCES},
		{"FS_IOC_FSGETXATTR", 0x801c581f, retAllow},
		{"TCGETS", unix.TCGETS, retAllow},
		{"TIOCGWINSZ", unix.TIOCGWINSZ, retAllow},
		{"0", 0, retAllow},
		{"all bits", 1<<64 - 1, retAllow},
	} {
		if got := runProgramArgs(t, prog, native.arch, ioctl, [6]uint64{3, c.req}); got != c.want {
			t.Errorf("ioctl %s (%#x): %#x, want %#x", c.what, c.req, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		want uint32
	}{{"read", retAllow}, {"mount", retEPERM}, {"chmod", retAllow}} {
		if got := runProgramArgs(t, prog, native.arch, sysno(t, c.name), [6]uint64{}); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}
