package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/bothy-sandbox/bothy/network"
)

// Volume policies of a fork (ForkOptions.Volumes).
const (
	// ForkVolumesRefuse: a sandbox with a bind mount or named volume is
	// not forked (its children would share the parent's writable host
	// directories).
	ForkVolumesRefuse = "refuse"
	// ForkVolumesShare: the children mount the parent's bind mounts and
	// named volumes, shared.
	ForkVolumesShare = "share"
)

// ErrForkVolumes: a fork refused because its children would share the
// parent's bind mounts or named volumes (ForkVolumesShare allows it).
var ErrForkVolumes = errors.New("fork would share writable volumes")

// ForkOptions are a fork's.
type ForkOptions struct {
	// N is how many children (default 1).
	N int
	// NamePrefix names the children PREFIX-1 … PREFIX-N ("": unnamed).
	NamePrefix string
	// Volumes is ForkVolumesRefuse (the default) or ForkVolumesShare.
	Volumes string
	// Grace is the parent's processes' grace before SIGKILL (see
	// SnapshotOptions).
	Grace time.Duration
	// Each, when set, adjusts child i's options (from 0) before it is
	// created, after the name and key are set: bothy serve gives each
	// child its own session.
	Each func(i int, opts *CreateOptions)
}

// Fork takes an unnamed snapshot of sandbox ref (TakeSnapshot: the parent
// is stopped, its upper directory becomes the snapshot's layer, and it is
// started again on it if it was running) and starts N children on that
// snapshot, in parallel, each with its own upper directory, API key and
// sessions, and the parent's configuration: image, limits, network mode
// and egress policy (published ports get fresh host ports), environment,
// working directory, user, main command, labels, security. Processes are
// not copied: the children's start afresh. Overlay volumes fork as the root
// filesystem does: their upper directories become layers of the snapshot,
// below a fresh upper in the parent and in each child
// (snapshotVolumeLayers); tmpfs mounts start empty; bind mounts and named
// volumes are refused, or shared with ForkVolumesShare.
//
// It returns the children it started; an error says which failed. The
// snapshot stays while any sandbox is on it (prune and rm remove it after).
func (m *Manager) Fork(ctx context.Context, ref string, o ForkOptions) (*Snapshot, []*Sandbox, error) {
	if o.N <= 0 {
		o.N = 1
	}
	switch o.Volumes {
	case "":
		o.Volumes = ForkVolumesRefuse
	case ForkVolumesRefuse, ForkVolumesShare:
	default:
		return nil, nil, fmt.Errorf("invalid --volumes %q: share or refuse", o.Volumes)
	}
	parent, err := m.Get(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	opts, err := m.startOptions(parent)
	if err != nil {
		return nil, nil, err
	}
	if o.Volumes == ForkVolumesRefuse {
		var shared []string
		for _, mnt := range parent.Mounts {
			if mnt.Kind == MountBind || mnt.Kind == MountVolume {
				shared = append(shared, mnt.Spec)
			}
		}
		if len(shared) > 0 {
			return nil, nil, fmt.Errorf("fork %s: %w: its volumes %s would be shared by its children: --volumes share to share them", parent.ShortID(), ErrForkVolumes, strings.Join(shared, ", "))
		}
	}
	for i := range opts.Network.Publish {
		p, err := network.ParsePublish(opts.Network.Publish[i])
		if err != nil {
			return nil, nil, err
		}
		p.HostPort = 0
		opts.Network.Publish[i] = p.String()
	}
	snap, err := m.TakeSnapshot(ctx, parent.ID, SnapshotOptions{Grace: o.Grace})
	if err != nil {
		return snap, nil, err
	}
	opts.FromSnapshot, opts.Image, opts.APIKey, opts.AutoRemove = snap.ID, "", "", false
	children := make([]*Sandbox, o.N)
	errs := make([]error, o.N)
	var wg sync.WaitGroup
	for i := range o.N {
		child := opts
		child.Name = ""
		if o.NamePrefix != "" {
			child.Name = fmt.Sprintf("%s-%d", o.NamePrefix, i+1)
		}
		child.Env = append([]string(nil), opts.Env...)
		if o.Each != nil {
			child.Labels = maps.Clone(opts.Labels)
			o.Each(i, &child)
		}
		wg.Go(func() {
			children[i], errs[i] = m.Create(ctx, child)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("fork child %d: %w", i+1, errs[i])
			}
		})
	}
	wg.Wait()
	var started []*Sandbox
	for _, c := range children {
		if c != nil {
			started = append(started, c)
		}
	}
	return snap, started, errors.Join(errs...)
}
