package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Paths are the two directory trees bothy keeps its state in.
type Paths struct {
	// Data holds images, the layer cache, named volumes and the overlay
	// upper directories of sandboxes: $XDG_DATA_HOME/bothy, or /var/lib/bothy
	// for root.
	Data string
	// State holds running sandboxes' runtime state (bundle, executor socket,
	// libcontainer state): $XDG_RUNTIME_DIR/bothy, or /run/bothy for root.
	State string

	// fallback is the directory State is in when it falls back to
	// $TMPDIR/bothy-UID: bothy's own, in a directory every user can write.
	fallback string
}

// UserDirs are the caller's XDG base directories, as the CLI takes them
// from $XDG_DATA_HOME and $XDG_RUNTIME_DIR; empty fields take the defaults.
type UserDirs struct {
	// DataHome holds the data tree (default ~/.local/share).
	DataHome string
	// RuntimeDir holds the state tree when it is the caller's and closed
	// to others (default, and otherwise: a private directory under
	// $TMPDIR).
	RuntimeDir string
}

// DefaultPaths returns the directories for the calling user: /var/lib/bothy
// and /run/bothy for root, under dirs for others.
func DefaultPaths(dirs UserDirs) (Paths, error) {
	if os.Geteuid() == 0 {
		return Paths{Data: "/var/lib/bothy", State: "/run/bothy"}, nil
	}
	return rootlessPaths(dirs)
}

// rootlessPaths are an unprivileged caller's default directories.
func rootlessPaths(dirs UserDirs) (Paths, error) {
	data := dirs.DataHome
	if data == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Paths{}, fmt.Errorf("find data directory: set XDG_DATA_HOME or HOME: %w", err)
		}
		data = filepath.Join(home, ".local", "share")
	}
	p := Paths{Data: filepath.Join(data, "bothy")}
	state := dirs.RuntimeDir
	if state == "" || !usableRuntimeDir(state) {
		// su and batch schedulers often leave XDG_RUNTIME_DIR unset; fall
		// back to a private directory in /tmp that we own.
		state = filepath.Join(os.TempDir(), "bothy-"+strconv.Itoa(os.Getuid()))
		p.fallback = state
	}
	p.State = filepath.Join(state, "bothy")
	return p, nil
}

// PathsUnder puts both trees under root.
func PathsUnder(root string) Paths {
	return Paths{Data: filepath.Join(root, "data"), State: filepath.Join(root, "run")}
}

// usableRuntimeDir reports whether $XDG_RUNTIME_DIR is the caller's and
// closed to others, as the XDG spec requires; if not, state falls back.
func usableRuntimeDir(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir() && ownedByCaller(st) && st.Mode().Perm()&0o022 == 0
}

// Images is the image store's root.
func (p Paths) Images() string { return filepath.Join(p.Data, "images") }

// Layers is the layer cache's root. Root and rootless callers extract with
// different ownership, and never share a cache.
func (p Paths) Layers() string { return filepath.Join(p.Data, "layers") }

// seccompCache holds seccomp profiles compiled to BPF, one file per profile.
func (p Paths) seccompCache() string { return filepath.Join(p.Data, "seccomp") }

// sandboxes holds one directory per sandbox with its runtime state.
func (p Paths) sandboxes() string { return filepath.Join(p.State, "sb") }

// uppers holds one directory per sandbox with its overlay upper and work dirs.
func (p Paths) uppers() string { return filepath.Join(p.Data, "sandboxes") }

// names holds one symlink per sandbox name, pointing at its ID: creating the
// symlink is what reserves a name, atomically, across processes.
func (p Paths) names() string { return filepath.Join(p.State, "names") }

// ensure creates bothy's directories, each private to the caller (see
// privateDir): the /tmp fallback (never through a symlink), Data, State and
// the directories in them.
func (p Paths) ensure() error {
	c := dirChecker{}
	if p.fallback != "" {
		if err := c.privateDir(p.fallback, false); err != nil {
			return err
		}
	}
	for _, dir := range []string{p.Data, p.State} {
		if err := c.privateDir(dir, true); err != nil {
			return err
		}
	}
	for _, dir := range []string{p.sandboxes(), p.uppers(), p.names()} {
		if err := privateSubdir(dir); err != nil {
			return err
		}
	}
	return nil
}

// privateSubdir is privateDir for a directory whose parent privateDir has
// just accepted (only the caller can change entries there): one Lstat
// unless it must be created, or is a symlink to follow.
func privateSubdir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create state directory %s: %w", dir, err)
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("create state directory %s: %w", dir, err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return dirChecker{}.privateDir(dir, true)
	case !fi.IsDir():
		return &UnsafeDirError{Dir: dir, Path: dir, UID: ownerOf(fi), Mode: fi.Mode(), Reason: "is not a directory"}
	case ownerOf(fi) != os.Geteuid():
		return &UnsafeDirError{Dir: dir, Path: dir, UID: ownerOf(fi), Mode: fi.Mode(), Reason: "is owned by another user"}
	case fi.Mode().Perm()&0o022 != 0:
		return &UnsafeDirError{Dir: dir, Path: dir, UID: ownerOf(fi), Mode: fi.Mode(), Reason: "can be written by group or others"}
	}
	return nil
}

// dirChecker remembers the directories privateDir accepted, so that the walks
// for Data and State do not Lstat their common parents twice.
type dirChecker map[string]fs.FileInfo

