package launcher

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/ipc"
)

// Seccomp return values (SECCOMP_RET_*).
const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// testProfile denies by default, allows a few syscalls, one of them only
// with a given argument, and ends at openat2 (437) as its newest syscall.
func testProfile() *specs.LinuxSeccomp {
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActErrno,
		Syscalls: []specs.LinuxSyscall{
			{Names: []string{"read", "write", "openat2"}, Action: specs.ActAllow},
			{Names: []string{"personality"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 8, Op: specs.OpEqualTo}}},
		},
	}
}

// runProgram is runProgramArgs with first argument arg0 and the others 0.
func runProgram(t *testing.T, prog []byte, arch, nr uint32, arg0 uint64) uint32 {
	t.Helper()
	return runProgramArgs(t, prog, arch, nr, [6]uint64{arg0})
}

// receiveProgram reads the ipc.SeccompProgram frame of f, as the executor
// does, and closes f.
func receiveProgram(t *testing.T, f *os.File) ipc.SeccompProgram {
	t.Helper()
	defer f.Close()
	var sp ipc.SeccompProgram
	if _, err := ipc.Receive(f, &sp); err != nil {
		t.Fatalf("read the compiled program: %v", err)
	}
	return sp
}

func sysno(t *testing.T, name string) uint32 {
	t.Helper()
	nr, err := libseccomp.GetSyscallFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(nr)
}

func TestCompiledSeccomp(t *testing.T) {
	native, ok := nativeAudit[runtime.GOARCH]
	if !ok {
		t.Skipf("requires amd64 or arm64, where bothy compiles profiles itself: this is %s", runtime.GOARCH)
	}
	spec := &specs.Spec{Process: &specs.Process{NoNewPrivileges: true}, Linux: &specs.Linux{Seccomp: testProfile()}}
	dir := t.TempDir()
	f, err := precompiledSeccomp(spec, dir)
	if err != nil || f == nil {
		t.Fatalf("precompiledSeccomp: %v %v", f, err)
	}
	sp := receiveProgram(t, f)
	prog := sp.Filter
	// No flags in the profile: libcontainer's default, SPEC_ALLOW.
	if sp.Flags != unix.SECCOMP_FILTER_FLAG_SPEC_ALLOW {
		t.Errorf("flags %#x, want SPEC_ALLOW", sp.Flags)
	}
	last := sysno(t, "openat2")
	for _, c := range []struct {
		what string
		arch uint32
		nr   uint32
		arg0 uint64
		want uint32
	}{
		{"allowed", native.arch, sysno(t, "read"), 0, retAllow},
		{"denied by default", native.arch, sysno(t, "mount"), 0, retEPERM},
		{"argument matches", native.arch, sysno(t, "personality"), 8, retAllow},
		{"argument differs", native.arch, sysno(t, "personality"), 9, retEPERM},
		{"argument's high word differs", native.arch, sysno(t, "personality"), 8 | 1<<32, retEPERM},
		{"newest in the profile", native.arch, last, 0, retAllow},
		{"newer than the profile", native.arch, last + 1, 0, retNOSYS},
		{"far newer", native.arch, 1000, 0, retNOSYS},
	} {
		if got := runProgram(t, prog, c.arch, c.nr, c.arg0); got != c.want {
			t.Errorf("%s (nr %d, arg %#x): %#x, want %#x", c.what, c.nr, c.arg0, got, c.want)
		}
	}
	// Other ABIs get libseccomp's bad-architecture answer, never ENOSYS.
	foreign := uint32(unix.AUDIT_ARCH_I386)
	if runtime.GOARCH == "arm64" {
		foreign = unix.AUDIT_ARCH_ARM
	}
	if got := runProgram(t, prog, foreign, 1000, 0); got == retAllow || got == retNOSYS {
		t.Errorf("foreign architecture: %#x", got)
	}
	if native.x32 {
		if got := runProgram(t, prog, native.arch, x32SyscallBit|sysno(t, "read"), 0); got == retAllow || got == retNOSYS {
			t.Errorf("x32 call: %#x", got)
		}
	}

	// Compiled once: the second sandbox finds the cached program.
	stat1, _ := os.Stat(f.Name())
	f2, err := precompiledSeccomp(spec, dir)
	if err != nil || f2 == nil || f2.Name() != f.Name() {
		t.Fatalf("second precompiledSeccomp: %v %v", f2, err)
	}
	f2.Close()
	if stat2, _ := os.Stat(f.Name()); !stat2.ModTime().Equal(stat1.ModTime()) {
		t.Error("the cached program was written again")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("cache holds %d entries, want 1", len(entries))
	}
	// The profile's flags become the executor's load flags (TSYNC it
	// always sets itself).
	flagged := &specs.Spec{Process: spec.Process, Linux: &specs.Linux{Seccomp: testProfile()}}
	flagged.Linux.Seccomp.Flags = []specs.LinuxSeccompFlag{specs.LinuxSeccompFlagLog, "SECCOMP_FILTER_FLAG_TSYNC"}
	f4, err := precompiledSeccomp(flagged, dir)
	if err != nil || f4 == nil {
		t.Fatalf("flagged profile: %v %v", f4, err)
	}
	if flags := receiveProgram(t, f4).Flags; flags != unix.SECCOMP_FILTER_FLAG_LOG {
		t.Errorf("flags %#x, want LOG", flags)
	}
	// A different profile is another program.
	other := &specs.Spec{Process: spec.Process, Linux: &specs.Linux{Seccomp: testProfile()}}
	other.Linux.Seccomp.DefaultAction = specs.ActKillProcess
	f3, err := precompiledSeccomp(other, dir)
	if err != nil || f3 == nil || f3.Name() == f.Name() {
		t.Fatalf("other profile: %v %v", f3, err)
	}
	f3.Close()
}

