package launcher

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Compiling Docker's profile with libseccomp takes about 5 ms, and
// libcontainer does it again in every container's init, on the start-up
// path. bothy compiles a profile once, keeps the BPF program in a cache keyed
// by the profile, and hands it to the executor, which loads it first thing
// (before it serves or starts anything; the sandbox's processes are all its
// descendants). Profiles this cannot express the same way (no_new_privs
// off, filter flags, notify actions, more than the native architecture) go
// to libcontainer as before.

// seccompFormat names the cached program's layout (an ipc.SeccompProgram
// frame) and how it is made: change it when either changes.
const seccompFormat = "bothy-seccomp-2"

// x32SyscallBit marks a syscall number of the x32 ABI (__X32_SYSCALL_BIT).
const x32SyscallBit = 0x40000000

// nativeAudit is the AUDIT_ARCH_* value of the architectures whose programs
// bothy builds; x32 tells whether the x32 syscall bit must be checked.
var nativeAudit = map[string]struct {
	arch uint32
	x32  bool
}{
	"amd64": {unix.AUDIT_ARCH_X86_64, true},
	"arm64": {unix.AUDIT_ARCH_AARCH64, false},
}

// precompiledSeccomp returns the file of the ipc.SeccompProgram for the
// spec's profile (the program and the flags to load it with), from the cache
// in dir or made now, opened for reading; nil when the profile has to go
// through libcontainer.
func precompiledSeccomp(spec *specs.Spec, dir string) (*os.File, error) {
	if spec.Linux == nil || spec.Linux.Seccomp == nil || spec.Process == nil || !spec.Process.NoNewPrivileges || dir == "" {
		return nil, nil
	}
	native, ok := nativeAudit[runtime.GOARCH]
	if !ok {
		return nil, nil
	}
	config, err := specconv.SetupSeccomp(spec.Linux.Seccomp)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	if config == nil || config.ListenerPath != "" || config.DefaultAction == configs.Notify ||
		slices.ContainsFunc(config.Syscalls, func(s *configs.Syscall) bool { return s.Action == configs.Notify }) {
		return nil, nil
	}
	for _, a := range config.Architectures { // libcontainer's names: amd64, arm64…
		if a != runtime.GOARCH {
			return nil, nil
		}
	}
	// libcontainer asks for SPEC_ALLOW unless the profile says otherwise.
	var flags uint32
	for _, f := range config.Flags {
		switch f {
		case "SECCOMP_FILTER_FLAG_TSYNC": // the executor always synchronises its threads
		case specs.LinuxSeccompFlagLog:
			flags |= unix.SECCOMP_FILTER_FLAG_LOG
		case specs.LinuxSeccompFlagSpecAllow:
			flags |= unix.SECCOMP_FILTER_FLAG_SPEC_ALLOW
		default:
			return nil, nil
		}
	}
	major, minor, micro := libseccomp.GetLibraryVersion()
	key, err := json.Marshal(struct {
		Format, Arch string
		Libseccomp   [3]uint
		Config       *configs.Seccomp
	}{seccompFormat, runtime.GOARCH, [3]uint{major, minor, micro}, config})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(key)
	path := filepath.Join(dir, hex.EncodeToString(sum[:])+".bpf")
	if f, err := os.Open(path); err == nil {
		return f, nil
	}
	prog, err := compileSeccomp(config, native.arch, native.x32)
	if err != nil {
		return nil, err
	}
	frame, err := ipc.Encode(ipc.SeccompProgram{Flags: flags, Filter: prog})
	if err != nil {
		return nil, fmt.Errorf("seccomp program: %w", err)
	}
	if err := writeFileAtomic(dir, path, frame); err != nil {
		return nil, fmt.Errorf("cache seccomp program: %w", err)
	}
	return os.Open(path)
}

// compileSeccomp builds the program libcontainer would load for config on a
// single native architecture: libseccomp's filter, after a stub that answers
// ENOSYS to syscalls newer than any the profile names (so that callers fall
// back, as glibc does for clone3), unless the default action allows.
func compileSeccomp(config *configs.Seccomp, auditArch uint32, x32 bool) ([]byte, error) {
	defAct, err := scmpAction(config.DefaultAction, config.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("seccomp default action: %w", err)
	}
	filter, err := libseccomp.NewFilter(defAct)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	defer filter.Release()
	if len(config.Syscalls) > 32 {
		_ = filter.SetOptimize(2) // a binary tree, as libcontainer asks for
	}
	if err := filter.SetNoNewPrivsBit(false); err != nil {
		return nil, err
	}
	var last libseccomp.ScmpSyscall
	for _, call := range config.Syscalls {
		nr, err := libseccomp.GetSyscallFromName(call.Name)
		if err != nil {
			continue // unknown to libseccomp: libcontainer skips it too
		}
		last = max(last, nr)
		if err := addRule(filter, call, nr, defAct); err != nil {
			return nil, err
		}
	}
	body, err := exportBPF(filter)
	if err != nil {
		return nil, fmt.Errorf("export seccomp program: %w", err)
	}
	allows := slices.Contains([]configs.Action{configs.Allow, configs.Log, configs.Trace}, config.DefaultAction)
	enosys := config.DefaultErrnoRet != nil && *config.DefaultErrnoRet == uint(unix.ENOSYS)
	if allows || enosys || last == 0 {
		return body, nil
	}
	stub, err := bpf.Assemble(enosysStub(auditArch, x32, uint32(last)))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := binary.Write(&out, binary.NativeEndian, stub); err != nil {
		return nil, err
	}
	out.Write(body)
	return out.Bytes(), nil
}

