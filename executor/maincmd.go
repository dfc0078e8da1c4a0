package executor

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/mainlog"
	"github.com/bothy-sandbox/bothy/executor/processes"
	"github.com/bothy-sandbox/bothy/executor/reap"
)

// The sandbox's main command (the command after "--" of bothy-executor),
// which the processes service runs.

// StartMain starts the main command with its stdout and stderr appended to
// logPath, the executor's own when logPath is empty. Its state is reported
// in GET /v1/info; MainDone is closed when it exits.
func (s *Server) StartMain(argv []string, logPath string) error {
	if logPath == "" {
		return s.services.procs.StartMain(processes.MainOptions{Argv: argv, Stdout: os.Stdout, Stderr: os.Stderr})
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return fmt.Errorf("create main log directory: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open main log: %w", err)
	}
	defer f.Close() // the child has its own copy
	return s.services.procs.StartMain(processes.MainOptions{Argv: argv, Stdout: f, Stderr: f})
}

// StartMainFile is StartMain with stdout and stderr going to out, a file
// the executor was handed (--main-log-fd).
func (s *Server) StartMainFile(argv []string, out *os.File) error {
	return s.services.procs.StartMain(processes.MainOptions{Argv: argv, Stdout: out, Stderr: out})
}

// StartMainDir starts the main command with its output recorded in dir
// (package mainlog: the log, rotated at maxLog bytes, and the status file,
// rewritten at each start and exit), restarted as restart says.
func (s *Server) StartMainDir(argv []string, dir string, maxLog int64, restart processes.Restart) error {
	w, err := mainlog.Open(dir, maxLog)
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		w.Close()
		return fmt.Errorf("create main output pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		w.Close()
		outR.Close()
		outW.Close()
		return fmt.Errorf("create main output pipe: %w", err)
	}
	log := s.opts.Logger
	pumps := make(chan struct{}, 2)
	pump := func(stream string, r *os.File) {
		if err := w.Copy(stream, r); err != nil {
			log.Warn("record main output", "stream", stream, "err", err)
		}
		r.Close()
		pumps <- struct{}{}
	}
	go pump("stdout", outR)
	go pump("stderr", errR)
	status := func(st mainlog.Status) {
		if err := mainlog.WriteStatus(dir, st); err != nil {
			log.Warn("record main status", "err", err)
		}
	}
	s.mainLogged = make(chan struct{})
	closeWriters := func() {
		outW.Close()
		errW.Close()
		// The output of processes it left behind keeps coming until
		// they exit (at the latest, at shutdown).
		go func() {
			<-pumps
			<-pumps
			w.Close()
			close(s.mainLogged)
		}()
	}
	err = s.services.procs.StartMain(processes.MainOptions{
		Argv: argv, Stdout: outW, Stderr: errW, Restart: restart,
		OnStart: func(pid int, started time.Time, restarts int) {
			status(mainlog.Status{Running: true, Pid: pid, StartedAt: started, Restarts: restarts})
		},
		OnExit: func(st reap.Status, started, finished time.Time, restarts int, final bool) {
			code := st.Code()
			status(mainlog.Status{Running: !final, ExitCode: &code, Signal: api.SignalName(st.Signal), StartedAt: started, FinishedAt: finished, Restarts: restarts})
			if final {
				closeWriters()
			}
		},
	})
	if err != nil {
		code := 127
		status(mainlog.Status{ExitCode: &code})
		_ = w.Write("stderr", []byte("bothy-executor: "+err.Error()), false)
		closeWriters()
		return err
	}
	return nil
}

// waitMainLogged waits, at most timeout, until the main command's output is
// all in its log: at shutdown, once every process is gone.
func (s *Server) waitMainLogged(timeout time.Duration) {
	if s.mainLogged == nil {
		return
	}
	select {
	case <-s.mainLogged:
	case <-time.After(timeout):
		s.opts.Logger.Warn("main command's output still coming at exit: the rest is lost")
	}
}

// MainDone returns a channel closed when the main command has exited, and
// nil when there is none.
func (s *Server) MainDone() <-chan struct{} { return s.services.procs.MainDone() }

// MainStatus returns the main command's exit status once it has exited.
func (s *Server) MainStatus() (reap.Status, bool) { return s.services.procs.MainStatus() }
