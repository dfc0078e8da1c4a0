package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/network"
)

// Removal. A sandbox is made of, in the order Create makes them: its state
// directory (locked by its creator while it works), its name, its upper
// directory, its state.json, its launcher, the overlay mounts in the
// launcher's mount namespace, its libcontainer state, its cgroups, its init
// (which becomes the executor, PID 1). A kill can stop bothy between any two
// of these; cleanup takes them down in an order that keeps the state
// directory, which names the sandbox, until everything else is gone, so
// that what is left is always listed by ps -a and removed by rm -f or prune.

// Remove deletes a sandbox that is not running: its processes, cgroups,
// upper and state directories, name. With force, a running or creating
// sandbox is killed first. A dead one (its creation or removal cut short) is
// removed with whatever processes are left in its cgroups.
func (m *Manager) Remove(ctx context.Context, ref string, force bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id, err := m.paths.resolve(ref)
	if err != nil {
		return err
	}
	// A creator holds the lock until its launcher has reported: without
	// force, do not wait for it; with force, end the launcher, and the
	// creator cleans up and lets go.
	if _, err := m.paths.restoreDir(ctx, id); err != nil {
		return err
	}
	endedLauncher := false
	if sb, err := m.paths.readState(id); err == nil && sb.Status == StatusCreating {
		if !force {
			return fmt.Errorf("%w: %s is being created; use --force", ErrRunning, sb.ShortID())
		}
		if sb.LauncherPid != 0 {
			endedLauncher = signalProcess(sb.LauncherPid, sb.LauncherStart, unix.SIGKILL) == nil
		}
	}
	unlock, err := m.paths.lock(ctx, id)
	switch {
	case err == nil:
		defer unlock()
	case errors.Is(err, ErrNotFound):
		if _, serr := os.Lstat(m.paths.upperRoot(id)); serr == nil {
			// An upper directory whose state directory is gone: no
			// creator works on an ID without one, no lock to take.
			break
		}
		if endedLauncher {
			return nil // its creator removed it
		}
		return err
	default:
		return err
	}
	sb, err := m.paths.readStateLocked(id)
	if err != nil {
		return err
	}
	if !force && (sb.Status == StatusRunning || sb.Status == StatusCreating) {
		return fmt.Errorf("%w: %s; stop it first or use --force", ErrRunning, sb.ShortID())
	}
	if err := m.cleanup(ctx, id, sb); err != nil {
		return err
	}
	if sb.Snapshot != "" || sb.PendingSnapshot != "" {
		// A fork's snapshot it was the last on.
		m.gcSnapshots(ctx)
	}
	return nil
}

// cleanup removes everything that is left of sandbox id, whatever step its
// creation or removal stopped at, one named step after another:
//
//  1. processes killed: its launcher, its PID 1 (bothy's record, else
//     libcontainer's), every process left in its cgroups; the overlay
//     mounts, which live in the launcher's and the sandbox's mount
//     namespaces, go with the last of them; then its stats file written,
//     if it has one (an error there is returned once the rest is done);
//  2. cgroups removed, in every hierarchy;
//  3. network removed: what the network mode's setup or attach made on the
//     host (the attachment recorded in sb, else the lease on disk);
//  4. disk limit removed: its image's mount, or its project quota;
//  5. upper directory removed (the data tree);
//  6. state removed: the state directory, with the bundle, libcontainer's
//     state, the socket directory and state.json;
//  7. name released.
//
// A step that fails stops the cleanup: the state directory, which names the
// sandbox, stays until everything but its name is gone, so that a failure
// or a kill at any step leaves it listed by ps -a, and rm -f or prune takes
// it up from there. The caller holds the sandbox's lock (or it has no state
// directory any more); sb is its record, or what readState makes of its
// directories when the record is lost. A done ctx stops it between steps,
// or in one that waits.
func (m *Manager) cleanup(ctx context.Context, id string, sb *Sandbox) error {
	mapping, cgroup := sb.IDMap, sb.Cgroup
	if sb.lost {
		mapping, cgroup = m.mapping, m.plannedCgroup(id)
	}
	var statsErr error
	steps := []struct {
		done string
		run  func() error
	}{
		{"processes killed", func() error { return killSandbox(ctx, sb, cgroup) }},
		// Not written does not keep the sandbox: the error comes after.
		{"stats written", func() error { statsErr = m.writeStatsFile(sb); return nil }},
		{"cgroups removed", func() error { return destroyCgroups(ctx, cgroupTree(id, cgroup, sb.Dir)) }},
		// What the network's setup made on the host, found from the ID
		// and the state directory (which is still there) alone.
		{"network removed", func() error {
			nsb := m.networkSandbox(id)
			nsb.Attachment = sb.NetworkAttachment
			return network.Teardown(ctx, nsb)
		}},
		// The disk limit's image mount or project quota, found from the ID
		// alone. The upper root is the image's mount point: while it is
		// mounted, nothing more is removed, so that rm can be run again.
		{"disk limit removed", func() error { return m.removeDisk(ctx, id) }},
		// The record kept for a start after a reboot goes before the
		// upper directory: it never names one that is gone.
		{"kept record removed", func() error { return m.paths.removeKept(id) }},
		{"upper directory removed", func() error { return userns.RemoveAs(ctx, m.opts.Init, mapping, m.paths.upperRoot(id)) }},
		{"state removed", func() error { return userns.RemoveAs(ctx, m.opts.Init, mapping, m.paths.dir(id)) }},
		{"name released", func() error {
			if sb.lost {
				return m.paths.releaseNames(id)
			}
			m.paths.releaseName(sb.Name, id)
			return nil
		}},
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("remove sandbox %s: %w", id[:12], err)
		}
		if err := step.run(); err != nil {
			return fmt.Errorf("remove sandbox %s: %w", id[:12], err)
		}
		trace.Mark("bothy", "rm: "+step.done)
	}
	if statsErr != nil {
		return fmt.Errorf("sandbox %s removed, but %w (%w)", id[:12], ErrStatsNotWritten, statsErr)
	}
	return nil
}

