package rootfs

import (
	"archive/tar"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnsupportedUpper is returned by WriteDiff for an overlay upper directory
// that an OCI layer cannot express: a renamed directory (redirect_dir), a
// metadata-only copy-up (metacopy) — bothy's mounts leave both off — or a
// file whose name starts with ".wh.", which a layer reads as a whiteout.
var ErrUnsupportedUpper = errors.New("overlay upper directory cannot be expressed as a layer")

// DiffOptions configures WriteDiff.
type DiffOptions struct {
	// Epoch clamps modification times: any later time becomes Epoch, so
	// that the same changes give the same bytes whenever they were made.
	Epoch time.Time
	// Exclude lists paths (slash-separated, relative to the root, e.g.
	// ".bothy" or "etc/hosts") left out of the layer with everything
	// below them.
	Exclude []string
	// Live: the directory may change while it is read (a running sandbox
	// not frozen, docker commit --pause=false). A regular file whose size
	// changes is written with the size it had when listed, cut short or
	// padded with zeros, instead of failing the layer.
	Live bool
}

// WriteDiff writes the overlay upper directory dir as an uncompressed OCI
// layer to w, reproducibly: entries in byte order of their paths, parents
// first; modification times clamped to opts.Epoch; owners as numeric ids, as
// stat(2) reports them to the caller (run it inside the sandbox's user
// namespace to get the ids the sandbox saw); no user or group names, access
// or change times. Overlay whiteouts (0:0 character devices, or an
// overlay.whiteout attribute) become ".wh.<name>" entries, and opaque
// directories (overlay.opaque = "y", trusted or user namespace) get a
// ".wh..wh..opq" entry. Extended attributes other than overlay's own and
// security.selinux are kept. Sockets are left out.
//
// The sandbox wrote dir: it is walked one name at a time in directories held
// open, without following a symlink, and only regular files are opened (see
// openRegularAt), so nothing outside dir is read, whatever it holds.
func WriteDiff(w io.Writer, dir string, opts DiffOptions) error {
	tw := tar.NewWriter(w)
	d := &differ{tw: tw, epoch: opts.Epoch, live: opts.Live, links: map[[2]uint64]string{}, exclude: map[string]bool{}}
	for _, e := range opts.Exclude {
		d.exclude[strings.Trim(path.Clean("/"+e), "/")] = true
	}
	top, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("read upper directory: %w", err)
	}
	defer top.Close()
	if err := d.walk(top, ""); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write layer: %w", err)
	}
	return nil
}

type differ struct {
	tw      *tar.Writer
	epoch   time.Time
	live    bool
	links   map[[2]uint64]string // (dev, inode) → first path, for hard links
	exclude map[string]bool
}

// walk writes the children of the open directory dir (layer path rel, ""
// for the root).
func (d *differ) walk(dir *os.File, rel string) error {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read upper directory %s: %w", cmp.Or(rel, "/"), err)
	}
	slices.Sort(names)
	for _, name := range names {
		p := path.Join(rel, name)
		if d.exclude[p] {
			continue
		}
		if strings.HasPrefix(name, whiteoutPrefix) {
			// In a layer the name would delete a file, not be one.
			return fmt.Errorf("%s: names starting with %q are reserved for whiteouts: %w", p, whiteoutPrefix, ErrUnsupportedUpper)
		}
		if err := d.entry(dir, name, p); err != nil {
			return err
		}
	}
	return nil
}

// entry writes the entry name of the open directory dir, at layer path rel.
func (d *differ) entry(dir *os.File, name, rel string) error {
	st, attrs, xattrs, err := readEntry(dir, name, rel, overlayXattrPrefixes, ErrUnsupportedUpper)
	if err != nil {
		return err
	}
	mode := st.Mode & unix.S_IFMT
	if isOverlayWhiteout(attrs, st.Mode, st.Rdev, st.Size) {
		dir, base := path.Split(rel)
		return d.write(&tar.Header{Typeflag: tar.TypeReg, Name: dir + whiteoutPrefix + base, Mode: 0, ModTime: d.markerTime()})
	}
	h := &tar.Header{
		Name:    rel,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: d.clamp(st.Mtim.Sec),
	}
	for k, v := range xattrs {
		if keepXattr(k) {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+k] = v
		}
	}
	switch mode {
	case unix.S_IFDIR:
		sub, err := openDirAt(dir, name)
		if err != nil {
			return fmt.Errorf("open %s: %w", rel, err)
		}
		defer sub.Close()
		h.Typeflag, h.Name = tar.TypeDir, rel+"/"
		if err := d.write(h); err != nil {
			return err
		}
		if v, ok := overlayXattr(xattrs, "opaque"); ok && v == "y" {
			if err := d.write(&tar.Header{Typeflag: tar.TypeReg, Name: rel + "/" + whiteoutOpaque, ModTime: d.markerTime()}); err != nil {
				return err
			}
		}
		return d.walk(sub, rel)
	case unix.S_IFREG:
		if st.Nlink > 1 {
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, ok := d.links[key]; ok {
				h.Typeflag, h.Linkname = tar.TypeLink, first
				return d.write(h)
			}
			d.links[key] = rel
		}
		h.Typeflag, h.Size = tar.TypeReg, st.Size
		f, err := openRegularAt(dir, name, st)
		if err != nil {
			return fmt.Errorf("open %s: %w", rel, err)
		}
		defer f.Close()
		if err := d.write(h); err != nil {
			return err
		}
		n, err := io.Copy(d.tw, io.LimitReader(f, st.Size+1))
		grew := errors.Is(err, tar.ErrWriteTooLong)
		switch {
		case err != nil && !grew:
			return fmt.Errorf("write %s: %w", rel, err)
		case grew && !d.live:
			return fmt.Errorf("write %s: size changed while reading", rel)
		case n == st.Size:
			return nil
		case !d.live:
			return fmt.Errorf("write %s: size changed while reading", rel)
		case n < st.Size:
			// Shrunk while read: zeros for the rest.
			if _, err := io.CopyN(d.tw, zeros{}, st.Size-n); err != nil {
				return fmt.Errorf("write %s: %w", rel, err)
			}
		}
		return nil
	case unix.S_IFLNK:
		target, err := readlinkAt(dir, name)
		if err != nil {
			return fmt.Errorf("read link %s: %w", rel, err)
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, target
	case unix.S_IFCHR, unix.S_IFBLK:
		h.Typeflag = tar.TypeChar
		if mode == unix.S_IFBLK {
			h.Typeflag = tar.TypeBlock
		}
		h.Devmajor, h.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
	case unix.S_IFIFO:
		h.Typeflag = tar.TypeFifo
	default:
		return nil // sockets have no place in a layer
	}
	return d.write(h)
}

func (d *differ) write(h *tar.Header) error {
	if err := d.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("write layer entry %s: %w", h.Name, err)
	}
	return nil
}

// clamp returns the modification time for a file modified at sec.
func (d *differ) clamp(sec int64) time.Time {
	t := time.Unix(sec, 0).UTC()
	if t.After(d.epoch) {
		return d.epoch.UTC().Truncate(time.Second)
	}
	return t
}

// markerTime is the modification time of whiteouts and opaque markers.
func (d *differ) markerTime() time.Time { return d.epoch.UTC().Truncate(time.Second) }

func keepXattr(k string) bool {
	if k == "security.selinux" {
		return false
	}
	for _, p := range overlayXattrPrefixes {
		if strings.HasPrefix(k, p) {
			return false
		}
	}
	return true
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
