package bash

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Terminal size, as OpenHands' tmux window (x=1000, y=1000): wide enough
// that nothing wraps.
const (
	termRows = 1000
	termCols = 1000
)

// openPTY opens a pseudo-terminal pair. The master is non-blocking and
// registered with Go's poller, so Close interrupts a pending Read (pty
// libraries that call File.Fd make it blocking, and Close would then wait
// for the read). The slave is blocking: it becomes the shell's stdio. The
// slave starts with echo off, canonical input, signals on, no XON/XOFF.
func openPTY() (master, slave *os.File, baseline *unix.Termios, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	fail := func(err error) (*os.File, *os.File, *unix.Termios, error) {
		unix.Close(mfd)
		return nil, nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return fail(fmt.Errorf("unlock pty: %w", err))
	}
	sfd, err := openPeer(mfd)
	if err != nil {
		return fail(err)
	}
	t, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
	if err == nil {
		t.Lflag &^= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHONL | unix.ECHOCTL | unix.ECHOKE | unix.ECHOPRT | unix.TOSTOP
		t.Lflag |= unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Iflag &^= unix.IXON | unix.IXOFF | unix.INLCR | unix.IGNCR | unix.ISTRIP
		t.Iflag |= unix.ICRNL | unix.IUTF8
		t.Oflag |= unix.OPOST | unix.ONLCR
		err = unix.IoctlSetTermios(sfd, unix.TCSETS, t)
	}
	if err == nil {
		t, err = unix.IoctlGetTermios(sfd, unix.TCGETS)
	}
	if err == nil {
		err = unix.IoctlSetWinsize(sfd, unix.TIOCSWINSZ, &unix.Winsize{Row: termRows, Col: termCols})
	}
	if err != nil {
		unix.Close(sfd)
		return fail(fmt.Errorf("configure pty: %w", err))
	}
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), os.NewFile(uintptr(sfd), "pty"), t, nil
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

// setTermios sets the terminal's modes through the master.
func setTermios(master *os.File, t *unix.Termios) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) { ioErr = unix.IoctlSetTermios(int(fd), unix.TCSETS, t) }); err != nil {
		return err
	}
	return ioErr
}

// enforceTermios puts the terminal back to baseline when a program left
// it otherwise (echo on, raw mode): bash without readline reads commands
// in whatever mode it finds. The ioctls go through the master, which
// Linux applies to the slave.
func enforceTermios(master *os.File, baseline *unix.Termios) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	err = rc.Control(func(fd uintptr) {
		cur, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		if err != nil {
			ioErr = err
			return
		}
		if cur.Iflag == baseline.Iflag && cur.Oflag == baseline.Oflag &&
			cur.Lflag == baseline.Lflag && cur.Cc == baseline.Cc {
			return
		}
		ioErr = unix.IoctlSetTermios(int(fd), unix.TCSETS, baseline)
	})
	if err != nil {
		return err
	}
	return ioErr
}
