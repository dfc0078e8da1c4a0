package launcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// sharedLowers are the layers of shared image stores a launch uses in
// place, each held open (O_PATH) and named to the overlay as
// /proc/self/fd/N: what is mounted is the directory opened, whatever the
// store's owner renames meanwhile.
type sharedLowers struct {
	fds []int
	// foreign: a layer belongs to an id the sandbox's user namespace does
	// not map (it shows as the overflow id): another user's store.
	foreign bool
}

// open opens store/<algorithm>/<encoded diff ID> below store without
// following a symbolic link (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): a store
// that another user writes could otherwise point bothy at a directory of
// the caller's (their home), which the sandbox would then see. store
// itself is the caller's configuration (--image-store) and is followed.
func (s *sharedLowers) open(store string, d digest.Digest) (string, error) {
	if err := d.Validate(); err != nil {
		return "", err
	}
	root, err := unix.Open(store, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open shared store layers", Path: store, Err: err}
	}
	defer unix.Close(root)
	rel := d.Algorithm().String() + "/" + d.Encoded()
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return "", &os.PathError{Op: "open shared layer (no symbolic link followed)", Path: filepath.Join(store, rel), Err: err}
	}
	s.fds = append(s.fds, fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", &os.PathError{Op: "stat shared layer", Path: filepath.Join(store, rel), Err: err}
	}
	if st.Uid == overflowID("uid") || st.Gid == overflowID("gid") {
		s.foreign = true
	}
	return "/proc/self/fd/" + strconv.Itoa(fd), nil
}

func (s *sharedLowers) close() {
	for _, fd := range s.fds {
		unix.Close(fd)
	}
}

// removeStale removes what a killed maker left in dir, the entries whose
// names match pattern, each through an os.Root on dir: no symlink is
// followed out of it, not even one put in place of dir's entries.
func removeStale(dir, pattern string) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return
	}
	defer root.Close()
	stale, _ := fs.Glob(root.FS(), pattern)
	for _, name := range stale {
		_ = root.RemoveAll(name)
	}
}

// overflowID is the id an unmapped owner shows as in a user namespace
// (/proc/sys/kernel/overflowuid or overflowgid, 65534 by default).
func overflowID(kind string) uint32 {
	b, err := os.ReadFile("/proc/sys/kernel/overflow" + kind)
	if err != nil {
		return 65534
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 65534
	}
	return uint32(n)
}

// directoryShim returns a directory tree, made once per layer stack in
// cacheRoot/shims and reused, holding an empty copy (same modes, owned by
// the sandbox's root) of every directory of the merged shared layers
// (lowers, top-most first): the top-most lower layer of a sandbox whose
// user namespace does not map the store's owner. Overlayfs copies a
// directory up, to create an entry in it, with its owner, and refuses
// (EOVERFLOW) an owner the namespace does not map: with the shim, every
// directory is copied up from the shim and files can be created anywhere.
// A file of the store itself keeps its unmapped owner (it shows as the
// overflow id, nobody) and cannot be modified in place (docs/slurm.md).
//
// One launch makes it, holding NAME.lock, while the others that need it
// wait for it: the first tasks of a job array, started together, would
// otherwise each make it (a walk of every directory of the image) and all
// but one throw theirs away. What a launch killed while making it left
// (tmp-NAME-*) is removed by the next one to hold the lock.
func directoryShim(ctx context.Context, cacheRoot string, layers []ipc.Layer, lowers []string) (string, error) {
	h := sha256.New()
	h.Write([]byte("bothy directory shim v1\n"))
	for _, l := range layers {
		h.Write([]byte(l.DiffID + "\n"))
	}
	shims := filepath.Join(cacheRoot, "shims")
	name := hex.EncodeToString(h.Sum(nil))
	dst := filepath.Join(shims, name)
	if rootfs.IsDir(dst) {
		return dst, nil
	}
	if err := os.MkdirAll(shims, 0o700); err != nil {
		return "", fmt.Errorf("make directory shim: %w", err)
	}
	unlock, err := rootfs.LockFile(ctx, dst+".lock")
	if err != nil {
		return "", fmt.Errorf("make directory shim: %w", err)
	}
	defer unlock()
	if rootfs.IsDir(dst) { // made by the launch this one waited for
		return dst, nil
	}
	removeStale(shims, "tmp-"+name+"-*")
	tmp, err := os.MkdirTemp(shims, "tmp-"+name+"-")
	if err != nil {
		return "", fmt.Errorf("make directory shim: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := lowers[0]
	if len(lowers) > 1 {
		// The merged view (whiteouts and opaque directories applied):
		// a read-only overlay of the lower layers alone, in the
		// launcher's own mount namespace, unmounted once walked.
		src = filepath.Join(tmp, "merged")
		if err := os.Mkdir(src, 0o700); err != nil {
			return "", fmt.Errorf("make directory shim: %w", err)
		}
		data, dir, err := rootfs.OverlayOptionsIn(lowers, "", "", true)
		if err != nil {
			return "", fmt.Errorf("make directory shim: %w", err)
		}
		if err := rootfs.MountIn(dir, src, data); err != nil {
			return "", fmt.Errorf("make directory shim: %w", err)
		}
		defer unix.Unmount(src, unix.MNT_DETACH)
	}
	tree := filepath.Join(tmp, "tree")
	err = filepath.WalkDir(src+"/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(tree, rel)
		if err := os.Mkdir(out, 0o700); err != nil {
			return err
		}
		return os.Chmod(out, fi.Mode()&(fs.ModePerm|fs.ModeSticky))
	})
	if err != nil {
		return "", fmt.Errorf("make directory shim: %w", err)
	}
	if err := os.Rename(tree, dst); err != nil {
		if rootfs.IsDir(dst) {
			return dst, nil // made meanwhile by a launch that took no lock (an older bothy's)
		}
		return "", fmt.Errorf("make directory shim: %w", err)
	}
	return dst, nil
}
