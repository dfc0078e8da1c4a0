package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	digest "github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"
)

// refsVersion is the format version of refs.json.
const refsVersion = 1

// maxRefsSize bounds refs.json; a store with that many names is not a use case.
const maxRefsSize = 64 << 20

// refsDB is the content of refs.json:
//
//	{"version":1,"images":{"sha256:…":{"names":["docker.io/library/busybox:latest"]}}}
//
// Keys are manifest digests; every name is in NormalizeName's canonical form
// and belongs to at most one image. An image with no names is dangling.
type refsDB struct {
	Version int                       `json:"version"`
	Images  map[digest.Digest]*record `json:"images"`
}

type record struct {
	Names []string `json:"names"`
}

func newRefsDB() *refsDB {
	return &refsDB{Version: refsVersion, Images: map[digest.Digest]*record{}}
}

// decodeRefs parses and validates refs.json. Empty input is an empty database.
func decodeRefs(b []byte) (*refsDB, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return newRefsDB(), nil
	}
	if len(b) > maxRefsSize {
		return nil, fmt.Errorf("refs database: %d bytes: %w", len(b), ErrCorrupt)
	}
	var db refsDB
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&db); err != nil {
		return nil, fmt.Errorf("refs database: %v: %w", err, ErrCorrupt)
	}
	if dec.More() {
		return nil, fmt.Errorf("refs database: trailing data: %w", ErrCorrupt)
	}
	if db.Version != refsVersion {
		return nil, fmt.Errorf("refs database: version %d, want %d: %w", db.Version, refsVersion, ErrCorrupt)
	}
	if db.Images == nil {
		db.Images = map[digest.Digest]*record{}
	}
	owner := map[string]digest.Digest{}
	for d, rec := range db.Images {
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("refs database: image %q: %v: %w", d, err, ErrCorrupt)
		}
		if rec == nil {
			return nil, fmt.Errorf("refs database: image %s: null record: %w", d, ErrCorrupt)
		}
		for _, n := range rec.Names {
			if c, err := NormalizeName(n); err != nil || c != n {
				return nil, fmt.Errorf("refs database: image %s: name %q is not canonical: %w", d, n, ErrCorrupt)
			}
			if o, dup := owner[n]; dup {
				return nil, fmt.Errorf("refs database: name %q on both %s and %s: %w", n, o, d, ErrCorrupt)
			}
			owner[n] = d
		}
		slices.Sort(rec.Names)
	}
	return &db, nil
}

func (db *refsDB) encode() ([]byte, error) {
	for _, rec := range db.Images {
		slices.Sort(rec.Names)
	}
	b, err := json.MarshalIndent(db, "", "\t")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// lookup returns the image that carries name.
func (db *refsDB) lookup(name string) (digest.Digest, bool) {
	for d, rec := range db.Images {
		if slices.Contains(rec.Names, name) {
			return d, true
		}
	}
	return "", false
}

// untag removes name from whichever image carries it; the image stays, maybe dangling.
func (db *refsDB) untag(name string) {
	for _, rec := range db.Images {
		rec.Names = slices.DeleteFunc(rec.Names, func(n string) bool { return n == name })
	}
}

// add records image d (if new) and moves names onto it.
func (db *refsDB) add(d digest.Digest, names ...string) {
	rec := db.Images[d]
	if rec == nil {
		rec = &record{Names: []string{}}
		db.Images[d] = rec
	}
	for _, n := range names {
		if n == "" || slices.Contains(rec.Names, n) {
			continue
		}
		db.untag(n)
		rec.Names = append(rec.Names, n)
	}
}

// readRefs reads refs.json without locking: writers replace it atomically.
func (s *Store) readRefs() (*refsDB, error) {
	b, err := readFileNoFollow(s.refsPath())
	if errors.Is(err, fs.ErrNotExist) {
		return newRefsDB(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read refs database: %w", err)
	}
	db, err := decodeRefs(b)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.refsPath(), err)
	}
	return db, nil
}

// updateRefs applies fn to the refs database under its lock and writes the
// result back atomically if fn returns nil.
func (s *Store) updateRefs(ctx context.Context, fn func(db *refsDB) error) error {
	if s.readOnly {
		return fmt.Errorf("update names in %s: %w", s.root, ErrReadOnly)
	}
	l, err := lockFile(ctx, s.refsLock(), true)
	if err != nil {
		return err
	}
	defer l.Unlock()
	db, err := s.readRefs()
	if err != nil {
		return err
	}
	if err := fn(db); err != nil {
		return err
	}
	return s.writeRefs(db)
}

func (s *Store) writeRefs(db *refsDB) error {
	b, err := db.encode()
	if err != nil {
		return fmt.Errorf("write refs database: %w", err)
	}
	tmp, err := os.CreateTemp(s.root, ".refs.json-*")
	if err != nil {
		return fmt.Errorf("write refs database: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("write refs database: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("write refs database: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write refs database: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write refs database: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.refsPath()); err != nil {
		return fmt.Errorf("write refs database: %w", err)
	}
	ok = true
	return syncDir(s.root)
}

// syncDir makes a directory's entries (renames into it) durable.
func syncDir(path string) error {
	dir, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// cleanRefsTemp removes temporary refs files left by crashed writers. The
// caller holds the refs lock.
func (s *Store) cleanRefsTemp() {
	ents, err := os.ReadDir(s.root)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".refs.json-") {
			os.Remove(filepath.Join(s.root, e.Name()))
		}
	}
}

// readFileNoFollow reads a regular file that is not a symbolic link (one
// planted in a store another user writes would make bothy read a file of
// their choosing), of at most 64 MiB.
func readFileNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	const limit = 64 << 20
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}