// networkSandbox is sandbox id as the network plan's setup, attach and
// teardown see it.
func (m *Manager) networkSandbox(id string) network.Sandbox {
	return network.Sandbox{ID: id, Dir: m.paths.dir(id), StateRoot: m.paths.State, Init: m.opts.Init, Config: m.opts.Network}
}

// plannedCgroup is the cgroup Create gives sandbox id under the current
// settings: the cgroup of a sandbox whose record is lost. "" when it would
// have none of its own, or a systemd scope (which systemd removes).
func (m *Manager) plannedCgroup(id string) string {
	rootless := m.mapping.Mode != userns.MapHost
	var parent string
	if m.cgroups.Unified() {
		parent = m.opts.Cgroups.Parent
		if parent == "" && !rootless {
			parent = "/bothy"
		}
	} else {
		parent = v1CgroupParent(m.opts.Cgroups.Parent, rootless)
	}
	if !filepath.IsAbs(parent) || filepath.Clean(parent) != parent || parent == "/" {
		return ""
	}
	return parent + "/" + id
}

// killSandbox kills every process of the sandbox and waits until they are
// gone: the launcher, if one is still creating it; its PID 1 (bothy's
// record; for a sandbox whose creator died before it recorded one,
// libcontainer's, which knows it from the container's start); and every
// process in its cgroups (an init that never became PID 1, or a PID 1 that
// nobody recorded). Processes are named by pid and start time, and by
// membership of the sandbox's own cgroups: nothing else is ever signalled.
func killSandbox(ctx context.Context, sb *Sandbox, cgroup string) error {
	if err := stopProcess(ctx, sb.LauncherPid, sb.LauncherStart, 0); err != nil {
		return fmt.Errorf("kill launcher: %w", err)
	}
	pid, start := sb.Pid, sb.PidStart
	if pid == 0 && sb.Dir != "" {
		pid, start = libcontainerInit(sb.Dir, sb.ID)
	}
	if err := stopProcess(ctx, pid, start, 0); err != nil {
		return fmt.Errorf("kill sandbox init: %w", err)
	}
	return killCgroup(ctx, cgroupTree(sb.ID, cgroup, sb.Dir))
}

// libcontainerState is what bothy reads of libcontainer's state in the
// sandbox directory, which the launcher writes once the container has
// started (and the sandbox cannot write: only the socket directory is
// mounted in).
type libcontainerState struct {
	Pid   int    `json:"init_process_pid"`
	Start uint64 `json:"init_process_start"`
	// CgroupPaths are the cgroup directories libcontainer made, by
	// controller.
	CgroupPaths map[string]string `json:"cgroup_paths"`
}

