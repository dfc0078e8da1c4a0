package rootfs

import (
	// Registers sha256 with go-digest: the diff IDs this package verifies.
	"context"
	_ "crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"
)

// ErrDigestMismatch is returned by [Cache.Get] when the uncompressed
// content of a layer does not hash to its diff ID.
var ErrDigestMismatch = errors.New("layer digest mismatch")

const (
	tmpPrefix = "tmp-"
	locksDir  = "locks"
)

// errLocked is returned by a non-blocking lock attempt that found the lock
// held.
var errLocked = errors.New("locked")

// Cache holds extracted layers on disk, one directory per diff ID at
// ROOT/<algorithm>/<encoded digest>, ready to be overlay lower directories.
//
// Layers are extracted under a per-layer lock file (flock) into
// ROOT/tmp-<algorithm>-<encoded>-<random>, verified, and renamed into
// place: no partial directory is ever visible and concurrent Gets of the
// same layer, from goroutines or processes, extract it once. A Cache is
// safe for concurrent use.
type Cache struct {
	root string
	opts UnpackOptions
	// shared: a shared store's layers (OpenSharedCache), readable by all.
	shared bool
}

// OpenCache opens (creating it if needed) the layer cache at root, for
// example $XDG_DATA_HOME/bothy/layers. opts are used for every extraction.
func OpenCache(root string, opts UnpackOptions) (*Cache, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open layer cache %s: %w", root, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, locksDir), 0o700); err != nil {
		return nil, fmt.Errorf("open layer cache %s: %w", root, err)
	}
	return &Cache{root: abs, opts: opts}, nil
}

// OpenSharedCache opens (creating it if needed) the layers of a shared
// image store at root: as OpenCache, but every directory is 0755 and each
// extracted layer is made readable by every user (directories a+rx,
// regular files a+r, and a+x where anyone may execute them), with no
// set-user-ID or set-group-ID bit, so that any user's sandbox can use it
// as an overlay lower directory in place. The store is readable by every
// user anyway: this shows nothing the store did not. Whoever prepares a
// shared store's layers must own it (the lock files are theirs).
func OpenSharedCache(root string, opts UnpackOptions) (*Cache, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open layer cache %s: %w", root, err)
	}
	for _, d := range []string{abs, filepath.Join(abs, locksDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("open layer cache %s: %w", root, err)
		}
	}
	opts.KeepSetuid = false
	return &Cache{root: abs, opts: opts, shared: true}, nil
}

// LayerDir is where the layer with diff ID d is (or would be) in a cache
// rooted at root: root/<algorithm>/<encoded>.
func LayerDir(root string, d digest.Digest) (string, error) {
	if err := d.Validate(); err != nil {
		return "", err
	}
	return filepath.Join(root, d.Algorithm().String(), d.Encoded()), nil
}

// Root returns the absolute directory of the cache.
func (c *Cache) Root() string { return c.root }

func (c *Cache) layerDir(d digest.Digest) (string, error) {
	if err := d.Validate(); err != nil {
		return "", err
	}
	return filepath.Join(c.root, d.Algorithm().String(), d.Encoded()), nil
}

// IsDir reports whether p is a directory, not following a symbolic link.
func IsDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// Get returns the directory of the layer with the given diff ID, extracting
// it first if it is not in the cache. open returns the layer blob,
// compressed or not ([Decompress] sniffs it); it is called only when the
// layer must be extracted. The uncompressed stream must hash to diffID,
// otherwise Get fails with [ErrDigestMismatch] and leaves nothing behind.
func (c *Cache) Get(ctx context.Context, diffID digest.Digest, open func() (io.ReadCloser, error)) (string, error) {
	dir, err := c.layerDir(diffID)
	if err != nil {
		return "", fmt.Errorf("unpack layer %q: %w", diffID, err)
	}
	if IsDir(dir) {
		return dir, nil
	}
	unlock, err := c.lock(ctx, diffID, true)
	if err != nil {
		return "", fmt.Errorf("unpack layer %s: %w", diffID, err)
	}
	defer unlock()
	if IsDir(dir) {
		return dir, nil // extracted while we waited
	}
	if err := c.extract(ctx, diffID, open, dir); err != nil {
		return "", fmt.Errorf("unpack layer %s: %w", diffID, err)
	}
	return dir, nil
}

func (c *Cache) tmpDir(d digest.Digest) (string, error) {
	return os.MkdirTemp(c.root, tmpPrefix+d.Algorithm().String()+"-"+d.Encoded()+"-")
}

