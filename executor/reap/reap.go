package reap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Mode selects how a Reaper waits for its children.
type Mode int

const (
	// Auto is Global when the process is PID 1, PerProcess otherwise.
	Auto Mode = iota
	// Global runs a SIGCHLD-driven wait4(-1) loop that reaps every child,
	// including orphans re-parented to this process.
	Global
	// PerProcess waits for each started process by its pidfd and reaps
	// nothing else.
	PerProcess
)

func (m Mode) String() string {
	switch m {
	case Global:
		return "global"
	case PerProcess:
		return "per-process"
	default:
		return "auto"
	}
}

// Options configure a Reaper.
type Options struct {
	Mode Mode
	// Subreaper marks the process a child subreaper
	// (PR_SET_CHILD_SUBREAPER) so orphaned descendants are re-parented to
	// it, and implies Global. PID 1 does not need it.
	Subreaper bool
	// ChildOOMScore, when non-zero, is written to each started child's
	// oom_score_adj (1000: killed first), so that the kernel's OOM killer
	// picks a runaway command before the process that started it. Raising
	// a score needs no privilege. Descendants inherit it.
	ChildOOMScore int
	// CommandsTasks, when set, is the cgroup v1 "tasks" file, open for
	// writing, of the pids cgroup the started processes count against: a
	// sub-cgroup of the executor's, with a lower limit, so that they cannot
	// take the pids the executor's own threads need. The Reaper starts
	// every process from one thread it moves there (see spawner).
	CommandsTasks *os.File
}

// Sentinel errors.
var (
	// ErrGlobalTaken: only one Global Reaper may exist in a process.
	ErrGlobalTaken = errors.New("reap: a global reaper already exists in this process")
	// ErrClosed: the Reaper was closed.
	ErrClosed = errors.New("reap: reaper closed")
	// ErrUnsupportedStdio: exec.Cmd stdio must be nil or *os.File.
	ErrUnsupportedStdio = errors.New("reap: exec.Cmd stdin/stdout/stderr must be nil or *os.File (copying goroutines need cmd.Wait)")
)

var globalTaken atomic.Bool

// Reaper starts processes and hands back their exit status. It is safe for
// concurrent use.
type Reaper struct {
	global   bool
	oomScore int
	spawn    *spawner // nil: processes start from any thread

	// mu guards procs and is held across start+register in global mode.
	mu     sync.Mutex
	procs  map[int]*Proc
	closed bool
	// empty: the last wait4(-1) pass saw ECHILD (global mode only).
	empty bool
	// changed is closed and replaced whenever a process finishes or a
	// reap pass ends.
	changed chan struct{}

	reapMu  sync.Mutex // serializes wait4(-1) passes
	orphans atomic.Uint64
	sigCh   chan os.Signal
	stop    chan struct{}
	stopped chan struct{}
}

// New returns a Reaper. In Global mode it reaps any zombie already present
// and then every child on SIGCHLD until Close.
func New(opts Options) (*Reaper, error) {
	mode := opts.Mode
	if opts.Subreaper {
		mode = Global
	}
	if mode == Auto {
		mode = PerProcess
		if os.Getpid() == 1 {
			mode = Global
		}
	}
	r := &Reaper{
		global:   mode == Global,
		oomScore: opts.ChildOOMScore,
		procs:    make(map[int]*Proc),
		changed:  make(chan struct{}),
	}
	if opts.CommandsTasks != nil {
		r.spawn = newSpawner(opts.CommandsTasks)
	}
	if !r.global {
		return r, nil
	}
	if !globalTaken.CompareAndSwap(false, true) {
		return nil, ErrGlobalTaken
	}
	if opts.Subreaper {
		if err := SetSubreaper(); err != nil {
			globalTaken.Store(false)
			return nil, err
		}
	}
	r.sigCh = make(chan os.Signal, 1)
	r.stop = make(chan struct{})
	r.stopped = make(chan struct{})
	signal.Notify(r.sigCh, syscall.SIGCHLD)
	r.reap()
	go r.loop()
	return r, nil
}

// SetSubreaper marks the calling process a child subreaper.
func SetSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set child subreaper: %w", err)
	}
	return nil
}

// Mode reports Global or PerProcess.
func (r *Reaper) Mode() Mode {
	if r.global {
		return Global
	}
	return PerProcess
}

// Orphans counts the statuses reaped for processes not started through
// the Reaper (global mode).
func (r *Reaper) Orphans() uint64 { return r.orphans.Load() }

// Close stops the SIGCHLD loop of a global Reaper (after one last pass).
// Processes already started still report their status in per-process mode
// only; Close a global Reaper last.
func (r *Reaper) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	if r.global {
		signal.Stop(r.sigCh)
		close(r.stop)
		<-r.stopped
		r.reap()
		globalTaken.Store(false)
	}
	return nil
}

func (r *Reaper) loop() {
	defer close(r.stopped)
	for {
		select {
		case <-r.sigCh:
			r.reap()
		case <-r.stop:
			return
		}
	}
}

