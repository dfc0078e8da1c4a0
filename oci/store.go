package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/ctxio"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotFound: no image, name or blob matches.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous: an ID prefix matches more than one image.
	ErrAmbiguous = errors.New("ambiguous")
	// ErrCorrupt: a blob's content does not match its digest (wrong or
	// truncated), or the refs database or a manifest is malformed.
	ErrCorrupt = errors.New("corrupt")
	// ErrInvalidName: a name is not a valid image reference.
	ErrInvalidName = errors.New("invalid image name")
)

// Store is an image store rooted at one directory. Its methods are safe for
// concurrent use, by any number of goroutines and processes sharing the root.
type Store struct {
	root string

	// readOnly: opened with OpenReadOnly, a store this process only reads
	// (a shared store, see OpenReadOnly).
	readOnly bool

	mu    sync.Mutex
	cache map[digest.Digest]*imageData // verified manifest+config bytes, immutable by construction
}

// ErrReadOnly: a write to a store opened with OpenReadOnly.
var ErrReadOnly = errors.New("read-only image store")

// OpenReadOnly opens the store at root for reading only, creating nothing:
// a shared image store (on a network filesystem, read-only mount, owned by
// another user). Nothing read from it is trusted beyond its digests:
// manifests, configs and blobs are verified as in any store, refs.json is
// opened without following a symlink and only names digests. Hold is a
// no-op (no process prunes a store it reads), writes fail with ErrReadOnly.
func OpenReadOnly(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("open image store: empty root")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open image store %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("open image store %s: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open image store %s: not a directory", root)
	}
	return &Store{root: abs, readOnly: true, cache: map[digest.Digest]*imageData{}}, nil
}

// ReadOnly reports whether the store was opened with OpenReadOnly.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Open opens the store at root, creating its directories if needed.
func Open(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("open image store: empty root")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open image store %s: %w", root, err)
	}
	s := &Store{root: abs, cache: map[digest.Digest]*imageData{}}
	for _, d := range []string{s.root, s.blobDir(digest.SHA256), s.TmpDir(), s.CacheDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("open image store %s: %w", root, err)
		}
	}
	return s, nil
}

// Root returns the store's root directory (absolute).
func (s *Store) Root() string { return s.root }

func (s *Store) blobDir(a digest.Algorithm) string {
	return filepath.Join(s.root, "blobs", a.String())
}

// TmpDir holds the temporary files of blobs being written (and of
// transfers); CacheDir, containers/image's blob-info cache.
func (s *Store) TmpDir() string     { return filepath.Join(s.root, "tmp") }
func (s *Store) CacheDir() string   { return filepath.Join(s.root, "cache") }
func (s *Store) refsPath() string   { return filepath.Join(s.root, "refs.json") }
func (s *Store) refsLock() string   { return filepath.Join(s.root, "refs.lock") }
func (s *Store) gcLockPath() string { return filepath.Join(s.root, "gc.lock") }

// blobPath returns where blob d lives. d must be a valid digest of an
// available algorithm: the encoded part is then a fixed-length hex string and
// cannot escape the blob directory.
func (s *Store) blobPath(d digest.Digest) (string, error) {
	if err := d.Validate(); err != nil {
		return "", fmt.Errorf("blob %q: %w", d, err)
	}
	return filepath.Join(s.blobDir(d.Algorithm()), d.Encoded()), nil
}

// BlobPath returns the file that holds blob d, for a reader in another
// process (the launcher extracts layers inside the sandbox's user namespace).
// Reading it this way skips the blob's digest check; such a reader must
// verify what it derives (a layer's diff ID covers the whole content).
func (s *Store) BlobPath(d digest.Digest) (string, error) { return s.blobPath(d) }

// OpenBlob opens blob d for reading. The reader verifies the content against
// d: a Read that reaches the end of a blob whose content is wrong or truncated
// returns an error wrapping ErrCorrupt that names the blob. Close reads any
// unread remainder so that the digest is always checked, and reports a
// mismatch too; a caller that abandons a read early pays for reading the rest
// of the local file. A missing blob is an error wrapping ErrNotFound.
func (s *Store) OpenBlob(d digest.Digest) (io.ReadCloser, error) {
	r, _, err := s.openBlob(d)
	return r, err
}

