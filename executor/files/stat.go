package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// FileType is the type of a directory entry.
type FileType string

const (
	TypeFile    FileType = "file"
	TypeDir     FileType = "dir"
	TypeSymlink FileType = "symlink"
	// TypeOther covers devices, FIFOs and sockets.
	TypeOther FileType = "other"
)

// Info describes one file, as Stat and List return it. Symlinks are described
// themselves, not followed.
type Info struct {
	// Path is the absolute path.
	Path string
	// Name is the base name; in List results it is the path relative to the
	// listed directory ("sub/file.txt" for recursive listings).
	Name string
	Type FileType
	Size int64
	// Mode holds the Unix permission bits, setuid/setgid/sticky included
	// (0o644 = 420).
	Mode    uint32
	ModTime time.Time
	UID     int
	GID     int
	// LinkTarget is the content of a symlink.
	LinkTarget string
}

func newInfo(path, name string, fi fs.FileInfo) Info {
	in := Info{
		Path:    path,
		Name:    name,
		Size:    fi.Size(),
		Mode:    unixPerm(fi.Mode()),
		ModTime: fi.ModTime(),
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		in.Type = TypeFile
	case m.IsDir():
		in.Type = TypeDir
	case m&fs.ModeSymlink != 0:
		in.Type = TypeSymlink
		in.LinkTarget, _ = os.Readlink(path)
	default:
		in.Type = TypeOther
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		in.UID, in.GID = int(st.Uid), int(st.Gid)
	}
	return in
}

// unixPerm converts Go's mode bits to Unix permission bits.
func unixPerm(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

// goMode converts a mode given either way, Go's (fs.ModePerm plus
// fs.ModeSetuid, fs.ModeSetgid, fs.ModeSticky) or Unix's (0o7777), to what
// os.Chmod wants, dropping anything else.
func goMode(m fs.FileMode) fs.FileMode {
	if m&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// Stat describes path without following a final symlink.
func Stat(ctx context.Context, path string) (*Info, error) {
	p, err := absPath(path)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", p, classify(err))
	}
	in := newInfo(p, filepath.Base(p), fi)
	return &in, nil
}

// DefaultListLimit caps List when ListOptions.Limit is 0.
const DefaultListLimit = 100_000

// ListOptions selects what List returns.
type ListOptions struct {
	// Recursive descends into subdirectories (symlinks are not followed).
	Recursive bool
	// MaxDepth limits a recursive listing: 1 lists only the directory's own
	// entries, 2 adds their children, and so on; 0 means no limit.
	MaxDepth int
	// SkipHidden leaves out entries whose name starts with "." (and, when
	// recursive, everything below them).
	SkipHidden bool
	// Limit fails the listing with ErrTooLarge when it would return more
	// entries; 0 means DefaultListLimit, negative means no limit.
	Limit int
}

// List returns the entries of directory dir in walk order: siblings sorted by
// name, each directory followed by its contents. Unreadable subdirectories are
// listed but not descended into.
func List(ctx context.Context, dir string, opts ListOptions) ([]Info, error) {
	p, err := absPath(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, classify(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("list %s: %w", p, ErrNotDir)
	}
	limit := opts.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	maxDepth := 1
	if opts.Recursive {
		maxDepth = opts.MaxDepth
	}
	out := []Info{}
	var walk func(abs, rel string, depth int) error
	walk = func(abs, rel string, depth int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := os.ReadDir(abs)
		if err != nil {
			if depth == 1 {
				return classify(err)
			}
			return nil
		}
		for _, e := range entries {
			if opts.SkipHidden && strings.HasPrefix(e.Name(), ".") {
				continue
			}
			ea, er := filepath.Join(abs, e.Name()), e.Name()
			if rel != "" {
				er = rel + "/" + e.Name()
			}
			efi, err := e.Info()
			if err != nil {
				continue // vanished since ReadDir
			}
			if limit > 0 && len(out) >= limit {
				return fmt.Errorf("%w: more than %d entries", ErrTooLarge, limit)
			}
			out = append(out, newInfo(ea, er, efi))
			if e.IsDir() && (maxDepth <= 0 || depth < maxDepth) {
				if err := walk(ea, er, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(p, "", 1); err != nil {
		return nil, fmt.Errorf("list %s: %w", p, err)
	}
	return out, nil
}

// ListNames implements OpenHands' POST /list_files: the names in directory
// path (hidden ones included), directories suffixed with "/" and listed
// first, each group sorted case-insensitively. Entries whose target does not
// exist (dangling symlinks) are left out and symlinks to directories count as
// directories. A path that does not exist or is not a directory yields an
// empty list and no error, as in OpenHands.
func ListNames(ctx context.Context, path string) ([]string, error) {
	p, err := absPath(path)
	if err != nil {
		return nil, fmt.Errorf("list files %s: %w", path, err)
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return []string{}, nil
		}
		return nil, fmt.Errorf("list files %s: %w", p, classify(err))
	}
	var dirs, files []string
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list files %s: %w", p, err)
		}
		fi, err := os.Stat(filepath.Join(p, e.Name()))
		if err != nil {
			continue
		}
		if fi.IsDir() {
			dirs = append(dirs, e.Name()+"/")
		} else {
			files = append(files, e.Name())
		}
	}
	byLower := func(a, b string) int {
		if c := strings.Compare(strings.ToLower(a), strings.ToLower(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	}
	slices.SortFunc(dirs, byLower)
	slices.SortFunc(files, byLower)
	return append(append(make([]string, 0, len(dirs)+len(files)), dirs...), files...), nil
}