// privateDir makes sure that dir is a directory no other user can change,
// move or replace, creating it and any missing parent (mode 0700). It walks
// the path from / without following a symlink blindly (Lstat at each step):
//   - dir, and every directory it creates, must be a directory owned by the
//     caller that neither group nor others can write;
//   - every other directory on the way must be owned by root or the caller,
//     and if group or others can write it, it must be sticky (like /tmp:
//     then only an entry's owner can rename it, and the next step checks
//     that owner);
//   - a symlink on the way is followed only if it is owned by root or the
//     caller and sits in a directory neither group nor others can write;
//     dir itself may be one only when link is true.
//
// A directory that fails is an *UnsafeDirError saying which, whose and in
// what mode. Mkdir then Lstat is race-free here: in a sticky directory no
// other user can remove or rename what the caller created, and anywhere
// else they cannot write.
func (c dirChecker) privateDir(dir string, link bool) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("create state directory %s: %w", dir, err)
	}
	euid := os.Geteuid()
	unsafe := func(path string, fi fs.FileInfo, reason string) error {
		return &UnsafeDirError{Dir: dir, Path: path, UID: ownerOf(fi), Mode: fi.Mode(), Reason: reason}
	}
	rootInfo, ok := c["/"]
	if !ok {
		if rootInfo, err = os.Lstat("/"); err != nil {
			return fmt.Errorf("create state directory %s: %w", dir, err)
		}
		if u := ownerOf(rootInfo); u != 0 && u != euid || rootInfo.Mode().Perm()&0o022 != 0 && rootInfo.Mode()&fs.ModeSticky == 0 {
			return unsafe("/", rootInfo, "can be changed by another user")
		}
		c["/"] = rootInfo
	}
	rest := splitPath(abs)
	cur, parent, links := "/", rootInfo, 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		last := len(rest) == 0
		next := filepath.Join(cur, name)
		if fi, ok := c[next]; ok && !last {
			cur, parent = next, fi // accepted by an earlier walk
			continue
		}
		fi, err := os.Lstat(next)
		created := false
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(next, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("create state directory %s: %w", dir, err)
			}
			fi, err = os.Lstat(next)
			created = true
		}
		if err != nil {
			return fmt.Errorf("create state directory %s: %w", dir, err)
		}
		owner := ownerOf(fi)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			switch {
			case last && !link:
				return unsafe(next, fi, "is a symlink, not the directory bothy makes there (not followed)")
			case owner != 0 && owner != euid:
				return unsafe(next, fi, "is a symlink owned by another user (not followed)")
			case parent.Mode().Perm()&0o022 != 0:
				return unsafe(next, fi, "is a symlink in a directory other users can write (not followed)")
			}
			if links++; links > 40 {
				return fmt.Errorf("create state directory %s: too many symlinks", dir)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("create state directory %s: %w", dir, err)
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur, target) // cur has no symlinks: ".." is lexical
			}
			rest = append(splitPath(filepath.Clean(target)), rest...)
			cur, parent = "/", rootInfo
			continue
		case !fi.IsDir():
			return unsafe(next, fi, "is not a directory")
		case last || created:
			if owner != euid {
				return unsafe(next, fi, "is owned by another user")
			}
			if fi.Mode().Perm()&0o022 != 0 {
				return unsafe(next, fi, "can be written by group or others")
			}
		default:
			if owner != 0 && owner != euid {
				return unsafe(next, fi, "is owned by another user")
			}
			if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
				return unsafe(next, fi, "can be written by group or others and is not sticky")
			}
		}
		c[next] = fi
		cur, parent = next, fi
	}
	return nil
}

// splitPath returns the components of a clean absolute path.
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// SocketPath is the host path of a sandbox's executor socket.
func (p Paths) SocketPath(id string) string {
	return filepath.Join(p.dir(id), socketName)
}

// UnsafeDirError is a directory (or symlink) on the way to bothy's state
// that another user could change: move bothy's state away, or put theirs in
// its place.
type UnsafeDirError struct {
	Dir    string      // bothy's directory being made
	Path   string      // the component at fault (Dir or one of its parents)
	UID    int         // its owner
	Mode   fs.FileMode // its mode
	Reason string
}

func (e *UnsafeDirError) Error() string {
	owner := "uid " + strconv.Itoa(e.UID)
	if u, err := user.LookupId(strconv.Itoa(e.UID)); err == nil {
		owner += " (" + u.Username + ")"
	}
	what := e.Path
	if e.Path == e.Dir {
		what = "it"
	}
	return fmt.Sprintf("unsafe state directory %s: %s %s (owner %s, mode %s): another user could move bothy's state "+
		"away or put theirs in its place; remove %s or make it yours and closed to others (chown, chmod go-w), "+
		"or set BOTHY_ROOT (or XDG_RUNTIME_DIR, XDG_DATA_HOME) to a directory only you can write",
		e.Dir, what, e.Reason, owner, octalMode(e.Mode), e.Path)
}

// octalMode is a mode as chmod takes it: 0755, 1777.
func octalMode(m fs.FileMode) string {
	n := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		n |= 0o1000
	}
	if m&fs.ModeSetgid != 0 {
		n |= 0o2000
	}
	if m&fs.ModeSetuid != 0 {
		n |= 0o4000
	}
	return fmt.Sprintf("%04o", n)
}
