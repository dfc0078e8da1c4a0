package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/proc"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"golang.org/x/sys/unix"
)

// launch is a launch in progress: the launcher process, started, that waits
// for the go-ahead.
type launch struct {
	cmd    *exec.Cmd
	conn   *os.File     // the launch channel: GoAhead out, LaunchResult in; closed: give up
	mapped func() error // waits for its user namespace's id maps
	stderr *bytes.Buffer
	done   bool
	// went: GoAhead was sent (goErr: or its sending failed).
	went  bool
	goErr error
}

// startLauncher starts the launcher in fresh namespaces and sends it req on
// its launch channel (ipc.LaunchFD). It initialises, enters its namespaces
// and mounts the root filesystem while the caller writes the bundle, then
// waits for run's GoAhead (or abort) before it reads config.json. files are
// passed on to the executor (from ipc.LauncherListenFD).
func (m *Manager) startLauncher(ctx context.Context, sb *Sandbox, dir string, req *ipc.LaunchRequest, files []*os.File) (*launch, error) {
	conn, peer, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("start launcher: %w", err)
	}
	lp := &launch{conn: conn, stderr: &bytes.Buffer{}}
	cmd := exec.CommandContext(ctx, m.opts.Init, ipc.ReexecLaunch)
	cmd.ExtraFiles = append([]*os.File{peer}, files...) // ipc.LaunchFD, then files
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
	peer.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("start launcher %s: %w", m.opts.Init, err)
	}
	lp.cmd, lp.mapped = cmd, mapped
	if sb.Cgroup != "" && !sb.CgroupSystemd && !m.warmed.Load() {
		warmCgroupMigration(cmd.Process.Pid, path.Dir(sb.Cgroup))
	}
	// The request waits in the channel while the launcher starts up.
	if err := ipc.Send(conn, req); err != nil {
		_ = cmd.Process.Kill()
		lp.abort()
		return nil, fmt.Errorf("start launcher: %w", err)
	}
	// Recorded before it may go ahead: while it lives the sandbox is
	// creating, and rm -f kills it first.
	start, _, err := proc.Start(cmd.Process.Pid)
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

// socketPair returns the two ends of a stream socket pair, close-on-exec.
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "launch"), os.NewFile(uintptr(fds[1]), "launch-peer"), nil
}

// goAhead lets the launcher go on with the written bundle: it creates the
// container while the caller goes on, until run.
func (lp *launch) goAhead() error {
	if err := lp.mapped(); err != nil {
		lp.done = true
		lp.conn.Close()
		_ = lp.cmd.Wait()
		return fmt.Errorf("start sandbox: map the user namespace: %w", err)
	}
	lp.went = true
	lp.goErr = ipc.Send(lp.conn, ipc.GoAhead{})
	return nil
}

// run lets the launcher go on with the written bundle (unless goAhead did)
// and returns the sandbox's PID 1 as the launcher reports it. With
// steps.attach (the request's ReportStart), the launcher first reports the
// container's init, waiting in the sandbox's namespaces, and run attaches
// the network to it (see launchSteps). When a step fails before the init
// was let go, the launch is called off (the launcher kills the init) and
// run returns the step's error; after, run returns it with the PID 1 the
// launcher reports, if any, for the caller to remove.
func (lp *launch) run(ctx context.Context, steps launchSteps) (int, error) {
	if !lp.went {
		if err := lp.goAhead(); err != nil {
			return 0, err
		}
	}
	lp.done = true
	defer lp.conn.Close()
	goErr := lp.goErr
	var res ipc.LaunchResult
	var cs ipc.ContainerStarted
	var msg ipc.Message
	var resErr error
	if steps.attach != nil {
		msg, resErr = ipc.Receive(lp.conn, &cs, &res)
	} else {
		msg, resErr = ipc.Receive(lp.conn, &res)
	}
	if _, ok := msg.(*ipc.ContainerStarted); ok {
		if steps.overlap {
			goErr = ipc.Send(lp.conn, ipc.NetworkReady{})
		}
		err := steps.attach(ctx, cs.Pid)
		if err != nil && !steps.overlap {
			lp.conn.Close()
			_ = lp.cmd.Wait()
			return 0, err
		}
		if err == nil && !steps.overlap {
			goErr = ipc.Send(lp.conn, ipc.NetworkReady{})
		}
		if err == nil && steps.attached != nil {
			err = steps.attached(ctx)
		}
		_, resErr = ipc.Receive(lp.conn, &res)
		if err != nil {
			_ = lp.cmd.Wait()
			return res.Pid, err
		}
	}
	waitErr := lp.cmd.Wait()
	switch {
	case resErr == nil && res.Error != "":
		return 0, fmt.Errorf("start sandbox: %s", res.Error)
	case resErr == nil && res.Pid > 0:
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
		if msg == "" && resErr != nil {
			msg = resErr.Error()
		}
		return 0, fmt.Errorf("start sandbox: launcher failed: %s", msg)
	}
}

// abort ends a launcher that was never told to run: closing the launch
// channel makes it exit before it touches anything; or, after goAhead, once
// it has killed the container's init it started (it reports the init on a
// channel that is closed).
func (lp *launch) abort() {
	if lp.done {
		return
	}
	lp.done = true
	lp.conn.Close()
	if !lp.went {
		_ = lp.mapped()
	}
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
