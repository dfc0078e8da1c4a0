package sandbox_test

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// layerFile writes a layer tar holding /NAME, size random bytes, and
// returns its path and diff ID.
func layerFile(t *testing.T, name string, size int) (string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(f, h))
	data := make([]byte, size)
	_, _ = rand.Read(data)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p, "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// TestPruneImageLayers: image prune removes the extracted layers nothing
// uses (a removed sandbox's added layer), says which and how many bytes
// it freed, and keeps those in use: the layers of a running sandbox,
// also once its image is removed, and of a stopped one; those go once the
// sandboxes do. Sandboxes created while prunes run in a loop, on a layer
// only they use, all start and read it.
func TestPruneImageLayers(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	l1, d1 := layerFile(t, "big1", 2<<20)
	l2, d2 := layerFile(t, "big2", 3<<20)
	cache := m.LayerDir()
	layerDir := func(d string) string { return filepath.Join(cache, "sha256", strings.TrimPrefix(d, "sha256:")) }
	cached := func(d string) bool { _, err := os.Lstat(layerDir(d)); return err == nil }
	pruned := func(rep *sandbox.ImagePruneReport) []string {
		var out []string
		for _, l := range rep.Layers {
			out = append(out, l.DiffID.String())
		}
		return out
	}

	a, err := m.Create(ctx, sandbox.CreateOptions{Name: "a", Image: "busybox", AddLayers: []string{l1}})
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := m.Create(ctx, sandbox.CreateOptions{Name: "stopped", Image: "busybox", AddLayers: []string{l1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx, "stopped", time.Second); err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", AddLayers: []string{l2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(ctx, b.ID, true); err != nil {
		t.Fatal(err)
	}
	busybox := a.Lowers[0]
	if !cached(d1) || !cached(d2) || !cached(busybox) {
		t.Fatalf("layers not extracted in %s", cache)
	}

	rep, err := m.PruneImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := pruned(rep); !slices.Equal(got, []string{d2}) || rep.LayerBytes < 3<<20 || rep.LayersKept != "" {
		t.Fatalf("prune removed %v (%d bytes, kept: %q), want only %s, at least 3 MiB", got, rep.LayerBytes, rep.LayersKept, d2)
	}
	if cached(d2) || !cached(d1) || !cached(busybox) {
		t.Fatalf("after prune: big2 %v, big1 %v, busybox %v", cached(d2), cached(d1), cached(busybox))
	}
	if out := run(t, a, "wc -c < /big1"); out != "2097152" {
		t.Fatalf("the running sandbox's layer: %q", out)
	}

	// The image removed: the running sandbox's lowers stay.
	if err := m.Store().Remove(ctx, "busybox"); err != nil {
		t.Fatal(err)
	}
	if rep, err = m.PruneImages(ctx); err != nil || len(rep.Layers) != 0 || rep.BlobBytes == 0 {
		t.Fatalf("prune after rmi: %+v %v", rep, err)
	}
	if !cached(busybox) || !cached(d1) {
		t.Fatal("a running sandbox's lowers removed")
	}
	if out := run(t, a, "ls /bin/sh && wc -c < /big1"); !strings.HasSuffix(out, "2097152") {
		t.Fatalf("the running sandbox after prune: %q", out)
	}

	// Both sandboxes gone: so are their layers.
	for _, sb := range []*sandbox.Sandbox{a, stopped} {
		if err := m.Remove(ctx, sb.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = m.PruneImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := pruned(rep); !slices.Contains(got, d1) || !slices.Contains(got, busybox) || cached(d1) || cached(busybox) {
		t.Fatalf("prune after rm removed %v", got)
	}
}

// TestPruneImageLayersRace: sandboxes created while image prunes run in a
// loop, on a layer nothing else uses (removed between them), all start and
// read it: a prune never removes a layer a creation is about to use.
func TestPruneImageLayersRace(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	l, _ := layerFile(t, "mine", 1<<20)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var prunes int
	var perr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := m.PruneImages(ctx); err != nil {
				perr = err
				return
			}
			prunes++
			time.Sleep(10 * time.Millisecond)
		}
	}()
	for i := range 4 {
		sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", AddLayers: []string{l}})
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		if out := run(t, sb, "wc -c < /mine"); out != "1048576" {
			t.Fatalf("sandbox %d reads %q", i, out)
		}
		if err := m.Remove(ctx, sb.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if perr != nil {
		t.Fatal(perr)
	}
	t.Logf("%d prunes ran meanwhile", prunes)
}
