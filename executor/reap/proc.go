package reap

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrDone: the process has already exited.
var ErrDone = errors.New("reap: process already exited")

// Status is how a process ended.
type Status struct {
	Pid int
	// Exited is true when the process called exit; ExitCode is then valid.
	Exited   bool
	ExitCode int
	// Signal is the signal that killed the process (0 when it exited).
	Signal     syscall.Signal
	CoreDumped bool
	// OOMKilled is reserved: set by whoever can tell (cgroup events) that
	// the kernel's OOM killer sent the SIGKILL. The Reaper never sets it.
	OOMKilled bool
}

// Code is the exit status the shell would report: ExitCode, or 128+signal.
func (s Status) Code() int {
	if s.Signal != 0 {
		return 128 + int(s.Signal)
	}
	return s.ExitCode
}

// Success reports a zero exit.
func (s Status) Success() bool { return s.Exited && s.ExitCode == 0 }

func statusOf(pid int, ws syscall.WaitStatus) Status {
	st := Status{Pid: pid}
	switch {
	case ws.Exited():
		st.Exited = true
		st.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		st.Signal = ws.Signal()
		st.CoreDumped = ws.CoreDump()
	}
	return st
}

// Proc is a process started through a Reaper.
type Proc struct {
	Pid     int
	Started time.Time

	r    *Reaper
	mu   sync.Mutex // guards osp against release while signalling
	osp  *os.Process
	done chan struct{}
	st   Status
	fin  time.Time
}

func newProc(r *Reaper, osp *os.Process) *Proc {
	return &Proc{Pid: osp.Pid, Started: time.Now(), r: r, osp: osp, done: make(chan struct{})}
}

// waitOwn waits for the process through its pidfd (per-process mode).
func (p *Proc) waitOwn() {
	ps, err := p.osp.Wait()
	st := Status{Pid: p.Pid}
	if err == nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
			st = statusOf(p.Pid, ws)
		}
	} else {
		// Somebody else reaped it (a wait4(-1) outside this Reaper); the
		// status is lost.
		st.Exited, st.ExitCode = true, -1
	}
	p.finish(st)
	p.r.forget(p)
}

func (p *Proc) finish(st Status) {
	p.mu.Lock()
	p.st, p.fin = st, time.Now()
	close(p.done)
	osp := p.osp
	p.osp = nil
	p.mu.Unlock()
	if osp != nil {
		osp.Release() // closes the pidfd
	}
	if p.r.global {
		p.r.mu.Lock()
		p.r.broadcastLocked()
		p.r.mu.Unlock()
	}
}

// Done is closed once the process has been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Status returns the exit status and true once the process has been reaped.
func (p *Proc) Status() (Status, bool) {
	select {
	case <-p.done:
		return p.st, true
	default:
		return Status{}, false
	}
}

// Finished returns when the process was reaped (zero before).
func (p *Proc) Finished() time.Time {
	select {
	case <-p.done:
		return p.fin
	default:
		return time.Time{}
	}
}

// Wait blocks until the process has been reaped or ctx is done.
func (p *Proc) Wait(ctx context.Context) (Status, error) {
	select {
	case <-p.done:
		return p.st, nil
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

// Signal sends sig to the process alone. It never reaches a recycled pid:
// the signal goes through the pidfd while the process is unreaped.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.osp == nil {
		return ErrDone
	}
	if err := p.osp.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return ErrDone
		}
		return err
	}
	return nil
}

// SignalGroup sends sig to the process group whose id is the process's pid
// (processes started with Setpgid), or to the process alone when no such
// group exists. After the leader has been reaped it still reaches the
// members left in its group; the group id cannot be reused while the group
// has members.
func (p *Proc) SignalGroup(sig syscall.Signal) error {
	err := unix.Kill(-p.Pid, sig)
	if err == nil {
		return nil
	}
	if err == unix.ESRCH {
		return p.Signal(sig)
	}
	return err
}
