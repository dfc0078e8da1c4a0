package transfer

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/oci/ocitest"
)

// storeWithImage is a store that already holds one image: a refused pull
// must leave it exactly as it is.
func storeWithImage(t *testing.T) *oci.Store {
	t.Helper()
	s := newStore(t)
	if _, err := s.Import(context.Background(), bytes.NewReader(ocitest.RootfsTar(t, 99)), "keep:1"); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkRefused checks that a failed pull named the lie, wraps ErrCorrupt
// and left the store as it was.
func checkRefused(t *testing.T, what string, s *oci.Store, before string, err error, lie ocitest.Lie) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	ocitest.CheckLie(t, what, err, lie)
	if err != nil && !errors.Is(err, oci.ErrCorrupt) {
		t.Errorf("%s: error does not wrap ErrCorrupt: %v", what, err)
	}
	if after := ocitest.Snapshot(t, s); after != before {
		t.Errorf("%s: the store changed:\n%s\n---\n%s", what, before, after)
	}
	list, lerr := s.List(context.Background())
	if lerr != nil || len(list) != 1 {
		t.Errorf("%s: list after the refusal: %d images, %v", what, len(list), lerr)
	}
}

// Every way an OCI layout can lie about its content is refused by every
// path that reads one: pull oci:, pull oci-archive:, load (ImportArchive)
// of the directory and of the archive.
func TestLayoutLiesRefused(t *testing.T) {
	ctx := context.Background()
	for _, tamper := range ocitest.Tampers() {
		t.Run(tamper.Name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "layout")
			writeLayout(t, dir, ociImage(t, 70, 2), "")
			lie := tamper.Apply(t, dir)
			archive := filepath.Join(t.TempDir(), "img.tar")
			ocitest.TarDir(t, dir, archive)
			for what, pull := range map[string]func(s *oci.Store) error{
				"pull oci:": func(s *oci.Store) error {
					_, err := Pull(ctx, s, "oci:"+dir, PullOptions{Name: "bad:1"})
					return err
				},
				"pull oci-archive:": func(s *oci.Store) error {
					_, err := Pull(ctx, s, "oci-archive:"+archive, PullOptions{Name: "bad:1"})
					return err
				},
				"load directory": func(s *oci.Store) error {
					_, err := ImportArchive(ctx, s, dir, "bad:1")
					return err
				},
				"load archive": func(s *oci.Store) error {
					_, err := ImportArchive(ctx, s, archive, "bad:1")
					return err
				},
			} {
				s := storeWithImage(t)
				before := ocitest.Snapshot(t, s)
				checkRefused(t, what, s, before, pull(s), lie)
			}
		})
	}
}

// A ref.name annotation that carries a digest must carry the image's.
func TestLayoutDigestNameMustMatch(t *testing.T) {
	ctx := context.Background()
	forged := digest.FromString("another image")
	dir := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, dir, ociImage(t, 71, 1), "example.com/x/y@"+forged.String())
	s := storeWithImage(t)
	before := ocitest.Snapshot(t, s)
	_, err := Pull(ctx, s, "oci:"+dir, PullOptions{})
	if !errors.Is(err, oci.ErrInvalidName) || !strings.Contains(err.Error(), forged.String()) {
		t.Errorf("pull with a forged digest name: %v", err)
	}
	if after := ocitest.Snapshot(t, s); after != before {
		t.Errorf("the store changed:\n%s\n---\n%s", before, after)
	}
}

// A docker archive's layers are named by the config's diff IDs: a layer file
// whose content has another digest is refused.
func TestDockerArchiveLiesRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tar")
	tag, _ := name.NewTag("example.com/d/img:1")
	src := dockerImage(t, 72, 1)
	if err := tarball.WriteToFile(good, tag, src); err != nil {
		t.Fatal(err)
	}
	cf, _ := src.ConfigFile()
	claimed := cf.RootFS.DiffIDs[0].String()
	other := ocitest.RootfsTar(t, 72)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(other)
	zw.Close()
	bad := ocitest.RewriteTar(t, good, func(name string, body []byte) []byte {
		if strings.HasSuffix(name, ".tar.gz") {
			return gz.Bytes()
		}
		return body
	})
	lie := ocitest.Lie{Want: []string{"layer", claimed, digest.FromBytes(other).String()}}
	for what, pull := range map[string]func(s *oci.Store) error{
		"pull docker-archive:": func(s *oci.Store) error {
			_, err := Pull(ctx, s, "docker-archive:"+bad, PullOptions{})
			return err
		},
		"load": func(s *oci.Store) error {
			_, err := ImportArchive(ctx, s, bad, "bad:1")
			return err
		},
	} {
		s := storeWithImage(t)
		before := ocitest.Snapshot(t, s)
		checkRefused(t, what, s, before, pull(s), lie)
	}
}

