package rootfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// ErrUnsafePath is returned for a layer entry, or a hardlink target, whose
// name climbs out of the layer with "..".
var ErrUnsafePath = errors.New("path escapes the layer")

// OCI whiteout names (image-spec layer.md).
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// mountPoints are the directories a runtime mounts over, parents first. An
// image cannot put anything but a directory there: Unpack replaces any other
// entry at these paths with an empty directory.
var mountPoints = []string{"proc", "sys", "dev", "dev/pts", "dev/shm", "dev/mqueue"}

// A Note tells about an entry Unpack changed or left out rather than failing
// the layer: a device node skipped in rootless mode, a mount point
// neutralised, an extended attribute the filesystem refused.
type Note struct {
	Path   string // cleaned path inside the layer, "" for its root
	Reason string
}

func (n Note) String() string { return "/" + n.Path + ": " + n.Reason }

// UnpackOptions controls [Unpack] and the extractions done by a [Cache].
type UnpackOptions struct {
	// Rootless prepares the layer for an overlay mounted from inside a user
	// namespace, with the userxattr option (see [OverlayOptions]): opaque
	// directories get user.overlay.opaque instead of trusted.overlay.opaque,
	// and character and block devices are skipped with a note (creating
	// them needs CAP_MKNOD in the initial user namespace, and an overlay
	// mounted in a user namespace is nodev anyway). Whiteouts are character
	// devices 0:0 in both modes: Linux ≥ 5.8 lets anyone create those.
	Rootless bool

	// KeepSetuid keeps set-user-ID and set-group-ID bits on non-directories
	// and restores the security.capability xattr. Without it they are
	// removed: a sandbox has no use for privilege-raising files.
	KeepSetuid bool

	// Chown maps the uid and gid of a tar header to the owner on disk. When
	// nil, nothing is chowned and every file belongs to the caller, which
	// is right for the single-id rootless mapping (caller = container root).
	// Directories Unpack creates on its own get Chown(0, 0).
	Chown func(uid, gid int) (int, int, error)

	// IgnoreChownErrors turns a mapping error or a chown failing with EPERM
	// or EINVAL into a note instead of an error.
	IgnoreChownErrors bool

	// Notify, when set, receives a Note for every entry changed or skipped.
	Notify func(Note)
}

// Unpack extracts the uncompressed layer tar stream r into the directory
// dest, which must exist and should be empty, in overlay format (see the
// package documentation for the conversions and the safety rules). The
// caller owns atomicity: extract into a temporary directory and rename it
// into place, as [Cache.Get] does. Unpack stops at the end of the tar
// archive and does not read r to EOF.
func Unpack(ctx context.Context, r io.Reader, dest string, opts UnpackOptions) error {
	return unpack(ctx, r, dest, opts, false)
}

// unpack is Unpack; walkOnly forces the user-space path resolution used
// when openat2 is unavailable (for its tests).
func unpack(ctx context.Context, r io.Reader, dest string, opts UnpackOptions, walkOnly bool) error {
	root, err := openInRoot(dest, walkOnly)
	if err != nil {
		return fmt.Errorf("unpack into %s: %w", dest, err)
	}
	defer root.close()
	u := &unpacker{opts: opts, root: root, dirs: map[string]dirMeta{}, buf: make([]byte, 128<<10)}
	root.mkdirHook = u.chownImplicit
	if err := u.run(ctx, r); err != nil {
		return fmt.Errorf("unpack into %s: %w", dest, err)
	}
	return nil
}

// IDMapChown returns an [UnpackOptions].Chown function for the container
// to host id mappings of a user namespace, as in a runtime-spec config.
// An id outside every mapping is an error.
func IDMapChown(uidMap, gidMap []specs.LinuxIDMapping) func(uid, gid int) (int, int, error) {
	return func(uid, gid int) (int, int, error) {
		hu, err := mapID(uidMap, uid)
		if err != nil {
			return 0, 0, fmt.Errorf("map uid: %w", err)
		}
		hg, err := mapID(gidMap, gid)
		if err != nil {
			return 0, 0, fmt.Errorf("map gid: %w", err)
		}
		return hu, hg, nil
	}
}

