package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// filesPath builds a /v1/files route with its query.
func filesPath(route, path string, q url.Values) string {
	if q == nil {
		q = url.Values{}
	}
	q.Set("path", path)
	return route + "?" + q.Encode()
}

// rawCall sends body (nil for none) with contentType and decodes the JSON
// answer into out.
func (c *Client) rawCall(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.key != "" {
		req.Header.Set(api.APIKeyHeader, c.key)
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", method, req.URL.Path, err)
	}
	return nil
}

// ReadOptions select the lines GetFile returns.
type ReadOptions struct {
	Start, End int   // 1-based, inclusive; 0 = from the start / to the end
	MaxBytes   int64 // 0 = the executor's default (10 MiB)
}

// ReadFile reads a file: the requested lines of a text file, an image or
// PDF as a data: URL, or only the kind of another binary file.
func (c *Client) ReadFile(ctx context.Context, path string, opts ReadOptions) (*api.FileContent, error) {
	q := url.Values{}
	if opts.Start > 0 {
		q.Set("start", strconv.Itoa(opts.Start))
	}
	if opts.End > 0 {
		q.Set("end", strconv.Itoa(opts.End))
	}
	if opts.MaxBytes > 0 {
		q.Set("max_bytes", strconv.FormatInt(opts.MaxBytes, 10))
	}
	return callFor[api.FileContent](ctx, c, "GET", filesPath("/v1/files", path, q), nil)
}

// WriteOptions control WriteFile.
type WriteOptions struct {
	// Mode sets the permission bits (0: keep an existing file's, 0644 for
	// a new one).
	Mode fs.FileMode
	// Owner sets the file's owner.
	Owner *api.Owner
	// User (NAME|UID[:GROUP|GID], or root) owns the file and the parents
	// the write creates, instead of the sandbox's default user; an
	// existing file keeps its owner. Not with Owner.
	User string
	// Append adds to the end instead of replacing the file atomically.
	Append bool
	// Exclusive fails with api.ErrConflict when the file exists.
	Exclusive bool
}

func writeQuery(mode fs.FileMode, owner *api.Owner) url.Values {
	q := url.Values{}
	if mode != 0 {
		q.Set("mode", fmt.Sprintf("%04o", uint32(mode.Perm())|uint32(setBits(mode))))
	}
	if owner != nil {
		q.Set("uid", strconv.Itoa(owner.UID))
		q.Set("gid", strconv.Itoa(owner.GID))
	}
	return q
}

// setBits converts Go's setuid, setgid and sticky bits to Unix's.
func setBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 || m&0o4000 != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 || m&0o2000 != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 || m&0o1000 != 0 {
		b |= 0o1000
	}
	return b
}

