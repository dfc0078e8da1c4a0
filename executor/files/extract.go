package files

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/internal/ctxio"
)

// ArchiveFormat names an archive format.
type ArchiveFormat string

const (
	// FormatAuto detects the format from the stream's first bytes.
	FormatAuto  ArchiveFormat = ""
	FormatZip   ArchiveFormat = "zip"
	FormatTar   ArchiveFormat = "tar"
	FormatTarGz ArchiveFormat = "tar.gz"
)

// Limits applied when ExtractOptions leaves them at 0.
const (
	DefaultMaxExtractBytes   = 4 << 30
	DefaultMaxExtractEntries = 100_000
)

// maxSymlinkTarget caps the length of a symlink target read from a zip entry.
const maxSymlinkTarget = 4096

// ExtractOptions controls Extract.
type ExtractOptions struct {
	// Format of the archive; FormatAuto detects zip, gzip-compressed tar and
	// tar (POSIX/GNU magic).
	Format ArchiveFormat
	// MaxBytes caps the bytes written (the uncompressed size) and, for zip,
	// the size of the archive itself; 0 means DefaultMaxExtractBytes.
	MaxBytes int64
	// MaxEntries caps the number of entries; 0 means DefaultMaxExtractEntries.
	MaxEntries int
	// Owner, when set, owns every extracted entry; otherwise entries belong to
	// the caller (owners recorded in the archive are ignored).
	Owner *Owner
	// TempDir holds the spooled copy of a zip stream (zip needs random
	// access); "" means os.TempDir().
	TempDir string
	// Symlinks says what to do with a symlink whose target is absolute or
	// leads out of the destination; the zero value refuses it.
	Symlinks SymlinkPolicy
}

// SymlinkPolicy says what Extract does with an escaping symlink: one whose
// target is absolute or leads out of the destination.
type SymlinkPolicy int

const (
	// SymlinksRefuse fails the extraction with ErrInvalidPath.
	SymlinksRefuse SymlinkPolicy = iota
	// SymlinksSkip leaves the entry out and counts it in
	// ExtractResult.Skipped.
	SymlinksSkip
	// SymlinksKeep creates the symlink as it is. Extraction itself still
	// never follows it: a later entry below it fails (os.Root refuses to
	// leave the destination), and a later entry at its path replaces it.
	// Meant for destinations whose owner made the archive (copying into
	// a sandbox), not for archives from an untrusted source.
	SymlinksKeep
)

// ExtractResult counts what Extract created.
type ExtractResult struct {
	Files    int
	Dirs     int
	Symlinks int
	Links    int
	Bytes    int64
	// Skipped counts escaping symlinks left out (SymlinksSkip).
	Skipped int
}

// Extract unpacks the archive read from r into directory dest (created if
// missing). See the package documentation for the safety rules. Existing
// files at an entry's path are replaced; existing directories are merged.
func Extract(ctx context.Context, r io.Reader, dest string, opts ExtractOptions) (*ExtractResult, error) {
	d, err := absPath(dest)
	if err != nil {
		return nil, fmt.Errorf("extract to %s: %w", dest, err)
	}
	res, err := extract(ctx, r, d, opts)
	if err != nil {
		return res, fmt.Errorf("extract to %s: %w", d, err)
	}
	return res, nil
}

func extract(ctx context.Context, r io.Reader, dest string, opts ExtractOptions) (*ExtractResult, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxExtractBytes
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxExtractEntries
	}
	br := bufio.NewReaderSize(ctxio.Reader(ctx, r), 64<<10)
	format := opts.Format
	if format == FormatAuto {
		head, _ := br.Peek(512)
		format = detectFormat(head)
		if format == FormatAuto {
			return nil, ErrUnsupportedArchive
		}
	}
	switch format {
	case FormatZip, FormatTar, FormatTarGz:
	default:
		return nil, fmt.Errorf("%w: unknown format %q", ErrInvalidPath, format)
	}
	if err := mkdirParents(dest, opts.Owner); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return nil, classify(err)
	}
	defer root.Close()
	x := &extractor{ctx: ctx, root: root, opts: opts, res: &ExtractResult{}}
	switch format {
	case FormatZip:
		err = x.zip(br)
	case FormatTarGz:
		zr, gerr := gzip.NewReader(br)
		if gerr != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupportedArchive, gerr)
		}
		err = x.tar(zr)
	default:
		err = x.tar(br)
	}
	var re *readError
	if errors.As(err, &re) && ctx.Err() == nil {
		err = fmt.Errorf("%w: %v", ErrBadArchive, re.err)
	}
	if err == nil {
		err = x.finishDirs()
	}
	return x.res, err
}

// readError marks a failure to read the archive, as opposed to a failure to
// write what it holds.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

type markReader struct{ r io.Reader }

func (m markReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &readError{err}
	}
	return n, err
}

// detectFormat recognises an archive from its first bytes.
func detectFormat(head []byte) ArchiveFormat {
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return FormatZip
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return FormatTarGz
	case len(head) >= 262 && bytes.Equal(head[257:262], []byte("ustar")):
		return FormatTar
	}
	return FormatAuto
}

