package executor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/files"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
)

// fileQuery is the query of the /v1/files routes, parsed and validated.
type fileQuery struct {
	path      string
	start     int // read: first line, 1-based
	end       int // read: last line, inclusive; -1 = end of file
	maxBytes  int64
	mode      fs.FileMode // write, upload: 0 = keep / default
	owner     *files.Owner
	append    bool
	exclusive bool
	recursive bool
	maxDepth  int
	hidden    bool // list: include hidden entries (default true)
	extract   bool
	follow    bool // stat: describe a final symlink's target
	format    files.ArchiveFormat
}

// parseFileQuery parses the query of a /v1/files route; allowed names the
// parameters the route takes (path is always required). Unknown parameters
// are refused, as unknown JSON fields are.
func parseFileQuery(q url.Values, allowed ...string) (fileQuery, error) {
	fq := fileQuery{end: -1, hidden: true}
	for k, v := range q {
		if k != "path" && !slices.Contains(allowed, k) {
			return fq, httpapi.BadRequest(fmt.Errorf("unknown query parameter %q", k))
		}
		if len(v) != 1 {
			return fq, httpapi.BadRequest(fmt.Errorf("query parameter %q given %d times", k, len(v)))
		}
	}
	fq.path = q.Get("path")
	if fq.path == "" {
		return fq, httpapi.BadRequest(errors.New("query parameter path is required"))
	}
	if !strings.HasPrefix(fq.path, "/") || strings.IndexByte(fq.path, 0) >= 0 {
		return fq, httpapi.BadRequest(fmt.Errorf("path %q must be absolute", fq.path))
	}
	intParam := func(name string, min, def int) (int, error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return 0, httpapi.BadRequest(fmt.Errorf("%s %q is not an integer ≥ %d", name, v, min))
		}
		return n, nil
	}
	boolParam := func(name string, def bool) (bool, error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		b, ok := httpapi.ParseBool(v)
		if !ok {
			return false, httpapi.BadRequest(fmt.Errorf("%s %q is not a boolean", name, v))
		}
		return b, nil
	}
	var err error
	if fq.start, err = intParam("start", 1, 1); err != nil {
		return fq, err
	}
	if fq.end, err = intParam("end", -1, -1); err != nil {
		return fq, err
	}
	if fq.end == 0 {
		fq.end = -1
	}
	if fq.maxDepth, err = intParam("max_depth", 0, 0); err != nil {
		return fq, err
	}
	if v := q.Get("max_bytes"); v != "" {
		if fq.maxBytes, err = strconv.ParseInt(v, 10, 64); err != nil || fq.maxBytes < 1 {
			return fq, httpapi.BadRequest(fmt.Errorf("max_bytes %q is not a positive integer", v))
		}
	}
	if v := q.Get("mode"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o7777 {
			return fq, httpapi.BadRequest(fmt.Errorf("mode %q is not octal permission bits (0644)", v))
		}
		fq.mode = fs.FileMode(m)
	}
	uid, gid := q.Get("uid"), q.Get("gid")
	if (uid == "") != (gid == "") {
		return fq, httpapi.BadRequest(errors.New("uid and gid go together"))
	}
	if uid != "" {
		u, err1 := strconv.ParseUint(uid, 10, 31)
		g, err2 := strconv.ParseUint(gid, 10, 31)
		if err1 != nil || err2 != nil {
			return fq, httpapi.BadRequest(fmt.Errorf("uid %q and gid %q must be numeric ids", uid, gid))
		}
		fq.owner = &files.Owner{UID: int(u), GID: int(g)}
	}
	for _, b := range []struct {
		name string
		dst  *bool
		def  bool
	}{
		{"append", &fq.append, false}, {"exclusive", &fq.exclusive, false},
		{"recursive", &fq.recursive, false}, {"hidden", &fq.hidden, true}, {"extract", &fq.extract, false},
		{"follow", &fq.follow, false},
	} {
		if *b.dst, err = boolParam(b.name, b.def); err != nil {
			return fq, err
		}
	}
	switch f := files.ArchiveFormat(q.Get("format")); f {
	case files.FormatAuto, files.FormatZip, files.FormatTar, files.FormatTarGz:
		fq.format = f
	default:
		return fq, httpapi.BadRequest(fmt.Errorf("format %q is not zip, tar or tar.gz", f))
	}
	if fq.append && fq.exclusive {
		return fq, httpapi.BadRequest(errors.New("append and exclusive are exclusive"))
	}
	return fq, nil
}

func statDir(p string) (bool, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

func (s *Server) handleFileRead(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "start", "end", "max_bytes")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	if fq.maxBytes == 0 || fq.maxBytes > files.DefaultMaxReadBytes {
		fq.maxBytes = files.DefaultMaxReadBytes
	}
	mem, err := s.bodies.ReserveFile(r.Context(), fq.path, budget.ReadCost(fq.maxBytes))
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

// editorCost is an editor command: the file as bytes and text, the new
// text, the undo entry, the diff and the response, which carries the old
// and new texts (files over editor.DefaultMaxFileSize are refused unread).
func editorCost(size int64) int64 {
	if size > editor.DefaultMaxFileSize {
		return 0
	}
	return 8 * size
}

func (s *Server) handleFileWrite(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "mode", "uid", "gid", "append", "exclusive")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	in, err := files.Write(r.Context(), fq.path, r.Body, files.WriteOptions{
		Mode: fq.mode, Owner: fq.owner, Append: fq.append, Exclusive: fq.exclusive, MaxBytes: s.opts.MaxUpload,
	})
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, wireInfo(in))
}

