package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/disk"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/network"
)

// createFile, in a sandbox's state directory, keeps the CreateOptions it
// was made with (0600, as state.json: it holds the API key), so that
// Start can make it again the same.
const createFile = "create.json"

// ErrNotStartable: the sandbox cannot be started again (its creation was
// cut short, its record is lost, it predates Start, it waits in a pool).
var ErrNotStartable = errors.New("sandbox cannot be started again")

// StartReport is what Start changed that its caller should tell the user.
type StartReport struct {
	// PortsMoved: published host ports that were taken by something else
	// and were allocated again (old → new, in -p syntax).
	PortsMoved []string
}

// Start starts a stopped (or exited) sandbox again: the same ID, name, API
// key, limits, network settings, volumes, labels and main command, on the
// same upper directory (its files are all there; its processes start
// afresh: the executor, and the main command when it has one). Published
// ports keep their host ports when these are free; those taken meanwhile
// are allocated again (StartReport). A running sandbox is left as it is
// and returned, as podman start does.
//
// Start runs Create's steps on the sandbox's directories (see reuseStateDir):
// a failure or a kill at any step leaves the sandbox stopped, with its
// upper directory untouched, for another Start to finish or for rm and
// prune to remove.
func (m *Manager) Start(ctx context.Context, ref string) (*Sandbox, *StartReport, error) {
	id, err := m.paths.resolve(ref)
	if err != nil {
		return nil, nil, err
	}
	// After a reboot: its state directory again, from the record kept in
	// the data tree.
	if _, err := m.paths.restoreDir(ctx, id); err != nil {
		return nil, nil, err
	}
	old, err := m.paths.readState(id)
	if err != nil {
		return nil, nil, err
	}
	if old.Status == StatusRunning {
		return old, &StartReport{}, nil
	}
	if old.PendingSnapshot != "" {
		// A snapshot cut short: finished or forgotten first, so that
		// the start plans the layers the sandbox is on.
		if old, err = m.recoverPendingOf(ctx, id); err != nil {
			return nil, nil, err
		}
	}
	opts, err := m.startOptions(old)
	if err != nil {
		return nil, nil, err
	}
	trace.Mark("bothy", "start")
	pinned, pins := pinPorts(opts.Network.Publish, old)
	if pins {
		o := opts
		o.Network.Publish = pinned
		sb, err := m.create(ctx, &creation{m: m, opts: o, id: id, old: old})
		if err == nil || errors.Is(err, ErrRunning) || ctx.Err() != nil {
			return sb, &StartReport{}, err
		}
		// A host port taken meanwhile (or another failure, which the
		// second try reports): allocate them as they were asked for.
	}
	sb, err := m.create(ctx, &creation{m: m, opts: opts, id: id, old: old})
	if err != nil {
		return nil, nil, err
	}
	rep := &StartReport{}
	if pins {
		for i, p := range old.Ports() {
			if now := sb.Ports(); i < len(now) && now[i].HostPort != p.HostPort {
				rep.PortsMoved = append(rep.PortsMoved, p.String()+" → "+now[i].String())
			}
		}
	}
	return sb, rep, nil
}

// Restart stops a sandbox (as Stop, with grace) and starts it again.
func (m *Manager) Restart(ctx context.Context, ref string, grace time.Duration) (*Sandbox, *StartReport, error) {
	if err := m.Stop(ctx, ref, grace); err != nil {
		return nil, nil, err
	}
	return m.Start(ctx, ref)
}

// startOptions are the options sandbox old was created with, with what its
// record says changed since (a claim's name, key, environment, directory
// and labels, a rename), and its image by digest: the same image, even if
// its name was given to another since.
func (m *Manager) startOptions(old *Sandbox) (CreateOptions, error) {
	var opts CreateOptions
	if old.lost {
		return opts, fmt.Errorf("%w: %s has no record left (its state directory was lost); remove it with rm", ErrNotStartable, old.ShortID())
	}
	if old.Pool != "" {
		return opts, fmt.Errorf("%w: %s waits in pool %s; pools start their own", ErrNotStartable, old.ShortID(), old.Pool)
	}
	data, err := os.ReadFile(filepath.Join(old.Dir, createFile))
	if errors.Is(err, os.ErrNotExist) {
		return opts, fmt.Errorf("%w: %s was created by a bothy that did not keep its options (or its creation was cut short); remove it with rm", ErrNotStartable, old.ShortID())
	}
	if err != nil {
		return opts, fmt.Errorf("start sandbox %s: %w", old.ShortID(), err)
	}
	if err := json.Unmarshal(data, &opts); err != nil {
		return opts, fmt.Errorf("start sandbox %s: corrupt %s: %w", old.ShortID(), createFile, err)
	}
	opts.Name, opts.APIKey, opts.Env, opts.Workdir, opts.Labels = old.Name, old.APIKey, old.Env, old.Workdir, old.Labels
	opts.Image = old.ImageDigest
	return opts, nil
}

