package openhands

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/files"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

// handleUploadFile is OpenHands' POST /upload_file: the multipart part
// "file" is stored in the directory ?destination= (created) under its file
// name or, with ?recursive=true, unpacked there (OpenHands' client zips
// directories).
func (s *Service) handleUploadFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	dest := q.Get("destination")
	if dest == "" {
		dest = "/"
	}
	if !filepath.IsAbs(dest) {
		httpapi.Error(w, httpapi.BadRequest(errors.New("Destination must be an absolute path")))
		return
	}
	recursive := false
	if v := q.Get("recursive"); v != "" {
		var ok bool
		if recursive, ok = httpapi.ParseBool(v); !ok {
			httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("recursive %q is not a boolean", v)))
			return
		}
	}
	if !httpapi.IsMultipart(r) {
		httpapi.Error(w, httpapi.BadRequest(errors.New(`upload_file takes a multipart/form-data body with a "file" part`)))
		return
	}
	res, err := s.upload(r, dest, recursive)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
}

// upload stores the first "file" part of r's multipart body in the
// directory dest (created) under its file name, or unpacks it there.
func (s *Service) upload(r *http.Request, dest string, recursive bool) (*api.UploadFileResult, error) {
	parts, err := httpapi.NewFileParts(r)
	if err != nil {
		return nil, err
	}
	part, err := parts.Next()
	if errors.Is(err, io.EOF) {
		return nil, httpapi.BadRequest(httpapi.ErrNoFilePart)
	}
	if err != nil {
		return nil, err
	}
	defer part.Close()
	name, err := httpapi.UploadName(part)
	if err != nil {
		return nil, err
	}
	if err := mkdirAll(dest); err != nil {
		return nil, err
	}
	if recursive {
		_, err = files.Extract(r.Context(), part, dest, files.ExtractOptions{MaxBytes: s.opts.MaxUpload, Owner: s.opts.Owner, Symlinks: files.SymlinksKeep})
	} else {
		_, err = files.Write(r.Context(), path.Join(dest, name), part, files.WriteOptions{MaxBytes: s.opts.MaxUpload, NewOwner: s.opts.Owner})
	}
	if err != nil {
		return nil, err
	}
	return &api.UploadFileResult{Filename: name, Destination: dest, Recursive: recursive}, nil
}

func mkdirAll(dir string) error {
	if err := os.MkdirAll(dir, files.DefaultDirMode); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: %w", dir, files.ErrNotDir)
		}
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

// handleDownloadFiles is OpenHands' GET /download_files?path=: a directory
// as a zip; a file as itself (OpenHands sends an empty zip).
func (s *Service) handleDownloadFiles(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if !filepath.IsAbs(p) {
		httpapi.Error(w, httpapi.BadRequest(errors.New("Path must be an absolute path")))
		return
	}
	s.opts.Downloads.ServeDownload(w, r, p, files.FormatZip)
}

// handleListFiles is OpenHands' POST /list_files.
func (s *Service) handleListFiles(w http.ResponseWriter, r *http.Request) {
	var req api.ListFilesRequest
	body, mem, err := s.opts.Bodies.JSON(w, r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	err = httpapi.DecodeLenient(body, &req)
	mem.Release()
	if err != nil && !errors.Is(err, httpapi.ErrEmptyBody) { // no body: the working directory
		httpapi.Error(w, err)
		return
	}
	dir := s.opts.Cwd
	if req.Path != nil {
		dir = *req.Path
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(s.opts.Cwd, dir)
		}
	}
	names, err := files.ListNames(r.Context(), dir)
	if err != nil {
		// As OpenHands: the UI gets an empty list, the log the reason.
		s.opts.Log.Warn("list files", "path", dir, "err", err)
		names = []string{}
	}
	httpapi.WriteJSON(w, http.StatusOK, names)
}