// serveManifest makes the registry answer requests for manifest ref of repo
// with body.
func serveManifest(reg *testRegistry, repo, ref string, body []byte, mediaType string) {
	next := reg.hook
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v2/"+repo+"/manifests/"+ref && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			w.Header().Set("Content-Type", mediaType)
			w.Header().Set("Docker-Content-Digest", ref) // a lying registry
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			if r.Method == http.MethodGet {
				w.Write(body)
			}
			return true
		}
		return next != nil && next(w, r)
	}
}

// serveBlob makes the registry answer requests for blob d with body.
func serveBlob(reg *testRegistry, d string, body []byte) {
	next := reg.hook
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/blobs/"+d) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Docker-Content-Digest", d)
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			if r.Method == http.MethodGet {
				w.Write(body)
			}
			return true
		}
		return next != nil && next(w, r)
	}
}

func rawManifest(t *testing.T, img ggcr.Image) []byte {
	t.Helper()
	b, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A registry that serves content other than what the descriptors name is
// refused: a manifest pulled by digest, an index's instance (digest or
// size), a config or a layer; nothing is recorded.
func TestRegistryLiesRefused(t *testing.T) {
	ctx := context.Background()
	type setup struct {
		ref string
		lie ocitest.Lie
	}
	const manifestType = v1.MediaTypeImageManifest
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, reg *testRegistry) setup
	}{
		{"manifest by digest", func(t *testing.T, reg *testRegistry) setup {
			img := ociImage(t, 80, 1)
			reg.push(t, "app:1", img)
			d := mustDigest(t, img.Digest)
			forged := append(rawManifest(t, img), '\n')
			serveManifest(reg, "app", d, forged, manifestType)
			return setup{"docker://" + reg.host + "/app@" + d, ocitest.Lie{Want: []string{manifestType, d, digest.FromBytes(forged).String()}}}
		}},
		{"index instance digest", func(t *testing.T, reg *testRegistry) setup {
			img := withPlatform(t, ociImage(t, 81, 1), "linux", "amd64")
			idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
				mutate.IndexAddendum{Add: img, Descriptor: ggcr.Descriptor{Platform: &ggcr.Platform{OS: "linux", Architecture: "amd64"}}})
			ref := reg.pushIndex(t, "multi:1", idx)
			d := mustDigest(t, img.Digest)
			forged := append(rawManifest(t, img), '\n')
			serveManifest(reg, "multi", d, forged, manifestType)
			return setup{ref, ocitest.Lie{Want: []string{manifestType, d, digest.FromBytes(forged).String()}}}
		}},
		{"index instance size", func(t *testing.T, reg *testRegistry) setup {
			img := withPlatform(t, ociImage(t, 82, 1), "linux", "amd64")
			idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
				mutate.IndexAddendum{Add: img, Descriptor: ggcr.Descriptor{Platform: &ggcr.Platform{OS: "linux", Architecture: "amd64"}}})
			reg.pushIndex(t, "multi:1", idx)
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			im = im.DeepCopy()
			im.Manifests[0].Size += 3
			b, _ := json.Marshal(im)
			serveManifest(reg, "multi", "1", b, v1.MediaTypeImageIndex)
			d := im.Manifests[0]
			return setup{"docker://" + reg.host + "/multi:1", ocitest.Lie{Want: []string{manifestType, d.Digest.String(), fmt.Sprintf("(%d bytes)", d.Size), fmt.Sprintf("(%d bytes)", d.Size-3)}}}
		}},
		{"index by digest", func(t *testing.T, reg *testRegistry) setup {
			img := withPlatform(t, ociImage(t, 83, 1), "linux", "amd64")
			idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
				mutate.IndexAddendum{Add: img, Descriptor: ggcr.Descriptor{Platform: &ggcr.Platform{OS: "linux", Architecture: "amd64"}}})
			reg.pushIndex(t, "multi:1", idx)
			d := mustDigest(t, idx.Digest)
			raw, _ := idx.RawManifest()
			forged := append(raw, '\n')
			serveManifest(reg, "multi", d, forged, v1.MediaTypeImageIndex)
			return setup{"docker://" + reg.host + "/multi@" + d, ocitest.Lie{Want: []string{v1.MediaTypeImageIndex, d, digest.FromBytes(forged).String()}}}
		}},
		{"config size", func(t *testing.T, reg *testRegistry) setup {
			img := ociImage(t, 84, 1)
			reg.push(t, "app:1", img)
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			m = m.DeepCopy()
			m.Config.Size += 7
			b, _ := json.Marshal(m)
			serveManifest(reg, "app", "1", b, manifestType)
			return setup{"docker://" + reg.host + "/app:1", ocitest.Lie{Want: []string{v1.MediaTypeImageConfig, m.Config.Digest.String(), fmt.Sprintf("(%d bytes)", m.Config.Size)}}}
		}},
		{"config content", func(t *testing.T, reg *testRegistry) setup {
			img := ociImage(t, 85, 1)
			ref := reg.push(t, "app:1", img)
			d := mustDigest(t, img.ConfigName)
			cb, _ := img.RawConfigFile()
			forged := bytes.Replace(cb, []byte(`"rootfs"`), []byte(`"rootfS"`), 1)
			serveBlob(reg, d, forged)
			return setup{ref, ocitest.Lie{Want: []string{v1.MediaTypeImageConfig, d, digest.FromBytes(forged).String()}}}
		}},
		{"layer content", func(t *testing.T, reg *testRegistry) setup {
			img := ociImage(t, 86, 2)
			ref := reg.push(t, "app:1", img)
			layers, _ := img.Layers()
			d := mustDigest(t, layers[1].Digest)
			rc, _ := layers[1].Compressed()
			b, _ := io.ReadAll(rc)
			forged := bytes.Clone(b)
			forged[len(forged)/2] ^= 0xff
			serveBlob(reg, d, forged)
			return setup{ref, ocitest.Lie{Want: []string{v1.MediaTypeImageLayerGzip, d, digest.FromBytes(forged).String()}}}
		}},
		{"layer size", func(t *testing.T, reg *testRegistry) setup {
			img := ociImage(t, 87, 1)
			reg.push(t, "app:1", img)
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			m = m.DeepCopy()
			m.Layers[0].Size -= 5
			b, _ := json.Marshal(m)
			serveManifest(reg, "app", "1", b, manifestType)
			return setup{"docker://" + reg.host + "/app:1", ocitest.Lie{Want: []string{v1.MediaTypeImageLayerGzip, m.Layers[0].Digest.String(), fmt.Sprintf("(%d bytes)", m.Layers[0].Size)}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := newRegistry(t)
			st := tc.setup(t, reg)
			s := storeWithImage(t)
			before := ocitest.Snapshot(t, s)
			_, err := Pull(ctx, s, st.ref, PullOptions{TLSVerify: noTLS(), Platform: "linux/amd64"})
			checkRefused(t, "pull "+st.ref, s, before, err, st.lie)
		})
	}
}

// Pulled by the digest of an index, the image is recorded under that name
// only because the index's bytes have that digest; the image chosen from it
// is verified against the index's descriptor.
func TestPullByIndexDigestRecordsVerifiedName(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	img := withPlatform(t, ociImage(t, 88, 1), "linux", "amd64")
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: img, Descriptor: ggcr.Descriptor{Platform: &ggcr.Platform{OS: "linux", Architecture: "amd64"}}})
	reg.pushIndex(t, "multi:1", idx)
	d := mustDigest(t, idx.Digest)
	s := newStore(t)
	got, err := Pull(ctx, s, "docker://"+reg.host+"/multi@"+d, PullOptions{TLSVerify: noTLS(), Platform: "linux/amd64"})
	if err != nil {
		t.Fatal(err)
	}
	if want := mustDigest(t, img.Digest); got.Digest.String() != want {
		t.Errorf("digest %s, want the instance's %s", got.Digest, want)
	}
	if r, err := s.Resolve(ctx, reg.host+"/multi@"+d); err != nil || r.Digest != got.Digest {
		t.Errorf("resolve by the index digest: %v %v", r, err)
	}
	ocitest.CheckConsistent(t, s)
}
