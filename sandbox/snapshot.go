package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/names"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
)

// Snapshots. A snapshot is a sandbox's upper directory made a read-only
// layer: renamed (never copied) into the snapshots directory, where it is
// a lower directory of the sandbox it came from (which gets a fresh upper
// on top) and of every sandbox started from it. See docs/snapshots.md.
//
// Layout, under the data directory:
//
//	snapshots/ID/snapshot.json   the record (Snapshot)
//	snapshots/ID/layer           the layer: the sandbox's upper, renamed
//	snapshots/ID/compact         its chain's layers merged (compact.go)
//	snapshots/names/NAME         → ID (a symlink, made atomically)
//
// The snapshots directory's lock is held shared by whoever makes a
// snapshot or a sandbox on one, or compacts one, and exclusively by
// RemoveSnapshot and PruneSnapshots, which read every sandbox's record to
// know what is used.

var (
	// ErrSnapshotNotFound: no snapshot has that name or ID.
	ErrSnapshotNotFound = errors.New("no such snapshot")
	// ErrSnapshotInUse: a sandbox or another snapshot is on it.
	ErrSnapshotInUse = errors.New("snapshot is in use")
	// ErrSnapshotDepth: the layer stack is as deep as bothy lets it be.
	ErrSnapshotDepth = errors.New("snapshot stack too deep")
)

// MaxSnapshotDepth is how many snapshot layers a sandbox's layer stack may
// mount (snapshots of sandboxes started from snapshots...): each is a
// lower directory of the overlay, until a compacted snapshot stands for
// itself and all below it (CompactSnapshot). A stack whose mount options
// do not fit in a page (about 80 snapshot layers over a one-layer image,
// 16 over a 40-layer one) is mounted with one fsconfig call per layer
// (rootfs.MountStack), so the limit is overlay's own: 500 lower layers,
// of which this leaves 244 to the image's. A snapshot that would go past
// it compacts its parent first, in the foreground; the chain of snapshots
// itself (Snapshot.Depth) has no limit.
const MaxSnapshotDepth = 256

// maxChain bounds a walk down a chain of snapshots' parents (a chain
// longer is a loop in corrupt records).
const maxChain = 1 << 16

// Snapshot is the record of one snapshot (snapshot.json).
type Snapshot struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"` // "": a fork's, kept while used
	// Parent is the snapshot the sandbox was on when this was taken: its
	// layer is below this one. Depth counts the layers, this one too.
	Parent string `json:"parent,omitempty"`
	Depth  int    `json:"depth"`
	// Source is the sandbox the layer was the upper directory of.
	Source      string         `json:"source"`
	Image       string         `json:"image"`
	ImageDigest string         `json:"image_digest"`
	ImageStore  string         `json:"image_store,omitempty"`
	IDMap       userns.Mapping `json:"idmap"`
	Created     time.Time      `json:"created"`
	// Volumes are the source's overlay volumes, whose upper directories
	// became layers of this snapshot too (snapshots/ID/volumes/N).
	Volumes []SnapshotVolume `json:"volumes,omitempty"`

	// Filled in when read, never stored.
	Dir   string   `json:"dir"`
	Users []string `json:"users,omitempty"` // IDs of the sandboxes on it
	// Children are the snapshots taken of sandboxes on it.
	Children []string `json:"children,omitempty"`
	// Complete: its layer is in place (the rename was made).
	Complete bool `json:"complete"`
	// Compacted: its chain's layers are merged into one, which sandboxes
	// on it (or on snapshots above it) mount instead (CompactSnapshot).
	Compacted bool `json:"compacted"`
	// Stack is how many snapshot layers a sandbox on it mounts: its own
	// and those below it down to the first compacted one, which counts
	// for itself and all below it (Depth when none is).
	Stack int `json:"stack"`
}

func (p Paths) snapshots() string            { return filepath.Join(p.Data, "snapshots") }
func (p Paths) snapshotDir(id string) string { return filepath.Join(p.snapshots(), id) }
func (p Paths) snapshotLayer(id string) string {
	return filepath.Join(p.snapshots(), id, "layer")
}
func (p Paths) snapshotNames() string { return filepath.Join(p.snapshots(), "names") }
func (p Paths) snapshotVolumeLayer(id string, index int) string {
	return filepath.Join(p.snapshots(), id, "volumes", strconv.Itoa(index))
}

