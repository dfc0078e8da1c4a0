package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoMain: the signal asked for reaches only a sandbox's main process,
// and the sandbox has none running.
var ErrNoMain = errors.New("sandbox has no main process running")

// KillTarget says what Kill signalled.
type KillTarget string

const (
	// KilledSandbox: SIGKILL to PID 1, which ends the sandbox.
	KilledSandbox KillTarget = "sandbox"
	// KilledMain: the signal went to the main process.
	KilledMain KillTarget = "main"
	// KilledExecutor: SIGTERM or SIGINT to PID 1, the executor, which
	// stops the sandbox as bothy stop does (without waiting for it).
	KilledExecutor KillTarget = "executor"
)

// Kill sends sig to a running sandbox, as podman kill does to a
// container's PID 1, except that PID 1 here is the executor:
//
//   - SIGKILL ends the sandbox: it goes to PID 1, whose death makes the
//     kernel kill every process of the sandbox's pid namespace (a paused
//     sandbox is thawed for its processes to die). Kill returns once
//     PID 1 is gone.
//   - Any other signal goes to the main process (run -d of an image's
//     command, or of the command after --) when it runs, and to nothing
//     else: its exit then decides the sandbox's, as always.
//   - Without a running main process, SIGTERM and SIGINT go to the
//     executor, which stops the sandbox (its processes get SIGTERM, then
//     SIGKILL after its grace); every other signal is refused
//     (ErrNoMain), since the executor would ignore it.
//
// Processes are found in the host's /proc and signalled through a pidfd
// checked to name a process of the sandbox's own pid namespace: a pid that
// was recycled, or a main process's pid that the sandbox's status file
// lies about, never reaches a process outside the sandbox.
func (m *Manager) Kill(ctx context.Context, ref string, sig unix.Signal) (KillTarget, error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return "", err
	}
	if sb.Status != StatusRunning {
		return "", fmt.Errorf("sandbox %s is %s, not running: nothing to signal", sb.ShortID(), sb.Status)
	}
	if sig == unix.SIGKILL {
		if err := signalProcess(sb.Pid, sb.PidStart, unix.SIGKILL); err != nil {
			return "", fmt.Errorf("kill sandbox %s: %w", sb.ShortID(), err)
		}
		// A frozen process does not die until it is thawed (cgroup v1).
		if f, err := freezerOf(sb); err == nil {
			if frozen, _ := f.frozen(); frozen {
				_ = f.set(ctx, false)
			}
		}
		if !waitGone(ctx, sb.Pid, sb.PidStart, 10*time.Second) {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			return "", fmt.Errorf("kill sandbox %s: PID 1 (%d) survived SIGKILL", sb.ShortID(), sb.Pid)
		}
		return KilledSandbox, nil
	}
	if sb.Main != nil && sb.Main.Running && sb.Main.Pid > 0 {
		fd, err := m.sandboxPidfd(ctx, sb, sb.Main.Pid)
		if err != nil {
			return "", fmt.Errorf("signal the main process of sandbox %s: %w", sb.ShortID(), err)
		}
		defer unix.Close(fd)
		if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
			if errors.Is(err, unix.ESRCH) {
				return "", fmt.Errorf("signal the main process of sandbox %s: %w (it has exited)", sb.ShortID(), ErrNoMain)
			}
			return "", fmt.Errorf("signal the main process of sandbox %s: %w", sb.ShortID(), err)
		}
		return KilledMain, nil
	}
	if sig == unix.SIGTERM || sig == unix.SIGINT {
		if err := signalProcess(sb.Pid, sb.PidStart, sig); err != nil {
			return "", fmt.Errorf("signal sandbox %s: %w", sb.ShortID(), err)
		}
		return KilledExecutor, nil
	}
	return "", fmt.Errorf("sandbox %s: %w: only its executor (PID 1) would get %s, and it ignores it; "+
		"KILL ends the sandbox, TERM stops it, and bothy exec %s -- kill -s SIG PID signals one of its processes",
		sb.ShortID(), ErrNoMain, unix.SignalName(sig), sb.ShortID())
}

// sandboxPidfd opens a pidfd for the process whose pid is nspid in the
// sandbox's pid namespace. The pidfd names one process for good; it is
// checked after it is opened to be in the namespace of the sandbox's PID 1
// with pid nspid there, so that a host pid recycled meanwhile is never
// taken for it.
func (m *Manager) sandboxPidfd(ctx context.Context, sb *Sandbox, nspid int) (int, error) {
	procs, err := m.Top(ctx, sb.ID)
	if err != nil {
		return -1, err
	}
	ns, err := pidNamespace(sb.Pid)
	if err != nil || !alive(sb.Pid, sb.PidStart) {
		return -1, fmt.Errorf("sandbox %s has exited", sb.ShortID())
	}
	for _, p := range procs {
		if p.SandboxPid != nspid || p.Pid == sb.Pid {
			continue
		}
		fd, err := unix.PidfdOpen(p.Pid, 0)
		if err != nil {
			break
		}
		got, _, _ := nsIDs(p.Pid)
		if pns, err := pidNamespace(p.Pid); err == nil && pns == ns && got == nspid {
			return fd, nil
		}
		unix.Close(fd)
		break
	}
	return -1, fmt.Errorf("%w: no process has pid %d in the sandbox (it has exited)", ErrNoMain, nspid)
}

// pidNamespace is the identity of a process's pid namespace
// (/proc/PID/ns/pid's device and inode).
func pidNamespace(pid int) ([2]uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/pid", &st); err != nil {
		return [2]uint64{}, fmt.Errorf("read pid namespace of %d: %w", pid, err)
	}
	return [2]uint64{st.Dev, st.Ino}, nil
}