func (c *Cache) extract(ctx context.Context, d digest.Digest, open func() (io.ReadCloser, error), dir string) (err error) {
	tmp, err := c.tmpDir(d)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if rerr := removeTree(tmp); rerr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, rerr)
			}
		}
	}()
	blob, err := open()
	if err != nil {
		return fmt.Errorf("open blob: %w", err)
	}
	defer blob.Close()
	zr, err := Decompress(blob)
	if err != nil {
		return err
	}
	defer zr.Close()
	h := d.Algorithm().Hash()
	tr := io.TeeReader(zr, h)
	uerr := Unpack(ctx, tr, tmp, c.opts)
	if uerr != nil && ctx.Err() != nil {
		return uerr
	}
	// Hash the whole stream, past the end of the tar archive; and when the
	// unpack failed, tell a corrupt or wrong blob from a bad layer.
	_, cerr := io.Copy(io.Discard, tr)
	if got := digest.NewDigest(d.Algorithm(), h); cerr == nil && got != d {
		return fmt.Errorf("%w: content has diff ID %s", ErrDigestMismatch, got)
	}
	if uerr != nil {
		return uerr
	}
	if cerr != nil {
		return fmt.Errorf("read layer: %w", cerr)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	parentMode := os.FileMode(0o700)
	if c.shared {
		if err := shareTree(tmp); err != nil {
			return err
		}
		parentMode = 0o755
	}
	if err := syncfs(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), parentMode); err != nil {
		return err
	}
	// Onto an existing layer, rename(2) fails with ENOTEMPTY (or replaces
	// an identical empty layer).
	if err := unix.Rename(tmp, dir); err != nil {
		if IsDir(dir) { // another writer that did not take the lock
			return removeTree(tmp)
		}
		return &os.LinkError{Op: "rename", Old: tmp, New: dir, Err: err}
	}
	return nil
}

// syncfs flushes the filesystem holding p, so that a crash cannot leave a
// renamed layer with empty files.
func syncfs(p string) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return &os.PathError{Op: "syncfs", Path: p, Err: err}
	}
	return nil
}

// lock takes the lock of layer d. With wait, it polls until the lock is
// free or ctx is done; without, it fails with errLocked.
func (c *Cache) lock(ctx context.Context, d digest.Digest, wait bool) (unlock func(), err error) {
	return lockFile(ctx, filepath.Join(c.root, locksDir, d.Algorithm().String()+"-"+d.Encoded()+".lock"), wait)
}

// LockFile takes an exclusive lock (flock) on the file at p, made if
// missing (never through a symlink), polling until it is free or ctx is
// done. A holder killed releases it. unlock releases it; the file stays.
func LockFile(ctx context.Context, p string) (unlock func(), err error) {
	return lockFile(ctx, p, true)
}

func lockFile(ctx context.Context, p string, wait bool) (unlock func(), err error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	delay := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		if !wait {
			f.Close()
			return nil, errLocked
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// Remove deletes the layer with the given diff ID from the cache; removing
// a missing layer is not an error. The layer must not be a lower directory
// of a mounted overlay. Remove waits for an extraction of the same layer.
func (c *Cache) Remove(ctx context.Context, diffID digest.Digest) error {
	dir, err := c.layerDir(diffID)
	if err != nil {
		return fmt.Errorf("remove layer %q: %w", diffID, err)
	}
	unlock, err := c.lock(ctx, diffID, true)
	if err != nil {
		return fmt.Errorf("remove layer %s: %w", diffID, err)
	}
	defer unlock()
	if !IsDir(dir) {
		return nil
	}
	// Move it out of sight first (rename replaces the empty temporary
	// directory), so that no half-removed layer is ever served.
	tmp, err := c.tmpDir(diffID)
	if err != nil {
		return fmt.Errorf("remove layer %s: %w", diffID, err)
	}
	if err := unix.Rename(dir, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("remove layer %s: rename %s: %w", diffID, dir, err)
	}
	if err := removeTree(tmp); err != nil {
		return fmt.Errorf("remove layer %s: %w", diffID, err)
	}
	return nil
}

// PrunedLayer is a layer Prune removed, and the disk space it took.
type PrunedLayer struct {
	DiffID digest.Digest
	Bytes  int64
}

// Prune removes every layer for which keep is false, each under its lock
// (a layer being extracted, or removed by another process, is passed by):
// moved out of sight first, as Remove does, then removed by remove (nil:
// as Remove does; a cache extracted in a user namespace needs one that
// enters it). The caller makes sure no overlay that is mounted, or about
// to be, uses a layer keep lets go (package sandbox holds the image
// store). It returns what it removed, with the bytes each took.
func (c *Cache) Prune(ctx context.Context, keep func(digest.Digest) bool, remove func(ctx context.Context, dir string) error) ([]PrunedLayer, error) {
	if remove == nil {
		remove = func(_ context.Context, dir string) error { return removeTree(dir) }
	}
	layers, err := c.List()
	if err != nil {
		return nil, err
	}
	var out []PrunedLayer
	for _, d := range layers {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if keep(d) {
			continue
		}
		size, err := c.pruneOne(ctx, d, remove)
		if errors.Is(err, errLocked) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("remove layer %s: %w", d, err)
		}
		if size >= 0 {
			out = append(out, PrunedLayer{DiffID: d, Bytes: size})
		}
	}
	return out, nil
}

// pruneOne removes layer d unless its lock is held; -1: it was gone.
func (c *Cache) pruneOne(ctx context.Context, d digest.Digest, remove func(context.Context, string) error) (int64, error) {
	dir, err := c.layerDir(d)
	if err != nil {
		return 0, err
	}
	unlock, err := c.lock(ctx, d, false)
	if err != nil {
		return 0, err
	}
	defer unlock()
	if !IsDir(dir) {
		return -1, nil
	}
	size := DiskUsage(dir)
	tmp, err := c.tmpDir(d)
	if err != nil {
		return 0, err
	}
	if err := unix.Rename(dir, tmp); err != nil {
		os.Remove(tmp)
		return 0, &os.LinkError{Op: "rename", Old: dir, New: tmp, Err: err}
	}
	// Out of sight: a removal cut short leaves a temporary directory,
	// which Clean removes.
	if err := remove(ctx, tmp); err != nil {
		return 0, err
	}
	return size, nil
}

// DiskUsage is the disk space the tree at dir takes (allocated blocks, each
// inode once). It walks by descriptor, each directory opened from its
// parent's with O_NOFOLLOW and each entry stat'ed with AT_SYMLINK_NOFOLLOW,
// so that it never leaves the tree, even one a sandbox writes to while it
// is walked (an upper directory, a volume); what cannot be read (a
// directory of a subordinate user's) counts as nothing.
func DiskUsage(dir string) int64 {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	seen := map[[2]uint64]bool{}
	var st unix.Stat_t
	var total int64
	if unix.Fstat(fd, &st) == nil {
		seen[[2]uint64{uint64(st.Dev), st.Ino}] = true
		total = st.Blocks * 512
	}
	return total + usageAt(fd, seen)
}

// usageAt is DiskUsage of what directory fd holds; it closes fd.
func usageAt(fd int, seen map[[2]uint64]bool) int64 {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	var total int64
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		k := [2]uint64{uint64(st.Dev), st.Ino}
		if seen[k] {
			continue
		}
		seen[k] = true
		total += st.Blocks * 512
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if cfd, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
				total += usageAt(cfd, seen)
			}
		}
	}
	return total
}