func readLibcontainerState(dir, id string) (libcontainerState, bool) {
	var st libcontainerState
	if dir == "" {
		return st, false
	}
	data, err := os.ReadFile(filepath.Join(dir, "libcontainer", id, "state.json"))
	return st, err == nil && json.Unmarshal(data, &st) == nil
}

// libcontainerInit reads the container's init process (pid and start time)
// from libcontainer's state; 0 when there is none.
func libcontainerInit(dir, id string) (int, uint64) {
	st, ok := readLibcontainerState(dir, id)
	if !ok || st.Pid <= 0 {
		return 0, 0
	}
	return st.Pid, st.Start
}

// cgroupTree lists the sandbox's cgroup directories that exist, and any
// cgroup below them, deepest first: its cgroup (cgroup) in every mounted
// hierarchy, and any other that libcontainer recorded making for it in the
// state directory dir (a sandbox without a cgroup of its own gets one below
// the launcher's cgroup wherever that is writable). Only a directory named
// by the sandbox's ID is the sandbox's own; a systemd scope is systemd's to
// remove.
func cgroupTree(id, cgroup, dir string) []string {
	var bases []string
	if cgroup != "" && strings.HasSuffix(cgroup, "/"+id) {
		bases = append(bases, "/sys/fs/cgroup"+cgroup)
		if entries, err := os.ReadDir("/sys/fs/cgroup"); err == nil {
			for _, e := range entries {
				bases = append(bases, filepath.Join("/sys/fs/cgroup", e.Name())+cgroup)
			}
		}
	}
	if st, ok := readLibcontainerState(dir, id); ok {
		for _, p := range st.CgroupPaths {
			if filepath.IsAbs(p) && filepath.Clean(p) == p && strings.HasPrefix(p, "/sys/fs/cgroup/") && filepath.Base(p) == id && !slices.Contains(bases, p) {
				bases = append(bases, p)
			}
		}
	}
	var dirs []string
	for _, base := range bases {
		var st unix.Statfs_t
		if unix.Statfs(base, &st) != nil || (st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC) {
			continue
		}
		// Sub-cgroups first: a cgroup with children cannot be removed.
		var tree []string
		_ = filepath.WalkDir(base, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				tree = append(tree, path)
			}
			return nil
		})
		slices.Reverse(tree)
		dirs = append(dirs, tree...)
	}
	return dirs
}

// killCgroup kills every process in the sandbox's cgroups (cgroupTree) and
// waits until they are empty, or ctx is done.
func killCgroup(ctx context.Context, dirs []string) error {
	if len(dirs) == 0 {
		return nil
	}
	for _, dir := range dirs {
		// cgroup v2 kills a whole subtree at once.
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	}
	deadline := time.Now().Add(10 * time.Second)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		left := 0
		for _, dir := range dirs {
			n, err := killCgroupProcs(dir)
			if err != nil {
				return err
			}
			left += n
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill processes in cgroup %s: %d survived SIGKILL", dirs[len(dirs)-1], left)
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return fmt.Errorf("kill processes in cgroup %s: %w", dirs[len(dirs)-1], err)
		}
	}
}

// killCgroupProcs sends SIGKILL to every process in one cgroup directory and
// returns how many it found. A process is signalled through a pidfd opened
// before the cgroup's list is read again: one that left the cgroup, and
// whose pid was given to another process, is never hit.
func killCgroupProcs(dir string) (int, error) {
	pids, err := cgroupProcs(dir)
	if err != nil || len(pids) == 0 {
		return 0, err
	}
	// A frozen process does not die until it is thawed (cgroup v1 freezer).
	if state, err := os.ReadFile(filepath.Join(dir, "freezer.state")); err == nil && strings.TrimSpace(string(state)) != "THAWED" {
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0)
	}
	fds := map[int]int{}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, pid := range pids {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			fds[pid] = fd
		}
	}
	still, err := cgroupProcs(dir)
	if err != nil {
		return 0, err
	}
	for _, pid := range still {
		if fd, ok := fds[pid]; ok {
			if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return 0, fmt.Errorf("kill process %d in cgroup %s: %w", pid, dir, err)
			}
		}
	}
	return len(still), nil
}