func (s *Store) openBlob(d digest.Digest) (*blobReader, int64, error) {
	p, err := s.blobPath(d)
	if err != nil {
		return nil, 0, err
	}
	// Neither through a symbolic link nor blocking on a FIFO: a store
	// another user writes is hostile input.
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, fmt.Errorf("blob %s: %w", d, ErrNotFound)
		}
		return nil, 0, fmt.Errorf("open blob %s: %w", d, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file: %w", ErrCorrupt)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("open blob %s: %w", d, err)
	}
	return &blobReader{f: f, d: d, v: d.Verifier()}, fi.Size(), nil
}

// blobReader verifies a blob's digest at EOF.
type blobReader struct {
	f      *os.File
	d      digest.Digest
	v      digest.Verifier
	err    error // sticky: the terminal error (io.EOF when verified)
	closed bool
}

func (r *blobReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.f.Read(p)
	r.v.Write(p[:n])
	if err == io.EOF {
		if !r.v.Verified() {
			err = fmt.Errorf("read blob %s: content does not match digest (modified or truncated): %w", r.d, ErrCorrupt)
		}
		r.err = err
	} else if err != nil {
		err = fmt.Errorf("read blob %s: %w", r.d, err)
		r.err = err
	}
	return n, err
}

// Close drains and verifies the rest of the blob, then closes the file.
func (r *blobReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var err error
	if r.err == nil {
		_, err = io.Copy(io.Discard, r)
	} else if r.err != io.EOF {
		err = r.err
	}
	if cerr := r.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close blob %s: %w", r.d, cerr)
	}
	return err
}

// OpenBlobSize is OpenBlob, with the blob's size.
func (s *Store) OpenBlobSize(d digest.Digest) (io.ReadCloser, int64, error) {
	r, size, err := s.openBlob(d)
	if err != nil {
		return nil, 0, err
	}
	return r, size, nil
}

