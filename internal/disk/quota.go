package disk

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"unsafe"

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The kernel's quota and file-attribute interfaces (linux/quota.h,
// linux/dqblk_xfs.h, linux/fs.h); the ioctl numbers are the same on every
// architecture bothy builds for.
const (
	prjQuota = 2 // PRJQUOTA

	qGetQuota   = 0x800007
	qSetQuota   = 0x800008
	qXGetQStatV = 'X'<<8 + 8 // XQM_CMD(8)

	qifBLimits = 1 << 0
	qifSpace   = 1 << 1
	qifILimits = 1 << 2
	qifInodes  = 1 << 3
	qifBlock   = 1024 // QIF_DQBLKSIZE: the unit of dqb_bhardlimit

	fsQStatVVersion1 = 1
	fsQuotaPDQAcct   = 1 << 4
	fsQuotaPDQEnfd   = 1 << 5

	fsIOCFSGetXAttr    = 0x801c581f // FS_IOC_FSGETXATTR
	fsIOCFSSetXAttr    = 0x401c5820 // FS_IOC_FSSETXATTR
	fsXFlagProjInherit = 0x200      // FS_XFLAG_PROJINHERIT
)

// Ioctls that change a file's project id or the inheritance of it: a
// process that may make them on its files (their owner, in the initial user
// namespace) can move them out of a project quota. Package sandbox denies
// them with seccomp in sandboxes it bounds with a project quota.
const (
	IoctlFSSetXAttr = fsIOCFSSetXAttr
	IoctlSetFlags   = 0x40086602 // FS_IOC_SETFLAGS (FS_PROJINHERIT_FL)
	IoctlSetFlags32 = 0x40046602 // FS_IOC32_SETFLAGS
)

// ifDqblk is struct if_dqblk.
type ifDqblk struct {
	BHardLimit, BSoftLimit, CurSpace  uint64
	IHardLimit, ISoftLimit, CurInodes uint64
	BTime, ITime                      uint64
	Valid                             uint32
	_                                 uint32
}

// fsQFileStatV and fsQuotaStatV are struct fs_qfilestatv and fs_quota_statv.
type fsQFileStatV struct {
	Ino, NBlks  uint64
	NExtents, _ uint32
}

type fsQuotaStatV struct {
	Version                              int8
	_                                    uint8
	Flags                                uint16
	InCoreDQs                            uint32
	UQuota, GQuota, PQuota               fsQFileStatV
	BTimeLimit, ITimeLimit, RTBTimeLimit int32
	BWarnLimit, IWarnLimit, RTBWarnLimit uint16
	_                                    uint16
	_                                    uint32
	_                                    [7]uint64
}

// fsxattr is struct fsxattr.
type fsxattr struct {
	XFlags, ExtSize, NExtents, ProjID, CowExtSize uint32
	_                                             [8]byte
}

// ErrNoProjectQuota: the filesystem does not enforce project quotas.
var ErrNoProjectQuota = errors.New("the filesystem does not enforce project quotas")

// quotactl runs a quota command for the filesystem that holds f: through
// quotactl_fd (Linux 5.14), or quotactl with the filesystem's block device
// on older kernels.
func quotactl(f *os.File, cmd int, id uint32, addr unsafe.Pointer) error {
	qcmd := uintptr(cmd<<8 | prjQuota)
	_, _, e := unix.Syscall6(unix.SYS_QUOTACTL_FD, f.Fd(), qcmd, uintptr(id), uintptr(addr), 0, 0)
	if e != unix.ENOSYS {
		if e != 0 {
			return e
		}
		return nil
	}
	dev, err := blockDevice(f)
	if err != nil {
		return err
	}
	p, err := unix.BytePtrFromString(dev)
	if err != nil {
		return err
	}
	_, _, e = unix.Syscall6(unix.SYS_QUOTACTL, qcmd, uintptr(unsafe.Pointer(p)), uintptr(id), uintptr(addr), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// blockDevice finds the source of the mount that holds f.
func blockDevice(f *os.File) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", err
	}
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (bool, bool) {
		return uint64(unix.Mkdev(uint32(m.Major), uint32(m.Minor))) != st.Dev, false
	})
	if err != nil || len(mounts) == 0 {
		return "", fmt.Errorf("find the block device of %s: %v", f.Name(), err)
	}
	return mounts[0].Source, nil
}

// ProjectQuotas reports whether the filesystem holding dir accounts and
// enforces project quotas (ext4 with the quota and project features, or
// XFS, mounted with prjquota); the error says what is missing. It needs no
// privilege.
func ProjectQuotas(dir *os.File) error {
	st := fsQuotaStatV{Version: fsQStatVVersion1}
	err := quotactl(dir, qXGetQStatV, 0, unsafe.Pointer(&st))
	switch {
	case err != nil:
		return fmt.Errorf("%w (%s: quotactl Q_XGETQSTATV: %v): use ext4 made with `-O quota,project` or XFS, mounted with prjquota", ErrNoProjectQuota, dir.Name(), err)
	case st.Flags&fsQuotaPDQAcct == 0:
		return fmt.Errorf("%w (%s: project quotas are not accounted): mount it with prjquota", ErrNoProjectQuota, dir.Name())
	case st.Flags&fsQuotaPDQEnfd == 0:
		return fmt.Errorf("%w (%s: project quotas are accounted but not enforced): mount it with prjquota", ErrNoProjectQuota, dir.Name())
	}
	return nil
}