func mapID(m []specs.LinuxIDMapping, id int) (int, error) {
	for _, e := range m {
		if id >= 0 && uint64(id) >= uint64(e.ContainerID) && uint64(id)-uint64(e.ContainerID) < uint64(e.Size) {
			return int(uint64(e.HostID) + uint64(id) - uint64(e.ContainerID)), nil
		}
	}
	return 0, fmt.Errorf("id %d is not mapped", id)
}

type dirMeta struct {
	dev, ino     uint64
	mode         uint32
	atime, mtime time.Time
}

type unpacker struct {
	opts UnpackOptions
	root *inRoot
	// dirs holds the directories whose mode and times are set once the
	// whole layer is written: a read-only directory must stay writable
	// while it is filled, and adding entries changes its mtime.
	dirs map[string]dirMeta
	buf  []byte
}

func (u *unpacker) run(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		// ErrInsecurePath (GODEBUG=tarinsecurepath=0) comes with a usable
		// header: the names are checked here.
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return fmt.Errorf("read tar: %w", err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	if err := u.finishDirs(); err != nil {
		return err
	}
	return u.fixMountPoints()
}

func (u *unpacker) note(name, format string, args ...any) {
	if u.opts.Notify != nil {
		u.opts.Notify(Note{Path: name, Reason: fmt.Sprintf(format, args...)})
	}
}

// cleanName turns a tar entry name into a clean relative slash path, "" for
// the root. Absolute names are taken relative to the layer root; ".."
// components are refused.
func cleanName(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: NUL in name", ErrUnsafePath)
	}
	for c := range strings.SplitSeq(name, "/") {
		if c == ".." {
			return "", ErrUnsafePath
		}
	}
	return strings.TrimPrefix(path.Clean("/"+name), "/"), nil
}

// splitName splits a cleaned name into its parent ("" for the root) and its
// last component.
func splitName(name string) (dir, base string) {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return "", name
	}
	return name[:i], name[i+1:]
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "" {
		return u.rootEntry(hdr)
	}
	dir, base := splitName(name)
	if strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(name, dir, base)
	}
	parent, err := u.root.openDir(dir, true)
	if err != nil {
		return fmt.Errorf("open parent directory: %w", err)
	}
	defer unix.Close(parent)
	if hdr.Typeflag != tar.TypeDir {
		delete(u.dirs, name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(hdr, name, parent, base)
	case tar.TypeReg, tar.TypeGNUSparse, tar.TypeCont:
		return u.file(hdr, r, name, parent, base)
	case tar.TypeSymlink:
		if err := u.replace(parent, base); err != nil {
			return err
		}
		if err := unix.Symlinkat(hdr.Linkname, parent, base); err != nil {
			return fmt.Errorf("symlink: %w", err)
		}
		return u.finishNode(hdr, name, parent, base, false)
	case tar.TypeLink:
		return u.hardlink(hdr, name, parent, base)
	case tar.TypeChar, tar.TypeBlock:
		if u.opts.Rootless {
			u.note(name, "device node %d:%d skipped (rootless)", hdr.Devmajor, hdr.Devminor)
			return nil
		}
		typ := uint32(unix.S_IFCHR)
		if hdr.Typeflag == tar.TypeBlock {
			typ = unix.S_IFBLK
		}
		if err := u.replace(parent, base); err != nil {
			return err
		}
		dev := unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))
		if err := unix.Mknodat(parent, base, typ|0o600, int(dev)); err != nil {
			return fmt.Errorf("mknod: %w", err)
		}
		return u.finishNode(hdr, name, parent, base, true)
	case tar.TypeFifo:
		if err := u.replace(parent, base); err != nil {
			return err
		}
		if err := unix.Mknodat(parent, base, unix.S_IFIFO|0o600, 0); err != nil {
			return fmt.Errorf("mkfifo: %w", err)
		}
		return u.finishNode(hdr, name, parent, base, true)
	default:
		u.note(name, "entry of tar type %q skipped", hdr.Typeflag)
		return nil
	}
}

