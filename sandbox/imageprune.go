package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// ImagePruneReport is what PruneImages removed.
type ImagePruneReport struct {
	// BlobBytes: the image store's blobs no image reaches (oci.Store.Prune).
	BlobBytes int64 `json:"blob_bytes"`
	// Layers: the extracted layers no image, sandbox or snapshot uses.
	Layers     []rootfs.PrunedLayer `json:"layers,omitempty"`
	LayerBytes int64                `json:"layer_bytes"`
	// LayersKept says why the layer cache was left as it was ("": swept).
	LayersKept string `json:"layers_kept,omitempty"`
}

// PruneImages deletes dangling images and the blobs no image reaches
// (oci.Store.Prune), then the extracted layers of the caller's layer cache
// (for its id mapping) that nothing uses any more: no image of the store,
// no sandbox (running, stopped, or rebooted: its record's Lowers, its
// image's and added layers), no snapshot's image. The sweep holds the image
// store exclusively: no creation or start is then between resolving its
// image and recording its sandbox (they hold it shared until they return),
// so a layer a `bothy run` is about to use is one its image references, and
// a sandbox's lowers are in its record. A sandbox whose layers cannot be
// told (a record without Lowers whose image is gone) leaves the cache as
// it is, LayersKept saying so. A shared image store's layers are not the
// caller's and are never touched.
func (m *Manager) PruneImages(ctx context.Context) (*ImagePruneReport, error) {
	rep := &ImagePruneReport{}
	var err error
	if rep.BlobBytes, err = m.store.Prune(ctx); err != nil {
		return rep, err
	}
	cacheDir := m.LayerDir()
	if _, err := os.Lstat(cacheDir); err != nil {
		return rep, nil // nothing extracted yet
	}
	release, err := m.store.Exclusive(ctx)
	if err != nil {
		return rep, err
	}
	defer release()
	keep, why, err := m.usedLayers(ctx)
	if err != nil {
		return rep, fmt.Errorf("prune layers: %w", err)
	}
	if why != "" {
		rep.LayersKept = why
		return rep, nil
	}
	cache, err := rootfs.OpenCache(cacheDir, rootfs.UnpackOptions{})
	if err != nil {
		return rep, err
	}
	rep.Layers, err = cache.Prune(ctx, func(d digest.Digest) bool { return keep[d] }, func(ctx context.Context, dir string) error {
		return userns.RemoveAs(ctx, m.opts.Init, m.mapping, dir)
	})
	for _, l := range rep.Layers {
		rep.LayerBytes += l.Bytes
	}
	if err != nil {
		return rep, fmt.Errorf("prune layers: %w", err)
	}
	return rep, cache.Clean()
}

// usedLayers are the diff IDs of every layer an image of the store, a
// sandbox or a snapshot uses; why, when not "", is a sandbox whose layers
// cannot be told.
func (m *Manager) usedLayers(ctx context.Context) (used map[digest.Digest]bool, why string, err error) {
	used = map[digest.Digest]bool{}
	images, err := m.store.List(ctx)
	if err != nil {
		return nil, "", err
	}
	byDigest := map[string][]digest.Digest{}
	for _, img := range images {
		for _, l := range img.Layers {
			used[l.DiffID] = true
			byDigest[img.Digest.String()] = append(byDigest[img.Digest.String()], l.DiffID)
		}
	}
	sbs, err := m.List(ctx)
	if err != nil {
		return nil, "", err
	}
	for _, sb := range sbs {
		if sb.lost {
			continue // only its ID is known; removed by rm and prune
		}
		for _, l := range sb.AddedLayers {
			used[digest.Digest(l.DiffID)] = true
		}
		if len(sb.Lowers) > 0 {
			for _, d := range sb.Lowers {
				used[digest.Digest(d)] = true
			}
			continue
		}
		if ls, ok := launchedLayers(sb.Dir); ok {
			for _, d := range ls {
				used[d] = true
			}
			continue
		}
		if ds, ok := byDigest[sb.ImageDigest]; ok || sb.ImageStore != "" {
			for _, d := range ds {
				used[d] = true
			}
			continue
		}
		return nil, fmt.Sprintf("sandbox %s's layers are not recorded and its image %s is gone; remove it (rm) to free them", sb.ShortID(), sb.Image), nil
	}
	snaps, err := m.ListSnapshots(ctx)
	if err != nil {
		return nil, "", err
	}
	for _, s := range snaps {
		for _, d := range byDigest[s.ImageDigest] {
			used[d] = true
		}
	}
	return used, "", nil
}

// launchedLayers are the cache layers of the launch request in state
// directory dir, when there is one.
func launchedLayers(dir string) ([]digest.Digest, bool) {
	if dir == "" {
		return nil, false
	}
	data, err := readNoFollow(filepath.Join(dir, "launch.json"))
	if err != nil {
		return nil, false
	}
	var req ipc.LaunchRequest
	if json.Unmarshal(data, &req) != nil {
		return nil, false
	}
	var out []digest.Digest
	for _, l := range req.Layers {
		if l.Blob != "" {
			out = append(out, digest.Digest(l.DiffID))
		}
	}
	return out, true
}