// List returns the diff IDs of the layers in the cache, sorted.
func (c *Cache) List() ([]digest.Digest, error) {
	entries, err := os.ReadDir(c.root)
	if err != nil {
		return nil, fmt.Errorf("list layers: %w", err)
	}
	var ds []digest.Digest
	for _, e := range entries {
		alg := digest.Algorithm(e.Name())
		if !e.IsDir() || !alg.Available() {
			continue
		}
		layers, err := os.ReadDir(filepath.Join(c.root, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("list layers: %w", err)
		}
		for _, l := range layers {
			d := digest.NewDigestFromEncoded(alg, l.Name())
			if l.IsDir() && d.Validate() == nil {
				ds = append(ds, d)
			}
		}
	}
	slices.Sort(ds)
	return ds, nil
}

// Clean removes the temporary directories left by extractions and removals
// that did not finish (a killed process). Directories of operations still
// running, in this or another process, are left alone.
func (c *Cache) Clean() error {
	entries, err := os.ReadDir(c.root)
	if err != nil {
		return fmt.Errorf("clean layer cache: %w", err)
	}
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tmpPrefix)
		if !ok {
			continue
		}
		p := filepath.Join(c.root, e.Name())
		parts := strings.SplitN(rest, "-", 3)
		if len(parts) == 3 {
			d := digest.NewDigestFromEncoded(digest.Algorithm(parts[0]), parts[1])
			if d.Validate() == nil {
				unlock, err := c.lock(context.Background(), d, false)
				if errors.Is(err, errLocked) {
					continue // in use
				}
				if err != nil {
					errs = append(errs, err)
					continue
				}
				err = removeTree(p)
				unlock()
				if err != nil {
					errs = append(errs, err)
				}
				continue
			}
		}
		if err := removeTree(p); err != nil { // not one of ours: no lock to honour
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean layer cache: %w", err)
	}
	return nil
}

// shareTree makes the freshly extracted tree at root (this process's own,
// not yet renamed into place) readable by every user: directories gain
// a+rx, regular files a+r and, when anyone may execute them, a+x; set-user-ID
// and set-group-ID bits go. Symbolic links and whiteouts are left as they
// are (nothing is followed: WalkDir does not, and only directories and
// regular files are changed).
func shareTree(root string) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode()
		perm := mode.Perm() | 0o444
		if d.IsDir() || mode.Perm()&0o111 != 0 {
			perm |= 0o111
		}
		keep := mode & os.ModeSticky
		if mode.Perm() == perm && mode&(os.ModeSetuid|os.ModeSetgid) == 0 {
			return nil
		}
		if err := os.Chmod(p, perm|keep); err != nil {
			return fmt.Errorf("make %s readable: %w", p, err)
		}
		return nil
	})
}