// WriteFile writes r to the file path (parents are created).
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader, opts WriteOptions) (*api.FileInfo, error) {
	q := writeQuery(opts.Mode, opts.Owner)
	if opts.User != "" {
		q.Set("user", opts.User)
	}
	if opts.Append {
		q.Set("append", "1")
	}
	if opts.Exclusive {
		q.Set("exclusive", "1")
	}
	var in api.FileInfo
	if err := c.rawCall(ctx, "PUT", filesPath("/v1/files", path, q), r, "application/octet-stream", &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Stat describes path (a final symlink is described, not followed).
func (c *Client) Stat(ctx context.Context, path string) (*api.FileInfo, error) {
	return c.stat(ctx, path, false)
}

// StatFollow describes path, or the target of a final symlink.
func (c *Client) StatFollow(ctx context.Context, path string) (*api.FileInfo, error) {
	return c.stat(ctx, path, true)
}

func (c *Client) stat(ctx context.Context, path string, follow bool) (*api.FileInfo, error) {
	q := url.Values{}
	if follow {
		q.Set("follow", "1")
	}
	return callFor[api.FileInfo](ctx, c, "GET", filesPath("/v1/files/stat", path, q), nil)
}

// ListOptions control ListFiles.
type ListOptions struct {
	Recursive  bool
	MaxDepth   int // with Recursive: 1 = the directory's entries only; 0 = no limit
	SkipHidden bool
}

// ListFiles lists directory path.
func (c *Client) ListFiles(ctx context.Context, path string, opts ListOptions) ([]api.FileInfo, error) {
	q := url.Values{}
	if opts.Recursive {
		q.Set("recursive", "1")
	}
	if opts.MaxDepth > 0 {
		q.Set("max_depth", strconv.Itoa(opts.MaxDepth))
	}
	if opts.SkipHidden {
		q.Set("hidden", "0")
	}
	var l api.FileList
	if err := c.call(ctx, "GET", filesPath("/v1/files/list", path, q), nil, &l); err != nil {
		return nil, err
	}
	return l.Entries, nil
}

// Move renames src to dst (the new path); overwrite replaces a file or
// empty directory there.
func (c *Client) Move(ctx context.Context, src, dst string, overwrite bool) (*api.FileInfo, error) {
	return callFor[api.FileInfo](ctx, c, "POST", "/v1/files/move", &api.MoveRequest{Src: src, Dst: dst, Overwrite: overwrite})
}

// Delete removes a file, symlink or (with recursive, non-empty)
// directory.
func (c *Client) Delete(ctx context.Context, path string, recursive bool) error {
	q := url.Values{}
	if recursive {
		q.Set("recursive", "1")
	}
	return c.call(ctx, "DELETE", filesPath("/v1/files", path, q), nil, nil)
}

// UploadOptions control Upload.
type UploadOptions struct {
	// Extract unpacks a zip or tar(.gz) stream into the directory dst.
	Extract bool
	// Format of the archive (detected when empty).
	Format api.ArchiveFormat
	// Mode and Owner apply to a file (see WriteOptions); Owner also to
	// unpacked entries.
	Mode  fs.FileMode
	Owner *api.Owner
}

// Upload stores the stream r at dst: as a file or, with Extract, unpacked
// into the directory dst.
func (c *Client) Upload(ctx context.Context, dst string, r io.Reader, opts UploadOptions) (*api.UploadResult, error) {
	q := writeQuery(opts.Mode, opts.Owner)
	if opts.Extract {
		q.Set("extract", "1")
	}
	if opts.Format != api.FormatAuto {
		q.Set("format", string(opts.Format))
	}
	var l api.UploadList
	if err := c.rawCall(ctx, "POST", filesPath("/v1/files/upload", dst, q), r, "application/octet-stream", &l); err != nil {
		return nil, err
	}
	if len(l.Uploads) != 1 {
		return nil, fmt.Errorf("upload %s: the executor answered %d results", dst, len(l.Uploads))
	}
	return &l.Uploads[0], nil
}

// Download is a file or directory archive being received.
type Download struct {
	// Body is the file, or the archive of a directory; close it.
	Body io.ReadCloser
	// Name is the file name the executor suggests (base name, plus the
	// archive extension for a directory).
	Name string
	MIME string
	// Dir says Body is an archive of a directory.
	Dir bool
	// Mode holds the permission bits of the file or directory.
	Mode fs.FileMode
	// Size is the length of a file, -1 for an archive.
	Size int64
}

// Download opens path for download: a file as itself, a directory as an
// archive in format (zip when empty).
func (c *Client) Download(ctx context.Context, path string, format api.ArchiveFormat) (*Download, error) {
	q := url.Values{}
	if format != api.FormatAuto {
		q.Set("format", string(format))
	}
	req, err := c.newRequest(ctx, "GET", filesPath("/v1/files/download", path, q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	d := &Download{Body: resp.Body, MIME: resp.Header.Get("Content-Type"), Size: resp.ContentLength,
		Dir: resp.Header.Get(api.HeaderFileType) == "dir"}
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		d.Name = params["filename"]
	}
	if m, err := strconv.ParseUint(resp.Header.Get(api.HeaderFileMode), 8, 32); err == nil {
		d.Mode = fs.FileMode(m) & fs.ModePerm
	}
	if d.Dir {
		d.Size = -1
	}
	return d, nil
}

// Edit runs a str_replace_editor command. A command the editor refuses is
// an *api.Error with code tool_error (errors.Is(err, api.ErrToolError))
// whose Message is the text for the agent.
func (c *Client) Edit(ctx context.Context, cmd api.EditorCommand) (*api.EditorResult, error) {
	return callFor[api.EditorResult](ctx, c, "POST", "/v1/editor", &cmd)
}
