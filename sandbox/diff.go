package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// ErrNoOverlay: diff of a container path that is not an overlay volume.
var ErrNoOverlay = errors.New("not an overlay volume")

// DiffResult is what a sandbox changed under one overlay: an overlay
// volume's target, or the root filesystem ("/").
type DiffResult struct {
	// Target is the container path the paths are below.
	Target string `json:"target"`
	// Upper is the host directory holding the changes.
	Upper string `json:"upper"`
	// Changes, with absolute container paths.
	Changes []rootfs.Change `json:"changes"`
}

// DiffOptions choose what Diff reads and whether it keeps a copy.
type DiffOptions struct {
	// Target is the container path of an overlay volume; empty or "/" for
	// the root filesystem.
	Target string
	// Export, when set, is a new or empty host directory that receives a
	// copy of every added and changed file (see rootfs.Export), with paths
	// relative to Target.
	Export string
}

// Diff lists what the sandbox changed in the overlay volume mounted at
// opts.Target, or in its root filesystem (bothy's own mount points left
// out). The sandbox may be running or stopped. Under a subordinate-id
// mapping the upper directory is read from inside a namespace with the
// sandbox's mapping, where every file the sandbox wrote is readable.
func (m *Manager) Diff(ctx context.Context, ref string, opts DiffOptions) (*DiffResult, error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if opts.Export != "" {
		if opts.Export, err = filepath.Abs(opts.Export); err != nil {
			return nil, err
		}
	}
	if opts.Target == "" || path.Clean(opts.Target) == "/" {
		lowers, err := m.rootfsLowers(sb)
		if err != nil {
			return nil, err
		}
		changes, err := userns.ChangesAs(ctx, m.opts.Init, sb.IDMap, userns.ChangesRequest{Upper: sb.UpperDir, Lowers: lowers})
		if err != nil {
			return nil, err
		}
		// Mount points bothy and libcontainer created are not the
		// sandbox's changes.
		own := map[string]bool{"/proc": true, "/sys": true, "/dev": true}
		for _, f := range ownFiles {
			own[f] = true
		}
		for _, mnt := range sb.Mounts {
			own[mnt.Target] = true
		}
		kept := changes[:0]
		for _, c := range changes {
			if c.Path == "/.bothy" || strings.HasPrefix(c.Path, "/.bothy/") || (c.Kind == rootfs.Added && own[c.Path]) {
				continue
			}
			kept = append(kept, c)
		}
		if opts.Export != "" {
			// The export is made from the kept changes only, by the
			// same rights.
			if _, err := userns.ChangesAs(ctx, m.opts.Init, sb.IDMap, userns.ChangesRequest{Upper: sb.UpperDir, Export: opts.Export, Only: kept}); err != nil {
				return nil, err
			}
		}
		return &DiffResult{Target: "/", Upper: sb.UpperDir, Changes: kept}, nil
	}
	clean := path.Clean(opts.Target)
	for _, mnt := range sb.Mounts {
		if mnt.Target != clean {
			continue
		}
		if mnt.Kind != MountOverlay {
			return nil, fmt.Errorf("%w: %s in sandbox %s is a %s mount (%q)", ErrNoOverlay, clean, sb.ShortID(), mnt.Kind, mnt.Spec)
		}
		changes, err := userns.ChangesAs(ctx, m.opts.Init, sb.IDMap, userns.ChangesRequest{Upper: mnt.Upper, Lowers: append(slices.Clone(mnt.Layers), mnt.HostPath), Export: opts.Export})
		if err != nil {
			return nil, err
		}
		for i := range changes {
			changes[i].Path = path.Join(clean, changes[i].Path)
		}
		return &DiffResult{Target: clean, Upper: mnt.Upper, Changes: changes}, nil
	}
	var overlays []string
	for _, mnt := range sb.Mounts {
		if mnt.Kind == MountOverlay {
			overlays = append(overlays, mnt.Target)
		}
	}
	if len(overlays) == 0 {
		return nil, fmt.Errorf("%w: sandbox %s has no overlay volume at %s (it has none)", ErrNoOverlay, sb.ShortID(), clean)
	}
	return nil, fmt.Errorf("%w: sandbox %s has no overlay volume at %s (it has %s)", ErrNoOverlay, sb.ShortID(), clean, strings.Join(overlays, ", "))
}

// rootfsLowers are the sandbox's image layers in the layer cache, top-most
// first, as its launch request names them.
func (m *Manager) rootfsLowers(sb *Sandbox) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(sb.Dir, "launch.json"))
	if err != nil {
		return nil, fmt.Errorf("read sandbox %s launch request: %w", sb.ShortID(), err)
	}
	var req ipc.LaunchRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("read sandbox %s launch request: %w", sb.ShortID(), err)
	}
	lowers := make([]string, len(req.Layers))
	for i, l := range req.Layers {
		if l.Snapshot != "" {
			lowers[len(lowers)-1-i] = l.Snapshot
			continue
		}
		diffID, err := digest.Parse(l.DiffID)
		if err != nil {
			return nil, fmt.Errorf("sandbox %s layer %q: %w", sb.ShortID(), l.DiffID, err)
		}
		lowers[len(lowers)-1-i] = filepath.Join(req.LayerCache, diffID.Algorithm().String(), diffID.Encoded())
	}
	return rootfs.DedupLowers(lowers), nil
}
