package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"

	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// A shared image store is a directory, typically on a network filesystem
// every node mounts, that ExportImage prepares and every user's sandboxes
// read in place:
//
//	DIR/images   an image store (oci.Store): blobs, refs.json
//	DIR/layers   the images' layers, extracted once, readable by all
//	             (rootfs.OpenSharedCache): <algorithm>/<encoded diff ID>
//	DIR/.absolute-symlink
//	             a symlink to symlinkProbeTarget: its file system keeps
//	             absolute symlinks, as the layers need (checkSymlinks)
//
// Readers open it read-only (OpenSharedStore) and create nothing in it.

// SharedStore is a shared image store opened for reading.
type SharedStore struct {
	root   string
	images *oci.Store
	layers string
}

// OpenSharedStore opens the shared image store at dir, read-only.
func OpenSharedStore(dir string) (*SharedStore, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open shared image store %s: %w", dir, err)
	}
	images, err := oci.OpenReadOnly(filepath.Join(abs, "images"))
	if err != nil {
		return nil, fmt.Errorf("open shared image store %s (prepare it with `bothy image export --store %s IMAGE`): %w", dir, dir, err)
	}
	return &SharedStore{root: abs, images: images, layers: filepath.Join(abs, "layers")}, nil
}

// Root is the store's directory.
func (s *SharedStore) Root() string { return s.root }

// Images is the store's image store (read-only).
func (s *SharedStore) Images() *oci.Store { return s.images }

// prepared reports whether every layer of img is extracted in the store.
// What it finds is only a directory name: the launcher opens it without
// following a symbolic link.
func (s *SharedStore) prepared(img *oci.Image) bool {
	for _, l := range img.Layers {
		dir, err := rootfs.LayerDir(s.layers, l.DiffID)
		if err != nil {
			return false
		}
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// symlinkProbe is a shared store's symlink whose target, an absolute path,
// must read back as written: layers hold absolute symlinks (the dynamic
// loader's), which resolve inside a sandbox's root, and a file system that
// refuses or rewrites them (sshfs) would start sandboxes in which no
// dynamically linked program runs, with nothing saying why.
const (
	symlinkProbe       = ".absolute-symlink"
	symlinkProbeTarget = "/bothy/store/absolute-symlink"
)

// checkSymlinks refuses a store whose file system does not keep absolute
// symlinks. A store exported before the probe existed is not checked.
func (s *SharedStore) checkSymlinks() error {
	target, err := os.Readlink(filepath.Join(s.root, symlinkProbe))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err == nil && target == symlinkProbeTarget:
		return nil
	case err == nil:
		err = fmt.Errorf("it reads back as %q, not %q", target, symlinkProbeTarget)
	}
	return fmt.Errorf("image store %s: its file system does not keep absolute symlinks, which images hold, so no program could start from it (%s: %w); NFS, Lustre, GPFS and CephFS keep them, sshfs does not (docs/slurm.md)", s.root, symlinkProbe, err)
}

// writeSymlinkProbe makes the store's symlinkProbe, unless it has one,
// by an atomic rename of a temporary named at random (nodes exporting at
// once may share a pid). Every name is resolved in the store's directory
// (os.Root), none through a symlink.
func writeSymlinkProbe(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if _, err := root.Lstat(symlinkProbe); err == nil {
		return nil
	}
	tmp := symlinkProbe + "." + rand.Text() + ".tmp"
	if err := root.Symlink(symlinkProbeTarget, tmp); err != nil {
		return err
	}
	if err := root.Rename(tmp, symlinkProbe); err != nil {
		_ = root.Remove(tmp)
		return err
	}
	return nil
}

// SharedStores are the manager's shared image stores, in search order.
func (m *Manager) SharedStores() []*SharedStore { return m.shared }

// ExportImage prepares image ref (of the caller's store; "" is the default
// image) in the shared image store at dir, creating it if needed: its
// manifest, config and layer blobs are copied (each verified against its
// digest as it is read and as it is written) and its layers extracted
// (each verified against its diff ID) into dir/layers, readable by every
// user, then the image is named there as in the caller's store. Every file
// and directory appears by an atomic rename of a complete, verified
// temporary: several nodes exporting the same image into one store at once
// each end with the same complete image, and a reader never sees a part.
// Layers are written as an unprivileged caller can (user.overlay.* xattrs,
// no devices); as root, with the image's owners, otherwise owned by the
// caller (docs/slurm.md says how either looks in a sandbox).
func (m *Manager) ExportImage(ctx context.Context, ref, dir string) (*oci.Image, error) {
	img, from, err := m.image(ctx, ref)
	if err != nil {
		return nil, err
	}
	src := m.store
	if from != nil {
		src = from.images
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("export to %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("export to %s: %w", dir, err)
	}
	if err := writeSymlinkProbe(abs); err != nil {
		return nil, fmt.Errorf("export to %s: %w", dir, err)
	}
	dst, err := oci.Open(filepath.Join(abs, "images"))
	if err != nil {
		return nil, fmt.Errorf("export to %s: %w", dir, err)
	}
	release, err := dst.Hold(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	blobs := []digest.Digest{img.Digest, img.ID}
	for _, l := range img.Layers {
		blobs = append(blobs, l.Digest)
	}
	for _, d := range blobs {
		if err := copyBlob(ctx, src, dst, d); err != nil {
			return nil, fmt.Errorf("export %s to %s: %w", img.Digest, dir, err)
		}
	}
	opts := rootfs.UnpackOptions{Rootless: true}
	if os.Geteuid() == 0 {
		opts.Chown = func(uid, gid int) (int, int, error) { return uid, gid, nil }
	}
	cache, err := rootfs.OpenSharedCache(filepath.Join(abs, "layers"), opts)
	if err != nil {
		return nil, err
	}
	for _, l := range img.Layers {
		d := l.Digest
		if _, err := cache.Get(ctx, l.DiffID, func() (io.ReadCloser, error) { return dst.OpenBlob(d) }); err != nil {
			return nil, fmt.Errorf("export %s to %s: %w", img.Digest, dir, err)
		}
	}
	names := img.Names
	if ref == "" && len(names) == 0 {
		names = []string{DefaultImage}
	}
	out, err := dst.CommitImage(ctx, img.Digest, names)
	if err != nil {
		return nil, fmt.Errorf("export %s to %s: %w", img.Digest, dir, err)
	}
	return out, nil
}

// copyBlob copies blob d from src to dst unless dst has it: verified as
// read (src) and as written (dst).
func copyBlob(ctx context.Context, src, dst *oci.Store, d digest.Digest) error {
	r, size, err := src.OpenBlobSize(d)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, ok := dst.HasBlob(d, size); ok {
		return nil
	}
	if _, _, _, err := dst.WriteBlob(ctx, r, d, size); err != nil {
		return err
	}
	if err := r.Close(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
