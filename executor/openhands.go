package executor

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/bash"
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/files"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
)

// The OpenHands dialect: OpenHands' action execution server
// (openhands/runtime/action_execution_server.py) on the same engine. Where
// OpenHands answers 500 for a caller's mistake this answers 4xx JSON, and
// where it crashes on a request it could serve it serves it; docs/api.md
// lists the differences.

// decodeExecuteAction decodes the body of POST /execute_action.
func decodeExecuteAction(r io.Reader) (*api.Action, error) {
	var req api.ExecuteActionRequest
	if err := httpapi.DecodeLenient(r, &req); err != nil {
		return nil, err
	}
	a := req.Action
	if a == nil {
		return nil, httpapi.BadRequest(errors.New(`"action" is required`))
	}
	if a.Action == "" {
		return nil, httpapi.BadRequest(errors.New(`"action" has no action type`))
	}
	if t := a.Timeout; t != nil && (*t != *t || *t < 0 || *t > 1e9) {
		return nil, httpapi.BadRequest(fmt.Errorf("timeout %v out of range", *t))
	}
	if len(a.Args) == 0 || bytes.Equal(a.Args, []byte("null")) {
		a.Args = json.RawMessage("{}")
	}
	return a, nil
}

// decodeArgs decodes an action's args into v (which holds the defaults).
func decodeArgs(a *api.Action, v any) error {
	if err := json.Unmarshal(a.Args, v); err != nil {
		return httpapi.BadRequest(fmt.Errorf("%s action has the wrong arguments: %w", a.Action, err))
	}
	return nil
}

func (s *Server) handleExecuteAction(w http.ResponseWriter, r *http.Request) {
	body, mem, err := s.bodies.JSON(w, r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	a, err := decodeExecuteAction(body)
	if err != nil {
		mem.Release()
		httpapi.Error(w, err)
		return
	}
	switch a.Action {
	case api.ActionRead, api.ActionWrite, api.ActionEdit:
		// Short, and they work on what the body carries.
		defer mem.Release()
	default:
		// Commands and plugins' actions may run for long: what their body
		// turned into is small or handed over.
		mem.Release()
	}
	if s.plugins.Claims(a.Action) {
		s.executePlugin(w, r, a)
		return
	}
	var obs *api.Observation
	switch a.Action {
	case api.ActionRun:
		obs, err = s.actionRun(r.Context(), a)
	case api.ActionRead:
		obs, err = s.actionRead(r.Context(), a)
	case api.ActionWrite:
		obs, err = s.actionWrite(r.Context(), a)
	case api.ActionEdit:
		obs, err = s.actionEdit(r.Context(), a)
	default:
		if slices.Contains(pluginActions, a.Action) {
			obs = unavailableObservation(a.Action)
			break
		}
		err = httpapi.BadRequest(fmt.Errorf("action %q is not executed by this runtime (it executes run, read, write, edit, and plugins' actions)", a.Action))
	}
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, obs)
}

func (s *Server) resolve(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.sessions.WorkingDir(), p)
	}
	return filepath.Clean(p)
}

func (s *Server) actionRun(ctx context.Context, a *api.Action) (*api.Observation, error) {
	var args api.CmdRunArgs
	if err := decodeArgs(a, &args); err != nil {
		return nil, err
	}
	if args.Command == nil {
		return nil, httpapi.BadRequest(errors.New("run action: command is required"))
	}
	req := bash.RunRequest{Command: *args.Command, IsInput: args.IsInput, Blocking: args.Blocking}
	if a.Timeout != nil {
		req.Timeout = api.Seconds(*a.Timeout)
	}
	var res *bash.Result
	var err error
	if args.IsStatic {
		cwd := ""
		if args.Cwd != nil && *args.Cwd != "" {
			cwd = s.resolve(*args.Cwd)
		}
		res, err = s.sessions.RunStatic(ctx, cwd, req)
	} else {
		res, _, err = s.sessions.Run(ctx, api.DefaultSession, req)
	}
	switch {
	case errors.Is(err, httpapi.ErrShuttingDown):
		return nil, err
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return api.ErrorObservationOf(err.Error()), nil
	}
	return cmdOutputObservation(res, args.Hidden), nil
}

