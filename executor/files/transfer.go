package files

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/internal/ctxio"
)

// UploadOptions controls Upload.
type UploadOptions struct {
	// Extract unpacks a zip or tar(.gz) stream into the destination directory
	// instead of writing it as one file.
	Extract bool
	// Write applies when Extract is not set.
	Write WriteOptions
	// Archive applies when Extract is set.
	Archive ExtractOptions
}

// UploadResult says what Upload did; exactly one of File and Archive is set.
type UploadResult struct {
	Path    string
	File    *Info
	Archive *ExtractResult
}

// Upload stores the stream r at dst: as the file dst (see Write), or, with
// Extract, unpacked into the directory dst (see Extract).
func Upload(ctx context.Context, dst string, r io.Reader, opts UploadOptions) (*UploadResult, error) {
	if !opts.Extract {
		in, err := Write(ctx, dst, r, opts.Write)
		if err != nil {
			return nil, fmt.Errorf("upload: %w", err)
		}
		return &UploadResult{Path: in.Path, File: in}, nil
	}
	res, err := Extract(ctx, r, dst, opts.Archive)
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	return &UploadResult{Path: filepath.Clean(dst), Archive: res}, nil
}

// DownloadOptions controls OpenDownload.
type DownloadOptions struct {
	// Format of the archive a directory is sent as; FormatAuto means zip.
	// Files are always sent as themselves.
	Format ArchiveFormat
}

// Download is a file or directory ready to be streamed. Call Stream once, or
// Close if it will not be streamed.
type Download struct {
	// Path is the absolute path downloaded.
	Path string
	// Name is a file name for the client: the base name, plus ".zip",
	// ".tar" or ".tar.gz" for a directory.
	Name string
	// MIME is the content type of the stream.
	MIME string
	// Size is the length of the stream, or -1 for a directory archive.
	Size int64
	// Dir says the stream is an archive of a directory.
	Dir bool
	// Mode holds the Unix permission bits of the file or directory (as
	// Info.Mode), ModTime its modification time.
	Mode    uint32
	ModTime time.Time

	format ArchiveFormat
	file   *os.File
}

// OpenDownload prepares path for download: a regular file is opened (so that
// errors show before any byte is sent), a directory is checked to be
// readable.
func OpenDownload(ctx context.Context, path string, opts DownloadOptions) (*Download, error) {
	p, err := absPath(path)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", path, err)
	}
	f, err := openNoWait(p)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", p, classify(err))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("download %s: %w", p, classify(err))
	}
	base := filepath.Base(p)
	if base == "/" {
		base = "root"
	}
	if fi.IsDir() {
		f.Close()
		format := opts.Format
		if format == FormatAuto {
			format = FormatZip
		}
		mime := map[ArchiveFormat]string{
			FormatZip:   "application/zip",
			FormatTar:   "application/x-tar",
			FormatTarGz: "application/gzip",
		}[format]
		if mime == "" {
			return nil, fmt.Errorf("download %s: %w: unknown archive format %q", p, ErrInvalidPath, format)
		}
		return &Download{Path: p, Name: base + "." + string(format), MIME: mime, Size: -1, Dir: true,
			Mode: unixPerm(fi.Mode()), ModTime: fi.ModTime(), format: format}, nil
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("download %s: %w: not a regular file", p, ErrInvalidPath)
	}
	mime := MediaTypeByName(p)
	if mime == "" {
		head := make([]byte, sniffLen)
		n, _ := io.ReadFull(f, head)
		head = head[:n]
		switch binary := IsBinary(head, int64(n) < fi.Size()); {
		case sniffMedia(head, binary) != "":
			mime = sniffMedia(head, binary)
		case binary:
			mime = "application/octet-stream"
		default:
			mime = "text/plain; charset=utf-8"
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("download %s: %w", p, err)
		}
	}
	return &Download{Path: p, Name: base, MIME: mime, Size: fi.Size(),
		Mode: unixPerm(fi.Mode()), ModTime: fi.ModTime(), file: f}, nil
}

// Stream writes the file, or the directory archive, to w and closes the
// Download.
func (d *Download) Stream(ctx context.Context, w io.Writer) error {
	if d.Dir {
		if err := WriteArchive(ctx, w, d.Path, d.format); err != nil {
			return fmt.Errorf("download %s: %w", d.Path, err)
		}
		return nil
	}
	if d.file == nil {
		return fmt.Errorf("download %s: already streamed or closed", d.Path)
	}
	defer d.Close()
	if _, err := io.Copy(w, ctxio.Reader(ctx, d.file)); err != nil {
		return fmt.Errorf("download %s: %w", d.Path, err)
	}
	return nil
}

// Close releases the open file of a Download that is not streamed.
func (d *Download) Close() error {
	if d.file == nil {
		return nil
	}
	err := d.file.Close()
	d.file = nil
	return err
}

