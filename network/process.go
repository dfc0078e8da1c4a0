package network

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bothy-sandbox/bothy/internal/proc"
	"golang.org/x/sys/unix"
)

// Process names one process for good: a pid and its start time (clock ticks
// after boot, field 22 of /proc/PID/stat). Pids are reused; the pair is not.
type Process struct {
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// identify returns the Process for a running pid.
func identify(pid int) (Process, error) {
	start, zombie, err := proc.Start(pid)
	if err != nil {
		return Process{}, fmt.Errorf("process %d: %w", pid, err)
	}
	if zombie {
		return Process{}, fmt.Errorf("process %d has exited", pid)
	}
	return Process{Pid: pid, Start: start}, nil
}

// Alive reports whether the process still runs: a zombie is dead, and so
// is a process on its way out (proc.Exiting), though it may still hold its
// files for a while.
func (p Process) Alive() bool {
	if p.Pid <= 0 {
		return false
	}
	start, running, err := proc.Running(p.Pid)
	return err == nil && start == p.Start && running
}

// pidfd opens a pidfd for p, checked against its start time after it is
// open, so that it can never name a recycled pid. ok is false when p is
// gone. A zombie is not gone yet: a multithreaded process's leader is one
// while its other threads still exit, holding its files (a forwarder's
// listening sockets), and the pidfd is readable only once they have.
func (p Process) pidfd() (fd int, ok bool, err error) {
	if p.Pid <= 0 {
		return -1, false, nil
	}
	fd, err = unix.PidfdOpen(p.Pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, fmt.Errorf("open pidfd %d: %w", p.Pid, err)
	}
	if start, _, err := proc.Start(p.Pid); err != nil || start != p.Start {
		unix.Close(fd)
		return -1, false, nil
	}
	return fd, true, nil
}

// kill sends SIGKILL to p, if it still runs, and waits until it is gone
// (not merely signalled) or ctx ends. With exiting, it waits only until p
// is on its way out (proc.Exiting): for a process that holds nothing on
// the host that the kernel frees late (slirp4netns without ports: its
// tap's teardown waits for an RCU barrier, 12 to 50 ms here).
func (p Process) kill(ctx context.Context, exiting bool) error {
	fd, ok, err := p.pidfd()
	if err != nil || !ok {
		return err
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill %d: %w", p.Pid, err)
	}
	return waitPidfd(ctx, fd, p, exiting)
}

// waitPidfd waits until the process behind fd has exited, all its threads:
// a pidfd becomes readable then, a zombie that nobody reaps included. With
// exiting, until it has begun to: while the pidfd is not readable, p.Pid
// is still p.
func waitPidfd(ctx context.Context, fd int, p Process, exiting bool) error {
	timeout := 20
	if exiting {
		timeout = 0 // a killed process is on its way out at once, mostly
	}
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("wait for %d: %w", p.Pid, err)
		}
		if n > 0 || exiting && proc.Exiting(p.Pid) {
			return nil
		}
		if exiting {
			timeout = 1
		}
		if ctx.Err() != nil {
			return fmt.Errorf("wait for %d to exit: %w", p.Pid, ctx.Err())
		}
	}
}

// waitTimeout is how long cleanup waits for a killed helper to go.
const waitTimeout = 10 * time.Second
