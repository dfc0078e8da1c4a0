package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/ulikunitz/xz"

	"github.com/bothy-sandbox/bothy/oci/ocitest"
)

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func TestImport(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	raw := ocitest.RootfsTar(t, 1)
	img, err := s.Import(ctx, bytes.NewReader(raw), "foo")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"localhost/foo:latest"}; !slices.Equal(img.Names, want) {
		t.Errorf("names %v, want %v", img.Names, want)
	}
	if len(img.Layers) != 1 {
		t.Fatalf("%d layers", len(img.Layers))
	}
	l := img.Layers[0]
	if want := digest.FromBytes(raw); l.DiffID != want {
		t.Errorf("diff ID %s, want %s", l.DiffID, want)
	}
	if l.MediaType != v1.MediaTypeImageLayerGzip {
		t.Errorf("media type %s", l.MediaType)
	}
	// The layer decompresses to the input.
	rc, err := s.OpenBlob(l.Digest)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("layer content differs from input (%v)", err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	c := img.Config
	if c.OS != runtime.GOOS || c.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", c.OS, c.Architecture)
	}
	if !slices.Equal(c.Config.Cmd, []string{"/bin/sh"}) || !slices.Equal(c.Config.Env, []string{DefaultPath}) {
		t.Errorf("config defaults: cmd %q env %q", c.Config.Cmd, c.Config.Env)
	}
	if time.Since(img.Created) > time.Hour || img.Created.IsZero() {
		t.Errorf("created %v", img.Created)
	}

	// Same tarball, gzip-compressed input, another name: same layer blob.
	img2, err := s.Import(ctx, bytes.NewReader(gz(t, raw)), "bar:1", ImportOptions{
		Entrypoint: []string{"/bin/app"}, Env: []string{"A=1"}, WorkingDir: "/w", User: "1000",
		Created: time.Unix(0, 0), Platform: "linux/arm64/v8",
	})
	if err != nil {
		t.Fatal(err)
	}
	if img2.Layers[0].Digest != l.Digest {
		t.Errorf("layer not deterministic: %s vs %s", img2.Layers[0].Digest, l.Digest)
	}
	c2 := img2.Config
	if c2.Config.Cmd != nil || c2.Config.WorkingDir != "/w" || c2.Config.User != "1000" || c2.Architecture != "arm64" || c2.Variant != "v8" || !img2.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("options not applied: %+v created %v", c2, img2.Created)
	}
	if want := []string{"localhost/bar:1"}; !slices.Equal(img2.Names, want) {
		t.Errorf("names %v", img2.Names)
	}

	// Resolve finds imports by short name, full name, ID, prefix.
	for ref, want := range map[string]digest.Digest{
		"foo": img.Digest, "foo:latest": img.Digest, "localhost/foo": img.Digest, "bar:1": img2.Digest,
		img2.ShortID(): img2.Digest, "sha256:" + img2.ID.Encoded()[:8]: img2.Digest,
	} {
		got, err := s.Resolve(ctx, ref)
		if err != nil || got.Digest != want {
			t.Errorf("resolve %s: %v %v", ref, got, err)
		}
	}
	if _, err := s.Resolve(ctx, "bar"); !errors.Is(err, ErrNotFound) {
		t.Errorf("resolve bar (no :latest): %v", err)
	}
	if _, err := s.Resolve(ctx, "abc"); !errors.Is(err, ErrNotFound) {
		t.Errorf("3-hex prefix: %v", err)
	}
	ocitest.CheckConsistent(t, s)
}

func TestImportRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for name, in := range map[string][]byte{
		"empty":     nil,
		"not tar":   []byte(strings.Repeat("this is not a tar archive\n", 100)),
		"bad gzip":  append([]byte{0x1f, 0x8b, 8, 0}, bytes.Repeat([]byte{1}, 100)...),
		"truncated": ocitest.RootfsTar(t, 1)[:700],
	} {
		if _, err := s.Import(ctx, bytes.NewReader(in), "x"); err == nil {
			t.Errorf("%s: import succeeded", name)
		}
	}
	if _, err := s.Import(ctx, bytes.NewReader(ocitest.RootfsTar(t, 1)), "Bad/Name"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
	if snap := ocitest.Snapshot(t, s); snap != "" {
		t.Errorf("store changed by failed imports:\n%s", snap)
	}
}