// ReadBlob reads a whole (small) blob, verified. Blobs longer than limit are
// refused.
func (s *Store) ReadBlob(d digest.Digest, limit int64) ([]byte, error) {
	r, size, err := s.openBlob(d)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if size > limit {
		return nil, fmt.Errorf("read blob %s: %d bytes, more than the %d allowed: %w", d, size, limit, ErrCorrupt)
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if err := r.Close(); err != nil {
		return nil, err
	}
	return b, nil
}

// HasBlob reports whether blob d exists, with size when size >= 0.
func (s *Store) HasBlob(d digest.Digest, size int64) (int64, bool) {
	p, err := s.blobPath(d)
	if err != nil {
		return 0, false
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || (size >= 0 && fi.Size() != size) {
		return 0, false
	}
	return fi.Size(), true
}

// WriteBlob copies r into the store as one blob. When expected is set, the
// content must match it (and expectedSize when >= 0); otherwise the sha256 of
// the content names the blob. created reports whether the blob was new.
func (s *Store) WriteBlob(ctx context.Context, r io.Reader, expected digest.Digest, expectedSize int64) (d digest.Digest, size int64, created bool, err error) {
	if expected == "" {
		return s.writeBlob(ctx, r, v1.Descriptor{Size: expectedSize})
	}
	return s.writeBlob(ctx, r, v1.Descriptor{Digest: expected, Size: expectedSize})
}

// WriteBlobDescriptor copies r into the store as the blob desc names: the
// content must have desc's digest and, when desc.Size >= 0, its size, or
// nothing is stored and the error is a *MismatchError naming desc (media
// type, claimed digest and size, actual digest and size). Reading stops as
// soon as the content is longer than desc.Size.
func (s *Store) WriteBlobDescriptor(ctx context.Context, r io.Reader, desc v1.Descriptor) (size int64, created bool, err error) {
	if desc.Digest == "" {
		return 0, false, errors.New("write blob: descriptor without a digest")
	}
	_, size, created, err = s.writeBlob(ctx, r, desc)
	return size, created, err
}

func (s *Store) writeBlob(ctx context.Context, r io.Reader, desc v1.Descriptor) (d digest.Digest, size int64, created bool, err error) {
	alg := digest.Canonical
	if desc.Digest != "" {
		if err := desc.Digest.Validate(); err != nil {
			return "", 0, false, fmt.Errorf("write blob %q: %w", desc.Digest, err)
		}
		alg = desc.Digest.Algorithm()
	}
	name := desc.Digest.String()
	if name == "" {
		name = "(new)"
	}
	if s.readOnly {
		return "", 0, false, fmt.Errorf("write blob %s in %s: %w", name, s.root, ErrReadOnly)
	}
	tmp, err := os.CreateTemp(s.TmpDir(), "blob-*")
	if err != nil {
		return "", 0, false, fmt.Errorf("write blob %s: %w", name, err)
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	dg := alg.Digester()
	in := ctxio.Reader(ctx, r)
	if desc.Size >= 0 {
		in = io.LimitReader(in, desc.Size+1) // one byte more tells a longer blob
	}
	size, err = io.Copy(io.MultiWriter(tmp, dg.Hash()), in)
	if err != nil {
		return "", 0, false, fmt.Errorf("write blob %s: %w", name, err)
	}
	d = dg.Digest()
	if desc.Digest != "" && d != desc.Digest || desc.Size >= 0 && size != desc.Size {
		m := &MismatchError{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, Actual: d, ActualSize: size}
		if desc.Size >= 0 && size > desc.Size {
			m.Actual = "" // read up to one byte past the claim, not to the end
		}
		if m.Digest == "" {
			m.Digest = d
		}
		return "", 0, false, fmt.Errorf("write blob: %w", m)
	}
	created, err = s.commitTemp(tmp, d)
	tmp = nil
	if err != nil {
		return "", 0, false, err
	}
	return d, size, created, nil
}

// WriteBlobBytes stores b as a blob named by its sha256.
func (s *Store) WriteBlobBytes(ctx context.Context, b []byte) (digest.Digest, bool, error) {
	d, _, created, err := s.WriteBlob(ctx, bytes.NewReader(b), digest.FromBytes(b), int64(len(b)))
	return d, created, err
}

// commitTemp syncs, closes and renames a verified temporary file into place
// as blob d; the temporary file is gone afterwards whatever happens.
func (s *Store) commitTemp(tmp *os.File, d digest.Digest) (created bool, err error) {
	if err := sealTemp(tmp); err != nil {
		os.Remove(tmp.Name())
		return false, fmt.Errorf("write blob %s: %w", d, err)
	}
	return s.placeTemp(tmp.Name(), d)
}

// sealTemp makes a written temporary file read-only and durable, and closes it.
func sealTemp(tmp *os.File) error {
	if err := tmp.Chmod(0o444); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	return tmp.Close()
}

// placeTemp renames the sealed temporary file at path into place as blob d,
// whose content it must be; the temporary file is gone afterwards whatever
// happens.
func (s *Store) placeTemp(path string, d digest.Digest) (created bool, err error) {
	defer func() {
		if err != nil {
			os.Remove(path)
		}
	}()
	p, err := s.blobPath(d)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return false, fmt.Errorf("write blob %s: %w", d, err)
	}
	_, statErr := os.Lstat(p)
	if err := os.Rename(path, p); err != nil {
		return false, fmt.Errorf("write blob %s: %w", d, err)
	}
	return errors.Is(statErr, fs.ErrNotExist), nil
}

// stagedBlob is content a source gave under some name, written to tmp/ and
// hashed, not yet in the store: it goes in (place) only once the
// descriptors that name it have been checked against it.
type stagedBlob struct {
	path   string
	actual digest.Digest // of the content, in the algorithm of its name
	size   int64
}

// stage writes r to a sealed temporary file, hashing it with alg.
func (s *Store) stage(ctx context.Context, r io.Reader, alg digest.Algorithm) (*stagedBlob, error) {
	tmp, err := os.CreateTemp(s.TmpDir(), "staged-*")
	if err != nil {
		return nil, err
	}
	dg := alg.Digester()
	size, err := io.Copy(io.MultiWriter(tmp, dg.Hash()), ctxio.Reader(ctx, r))
	if err == nil {
		err = sealTemp(tmp)
	} else {
		tmp.Close()
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, err
	}
	return &stagedBlob{path: tmp.Name(), actual: dg.Digest(), size: size}, nil
}
