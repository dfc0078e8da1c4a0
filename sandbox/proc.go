package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/internal/proc"
	"golang.org/x/sys/unix"
)

func ownedByCaller(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == os.Geteuid()
}

// alive reports whether the process named by pid and start time still runs.
// A zombie is dead: some hosts' init never reaps re-parented processes.
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	got, zombie, err := proc.Start(pid)
	return err == nil && got == start && !zombie
}

// signalProcess sends sig to the process named by pid and start time, through
// a pidfd so that a recycled pid can never be hit.
func signalProcess(pid int, start uint64, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("open pidfd %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if !alive(pid, start) {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	return nil
}

// waitGone waits until the process is dead, the timeout passes or ctx is
// done, and reports whether it is dead. A pidfd becomes readable the moment
// the process exits, so there is no polling delay; kernels without pidfds
// fall back to polling. A zombie thread-group leader whose other threads
// still run is not gone: /proc shows the leader as a zombie while the last
// thread of a killed PID 1 still tears down its pid namespace (killing and
// reaping everything in it); its pidfd becomes readable only once the whole
// group has exited.
func waitGone(ctx context.Context, pid int, start uint64, timeout time.Duration) bool {
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		defer unix.Close(fd)
		if got, _, err := proc.Start(pid); err == nil && got == start { // the pidfd names our process, not a successor
			if !pollPidfd(ctx, fd, timeout) {
				return false
			}
		}
	}
	deadline := time.Now().Add(timeout)
	for delay := 200 * time.Microsecond; ; delay = min(delay*2, 20*time.Millisecond) {
		if !alive(pid, start) {
			reapIfChild(pid, start)
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(delay)
	}
}

// pollPidfd waits until the pidfd is readable (its process has exited),
// the timeout passes or ctx is done, and reports whether it is readable. A
// done ctx closes a pipe polled beside the pidfd.
func pollPidfd(ctx context.Context, pidfd int, timeout time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	if ctx.Done() != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return false
		}
		defer r.Close()
		stop := context.AfterFunc(ctx, func() { w.Close() })
		defer func() {
			if stop() {
				w.Close()
			}
		}()
		fds = append(fds, unix.PollFd{Fd: int32(r.Fd()), Events: unix.POLLIN})
	}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		switch {
		case err != nil && !errors.Is(err, unix.EINTR):
			return true // the caller looks at the process itself
		case n > 0 && fds[0].Revents != 0:
			return true
		case n > 0:
			return false // ctx is done
		}
	}
}

// reapIfChild collects the exit status of the process named by pid and start
// time when it is a zombie child of ours (a waiting `bothy run` is a child
// subreaper, so the sandbox's PID 1 is re-parented to it), so no zombie is
// left behind. Pids are recycled: a pid alone could name another child,
// whose status must not be stolen.
func reapIfChild(pid int, start uint64) {
	got, zombie, err := proc.Start(pid)
	if err != nil || got != start || !zombie {
		return
	}
	var ws unix.WaitStatus
	var ru unix.Rusage
	if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, &ru); err == nil && got == pid {
		reapedUsage.Store(pidStart{pid, start}, ru) // for RunStats
	}
}

// hasCapSysResource reports whether this process may lower OOM scores.
func hasCapSysResource() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_SYS_RESOURCE) != 0
}
