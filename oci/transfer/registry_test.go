package transfer

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ggcr "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/oci/ocitest"
)

func TestPullOCIPreservesDigests(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	s := newStore(t)
	src := ociImage(t, 1, 2)
	ref := reg.push(t, "app/one:v1", src)

	img, err := Pull(ctx, s, ref, PullOptions{TLSVerify: noTLS()})
	if err != nil {
		t.Fatal(err)
	}
	if want := mustDigest(t, src.Digest); img.Digest.String() != want {
		t.Errorf("manifest digest %s, want %s (preserved)", img.Digest, want)
	}
	if want := mustDigest(t, src.ConfigName); img.ID.String() != want {
		t.Errorf("ID %s, want %s", img.ID, want)
	}
	wantName := reg.host + "/app/one:v1"
	if len(img.Names) != 1 || img.Names[0] != wantName {
		t.Errorf("names %v, want [%s]", img.Names, wantName)
	}
	layers, _ := src.Layers()
	if len(img.Layers) != len(layers) {
		t.Fatalf("%d layers, want %d", len(img.Layers), len(layers))
	}
	var size int64
	for i, l := range layers {
		if got, want := img.Layers[i].Digest.String(), mustDigest(t, l.Digest); got != want {
			t.Errorf("layer %d digest %s, want %s", i, got, want)
		}
		if got, want := img.Layers[i].DiffID.String(), mustDigest(t, l.DiffID); got != want {
			t.Errorf("layer %d diff ID %s, want %s", i, got, want)
		}
		if img.Layers[i].MediaType != v1.MediaTypeImageLayerGzip {
			t.Errorf("layer %d media type %s", i, img.Layers[i].MediaType)
		}
		// The stored blob reads back verified, byte for byte.
		rc, err := s.OpenBlob(img.Layers[i].Digest)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
		if digest.FromBytes(b) != img.Layers[i].Digest {
			t.Errorf("layer %d content mismatch", i)
		}
		size += int64(len(b))
	}
	if img.Size != size {
		t.Errorf("size %d, want %d", img.Size, size)
	}

	// Resolve by every form.
	for _, r := range []string{wantName, reg.host + "/app/one@" + img.Digest.String(), img.Digest.String(), img.ID.String(), img.ShortID(), img.ID.Encoded()[:4]} {
		got, err := s.Resolve(ctx, r)
		if err != nil {
			t.Errorf("resolve %s: %v", r, err)
			continue
		}
		if got.Digest != img.Digest {
			t.Errorf("resolve %s: %s, want %s", r, got.Digest, img.Digest)
		}
	}
	if _, err := s.Resolve(ctx, reg.host+"/app/one:v2"); !errors.Is(err, oci.ErrNotFound) {
		t.Errorf("resolve unknown tag: %v, want ErrNotFound", err)
	}
	ocitest.CheckConsistent(t, s)
}

func TestPullDockerConvertsToOCI(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	s := newStore(t)
	src := dockerImage(t, 2, 2)
	ref := reg.push(t, "docker/img:latest", src)
	img, err := Pull(ctx, s, ref, PullOptions{TLSVerify: noTLS()})
	if err != nil {
		t.Fatal(err)
	}
	mb, err := s.ReadBlob(img.Digest, oci.MaxManifestSize)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mb), v1.MediaTypeImageManifest) {
		t.Errorf("stored manifest is not OCI: %s", mb)
	}
	layers, _ := src.Layers()
	for i, l := range layers {
		if got, want := img.Layers[i].Digest.String(), mustDigest(t, l.Digest); got != want {
			t.Errorf("layer %d digest %s, want %s (no recompression)", i, got, want)
		}
	}
	ocitest.CheckConsistent(t, s)
}

func TestPullByDigestAndPlatform(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	s := newStore(t)
	amd := withPlatform(t, ociImage(t, 10, 1), "linux", "amd64")
	arm := withPlatform(t, ociImage(t, 11, 1), "linux", "arm64")
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx,
		mutate.IndexAddendum{Add: amd, Descriptor: ggcr.Descriptor{Platform: &ggcr.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: ggcr.Descriptor{Platform: &ggcr.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}}},
	)
	ref := reg.pushIndex(t, "multi:1", idx)

	img, err := Pull(ctx, s, ref, PullOptions{TLSVerify: noTLS(), Platform: "linux/arm64"})
	if err != nil {
		t.Fatal(err)
	}
	if want := mustDigest(t, arm.Digest); img.Digest.String() != want {
		t.Errorf("linux/arm64 pull got %s, want %s", img.Digest, want)
	}
	if img.Config.Architecture != "arm64" {
		t.Errorf("architecture %q", img.Config.Architecture)
	}
	img2, err := Pull(ctx, s, ref, PullOptions{TLSVerify: noTLS(), Platform: "linux/amd64"})
	if err != nil {
		t.Fatal(err)
	}
	if want := mustDigest(t, amd.Digest); img2.Digest.String() != want {
		t.Errorf("linux/amd64 pull got %s, want %s", img2.Digest, want)
	}
	// The tag moved: the arm64 image is dangling now.
	got, err := s.Resolve(ctx, img.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Names) != 0 {
		t.Errorf("arm64 image still named %v", got.Names)
	}

	// By digest: the name recorded is the digested one.
	byDigest := "docker://" + reg.host + "/multi@" + mustDigest(t, amd.Digest)
	img3, err := Pull(ctx, s, byDigest, PullOptions{TLSVerify: noTLS()})
	if err != nil {
		t.Fatal(err)
	}
	want := reg.host + "/multi@" + mustDigest(t, amd.Digest)
	if img3.Digest != img2.Digest || !contains(img3.Names, want) {
		t.Errorf("pull by digest: %s %v, want %s with %s", img3.Digest, img3.Names, img2.Digest, want)
	}
	ocitest.CheckConsistent(t, s)
}

