package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// CommitOptions say what Commit makes of a sandbox.
type CommitOptions struct {
	// Name is the new image's name (IMAGE[:TAG]); empty leaves it unnamed.
	Name string
	// Changes are Dockerfile instructions applied to the image's config
	// (see oci.ApplyChange).
	Changes []string
	// Message and Author go into the image's history entry (and Author
	// into the config's author).
	Message, Author string
	// NoPause reads the upper directory of a running sandbox without
	// freezing it (docker commit --pause=false): the layer may then hold
	// files half written.
	NoPause bool
}

// CommitResult is the image Commit made.
type CommitResult struct {
	Image *oci.Image
	// Layer is the new layer (the sandbox's changes).
	Layer oci.Layer
}

// Commit turns what the sandbox changed in its root filesystem into a new
// layer on top of its image (and of the snapshots it runs on, each made a
// layer, and of the layers given at run with --layer),
// with the image's config updated by opts.Changes and a history entry, and
// stores the image under opts.Name. A running sandbox is frozen (cgroup
// freezer) while its upper directory is read, unless opts.NoPause; the
// files bothy itself put there are left out (see ownPaths). The layer holds
// the ids the sandbox saw: under a subordinate-id mapping the directory is
// read from inside a namespace with the sandbox's mapping.
func (m *Manager) Commit(ctx context.Context, ref string, opts CommitOptions) (res *CommitResult, err error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	var names []string
	if opts.Name != "" {
		n, err := oci.NormalizeLocalName(opts.Name)
		if err != nil {
			return nil, fmt.Errorf("commit sandbox %s: %w", sb.ShortID(), err)
		}
		names = []string{n}
	}
	if sb.ImageStore != "" {
		return nil, fmt.Errorf("commit sandbox %s: its image is in the shared store %s: pull or load %s into your own store first", sb.ShortID(), sb.ImageStore, sb.Image)
	}
	base, err := m.store.Resolve(ctx, sb.ImageDigest)
	if err != nil {
		return nil, fmt.Errorf("commit sandbox %s: its image %s (%s): %w", sb.ShortID(), sb.Image, sb.ImageDigest, err)
	}
	cfg, err := cloneImageConfig(base.Config)
	if err != nil {
		return nil, fmt.Errorf("commit sandbox %s: %w", sb.ShortID(), err)
	}
	for _, c := range opts.Changes {
		if err := oci.ApplyChange(&cfg.Config, c); err != nil {
			return nil, fmt.Errorf("commit sandbox %s: %w", sb.ShortID(), err)
		}
	}
	comp, err := m.store.NewComposer(ctx)
	if err != nil {
		return nil, err
	}
	defer comp.Close()
	layers := slices.Clone(base.Layers)
	now := time.Now().UTC().Truncate(time.Second)
	snapLayers, snapHistory, err := m.snapshotImageLayers(ctx, comp, sb, now)
	if err != nil {
		return nil, fmt.Errorf("commit sandbox %s: %w", sb.ShortID(), err)
	}
	layers = append(layers, snapLayers...)
	cfg.History = append(cfg.History, snapHistory...)
	for _, al := range sb.AddedLayers {
		l, err := addLayerFile(ctx, comp, al)
		if err != nil {
			return nil, fmt.Errorf("commit sandbox %s: %w", sb.ShortID(), err)
		}
		layers = append(layers, l)
		cfg.History = append(cfg.History, v1.History{Created: &now, CreatedBy: "bothy run --layer " + filepath.Base(al.File)})
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(m.writeLayer(ctx, sb, pw, now, opts.NoPause)) }()
	layer, err := comp.AddLayer(ctx, pr)
	pr.CloseWithError(errors.New("layer reader gone"))
	if err != nil {
		return nil, fmt.Errorf("commit sandbox %s: %w", sb.ShortID(), err)
	}
	layers = keepTopmost(append(layers, layer), func(l oci.Layer) string { return l.DiffID.String() })
	createdBy := "bothy commit " + sb.Name
	if sb.Name == "" {
		createdBy = "bothy commit " + sb.ShortID()
	}
	if len(opts.Changes) > 0 {
		createdBy += " --change " + strings.Join(opts.Changes, " --change ")
	}
	cfg.History = append(cfg.History, v1.History{Created: &now, CreatedBy: createdBy, Author: opts.Author, Comment: opts.Message})
	cfg.Created = &now
	if opts.Author != "" {
		cfg.Author = opts.Author
	}
	img, err := comp.Commit(ctx, cfg, layers, names)
	if err != nil {
		return nil, fmt.Errorf("commit sandbox %s: %w", sb.ShortID(), err)
	}
	return &CommitResult{Image: img, Layer: layer}, nil
}

