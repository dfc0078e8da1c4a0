package ptys

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair of the given size with the kernel's
// default modes (cooked, echo, signals). The master is non-blocking and
// registered with Go's poller, so Close interrupts a pending Read; the
// slave is blocking: it becomes the program's stdio.
func openPTY(rows, cols int) (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(mfd)
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	sfd, err := openPeer(mfd)
	if err != nil {
		unix.Close(mfd)
		return nil, nil, err
	}
	if t, err := unix.IoctlGetTermios(sfd, unix.TCGETS); err == nil {
		t.Iflag |= unix.IUTF8
		_ = unix.IoctlSetTermios(sfd, unix.TCSETS, t)
	}
	if err := unix.IoctlSetWinsize(sfd, unix.TIOCSWINSZ, winsize(rows, cols)); err != nil {
		unix.Close(sfd)
		unix.Close(mfd)
		return nil, nil, fmt.Errorf("set terminal size: %w", err)
	}
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), os.NewFile(uintptr(sfd), "pty"), nil
}

func winsize(rows, cols int) *unix.Winsize {
	return &unix.Winsize{Row: uint16(rows), Col: uint16(cols)}
}

// openPeer opens the slave of master mfd: TIOCGPTPEER (Linux 4.13) needs
// no /dev/pts path, which may belong to another devpts in a sandbox.
func openPeer(mfd int) (int, error) {
	const flags = unix.O_RDWR | unix.O_NOCTTY | unix.O_CLOEXEC
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER, flags)
	if errno == 0 {
		return int(fd), nil
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		return -1, fmt.Errorf("get pty number: %w", err)
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	sfd, err := unix.Open(name, flags, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", name, err)
	}
	return sfd, nil
}

// control runs fn on master's descriptor.
func control(master *os.File, fn func(fd int) error) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) { ioErr = fn(int(fd)) }); err != nil {
		return err
	}
	return ioErr
}
