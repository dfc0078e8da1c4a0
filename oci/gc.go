package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	digest "github.com/opencontainers/go-digest"
)

// Prune deletes dangling images (images without names) and every blob no
// image uses, and clears temporary files left by crashed processes. It waits
// for pulls and imports in progress (in any process) to finish, and holds
// them off while it runs. It returns the bytes freed.
func (s *Store) Prune(ctx context.Context) (freed int64, err error) {
	gc, err := lockFile(ctx, s.gcLockPath(), true)
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	defer gc.Unlock()

	var db *refsDB
	err = s.updateRefs(ctx, func(d *refsDB) error {
		for md, rec := range d.Images {
			if len(rec.Names) == 0 {
				delete(d.Images, md)
			}
		}
		s.cleanRefsTemp()
		db = d
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	keep, err := s.reachable(db)
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	freed, err = s.deleteBlobs(func(d digest.Digest) bool { return !keep[d] })
	if err != nil {
		return freed, fmt.Errorf("prune: %w", err)
	}
	s.cleanTmp()
	return freed, nil
}

// Hold keeps Prune from running (in any process) until release is called,
// so that the blobs of an image resolved meanwhile stay readable: the
// launcher holds the store while it extracts layers. Pulls and imports may
// run while the store is held. release may be called more than once.
func (s *Store) Hold(ctx context.Context) (release func(), err error) {
	if s.readOnly {
		return func() {}, nil
	}
	l, err := lockFile(ctx, s.gcLockPath(), false)
	if err != nil {
		return nil, fmt.Errorf("hold image store: %w", err)
	}
	var once sync.Once
	return func() { once.Do(l.Unlock) }, nil
}

// deleteBlobs removes the blobs for which del is true, and files under
// blobs/ that are not blobs. The caller holds gc.lock exclusively.
func (s *Store) deleteBlobs(del func(digest.Digest) bool) (int64, error) {
	var freed int64
	algs, err := os.ReadDir(filepath.Join(s.root, "blobs"))
	if err != nil {
		return 0, err
	}
	for _, a := range algs {
		dir := filepath.Join(s.root, "blobs", a.Name())
		if !a.IsDir() {
			continue
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return freed, err
		}
		for _, e := range ents {
			d := digest.NewDigestFromEncoded(digest.Algorithm(a.Name()), e.Name())
			if d.Validate() == nil && !del(d) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			var size int64
			if fi, err := e.Info(); err == nil {
				size = fi.Size()
			}
			if err := os.RemoveAll(p); err != nil {
				return freed, err
			}
			freed += size
		}
	}
	return freed, nil
}

// cleanTmp empties tmp/. The caller holds gc.lock exclusively, so nothing in
// there belongs to a live operation.
func (s *Store) cleanTmp() {
	ents, err := os.ReadDir(s.TmpDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		os.RemoveAll(filepath.Join(s.TmpDir(), e.Name()))
	}
}

// Rollback removes the blobs a failed pull or import created, if no image
// uses them and no other writer is active (it never waits: when the store is
// busy the blobs stay for Prune). The caller must have released its shared
// gc.lock.
func (s *Store) Rollback(created []digest.Digest) {
	gc, ok, err := tryLockFile(s.gcLockPath(), true)
	if err != nil || !ok {
		return
	}
	defer gc.Unlock()
	db, err := s.readRefs()
	if err != nil {
		return
	}
	keep, err := s.reachable(db)
	if err != nil {
		return
	}
	for _, d := range created {
		if keep[d] {
			continue
		}
		if p, err := s.blobPath(d); err == nil {
			os.Remove(p)
		}
	}
	s.cleanTmp()
}

// Exclusive keeps creations (Hold), pulls, imports and prunes off the store
// (in any process) until release is called: a sweep of what no image and no
// sandbox uses (the extracted layer cache) runs under it, while no creation
// is between resolving its image and recording the sandbox that uses it.
func (s *Store) Exclusive(ctx context.Context) (release func(), err error) {
	if s.readOnly {
		return nil, fmt.Errorf("lock image store %s: %w", s.root, os.ErrPermission)
	}
	l, err := lockFile(ctx, s.gcLockPath(), true)
	if err != nil {
		return nil, fmt.Errorf("lock image store: %w", err)
	}
	var once sync.Once
	return func() { once.Do(l.Unlock) }, nil
}