type dirMeta struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
}

type extractor struct {
	ctx     context.Context
	root    *os.Root
	opts    ExtractOptions
	res     *ExtractResult
	entries int
	dirs    []dirMeta
}

func unsafeEntry(name, why string) error {
	return fmt.Errorf("%w: archive entry %q: %s", ErrInvalidPath, name, why)
}

// entryName validates an archive entry name and returns it cleaned and
// relative to the destination; "" means the destination itself.
func entryName(raw string) (string, error) {
	name := strings.TrimSuffix(raw, "/")
	switch {
	case raw == "":
		return "", unsafeEntry(raw, "empty name")
	case strings.IndexByte(raw, 0) >= 0:
		return "", unsafeEntry(raw, "NUL byte in name")
	case strings.HasPrefix(raw, "/"):
		return "", unsafeEntry(raw, "absolute path")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", unsafeEntry(raw, `".." in path`)
		}
	}
	c := path.Clean(name)
	if c == "." {
		return "", nil
	}
	return c, nil
}

func (x *extractor) count() error {
	if err := x.ctx.Err(); err != nil {
		return err
	}
	x.entries++
	if x.entries > x.opts.MaxEntries {
		return fmt.Errorf("%w: archive has more than %d entries", ErrTooLarge, x.opts.MaxEntries)
	}
	return nil
}

// clear removes a non-directory at name so that a new entry never writes
// through an existing file or symlink. A directory there is an error unless
// keepDir is set.
func (x *extractor) clear(name string, keepDir bool) (isDir bool, err error) {
	fi, err := x.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case fi.IsDir():
		if keepDir {
			return true, nil
		}
		return true, unsafeEntry(name, "a directory with this name was already extracted")
	}
	return false, x.root.Remove(name)
}

func (x *extractor) parent(name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	return x.mkdirAll(dir)
}

// mkdirAll creates dir and its parents inside the root, chowning new ones.
// An existing directory, or a symlink to one inside the root, is used as it
// is; a symlink leading out of the root fails (os.Root refuses it); any other
// non-directory in the way is replaced.
func (x *extractor) mkdirAll(dir string) error {
	fi, err := x.root.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return err
	}
	if p := path.Dir(dir); p != "." {
		if err := x.mkdirAll(p); err != nil {
			return err
		}
	}
	if _, err := x.clear(dir, false); err != nil {
		return err
	}
	if err := x.root.Mkdir(dir, DefaultDirMode); err != nil {
		return err
	}
	return x.chown(dir)
}

func (x *extractor) chown(name string) error {
	if x.opts.Owner == nil {
		return nil
	}
	return x.root.Lchown(name, x.opts.Owner.UID, x.opts.Owner.GID)
}

func (x *extractor) dir(name string, mode fs.FileMode, mtime time.Time) error {
	if name == "" {
		return nil // the destination itself: keep its metadata
	}
	if err := x.mkdirAll(name); err != nil {
		return err
	}
	x.res.Dirs++
	// Permissions and times are applied at the end, so that a read-only
	// directory can still be filled.
	x.dirs = append(x.dirs, dirMeta{name, mode.Perm(), mtime})
	return nil
}

