// Package ptys is the executor's terminals service: the /v1/ptys routes,
// which start a command on a pseudo-terminal of its own (vim, top, a REPL,
// an interactive shell) and let clients read its output, type into it,
// resize it and signal it, over plain requests or one attached connection.
package ptys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/environ"
	"github.com/bothy-sandbox/bothy/executor/internal/users"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/internal/passwd"
)

// Options configure the terminals service; every field is required (the
// server fills in its defaults).
type Options struct {
	// Env is the base environment of started programs.
	Env []string
	// Shell runs a request with no argv (interactive) or with cmd (-c).
	Shell string
	// MaxPtys caps the terminals open at once.
	MaxPtys int
	// MaxFinished is how many ended terminals are kept for their output
	// and exit status until deleted.
	MaxFinished int
	// MaxRetained is the output kept per terminal (the most recent).
	MaxRetained int
	// WaitDelay bounds how long output is still read once the program has
	// exited, when a descendant keeps the terminal open.
	WaitDelay time.Duration
	// User is who programs run as unless a request names another (nil:
	// the executor's own); LookupUser resolves the users requests name.
	User       *passwd.Cred
	LookupUser func(spec string) (*passwd.Cred, error)
	// Reaper starts and waits for every program.
	Reaper *reap.Reaper
	// Bodies reads JSON bodies.
	Bodies *httpapi.Bodies
	Log    *slog.Logger
}

// DefaultMaxPtys is the number of terminals open at once.
const DefaultMaxPtys = 64

// Errors of the service.
var (
	ErrNotFound = httpapi.NewError(http.StatusNotFound, api.CodeNotFound, "terminal not found")
	ErrExited   = httpapi.NewError(http.StatusConflict, api.CodeConflict, "terminal's program has exited")
)

// Service runs programs on terminals.
type Service struct {
	opts    Options
	nextID  atomic.Uint64
	closing atomic.Bool

	mu       sync.Mutex
	byID     map[string]*term
	finished []*term // oldest first
}

// New returns the terminals service.
func New(opts Options) *Service {
	if opts.Env == nil {
		opts.Env = []string{}
	}
	return &Service{opts: opts, byID: map[string]*term{}}
}

// Routes lists the routes of the service.
func (s *Service) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: "GET", Path: "/v1/ptys", Summary: "list terminals", Handler: s.handleList},
		{Method: "POST", Path: "/v1/ptys", Summary: "start a program on a new terminal", Handler: s.handleCreate},
		{Method: "GET", Path: "/v1/ptys/{id}", Summary: "terminal status", Handler: s.handleGet},
		{Method: "DELETE", Path: "/v1/ptys/{id}", Summary: "kill a terminal's program if running and forget it", Handler: s.handleDelete},
		{Method: "GET", Path: "/v1/ptys/{id}/output", Summary: "read or follow a terminal's output", Handler: s.handleOutput},
		{Method: "POST", Path: "/v1/ptys/{id}/input", Summary: "type into a terminal", Handler: s.handleInput},
		{Method: "POST", Path: "/v1/ptys/{id}/resize", Summary: "resize a terminal (SIGWINCH)", Handler: s.handleResize},
		{Method: "POST", Path: "/v1/ptys/{id}/signal", Summary: "signal a terminal's foreground process group", Handler: s.handleSignal},
		{Method: "POST", Path: "/v1/ptys/{id}/wait", Summary: "wait for a terminal's program to exit", Handler: s.handleWait},
		{Method: "GET", Path: "/v1/ptys/{id}/attach", Summary: "attach to a terminal (upgrade to " + api.PtyUpgrade + " frames)", Handler: s.handleAttach},
	}
}

// Shutdown refuses new terminals from now on.
func (s *Service) Shutdown() { s.closing.Store(true) }

// Close refuses new terminals and kills every program started.
func (s *Service) Close() {
	s.closing.Store(true)
	for _, t := range s.all() {
		t.kill()
	}
}

// Running counts the terminals whose program runs.
func (s *Service) Running() int {
	n := 0
	for _, t := range s.all() {
		if !t.exited() {
			n++
		}
	}
	return n
}

func (s *Service) all() []*term {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*term, 0, len(s.byID))
	for _, t := range s.byID {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *term) int { return a.seq - b.seq })
	return out
}

func (s *Service) get(id string) (*term, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.byID[id]
	if t == nil {
		return nil, fmt.Errorf("terminal %q: %w", id, ErrNotFound)
	}
	return t, nil
}

