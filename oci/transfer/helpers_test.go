package transfer

import (
	"io"
	"log"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	ggcr "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/bothy-sandbox/bothy/oci"
)

func newStore(t testing.TB) *oci.Store {
	t.Helper()
	s, err := oci.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func noTLS() *bool { f := false; return &f }

// testRegistry is a go-containerregistry registry on loopback, optionally
// with a hook that may replace responses.
type testRegistry struct {
	srv  *httptest.Server
	host string
	hook func(w http.ResponseWriter, r *http.Request) bool // true: handled
}

func newRegistry(t testing.TB) *testRegistry {
	t.Helper()
	reg := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	reg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reg.hook != nil && reg.hook(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(reg.srv.Close)
	reg.host = strings.TrimPrefix(reg.srv.URL, "http://")
	return reg
}

// push writes img as repo:tag ("x/y:1") and returns the docker:// reference.
func (reg *testRegistry) push(t testing.TB, repoTag string, img ggcr.Image) string {
	t.Helper()
	ref, err := name.ParseReference(reg.host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return "docker://" + reg.host + "/" + repoTag
}

func (reg *testRegistry) pushIndex(t testing.TB, repoTag string, idx ggcr.ImageIndex) string {
	t.Helper()
	ref, err := name.ParseReference(reg.host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	return "docker://" + reg.host + "/" + repoTag
}

// ociImage is a random OCI image (OCI manifest, config and layer media types).
func ociImage(t testing.TB, seed int64, layers int) ggcr.Image {
	t.Helper()
	src := rand.New(rand.NewSource(seed))
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for i := 0; i < layers; i++ {
		l, err := random.Layer(512, types.OCILayer, random.WithSource(src))
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// dockerImage is a random Docker schema 2 image.
func dockerImage(t testing.TB, seed int64, layers int) ggcr.Image {
	t.Helper()
	img, err := random.Image(512, int64(layers), random.WithSource(rand.New(rand.NewSource(seed))))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func mustDigest(t testing.TB, f func() (ggcr.Hash, error)) string {
	t.Helper()
	h, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}