func TestAmbiguousID(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	img, err := s.Import(ctx, bytes.NewReader(ocitest.RootfsTar(t, 1)), "one")
	if err != nil {
		t.Fatal(err)
	}
	// A second manifest for the same config and layer: same image ID.
	mb, err := s.ReadBlob(img.Digest, MaxManifestSize)
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	m.Annotations = map[string]string{"x": "y"}
	mb2, _ := json.Marshal(m)
	md2, _, err := s.WriteBlobBytes(ctx, mb2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.updateRefs(ctx, func(db *refsDB) error { db.add(md2, "localhost/two:latest"); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{img.ShortID(), img.ID.String(), img.ID.Encoded()[:4]} {
		if _, err := s.Resolve(ctx, ref); !errors.Is(err, ErrAmbiguous) {
			t.Errorf("resolve %s: %v, want ErrAmbiguous", ref, err)
		}
	}
	// Manifest digests and names stay unambiguous.
	for ref, want := range map[string]digest.Digest{img.Digest.String(): img.Digest, md2.String(): md2, "two": md2, "one": img.Digest} {
		if got, err := s.Resolve(ctx, ref); err != nil || got.Digest != want {
			t.Errorf("resolve %s: %v %v", ref, got, err)
		}
	}
	if err := s.Remove(ctx, img.ShortID()); !errors.Is(err, ErrAmbiguous) {
		t.Errorf("remove by ambiguous ID: %v", err)
	}
	ocitest.CheckConsistent(t, s)
}

func TestImportDiffIDIsUncompressedSHA(t *testing.T) {
	s := newStore(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "a", Size: 1, Mode: 0o644})
	tw.Write([]byte("a"))
	tw.Close()
	buf.WriteString("trailing bytes after the end marker")
	img, err := s.Import(context.Background(), bytes.NewReader(buf.Bytes()), "")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("sha256:%x", sha256.Sum256(buf.Bytes())); img.Layers[0].DiffID.String() != want {
		t.Errorf("diff ID %s, want %s", img.Layers[0].DiffID, want)
	}
	if len(img.Names) != 0 {
		t.Errorf("unnamed import has names %v", img.Names)
	}
	// A dangling image is listed, and pruned.
	if list, _ := s.List(context.Background()); len(list) != 1 {
		t.Errorf("list: %d", len(list))
	}
	if _, err := s.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.List(context.Background()); len(list) != 0 {
		t.Errorf("list after prune: %d", len(list))
	}
	if snap := ocitest.Snapshot(t, s); !strings.HasPrefix(snap, "refs.json") || strings.Contains(snap, "\n") {
		t.Errorf("store after prune:\n%s", snap)
	}
}

// Import takes a rootfs tarball plain or compressed with any of the formats
// Decompress knows, and the layer (diff ID) is the same.
func TestImportCompressions(t *testing.T) {
	plain := ocitest.RootfsTar(t, 7)
	zs := func() []byte {
		var buf bytes.Buffer
		zw, _ := zstd.NewWriter(&buf)
		zw.Write(plain)
		zw.Close()
		return buf.Bytes()
	}
	xzb := func() []byte {
		var buf bytes.Buffer
		xw, err := xz.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		xw.Write(plain)
		xw.Close()
		return buf.Bytes()
	}
	bz := func() []byte {
		tool, err := exec.LookPath("bzip2")
		if err != nil {
			t.Fatal("requires bzip2 (make setup installs it)")
		}
		cmd := exec.Command(tool, "-c")
		cmd.Stdin = bytes.NewReader(plain)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	s := newStore(t)
	var diffID string
	for name, data := range map[string][]byte{"plain": plain, "gzip": gz(t, plain), "zstd": zs(), "xz": xzb(), "bzip2": bz()} {
		r, err := Decompress(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("%s: decompressed %d bytes (%v), want the %d of the tar", name, len(got), err, len(plain))
		}
		img, err := s.Import(context.Background(), bytes.NewReader(data), "c-"+name)
		if err != nil {
			t.Fatalf("%s: import: %v", name, err)
		}
		if d := img.Layers[0].DiffID.String(); diffID == "" {
			diffID = d
		} else if d != diffID {
			t.Errorf("%s: diff ID %s, want %s", name, d, diffID)
		}
	}
}