// SnapshotVolume is one overlay volume of a snapshot's source: its upper
// directory, renamed to snapshots/ID/volumes/INDEX after the root
// filesystem's (see recoverSnapshot), is a lower layer of the volume in
// every sandbox on the snapshot that mounts the same host directory at the
// same target.
type SnapshotVolume struct {
	Target   string `json:"target"`
	HostPath string `json:"host_path"`
	// Index is the volume's place in the source's mounts: its upper was
	// volumes/INDEX/upper in the source's directory.
	Index int `json:"index"`
}

// lockSnapshots takes the snapshots directory's lock (made on first use).
func (m *Manager) lockSnapshots(ctx context.Context, exclusive bool) (unlock func(), err error) {
	f, err := m.lockSnapshotsFile(ctx, exclusive)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// lockSnapshotsFile is lockSnapshots, returning the file that holds the
// lock (see flockDirFile).
func (m *Manager) lockSnapshotsFile(ctx context.Context, exclusive bool) (*os.File, error) {
	if err := os.MkdirAll(m.paths.snapshotNames(), 0o700); err != nil {
		return nil, fmt.Errorf("snapshots: %w", err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	return flockDirFile(ctx, m.paths.snapshots(), "", how)
}

// readSnapshot reads snapshot id's record.
func (m *Manager) readSnapshot(id string) (*Snapshot, error) {
	if !validID(id) {
		return nil, fmt.Errorf("%w: %s", ErrSnapshotNotFound, id)
	}
	data, err := os.ReadFile(filepath.Join(m.paths.snapshotDir(id), "snapshot.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrSnapshotNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", id[:12], err)
	}
	var s Snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("read snapshot %s: corrupt snapshot.json: %w", id[:12], err)
	}
	s.ID, s.Dir = id, m.paths.snapshotDir(id)
	st, err := os.Lstat(m.paths.snapshotLayer(id))
	s.Complete = err == nil && st.IsDir()
	st, err = os.Lstat(m.paths.snapshotCompact(id))
	s.Compacted = err == nil && st.IsDir() && s.Complete
	return &s, nil
}

// resolveSnapshotRef finds a snapshot by name, ID or unique ID prefix.
func (m *Manager) resolveSnapshotRef(ref string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("%w: empty reference", ErrSnapshotNotFound)
	}
	if names.Valid(ref) {
		if id, err := os.Readlink(filepath.Join(m.paths.snapshotNames(), ref)); err == nil && validID(id) {
			return id, nil
		}
	}
	ids, err := m.snapshotIDs()
	if err != nil {
		return "", err
	}
	match, ambiguous := uniquePrefix(ids, ref)
	switch {
	case ambiguous:
		return "", fmt.Errorf("%w: snapshot ID prefix %s is ambiguous", ErrSnapshotNotFound, ref)
	case match == "":
		return "", fmt.Errorf("%w: %s", ErrSnapshotNotFound, ref)
	}
	return match, nil
}

func (m *Manager) snapshotIDs() ([]string, error) {
	entries, err := os.ReadDir(m.paths.snapshots())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && validID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// snapshotChain is snapshot id and its parents, bottom first, checked
// complete and made for the caller's id mapping (snapshotStack says which
// of their layers a sandbox mounts).
func (m *Manager) snapshotChain(id string) ([]*Snapshot, error) {
	var chain []*Snapshot
	for next := id; next != ""; {
		s, err := m.readSnapshot(next)
		if err != nil {
			return nil, err
		}
		if !s.Complete {
			return nil, fmt.Errorf("%w: %s is incomplete (its snapshot was cut short); bothy prune removes it", ErrSnapshotNotFound, next[:12])
		}
		if !reflect.DeepEqual(s.IDMap, m.mapping) {
			return nil, fmt.Errorf("snapshot %s: made under another id mapping (%s), its files would be owned wrong here (%s)", cmp.Or(s.Name, s.ID[:12]), s.IDMap.Mode, m.mapping.Mode)
		}
		chain = append(chain, s)
		if len(chain) > maxChain {
			return nil, fmt.Errorf("snapshot %s: its chain of parents does not end (corrupt snapshot.json)", id[:12])
		}
		next = s.Parent
	}
	slices.Reverse(chain)
	return chain, nil
}

// resolveSnapshot is the creation step that finds the snapshot the sandbox
// starts on (CreateOptions.FromSnapshot, or, for Start, the one its record
// names) and takes its image from it. It holds the snapshots' lock shared
// until Create returns: no snapshot it uses can be removed meanwhile.
func (c *creation) resolveSnapshot(ctx context.Context) error {
	ref := c.opts.FromSnapshot
	if c.old != nil {
		ref = c.old.Snapshot
	}
	if ref == "" {
		return nil
	}
	unlock, err := c.m.lockSnapshots(ctx, false)
	if err != nil {
		return err
	}
	c.onExit(unlock)
	id, err := c.m.resolveSnapshotRef(ref)
	if err != nil {
		return err
	}
	s, err := c.m.readSnapshot(id)
	if err != nil {
		return err
	}
	if c.old == nil && c.opts.Image != "" && c.opts.Image != s.ImageDigest {
		return fmt.Errorf("--from-snapshot %s: the snapshot is of image %s; give no image", ref, s.Image)
	}
	c.snapshot, c.snapshotImage = id, s.Image
	c.opts.Image = s.ImageDigest
	return nil
}

// addSnapshotLayers puts the snapshot's layers (its parents' first, or
// the compacted layer of the first compacted one: snapshotStack) above the
// image's: the sandbox's lower stack.
func (c *creation) addSnapshotLayers(context.Context) error {
	if c.snapshot == "" {
		return nil
	}
	chain, err := c.m.snapshotChain(c.snapshot)
	if err != nil {
		return err
	}
	if d := c.img.Digest.String(); chain[0].ImageDigest != d {
		return fmt.Errorf("snapshot %s is of image %s, not %s", c.snapshot[:12], chain[0].ImageDigest, d)
	}
	stack := c.m.snapshotStack(chain)
	if len(stack) > MaxSnapshotDepth {
		return fmt.Errorf("snapshot %s: %w: a sandbox on it would mount %d snapshot layers (at most %d): bothy snapshot compact %s merges them into one", c.snapshot[:12], ErrSnapshotDepth, len(stack), MaxSnapshotDepth, c.snapshot[:12])
	}
	for _, dir := range stack {
		c.layers = append(c.layers, ipc.Layer{Snapshot: dir})
	}
	c.snapshotStack = len(stack)
	c.volumeLayers, err = c.m.snapshotVolumeLayers(chain, c.mounts)
	return err
}

// snapshotVolumeLayers are the snapshot layers of each overlay volume in
// mounts, by target, top-most first: walking down the chain (bottom first)
// from its top, every snapshot whose source had an overlay volume of the
// same host directory at the same target gives its layer of it, until one
// did not (below it, the volume's writes were not the chain's). So a fork's
// child, or a sandbox run from a snapshot with the same -v, sees the
// volume as its source had it; another host directory or target starts
// empty above its host directory.
func (m *Manager) snapshotVolumeLayers(chain []*Snapshot, mounts []Mount) (map[string][]string, error) {
	out := map[string][]string{}
	for _, mnt := range mounts {
		if mnt.Kind != MountOverlay {
			continue
		}
	walk:
		for i := len(chain) - 1; i >= 0; i-- {
			s := chain[i]
			for _, v := range s.Volumes {
				if v.Target != mnt.Target || v.HostPath != mnt.HostPath {
					continue
				}
				layer := m.paths.snapshotVolumeLayer(s.ID, v.Index)
				if st, err := os.Lstat(layer); err != nil || !st.IsDir() {
					return nil, fmt.Errorf("%w: %s: its layer of volume %s is missing (its snapshot was cut short: bothy start %s finishes it)", ErrSnapshotNotFound, s.ID[:12], v.Target, s.Source[:12])
				}
				out[mnt.Target] = append(out[mnt.Target], layer)
				continue walk
			}
			break
		}
	}
	return out, nil
}

// SnapshotOptions are a snapshot's.
type SnapshotOptions struct {
	// Name keeps the snapshot until RemoveSnapshot; "" (a fork's) keeps it
	// while a sandbox or snapshot is on it.
	Name string
	// Grace is how long the sandbox's processes get to end before SIGKILL
	// (0: frozen, then killed at once).
	Grace time.Duration
	// NoRestart leaves a running sandbox stopped after its snapshot.
	NoRestart bool
}

// TakeSnapshot makes sandbox ref's files a snapshot: its processes are
// frozen (cgroup freezer), then stopped; its upper directory is renamed
// into a new snapshot's layer (no copy: the cost does not depend on how
// much it holds); it gets a fresh upper directory above that layer, and,
// if it was running, it is started again (Start: its processes start
// afresh, its files are all there). A stopped sandbox stays stopped.
//
// The rename is the commit point. Before it, the sandbox's record names
// the snapshot as pending (Sandbox.PendingSnapshot); recoverSnapshot,
// which Start, TakeSnapshot and Prune run first, finishes a snapshot whose
// rename was made and forgets one whose rename was not: a kill at any step
// never loses a file, and leaves what prune removes.
func (m *Manager) TakeSnapshot(ctx context.Context, ref string, o SnapshotOptions) (*Snapshot, error) {
	s, wasRunning, err := m.takeSnapshot(ctx, ref, o)
	if err != nil {
		return nil, err
	}
	if wasRunning && !o.NoRestart {
		if _, _, err := m.Start(ctx, s.Source); err != nil {
			return s, fmt.Errorf("snapshot %s taken; start sandbox %s again: %w", cmp.Or(s.Name, s.ID[:12]), s.Source[:12], err)
		}
	}
	return s, nil
}

func (m *Manager) takeSnapshot(ctx context.Context, ref string, o SnapshotOptions) (_ *Snapshot, wasRunning bool, err error) {
	if o.Name != "" && !names.Valid(o.Name) {
		return nil, false, fmt.Errorf("invalid snapshot name %q: use 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit", o.Name)
	}
	id, err := m.paths.resolve(ref)
	if err != nil {
		return nil, false, err
	}
	unlock, err := m.paths.lock(ctx, id)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	sb, err := m.paths.readStateLocked(id)
	if err != nil {
		return nil, false, err
	}
	if err := m.recoverSnapshot(ctx, sb); err != nil {
		return nil, false, err
	}
	switch {
	case sb.lost:
		return nil, false, fmt.Errorf("snapshot %s: %w: it has no record left", sb.ShortID(), ErrNotStartable)
	case sb.Status == StatusCreating:
		return nil, false, fmt.Errorf("snapshot %s: it is being created", sb.ShortID())
	case sb.Pool != "":
		return nil, false, fmt.Errorf("snapshot %s: %w: it waits in pool %s", sb.ShortID(), ErrNotStartable, sb.Pool)
	case sb.Disk != nil && sb.Disk.Mode == DiskLoop:
		return nil, false, fmt.Errorf("snapshot %s: its upper directory is on its own filesystem image (--disk without project quotas): it cannot be renamed out of it", sb.ShortID())
	}
	depth, stack := 1, 1
	if sb.Snapshot != "" {
		parent, err := m.readSnapshot(sb.Snapshot)
		if err != nil {
			return nil, false, err
		}
		depth, stack = parent.Depth+1, m.stackDepth(parent, m.readSnapshot)+1
		if stack > MaxSnapshotDepth {
			// No compaction of the stack finished (none was started, or
			// it failed): the parent is compacted here, before the
			// snapshot, so that sandboxes on it can start.
			if _, err := m.CompactSnapshot(ctx, sb.Snapshot); err != nil {
				return nil, false, fmt.Errorf("snapshot %s: %w: its layer stack is %d snapshot layers deep already (at most %d), and compacting it failed: %w", sb.ShortID(), ErrSnapshotDepth, stack-1, MaxSnapshotDepth, err)
			}
			stack = 2
		}
	}
	unlockSnaps, err := m.lockSnapshots(ctx, false)
	if err != nil {
		return nil, false, err
	}
	defer unlockSnaps()

	// 1. The snapshot's directory and record, without a layer yet (an
	// incomplete snapshot: prune removes it unless a sandbox's record
	// names it pending).
	s := &Snapshot{
		ID: newID(), Name: o.Name, Parent: sb.Snapshot, Depth: depth, Stack: stack, Source: id,
		Image: sb.Image, ImageDigest: sb.ImageDigest, ImageStore: sb.ImageStore, IDMap: sb.IDMap,
		Created: time.Now().UTC(),
	}
	for i, mnt := range sb.Mounts {
		if mnt.Kind == MountOverlay && mnt.Upper != "" {
			s.Volumes = append(s.Volumes, SnapshotVolume{Target: mnt.Target, HostPath: mnt.HostPath, Index: i})
		}
	}
	s.Dir = m.paths.snapshotDir(s.ID)
	if err := os.Mkdir(s.Dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("make snapshot: %w", err)
	}
	if len(s.Volumes) > 0 {
		if err := os.Mkdir(filepath.Join(s.Dir, "volumes"), 0o700); err != nil {
			return nil, false, fmt.Errorf("make snapshot: %w", err)
		}
	}
	if err := writeJSON(filepath.Join(s.Dir, "snapshot.json"), s); err != nil {
		return nil, false, fmt.Errorf("make snapshot: %w", err)
	}
	if o.Name != "" {
		if err := m.reserveSnapshotName(o.Name, s.ID); err != nil {
			_ = os.RemoveAll(s.Dir)
			return nil, false, err
		}
	}
	trace.Mark("bothy", "snapshot: record made")
	// 2. The sandbox's record names it pending.
	sb.PendingSnapshot = s.ID
	if err := writeState(sb.Dir, sb); err != nil {
		return nil, false, err
	}
	trace.Mark("bothy", "snapshot: pending")
	// 3. Its processes frozen, then ended: the overlay that has the upper
	// directory as its upper goes with the last of them.
	wasRunning = sb.Status == StatusRunning
	if err := m.freezeAndKill(ctx, sb, o.Grace); err != nil {
		return nil, wasRunning, fmt.Errorf("snapshot %s: stop it: %w", sb.ShortID(), err)
	}
	trace.Mark("bothy", "snapshot: stopped")
	// 4. The rename: the commit point.
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(m.paths.upperRoot(id), "upper"), unix.AT_FDCWD, m.paths.snapshotLayer(s.ID), unix.RENAME_NOREPLACE); err != nil {
		return nil, wasRunning, fmt.Errorf("snapshot %s: move its upper directory into the snapshot: %w", sb.ShortID(), err)
	}
	trace.Mark("bothy", "snapshot: layer renamed")
	// 5. A fresh upper, and the record on the snapshot.
	if err := m.recoverSnapshot(ctx, sb); err != nil {
		return nil, wasRunning, err
	}
	trace.Mark("bothy", "snapshot: done")
	s.Complete = true
	return s, wasRunning, nil
}

// freezeAndKill stops a sandbox for a snapshot: frozen first (when it has a
// freezer), so that all its processes stop at one instant and none writes
// after another has ended; then, after grace, killed. Its overlay goes
// with its last process.
func (m *Manager) freezeAndKill(ctx context.Context, sb *Sandbox, grace time.Duration) error {
	if sb.Status != StatusRunning {
		return killSandbox(ctx, sb, sb.Cgroup)
	}
	if grace > 0 {
		if err := stopProcess(ctx, sb.Pid, sb.PidStart, grace); err != nil {
			return err
		}
	}
	f, ferr := freezerOf(sb)
	if ferr == nil {
		if err := f.set(ctx, true); err != nil {
			return err
		}
		// Killed while frozen: they die as soon as they are thawed,
		// before they run another instruction of their own.
		for _, dir := range cgroupTree(sb.ID, sb.Cgroup, sb.Dir) {
			_, _ = killCgroupProcs(dir)
		}
		_ = signalProcess(sb.Pid, sb.PidStart, unix.SIGKILL)
		if err := f.set(ctx, false); err != nil {
			return err
		}
	}
	return killSandbox(ctx, sb, sb.Cgroup)
}

// recoverSnapshot finishes or forgets the snapshot sb's record names as
// pending (see TakeSnapshot): when its layer is in place, the rename was
// made, and sb gets its fresh upper directory (with the old one's mode
// and, as root, owner: the mode of / in the sandbox) and is recorded on
// the snapshot; otherwise its upper directory was never moved, and the
// record forgets the snapshot (prune removes its directory). The caller
// holds sb's lock.
func (m *Manager) recoverSnapshot(ctx context.Context, sb *Sandbox) error {
	sid := sb.PendingSnapshot
	if sid == "" {
		return nil
	}
	layer := m.paths.snapshotLayer(sid)
	st, err := os.Lstat(layer)
	switch {
	case err == nil && st.IsDir():
		// The overlay volumes' uppers follow the root filesystem's
		// (renamed after it: before it, a kill would leave them in a
		// snapshot that is forgotten).
		if err := m.snapshotVolumes(ctx, sb, sid); err != nil {
			return err
		}
		if err := freshUpper(filepath.Join(m.paths.upperRoot(sb.ID), "upper"), st); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		// The work directory may hold what the old overlay left.
		_ = userns.RemoveAs(ctx, m.opts.Init, sb.IDMap, filepath.Join(m.paths.upperRoot(sb.ID), "work", "work"))
		sb.Snapshot = sid
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("snapshot: %w", err)
	}
	sb.PendingSnapshot = ""
	if err := writeState(sb.Dir, sb); err != nil {
		return err
	}
	return m.saveRecord(sb)
}

// snapshotVolumes renames each overlay volume's upper directory of sb into
// snapshot sid's layers (those not renamed yet) and gives the volume a
// fresh upper with the layer's mode (and owner, as root). The caller holds
// sb's lock; sb is stopped (its root filesystem's upper was renamed).
func (m *Manager) snapshotVolumes(ctx context.Context, sb *Sandbox, sid string) error {
	s, err := m.readSnapshot(sid)
	if err != nil {
		return err
	}
	for _, v := range s.Volumes {
		upper, work, _ := m.volumeDirs(sb.ID, v.Index)
		layer := m.paths.snapshotVolumeLayer(sid, v.Index)
		if _, err := os.Lstat(layer); errors.Is(err, os.ErrNotExist) {
			if err := unix.Renameat2(unix.AT_FDCWD, upper, unix.AT_FDCWD, layer, unix.RENAME_NOREPLACE); err != nil {
				return fmt.Errorf("snapshot %s: move the upper directory of its volume %s into the snapshot: %w", sb.ShortID(), v.Target, err)
			}
			trace.Mark("bothy", "snapshot: volume renamed")
		} else if err != nil {
			return fmt.Errorf("snapshot %s: volume %s: %w", sb.ShortID(), v.Target, err)
		}
		st, err := os.Lstat(layer)
		if err != nil || !st.IsDir() {
			return fmt.Errorf("snapshot %s: volume %s: its layer is not a directory", sb.ShortID(), v.Target)
		}
		if err := freshUpper(upper, st); err != nil {
			return fmt.Errorf("snapshot %s: volume %s: %w", sb.ShortID(), v.Target, err)
		}
		_ = userns.RemoveAs(ctx, m.opts.Init, sb.IDMap, filepath.Join(work, "work"))
		// The record's stack, until a start plans it again (diff of
		// a sandbox left stopped).
		if v.Index < len(sb.Mounts) && sb.Mounts[v.Index].Target == v.Target && !slices.Contains(sb.Mounts[v.Index].Layers, layer) {
			sb.Mounts[v.Index].Layers = append([]string{layer}, sb.Mounts[v.Index].Layers...)
		}
	}
	return nil
}

// freshUpper makes upper, when it is not there, with the mode of st (the
// layer it replaces) and, as root, its owner.
func freshUpper(upper string, st os.FileInfo) error {
	if err := os.Mkdir(upper, 0o700); errors.Is(err, os.ErrExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("make a fresh upper directory: %w", err)
	}
	if err := os.Chmod(upper, st.Mode().Perm()|st.Mode()&(os.ModeSticky|os.ModeSetgid)); err != nil {
		return fmt.Errorf("make a fresh upper directory: %w", err)
	}
	if sys, ok := st.Sys().(*unix.Stat_t); ok && os.Geteuid() == 0 {
		_ = os.Lchown(upper, int(sys.Uid), int(sys.Gid))
	}
	return nil
}

// reserveSnapshotName links names/NAME to id, atomically.
func (m *Manager) reserveSnapshotName(name, id string) error {
	link := filepath.Join(m.paths.snapshotNames(), name)
	for range 3 {
		err := os.Symlink(id, link)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("reserve snapshot name %s: %w", name, err)
		}
		owner, rerr := os.Readlink(link)
		if rerr != nil {
			continue
		}
		if _, serr := os.Lstat(m.paths.snapshotDir(owner)); serr == nil {
			return fmt.Errorf("snapshot name %q is in use (snapshot %s); remove it or choose another name", name, owner[:min(12, len(owner))])
		}
		os.Remove(link) // stale: its snapshot is gone
	}
	return fmt.Errorf("snapshot name %q is in use", name)
}

