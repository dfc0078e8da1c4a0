package main

import (
	"math/rand"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	ggcr "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// platformImage is a small OCI image whose config says os/arch.
func platformImage(t *testing.T, seed int64, os, arch string) ggcr.Image {
	t.Helper()
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	l, err := random.Layer(512, types.OCILayer, random.WithSource(rand.New(rand.NewSource(seed))))
	if err == nil {
		img, err = mutate.AppendLayers(img, l)
	}
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = os, arch
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestPullPlatform: pull picks from a multi-platform image the host's
// platform by default, and the one --platform, --arch or --os says; a
// platform the index lacks is an error, and a malformed one is refused.
func TestPullPlatform(t *testing.T) {
	c := newCLI(t)
	amd, arm := platformImage(t, 1, "linux", "amd64"), platformImage(t, 2, "linux", "arm64")
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: amd, Descriptor: ggcr.Descriptor{Platform: &ggcr.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: ggcr.Descriptor{Platform: &ggcr.Platform{OS: "linux", Architecture: "arm64"}}})
	// The layout's index names the multi-platform index "multi".
	dir := filepath.Join(t.TempDir(), "multi")
	p, err := layout.Write(dir, empty.Index)
	if err == nil {
		err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "multi"}))
	}
	if err != nil {
		t.Fatal(err)
	}
	ref := "oci:" + dir + ":multi"
	digest := func(img ggcr.Image) string {
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	host := map[string]string{"amd64": digest(amd), "arm64": digest(arm)}[runtime.GOARCH]
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--platform", "linux/arm64"}, digest(arm)},
		{[]string{"--arch", "arm64"}, digest(arm)},
		{[]string{"--platform", "linux/arm64", "--arch", "amd64"}, digest(amd)},
		{nil, host}, // the host's
	} {
		if tc.want == "" {
			continue // a host of neither architecture
		}
		out := c.ok(append(append([]string{"pull", "-q"}, tc.flags...), ref)...)
		if strings.TrimSpace(out) != tc.want {
			t.Errorf("pull %v: %q, want %s", tc.flags, out, tc.want)
		}
	}
	if _, errOut, code := c.run("", "pull", "-q", "--platform", "linux/s390x", ref); code == 0 || !strings.Contains(errOut, "s390x") {
		t.Errorf("pull --platform linux/s390x: exit %d %q", code, errOut)
	}
	if _, errOut, code := c.run("", "pull", "-q", "--platform", "arm64", ref); code == 0 || !strings.Contains(errOut, "os/arch") {
		t.Errorf("pull --platform arm64: exit %d %q", code, errOut)
	}
}