// cmdOutputObservation renders a bash result as OpenHands does
// (CmdOutputObservation, or ErrorObservation for multiple commands).
func cmdOutputObservation(res *bash.Result, hidden bool) *api.Observation {
	if res.Status == bash.StatusMultipleCommands {
		return api.ErrorObservationOf(res.Output)
	}
	md := res.Metadata
	meta := api.CmdOutputMetadata{ExitCode: md.ExitCode, PID: md.PID, Prefix: md.Prefix, Suffix: md.Suffix}
	if res.Status == bash.StatusCompleted {
		meta.Username, meta.Hostname = &md.Username, &md.Hostname
		meta.WorkingDir, meta.PyInterpreterPath = &md.WorkingDir, &md.PyInterpreterPath
	}
	obs := api.NewObservation(api.ObservationRun,
		fmt.Sprintf("Command `%s` executed with exit code %d.", res.Command, md.ExitCode),
		res.Output, api.CmdOutputExtras{Command: res.Command, Metadata: meta, Hidden: hidden})
	ok := md.ExitCode == 0
	obs.Success = &ok
	return obs
}

func readObservation(p, content, impl string) *api.Observation {
	return api.NewObservation(api.ObservationRead, "I read the file "+p+".", content,
		api.FileReadExtras{Path: p, ImplSource: impl})
}

// looksBinary reports whether p is a regular file whose start is not
// UTF-8 text (OpenHands: binaryornot, after a failed UTF-8 decode).
func looksBinary(ctx context.Context, p string) bool {
	res, err := files.Read(ctx, p, files.ReadOptions{Start: 1, End: 1, MaxBytes: 1})
	return err == nil && res.Kind != files.KindText
}

// videoTypes are the media OpenHands' read returns as data URLs besides
// images and PDFs (by extension, as Python's mimetypes names them).
var videoTypes = map[string]string{".mp4": "video/mp4", ".webm": "video/webm", ".ogg": "audio/ogg"}

func (s *Server) actionRead(ctx context.Context, a *api.Action) (*api.Observation, error) {
	args := api.FileReadArgs{End: -1}
	if err := decodeArgs(a, &args); err != nil {
		return nil, err
	}
	if args.Path == nil {
		return nil, httpapi.BadRequest(errors.New("read action: path is required"))
	}
	switch args.ImplSource {
	case api.ImplSourceOHACI:
		p := *args.Path
		if filepath.IsAbs(p) && looksBinary(ctx, p) && files.MediaTypeByName(p) == "" {
			return api.ErrorObservationOf("ERROR_BINARY_FILE"), nil
		}
		res, err := s.edit.Do(ctx, editor.Command{Command: "view", Path: p, ViewRange: args.ViewRange})
		content, err := editorOutput(res.Output, err)
		if err != nil {
			return nil, err
		}
		return readObservation(p, content, api.ImplSourceOHACI), nil
	case "", api.ImplSourceDefault:
	default:
		return nil, httpapi.BadRequest(fmt.Errorf("read action: unknown impl_source %q", args.ImplSource))
	}

	wd := s.sessions.WorkingDir()
	p := s.resolve(*args.Path)
	mem, err := s.bodies.ReserveFile(ctx, p, budget.ReadCost(files.DefaultMaxReadBytes))
	if err != nil {
		return nil, err
	}
	defer mem.Release()
	if mt, ok := videoTypes[strings.ToLower(filepath.Ext(p))]; ok {
		return readMedia(ctx, p, mt, wd)
	}
	res, err := files.Read(ctx, p, files.ReadOptions{})
	switch {
	case errors.Is(err, files.ErrNotFound):
		return api.ErrorObservationOf(fmt.Sprintf("File not found: %s. Your current working directory is %s.", p, wd)), nil
	case errors.Is(err, files.ErrIsDir):
		return api.ErrorObservationOf(fmt.Sprintf("Path is a directory: %s. You can only read files", p)), nil
	case err != nil:
		return api.ErrorObservationOf(fmt.Sprintf("Failed to read %s: %v", p, err)), nil
	}
	switch res.Kind {
	case files.KindImage, files.KindPDF:
		return readObservation(p, res.Content, api.ImplSourceDefault), nil
	case files.KindBinary:
		return api.ErrorObservationOf("ERROR_BINARY_FILE"), nil
	}
	return readObservation(p, pyReadLines(res.Content, args.Start, args.End), api.ImplSourceDefault), nil
}

