package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// TestSystemDF: system df counts images, sandboxes and volumes, which are
// in use, their bytes and what removing the rest would free: a running
// sandbox's 1 MiB is in use, a stopped one's reclaimable (prune frees it),
// an unused volume's 1 MiB reclaimable; the table reads as podman's.
func TestSystemDF(t *testing.T) {
	c := newCLI(t)
	df := func() map[string]sandbox.DiskUsageRow {
		t.Helper()
		var rows []sandbox.DiskUsageRow
		if err := json.Unmarshal([]byte(c.ok("system", "df", "--format", "json")), &rows); err != nil || len(rows) != 3 {
			t.Fatalf("system df --format json: %v %v", rows, err)
		}
		out := map[string]sandbox.DiskUsageRow{}
		for _, r := range rows {
			out[r.Type] = r
		}
		return out
	}
	c.ok("run", "-d", "--name", "a")
	c.ok("exec", "a", "--", "sh", "-c", "head -c 1048576 /dev/urandom > /root/blob")
	c.ok("volume", "create", "v")
	c.ok("run", "--rm", "-v", "volume:v:/data", "--", "sh", "-c", "head -c 1048576 /dev/urandom > /data/x")

	rows := df()
	img, ctr, vol := rows["Images"], rows["Containers"], rows["Local Volumes"]
	if img.Total != 1 || img.Active != 1 || img.Size == 0 || img.Reclaimable != 0 {
		t.Errorf("images: %+v, want 1 in use, nothing reclaimable", img)
	}
	if ctr.Total != 1 || ctr.Active != 1 || ctr.Size < 1<<20 || ctr.Reclaimable != 0 {
		t.Errorf("containers: %+v, want 1 running with 1 MiB", ctr)
	}
	if vol.Total != 1 || vol.Active != 0 || vol.Size < 1<<20 || vol.Reclaimable != vol.Size {
		t.Errorf("volumes: %+v, want 1 unused with 1 MiB", vol)
	}

	c.ok("stop", "a")
	if ctr := df()["Containers"]; ctr.Active != 0 || ctr.Reclaimable < 1<<20 || ctr.Reclaimable != ctr.Size {
		t.Errorf("containers once stopped: %+v, want all reclaimable", ctr)
	}
	if img := df()["Images"]; img.Active != 1 || img.Reclaimable != 0 {
		t.Errorf("images under a stopped sandbox: %+v, want still in use", img)
	}
	c.ok("prune")
	if ctr := df()["Containers"]; ctr.Total != 0 || ctr.Size != 0 {
		t.Errorf("containers after prune: %+v", ctr)
	}
	if img := df()["Images"]; img.Active != 0 || img.Reclaimable != img.Size {
		t.Errorf("images with no sandbox: %+v, want all reclaimable", img)
	}
	table := c.ok("system", "df")
	for _, want := range []string{"TYPE", "RECLAIMABLE", "Images", "Containers", "Local Volumes", "(100%)"} {
		if !strings.Contains(table, want) {
			t.Errorf("system df table lacks %q:\n%s", want, table)
		}
	}
}
