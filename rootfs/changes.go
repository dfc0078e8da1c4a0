package rootfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ChangeKind is how a path differs between an overlay's lower layers and its
// merged view, with docker diff's letters.
type ChangeKind byte

const (
	Added   ChangeKind = 'A'
	Changed ChangeKind = 'C'
	Deleted ChangeKind = 'D'
)

// Change is one changed path, slash-separated and absolute within the
// overlay ("/etc/passwd").
type Change struct {
	Kind ChangeKind `json:"kind"`
	Path string     `json:"path"`
}

func (c Change) String() string { return string(c.Kind) + " " + c.Path }

// MarshalText makes the kind a letter in JSON.
func (k ChangeKind) MarshalText() ([]byte, error) { return []byte{byte(k)}, nil }

// UnmarshalText reads A, C or D.
func (k *ChangeKind) UnmarshalText(b []byte) error {
	if len(b) != 1 || !strings.ContainsRune("ACD", rune(b[0])) {
		return fmt.Errorf("change kind %q: want A, C or D", b)
	}
	*k = ChangeKind(b[0])
	return nil
}

// Changes lists what the overlay upper directory upper changes in the lower
// layers lowers (top-most first), as docker diff does: A for a path the
// lowers lack, C for one they have, D for a whiteout. Directories that only
// hold changes are C. Both whiteout formats are read: character devices 0:0
// and overlay.whiteout xattrs, with opaque directories marked by
// overlay.opaque in the trusted. (root) or user. (userxattr, rootless)
// namespace. Nothing is followed out of the trees: symlinks are entries.
//
// A running sandbox can change its upper directory while it is read: the
// upper directory is walked one name at a time in directories held open,
// without following a symlink (see openDirAt), so swapping a directory for a
// symlink cannot lead the walk, or a lookup of an attribute, out of it.
func Changes(upper string, lowers []string) ([]Change, error) {
	top, err := os.Open(upper)
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", upper, err)
	}
	defer top.Close()
	var out []Change
	var walk func(dir *os.File, rel string, lowerVisible bool) error
	walk = func(dir *os.File, rel string, lowerVisible bool) error {
		names, err := dir.Readdirnames(-1)
		if err != nil {
			return fmt.Errorf("diff %s: %w", filepath.Join(upper, filepath.FromSlash(rel)), err)
		}
		slices.Sort(names)
		for _, name := range names {
			p := path.Join(rel, name)
			full := filepath.Join(upper, filepath.FromSlash(p))
			st, err := lstatAt(dir, name)
			if err != nil {
				return fmt.Errorf("diff %s: %w", full, err)
			}
			if isOverlayWhiteout(attrPath(dir, name), st.Mode, st.Rdev, st.Size) {
				if lowerVisible && lowerHas(lowers, p) {
					out = append(out, Change{Deleted, "/" + p})
				}
				continue
			}
			inLower := lowerVisible && lowerHas(lowers, p)
			kind := Added
			if inLower {
				kind = Changed
			}
			out = append(out, Change{kind, "/" + p})
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			sub, err := openDirAt(dir, name)
			if err != nil {
				return fmt.Errorf("diff %s: %w", full, err)
			}
			childVisible := inLower && lowerIsDir(lowers, p)
			if childVisible && isOverlayOpaque(attrPath(dir, name)) {
				// Everything the lowers had in it is gone, bar what
				// the upper directory holds again.
				for _, n := range lowerNames(lowers, p) {
					if !upperHas(sub, n) {
						out = append(out, Change{Deleted, "/" + path.Join(p, n)})
					}
				}
				childVisible = false
			}
			err = walk(sub, p, childVisible)
			sub.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(top, "", true); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// isWhiteout is isOverlayWhiteout for an os.Lstat result.
func isWhiteout(p string, st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && isOverlayWhiteout(p, sys.Mode, sys.Rdev, sys.Size)
}

// lowerLookup finds rel in the merged lower layers: the file info of the
// entry that shows, or nil. Each layer is walked component by component with
// lstat, so no symlink is followed, and whiteouts, opaque directories and
// non-directories hide the layers below them as the kernel's lookup does.
func lowerLookup(lowers []string, rel string) (fs.FileInfo, string) {
	parts := strings.Split(rel, "/")
	for _, l := range lowers {
		cur := l
		for i, c := range parts {
			cur = filepath.Join(cur, c)
			st, err := os.Lstat(cur)
			if err != nil {
				break // not in this layer: look below
			}
			if isWhiteout(cur, st) {
				return nil, ""
			}
			if i == len(parts)-1 {
				return st, cur
			}
			if !st.IsDir() {
				return nil, ""
			}
			if isOverlayOpaque(cur) {
				// Nothing below this layer shows under cur; what this
				// layer has is checked on.
				lowers = nil
			}
		}
		if lowers == nil {
			return nil, ""
		}
	}
	return nil, ""
}

func lowerHas(lowers []string, rel string) bool {
	st, _ := lowerLookup(lowers, rel)
	return st != nil
}

func lowerIsDir(lowers []string, rel string) bool {
	st, _ := lowerLookup(lowers, rel)
	return st != nil && st.IsDir()
}

// lowerNames lists what the merged lowers show in directory rel.
func lowerNames(lowers []string, rel string) []string {
	seen := map[string]bool{}
	var names []string
	for _, l := range lowers {
		dir := filepath.Join(l, filepath.FromSlash(rel))
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if seen[e.Name()] {
				continue
			}
			seen[e.Name()] = true
			if lowerHas(lowers, path.Join(rel, e.Name())) {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	return names
}

// upperHas reports an entry name, not a whiteout, in the open upper
// directory dir.
func upperHas(dir *os.File, name string) bool {
	st, err := lstatAt(dir, name)
	return err == nil && !isOverlayWhiteout(attrPath(dir, name), st.Mode, st.Rdev, st.Size)
}

// Export copies what changes (from [Changes] of upper) added or changed into
// dst, a new or empty directory, as plain files of the caller: directories,
// regular files with their permission bits (no setuid, setgid or sticky
// bit), and symlinks as links, never followed. Deletions have no
// representation there. Writes go through an [os.Root] on dst, created
// exclusively, so nothing lands outside it; reads through one on upper, and
// only regular files are opened (see openRegularAt).
func Export(upper string, changes []Change, dst string) error {
	if entries, err := os.ReadDir(dst); err == nil && len(entries) > 0 {
		return fmt.Errorf("export to %s: directory is not empty", dst)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("export to %s: %w", dst, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("export to %s: %w", dst, err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("export to %s: %w", dst, err)
	}
	defer root.Close()
	// Read through a root as well: the sandbox may still be running.
	src, err := os.OpenRoot(upper)
	if err != nil {
		return fmt.Errorf("export from %s: %w", upper, err)
	}
	defer src.Close()
	for _, c := range changes {
		rel := strings.TrimPrefix(path.Clean("/"+c.Path), "/")
		if c.Kind == Deleted || rel == "" {
			continue
		}
		if err := exportOne(root, src, rel); err != nil {
			return fmt.Errorf("export %s: %w", c.Path, err)
		}
	}
	return nil
}

func exportOne(root, src *os.Root, rel string) error {
	st, err := src.Lstat(rel)
	if err != nil {
		return err
	}
	switch {
	case st.IsDir():
		if err := root.MkdirAll(rel, 0o755); err != nil {
			return err
		}
		return root.Chmod(rel, st.Mode().Perm()|0o700)
	case st.Mode()&fs.ModeSymlink != 0:
		target, err := src.Readlink(rel)
		if err != nil {
			return err
		}
		if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
			return err
		}
		return root.Symlink(target, rel)
	case st.Mode().IsRegular():
		if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
			return err
		}
		// A FIFO or device node swapped in since the Lstat is refused
		// before it is opened (see openRegularAt).
		parent, err := src.Open(path.Dir(rel))
		if err != nil {
			return err
		}
		defer parent.Close()
		in, err := openRegularAt(parent, path.Base(rel), nil)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm()|0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	return nil // devices, fifos, sockets: not exported
}
