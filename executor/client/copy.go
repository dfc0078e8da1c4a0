package client

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/files"
)

// Copies follow `docker cp`: a file is copied to DST, or into DST when DST
// is an existing directory; a directory is copied to DST (created), or
// into DST as DST/<its name> when DST is an existing directory; a source
// ending in "/." copies a directory's contents into DST. A DST ending in
// "/" must be an existing directory for a file. Symlinks given as the
// source are followed; symlinks inside a copied directory are copied as
// links. Sandbox paths are absolute; a relative one is taken from "/".

// CopyResult says what a copy did.
type CopyResult struct {
	// Dst is the path written: the destination, or a path inside it.
	Dst string
	// Dir says a directory was copied; the counts are then those of its
	// entries.
	Dir                   bool
	Files, Dirs, Symlinks int
	Bytes                 int64
	// Skipped counts symlinks leading out of the copied directory, left
	// out by CopyFrom (the host never gets links into its own tree from a
	// sandbox).
	Skipped int
}

func sandboxPath(p string) (string, bool) {
	dirSyntax := strings.HasSuffix(p, "/")
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return path.Clean(p), dirSyntax
}

// CopyTo copies hostSrc (a file or a directory) into the sandbox at
// sandboxDst. A directory travels as a tar stream unpacked by the
// executor.
func (c *Client) CopyTo(ctx context.Context, hostSrc, sandboxDst string) (*CopyResult, error) {
	contents := strings.HasSuffix(hostSrc, "/.")
	src, err := filepath.Abs(hostSrc)
	if err != nil {
		return nil, fmt.Errorf("copy %s: %w", hostSrc, err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("copy %s: %w", hostSrc, err)
	}
	dst, dirSyntax := sandboxPath(sandboxDst)
	dstInfo, err := c.StatFollow(ctx, dst)
	exists := err == nil
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		return nil, fmt.Errorf("copy to %s: %w", dst, err)
	}
	dstIsDir := exists && dstInfo.Type == api.FileTypeDir
	target := dst
	res := &CopyResult{}
	switch {
	case fi.IsDir():
		if exists && !dstIsDir {
			return nil, fmt.Errorf("copy %s to %s: cannot copy a directory to a file", hostSrc, dst)
		}
		if dstIsDir && !contents {
			target = path.Join(dst, filepath.Base(src))
		}
		pr, pw := io.Pipe()
		defer pr.Close()
		go func() { pw.CloseWithError(files.WriteArchive(ctx, pw, src, files.FormatTar)) }()
		up, err := c.Upload(ctx, target, pr, UploadOptions{Extract: true, Format: api.FormatTar})
		if err != nil {
			return nil, fmt.Errorf("copy %s to %s: %w", hostSrc, target, err)
		}
		res.Dir = true
		if a := up.Archive; a != nil {
			res.Files, res.Dirs, res.Symlinks, res.Bytes = a.Files+a.Links, a.Dirs, a.Symlinks, a.Bytes
		}
	case fi.Mode().IsRegular():
		if dstIsDir {
			target = path.Join(dst, filepath.Base(src))
		} else if dirSyntax {
			return nil, fmt.Errorf("copy %s to %s: destination directory does not exist", hostSrc, sandboxDst)
		}
		f, err := os.Open(src)
		if err != nil {
			return nil, fmt.Errorf("copy %s: %w", hostSrc, err)
		}
		defer f.Close()
		in, err := c.WriteFile(ctx, target, f, WriteOptions{Mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)})
		if err != nil {
			return nil, fmt.Errorf("copy %s to %s: %w", hostSrc, target, err)
		}
		res.Files, res.Bytes = 1, in.Size
	default:
		return nil, fmt.Errorf("copy %s: not a regular file or directory", hostSrc)
	}
	res.Dst = target
	return res, nil
}