// reap collects every exited child without blocking.
func (r *Reaper) reap() {
	r.reapMu.Lock()
	defer r.reapMu.Unlock()
	empty := false
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil { // ECHILD: no children at all
			empty = true
			break
		}
		if pid <= 0 {
			break
		}
		r.deliver(pid, statusOf(pid, syscall.WaitStatus(ws)))
	}
	r.mu.Lock()
	r.empty = empty
	r.broadcastLocked()
	r.mu.Unlock()
}

// deliver hands st to the Proc of pid, or drops it for an orphan. It takes
// r.mu, which StartFunc holds until the pid is registered.
func (r *Reaper) deliver(pid int, st Status) {
	r.mu.Lock()
	p := r.procs[pid]
	delete(r.procs, pid)
	r.mu.Unlock()
	if p == nil {
		r.orphans.Add(1)
		return
	}
	p.finish(st)
}

func (r *Reaper) broadcastLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Start starts cmd and returns its Proc. cmd's Stdin, Stdout and Stderr
// must be nil or *os.File, and cmd must not come from exec.CommandContext:
// both need cmd.Wait, which must never be called. Use Proc.Wait.
func (r *Reaper) Start(cmd *exec.Cmd) (*Proc, error) {
	for _, f := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		switch f.(type) {
		case nil, *os.File:
		default:
			return nil, ErrUnsupportedStdio
		}
	}
	return r.StartFunc(func() (*os.Process, error) {
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return cmd.Process, nil
	})
}

// StartProcess is os.StartProcess through the Reaper.
func (r *Reaper) StartProcess(name string, argv []string, attr *os.ProcAttr) (*Proc, error) {
	return r.StartFunc(func() (*os.Process, error) {
		return os.StartProcess(name, argv, attr)
	})
}

// StartFunc calls start, which must start exactly one child process and
// return it (e.g. pty.Start(cmd) then cmd.Process), and registers it. The
// returned process must not be waited for by anyone else.
func (r *Reaper) StartFunc(start func() (*os.Process, error)) (*Proc, error) {
	if r.global {
		// Hold mu across start and registration: deliver blocks on it, so a
		// child that exits at once is delivered only once registered.
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			return nil, ErrClosed
		}
		osp, err := r.startOne(start)
		if err != nil {
			return nil, err
		}
		r.setOOMScore(osp.Pid)
		p := newProc(r, osp)
		r.procs[p.Pid] = p
		r.empty = false
		return p, nil
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	osp, err := r.startOne(start)
	if err != nil {
		return nil, err
	}
	r.setOOMScore(osp.Pid)
	p := newProc(r, osp)
	r.mu.Lock()
	r.procs[p.Pid] = p
	r.mu.Unlock()
	go p.waitOwn()
	return p, nil
}

// CommandsCgroup waits until the Reaper's process-starting thread has
// moved into the cgroup of Options.CommandsTasks and returns why it could
// not (processes then count against the executor's own cgroup), or nil.
// Without CommandsTasks it returns nil at once.
func (r *Reaper) CommandsCgroup() error {
	if r.spawn == nil {
		return nil
	}
	return r.spawn.joinErr()
}

// startOne calls start, from the spawning thread when there is one.
func (r *Reaper) startOne(start func() (*os.Process, error)) (*os.Process, error) {
	if r.spawn != nil {
		return r.spawn.start(start)
	}
	return start()
}

// setOOMScore raises a new child's OOM score. The child has already
// exec'd; what it forked before this write keeps the old score, a window of
// microseconds. Best effort: a child that is already gone has no score.
func (r *Reaper) setOOMScore(pid int) {
	if r.oomScore == 0 {
		return
	}
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte(strconv.Itoa(r.oomScore)), 0)
}

// Live returns the processes started through the Reaper that have not been
// reaped yet.
func (r *Reaper) Live() []*Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Proc, 0, len(r.procs))
	for _, p := range r.procs {
		out = append(out, p)
	}
	return out
}

// SignalAll sends sig to the process group of every live process (or the
// process itself when it leads no group) and returns how many it reached.
func (r *Reaper) SignalAll(sig syscall.Signal) int {
	n := 0
	for _, p := range r.Live() {
		if p.SignalGroup(sig) == nil {
			n++
		}
	}
	return n
}

// WaitIdle blocks until every process started through the Reaper has been
// reaped and, in global mode, the process has no children left at all
// (orphans included), or ctx is done.
func (r *Reaper) WaitIdle(ctx context.Context) error {
	if r.global {
		// One extra pass catches a SIGCHLD coalesced before we started.
		r.reap()
	}
	for {
		r.mu.Lock()
		idle := len(r.procs) == 0 && (!r.global || r.empty)
		ch := r.changed
		r.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *Reaper) forget(p *Proc) {
	r.mu.Lock()
	if r.procs[p.Pid] == p {
		delete(r.procs, p.Pid)
	}
	r.broadcastLocked()
	r.mu.Unlock()
}
