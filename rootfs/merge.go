package rootfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnmergeable is returned by MergeLayers for a layer it cannot merge
// without changing what the stack shows: a directory renamed by overlay
// (redirect) or a metadata-only copy-up (metacopy), whose meaning depends on
// the layers below it. bothy's mounts leave both off.
var ErrUnmergeable = errors.New("overlay layer cannot be merged")

// MergeOptions configures MergeLayers.
type MergeOptions struct {
	// UserXattr: the layers belong to an overlay mounted with userxattr
	// (rootless), whose opaque directories are marked user.overlay.opaque;
	// otherwise trusted.overlay.opaque.
	UserXattr bool
}

// MergeStats counts what MergeLayers made.
type MergeStats struct {
	Layers    int `json:"layers"`
	Dirs      int `json:"dirs"`      // directories made
	Links     int `json:"links"`     // files, symlinks, fifos… hard-linked
	Whiteouts int `json:"whiteouts"` // whiteouts hard-linked
	Opaque    int `json:"opaque"`    // directories marked opaque
}

// MergeLayers merges overlay lower layers (bottom first) into dst, an
// existing empty directory on the same filesystem, so that dst as one lower
// layer shows what the stack of them shows: each layer is applied, in
// order, onto what the ones below made.
//
//   - A whiteout replaces whatever is at its path with the whiteout (so an
//     image layer below dst stays hidden there).
//   - An opaque directory empties the directory at its path and marks it
//     opaque; a directory made where a non-directory (or a whiteout) was is
//     opaque too, as nothing below it showed through it in the stack.
//   - A directory is made where none was; it gets the owner, mode,
//     extended attributes and times of the top-most layer's (overlay shows
//     those), except overlay's own attributes: opaque is set as above;
//     origin, impure, nlink and uuid describe an upper directory's copy-ups
//     and are left out (a lower layer's are only read with index or
//     nfs_export, which bothy leaves off), but for an empty origin
//     (overlay's "copied up, origin unknown") on each directory that holds
//     a whiteout: overlay leaves whiteouts out of a directory's listing
//     only when the directory is merged with one below or has an origin,
//     and one that only the merged layer has would list them.
//   - Anything else (regular files, symlinks, whiteouts, fifos, sockets,
//     devices) is hard-linked from its layer, replacing what was there:
//     no data is copied, and owner, mode, attributes (capabilities) and
//     times are the layer's own inode's. Layers must not change after.
//
// A layer with an overlay redirect or metacopy attribute is refused
// (ErrUnmergeable); dst is left as it is then, for the caller to remove.
//
// The layers are what sandboxes wrote: every lookup is of one name in a
// directory held open, without following a symlink (see openDirAt), and
// every change in dst is made relative to a directory of dst held open, so
// a symlink anywhere in a layer is an entry to link, never a way out.
func MergeLayers(ctx context.Context, dst string, layers []string, opts MergeOptions) (MergeStats, error) {
	m := &merger{ctx: ctx, xattrPrefix: "trusted.", meta: map[string]*layerDir{}}
	if opts.UserXattr {
		m.xattrPrefix = "user."
	}
	m.overlay = []string{m.xattrPrefix + "overlay."}
	out, err := openDir(dst)
	if err != nil {
		return m.stats, fmt.Errorf("merge layers into %s: %w", dst, err)
	}
	defer out.Close()
	for _, l := range layers {
		if err := m.layer(l, out); err != nil {
			return m.stats, fmt.Errorf("merge layer %s: %w", l, err)
		}
		m.stats.Layers++
	}
	if err := m.finish(out, "", nil); err != nil {
		return m.stats, fmt.Errorf("merge layers into %s: %w", dst, err)
	}
	return m.stats, nil
}

type merger struct {
	ctx         context.Context
	xattrPrefix string // of the opaque marks made
	// overlay is the namespace overlay's attributes are read in: the
	// other is the files' own (a root sandbox may set user.overlay.*
	// on its files; overlay in trusted mode reads nothing there).
	overlay []string
	// meta holds, by path in dst, the attributes of the top-most layer's
	// directory there, set once every layer is merged (finish).
	meta  map[string]*layerDir
	stats MergeStats
}

// layerDir is what a merged directory takes from its top-most layer's.
type layerDir struct {
	uid, gid, mode uint32
	atime, mtime   unix.Timespec
	xattrs         map[string]string
}

