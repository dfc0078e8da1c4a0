// Package openhands is the executor's OpenHands dialect: OpenHands' action
// execution server (openhands/runtime/action_execution_server.py) on the
// executor's services: POST /execute_action with OpenHands' JSON actions and
// observations, /upload_file, /download_files, /list_files and
// /vscode/connection_token. It reaches the other services only through the
// small interfaces it declares (Sessions, Editor, Downloads, Plugins), and
// the libraries executor/files and executor/bash directly. Where OpenHands
// answers 500 for a caller's mistake this answers 4xx JSON, and where it
// crashes on a request it could serve it serves it; docs/api.md lists the
// differences.
package openhands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/bash"
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/files"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/plugins"
)

// Sessions runs the dialect's commands: the sessions service.
type Sessions interface {
	// Run runs req in the named session ("default" is created on first
	// use) and reports whether the command it ended was OOM-killed.
	Run(ctx context.Context, name string, req bash.RunRequest) (*bash.Result, bool, error)
	// RunStatic runs req in a fresh shell in cwd (the sessions' when
	// empty).
	RunStatic(ctx context.Context, cwd string, req bash.RunRequest) (*bash.Result, error)
	// WorkingDir is where relative paths start: the default session's
	// working directory.
	WorkingDir() string
}

// Editor runs str_replace_editor commands: the editor service, whose undo
// history the dialect shares with POST /v1/editor.
type Editor interface {
	Do(ctx context.Context, cmd editor.Command) (editor.Result, error)
}

// Downloads sends a file as itself, a directory as an archive: the files
// service.
type Downloads interface {
	ServeDownload(w http.ResponseWriter, r *http.Request, path string, format files.ArchiveFormat)
}

// Plugins executes the actions plugins claim: the plugin host.
type Plugins interface {
	// Claims reports whether an enabled plugin executes the action type.
	Claims(action string) bool
	// Execute runs the action once the plugin runs; an error wraps
	// plugins.ErrUnavailable when the plugin cannot run here.
	Execute(ctx context.Context, a *api.Action) (*api.Observation, error)
	// ConnectionToken is the named plugin's token, the plugin started
	// first (on first use) and waited for until ctx is done.
	ConnectionToken(ctx context.Context, name string) (string, bool)
}

// Options configure the dialect.
type Options struct {
	// Cwd is the executor's working directory: where /list_files starts.
	Cwd string
	// MaxUpload caps an uploaded file and an unpacked archive.
	MaxUpload int64
	// Owner owns the files an upload creates (the sandbox's default
	// user); nil: the executor's own.
	Owner *files.Owner
	// Bodies reads JSON bodies and reserves the memory of file actions.
	Bodies *httpapi.Bodies
	// Log receives what OpenHands logs instead of answering.
	Log       *slog.Logger
	Sessions  Sessions
	Editor    Editor
	Downloads Downloads
	Plugins   Plugins
}

// Service serves the OpenHands dialect.
type Service struct{ opts Options }

// New returns the OpenHands dialect.
func New(opts Options) *Service { return &Service{opts: opts} }

// Routes lists the routes of the dialect.
func (s *Service) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: "POST", Path: "/execute_action", Summary: "OpenHands: execute an action, answer its observation", Handler: s.handleExecuteAction},
		{Method: "POST", Path: "/upload_file", Files: true, Summary: "OpenHands: upload a file, or a zip unpacked when recursive", Handler: s.handleUploadFile},
		{Method: "GET", Path: "/download_files", Files: true, Summary: "OpenHands: download a directory as zip (a file as itself)", Handler: s.handleDownloadFiles},
		{Method: "POST", Path: "/list_files", Files: true, Summary: "OpenHands: names in a directory, directories first", Handler: s.handleListFiles},
		{Method: "GET", Path: "/vscode/connection_token", Quiet: true, Summary: "OpenHands: the VS Code connection token (null without the plugin)", Handler: s.handleVSCodeToken},
	}
}

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

func (s *Service) handleExecuteAction(w http.ResponseWriter, r *http.Request) {
	a, mem, err := httpapi.DecodeWith(s.opts.Bodies, w, r, decodeExecuteAction)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	switch a.Action {
	case api.ActionRead, api.ActionWrite, api.ActionEdit:
		// Short, and they work on what the body carries, in the file
		// system (the server's bound of Route.Files).
		defer mem.Release()
		if err := s.opts.Bodies.Files.Acquire(r.Context()); err != nil {
			return // the client has gone
		}
		defer s.opts.Bodies.Files.Release()
	default:
		// Commands and plugins' actions may run for long: what their body
		// turned into is small or handed over.
		mem.Release()
	}
	if s.opts.Plugins.Claims(a.Action) {
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

func (s *Service) resolve(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.opts.Sessions.WorkingDir(), p)
	}
	return filepath.Clean(p)
}

func (s *Service) actionRun(ctx context.Context, a *api.Action) (*api.Observation, error) {
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
		res, err = s.opts.Sessions.RunStatic(ctx, cwd, req)
	} else {
		res, _, err = s.opts.Sessions.Run(ctx, api.DefaultSession, req)
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

// CoreActions are the action types the dialect executes itself; no plugin
// may claim them.
var CoreActions = []string{api.ActionRun, api.ActionRead, api.ActionWrite, api.ActionEdit}

// unavailableObservation is what OpenHands answers for an action whose
// plugin is absent (for run_ipython OpenHands fails with this text in a
// 500; here it is an observation the agent can read).
func unavailableObservation(action string) *api.Observation {
	switch action {
	case api.ActionRunIPython:
		return api.ErrorObservationOf("JupyterRequirement not found. Unable to run IPython action.")
	case api.ActionBrowse, api.ActionBrowseInteractive:
		return api.ErrorObservationOf("Browser functionality is not supported or disabled.")
	}
	return api.ErrorObservationOf(fmt.Sprintf("Action %s is not supported in the current runtime.", action))
}

// pluginActions are the action types that only a plugin executes.
var pluginActions = []string{api.ActionRunIPython, api.ActionBrowse, api.ActionBrowseInteractive}

// executePlugin runs an action a plugin claims, once the plugin runs; a
// plugin that cannot run here answers as an absent one.
func (s *Service) executePlugin(w http.ResponseWriter, r *http.Request, a *api.Action) {
	obs, err := s.opts.Plugins.Execute(r.Context(), a)
	var reqErr *httpapi.RequestError
	switch {
	case errors.Is(err, plugins.ErrUnavailable):
		// OpenHands' text, then why (what the image lacks).
		obs = unavailableObservation(a.Action)
		obs.Content += "\n" + err.Error()
	case r.Context().Err() != nil:
		return
	case errors.As(err, &reqErr):
		httpapi.Error(w, err)
		return
	case err != nil:
		// A plugin that failed to start (or failed) answers in the
		// observation, where the agent reads it.
		obs = api.ErrorObservationOf(err.Error())
	}
	httpapi.WriteJSON(w, http.StatusOK, obs)
}

func (s *Service) handleVSCodeToken(w http.ResponseWriter, r *http.Request) {
	var tok api.VSCodeToken
	if t, ok := s.opts.Plugins.ConnectionToken(r.Context(), "vscode"); ok {
		tok.Token = &t
	}
	httpapi.WriteJSON(w, http.StatusOK, &tok)
}