func (x *extractor) file(name string, mode fs.FileMode, mtime time.Time, r io.Reader) error {
	if name == "" {
		return unsafeEntry(name, "a file cannot replace the destination")
	}
	if err := x.parent(name); err != nil {
		return err
	}
	if _, err := x.clear(name, false); err != nil {
		return err
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	left := x.opts.MaxBytes - x.res.Bytes
	n, err := io.Copy(f, io.LimitReader(markReader{r}, left+1))
	x.res.Bytes += n
	if err == nil && n > left {
		err = fmt.Errorf("%w: archive expands to more than %d bytes", ErrTooLarge, x.opts.MaxBytes)
	}
	if err != nil {
		f.Close()
		x.root.Remove(name)
		return err
	}
	if x.opts.Owner != nil {
		if err := f.Chown(x.opts.Owner.UID, x.opts.Owner.GID); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Chmod(mode.Perm()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	x.res.Files++
	if !mtime.IsZero() {
		return x.root.Chtimes(name, mtime, mtime)
	}
	return nil
}

func (x *extractor) symlink(name, target string) error {
	if name == "" {
		return unsafeEntry(name, "a symlink cannot replace the destination")
	}
	switch {
	case target == "":
		return unsafeEntry(name, "empty symlink target")
	case strings.IndexByte(target, 0) >= 0:
		return unsafeEntry(name, "NUL byte in symlink target")
	}
	var escape error
	if strings.HasPrefix(target, "/") {
		escape = unsafeEntry(name, fmt.Sprintf("symlink to absolute path %q", target))
	} else if resolved := path.Join(path.Dir(name), target); resolved == ".." || strings.HasPrefix(resolved, "../") {
		escape = unsafeEntry(name, fmt.Sprintf("symlink target %q leaves the destination", target))
	}
	if escape != nil {
		switch x.opts.Symlinks {
		case SymlinksSkip:
			x.res.Skipped++
			return nil
		case SymlinksKeep:
		default:
			return escape
		}
	}
	if err := x.parent(name); err != nil {
		return err
	}
	if _, err := x.clear(name, false); err != nil {
		return err
	}
	if err := x.root.Symlink(target, name); err != nil {
		return err
	}
	x.res.Symlinks++
	return x.chown(name)
}

func (x *extractor) link(name, rawTarget string) error {
	target, err := entryName(rawTarget)
	if err != nil {
		return err
	}
	if name == "" || target == "" {
		return unsafeEntry(name, "hard link to or from the destination")
	}
	fi, err := x.root.Lstat(target)
	if err != nil || !fi.Mode().IsRegular() {
		return unsafeEntry(name, fmt.Sprintf("hard link target %q is not a regular file inside the destination", rawTarget))
	}
	if name == target {
		return nil
	}
	if err := x.parent(name); err != nil {
		return err
	}
	if _, err := x.clear(name, false); err != nil {
		return err
	}
	if err := x.root.Link(target, name); err != nil {
		return err
	}
	x.res.Links++
	return nil
}

func (x *extractor) finishDirs() error {
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		if err := x.root.Chmod(d.name, d.mode); err != nil {
			return err
		}
		if !d.mtime.IsZero() {
			if err := x.root.Chtimes(d.name, d.mtime, d.mtime); err != nil {
				return err
			}
		}
	}
	return nil
}

func (x *extractor) tar(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		// ErrInsecurePath comes with a valid header; entryName judges it.
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return &readError{fmt.Errorf("read tar: %w", err)}
		}
		if err := x.count(); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = x.dir(name, mode, hdr.ModTime)
		case tar.TypeReg:
			err = x.file(name, mode, hdr.ModTime, tr)
		case tar.TypeSymlink:
			err = x.symlink(name, hdr.Linkname)
		case tar.TypeLink:
			err = x.link(name, hdr.Linkname)
		case tar.TypeChar, tar.TypeBlock:
			err = unsafeEntry(hdr.Name, "device nodes are refused")
		case tar.TypeFifo:
			err = unsafeEntry(hdr.Name, "FIFOs are refused")
		default:
			err = unsafeEntry(hdr.Name, fmt.Sprintf("unsupported entry type %q", hdr.Typeflag))
		}
		if err != nil {
			return err
		}
	}
}

func (x *extractor) zip(r io.Reader) error {
	dir := x.opts.TempDir
	tmp, err := os.CreateTemp(dir, "bothy-upload-*.zip")
	if err != nil {
		return fmt.Errorf("spool zip: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	size, err := io.Copy(tmp, io.LimitReader(r, x.opts.MaxBytes+1))
	if err != nil {
		return fmt.Errorf("spool zip: %w", err)
	}
	if size > x.opts.MaxBytes {
		return fmt.Errorf("%w: zip archive larger than %d bytes", ErrTooLarge, x.opts.MaxBytes)
	}
	zr, err := zip.NewReader(tmp, size)
	// ErrInsecurePath comes with a usable reader; entryName judges each name.
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return &readError{fmt.Errorf("read zip: %w", err)}
	}
	if len(zr.File) > x.opts.MaxEntries {
		return fmt.Errorf("%w: archive has more than %d entries", ErrTooLarge, x.opts.MaxEntries)
	}
	for _, zf := range zr.File {
		if err := x.count(); err != nil {
			return err
		}
		if err := x.zipEntry(zf); err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) zipEntry(zf *zip.File) error {
	name, err := entryName(zf.Name)
	if err != nil {
		return err
	}
	mode := zf.Mode()
	mtime := zf.Modified
	isDir := mode.IsDir() || strings.HasSuffix(zf.Name, "/")
	perm := mode.Perm()
	if creator := zf.CreatorVersion >> 8; creator != 3 && creator != 19 { // not Unix or macOS: no real mode
		perm = 0o644
		if isDir {
			perm = 0o755
		}
	}
	switch {
	case isDir:
		return x.dir(name, perm, mtime)
	case mode&fs.ModeSymlink != 0:
		rc, err := zf.Open()
		if err != nil {
			return &readError{fmt.Errorf("read zip entry %q: %w", zf.Name, err)}
		}
		target, err := io.ReadAll(io.LimitReader(rc, maxSymlinkTarget+1))
		rc.Close()
		if err != nil {
			return &readError{fmt.Errorf("read zip entry %q: %w", zf.Name, err)}
		}
		if len(target) > maxSymlinkTarget {
			return unsafeEntry(zf.Name, "symlink target too long")
		}
		return x.symlink(name, string(target))
	case mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeIrregular) != 0:
		return unsafeEntry(zf.Name, "device nodes, FIFOs and sockets are refused")
	}
	rc, err := zf.Open()
	if err != nil {
		return &readError{fmt.Errorf("read zip entry %q: %w", zf.Name, err)}
	}
	defer rc.Close()
	if err := x.file(name, perm, mtime, rc); err != nil {
		return fmt.Errorf("extract zip entry %q: %w", zf.Name, err)
	}
	return nil
}