func (s *Server) handleFileDelete(w http.ResponseWriter, r *http.Request) {
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

func (s *Server) handleFileStat(w http.ResponseWriter, r *http.Request) {
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
	in, err := files.Stat(r.Context(), p)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, wireInfo(in))
}

func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request) {
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

func (s *Server) handleFileMove(w http.ResponseWriter, r *http.Request) {
	var req api.MoveRequest
	body, res, err := s.bodies.JSON(w, r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	err = httpapi.Decode(body, &req)
	res.Release()
	if err != nil {
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
	in, err := files.Stat(r.Context(), req.Dst)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, wireInfo(in))
}

// handleFileUpload stores the raw body at path (a file, or with extract a
// zip/tar(.gz) unpacked into the directory path), or each "file" part of a
// multipart/form-data body: with extract unpacked into path, otherwise
// stored at path/<part's file name> when path is a directory or ends with
// "/", at path itself for a single part.
func (s *Server) handleFileUpload(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "extract", "mode", "uid", "gid", "format")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	ctx := r.Context()
	opts := files.UploadOptions{
		Extract: fq.extract,
		Write:   files.WriteOptions{Mode: fq.mode, Owner: fq.owner, MaxBytes: s.opts.MaxUpload},
		Archive: files.ExtractOptions{
			Format: fq.format, Owner: fq.owner, MaxBytes: s.opts.MaxUpload,
			// The client made the archive for this sandbox: its symlinks
			// are the client's business (extraction never follows them).
			Symlinks: files.SymlinksKeep,
		},
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		res, err := files.Upload(ctx, fq.path, r.Body, opts)
		if err != nil {
			httpapi.Error(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, api.UploadList{Uploads: []api.UploadResult{wireUpload(res)}})
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("read multipart body: %w", err)))
		return
	}
	intoDir := fq.extract || strings.HasSuffix(fq.path, "/")
	if isDir, err := statDir(fq.path); err == nil && isDir {
		intoDir = true
	}
	list := api.UploadList{Uploads: []api.UploadResult{}}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("read multipart body: %w", err)))
			return
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		dst := fq.path
		if intoDir && !fq.extract {
			name, err := httpapi.UploadName(part)
			if err != nil {
				httpapi.Error(w, err)
				return
			}
			dst = path.Join(fq.path, name)
		} else if !fq.extract && len(list.Uploads) > 0 {
			httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("several files uploaded to %s, which is not a directory (end it with /)", fq.path)))
			return
		}
		res, err := files.Upload(ctx, dst, part, opts)
		part.Close()
		if err != nil {
			httpapi.Error(w, err)
			return
		}
		list.Uploads = append(list.Uploads, wireUpload(res))
	}
	if len(list.Uploads) == 0 {
		httpapi.Error(w, httpapi.BadRequest(errors.New(`multipart body has no "file" part`)))
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, &list)
}

func (s *Server) handleFileDownload(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFileQuery(r.URL.Query(), "format")
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	s.download(w, r, fq.path, fq.format)
}

// download sends a file as itself and a directory as an archive.
func (s *Server) download(w http.ResponseWriter, r *http.Request, p string, format files.ArchiveFormat) {
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
		s.log.Warn("download failed", "path", p, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// decodeEditor decodes the body of POST /v1/editor.
func decodeEditor(r io.Reader) (editor.Command, error) {
	var cmd api.EditorCommand
	if err := httpapi.Decode(r, &cmd); err != nil {
		return editor.Command{}, err
	}
	return editor.Command(cmd), nil
}

func (s *Server) handleEditor(w http.ResponseWriter, r *http.Request) {
	body, mem, err := s.bodies.JSON(w, r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	defer mem.Release()
	cmd, err := decodeEditor(body)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	fmem, err := s.bodies.ReserveFile(r.Context(), cmd.Path, editorCost)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	defer fmem.Release()
	res, err := s.editor.Do(r.Context(), cmd)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	out := api.EditorResult{
		Output: res.Output, Path: res.Path, PrevExist: res.PrevExist,
		OldContent: res.OldContent, NewContent: res.NewContent,
	}
	if cmd.Command != "view" {
		out.Diff = editor.Diff(res.OldContent, res.NewContent, res.Path)
	}
	httpapi.WriteJSON(w, http.StatusOK, &out)
}

// wireInfo converts a file's description to the wire.
func wireInfo(in *files.Info) *api.FileInfo {
	return &api.FileInfo{
		Path: in.Path, Name: in.Name, Type: api.FileType(in.Type), Size: in.Size, Mode: in.Mode,
		ModTime: in.ModTime, UID: in.UID, GID: in.GID, LinkTarget: in.LinkTarget,
	}
}

// wireContent converts a read's result to the wire.
func wireContent(r *files.ReadResult) *api.FileContent {
	return &api.FileContent{
		Path: r.Path, Kind: api.FileKind(r.Kind), MIME: r.MIME, Content: r.Content, Size: r.Size,
		Start: r.Start, End: r.End, TotalLines: r.TotalLines, Truncated: r.Truncated,
	}
}

// wireUpload converts an upload's result to the wire.
func wireUpload(r *files.UploadResult) api.UploadResult {
	out := api.UploadResult{Path: r.Path}
	if r.File != nil {
		out.File = wireInfo(r.File)
	}
	if r.Archive != nil {
		x := api.ExtractResult(*r.Archive)
		out.Archive = &x
	}
	return out
}