// CopyFrom copies sandboxSrc (a file or a directory) out of the sandbox
// to hostDst. A directory travels as a tar stream unpacked with the rules
// of files.Extract: entries stay inside the destination, device nodes are
// refused, setuid bits dropped, and symlinks leading out are skipped.
func (c *Client) CopyFrom(ctx context.Context, sandboxSrc, hostDst string) (*CopyResult, error) {
	src, _ := sandboxPath(sandboxSrc)
	contents := strings.HasSuffix(sandboxSrc, "/.")
	dst, err := filepath.Abs(hostDst)
	if err != nil {
		return nil, fmt.Errorf("copy to %s: %w", hostDst, err)
	}
	dirSyntax := strings.HasSuffix(hostDst, "/")
	d, err := c.Download(ctx, src, api.FormatTar)
	if err != nil {
		return nil, fmt.Errorf("copy %s: %w", src, err)
	}
	defer d.Body.Close()
	fi, err := os.Stat(dst)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("copy to %s: %w", hostDst, err)
	}
	dstIsDir := exists && fi.IsDir()
	target := dst
	res := &CopyResult{Dir: d.Dir}
	if d.Dir {
		if exists && !dstIsDir {
			return nil, fmt.Errorf("copy %s to %s: cannot copy a directory to a file", src, hostDst)
		}
		if dstIsDir && !contents {
			target = filepath.Join(dst, path.Base(src))
		}
		x, err := files.Extract(ctx, d.Body, target, files.ExtractOptions{
			Format: files.FormatTar, Symlinks: files.SymlinksSkip,
			MaxBytes: 1 << 50, MaxEntries: 1 << 30, // what the sandbox holds; tar is not compressed
		})
		if err != nil {
			return nil, fmt.Errorf("copy %s to %s: %w", src, target, err)
		}
		res.Files, res.Dirs, res.Symlinks, res.Bytes, res.Skipped = x.Files+x.Links, x.Dirs, x.Symlinks, x.Bytes, x.Skipped
	} else {
		if dstIsDir {
			target = filepath.Join(dst, path.Base(src))
		} else if dirSyntax {
			return nil, fmt.Errorf("copy %s to %s: destination directory does not exist", src, hostDst)
		}
		mode := d.Mode
		if mode == 0 {
			mode = files.DefaultFileMode
		}
		in, err := files.Write(ctx, target, d.Body, files.WriteOptions{Mode: mode})
		if err != nil {
			return nil, fmt.Errorf("copy %s to %s: %w", src, target, err)
		}
		res.Files, res.Bytes = 1, in.Size
	}
	res.Dst = target
	return res, nil
}

// CopyFromTar writes sandboxSrc as a tar stream to w, as `docker cp
// SB:PATH -` does: a file as one entry named after it, a directory as its
// entries under its own name (or, for a source ending in "/.", its
// entries alone). Nothing is written on the host but w.
func (c *Client) CopyFromTar(ctx context.Context, sandboxSrc string, w io.Writer) (*CopyResult, error) {
	src, _ := sandboxPath(sandboxSrc)
	contents := strings.HasSuffix(sandboxSrc, "/.")
	d, err := c.Download(ctx, src, api.FormatTar)
	if err != nil {
		return nil, fmt.Errorf("copy %s: %w", src, err)
	}
	defer d.Body.Close()
	name := path.Base(src)
	if name == "/" {
		contents = true
	}
	tw := tar.NewWriter(w)
	res := &CopyResult{Dst: "-", Dir: d.Dir}
	if !d.Dir {
		if d.Size < 0 {
			return nil, fmt.Errorf("copy %s: the executor sent no length for the file", src)
		}
		mode := d.Mode
		if mode == 0 {
			mode = files.DefaultFileMode
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(mode), Size: d.Size, ModTime: time.Now(), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("copy %s: %w", src, err)
		}
		n, err := io.Copy(tw, d.Body)
		if err != nil {
			return nil, fmt.Errorf("copy %s: %w", src, err)
		}
		res.Files, res.Bytes = 1, n
		return res, tw.Close()
	}
	if !contents {
		mode := d.Mode
		if mode == 0 {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(mode), ModTime: time.Now(), Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("copy %s: %w", src, err)
		}
		res.Dirs++
	}
	tr := tar.NewReader(d.Body)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("copy %s: read the executor's archive: %w", src, err)
		}
		rel := strings.TrimPrefix(h.Name, "./")
		if rel == "" || rel == "." {
			continue
		}
		if !contents {
			h.Name = name + "/" + rel
			if h.Typeflag == tar.TypeLink {
				h.Linkname = name + "/" + strings.TrimPrefix(h.Linkname, "./")
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("copy %s: %w", src, err)
		}
		n, err := io.Copy(tw, tr)
		if err != nil {
			return nil, fmt.Errorf("copy %s: %w", src, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			res.Dirs++
		case tar.TypeSymlink:
			res.Symlinks++
		default:
			res.Files++
		}
		res.Bytes += n
	}
	return res, tw.Close()
}

// CopyToTar unpacks the tar stream r (plain or compressed) into the
// sandbox directory sandboxDir (created if missing), as `docker cp -
// SB:DIR` does. The executor unpacks it with the rules of
// POST /v1/files/upload?extract=1: entries stay inside sandboxDir.
func (c *Client) CopyToTar(ctx context.Context, r io.Reader, sandboxDir string) (*CopyResult, error) {
	dst, _ := sandboxPath(sandboxDir)
	up, err := c.Upload(ctx, dst, r, UploadOptions{Extract: true})
	if err != nil {
		return nil, fmt.Errorf("copy a tar stream to %s: %w", dst, err)
	}
	res := &CopyResult{Dst: dst, Dir: true}
	if a := up.Archive; a != nil {
		res.Files, res.Dirs, res.Symlinks, res.Bytes = a.Files+a.Links, a.Dirs, a.Symlinks, a.Bytes
	}
	return res, nil
}