// cgroupProcs reads the processes in a cgroup directory.
func cgroupProcs(dir string) ([]int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read %s/cgroup.procs: %w", dir, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// destroyCgroups removes the sandbox's cgroup directories (cgroupTree) once
// its processes are gone (killSandbox). A cgroup whose last process has just
// died can stay busy for a moment: each removal is retried for a while
// (until ctx is done), killing anything that is (still) in it meanwhile.
func destroyCgroups(ctx context.Context, dirs []string) error {
	for _, dir := range dirs {
		err := unix.Rmdir(dir)
		for delay := time.Millisecond; errors.Is(err, unix.EBUSY) && delay <= time.Second; delay *= 2 {
			if _, kerr := killCgroupProcs(dir); kerr != nil {
				return kerr
			}
			if serr := sleepCtx(ctx, delay); serr != nil {
				return fmt.Errorf("remove cgroup %s: %w", dir, serr)
			}
			err = unix.Rmdir(dir)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// Prune removes every sandbox that is neither running nor being created,
// whatever step its creation or removal stopped at: exited and dead
// sandboxes (killing what is left in their cgroups), state directories
// without a record, upper directories whose state directory is gone, the
// temporary directories of killed creators, and names of sandboxes that are
// gone. A sandbox whose lock is held (its creator, or a stop or rm, is at
// work) or whose launcher lives is left alone. It returns the IDs removed.
func (m *Manager) Prune(ctx context.Context) ([]string, error) {
	// What pools left first (PrunePools): sandboxes of removed pools,
	// sandboxes killed fillers and claimers left.
	removed, perr := m.PrunePools(ctx)
	ids, err := m.paths.ids()
	if err != nil {
		return removed, errors.Join(perr, err)
	}
	errs := []error{perr}
	for _, id := range ids {
		if ctx.Err() != nil {
			return removed, ctx.Err()
		}
		if slices.Contains(removed, id) {
			continue
		}
		ok, err := m.pruneOne(ctx, id)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed = append(removed, id)
		}
	}
	errs = append(errs, m.paths.pruneNewDirs(ctx), m.paths.releaseNames(""), m.paths.pruneKept())
	// Forks' snapshots no sandbox is on any more, snapshots cut short.
	if _, err := m.PruneSnapshots(ctx); err != nil {
		errs = append(errs, fmt.Errorf("prune snapshots: %w", err))
	}
	// What attached networks hold for sandboxes that are gone, whether or
	// not anything else of them is left.
	if _, err := network.Prune(ctx, m.paths.State); err != nil {
		errs = append(errs, fmt.Errorf("prune networks: %w", err))
	}
	return removed, errors.Join(errs...)
}

// pruneOne removes sandbox id unless it runs or is being created; it reports
// whether it did.
func (m *Manager) pruneOne(ctx context.Context, id string) (bool, error) {
	if _, err := m.paths.restoreDir(ctx, id); err != nil {
		return false, err
	}
	unlock, err := m.paths.tryLock(id)
	switch {
	case err == nil:
		defer unlock()
	case errors.Is(err, errBusy):
		return false, nil
	case errors.Is(err, ErrNotFound):
		if _, serr := os.Lstat(m.paths.upperRoot(id)); serr != nil {
			return false, nil // removed meanwhile
		}
		// Its state directory is gone: nothing can be working on it.
	default:
		return false, err
	}
	sb, err := m.paths.readStateLocked(id)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	if sb.Status == StatusRunning || sb.Status == StatusCreating {
		return false, nil
	}
	if err := m.cleanup(ctx, id, sb); err != nil {
		return errors.Is(err, ErrStatsNotWritten), err
	}
	return true, nil
}

// sleepCtx sleeps for d, or until ctx is done (then its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Reap removes, of sandboxes, those started to be removed once they exit
// (CreateOptions.AutoRemove: Docker's `run -d --rm`) that have exited, and
// returns the others. With no daemon to remove one when it exits, the
// first bothy to find it so does: ps, wait and stop call Reap, and prune
// removes every exited sandbox anyway. A sandbox removed meanwhile by
// another bothy counts as removed.
func (m *Manager) Reap(ctx context.Context, sandboxes []*Sandbox) ([]*Sandbox, error) {
	var left []*Sandbox
	var errs []error
	for _, sb := range sandboxes {
		if !sb.AutoRemove || sb.Status != StatusExited {
			left = append(left, sb)
			continue
		}
		if err := m.Remove(ctx, sb.ID, false); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
			if now, err := m.paths.readState(sb.ID); err == nil {
				left = append(left, now) // started again meanwhile, or not (all) removed
			}
		}
	}
	return left, errors.Join(errs...)
}