// readMedia returns a video or audio file as a data URL.
func readMedia(ctx context.Context, p, mimeType, wd string) (*api.Observation, error) {
	d, err := files.OpenDownload(ctx, p, files.DownloadOptions{})
	switch {
	case errors.Is(err, files.ErrNotFound):
		return api.ErrorObservationOf(fmt.Sprintf("File not found: %s. Your current working directory is %s.", p, wd)), nil
	case err != nil:
		return api.ErrorObservationOf(fmt.Sprintf("Failed to read %s: %v", p, err)), nil
	case d.Dir:
		return api.ErrorObservationOf(fmt.Sprintf("Path is a directory: %s. You can only read files", p)), nil
	case d.Size > files.DefaultMaxReadBytes:
		d.Close()
		return api.ErrorObservationOf(fmt.Sprintf("Failed to read %s: %d bytes, over the %d byte limit", p, d.Size, files.DefaultMaxReadBytes)), nil
	}
	var buf bytes.Buffer
	if err := d.Stream(ctx, &buf); err != nil {
		return api.ErrorObservationOf(fmt.Sprintf("Failed to read %s: %v", p, err)), nil
	}
	return readObservation(p, "data:"+mimeType+";base64,"+b64(buf.Bytes()), api.ImplSourceDefault), nil
}

// OpenHands' read and write actions work on Python line lists
// (readlines); these work on line ranges of the text itself, so that a
// text of many short lines costs no slice of lines.

// lineCount is the number of lines of text as Python's readlines counts
// them (a last line without "\n" counts).
func lineCount(text string) int {
	n := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}

// lineOffset returns where line k (0-based) of text starts, len(text)
// past the last line.
func lineOffset(text string, k int) int {
	off := 0
	for ; k > 0; k-- {
		i := strings.IndexByte(text[off:], '\n')
		if i < 0 {
			return len(text)
		}
		off += i + 1
	}
	return off
}

// pySliceText is Python's "".join(lines[i:j]) for the n lines of text
// (negative indexes count from the end, out-of-range ones are clamped).
func pySliceText(text string, n, i, j int) string {
	clamp := func(k int) int {
		if k < 0 {
			k += n
		}
		return max(0, min(k, n))
	}
	i, j = clamp(i), clamp(j)
	if i >= j {
		return ""
	}
	a := lineOffset(text, i)
	return text[a : a+lineOffset(text[a:], j-i)]
}

// pyReadLines is OpenHands' read_lines: 0-based start, exclusive end, -1
// for the end of the file, with its clamping.
func pyReadLines(text string, start, end int) string {
	n := lineCount(text)
	start = min(max(start, 0), n)
	if end != -1 {
		end = max(end, 0)
	}
	end = min(end, n)
	if end == -1 {
		return pySliceText(text, n, start, n)
	}
	begin := max(0, min(start, n-2))
	if end > n {
		end = -1
	} else {
		end = max(begin+1, end)
	}
	if end == -1 {
		return pySliceText(text, n, begin, -1)
	}
	return pySliceText(text, n, begin, end)
}