// ListSnapshots returns every snapshot, with the sandboxes and snapshots
// on it, oldest first.
func (m *Manager) ListSnapshots(ctx context.Context) ([]*Snapshot, error) {
	ids, err := m.snapshotIDs()
	if err != nil {
		return nil, err
	}
	byID := map[string]*Snapshot{}
	var out []*Snapshot
	for _, id := range ids {
		s, err := m.readSnapshot(id)
		if err != nil {
			continue
		}
		byID[id] = s
		out = append(out, s)
	}
	get := func(id string) (*Snapshot, error) {
		if s := byID[id]; s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("%w: %s", ErrSnapshotNotFound, id)
	}
	for _, s := range out {
		if p := byID[s.Parent]; p != nil {
			p.Children = append(p.Children, s.ID)
		}
		s.Stack = m.stackDepth(s, get)
	}
	sbs, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, sb := range sbs {
		for _, sid := range []string{sb.Snapshot, sb.PendingSnapshot} {
			if s := byID[sid]; s != nil && !slices.Contains(s.Users, sb.ID) {
				s.Users = append(s.Users, sb.ID)
			}
		}
	}
	slices.SortFunc(out, func(a, b *Snapshot) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// RemoveSnapshot removes a named snapshot (by name or ID); refused with
// ErrSnapshotInUse while a sandbox or another snapshot is on it.
func (m *Manager) RemoveSnapshot(ctx context.Context, ref string) error {
	unlock, err := m.lockSnapshots(ctx, true)
	if err != nil {
		return err
	}
	defer unlock()
	id, err := m.resolveSnapshotRef(ref)
	if err != nil {
		return err
	}
	all, err := m.ListSnapshots(ctx)
	if err != nil {
		return err
	}
	for _, s := range all {
		if s.ID != id {
			continue
		}
		if len(s.Users) > 0 || len(s.Children) > 0 {
			var on []string
			for _, u := range s.Users {
				on = append(on, "sandbox "+u[:12])
			}
			for _, c := range s.Children {
				on = append(on, "snapshot "+c[:12])
			}
			return fmt.Errorf("%w: %s is used by %s; remove them first", ErrSnapshotInUse, ref, strings.Join(on, ", "))
		}
		return m.removeSnapshot(ctx, s)
	}
	return fmt.Errorf("%w: %s", ErrSnapshotNotFound, ref)
}

// removeSnapshot removes a snapshot's directory and name. Its layer's
// files are owned by ids of the sandbox's mapping: removed from inside a
// user namespace with that mapping. The caller holds the snapshots' lock
// exclusively.
func (m *Manager) removeSnapshot(ctx context.Context, s *Snapshot) error {
	if err := userns.RemoveAs(ctx, m.opts.Init, s.IDMap, s.Dir); err != nil {
		return fmt.Errorf("remove snapshot %s: %w", s.ID[:12], err)
	}
	if s.Name != "" {
		link := filepath.Join(m.paths.snapshotNames(), s.Name)
		if owner, err := os.Readlink(link); err == nil && owner == s.ID {
			os.Remove(link)
		}
	}
	return nil
}

// PruneSnapshots removes what no one needs: unnamed snapshots (forks')
// that no sandbox and no snapshot is on, incomplete snapshots (their
// snapshot cut short before the rename) that no sandbox names pending, and
// the temporary directories of compactions cut short (no compaction runs
// while the lock is held exclusively). It returns the IDs removed. Named
// snapshots stay until RemoveSnapshot.
func (m *Manager) PruneSnapshots(ctx context.Context) ([]string, error) {
	if _, err := os.Lstat(m.paths.snapshots()); errors.Is(err, os.ErrNotExist) {
		return nil, nil // none ever taken: nothing made for nothing
	}
	unlock, err := m.lockSnapshots(ctx, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.pruneSnapshotsLocked(ctx)
}

func (m *Manager) pruneSnapshotsLocked(ctx context.Context) ([]string, error) {
	var removed []string
	errs := []error{m.recoverPending(ctx)}
	for {
		all, err := m.ListSnapshots(ctx)
		if err != nil {
			return removed, err
		}
		n := len(removed)
		for _, s := range all {
			if len(s.Users) > 0 || len(s.Children) > 0 || (s.Name != "" && s.Complete) {
				continue
			}
			if err := m.removeSnapshot(ctx, s); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, s.ID)
		}
		if len(removed) == n {
			for _, s := range all {
				if !slices.Contains(removed, s.ID) {
					errs = append(errs, m.removeCompactTemps(ctx, s))
				}
			}
			return removed, errors.Join(errs...)
		}
	}
}

// recoverPending runs recoverSnapshot for every sandbox whose record names
// a pending snapshot and whose lock is free (its snapshot's maker was
// killed; a running sandbox whose snapshot was cut short before it was
// stopped is left running, and forgets the snapshot).
func (m *Manager) recoverPending(ctx context.Context) error {
	ids, err := m.paths.ids()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if sb, err := m.paths.readState(id); err != nil || sb.PendingSnapshot == "" {
			continue
		}
		unlock, err := m.paths.tryLock(id)
		if err != nil {
			continue // busy: its snapshot is being taken
		}
		if sb, err := m.paths.readStateLocked(id); err == nil {
			errs = append(errs, m.recoverSnapshot(ctx, sb))
		}
		unlock()
	}
	return errors.Join(errs...)
}

// recoverPendingOf runs recoverSnapshot for sandbox id under its lock, and
// returns its record as it is then.
func (m *Manager) recoverPendingOf(ctx context.Context, id string) (*Sandbox, error) {
	unlock, err := m.paths.lock(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sb, err := m.paths.readStateLocked(id)
	if err != nil {
		return nil, err
	}
	if err := m.recoverSnapshot(ctx, sb); err != nil {
		return nil, err
	}
	return m.paths.readStateLocked(id)
}

// gcSnapshots is PruneSnapshots when the lock is free at once (after rm),
// and nothing when it is not: the next prune does it.
func (m *Manager) gcSnapshots(ctx context.Context) {
	if _, err := os.Lstat(m.paths.snapshotNames()); err != nil {
		return
	}
	unlock, err := flockDir(ctx, m.paths.snapshots(), "", unix.LOCK_EX|unix.LOCK_NB)
	if err != nil {
		return
	}
	defer unlock()
	_, _ = m.pruneSnapshotsLocked(ctx)
}

// GetSnapshot finds a snapshot by name, ID or unique ID prefix.
func (m *Manager) GetSnapshot(ctx context.Context, ref string) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, err := m.resolveSnapshotRef(ref)
	if err != nil {
		return nil, err
	}
	s, err := m.readSnapshot(id)
	if err != nil {
		return nil, err
	}
	s.Stack = m.stackDepth(s, m.readSnapshot)
	return s, nil
}
