// Package fileserver is the executor's files service: the /v1/files
// routes (read, write, delete, stat, list, move, upload, download). Package
// executor/files does the work; this package parses the queries, bounds
// the memory a read holds, and converts the results to the wire types of
// executor/api. It is a package of its own, not part of executor/files, so
// that the library stays free of HTTP (its fuzzers and tests need no
// server, and the Go client uses it on the host for bothy cp) while the
// services share executor/httpapi, which maps the library's errors.
package fileserver

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/files"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
	"github.com/bothy-sandbox/bothy/executor/internal/users"
	"github.com/bothy-sandbox/bothy/internal/passwd"
)

// Options configure the files service.
type Options struct {
	// MaxUpload caps an uploaded or written file and an unpacked archive.
	MaxUpload int64
	// Bodies reads JSON bodies and reserves the memory of reads.
	Bodies *httpapi.Bodies
	// Log receives failures that happen too late to answer.
	Log *slog.Logger
	// Owner owns the files and directories writes and uploads create
	// unless a request says otherwise (uid and gid, or user): the
	// sandbox's default user; nil: the executor's own. LookupUser
	// resolves a request's user.
	Owner      *files.Owner
	LookupUser func(spec string) (*passwd.Cred, error)
}

// Service serves the /v1/files routes.
type Service struct{ opts Options }

// New returns the files service.
func New(opts Options) *Service { return &Service{opts: opts} }

// Routes lists the routes of the service.
func (s *Service) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: "GET", Path: "/v1/files", Files: true, Summary: "read a file (lines, or an image/PDF as a data URL)", Handler: s.handleRead},
		{Method: "PUT", Path: "/v1/files", Files: true, Summary: "write a file from the raw body", Handler: s.handleWrite},
		{Method: "DELETE", Path: "/v1/files", Files: true, Summary: "delete a file or directory", Handler: s.handleDelete},
		{Method: "GET", Path: "/v1/files/stat", Files: true, Summary: "describe a file", Handler: s.handleStat},
		{Method: "GET", Path: "/v1/files/list", Files: true, Summary: "list a directory", Handler: s.handleList},
		{Method: "POST", Path: "/v1/files/move", Files: true, Summary: "move or rename", Handler: s.handleMove},
		{Method: "POST", Path: "/v1/files/upload", Files: true, Summary: "upload files (multipart or raw), unpacking archives on request", Handler: s.handleUpload},
		{Method: "GET", Path: "/v1/files/download", Files: true, Summary: "download a file, or a directory as zip or tar", Handler: s.handleDownload},
	}
}

func (s *Service) handleRead(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "start", "end", "max_bytes")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	if fq.maxBytes == 0 || fq.maxBytes > files.DefaultMaxReadBytes {
		fq.maxBytes = files.DefaultMaxReadBytes
	}
	mem, err := s.opts.Bodies.ReserveFile(r.Context(), fq.path, budget.ReadCost(fq.maxBytes))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	defer mem.Release()
	res, err := files.Read(r.Context(), fq.path, files.ReadOptions{Start: fq.start, End: fq.end, MaxBytes: fq.maxBytes})
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, wireContent(res))
}

func (s *Service) handleWrite(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "mode", "uid", "gid", "user", "append", "exclusive")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	newOwner, err := s.newOwner(fq)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	in, err := files.Write(r.Context(), fq.path, r.Body, files.WriteOptions{
		Mode: fq.mode, Owner: fq.owner, NewOwner: newOwner, Append: fq.append, Exclusive: fq.exclusive, MaxBytes: s.opts.MaxUpload,
	})
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, wireInfo(in))
}

// newOwner is the owner of what a write or upload creates: the request's
// user (root: the executor's own, nil), else the service's default. uid
// and gid, when given, win (files.WriteOptions.Owner).
func (s *Service) newOwner(fq fileQuery) (*files.Owner, error) {
	switch {
	case fq.owner != nil:
		return nil, nil
	case fq.user == "":
		return s.opts.Owner, nil
	}
	c, err := users.Resolve(fq.user, nil, s.opts.LookupUser)
	if err != nil {
		return nil, httpapi.BadRequest(fmt.Errorf("user %q: %w", fq.user, err))
	}
	if c == nil { // root: the executor's own
		return nil, nil
	}
	return &files.Owner{UID: int(c.UID), GID: int(c.GID)}, nil
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "recursive")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	if err := files.Delete(r.Context(), fq.path, files.DeleteOptions{Recursive: fq.recursive}); err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Deleted{Path: path.Clean(fq.path)})
}

func (s *Service) handleStat(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "follow")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	p := fq.path
	if fq.follow {
		if resolved, err := filepath.EvalSymlinks(p); err == nil {
			p = resolved
		}
	}
	s.stat(w, r, p)
}