// pyInsertLines is OpenHands' insert_lines of content.Split("\n") into
// the lines of original: each inserted line ends with "\n", so the
// inserted text is content and a "\n".
func pyInsertLines(content, original string, start, end int) string {
	n := lineCount(original)
	var before, after string
	if start != 0 {
		before = pySliceText(original, n, 0, start)
	}
	if end != -1 {
		after = pySliceText(original, n, end, n)
	}
	var b strings.Builder
	b.Grow(len(before) + len(content) + 1 + len(after))
	b.WriteString(before)
	b.WriteString(content)
	b.WriteString("\n")
	b.WriteString(after)
	return b.String()
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// editorOutput is OpenHands' _execute_file_editor: the tool's output, or
// "ERROR:\n" and the message of an error the agent should read.
func editorOutput(out string, err error) (string, error) {
	var te *editor.ToolError
	switch {
	case errors.As(err, &te):
		return te.Observation(), nil
	case err != nil:
		return "", err
	}
	return out, nil
}

// writeCost is a write action on an existing file of size bytes: the file
// as text, its lines, and the joined result.
func writeCost(size int64) int64 { return 4 * min(size, editor.DefaultMaxFileSize) }

func (s *Server) actionWrite(ctx context.Context, a *api.Action) (*api.Observation, error) {
	args := api.FileWriteArgs{End: -1}
	if err := decodeArgs(a, &args); err != nil {
		return nil, err
	}
	if args.Path == nil || args.Content == nil {
		return nil, httpapi.BadRequest(errors.New("write action: path and content are required"))
	}
	p := s.resolve(*args.Path)
	// The file is read whole to insert the content into it: up to the
	// editor's limit, and within the request memory budget.
	mem, err := s.bodies.ReserveFile(ctx, p, writeCost)
	if err != nil {
		return nil, err
	}
	defer mem.Release()
	var text string
	mode := fs.FileMode(0o664) // OpenHands' mode for new files
	old, err := files.Read(ctx, p, files.ReadOptions{MaxBytes: editor.DefaultMaxFileSize})
	if err == nil && old.Truncated {
		return api.ErrorObservationOf(fmt.Sprintf("Failed to write %s: the file is larger than %d bytes: write it through /upload_file", p, editor.DefaultMaxFileSize)), nil
	}
	switch {
	case err == nil && old.Kind == files.KindText:
		text = pyInsertLines(*args.Content, old.Content, args.Start, args.End)
		mode = 0 // keep the existing file's mode (and owner)
	case err == nil:
		return api.ErrorObservationOf(fmt.Sprintf("File could not be decoded as utf-8: %s", p)), nil
	case errors.Is(err, files.ErrIsDir):
		return api.ErrorObservationOf(fmt.Sprintf("Path is a directory: %s. You can only write to files", p)), nil
	case errors.Is(err, files.ErrNotFound):
		text = *args.Content + "\n"
	default:
		return api.ErrorObservationOf(fmt.Sprintf("Failed to write %s: %v", p, err)), nil
	}
	if _, err := files.Write(ctx, p, strings.NewReader(text), files.WriteOptions{Mode: mode}); err != nil {
		if errors.Is(err, files.ErrNotDir) || errors.Is(err, files.ErrIsDir) {
			return api.ErrorObservationOf(fmt.Sprintf("File not found: %s", p)), nil
		}
		return api.ErrorObservationOf(fmt.Sprintf("Failed to write %s: %v", p, err)), nil
	}
	return api.NewObservation(api.ObservationWrite, "I wrote to the file "+p+".", "", api.FileWriteExtras{Path: p}), nil
}

func (s *Server) actionEdit(ctx context.Context, a *api.Action) (*api.Observation, error) {
	var args api.FileEditArgs
	if err := decodeArgs(a, &args); err != nil {
		return nil, err
	}
	if args.Path == nil {
		return nil, httpapi.BadRequest(errors.New("edit action: path is required"))
	}
	switch args.ImplSource {
	case "", api.ImplSourceOHACI:
	case api.ImplSourceLLMBasedEdit:
		return nil, httpapi.BadRequest(errors.New("edit action: impl_source llm_based_edit is done by the OpenHands client with its LLM; only oh_aci edits are executed here"))
	default:
		return nil, httpapi.BadRequest(fmt.Errorf("edit action: unknown impl_source %q", args.ImplSource))
	}
	p := *args.Path
	extras := api.FileEditExtras{Path: p, OldContent: args.OldStr, NewContent: args.NewStr, ImplSource: api.ImplSourceOHACI}
	empty := ""
	extras.Diff = &empty
	cmd := editor.Command{Command: args.Command, Path: p, FileText: args.FileText, OldStr: args.OldStr, NewStr: args.NewStr}
	if il, ok, err := parseInsertLine(args.InsertLine); err != nil {
		return nil, err
	} else if !ok {
		content := fmt.Sprintf("ERROR:\nInvalid insert_line value: '%s'. Expected an integer.", il)
		return api.NewObservation(api.ObservationEdit, "I edited the file "+p+".", content, extras), nil
	} else if il != "" {
		n, _ := strconv.Atoi(il)
		cmd.InsertLine = &n
	}
	res, err := s.edit.Do(ctx, cmd)
	content, err := editorOutput(res.Output, err)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(content, "ERROR:\n") {
		d := editor.Diff(res.OldContent, res.NewContent, p)
		extras.Diff, extras.PrevExist = &d, res.PrevExist
	}
	return api.NewObservation(api.ObservationEdit, "I edited the file "+p+".", content, extras), nil
}

// parseInsertLine reads insert_line, a number or (newer OpenHands) a
// numeric string. It returns the number as text ("" when absent) and
// false, with the raw text, for a string that is not an integer.
func parseInsertLine(raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", true, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return strconv.Itoa(n), true, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return "", false, httpapi.BadRequest(fmt.Errorf("edit action: insert_line %s is not an integer", raw))
	}
	if n, err := strconv.Atoi(strings.TrimSpace(str)); err == nil {
		return strconv.Itoa(n), true, nil
	}
	return str, false, nil
}

