package oci

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"

	"github.com/bothy-sandbox/bothy/oci/ocitest"
)

func TestOpenBlobVerifies(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	content := bytes.Repeat([]byte("bothy"), 10000)
	d, created, err := s.WriteBlobBytes(ctx, content)
	if err != nil || !created {
		t.Fatalf("write: %v created=%v", err, created)
	}
	if _, again, err := s.WriteBlobBytes(ctx, content); err != nil || again {
		t.Fatalf("rewrite: %v created=%v", err, again)
	}
	read := func() ([]byte, error) {
		rc, err := s.OpenBlob(d)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		return b, err
	}
	if b, err := read(); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("read: %v", err)
	}

	p, _ := s.blobPath(d)
	corrupt := func(b []byte) {
		t.Helper()
		os.Chmod(p, 0o644)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wrong := bytes.Clone(content)
	wrong[100] ^= 1
	for name, b := range map[string][]byte{"modified": wrong, "truncated": content[:len(content)-1], "empty": nil, "extended": append(bytes.Clone(content), 'x')} {
		corrupt(b)
		_, err := read()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), d.String()) {
			t.Errorf("%s blob: error %v, want ErrCorrupt naming %s", name, err, d)
		}
	}

	// Close verifies what the caller did not read.
	corrupt(wrong)
	rc, err := s.OpenBlob(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("close of a partly read corrupt blob: %v, want ErrCorrupt", err)
	}

	if _, err := s.OpenBlob(digest.FromString("nothing")); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing blob: %v, want ErrNotFound", err)
	}
	for _, bad := range []digest.Digest{"", "sha256:../../etc/passwd", "md5:abcd", "sha256:ABC"} {
		if _, err := s.OpenBlob(bad); err == nil {
			t.Errorf("OpenBlob(%q) succeeded", bad)
		}
	}
}

func TestWriteBlobRefusesMismatch(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	want := digest.FromString("right")
	if _, _, _, err := s.WriteBlob(ctx, strings.NewReader("wrong"), want, -1); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want.String()) {
		t.Errorf("mismatch: %v", err)
	}
	if _, _, _, err := s.WriteBlob(ctx, strings.NewReader("righ"), want, 5); err == nil {
		t.Error("truncated write accepted")
	}
	if _, _, _, err := s.WriteBlob(ctx, strings.NewReader("right"), want, 4); !errors.Is(err, ErrCorrupt) {
		t.Errorf("size mismatch: %v", err)
	}
	if _, ok := s.HasBlob(want, -1); ok {
		t.Error("refused blob stored")
	}
	if tmp := ocitest.TmpEntries(t, s); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, _, err := s.WriteBlob(cctx, strings.NewReader("right"), want, -1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled write: %v", err)
	}
}

func TestCorruptStoredImage(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	img, err := s.Import(ctx, bytes.NewReader(ocitest.RootfsTar(t, 1)), "foo")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.blobPath(img.Layers[0].Digest)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = s.Verify(ctx)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), img.Layers[0].Digest.String()) {
		t.Errorf("verify: %v, want ErrCorrupt naming the layer", err)
	}
	// A fresh process (no cache) reading a corrupt manifest fails, naming it.
	mp, _ := s.blobPath(img.Digest)
	os.Chmod(mp, 0o644)
	if err := os.WriteFile(mp, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Resolve(ctx, "foo"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), img.Digest.String()) {
		t.Errorf("resolve corrupt manifest: %v", err)
	}
	if _, err := s2.Prune(ctx); err == nil {
		t.Error("prune with an unreadable image succeeded")
	}
	list, err := s2.List(ctx)
	if err == nil || len(list) != 0 {
		t.Errorf("list: %v %v", list, err)
	}
	// Removing it by name lets prune clean up.
	if err := s2.Remove(ctx, "foo"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Prune(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestOpenEmptyRoot(t *testing.T) {
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
}

func TestHoldKeepsPruneOff(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	img, err := s.Import(ctx, bytes.NewReader(ocitest.RootfsTar(t, 1)), "") // dangling: prunable
	if err != nil {
		t.Fatal(err)
	}
	release, err := s.Hold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Prune(cctx)
		done <- err
	}()
	// Pulls and imports still work while held.
	if _, err := s.Import(ctx, bytes.NewReader(ocitest.RootfsTar(t, 2)), "other"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("prune while held: %v, want context.Canceled", err)
	}
	if _, err := s.OpenBlob(img.Layers[0].Digest); err != nil {
		t.Fatalf("blob pruned while held: %v", err)
	}
	release()
	release()
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenBlob(img.Layers[0].Digest); !errors.Is(err, ErrNotFound) {
		t.Errorf("dangling image's layer after prune: %v", err)
	}
	ocitest.CheckConsistent(t, s)
}

// A lock file is never opened through a symlink: planted in a store another
// user can write, it would make bothy create or open a file of their choice.
func TestLocksDoNotFollowSymlinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := newStore(t)
	target := filepath.Join(t.TempDir(), "victim")
	for _, lock := range []string{s.gcLockPath(), s.refsLock()} {
		os.Remove(lock)
		if err := os.Symlink(target, lock); err != nil {
			t.Fatal(err)
		}
	}
	if release, err := s.Hold(ctx); err == nil {
		release()
		t.Error("Hold opened gc.lock through a symlink")
	}
	if err := s.Tag(ctx, "x", "y"); err == nil {
		t.Error("Tag opened a lock through a symlink")
	}
	s.Rollback(nil) // tries gc.lock exclusively: must not follow either
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the symlink's target was created: %v", err)
	}
}