// openDir opens a directory the caller names (a layer's root, dst), not
// following a symlink at its last component.
func openDir(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

func (m *merger) layer(l string, out *os.File) error {
	in, err := openDir(l)
	if err != nil {
		return err
	}
	defer in.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(in.Fd()), &st); err != nil {
		return err
	}
	xattrs, err := readXattrs(attrPath(in, "."))
	if err != nil {
		return fmt.Errorf("read attributes of /: %w", err)
	}
	m.meta[""] = m.newLayerDir(&st, xattrs)
	return m.dir(in, out, "")
}

// dir merges the entries of the open layer directory in into the open
// directory out of dst (at path rel).
func (m *merger) dir(in, out *os.File, rel string) error {
	if err := m.ctx.Err(); err != nil {
		return err
	}
	names, err := in.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read %s: %w", "/"+rel, err)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := m.entry(in, out, name, path.Join(rel, name)); err != nil {
			return err
		}
	}
	return nil
}

func (m *merger) entry(in, out *os.File, name, rel string) error {
	st, attrs, xattrs, err := readEntry(in, name, "/"+rel, m.overlay, ErrUnmergeable)
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return m.link(in, out, name, rel, st, m.isWhiteout(attrs, st))
	}
	opaque, _ := overlayXattrIn(xattrs, m.overlay, "opaque")
	mark := opaque
	var have unix.Stat_t
	err = unix.Fstatat(int(out.Fd()), name, &have, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return fmt.Errorf("stat /%s in the merge: %w", rel, err)
	case have.Mode&unix.S_IFMT != unix.S_IFDIR:
		// Nothing below showed through this directory in the stack.
		if err := removeAllAt(int(out.Fd()), name); err != nil {
			return fmt.Errorf("replace /%s: %w", rel, err)
		}
		mark, err = "y", unix.ENOENT
	}
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdirat(int(out.Fd()), name, 0o700); err != nil {
			return fmt.Errorf("mkdir /%s: %w", rel, err)
		}
		m.stats.Dirs++
	}
	sub, err := openDirAt(out, name)
	if err != nil {
		return fmt.Errorf("open /%s in the merge: %w", rel, err)
	}
	defer sub.Close()
	if opaque == "y" {
		if err := emptyDir(sub); err != nil {
			return fmt.Errorf("empty opaque /%s: %w", rel, err)
		}
	}
	if err := m.markOpaque(sub, mark); err != nil {
		return fmt.Errorf("mark /%s opaque: %w", rel, err)
	}
	src, err := openDirAt(in, name)
	if err != nil {
		return fmt.Errorf("open /%s: %w", rel, err)
	}
	defer src.Close()
	m.meta[rel] = m.newLayerDir(st, xattrs)
	return m.dir(src, sub, rel)
}

// markOpaque marks the directory of dst open as dir with overlay's opaque
// value mark: "y" (nothing below shows through), "x" (it holds xattr
// whiteouts, which overlay looks for only then) unless it is already "y",
// or nothing for "".
func (m *merger) markOpaque(dir *os.File, mark string) error {
	if mark != "y" && mark != "x" {
		return nil
	}
	attr := m.xattrPrefix + "overlay.opaque"
	if mark == "x" {
		if v, err := lgetxattr(attrPath(dir, "."), attr); err == nil && v == "y" {
			return nil
		}
	} else {
		m.stats.Opaque++
	}
	return unix.Fsetxattr(int(dir.Fd()), attr, []byte(mark), 0)
}

// link hard-links the non-directory name of the layer directory in into
// out, replacing what is there.
func (m *merger) link(in, out *os.File, name, rel string, st *unix.Stat_t, whiteout bool) error {
	var have unix.Stat_t
	switch err := unix.Fstatat(int(out.Fd()), name, &have, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && have.Dev == st.Dev && have.Ino == st.Ino:
		return nil
	case err == nil:
		if err := removeAllAt(int(out.Fd()), name); err != nil {
			return fmt.Errorf("replace /%s: %w", rel, err)
		}
	case !errors.Is(err, unix.ENOENT):
		return fmt.Errorf("stat /%s in the merge: %w", rel, err)
	}
	// Without AT_SYMLINK_FOLLOW a symlink is linked, not its target.
	if err := unix.Linkat(int(in.Fd()), name, int(out.Fd()), name, 0); err != nil {
		switch {
		case errors.Is(err, unix.EXDEV):
			return fmt.Errorf("link /%s: the layers and the merge are not on one filesystem: %w", rel, err)
		case errors.Is(err, unix.EPERM):
			return fmt.Errorf("link /%s (owned by %d:%d; fs.protected_hardlinks lets only its owner, or a holder of CAP_FOWNER over it, link it): %w", rel, st.Uid, st.Gid, err)
		}
		return fmt.Errorf("link /%s: %w", rel, err)
	}
	if whiteout {
		m.stats.Whiteouts++
	} else {
		m.stats.Links++
	}
	return nil
}