func (s *Service) remove(t *term) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID[t.id] == t {
		delete(s.byID, t.id)
	}
	s.finished = slices.DeleteFunc(s.finished, func(x *term) bool { return x == t })
}

// ended records that t's program ended, forgetting the oldest ended
// terminals beyond MaxFinished.
func (s *Service) ended(t *term) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID[t.id] != t {
		return
	}
	s.finished = append(s.finished, t)
	for len(s.finished) > s.opts.MaxFinished {
		delete(s.byID, s.finished[0].id)
		s.finished = s.finished[1:]
	}
}

// start starts req's program on a new terminal.
func (s *Service) start(req *api.PtyRequest) (*term, error) {
	if s.closing.Load() {
		return nil, httpapi.ErrShuttingDown
	}
	cred, err := s.user(req.User)
	if err != nil {
		return nil, err
	}
	env := users.Env(environ.WithDefaults(environ.Merge(s.opts.Env, req.Env), "TERM=xterm-256color"), cred)
	path, argv, err := s.command(req, env)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.byID)-len(s.finished) >= s.opts.MaxPtys {
		s.mu.Unlock()
		return nil, fmt.Errorf("start: %d terminals are open, the most the executor keeps at once: %w", s.opts.MaxPtys, httpapi.ErrLimit)
	}
	seq := int(s.nextID.Add(1))
	t := &term{s: s, seq: seq, id: "t" + strconv.Itoa(seq), argv: argv, cwd: req.Cwd, cred: cred, rows: req.Rows, cols: req.Cols,
		log: newOutLog(s.opts.MaxRetained), done: make(chan struct{}), pumped: make(chan struct{})}
	s.byID[t.id] = t // reserves the slot
	s.mu.Unlock()
	if err := t.start(path, env); err != nil {
		s.remove(t)
		return nil, err
	}
	return t, nil
}

// command returns the path and argv that run req: the shell alone, Cmd
// through the shell, or Argv with its executable looked up in env's PATH.
func (s *Service) command(req *api.PtyRequest, env []string) (string, []string, error) {
	switch {
	case req.Cmd != "":
		return s.opts.Shell, []string{filepath.Base(s.opts.Shell), "-c", req.Cmd}, nil
	case len(req.Argv) == 0:
		sh := s.opts.Shell
		if unix.Access(interactiveShell, unix.X_OK) == nil {
			sh = interactiveShell
		}
		return sh, []string{filepath.Base(sh)}, nil
	}
	path, err := environ.LookPath(req.Argv[0], env, req.Cwd)
	if err != nil {
		return "", nil, startFailed(req.Argv[0], err)
	}
	return path, req.Argv, nil
}

// user resolves the user a request names: the default when none, the
// executor's own for root.
func (s *Service) user(spec string) (*passwd.Cred, error) {
	c, err := users.Resolve(spec, s.opts.User, s.opts.LookupUser)
	if err != nil {
		return nil, startFailed("as "+spec, err)
	}
	return c, nil
}

// interactiveShell is run, when present, for a terminal with no command:
// a shell with line editing and job control.
const interactiveShell = "/bin/bash"

func startFailed(name string, err error) error {
	return httpapi.WithStatus(http.StatusBadRequest, api.CodeStartFailed, fmt.Errorf("start %s: %w", name, err))
}

// term is a program on a terminal.
type term struct {
	s    *Service
	seq  int
	id   string
	argv []string
	cwd  string
	cred *passwd.Cred // nil: the executor's own user

	mu         sync.Mutex // guards rows, cols and the master's use against its close
	rows, cols int
	master     *os.File // nil once closed

	inMu sync.Mutex // one writer at a time

	proc    *reap.Proc
	started time.Time
	log     *outLog
	pumped  chan struct{} // closed when the master reads no more
	done    chan struct{} // closed once reaped and the output ended
	status  reap.Status
	fin     time.Time
}

func (t *term) start(path string, env []string) error {
	master, slave, err := openPTY(t.rows, t.cols)
	if err != nil {
		return fmt.Errorf("start %s: %w", t.argv[0], err)
	}
	if t.cred != nil {
		// The terminal is the user's, as login makes it: tty, mesg
		// and programs that reopen /dev/tty work.
		_ = slave.Chown(int(t.cred.UID), int(t.cred.GID))
	}
	attr := &os.ProcAttr{
		Dir: t.cwd, Env: env, Files: []*os.File{slave, slave, slave},
		// A session of its own with the terminal as its controlling
		// terminal: job control, Ctrl-C and SIGWINCH work as on a console.
		Sys: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Credential: users.SysCred(t.cred)},
	}
	proc, err := t.s.opts.Reaper.StartProcess(path, t.argv, attr)
	slave.Close()
	if err != nil {
		master.Close()
		return startFailed(t.argv[0], err)
	}
	t.master, t.proc, t.started = master, proc, proc.Started
	go t.pump(master)
	go t.supervise()
	return nil
}

