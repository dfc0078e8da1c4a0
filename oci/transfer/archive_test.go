package transfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/oci/ocitest"
)

// writeLayout writes img as an OCI layout directory with ref name refName.
func writeLayout(t *testing.T, dir string, img ggcr.Image, refName string) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	var opts []layout.Option
	if refName != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{v1.AnnotationRefName: refName}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		t.Fatal(err)
	}
}

func TestImportArchives(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	dir := t.TempDir()
	src := ociImage(t, 50, 2)
	want := mustDigest(t, src.Digest)

	layoutDir := filepath.Join(dir, "layout")
	writeLayout(t, layoutDir, src, "")
	ociTar := filepath.Join(dir, "img.oci.tar")
	ocitest.TarDir(t, layoutDir, ociTar)
	dockerTar := filepath.Join(dir, "img.docker.tar")
	tag, _ := name.NewTag("example.com/d/img:7")
	if err := tarball.WriteToFile(dockerTar, tag, dockerImage(t, 51, 2)); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		path, name, wantName string
		preserved            bool
	}{
		{layoutDir, "fromdir", "localhost/fromdir:latest", true},
		{ociTar, "fromociarchive:2", "localhost/fromociarchive:2", true},
		{dockerTar, "quay.io/x/fromdocker:3", "quay.io/x/fromdocker:3", false},
	} {
		img, err := ImportArchive(ctx, s, tc.path, tc.name)
		if err != nil {
			t.Fatalf("import %s: %v", tc.path, err)
		}
		if !slices.Contains(img.Names, tc.wantName) { // the OCI imports are one image with two names
			t.Errorf("import %s: names %v, want %s", tc.path, img.Names, tc.wantName)
		}
		if tc.preserved && img.Digest.String() != want {
			t.Errorf("import %s: digest %s, want %s", tc.path, img.Digest, want)
		}
		if _, err := s.Resolve(ctx, tc.name); err != nil {
			t.Errorf("resolve %s: %v", tc.name, err)
		}
	}
	// docker-archive layers are uncompressed tars, kept as they are.
	img, _ := s.Resolve(ctx, "quay.io/x/fromdocker:3")
	for _, l := range img.Layers {
		if l.MediaType != v1.MediaTypeImageLayerGzip && l.MediaType != v1.MediaTypeImageLayer {
			t.Errorf("docker-archive layer media type %s", l.MediaType)
		}
	}

	// Pull with explicit transports; names from docker-archive references.
	img, err := Pull(ctx, s, "oci:"+layoutDir, PullOptions{Name: "viaoci"})
	if err != nil || img.Digest.String() != want {
		t.Fatalf("pull oci: %v %v", img, err)
	}
	img, err = Pull(ctx, s, "docker-archive:"+dockerTar+":example.com/d/img:7", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(img.Names, "example.com/d/img:7") {
		t.Errorf("docker-archive names %v", img.Names)
	}
	// oci-archive without a name: dangling.
	img, err = Pull(ctx, s, "oci-archive:"+ociTar, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Not an archive.
	junk := filepath.Join(dir, "junk.tar")
	os.WriteFile(junk, ocitest.RootfsTar(t, 1), 0o644)
	if _, err := ImportArchive(ctx, s, junk, "junk"); err == nil {
		t.Error("import of a rootfs tar as an image archive succeeded")
	}
	if _, err := ImportArchive(ctx, s, dir, "junk"); !errors.Is(err, oci.ErrInvalidName) {
		t.Errorf("import of a plain directory: %v", err)
	}
	ocitest.CheckConsistent(t, s)
}

func TestSaveRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	img, err := s.Import(ctx, bytes.NewReader(ocitest.RootfsTar(t, 3)), "saved:1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, dest := range []string{
		"oci-archive:" + filepath.Join(dir, "a.tar") + ":saved",
		"oci:" + filepath.Join(dir, "layout") + ":saved",
	} {
		if err := Save(ctx, s, "saved:1", dest, SaveOptions{}); err != nil {
			t.Fatalf("save %s: %v", dest, err)
		}
	}
	if err := Save(ctx, s, "saved:1", "docker-archive:"+filepath.Join(dir, "d.tar")+":localhost/saved:1", SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Save(ctx, s, "saved:1", filepath.Join(dir, "x.tar"), SaveOptions{}); !errors.Is(err, oci.ErrInvalidName) {
		t.Errorf("save without transport: %v", err)
	}
	if err := Save(ctx, s, "nothere", "oci:"+filepath.Join(dir, "n"), SaveOptions{}); !errors.Is(err, oci.ErrNotFound) {
		t.Errorf("save unknown image: %v", err)
	}

	// Into a second store: identical digests for OCI.
	s2 := newStore(t)
	for _, p := range []string{filepath.Join(dir, "a.tar"), filepath.Join(dir, "layout")} {
		got, err := ImportArchive(ctx, s2, p, "back")
		if err != nil {
			t.Fatal(err)
		}
		if got.Digest != img.Digest || got.ID != img.ID {
			t.Errorf("round trip via %s: %s/%s, want %s/%s", p, got.Digest, got.ID, img.Digest, img.ID)
		}
	}
	got, err := ImportArchive(ctx, s2, filepath.Join(dir, "d.tar"), "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Layers[0].DiffID != img.Layers[0].DiffID {
		t.Errorf("docker-archive round trip changed the diff ID")
	}

	// Save reads through the verifying reader: a corrupt blob fails it.
	p, _ := s.BlobPath(img.Layers[0].Digest)
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte(strings.Repeat("z", int(img.Layers[0].Size))), 0o644)
	err = Save(ctx, s, "saved:1", "oci-archive:"+filepath.Join(dir, "bad.tar"), SaveOptions{})
	if err == nil || !strings.Contains(err.Error(), img.Layers[0].Digest.Encoded()) {
		t.Errorf("save of a corrupt image: %v", err)
	}
	ocitest.CheckConsistent(t, s2)
	_ = io.Discard
}

// An image pulled from an OCI layout or archive is named after the
// reference's image part, else after the ref.name annotation when that is a
// full name; a bare tag leaves it unnamed.
func TestPullLayoutNames(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		annotation, suffix, want string
	}{
		{"example.com/team/tool:2", "", "example.com/team/tool:2"},
		{"busybox:latest", "", "localhost/busybox:latest"},
		{"latest", "", ""},
		{"latest", ":latest", ""},
		{"box:1", ":box:1", "localhost/box:1"},
	} {
		s := newStore(t)
		dir := t.TempDir()
		writeLayout(t, filepath.Join(dir, "layout"), ociImage(t, 7, 1), tc.annotation)
		ocitest.TarDir(t, filepath.Join(dir, "layout"), filepath.Join(dir, "img.tar"))
		for _, ref := range []string{"oci:" + filepath.Join(dir, "layout"), "oci-archive:" + filepath.Join(dir, "img.tar")} {
			img, err := Pull(ctx, s, ref+tc.suffix, PullOptions{})
			if err != nil {
				t.Fatalf("pull %s: %v", ref+tc.suffix, err)
			}
			got := ""
			if len(img.Names) > 0 {
				got = img.Names[0]
			}
			if got != tc.want {
				t.Errorf("pull %s (ref.name %q): named %q, want %q", ref+tc.suffix, tc.annotation, got, tc.want)
			}
		}
	}
}