func withPlatform(t *testing.T, img ggcr.Image, os, arch string) ggcr.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = os, arch
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestListRemovePrune(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	s := newStore(t)
	a := ociImage(t, 20, 2)
	b := ociImage(t, 21, 1)
	refA := reg.push(t, "a:1", a)
	refB := reg.push(t, "b:1", b)
	imgA, err := Pull(ctx, s, refA, PullOptions{TLSVerify: noTLS()})
	if err != nil {
		t.Fatal(err)
	}
	imgB, err := Pull(ctx, s, refB, PullOptions{TLSVerify: noTLS()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Tag(ctx, reg.host+"/a:1", "mine"); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("list: %d images", len(list))
	}
	got, err := s.Resolve(ctx, "mine")
	if err != nil || got.Digest != imgA.Digest {
		t.Fatalf("resolve mine: %v %v", got, err)
	}
	if want := []string{reg.host + "/a:1", "localhost/mine:latest"}; strings.Join(got.Names, " ") != strings.Join(want, " ") {
		t.Errorf("names %v, want %v", got.Names, want)
	}

	// Nothing to prune while both are named.
	if freed, err := s.Prune(ctx); err != nil || freed != 0 {
		t.Fatalf("prune: %d %v", freed, err)
	}
	// Untag one name of A: A stays.
	if err := s.Remove(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(ctx, imgA.ShortID()); err != nil {
		t.Fatalf("A gone after untag: %v", err)
	}
	if err := s.Remove(ctx, "mine"); !errors.Is(err, oci.ErrNotFound) {
		t.Errorf("second remove: %v, want ErrNotFound", err)
	}
	// Remove A by its last name, B by ID.
	if err := s.Remove(ctx, reg.host+"/a:1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, imgB.ID.String()); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.List(ctx); len(list) != 0 {
		t.Fatalf("list after remove: %d images", len(list))
	}
	// Blobs stay until prune; then everything goes.
	if _, err := s.OpenBlob(imgA.Layers[0].Digest); err != nil {
		t.Fatalf("blob gone before prune: %v", err)
	}
	freed, err := s.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if freed < imgA.Size+imgB.Size {
		t.Errorf("freed %d, want ≥ %d", freed, imgA.Size+imgB.Size)
	}
	if _, err := s.OpenBlob(imgA.Layers[0].Digest); !errors.Is(err, oci.ErrNotFound) {
		t.Errorf("blob after prune: %v, want ErrNotFound", err)
	}
	if snap := ocitest.Snapshot(t, s); !strings.HasPrefix(snap, "refs.json ") || strings.Contains(snap, "\n") {
		t.Errorf("store after prune:\n%s", snap)
	}
}

func TestPullSharedLayersAndPrune(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	s := newStore(t)
	base := ociImage(t, 30, 1)
	l, _ := ociImage(t, 31, 1).Layers()
	child, err := mutate.AppendLayers(base, l...)
	if err != nil {
		t.Fatal(err)
	}
	imgBase, err := Pull(ctx, s, reg.push(t, "base:1", base), PullOptions{TLSVerify: noTLS()})
	if err != nil {
		t.Fatal(err)
	}
	imgChild, err := Pull(ctx, s, reg.push(t, "child:1", child), PullOptions{TLSVerify: noTLS()})
	if err != nil {
		t.Fatal(err)
	}
	if imgChild.Layers[0].Digest != imgBase.Layers[0].Digest {
		t.Fatal("layers not shared")
	}
	if err := s.Remove(ctx, reg.host+"/base:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	// The shared layer survives: the child still uses it.
	ocitest.CheckConsistent(t, s)
	if _, err := s.Resolve(ctx, reg.host+"/child:1"); err != nil {
		t.Fatal(err)
	}
}

// corruptingHook serves a wrong or truncated body for one blob.
func corruptingHook(d string, truncate bool) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+d) {
			return false
		}
		body := []byte(strings.Repeat("x", 600))
		if truncate {
			body = body[:10]
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Docker-Content-Digest", d)
		w.Write(body)
		return true
	}
}

func TestPullCorruptBlob(t *testing.T) {
	for _, tc := range []struct {
		name     string
		truncate bool
		config   bool
	}{{"layer", false, false}, {"layer-truncated", true, false}, {"config", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			reg := newRegistry(t)
			s := newStore(t)
			// Something already in the store must stay as it is.
			if _, err := s.Import(ctx, strings.NewReader(string(ocitest.RootfsTar(t, 1))), "keep"); err != nil {
				t.Fatal(err)
			}
			before := ocitest.Snapshot(t, s)
			src := ociImage(t, 40, 2)
			ref := reg.push(t, "bad:1", src)
			bad := mustDigest(t, src.ConfigName)
			if !tc.config {
				layers, _ := src.Layers()
				bad = mustDigest(t, layers[1].Digest)
			}
			reg.hook = corruptingHook(bad, tc.truncate)
			_, err := Pull(ctx, s, ref, PullOptions{TLSVerify: noTLS()})
			if err == nil {
				t.Fatal("pull of a corrupt blob succeeded")
			}
			t.Logf("pull error: %v", err)
			if !strings.Contains(err.Error(), strings.TrimPrefix(bad, "sha256:")) {
				t.Errorf("error does not name blob %s: %v", bad, err)
			}
			if after := ocitest.Snapshot(t, s); after != before {
				t.Errorf("store changed by failed pull:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if _, err := s.Resolve(ctx, reg.host+"/bad:1"); !errors.Is(err, oci.ErrNotFound) {
				t.Errorf("ref recorded for a failed pull: %v", err)
			}
			ocitest.CheckConsistent(t, s)

			// Once the registry serves the right bytes, the pull works.
			reg.hook = nil
			if _, err := Pull(ctx, s, ref, PullOptions{TLSVerify: noTLS()}); err != nil {
				t.Fatal(err)
			}
			ocitest.CheckConsistent(t, s)
		})
	}
}

func TestPullErrors(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	s := newStore(t)
	for _, ref := range []string{
		"docker://" + reg.host + "/nothere:1",
		"oci-archive:/nonexistent/x.tar",
		"BadName",
		"ftp://x/y",
	} {
		if _, err := Pull(ctx, s, ref, PullOptions{TLSVerify: noTLS()}); err == nil {
			t.Errorf("pull %s succeeded", ref)
		}
	}
	if _, err := Pull(ctx, s, "busybox", PullOptions{Platform: "linux"}); err == nil {
		t.Error("bad platform accepted")
	}
	ocitest.CheckConsistent(t, s)
	if snap := ocitest.Snapshot(t, s); snap != "" {
		t.Errorf("store changed by failed pulls:\n%s", snap)
	}
}

func TestPullAuthFileAndProgress(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	s := newStore(t)
	ref := reg.push(t, "private/img:1", ociImage(t, 60, 1))
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if u, p, ok := r.BasicAuth(); ok && u == "user" && p == "secret" {
			return false
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusUnauthorized)
		return true
	}
	empty := filepath.Join(t.TempDir(), "empty.json")
	os.WriteFile(empty, []byte(`{"auths":{}}`), 0o600)
	if _, err := Pull(ctx, s, ref, PullOptions{TLSVerify: noTLS(), AuthFile: empty}); err == nil {
		t.Fatal("pull without credentials succeeded")
	}
	auth := filepath.Join(t.TempDir(), "auth.json")
	cred := base64.StdEncoding.EncodeToString([]byte("user:secret"))
	os.WriteFile(auth, []byte(`{"auths":{"`+reg.host+`":{"auth":"`+cred+`"}}}`), 0o600)
	var progress bytes.Buffer
	if _, err := Pull(ctx, s, ref, PullOptions{TLSVerify: noTLS(), AuthFile: auth, Progress: &progress}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress.String(), "Copying") {
		t.Errorf("no progress written: %q", progress.String())
	}
	ocitest.CheckConsistent(t, s)
}

func TestPullCancelled(t *testing.T) {
	reg := newRegistry(t)
	s := newStore(t)
	ref := reg.push(t, "slow:1", ociImage(t, 61, 2))
	ctx, cancel := context.WithCancel(context.Background())
	layers, _ := ociImage(t, 61, 2).Layers()
	second := mustDigest(t, layers[1].Digest)
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/blobs/"+second) {
			cancel() // the pull is cancelled while it runs
		}
		return false
	}
	if _, err := Pull(ctx, s, ref, PullOptions{TLSVerify: noTLS()}); err == nil {
		t.Fatal("cancelled pull succeeded")
	}
	if snap := ocitest.Snapshot(t, s); snap != "" {
		t.Errorf("store changed by a cancelled pull:\n%s", snap)
	}
}