// exportBPF returns filter's program. libseccomp writes it to a file
// descriptor; a pipe holds all of it (at most 4096 instructions, 32 KiB).
func exportBPF(filter *libseccomp.ScmpFilter) ([]byte, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	err = filter.ExportBPF(w)
	w.Close()
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// enosysStub answers ENOSYS on the native architecture to syscall numbers
// above last, and hands everything else to the program that follows it.
func enosysStub(auditArch uint32, x32 bool, last uint32) []bpf.Instruction {
	check := []bpf.Instruction{bpf.LoadAbsolute{Off: 0, Size: 4}} // syscall number
	if x32 {
		// x32 calls carry bit 30; libseccomp's program judges them.
		check = append(check, bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32SyscallBit, SkipTrue: 2})
	}
	check = append(check,
		bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: last, SkipFalse: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)})
	return append([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // arch
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: auditArch, SkipTrue: uint8(len(check))},
	}, check...)
}

// addRule adds call's rule the way libcontainer does: conditions on distinct
// arguments form one rule; several on one argument, one rule each.
func addRule(filter *libseccomp.ScmpFilter, call *configs.Syscall, nr libseccomp.ScmpSyscall, defAct libseccomp.ScmpAction) error {
	act, err := scmpAction(call.Action, call.ErrnoRet)
	if err != nil {
		return fmt.Errorf("seccomp rule for %s: %w", call.Name, err)
	}
	if act == defAct {
		return nil
	}
	if len(call.Args) == 0 {
		if err := filter.AddRule(nr, act); err != nil {
			return fmt.Errorf("seccomp rule for %s: %w", call.Name, err)
		}
		return nil
	}
	var conds []libseccomp.ScmpCondition
	seen := map[uint]bool{}
	shared := false
	for _, a := range call.Args {
		op, ok := scmpOps[a.Op]
		if !ok {
			return fmt.Errorf("seccomp rule for %s: unknown operator %v", call.Name, a.Op)
		}
		c, err := libseccomp.MakeCondition(a.Index, op, a.Value, a.ValueTwo)
		if err != nil {
			return fmt.Errorf("seccomp rule for %s: %w", call.Name, err)
		}
		shared = shared || seen[a.Index]
		seen[a.Index] = true
		conds = append(conds, c)
	}
	groups := [][]libseccomp.ScmpCondition{conds}
	if shared {
		groups = groups[:0]
		for _, c := range conds {
			groups = append(groups, []libseccomp.ScmpCondition{c})
		}
	}
	for _, g := range groups {
		if err := filter.AddRuleConditional(nr, act, g); err != nil {
			return fmt.Errorf("seccomp rule for %s: %w", call.Name, err)
		}
	}
	return nil
}

var scmpOps = map[configs.Operator]libseccomp.ScmpCompareOp{
	configs.EqualTo:              libseccomp.CompareEqual,
	configs.NotEqualTo:           libseccomp.CompareNotEqual,
	configs.GreaterThan:          libseccomp.CompareGreater,
	configs.GreaterThanOrEqualTo: libseccomp.CompareGreaterEqual,
	configs.LessThan:             libseccomp.CompareLess,
	configs.LessThanOrEqualTo:    libseccomp.CompareLessOrEqual,
	configs.MaskEqualTo:          libseccomp.CompareMaskedEqual,
}

// scmpAction maps a libcontainer action as libcontainer does (an errno
// action without a number is EPERM).
func scmpAction(act configs.Action, errnoRet *uint) (libseccomp.ScmpAction, error) {
	ret := func(a libseccomp.ScmpAction, def int16) libseccomp.ScmpAction {
		if errnoRet != nil {
			return a.SetReturnCode(int16(*errnoRet))
		}
		return a.SetReturnCode(def)
	}
	switch act {
	case configs.Kill, configs.KillThread:
		return libseccomp.ActKillThread, nil
	case configs.KillProcess:
		return libseccomp.ActKillProcess, nil
	case configs.Errno:
		return ret(libseccomp.ActErrno, int16(unix.EPERM)), nil
	case configs.Trace:
		return ret(libseccomp.ActTrace, int16(unix.EPERM)), nil
	case configs.Trap:
		return libseccomp.ActTrap, nil
	case configs.Allow:
		return libseccomp.ActAllow, nil
	case configs.Log:
		return libseccomp.ActLog, nil
	}
	return libseccomp.ActInvalid, errors.New("unsupported action")
}

// writeFileAtomic writes path through a temporary file in dir, so that a
// concurrent reader sees all of it or nothing.
func writeFileAtomic(dir, path string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