// handleUploadFile is OpenHands' POST /upload_file: the multipart part
// "file" is stored in the directory ?destination= (created) under its file
// name or, with ?recursive=true, unpacked there (OpenHands' client zips
// directories).
func (s *Server) handleUploadFile(w http.ResponseWriter, r *http.Request) {
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
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "multipart/form-data" {
		httpapi.Error(w, httpapi.BadRequest(errors.New(`upload_file takes a multipart/form-data body with a "file" part`)))
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("read multipart body: %w", err)))
		return
	}
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
		name, err := httpapi.UploadName(part)
		if err != nil {
			httpapi.Error(w, err)
			return
		}
		ctx := r.Context()
		if err := mkdirAll(dest); err != nil {
			httpapi.Error(w, err)
			return
		}
		if recursive {
			_, err = files.Extract(ctx, part, dest, files.ExtractOptions{MaxBytes: s.opts.MaxUpload, Symlinks: files.SymlinksKeep})
		} else {
			_, err = files.Write(ctx, path.Join(dest, name), part, files.WriteOptions{MaxBytes: s.opts.MaxUpload})
		}
		part.Close()
		if err != nil {
			httpapi.Error(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, api.UploadFileResult{Filename: name, Destination: dest, Recursive: recursive})
		return
	}
	httpapi.Error(w, httpapi.BadRequest(errors.New(`multipart body has no "file" part`)))
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
func (s *Server) handleDownloadFiles(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if !filepath.IsAbs(p) {
		httpapi.Error(w, httpapi.BadRequest(errors.New("Path must be an absolute path")))
		return
	}
	s.files.ServeDownload(w, r, p, files.FormatZip)
}

// handleListFiles is OpenHands' POST /list_files.
func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request) {
	var req api.ListFilesRequest
	body, mem, err := s.bodies.JSON(w, r)
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
	dir := s.cwd
	if req.Path != nil {
		dir = *req.Path
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(s.cwd, dir)
		}
	}
	names, err := files.ListNames(r.Context(), dir)
	if err != nil {
		// As OpenHands: the UI gets an empty list, the log the reason.
		s.log.Warn("list files", "path", dir, "err", err)
		names = []string{}
	}
	httpapi.WriteJSON(w, http.StatusOK, names)
}