// pinPorts gives each -p spec the host port the sandbox had (IPv4 only, in
// the order the attachment lists them, which is publish's order), and
// reports whether any was pinned.
func pinPorts(publish []string, old *Sandbox) ([]string, bool) {
	had := old.Ports()
	if len(had) != len(publish) || len(had) == 0 {
		return publish, false
	}
	out := make([]string, len(publish))
	for i, spec := range publish {
		p, err := network.ParsePublish(spec)
		if err != nil || !had[i].HostIP.Is4() || p.ContainerPort != had[i].ContainerPort || p.Proto != had[i].Proto {
			return publish, false
		}
		out[i] = had[i].String()
	}
	return out, true
}

// reuseStateDir is makeStateDir for Start: it locks the sandbox's state
// directory (held until Start returns), checks that the sandbox is stopped
// and whole, and takes down what its last run left (processes, cgroups,
// network, libcontainer's state, the socket). A Start that fails stops what
// it started and leaves the directories as they were.
func (c *creation) reuseStateDir(ctx context.Context) error {
	unlock, err := c.m.paths.lock(ctx, c.id)
	if err != nil {
		return err
	}
	c.onExit(unlock)
	old, err := c.m.paths.readStateLocked(c.id)
	if err != nil {
		return err
	}
	switch {
	case old.Status == StatusRunning:
		return fmt.Errorf("%w: %s", ErrRunning, old.ShortID())
	case old.lost:
		return fmt.Errorf("%w: %s has no record left", ErrNotStartable, old.ShortID())
	}
	if old.Snapshot != c.snapshot || old.PendingSnapshot != "" {
		return fmt.Errorf("start sandbox %s: a snapshot of it was taken meanwhile: start it again", old.ShortID())
	}
	c.old = old
	c.dir, c.upperRoot = old.Dir, c.m.paths.upperRoot(c.id)
	if err := c.m.takeDown(ctx, old); err != nil {
		return fmt.Errorf("start sandbox %s: %w", old.ShortID(), err)
	}
	if st, err := os.Lstat(filepath.Join(c.upperRoot, "upper")); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: %s: its upper directory is gone", ErrNotStartable, old.ShortID())
	}
	if old.Disk != nil {
		if err := c.m.checkDisk(old); err != nil {
			return fmt.Errorf("start sandbox %s: %w", old.ShortID(), err)
		}
	}
	c.onExit(func() {
		if !c.failed {
			return
		}
		if rec, err := c.m.paths.readStateLocked(c.id); err == nil {
			_ = c.m.takeDown(context.WithoutCancel(ctx), rec)
		}
	})
	trace.Mark("bothy", "stopped sandbox taken down")
	return nil
}

// takeDown ends what is left of a stopped sandbox's last run, and nothing
// of its files: its processes, cgroups, the network its mode made on the
// host, libcontainer's state and the executor's socket.
func (m *Manager) takeDown(ctx context.Context, sb *Sandbox) error {
	if err := killSandbox(ctx, sb, sb.Cgroup); err != nil {
		return err
	}
	if err := destroyCgroups(ctx, cgroupTree(sb.ID, sb.Cgroup, sb.Dir)); err != nil {
		return err
	}
	nsb := m.networkSandbox(sb.ID)
	nsb.Attachment = sb.NetworkAttachment
	if err := network.Teardown(ctx, nsb); err != nil {
		return err
	}
	if err := userns.RemoveAs(ctx, m.opts.Init, sb.IDMap, filepath.Join(sb.Dir, "libcontainer")); err != nil {
		return err
	}
	if err := os.Remove(m.paths.SocketPath(sb.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove executor socket: %w", err)
	}
	return nil
}

// reuseRootfs is makeRootfs for Start: the directories are there.
func (c *creation) reuseRootfs() error {
	for _, d := range []string{filepath.Join(c.dir, "etc"), filepath.Join(c.dir, "rootfs"), filepath.Join(c.upperRoot, "work")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("start sandbox: %w", err)
		}
	}
	if len(c.main) > 0 {
		if err := os.MkdirAll(filepath.Join(c.upperRoot, mainDirName), 0o700); err != nil {
			return fmt.Errorf("start sandbox: %w", err)
		}
	}
	return nil
}

// keepRecord keeps, in the record Start writes, what the sandbox's first
// record said and a start does not change.
func (c *creation) keepRecord() {
	o := c.old
	c.sb.Image, c.sb.Created, c.sb.FromPool = o.Image, o.Created, o.FromPool
	c.sb.ImageStore = o.ImageStore
	// Until the new PID 1 is recorded, the sandbox reads as exited (the
	// old one is gone), or as creating while the launcher lives.
	c.sb.Pid, c.sb.PidStart = o.Pid, o.PidStart
}

// checkDisk makes sure a sandbox's disk limit is in force again before it
// starts: a filesystem image no longer mounted on its upper root (the host
// rebooted) is mounted again. A project quota stays on its directory.
func (m *Manager) checkDisk(sb *Sandbox) error {
	if sb.Disk.Mode != DiskLoop {
		return nil
	}
	upperRoot := m.paths.upperRoot(sb.ID)
	var st, parent unix.Stat_t
	if err := unix.Lstat(upperRoot, &st); err != nil {
		return fmt.Errorf("check disk image mount: %w", err)
	}
	if err := unix.Lstat(filepath.Dir(upperRoot), &parent); err != nil {
		return fmt.Errorf("check disk image mount: %w", err)
	}
	if st.Dev != parent.Dev {
		return nil
	}
	return disk.MountImage(m.paths.diskImage(sb.ID), upperRoot)
}