// pump copies the terminal's output into the log until the terminal has
// no writer left (EIO) or the master is closed.
func (t *term) pump(master *os.File) {
	defer close(t.pumped)
	buf := make([]byte, 32<<10)
	for {
		n, err := master.Read(buf)
		if n > 0 {
			t.log.write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// supervise waits for the program, then for the rest of the output (at
// most WaitDelay, when a descendant keeps the terminal open), closes the
// terminal and records the end.
func (t *term) supervise() {
	st, _ := t.proc.Wait(context.Background())
	timer := time.NewTimer(t.s.opts.WaitDelay)
	select {
	case <-t.pumped:
	case <-timer.C:
	}
	timer.Stop()
	t.mu.Lock()
	t.master.Close() // ends the pump; the session gets SIGHUP
	t.master = nil
	t.mu.Unlock()
	<-t.pumped
	t.status, t.fin = st, time.Now()
	t.log.close()
	close(t.done)
	t.s.ended(t)
}

func (t *term) exited() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// withMaster runs fn on the open master, or answers ErrExited.
func (t *term) withMaster(fn func(m *os.File) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.master == nil {
		return fmt.Errorf("terminal %s: %w", t.id, ErrExited)
	}
	return fn(t.master)
}

// write types p into the terminal; ctx ending abandons a write the program
// does not read.
func (t *term) write(ctx context.Context, p []byte) (int, error) {
	t.inMu.Lock()
	defer t.inMu.Unlock()
	t.mu.Lock()
	m := t.master
	t.mu.Unlock()
	if m == nil {
		return 0, fmt.Errorf("terminal %s: %w", t.id, ErrExited)
	}
	stop := context.AfterFunc(ctx, func() { m.SetWriteDeadline(time.Unix(1, 0)) })
	n, err := m.Write(p)
	if !stop() {
		m.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EIO) {
			err = ErrExited
		}
		return n, fmt.Errorf("write to terminal %s: %w", t.id, err)
	}
	return n, nil
}

// resize sets the terminal's size: the kernel sends SIGWINCH to its
// foreground process group.
func (t *term) resize(rows, cols int) error {
	return t.withMaster(func(m *os.File) error {
		if err := control(m, func(fd int) error { return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, winsize(rows, cols)) }); err != nil {
			return fmt.Errorf("resize terminal %s: %w", t.id, err)
		}
		t.rows, t.cols = rows, cols
		return nil
	})
}

// signal sends sig to the terminal's foreground process group, as the
// terminal does for Ctrl-C, or to the program's own group when there is
// none.
func (t *term) signal(sig syscall.Signal) error {
	pgrp := 0
	t.withMaster(func(m *os.File) error {
		return control(m, func(fd int) error {
			var err error
			pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
			return err
		})
	})
	if pgrp > 1 && unix.Kill(-pgrp, sig) == nil {
		return nil
	}
	err := t.proc.SignalGroup(sig)
	if errors.Is(err, reap.ErrDone) || errors.Is(err, syscall.ESRCH) {
		err = ErrExited
	}
	if err != nil {
		return fmt.Errorf("signal terminal %s: %w", t.id, err)
	}
	return nil
}

// kill sends SIGKILL to the foreground process group and the program's
// own; closing the terminal then hangs up on whatever is left of its
// session.
func (t *term) kill() {
	t.signal(syscall.SIGKILL)
	t.proc.SignalGroup(syscall.SIGKILL)
}

func (t *term) snapshot() *api.Pty {
	t.mu.Lock()
	p := &api.Pty{ID: t.id, PID: t.proc.Pid, Argv: t.argv, Cwd: t.cwd, Rows: t.rows, Cols: t.cols,
		StartedAt: t.started, OutputBytes: t.log.end()}
	t.mu.Unlock()
	select {
	case <-t.done:
		code := t.status.Code()
		fin := t.fin
		p.ExitCode, p.FinishedAt, p.Signal = &code, &fin, api.SignalName(t.status.Signal)
	default:
		p.Running = true
	}
	return p
}
