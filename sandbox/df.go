package sandbox

import (
	"context"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"

	"github.com/bothy-sandbox/bothy/rootfs"
)

// DiskUsageRow is one line of `bothy system df`, as podman's: how many
// there are, how many are in use, the bytes they take and the bytes that
// removing those not in use would free.
type DiskUsageRow struct {
	Type        string `json:"Type"` // Images, Containers, Local Volumes
	Total       int    `json:"Total"`
	Active      int    `json:"Active"`
	Size        int64  `json:"Size"`
	Reclaimable int64  `json:"Reclaimable"`
}

// DiskUsage is the caller's disk use, as `podman system df` shows it:
//   - Images: the store's images, active when a sandbox is on one; their
//     blobs (each once) and the extracted layers of the caller's layer
//     cache; reclaimable is what neither an active image nor a sandbox's
//     lowers use (what `rmi` of the inactive images and `image prune`
//     would free);
//   - Containers: the sandboxes, active when running; their upper
//     directories (what they wrote); reclaimable is the stopped ones'
//     (what `prune` would free);
//   - Local Volumes: the named volumes, active when a sandbox mounts one;
//     reclaimable is the unused ones'.
//
// Sizes are allocated blocks (rootfs.DiskUsage: nothing followed, what a
// subordinate user's directory holds counts as nothing when the caller
// cannot read it).
func (m *Manager) DiskUsage(ctx context.Context) ([]DiskUsageRow, error) {
	images, err := m.store.List(ctx)
	if err != nil {
		return nil, err
	}
	sbs, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	vols, err := m.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	onImage := map[string]bool{}
	usedLayer := map[digest.Digest]bool{}
	ctr := DiskUsageRow{Type: "Containers", Total: len(sbs)}
	for _, sb := range sbs {
		onImage[sb.ImageDigest] = true
		for _, d := range sb.Lowers {
			usedLayer[digest.Digest(d)] = true
		}
		for _, l := range sb.AddedLayers {
			usedLayer[digest.Digest(l.DiffID)] = true
		}
		size := rootfs.DiskUsage(m.paths.upperRoot(sb.ID))
		ctr.Size += size
		if sb.Status == StatusRunning || sb.Status == StatusCreating {
			ctr.Active++
		} else {
			ctr.Reclaimable += size
		}
	}

	img := DiskUsageRow{Type: "Images", Total: len(images)}
	blobSize := map[digest.Digest]int64{}
	usedBlob := map[digest.Digest]bool{}
	for _, im := range images {
		active := onImage[im.Digest.String()]
		if active {
			img.Active++
		}
		for _, l := range im.Layers {
			blobSize[l.Digest] = l.Size
			if active {
				usedBlob[l.Digest], usedLayer[l.DiffID] = true, true
			}
		}
	}
	for d, n := range blobSize {
		img.Size += n
		if !usedBlob[d] {
			img.Reclaimable += n
		}
	}
	if cache, err := os.Lstat(m.LayerDir()); err == nil && cache.IsDir() {
		c, err := rootfs.OpenCache(m.LayerDir(), rootfs.UnpackOptions{})
		if err != nil {
			return nil, err
		}
		layers, err := c.List()
		if err != nil {
			return nil, err
		}
		for _, d := range layers {
			n := rootfs.DiskUsage(filepath.Join(m.LayerDir(), d.Algorithm().String(), d.Encoded()))
			img.Size += n
			if !usedLayer[d] {
				img.Reclaimable += n
			}
		}
	}

	vol := DiskUsageRow{Type: "Local Volumes", Total: len(vols)}
	for _, v := range vols {
		n := rootfs.DiskUsage(v.Mountpoint)
		vol.Size += n
		if len(v.UsedBy) > 0 {
			vol.Active++
		} else {
			vol.Reclaimable += n
		}
	}
	return []DiskUsageRow{img, ctr, vol}, nil
}
