package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
)

// launcher is a started launcher that waits for the go-ahead.
type launcher struct {
	cmd     *exec.Cmd
	reportR *os.File     // its Result
	goW     *os.File     // one byte: the bundle is written; closed: give up
	mapped  func() error // waits for its user namespace's id maps
	stderr  *bytes.Buffer
	done    bool
}

// startLauncher starts the launcher in fresh namespaces. It initialises,
// enters its namespaces and mounts the root filesystem (launch.json) while
// the caller writes the bundle, then waits on fd 4 for run (or abort) before
// it reads config.json. files are passed on to the executor (from fd 5:
// ipc.LauncherListenFD).
func (m *Manager) startLauncher(ctx context.Context, sb *Sandbox, dir string, files []*os.File) (*launcher, error) {
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		reportR.Close()
		reportW.Close()
		return nil, err
	}
	lp := &launcher{reportR: reportR, goW: goW, stderr: &bytes.Buffer{}}
	cmd := exec.CommandContext(ctx, m.opts.Init, ipc.Arg, filepath.Join(dir, "launch.json"))
	cmd.ExtraFiles = append([]*os.File{reportW, goR}, files...) // fds 3, 4, then files
	cmd.Stderr = lp.stderr
	// A killed launcher's stray descendants must not hold Wait on its
	// stderr pipe.
	cmd.WaitDelay = time.Second
	if trace.Enabled() {
		cmd.Stderr = os.Stderr
	}
	cmd.Env = launcherEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	mapped, err := userns.Start(cmd, m.mapping)
	reportW.Close()
	goR.Close()
	if err != nil {
		reportR.Close()
		goW.Close()
		return nil, fmt.Errorf("start launcher %s: %w", m.opts.Init, err)
	}
	lp.cmd, lp.mapped = cmd, mapped
	if sb.Cgroup != "" && !sb.CgroupSystemd && !m.warmed.Load() {
		warmCgroupMigration(cmd.Process.Pid, path.Dir(sb.Cgroup))
	}
	// Recorded before it may go ahead: while it lives the sandbox is
	// creating, and rm -f kills it first.
	start, _, err := procStart(cmd.Process.Pid)
	if err == nil {
		sb.LauncherPid, sb.LauncherStart = cmd.Process.Pid, start
		err = writeState(dir, sb)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		lp.abort()
		return nil, fmt.Errorf("start launcher: record it: %w", err)
	}
	return lp, nil
}

// run lets the launcher go on with the written bundle and returns the
// sandbox's PID 1 as the launcher reports it.
func (lp *launcher) run(ctx context.Context) (int, error) {
	lp.done = true
	defer lp.reportR.Close()
	if err := lp.mapped(); err != nil {
		lp.goW.Close()
		_ = lp.cmd.Wait()
		return 0, fmt.Errorf("start sandbox: map the user namespace: %w", err)
	}
	_, goErr := lp.goW.Write([]byte{1})
	lp.goW.Close()
	var res ipc.Result
	decodeErr := json.NewDecoder(lp.reportR).Decode(&res)
	waitErr := lp.cmd.Wait()
	switch {
	case decodeErr == nil && res.Error != "":
		return 0, fmt.Errorf("start sandbox: %s", res.Error)
	case decodeErr == nil && res.Pid > 0:
		return res.Pid, nil
	case ctx.Err() != nil:
		return 0, fmt.Errorf("start sandbox: %w", ctx.Err())
	default:
		msg := strings.TrimSpace(lp.stderr.String())
		if msg == "" && waitErr != nil {
			msg = waitErr.Error()
		}
		if msg == "" && goErr != nil {
			msg = goErr.Error()
		}
		return 0, fmt.Errorf("start sandbox: launcher failed: %s", msg)
	}
}

// abort ends a launcher that was never told to run: closing its go-ahead
// pipe makes it exit before it touches anything.
func (lp *launcher) abort() {
	if lp.done {
		return
	}
	lp.done = true
	lp.goW.Close()
	lp.reportR.Close()
	_ = lp.mapped()
	_ = lp.cmd.Wait()
}

// launcherEnv passes the environment through, minus anything that would steer
// libcontainer's init in the wrong process.
func launcherEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "_LIBCONTAINER_") {
			env = append(env, kv)
		}
	}
	return env
}