// snapshotImageLayers turns the layers of the snapshots sb runs on (its
// lower stack above the image's, bottom first) into image layers, as its
// upper directory is turned (their whiteouts and ownership likewise, the
// same files of bothy's own left out), with a history entry each. The
// snapshots' lock is held shared meanwhile: none is removed while read.
func (m *Manager) snapshotImageLayers(ctx context.Context, comp *oci.Composer, sb *Sandbox, epoch time.Time) ([]oci.Layer, []v1.History, error) {
	if sb.Snapshot == "" {
		return nil, nil, nil
	}
	unlock, err := m.lockSnapshots(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	chain, err := m.snapshotChain(sb.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	var layers []oci.Layer
	var history []v1.History
	for _, s := range chain {
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(userns.DiffAs(ctx, m.opts.Init, s.IDMap, m.paths.snapshotLayer(s.ID), pw, rootfs.DiffOptions{Epoch: epoch, Exclude: m.ownPaths(sb)}))
		}()
		l, err := comp.AddLayer(ctx, pr)
		pr.CloseWithError(errors.New("layer reader gone"))
		if err != nil {
			return nil, nil, fmt.Errorf("snapshot %s: %w", s.ID[:12], err)
		}
		layers = append(layers, l)
		created := s.Created.UTC().Truncate(time.Second)
		history = append(history, v1.History{Created: &created, CreatedBy: "bothy snapshot " + cmp.Or(s.Name, s.ID[:12])})
	}
	return layers, history, nil
}

// ExportLayer writes what the sandbox changed in its root filesystem to w
// as an uncompressed layer tar, the layer Commit would add (bothy's own
// files left out), frozen while read as Commit does unless noPause.
func (m *Manager) ExportLayer(ctx context.Context, ref string, w io.Writer, noPause bool) error {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return err
	}
	return m.writeLayer(ctx, sb, w, time.Now().UTC().Truncate(time.Second), noPause)
}

// writeLayer writes sb's upper directory as a layer tar to w, modification
// times clamped to epoch, with the sandbox frozen meanwhile when it runs.
func (m *Manager) writeLayer(ctx context.Context, sb *Sandbox, w io.Writer, epoch time.Time, noPause bool) (err error) {
	if sb.Status == StatusRunning && !noPause {
		f, err := freezerOf(sb)
		if err != nil {
			return fmt.Errorf("sandbox %s: %w (--pause=false reads it running)", sb.ShortID(), err)
		}
		already, err := f.frozen()
		if err != nil {
			return err
		}
		if !already {
			if err := f.set(ctx, true); err != nil {
				return err
			}
			defer func() {
				if terr := f.set(context.WithoutCancel(ctx), false); terr != nil && err == nil {
					err = terr
				}
			}()
		}
	}
	if err := userns.DiffAs(ctx, m.opts.Init, sb.IDMap, sb.UpperDir, w, rootfs.DiffOptions{Epoch: epoch, Exclude: m.ownPaths(sb), Live: sb.Status == StatusRunning && noPause}); err != nil {
		return fmt.Errorf("sandbox %s: %w", sb.ShortID(), err)
	}
	return nil
}

// ownPaths are the paths of sb's upper directory (relative, slash-separated)
// that bothy put there, not the sandbox: every mount point of its runtime
// spec (the /proc, /dev and /sys mounts, /etc/hosts, /etc/hostname,
// /etc/resolv.conf, the executor under /.bothy, volumes, tmpfs mounts, the
// main process's directory), whose upper-directory entries are only the
// mount points the runtime made, and /.bothy. A mount hides what is below
// it in the upper directory, so nothing the sandbox wrote is there.
func (m *Manager) ownPaths(sb *Sandbox) []string {
	own := []string{".bothy", "proc", "sys", "dev"}
	for _, f := range ownFiles {
		own = append(own, strings.TrimPrefix(f, "/"))
	}
	for _, mnt := range sb.Mounts {
		own = append(own, strings.TrimPrefix(path.Clean(mnt.Target), "/"))
	}
	// The spec bothy wrote (in the state directory, which the sandbox
	// cannot write).
	if f, err := os.Open(filepath.Join(sb.Dir, "config.json")); err == nil {
		var spec specs.Spec
		if json.NewDecoder(io.LimitReader(f, 16<<20)).Decode(&spec) == nil {
			for _, mnt := range spec.Mounts {
				if p := strings.TrimPrefix(path.Clean("/"+mnt.Destination), "/"); p != "" {
					own = append(own, p)
				}
			}
		}
		f.Close()
	}
	slices.Sort(own)
	return slices.Compact(own)
}

// cloneImageConfig is a deep copy of c.
func cloneImageConfig(c v1.Image) (v1.Image, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return v1.Image{}, err
	}
	var out v1.Image
	return out, json.Unmarshal(b, &out)
}