// replace removes whatever is at parent/base so that a new entry can take
// its place ("later wins"). The name itself is never followed.
func (u *unpacker) replace(parent int, base string) error {
	if err := removeAllAt(parent, base); err != nil {
		return fmt.Errorf("replace existing entry: %w", err)
	}
	return nil
}

func (u *unpacker) rootEntry(hdr *tar.Header) error {
	if hdr.Typeflag != tar.TypeDir {
		u.note("", "entry of type %q for the layer root skipped", hdr.Typeflag)
		return nil
	}
	if err := u.chownAt(hdr, u.root.fd, "."); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(u.root.fd, &st); err != nil {
		return err
	}
	// The root keeps its mode (it must stay accessible to rename it into
	// place); only owner and times are restored.
	u.dirs[""] = dirMeta{dev: st.Dev, ino: st.Ino, mode: 0, atime: atime(hdr), mtime: hdr.ModTime}
	return nil
}

func (u *unpacker) dir(hdr *tar.Header, name string, parent int, base string) error {
	var st unix.Stat_t
	err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := u.replace(parent, base); err != nil {
			return err
		}
		err = unix.ENOENT
	}
	if errors.Is(err, unix.ENOENT) {
		// Owner-writable until finishDirs sets the real mode.
		if err := unix.Mkdirat(parent, base, 0o700); err != nil {
			return fmt.Errorf("mkdir: %w", err)
		}
		err = unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return err
	}
	if err := u.chownAt(hdr, parent, base); err != nil {
		return err
	}
	if xs := u.xattrs(hdr); len(xs) > 0 {
		fd, err := unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		u.setXattrs(fd, name, xs)
		unix.Close(fd)
	}
	u.dirs[name] = dirMeta{
		dev: st.Dev, ino: st.Ino,
		mode:  uint32(hdr.Mode) & 0o7777,
		atime: atime(hdr), mtime: hdr.ModTime,
	}
	return nil
}

func (u *unpacker) file(hdr *tar.Header, r io.Reader, name string, parent int, base string) error {
	if err := u.replace(parent, base); err != nil {
		return err
	}
	fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	// Hide ReadFrom so that CopyBuffer uses u.buf.
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, r, u.buf); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if uid, gid, ok, err := u.owner(hdr); err != nil {
		if err := u.chownErr(name, err); err != nil {
			return err
		}
	} else if ok {
		if err := u.chownErr(name, unix.Fchown(fd, uid, gid)); err != nil {
			return err
		}
	}
	// After chown, which clears set-id bits.
	if err := unix.Fchmod(fd, u.mode(hdr)); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	u.setXattrs(fd, name, u.xattrs(hdr)) // after chown, which clears capabilities
	if err := f.Close(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return u.setTimes(hdr, parent, base)
}

