package executor

import (
	"fmt"
	"os"
	"path/filepath"
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

// StartMain starts the sandbox's main command with the server's
// environment, in its own process group, stdin /dev/null, and stdout and
// stderr appended to logPath (the executor's own when logPath is empty).
// Its state is reported in GET /v1/info; MainDone is closed when it exits.
func (s *Server) StartMain(argv []string, logPath string) error {
	if logPath == "" {
		return s.startMain(argv, os.Stdout, os.Stderr)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return fmt.Errorf("create main log directory: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open main log: %w", err)
	}
	defer f.Close() // the child has its own copy
	return s.startMain(argv, f, f)
}

// StartMainFile is StartMain with stdout and stderr going to out, a file
// the executor was handed (bothy opens the main log on the host, in the
// sandbox's state directory, and passes it down: --main-log-fd).
func (s *Server) StartMainFile(argv []string, out *os.File) error {
	return s.startMain(argv, out, out)
}

func (s *Server) startMain(argv []string, out, errOut *os.File) error {
	if len(argv) == 0 {
		return fmt.Errorf("start main command: empty argv")
	}
	path, err := environ.LookPath(argv[0], s.env, "")
	if err != nil {
		return fmt.Errorf("start main command: %w", err)
	}
	proc, err := s.reaper.StartProcess(path, argv, &os.ProcAttr{
		Env:   s.env,
		Files: []*os.File{s.devNull, out, errOut},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return fmt.Errorf("start main command %s: %w", argv[0], err)
	}
	s.mainMu.Lock()
	s.main = &mainProc{argv: argv, proc: proc}
	s.mainMu.Unlock()
	s.log.Info("main command started", "pid", proc.Pid, "argv", argv)
	return nil
}

// MainDone returns a channel closed when the main command has exited, and
// nil when there is none.
func (s *Server) MainDone() <-chan struct{} {
	s.mainMu.Lock()
	defer s.mainMu.Unlock()
	if s.main == nil {
		return nil
	}
	return s.main.proc.Done()
}

// MainStatus returns the main command's exit status once it has exited.
func (s *Server) MainStatus() (reap.Status, bool) {
	s.mainMu.Lock()
	defer s.mainMu.Unlock()
	if s.main == nil {
		return reap.Status{}, false
	}
	return s.main.proc.Status()
}

// Main is the state of the main command, nil without one.
func (s *Server) Main() *api.MainInfo {
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
