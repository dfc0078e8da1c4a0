package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// AddedLayer is a layer file stacked on a sandbox's image at run (bothy run
// --layer): the file as given (absolute) and the diff ID it had when
// checked, which the layer cache verifies again as it unpacks it.
type AddedLayer struct {
	File   string `json:"file"`
	DiffID string `json:"diff_id"`
}

// CheckLayerFile reads a layer file to its end (see rootfs.CheckLayer) and
// returns it with its diff ID. Only a regular file is read: a FIFO or
// device given by mistake is refused, not waited on.
func CheckLayerFile(file string) (AddedLayer, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return AddedLayer{}, fmt.Errorf("layer %s: %w", file, err)
	}
	f, err := os.OpenFile(abs, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return AddedLayer{}, fmt.Errorf("layer %s: %w", file, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return AddedLayer{}, fmt.Errorf("layer %s: %w", file, err)
	}
	if !st.Mode().IsRegular() {
		return AddedLayer{}, fmt.Errorf("layer %s: %w: not a regular file (%s)", file, rootfs.ErrMalformedLayer, st.Mode().Type())
	}
	d, err := rootfs.CheckLayer(f)
	if err != nil {
		return AddedLayer{}, fmt.Errorf("layer %s: %w", file, err)
	}
	return AddedLayer{File: abs, DiffID: d.String()}, nil
}

// checkAddedLayers checks the layer files of CreateOptions.AddLayers and
// stacks them on the image's layers: the launcher unpacks each into the
// layer cache, as an image layer, verifying its diff ID.
func (c *creation) checkAddedLayers(context.Context) error {
	for _, file := range c.opts.AddLayers {
		al, err := CheckLayerFile(file)
		if err != nil {
			return err
		}
		c.added = append(c.added, al)
		c.layers = append(c.layers, ipc.Layer{DiffID: al.DiffID, Blob: al.File})
	}
	// The same layer twice is one lower directory twice, which overlay
	// refuses (ELOOP): the top-most is kept, the lower copy adds nothing.
	// A snapshot's layer is a directory of its own, with no diff ID.
	c.layers = keepTopmost(c.layers, func(l ipc.Layer) string {
		if l.Snapshot != "" {
			return "snapshot\x00" + l.Snapshot
		}
		return l.Store + "\x00" + l.DiffID
	})
	return nil
}

// keepTopmost drops every item (bottom first) whose key comes again later.
func keepTopmost[T any](items []T, key func(T) string) []T {
	last := map[string]int{}
	for i, it := range items {
		last[key(it)] = i
	}
	out := items[:0:0]
	for i, it := range items {
		if last[key(it)] == i {
			out = append(out, it)
		}
	}
	return out
}

// addLayerFile stores an added layer's file in the image store for an image
// that Commit makes, refusing a file that changed since the sandbox was
// made from it.
func addLayerFile(ctx context.Context, comp *oci.Composer, al AddedLayer) (oci.Layer, error) {
	f, err := os.OpenFile(al.File, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return oci.Layer{}, fmt.Errorf("layer %s given at run: %w", al.File, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return oci.Layer{}, fmt.Errorf("layer %s given at run: no longer a regular file", al.File)
	}
	zr, err := rootfs.Decompress(f)
	if err != nil {
		return oci.Layer{}, fmt.Errorf("layer %s given at run: %w", al.File, err)
	}
	defer zr.Close()
	l, err := comp.AddLayer(ctx, zr)
	if err != nil {
		return oci.Layer{}, fmt.Errorf("layer %s given at run: %w", al.File, err)
	}
	if l.DiffID != digest.Digest(al.DiffID) {
		return oci.Layer{}, fmt.Errorf("layer %s given at run changed since (diff ID %s, was %s)", al.File, l.DiffID, al.DiffID)
	}
	return l, nil
}