// finishNode sets owner, mode (when chmod) and times of a just created
// non-regular file.
func (u *unpacker) finishNode(hdr *tar.Header, name string, parent int, base string, chmod bool) error {
	if err := u.chownAt(hdr, parent, base); err != nil {
		return err
	}
	if chmod {
		// base was just created by mknod and is not a symlink.
		if err := unix.Fchmodat(parent, base, u.mode(hdr), 0); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	return u.setTimes(hdr, parent, base)
}

func (u *unpacker) hardlink(hdr *tar.Header, name string, parent int, base string) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hardlink target %q: %w", hdr.Linkname, err)
	}
	if target == "" {
		return fmt.Errorf("hardlink to the layer root: %w", ErrUnsafePath)
	}
	if target == name {
		return nil
	}
	tdir, tbase := splitName(target)
	tparent, err := u.root.openDir(tdir, false)
	if err != nil {
		return fmt.Errorf("hardlink target %q: %w", hdr.Linkname, err)
	}
	defer unix.Close(tparent)
	var tst, st unix.Stat_t
	if err := unix.Fstatat(tparent, tbase, &tst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("hardlink target %q: %w", hdr.Linkname, err)
	}
	if unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Dev == tst.Dev && st.Ino == tst.Ino {
		return nil // already the same file
	}
	if err := u.replace(parent, base); err != nil {
		return err
	}
	// Without AT_SYMLINK_FOLLOW a link to a symlink links the symlink.
	if err := unix.Linkat(tparent, tbase, parent, base, 0); err != nil {
		return fmt.Errorf("hardlink to %q: %w", hdr.Linkname, err)
	}
	return nil
}

func (u *unpacker) xattrPrefix() string {
	if u.opts.Rootless {
		return "user."
	}
	return "trusted."
}

func (u *unpacker) whiteout(name, dir, base string) error {
	if base == whiteoutOpaque {
		fd, err := u.root.openDir(dir, true)
		if err != nil {
			return fmt.Errorf("open opaque directory: %w", err)
		}
		defer unix.Close(fd)
		dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open opaque directory: %w", err)
		}
		defer unix.Close(dfd)
		attr := u.xattrPrefix() + "overlay.opaque"
		if err := unix.Fsetxattr(dfd, attr, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark directory opaque (%s): %w", attr, err)
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		u.note(name, "aufs metadata entry skipped")
		return nil
	}
	target := base[len(whiteoutPrefix):]
	if target == "" || target == "." || target == ".." {
		u.note(name, "whiteout of an invalid name skipped")
		return nil
	}
	parent, err := u.root.openDir(dir, true)
	if err != nil {
		return fmt.Errorf("open parent directory: %w", err)
	}
	defer unix.Close(parent)
	var st unix.Stat_t
	if err := unix.Fstatat(parent, target, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		// A whiteout hides lower layers only, never an entry of its own
		// layer, and is not doubled.
		return nil
	} else if !errors.Is(err, unix.ENOENT) {
		return err
	}
	delete(u.dirs, path.Join(dir, target))
	if err := unix.Mknodat(parent, target, unix.S_IFCHR, 0); err != nil {
		return fmt.Errorf("create whiteout (character device 0:0, needs Linux ≥ 5.8 when unprivileged): %w", err)
	}
	return nil
}

func (u *unpacker) mode(hdr *tar.Header) uint32 {
	m := uint32(hdr.Mode) & 0o7777
	if !u.opts.KeepSetuid {
		m &^= unix.S_ISUID | unix.S_ISGID
	}
	return m
}

// owner returns the on-disk owner for hdr; ok is false when nothing is to
// be chowned.
func (u *unpacker) owner(hdr *tar.Header) (uid, gid int, ok bool, err error) {
	if u.opts.Chown == nil {
		return 0, 0, false, nil
	}
	uid, gid, err = u.opts.Chown(hdr.Uid, hdr.Gid)
	if err != nil {
		return 0, 0, false, fmt.Errorf("%w: %w", unix.EINVAL, err)
	}
	return uid, gid, true, nil
}

func (u *unpacker) chownAt(hdr *tar.Header, parent int, base string) error {
	uid, gid, ok, err := u.owner(hdr)
	if err == nil && ok {
		err = unix.Fchownat(parent, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	return u.chownErr(hdr.Name, err)
}

// chownImplicit gives a directory created for a missing parent the owner of
// container root.
func (u *unpacker) chownImplicit(parent int, base string) error {
	return u.chownAt(&tar.Header{Name: base}, parent, base)
}

func (u *unpacker) chownErr(name string, err error) error {
	if err == nil {
		return nil
	}
	if u.opts.IgnoreChownErrors && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL)) {
		u.note(name, "chown ignored: %v", err)
		return nil
	}
	return fmt.Errorf("chown: %w", err)
}