// emptyDir removes everything in the open directory dir of dst.
func emptyDir(dir *os.File) error {
	if _, err := dir.Seek(0, 0); err != nil {
		return err
	}
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeAllAt(int(dir.Fd()), n); err != nil {
			return err
		}
	}
	return nil
}

// newLayerDir is what a merged directory takes from the layer directory
// of stat st and attributes xattrs: all but overlay's own.
func (m *merger) newLayerDir(st *unix.Stat_t, xattrs map[string]string) *layerDir {
	d := &layerDir{uid: st.Uid, gid: st.Gid, mode: st.Mode & 0o7777, atime: st.Atim, mtime: st.Mtim}
	for k, v := range xattrs {
		if !strings.HasPrefix(k, m.overlay[0]) {
			if d.xattrs == nil {
				d.xattrs = map[string]string{}
			}
			d.xattrs[k] = v
		}
	}
	return d
}

// isWhiteout is isOverlayWhiteout in the merge's namespace: a character
// device 0:0, or an empty file with its overlay.whiteout attribute.
func (m *merger) isWhiteout(attrs string, st *unix.Stat_t) bool {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		return st.Rdev == 0
	case unix.S_IFREG:
		_, err := lgetxattr(attrs, m.overlay[0]+"whiteout")
		return st.Size == 0 && err == nil
	}
	return false
}

// finish gives every directory of dst below the open directory dir (at
// path rel, opened from parent, nil for dst itself) the attributes of the
// top-most layer's, deepest first: its owner, mode and attributes, then its
// times, which nothing changes after.
func (m *merger) finish(dir *os.File, rel string, parent *os.File) error {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read /%s in the merge: %w", rel, err)
	}
	whiteouts := false
	for _, name := range names {
		st, err := lstatAt(dir, name)
		if err != nil {
			return fmt.Errorf("stat /%s in the merge: %w", path.Join(rel, name), err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			whiteouts = whiteouts || m.isWhiteout(attrPath(dir, name), st)
			continue
		}
		sub, err := openDirAt(dir, name)
		if err != nil {
			return fmt.Errorf("open /%s in the merge: %w", path.Join(rel, name), err)
		}
		err = m.finish(sub, path.Join(rel, name), dir)
		sub.Close()
		if err != nil {
			return err
		}
	}
	d := m.meta[rel]
	if d == nil {
		return fmt.Errorf("/%s in the merge: no layer made it", rel)
	}
	fd := int(dir.Fd())
	if err := unix.Fchown(fd, int(d.uid), int(d.gid)); err != nil {
		return fmt.Errorf("chown /%s to %d:%d: %w", rel, d.uid, d.gid, err)
	}
	if err := unix.Fchmod(fd, d.mode); err != nil {
		return fmt.Errorf("chmod /%s: %w", rel, err)
	}
	for k, v := range d.xattrs {
		if err := unix.Fsetxattr(fd, k, []byte(v), 0); err != nil && k != "security.selinux" {
			return fmt.Errorf("set attribute %s of /%s: %w", k, rel, err)
		}
	}
	if whiteouts {
		// Overlay leaves out the whiteouts of a directory's listing
		// only when it may hold some: when it is merged with a layer's
		// below, or has an origin. One the layers below the merged one
		// lack would list them: an empty origin is overlay's own "copied
		// up, origin unknown", which says it may.
		if err := unix.Fsetxattr(fd, m.xattrPrefix+"overlay.origin", nil, 0); err != nil {
			return fmt.Errorf("mark /%s as holding whiteouts: %w", rel, err)
		}
	}
	ts := []unix.Timespec{d.atime, d.mtime}
	if parent == nil {
		err = unix.UtimesNanoAt(unix.AT_FDCWD, dir.Name(), ts, unix.AT_SYMLINK_NOFOLLOW)
	} else {
		err = unix.UtimesNanoAt(int(parent.Fd()), path.Base(rel), ts, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return fmt.Errorf("set times of /%s: %w", rel, err)
	}
	return nil
}