// Project returns the project id of the file or directory f.
func Project(f *os.File) (uint32, error) {
	var fa fsxattr
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIOCFSGetXAttr, uintptr(unsafe.Pointer(&fa))); e != 0 {
		return 0, fmt.Errorf("read the project id of %s: %w", f.Name(), e)
	}
	return fa.ProjID, nil
}

// SetProject gives the directory f project id and the inherit flag: what is
// created in it from then on gets the same id. The caller owns f, in the
// initial user namespace.
func SetProject(f *os.File, id uint32) error {
	var fa fsxattr
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIOCFSGetXAttr, uintptr(unsafe.Pointer(&fa))); e != 0 {
		return fmt.Errorf("set the project id of %s: %w", f.Name(), e)
	}
	fa.ProjID = id
	fa.XFlags |= fsXFlagProjInherit
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIOCFSSetXAttr, uintptr(unsafe.Pointer(&fa))); e != 0 {
		return fmt.Errorf("set the project id of %s: %w", f.Name(), e)
	}
	return nil
}

// Usage is a project's use of its filesystem and its hard limits (0: none).
type Usage struct {
	Bytes      uint64 `json:"bytes"`
	Inodes     uint64 `json:"inodes"`
	ByteLimit  uint64 `json:"byte_limit,omitempty"`
	InodeLimit uint64 `json:"inode_limit,omitempty"`
}

// ProjectUsage returns project id's use and limits on the filesystem holding
// f. It needs CAP_SYS_ADMIN.
func ProjectUsage(f *os.File, id uint32) (Usage, error) {
	var q ifDqblk
	if err := quotactl(f, qGetQuota, id, unsafe.Pointer(&q)); err != nil {
		return Usage{}, fmt.Errorf("read the quota of project %d: %w", id, err)
	}
	return Usage{Bytes: q.CurSpace, Inodes: q.CurInodes, ByteLimit: q.BHardLimit * qifBlock, InodeLimit: q.IHardLimit}, nil
}

// SetProjectLimit sets project id's hard limits on the filesystem holding f:
// bytes (rounded up to a KiB) and inodes; zero lifts a limit. It needs
// CAP_SYS_ADMIN.
func SetProjectLimit(f *os.File, id uint32, bytes, inodes uint64) error {
	q := ifDqblk{BHardLimit: (bytes + qifBlock - 1) / qifBlock, IHardLimit: inodes, Valid: qifBLimits | qifILimits}
	if err := quotactl(f, qSetQuota, id, unsafe.Pointer(&q)); err != nil {
		return fmt.Errorf("set the quota of project %d: %w", id, err)
	}
	return nil
}

// DenyProjectChanges changes the seccomp profile p so that the ioctls that
// move a file out of its project (IoctlFSSetXAttr, IoctlSetFlags,
// IoctlSetFlags32) fail with EACCES, whatever the upper 32 bits of the
// request (the kernel ignores them), and every other ioctl is treated as
// before. libseccomp lets a rule without conditions win over every rule
// with some for the same syscall, and drops a rule whose action is the
// default's: so the denial is EACCES (the default is EPERM), and an
// unconditional rule for ioctl becomes two that together match every
// request (its lowest bit clear, or set), over which the more specific
// denials take precedence (TestDiskQuotaSeccomp checks it on the compiled
// program).
func DenyProjectChanges(p *specs.LinuxSeccomp) {
	var split []specs.LinuxSyscall
	for i, r := range p.Syscalls {
		if len(r.Args) > 0 || !slices.Contains(r.Names, "ioctl") {
			continue
		}
		p.Syscalls[i].Names = slices.DeleteFunc(slices.Clone(r.Names), func(n string) bool { return n == "ioctl" })
		for bit := range uint64(2) {
			half := r
			half.Names = []string{"ioctl"}
			half.Args = []specs.LinuxSeccompArg{{Index: 1, Value: 1, ValueTwo: bit, Op: specs.OpMaskedEqual}}
			split = append(split, half)
		}
	}
	p.Syscalls = slices.DeleteFunc(p.Syscalls, func(r specs.LinuxSyscall) bool { return len(r.Names) == 0 })
	p.Syscalls = append(p.Syscalls, split...)
	eacces := uint(unix.EACCES)
	for _, req := range []uint64{IoctlFSSetXAttr, IoctlSetFlags, IoctlSetFlags32} {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{
			Names: []string{"ioctl"}, Action: specs.ActErrno, ErrnoRet: &eacces,
			Args: []specs.LinuxSeccompArg{{Index: 1, Value: 0xffffffff, ValueTwo: req, Op: specs.OpMaskedEqual}},
		})
	}
}
