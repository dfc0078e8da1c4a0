package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/bothy-sandbox/bothy/internal/launch"
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

// Diff lists what the sandbox changed in the overlay volume mounted at target,
// or, with target empty or "/", in its root filesystem (bothy's own mount
// points under /.bothy left out). The sandbox may be running or stopped.
func (m *Manager) Diff(ctx context.Context, ref, target string) (*DiffResult, error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if target == "" || path.Clean(target) == "/" {
		lowers, err := m.rootfsLowers(sb)
		if err != nil {
			return nil, err
		}
		changes, err := rootfs.Diff(sb.UpperDir, lowers)
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
		return &DiffResult{Target: "/", Upper: sb.UpperDir, Changes: kept}, nil
	}
	clean := path.Clean(target)
	for _, mnt := range sb.Mounts {
		if mnt.Target != clean {
			continue
		}
		if mnt.Kind != MountOverlay {
			return nil, fmt.Errorf("%w: %s in sandbox %s is a %s mount (%q)", ErrNoOverlay, clean, sb.ShortID(), mnt.Kind, mnt.Spec)
		}
		changes, err := rootfs.Diff(mnt.Upper, []string{mnt.HostPath})
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
	var req launch.Request
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("read sandbox %s launch request: %w", sb.ShortID(), err)
	}
	lowers := make([]string, len(req.Layers))
	for i, l := range req.Layers {
		if err := l.DiffID.Validate(); err != nil {
			return nil, fmt.Errorf("sandbox %s layer %q: %w", sb.ShortID(), l.DiffID, err)
		}
		lowers[len(lowers)-1-i] = filepath.Join(req.LayerCache, l.DiffID.Algorithm().String(), l.DiffID.Encoded())
	}
	return lowers, nil
}

// Export copies what the diff added or changed from its upper directory into
// dst, a new or empty directory, as plain files the caller owns: directories,
// regular files (with their permission bits) and symlinks (as links, never
// followed). Deleted paths are not represented there; they are in the diff.
// Paths in dst are relative to the diff's target.
func (d *DiffResult) Export(dst string) error {
	if entries, err := os.ReadDir(dst); err == nil && len(entries) > 0 {
		return fmt.Errorf("export to %s: directory is not empty", dst)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("export to %s: %w", dst, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("export to %s: %w", dst, err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("export to %s: %w", dst, err)
	}
	defer root.Close()
	for _, c := range d.Changes {
		if c.Kind == rootfs.Deleted {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(c.Path, d.Target), "/")
		if rel == "" {
			continue
		}
		if err := exportOne(root, filepath.Join(d.Upper, filepath.FromSlash(rel)), rel); err != nil {
			return fmt.Errorf("export %s: %w", c.Path, err)
		}
	}
	return nil
}

func exportOne(root *os.Root, src, rel string) error {
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case st.IsDir():
		if err := root.MkdirAll(rel, 0o755); err != nil {
			return err
		}
		return root.Chmod(rel, st.Mode().Perm()|0o700)
	case st.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
			return err
		}
		return root.Symlink(target, rel)
	case st.Mode().IsRegular():
		if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
			return err
		}
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm()|0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	return nil // devices, fifos, sockets: not exported
}
