package processes

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/internal/environ"
	"github.com/bothy-sandbox/bothy/executor/internal/users"
	"github.com/bothy-sandbox/bothy/executor/reap"
)

// Restart is the main command's restart policy.
type Restart struct {
	// OnFailure restarts it when it exits with a code other than 0 (or is
	// killed by a signal), at most Max times (0: without limit), after a
	// delay that doubles from 100 ms up to 10 s at each restart.
	OnFailure bool
	Max       int
}

// MainOptions describe the sandbox's main command.
type MainOptions struct {
	Argv []string
	// Stdout and Stderr are the command's (stdin is /dev/null).
	Stdout, Stderr *os.File
	Restart        Restart
	// OnStart and OnExit, when set, are called at each start and exit;
	// final says the command will not be restarted.
	OnStart func(pid int, started time.Time, restarts int)
	OnExit  func(st reap.Status, started, finished time.Time, restarts int, final bool)
}

// mainProc is the main command given to bothy-executor after "--".
type mainProc struct {
	opts MainOptions
	path string
	done chan struct{} // closed when it has exited for good

	mu       sync.Mutex
	proc     *reap.Proc
	restarts int
}

// StartMain starts the sandbox's main command, as the service's default
// user, with the service's environment, in its own process group. Its
// state is reported by Main; MainDone is closed when it has exited and
// will not be restarted.
func (s *Service) StartMain(o MainOptions) error {
	if len(o.Argv) == 0 {
		return fmt.Errorf("start main command: empty argv")
	}
	env := users.Env(s.opts.Env, s.opts.User)
	path, err := environ.LookPath(o.Argv[0], env, "")
	if err != nil {
		return fmt.Errorf("start main command: %w", err)
	}
	m := &mainProc{opts: o, path: path, done: make(chan struct{})}
	if err := s.startMainOnce(m, env); err != nil {
		return err
	}
	s.mainMu.Lock()
	s.main = m
	s.mainMu.Unlock()
	go s.superviseMain(m, env)
	return nil
}

func (s *Service) startMainOnce(m *mainProc, env []string) error {
	proc, err := s.opts.Reaper.StartProcess(m.path, m.opts.Argv, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{s.devNull, m.opts.Stdout, m.opts.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Credential: users.SysCred(s.opts.User)},
	})
	if err != nil {
		return fmt.Errorf("start main command %s: %w", m.opts.Argv[0], err)
	}
	m.mu.Lock()
	m.proc = proc
	restarts := m.restarts
	m.mu.Unlock()
	s.opts.Log.Info("main command started", "pid", proc.Pid, "argv", m.opts.Argv, "restarts", restarts)
	if m.opts.OnStart != nil {
		m.opts.OnStart(proc.Pid, proc.Started, restarts)
	}
	return nil
}

// superviseMain waits for the main command and restarts it as its policy
// says, until it is done or the service shuts down.
func (s *Service) superviseMain(m *mainProc, env []string) {
	defer close(m.done)
	delay := 100 * time.Millisecond
	for {
		m.mu.Lock()
		proc, restarts := m.proc, m.restarts
		m.mu.Unlock()
		<-proc.Done()
		st, _ := proc.Status()
		r := m.opts.Restart
		again := r.OnFailure && !st.Success() && (r.Max == 0 || restarts < r.Max) && !s.closing.Load()
		s.opts.Log.Info("main command exited", "code", st.Code(), "restart", again)
		if m.opts.OnExit != nil {
			m.opts.OnExit(st, proc.Started, proc.Finished(), restarts, !again)
		}
		if !again {
			return
		}
		time.Sleep(delay)
		delay = min(2*delay, 10*time.Second)
		if s.closing.Load() {
			return
		}
		m.mu.Lock()
		m.restarts++
		m.mu.Unlock()
		if err := s.startMainOnce(m, env); err != nil {
			s.opts.Log.Warn("restart main command", "err", err)
			return
		}
	}
}

// MainDone returns a channel closed when the main command has exited for
// good, and nil when there is none.
func (s *Service) MainDone() <-chan struct{} {
	s.mainMu.Lock()
	defer s.mainMu.Unlock()
	if s.main == nil {
		return nil
	}
	return s.main.done
}

// MainStatus returns the main command's last exit status once it has
// exited for good.
func (s *Service) MainStatus() (reap.Status, bool) {
	s.mainMu.Lock()
	m := s.main
	s.mainMu.Unlock()
	if m == nil {
		return reap.Status{}, false
	}
	select {
	case <-m.done:
	default:
		return reap.Status{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc.Status()
}

// Main is the state of the main command, nil without one.
func (s *Service) Main() *api.MainInfo {
	s.mainMu.Lock()
	m := s.main
	s.mainMu.Unlock()
	if m == nil {
		return nil
	}
	m.mu.Lock()
	proc, restarts := m.proc, m.restarts
	m.mu.Unlock()
	mi := &api.MainInfo{PID: proc.Pid, Argv: m.opts.Argv, StartedAt: proc.Started, Running: true, Restarts: restarts}
	if st, ok := proc.Status(); ok {
		code := st.Code()
		fin := proc.Finished()
		mi.Running, mi.ExitCode, mi.Signal, mi.FinishedAt = false, &code, api.SignalName(st.Signal), &fin
	}
	return mi
}