// stat answers the description of the file at p.
func (s *Service) stat(w http.ResponseWriter, r *http.Request, p string) {
	in, err := files.Stat(r.Context(), p)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, wireInfo(in))
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "recursive", "max_depth", "hidden")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	list, err := files.List(r.Context(), fq.path, files.ListOptions{
		Recursive: fq.recursive, MaxDepth: fq.maxDepth, SkipHidden: !fq.hidden,
	})
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	entries := make([]api.FileInfo, len(list))
	for i := range list {
		entries[i] = *wireInfo(&list[i])
	}
	httpapi.WriteJSON(w, http.StatusOK, api.FileList{Entries: entries})
}

func (s *Service) handleMove(w http.ResponseWriter, r *http.Request) {
	var req api.MoveRequest
	if err := s.opts.Bodies.Decode(w, r, &req); err != nil {
		httpapi.Error(w, err)
		return
	}
	if req.Src == "" || req.Dst == "" {
		httpapi.Error(w, httpapi.BadRequest(errors.New("src and dst are required")))
		return
	}
	if err := files.Move(r.Context(), req.Src, req.Dst, files.MoveOptions{Overwrite: req.Overwrite}); err != nil {
		httpapi.Error(w, err)
		return
	}
	s.stat(w, r, req.Dst)
}

// handleUpload stores the raw body at path (a file, or with extract a
// zip/tar(.gz) unpacked into the directory path), or each "file" part of a
// multipart/form-data body: with extract unpacked into path, otherwise
// stored at path/<part's file name> when path is a directory or ends with
// "/", at path itself for a single part.
func (s *Service) handleUpload(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "extract", "mode", "uid", "gid", "user", "format")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	newOwner, err := s.newOwner(fq)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	archiveOwner := fq.owner
	if archiveOwner == nil {
		archiveOwner = newOwner
	}
	opts := files.UploadOptions{
		Extract: fq.extract,
		Write:   files.WriteOptions{Mode: fq.mode, Owner: fq.owner, NewOwner: newOwner, MaxBytes: s.opts.MaxUpload},
		Archive: files.ExtractOptions{
			Format: fq.format, Owner: archiveOwner, MaxBytes: s.opts.MaxUpload,
			// The client made the archive for this sandbox: its symlinks
			// are the client's business (extraction never follows them).
			Symlinks: files.SymlinksKeep,
		},
	}
	if !httpapi.IsMultipart(r) {
		res, err := files.Upload(r.Context(), fq.path, r.Body, opts)
		if err != nil {
			httpapi.Error(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, api.UploadList{Uploads: []api.UploadResult{wireUpload(res)}})
		return
	}
	list, err := s.uploadParts(r, fq, opts)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, &api.UploadList{Uploads: list})
}

// uploadParts stores the "file" parts of r's multipart body (see
// handleUpload).
func (s *Service) uploadParts(r *http.Request, fq fileQuery, opts files.UploadOptions) ([]api.UploadResult, error) {
	parts, err := httpapi.NewFileParts(r)
	if err != nil {
		return nil, err
	}
	intoDir := fq.extract || strings.HasSuffix(fq.path, "/")
	if fi, err := os.Stat(fq.path); err == nil && fi.IsDir() {
		intoDir = true
	}
	list := []api.UploadResult{}
	for {
		part, err := parts.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		dst := fq.path
		if intoDir && !fq.extract {
			name, err := httpapi.UploadName(part)
			if err != nil {
				return nil, err
			}
			dst = path.Join(fq.path, name)
		} else if !fq.extract && len(list) > 0 {
			return nil, httpapi.BadRequest(fmt.Errorf("several files uploaded to %s, which is not a directory (end it with /)", fq.path))
		}
		res, err := files.Upload(r.Context(), dst, part, opts)
		part.Close()
		if err != nil {
			return nil, err
		}
		list = append(list, wireUpload(res))
	}
	if len(list) == 0 {
		return nil, httpapi.BadRequest(httpapi.ErrNoFilePart)
	}
	return list, nil
}

func (s *Service) handleDownload(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "format")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	s.ServeDownload(w, r, fq.path, fq.format)
}

// ServeDownload sends the file at p as itself, a directory as an archive
// in format.
func (s *Service) ServeDownload(w http.ResponseWriter, r *http.Request, p string, format files.ArchiveFormat) {
	d, err := files.OpenDownload(r.Context(), p, files.DownloadOptions{Format: format})
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", d.MIME)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": d.Name}))
	h.Set(api.HeaderFileMode, fmt.Sprintf("%04o", d.Mode))
	if d.Dir {
		h.Set(api.HeaderFileType, "dir")
	} else {
		h.Set(api.HeaderFileType, "file")
		h.Set("Content-Length", strconv.FormatInt(d.Size, 10))
	}
	if !d.ModTime.IsZero() {
		h.Set("Last-Modified", d.ModTime.UTC().Format(http.TimeFormat))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		d.Close()
		return
	}
	if err := d.Stream(r.Context(), w); err != nil {
		// Too late for a status: cut the connection so the client sees a
		// broken body rather than a short one.
		s.opts.Log.Warn("download failed", "path", p, "err", err)
		panic(http.ErrAbortHandler)
	}
}
