package executor

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/bothy-sandbox/bothy/executor/reap"
)

// The sandbox's main command (the command after "--" of bothy-executor),
// which the processes service runs.

// StartMain starts the main command with its stdout and stderr appended to
// logPath, the executor's own when logPath is empty. Its state is reported
// in GET /v1/info; MainDone is closed when it exits.
func (s *Server) StartMain(argv []string, logPath string) error {
	if logPath == "" {
		return s.services.procs.StartMain(argv, os.Stdout, os.Stderr)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return fmt.Errorf("create main log directory: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open main log: %w", err)
	}
	defer f.Close() // the child has its own copy
	return s.services.procs.StartMain(argv, f, f)
}

// StartMainFile is StartMain with stdout and stderr going to out, a file
// the executor was handed (bothy opens the main log on the host, in the
// sandbox's state directory, and passes it down: --main-log-fd).
func (s *Server) StartMainFile(argv []string, out *os.File) error {
	return s.services.procs.StartMain(argv, out, out)
}

// MainDone returns a channel closed when the main command has exited, and
// nil when there is none.
func (s *Server) MainDone() <-chan struct{} { return s.services.procs.MainDone() }

// MainStatus returns the main command's exit status once it has exited.
func (s *Server) MainStatus() (reap.Status, bool) { return s.services.procs.MainStatus() }
