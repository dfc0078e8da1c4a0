package rootfs

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// How overlayfs marks an upper directory, read by Changes (bothy diff) and
// WriteDiff (bothy build); Unpack writes the same marks into layers.

// overlayXattrPrefixes are the namespaces overlayfs keeps its own attributes
// in: trusted.overlay.* as root, user.overlay.* with userxattr (rootless).
var overlayXattrPrefixes = []string{"trusted.overlay.", "user.overlay."}

// isOverlayWhiteout reports whether the entry p, of type mode (S_IFMT bits),
// device rdev and size, is an overlay whiteout: a character device 0:0, or
// an empty regular file with an overlay.whiteout attribute (the xattr form
// of kernels ≥ 6.7).
func isOverlayWhiteout(p string, mode uint32, rdev uint64, size int64) bool {
	switch mode & unix.S_IFMT {
	case unix.S_IFCHR:
		return rdev == 0
	case unix.S_IFREG:
		_, ok := overlayAttr(p, "whiteout")
		return size == 0 && ok
	}
	return false
}

// readEntry reads the entry name of the open directory dir (at path rel,
// for errors) of a layer or upper directory: its stat, the path for the
// l*xattr calls on it (attrPath) and its attributes. An entry whose meaning
// depends on the layers below it, a directory overlay renamed (redirect) or
// a metadata-only copy-up (metacopy), is an error wrapping unsupported.
//
// prefixes are the namespaces overlay's attributes are read in
// (overlayXattrPrefixes, or the one of a known mount).
func readEntry(dir *os.File, name, rel string, prefixes []string, unsupported error) (st *unix.Stat_t, attrs string, xattrs map[string]string, err error) {
	if st, err = lstatAt(dir, name); err != nil {
		return nil, "", nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	attrs = attrPath(dir, name)
	if xattrs, err = readXattrs(attrs); err != nil {
		return nil, "", nil, fmt.Errorf("read attributes of %s: %w", rel, err)
	}
	for _, k := range []string{"redirect", "metacopy"} {
		if _, ok := overlayXattrIn(xattrs, prefixes, k); ok {
			return nil, "", nil, fmt.Errorf("%s has overlay attribute %q: %w", rel, k, unsupported)
		}
	}
	return st, attrs, xattrs, nil
}

// isOverlayOpaque reports a directory marked opaque ("y"; "x" only says that
// it holds xattr whiteouts).
func isOverlayOpaque(p string) bool {
	v, ok := overlayAttr(p, "opaque")
	return ok && v == "y"
}

// overlayAttr reads overlay's attribute name ("opaque", "whiteout", …) of p,
// not following a symlink, in either namespace.
func overlayAttr(p, name string) (string, bool) {
	for _, pre := range overlayXattrPrefixes {
		if v, err := lgetxattr(p, pre+name); err == nil {
			return v, true
		}
	}
	return "", false
}

// overlayXattr is overlayAttr on attributes already read (readXattrs).
func overlayXattr(xattrs map[string]string, name string) (string, bool) {
	return overlayXattrIn(xattrs, overlayXattrPrefixes, name)
}

// overlayXattrIn is overlayXattr in the namespaces prefixes.
func overlayXattrIn(xattrs map[string]string, prefixes []string, name string) (string, bool) {
	for _, p := range prefixes {
		if v, ok := xattrs[p+name]; ok {
			return v, true
		}
	}
	return "", false
}

// readXattrs returns a file's extended attributes (without following a
// symbolic link). Attributes the caller may not read are left out.
func readXattrs(p string) (map[string]string, error) {
	size, err := unix.Llistxattr(p, nil)
	if err != nil || size == 0 {
		if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, nil
		}
		return nil, err
	}
	buf := make([]byte, size)
	if size, err = unix.Llistxattr(p, buf); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, k := range strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00") {
		if k == "" {
			continue
		}
		v, err := lgetxattr(p, k)
		if err != nil {
			if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOTSUP) {
				continue
			}
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

func lgetxattr(p, k string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(p, k, buf)
		if errors.Is(err, unix.ERANGE) {
			size, err := unix.Lgetxattr(p, k, nil)
			if err != nil {
				return "", err
			}
			buf = make([]byte, size+1)
			continue
		}
		if err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
}
