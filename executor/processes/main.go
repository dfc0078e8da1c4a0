package processes

import (
	"fmt"
	"os"
	"syscall"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/internal/environ"
	"github.com/bothy-sandbox/bothy/executor/reap"
)

// mainProc is the main command given to bothy-executor after "--".
type mainProc struct {
	argv []string
	proc *reap.Proc
}

// StartMain starts the sandbox's main command with the service's
// environment, in its own process group, stdin /dev/null, stdout to out and
// stderr to errOut. Its state is reported by Main; MainDone is closed when
// it exits.
func (s *Service) StartMain(argv []string, out, errOut *os.File) error {
	if len(argv) == 0 {
		return fmt.Errorf("start main command: empty argv")
	}
	path, err := environ.LookPath(argv[0], s.opts.Env, "")
	if err != nil {
		return fmt.Errorf("start main command: %w", err)
	}
	proc, err := s.opts.Reaper.StartProcess(path, argv, &os.ProcAttr{
		Env:   s.opts.Env,
		Files: []*os.File{s.devNull, out, errOut},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return fmt.Errorf("start main command %s: %w", argv[0], err)
	}
	s.mainMu.Lock()
	s.main = &mainProc{argv: argv, proc: proc}
	s.mainMu.Unlock()
	s.opts.Log.Info("main command started", "pid", proc.Pid, "argv", argv)
	return nil
}

// MainDone returns a channel closed when the main command has exited, and
// nil when there is none.
func (s *Service) MainDone() <-chan struct{} {
	s.mainMu.Lock()
	defer s.mainMu.Unlock()
	if s.main == nil {
		return nil
	}
	return s.main.proc.Done()
}

// MainStatus returns the main command's exit status once it has exited.
func (s *Service) MainStatus() (reap.Status, bool) {
	s.mainMu.Lock()
	defer s.mainMu.Unlock()
	if s.main == nil {
		return reap.Status{}, false
	}
	return s.main.proc.Status()
}

// Main is the state of the main command, nil without one.
func (s *Service) Main() *api.MainInfo {
	s.mainMu.Lock()
	m := s.main
	s.mainMu.Unlock()
	if m == nil {
		return nil
	}
	mi := &api.MainInfo{PID: m.proc.Pid, Argv: m.argv, StartedAt: m.proc.Started, Running: true}
	if st, ok := m.proc.Status(); ok {
		code := st.Code()
		fin := m.proc.Finished()
		mi.Running, mi.ExitCode, mi.Signal, mi.FinishedAt = false, &code, api.SignalName(st.Signal), &fin
	}
	return mi
}
