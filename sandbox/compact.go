package sandbox

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// Compaction. Every snapshot adds a lower directory to the stacks of the
// sandboxes on it; a compacted snapshot has its whole chain's layers merged
// into one directory, snapshots/ID/compact, which those sandboxes (and
// those on snapshots above it) mount instead of it and everything below it.
// The layers stay: other snapshots of the chain still use them, and the
// compacted layer shares their files (hard links, rootfs.MergeLayers).
//
// A compaction builds into snapshots/ID/compact.tmp-*, then renames it to
// compact: the commit point. It holds the snapshots' lock shared throughout
// (RemoveSnapshot and PruneSnapshots, exclusive, wait for it) and the
// snapshot directory's own lock exclusively (one compaction of a snapshot
// at a time); its merge helper (rootless) inherits both, so that a helper
// whose caller was killed still holds them until it ends. So a temporary
// directory that PruneSnapshots finds, holding the lock exclusively, is a
// compaction's that was cut short: it removes it.

// CompactThreshold is the stack (Snapshot.Stack) at which the CLI compacts
// a snapshot it just made, in a detached process (bothy snapshot compact),
// so that the sandboxes started on it later mount one layer for the chain.
// See docs/snapshots.md for why 32: it keeps every stack's mount options in
// the page mount(2) reads for images of up to about 40 layers, and a
// lookup's cost (a missing name is looked up in every layer) bounded, for
// a compaction that costs a walk of the chain's files.
const CompactThreshold = 32

const compactTempPrefix = "compact.tmp-"

func (p Paths) snapshotCompact(id string) string {
	return filepath.Join(p.snapshots(), id, "compact")
}

// CompactResult says what CompactSnapshot did.
type CompactResult struct {
	// Snapshot is the snapshot, as it is after.
	Snapshot *Snapshot
	// Already: it was compacted before; nothing was done.
	Already bool
	// StackBefore is how many snapshot layers a sandbox on it mounted
	// before (1 after; 1 before as well for a snapshot with no parent,
	// which has nothing to compact).
	StackBefore int
	// Merged counts what the merge made: Merged.Layers is StackBefore
	// when a merge was made, 0 otherwise.
	Merged rootfs.MergeStats
}

// CompactSnapshot merges the layers of snapshot ref's chain (its own and
// its parents', down to the first compacted one, whose compacted layer
// stands for the rest) into one, which the sandboxes started on it from
// then on mount instead (see the package comment above). Those running on
// it are not changed. It waits for another compaction of the same snapshot
// and then does nothing; a snapshot with no parent has nothing to merge.
// Rootless, the merge runs in a user namespace with the snapshot's id
// mapping (userns.MergeAs); it is killed when ctx is done, and what it
// left is removed (or by PruneSnapshots, when this process is killed).
func (m *Manager) CompactSnapshot(ctx context.Context, ref string) (*CompactResult, error) {
	snaps, err := m.lockSnapshotsFile(ctx, false)
	if err != nil {
		return nil, err
	}
	defer snaps.Close()
	s, err := m.GetSnapshot(ctx, ref)
	if err != nil {
		return nil, err
	}
	id := s.ID
	if !s.Complete {
		return nil, fmt.Errorf("compact snapshot %s: %w: it is incomplete (its snapshot was cut short); bothy prune removes it", id[:12], ErrSnapshotNotFound)
	}
	own, err := flockDirFile(ctx, s.Dir, id[:12], unix.LOCK_EX)
	if err != nil {
		return nil, fmt.Errorf("compact snapshot %s: %w", id[:12], err)
	}
	defer own.Close()
	chain, err := m.snapshotChain(id)
	if err != nil {
		return nil, err
	}
	s = chain[len(chain)-1]
	layers := m.snapshotStack(chain)
	res := &CompactResult{Snapshot: s, Already: s.Compacted, StackBefore: len(layers)}
	if s.Compacted || len(layers) == 1 {
		s.Stack = 1
		return res, nil
	}
	tmp, err := os.MkdirTemp(s.Dir, compactTempPrefix)
	if err != nil {
		return nil, fmt.Errorf("compact snapshot %s: %w", id[:12], err)
	}
	trace.Mark("bothy", "compact: merging")
	res.Merged, err = userns.MergeAs(ctx, m.opts.Init, s.IDMap, tmp, layers, rootfs.MergeOptions{UserXattr: s.userXattr()}, snaps, own)
	if err == nil {
		trace.Mark("bothy", "compact: merged")
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, m.paths.snapshotCompact(id), unix.RENAME_NOREPLACE)
	}
	if err != nil {
		_ = userns.RemoveAs(context.WithoutCancel(ctx), m.opts.Init, s.IDMap, tmp)
		return nil, fmt.Errorf("compact snapshot %s: %w", cmp.Or(s.Name, id[:12]), err)
	}
	trace.Mark("bothy", "compact: done")
	s.Compacted, s.Stack = true, 1
	return res, nil
}

// WantsCompaction reports whether the snapshot is CompactThreshold snapshot
// layers deep or more and not compacted: the CLI then compacts it in the
// background.
func (s *Snapshot) WantsCompaction() bool {
	return s.Complete && !s.Compacted && s.Stack >= CompactThreshold
}

// userXattr reports whether the snapshot's layers carry overlay's marks in
// the user. namespace: those of a sandbox mounted with userxattr, as the
// launcher mounts a rootless one, or one on a shared image store.
func (s *Snapshot) userXattr() bool {
	return s.IDMap.Mode != userns.MapHost || s.ImageStore != ""
}

// snapshotStack is what a sandbox on the snapshot at the top of chain
// (bottom first) mounts above the image's layers, bottom first: walking
// down from the top, the first compacted snapshot's compacted layer stands
// for itself and everything below it.
func (m *Manager) snapshotStack(chain []*Snapshot) []string {
	var out []string
	for _, s := range slices.Backward(chain) {
		if s.Compacted {
			out = append(out, m.paths.snapshotCompact(s.ID))
			break
		}
		out = append(out, m.paths.snapshotLayer(s.ID))
	}
	slices.Reverse(out)
	return out
}

// stackDepth is len(snapshotStack) for snapshot s, reading its parents
// with get until the first compacted one. A parent that cannot be read
// ends the count (a start on s says why).
func (m *Manager) stackDepth(s *Snapshot, get func(id string) (*Snapshot, error)) int {
	n := 1
	for ; !s.Compacted && s.Parent != "" && n < maxChain; n++ {
		p, err := get(s.Parent)
		if err != nil {
			break
		}
		s = p
	}
	return n
}

// removeCompactTemps removes what compactions of s that were cut short
// left. The caller holds the snapshots' lock exclusively: no compaction
// runs.
func (m *Manager) removeCompactTemps(ctx context.Context, s *Snapshot) error {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil // removed meanwhile, or never made: nothing left
	}
	var dirs []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), compactTempPrefix) {
			dirs = append(dirs, filepath.Join(s.Dir, e.Name()))
		}
	}
	if len(dirs) == 0 {
		return nil
	}
	if err := userns.RemoveAs(ctx, m.opts.Init, s.IDMap, dirs...); err != nil {
		return fmt.Errorf("remove what a compaction of snapshot %s left: %w", s.ID[:12], err)
	}
	return nil
}
