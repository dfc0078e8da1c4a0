package openhands

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/bash"
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/files"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
)

// cmdOutputObservation renders a bash result as OpenHands does
// (CmdOutputObservation, or ErrorObservation for multiple commands).
func cmdOutputObservation(res *bash.Result, hidden bool) *api.Observation {
	if res.Status == bash.StatusMultipleCommands {
		return api.ErrorObservationOf(res.Output)
	}
	md := res.Metadata
	content, cut := bash.OpenHandsOutput(res, hidden)
	if cut != "" {
		md.Prefix = cut
	}
	meta := api.CmdOutputMetadata{ExitCode: md.ExitCode, PID: md.PID, Prefix: md.Prefix, Suffix: md.Suffix}
	if res.Status == bash.StatusCompleted {
		meta.Username, meta.Hostname = &md.Username, &md.Hostname
		meta.WorkingDir, meta.PyInterpreterPath = &md.WorkingDir, &md.PyInterpreterPath
	}
	obs := api.NewObservation(api.ObservationRun,
		fmt.Sprintf("Command `%s` executed with exit code %d.", res.Command, md.ExitCode),
		content, api.CmdOutputExtras{Command: res.Command, Metadata: meta, Hidden: hidden})
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

func (s *Service) actionRead(ctx context.Context, a *api.Action) (*api.Observation, error) {
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
		res, err := s.opts.Editor.Do(ctx, editor.Command{Command: "view", Path: p, ViewRange: args.ViewRange})
		content, err := editorOutput(res.Output, err)
		if err != nil {
			return nil, err
		}
		return readObservation(p, content, api.ImplSourceOHACI), nil
	case "", api.ImplSourceDefault:
	default:
		return nil, httpapi.BadRequest(fmt.Errorf("read action: unknown impl_source %q", args.ImplSource))
	}

	wd := s.opts.Sessions.WorkingDir()
	p := s.resolve(*args.Path)
	mem, err := s.opts.Bodies.ReserveFile(ctx, p, budget.ReadCost(files.DefaultMaxReadBytes))
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

func (s *Service) actionWrite(ctx context.Context, a *api.Action) (*api.Observation, error) {
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
	mem, err := s.opts.Bodies.ReserveFile(ctx, p, writeCost)
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

func (s *Service) actionEdit(ctx context.Context, a *api.Action) (*api.Observation, error) {
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
	res, err := s.opts.Editor.Do(ctx, cmd)
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