// TestSeccompLeftToLibcontainer: what the executor cannot load the same way
// stays in the spec for libcontainer.
func TestSeccompLeftToLibcontainer(t *testing.T) {
	if _, ok := nativeAudit[runtime.GOARCH]; !ok {
		t.Skipf("requires amd64 or arm64: this is %s", runtime.GOARCH)
	}
	foreignArch := specs.ArchX86
	if runtime.GOARCH == "arm64" {
		foreignArch = specs.ArchARM
	}
	for name, change := range map[string]func(*specs.Spec){
		"no_new_privs off":       func(s *specs.Spec) { s.Process.NoNewPrivileges = false },
		"another architecture":   func(s *specs.Spec) { s.Linux.Seccomp.Architectures = []specs.Arch{foreignArch} },
		"a notify action":        func(s *specs.Spec) { s.Linux.Seccomp.Syscalls[0].Action = specs.ActNotify },
		"a listener":             func(s *specs.Spec) { s.Linux.Seccomp.ListenerPath = "/run/agent.sock" },
		"no profile":             func(s *specs.Spec) { s.Linux.Seccomp = nil },
		"no cache directory":     nil,
		"an empty profile (off)": func(s *specs.Spec) { s.Linux.Seccomp = &specs.LinuxSeccomp{} },
	} {
		spec := &specs.Spec{Process: &specs.Process{NoNewPrivileges: true}, Linux: &specs.Linux{Seccomp: testProfile()}}
		dir := filepath.Join(t.TempDir(), "cache")
		if change != nil {
			change(spec)
		} else {
			dir = ""
		}
		f, err := precompiledSeccomp(spec, dir)
		if f != nil || err != nil {
			t.Errorf("%s: got a program (%v, %v)", name, f, err)
		}
	}
}

// The stub is what runc prepends, for one native architecture.
func TestEnosysStub(t *testing.T) {
	prog, err := bpf.Assemble(enosysStub(unix.AUDIT_ARCH_X86_64, true, 450))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	binary.Write(&buf, binary.NativeEndian, prog)
	// After the stub, a program that allows everything.
	allow, _ := bpf.Assemble([]bpf.Instruction{bpf.RetConstant{Val: retAllow}})
	binary.Write(&buf, binary.NativeEndian, allow)
	for _, c := range []struct {
		arch, nr, want uint32
	}{
		{unix.AUDIT_ARCH_X86_64, 450, retAllow},
		{unix.AUDIT_ARCH_X86_64, 451, retNOSYS},
		{unix.AUDIT_ARCH_X86_64, x32SyscallBit | 451, retAllow},
		{unix.AUDIT_ARCH_I386, 451, retAllow},
	} {
		if got := runProgram(t, buf.Bytes(), c.arch, c.nr, 0); got != c.want {
			t.Errorf("arch %#x nr %#x: %#x, want %#x", c.arch, c.nr, got, c.want)
		}
	}
}