// xattrs returns the extended attributes of hdr that may be restored.
func (u *unpacker) xattrs(hdr *tar.Header) [][2]string {
	var xs [][2]string
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		if (strings.HasPrefix(name, "user.") && !strings.HasPrefix(name, "user.overlay.")) ||
			(name == "security.capability" && u.opts.KeepSetuid) {
			xs = append(xs, [2]string{name, v})
		}
	}
	slices.SortFunc(xs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return xs
}

func (u *unpacker) setXattrs(fd int, name string, xs [][2]string) {
	for _, x := range xs {
		if err := unix.Fsetxattr(fd, x[0], []byte(x[1]), 0); err != nil {
			u.note(name, "xattr %s not set: %v", x[0], err)
		}
	}
}

func atime(hdr *tar.Header) time.Time {
	if hdr.AccessTime.IsZero() {
		return hdr.ModTime
	}
	return hdr.AccessTime
}

func timespec(t time.Time) unix.Timespec {
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}

func (u *unpacker) setTimes(hdr *tar.Header, parent int, base string) error {
	ts := []unix.Timespec{timespec(atime(hdr)), timespec(hdr.ModTime)}
	if err := unix.UtimesNanoAt(parent, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

// finishDirs sets the mode and times of the directories of the layer,
// deepest first so that a directory without search permission is not
// closed before its children are done.
func (u *unpacker) finishDirs() error {
	names := make([]string, 0, len(u.dirs))
	for n := range u.dirs {
		names = append(names, n)
	}
	slices.Sort(names)
	slices.Reverse(names)
	for _, name := range names {
		m := u.dirs[name]
		dir, base := splitName(name)
		if name == "" {
			base = "."
		}
		parent, err := u.root.openDir(dir, false)
		if err != nil {
			// Replaced or moved out of reach by a later entry.
			u.note(name, "directory metadata not restored: %v", err)
			continue
		}
		var st unix.Stat_t
		err = unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err != nil || st.Dev != m.dev || st.Ino != m.ino {
			unix.Close(parent)
			continue // no longer the directory of the entry
		}
		if name != "" {
			// A directory (just checked, and nothing else changes the
			// tree), so chmod does not follow a symlink.
			err = unix.Fchmodat(parent, base, m.mode, 0)
		}
		if err == nil {
			ts := []unix.Timespec{timespec(m.atime), timespec(m.mtime)}
			err = unix.UtimesNanoAt(parent, base, ts, unix.AT_SYMLINK_NOFOLLOW)
		}
		unix.Close(parent)
		if err != nil {
			return fmt.Errorf("directory %q: %w", name, err)
		}
	}
	return nil
}

// fixMountPoints replaces non-directories at mountPoints by empty
// directories. Whiteouts stay: the mount point is then absent from the
// merged view and the runtime creates it.
func (u *unpacker) fixMountPoints() error {
	for _, mp := range mountPoints {
		dir, base := splitName(mp)
		if dir == "" {
			dir = "."
		}
		parent, err := unix.Openat(u.root.fd, dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // absent or not a directory (then fixed or whited out)
		}
		var st unix.Stat_t
		err = unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
		isDir := err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
		isWhiteout := err == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
		if err == nil && !isDir && !isWhiteout {
			err = u.replace(parent, base)
			if err == nil {
				err = unix.Mkdirat(parent, base, 0o755)
			}
			if err == nil {
				err = u.chownImplicit(parent, base)
			}
			if err == nil {
				u.note(mp, "non-directory replaced by an empty directory (mount point)")
			}
		} else if errors.Is(err, unix.ENOENT) {
			err = nil
		}
		unix.Close(parent)
		if err != nil {
			return fmt.Errorf("mount point /%s: %w", mp, err)
		}
	}
	return nil
}