// WriteArchive streams the directory dir to w as a zip, tar or tar.gz
// archive (FormatAuto means zip). Entry names are relative to dir, with "/"
// separators; directories, regular files and symlinks (stored as links, not
// followed) are included, other file types are skipped. Entries that vanish
// while the archive is written are skipped.
func WriteArchive(ctx context.Context, w io.Writer, dir string, format ArchiveFormat) error {
	p, err := absPath(dir)
	if err != nil {
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("archive %s: %w", p, classify(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("archive %s: %w", p, ErrNotDir)
	}
	bw := bufio.NewWriterSize(ctxio.Writer(ctx, w), 64<<10)
	var aw archiveWriter
	switch format {
	case FormatAuto, FormatZip:
		aw = &zipWriter{zw: zip.NewWriter(bw)}
	case FormatTar:
		aw = &tarWriter{tw: tar.NewWriter(bw)}
	case FormatTarGz:
		gz := gzip.NewWriter(bw)
		aw = &tarWriter{tw: tar.NewWriter(gz), gz: gz}
	default:
		return fmt.Errorf("archive %s: %w: unknown archive format %q", p, ErrInvalidPath, format)
	}
	err = filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if path == p {
			return nil
		}
		rel, err := filepath.Rel(p, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		switch m := fi.Mode(); {
		case m.IsDir():
			return aw.dir(rel, fi)
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return aw.symlink(rel, target, fi)
		case m.IsRegular():
			f, _, err := OpenRegular(path)
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EINVAL) {
				return nil // gone, or no longer a file
			}
			if err != nil {
				return err
			}
			defer f.Close()
			return aw.file(rel, fi, ctxio.Reader(ctx, f))
		}
		return nil // devices, FIFOs, sockets
	})
	if err == nil {
		err = aw.close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("archive %s: %w", p, err)
	}
	return nil
}

type archiveWriter interface {
	dir(name string, fi fs.FileInfo) error
	file(name string, fi fs.FileInfo, r io.Reader) error
	symlink(name, target string, fi fs.FileInfo) error
	close() error
}

var (
	_ archiveWriter = (*zipWriter)(nil)
	_ archiveWriter = (*tarWriter)(nil)
)

type zipWriter struct{ zw *zip.Writer }

func (z *zipWriter) header(name string, fi fs.FileInfo) (*zip.FileHeader, error) {
	h, err := zip.FileInfoHeader(fi)
	if err != nil {
		return nil, err
	}
	h.Name = name
	return h, nil
}

func (z *zipWriter) dir(name string, fi fs.FileInfo) error {
	h, err := z.header(name+"/", fi)
	if err != nil {
		return err
	}
	h.Method = zip.Store
	_, err = z.zw.CreateHeader(h)
	return err
}

func (z *zipWriter) file(name string, fi fs.FileInfo, r io.Reader) error {
	h, err := z.header(name, fi)
	if err != nil {
		return err
	}
	h.Method = zip.Deflate
	w, err := z.zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, r)
	return err
}

func (z *zipWriter) symlink(name, target string, fi fs.FileInfo) error {
	h, err := z.header(name, fi)
	if err != nil {
		return err
	}
	h.Method = zip.Store
	w, err := z.zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, target)
	return err
}

func (z *zipWriter) close() error { return z.zw.Close() }

type tarWriter struct {
	tw *tar.Writer
	gz *gzip.Writer
}

func (t *tarWriter) header(name, link string, fi fs.FileInfo) (*tar.Header, error) {
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return nil, err
	}
	h.Name = name
	h.Uname, h.Gname = "", ""
	h.Format = tar.FormatPAX
	return h, nil
}

func (t *tarWriter) dir(name string, fi fs.FileInfo) error {
	h, err := t.header(name+"/", "", fi)
	if err != nil {
		return err
	}
	return t.tw.WriteHeader(h)
}

func (t *tarWriter) file(name string, fi fs.FileInfo, r io.Reader) error {
	h, err := t.header(name, "", fi)
	if err != nil {
		return err
	}
	if err := t.tw.WriteHeader(h); err != nil {
		return err
	}
	// The header fixed the size: copy exactly that much, even if the file
	// grew or shrank meanwhile.
	n, err := io.Copy(t.tw, io.LimitReader(r, h.Size))
	if err != nil {
		return err
	}
	if n < h.Size {
		return fmt.Errorf("%s shrank while being archived", name)
	}
	return nil
}

func (t *tarWriter) symlink(name, target string, fi fs.FileInfo) error {
	h, err := t.header(name, target, fi)
	if err != nil {
		return err
	}
	return t.tw.WriteHeader(h)
}

func (t *tarWriter) close() error {
	if err := t.tw.Close(); err != nil {
		return err
	}
	if t.gz != nil {
		return t.gz.Close()
	}
	return nil
}
