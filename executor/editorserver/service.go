// Package editorserver is the executor's editor service: POST /v1/editor,
// OpenHands' str_replace_editor (package executor/editor) over HTTP. It
// owns the one Editor of the executor, whose undo history the OpenHands
// dialect's edit and read actions share through Do.
package editorserver

import (
	"context"
	"net/http"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/files"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

// Service serves the editor.
type Service struct {
	ed     *editor.Editor
	bodies *httpapi.Bodies
}

// New returns the editor service; workspace is the editor's workspace
// root (relative paths are refused with a hint to it); owner, when not nil,
// owns the files the editor creates (the sandbox's default user).
func New(workspace string, bodies *httpapi.Bodies, owner *files.Owner) *Service {
	opts := []editor.Option{editor.WithWorkspaceRoot(workspace)}
	if owner != nil {
		opts = append(opts, editor.WithOwner(owner.UID, owner.GID))
	}
	return &Service{ed: editor.New(opts...), bodies: bodies}
}

// Routes lists the routes of the service.
func (s *Service) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: "POST", Path: "/v1/editor", Files: true, Summary: "str_replace_editor command", Handler: s.handleEditor},
	}
}

// cost is an editor command: the file as bytes and text, the new text,
// the undo entry, the diff and the response, which carries the old and
// new texts (files over editor.DefaultMaxFileSize are refused unread).
func cost(size int64) int64 {
	if size > editor.DefaultMaxFileSize {
		return 0
	}
	return 8 * size
}

// Do runs cmd once the memory it will hold is reserved.
func (s *Service) Do(ctx context.Context, cmd editor.Command) (editor.Result, error) {
	mem, err := s.bodies.ReserveFile(ctx, cmd.Path, cost)
	if err != nil {
		return editor.Result{}, err
	}
	defer mem.Release()
	return s.ed.Do(ctx, cmd)
}

func (s *Service) handleEditor(w http.ResponseWriter, r *http.Request) {
	body, mem, err := s.bodies.JSON(w, r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	defer mem.Release()
	var cmd api.EditorCommand
	if err := httpapi.Decode(body, &cmd); err != nil {
		httpapi.Error(w, err)
		return
	}
	res, err := s.Do(r.Context(), editor.Command(cmd))
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
