package api

import (
	"encoding/json"
	"fmt"
)

// Wire types of the OpenHands dialect: the action execution server of
// OpenHands (openhands/runtime/action_execution_server.py) with the JSON
// of openhands/events/serialization (event_to_dict, action_from_dict).

// Action types of POST /execute_action.
const (
	ActionRun               = "run"                // CmdRunAction: the bash session
	ActionRunIPython        = "run_ipython"        // IPythonRunCellAction: a Jupyter plugin
	ActionRead              = "read"               // FileReadAction
	ActionWrite             = "write"              // FileWriteAction
	ActionEdit              = "edit"               // FileEditAction (impl_source "oh_aci": the editor)
	ActionBrowse            = "browse"             // BrowseURLAction: a browser plugin
	ActionBrowseInteractive = "browse_interactive" // BrowseInteractiveAction: a browser plugin
)

// Observation types answered.
const (
	ObservationRun        = "run"   // CmdOutputObservation
	ObservationRead       = "read"  // FileReadObservation
	ObservationWrite      = "write" // FileWriteObservation
	ObservationEdit       = "edit"  // FileEditObservation
	ObservationError      = "error" // ErrorObservation
	ObservationRunIPython = "run_ipython"
	ObservationBrowse     = "browse"
)

// Implementation sources of file actions (FileReadSource, FileEditSource).
const (
	ImplSourceDefault      = "default"
	ImplSourceOHACI        = "oh_aci"
	ImplSourceLLMBasedEdit = "llm_based_edit"
)

// ExecuteActionRequest is the body of POST /execute_action:
// {"action": event_to_dict(action)}.
type ExecuteActionRequest struct {
	Action *Action `json:"action"`
}

// Action is a serialised OpenHands action. Only "action", "args" and
// "timeout" are read; the other keys event_to_dict writes (id, timestamp,
// source, message, …) are ignored.
type Action struct {
	Action string          `json:"action"`
	Args   json.RawMessage `json:"args,omitempty"`
	// Timeout is the hard timeout in seconds (Event.set_hard_timeout).
	Timeout *float64 `json:"timeout,omitempty"`
}

// NewAction builds an Action from its type and args (a struct such as
// CmdRunArgs, or a map).
func NewAction(kind string, args any, timeout *float64) (*Action, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode %s action: %w", kind, err)
	}
	return &Action{Action: kind, Args: b, Timeout: timeout}, nil
}

// CmdRunArgs are the args of a "run" action (CmdRunAction).
type CmdRunArgs struct {
	Command  *string `json:"command"`
	IsInput  bool    `json:"is_input,omitempty"`
	Blocking bool    `json:"blocking,omitempty"`
	// IsStatic runs the command in a fresh shell in Cwd, not the session.
	IsStatic bool    `json:"is_static,omitempty"`
	Cwd      *string `json:"cwd,omitempty"`
	Hidden   bool    `json:"hidden,omitempty"`
	// Thought is the agent's reasoning (a string, or an object in newer
	// OpenHands); ignored.
	Thought json.RawMessage `json:"thought,omitempty"`
}

// FileReadArgs are the args of a "read" action (FileReadAction). Start is
// a 0-based line, End exclusive (-1: the end of the file); ViewRange is
// for impl_source "oh_aci" (the editor's view).
type FileReadArgs struct {
	Path       *string         `json:"path"`
	Start      int             `json:"start"`
	End        int             `json:"end"`
	ImplSource string          `json:"impl_source,omitempty"`
	ViewRange  []int           `json:"view_range,omitempty"`
	Thought    json.RawMessage `json:"thought,omitempty"`
}

// FileWriteArgs are the args of a "write" action (FileWriteAction).
type FileWriteArgs struct {
	Path    *string         `json:"path"`
	Content *string         `json:"content"`
	Start   int             `json:"start"`
	End     int             `json:"end"`
	Thought json.RawMessage `json:"thought,omitempty"`
}

// FileEditArgs are the args of an "edit" action (FileEditAction); with
// impl_source "oh_aci" (the default) Command and the str_replace_editor
// parameters apply. InsertLine is a number or a numeric string.
type FileEditArgs struct {
	Path       *string         `json:"path"`
	Command    string          `json:"command"`
	FileText   *string         `json:"file_text"`
	OldStr     *string         `json:"old_str"`
	NewStr     *string         `json:"new_str"`
	InsertLine json.RawMessage `json:"insert_line,omitempty"`
	ViewRange  []int           `json:"view_range,omitempty"`
	ImplSource string          `json:"impl_source,omitempty"`
	Content    string          `json:"content,omitempty"`
	Start      int             `json:"start,omitempty"`
	End        int             `json:"end,omitempty"`
	Thought    json.RawMessage `json:"thought,omitempty"`
}

// Observation is a serialised OpenHands observation (event_to_dict):
// message, observation type, content, extras by type, and success for
// command output.
type Observation struct {
	Message     string          `json:"message"`
	Observation string          `json:"observation"`
	Content     string          `json:"content"`
	Extras      json.RawMessage `json:"extras"`
	Success     *bool           `json:"success,omitempty"`
}

// NewObservation builds an Observation with extras marshalled from a
// struct such as CmdOutputExtras.
func NewObservation(kind, message, content string, extras any) *Observation {
	b, err := json.Marshal(extras)
	if err != nil || extras == nil {
		b = []byte("{}")
	}
	return &Observation{Message: message, Observation: kind, Content: content, Extras: b}
}

// ErrorObservationOf is OpenHands' ErrorObservation(content).
func ErrorObservationOf(content string) *Observation {
	return NewObservation(ObservationError, content, content, ErrorExtras{})
}

// DecodeExtras decodes the extras into v (CmdOutputExtras, …).
func (o *Observation) DecodeExtras(v any) error {
	if err := json.Unmarshal(o.Extras, v); err != nil {
		return fmt.Errorf("decode %s observation extras: %w", o.Observation, err)
	}
	return nil
}

// CmdOutputMetadata is OpenHands' CmdOutputMetadata in CmdOutputExtras:
// the strings are null until a command completes.
type CmdOutputMetadata struct {
	ExitCode          int     `json:"exit_code"`
	PID               int     `json:"pid"`
	Username          *string `json:"username"`
	Hostname          *string `json:"hostname"`
	WorkingDir        *string `json:"working_dir"`
	PyInterpreterPath *string `json:"py_interpreter_path"`
	Prefix            string  `json:"prefix"`
	Suffix            string  `json:"suffix"`
}

// CmdOutputExtras are the extras of a "run" observation.
type CmdOutputExtras struct {
	Command  string            `json:"command"`
	Metadata CmdOutputMetadata `json:"metadata"`
	Hidden   bool              `json:"hidden"`
}

// FileReadExtras are the extras of a "read" observation.
type FileReadExtras struct {
	Path       string `json:"path"`
	ImplSource string `json:"impl_source"`
}

// FileWriteExtras are the extras of a "write" observation.
type FileWriteExtras struct {
	Path string `json:"path"`
}

// FileEditExtras are the extras of an "edit" observation. As in OpenHands'
// server, OldContent and NewContent carry the action's old_str and new_str
// and Diff the unified diff of the file before and after.
type FileEditExtras struct {
	Path       string  `json:"path"`
	PrevExist  bool    `json:"prev_exist"`
	OldContent *string `json:"old_content"`
	NewContent *string `json:"new_content"`
	ImplSource string  `json:"impl_source"`
	Diff       *string `json:"diff"`
	DiffCache  *string `json:"_diff_cache"`
}

// ErrorExtras are the extras of an "error" observation.
type ErrorExtras struct {
	ErrorID string `json:"error_id"`
}

// ServerInfo is the body of GET /server_info.
type ServerInfo struct {
	Uptime    float64   `json:"uptime"`    // seconds
	IdleTime  float64   `json:"idle_time"` // seconds since the last request other than info and liveness
	Resources Resources `json:"resources"`
	// Plugins is the state of each enabled plugin; absent when none is.
	Plugins []PluginState `json:"plugins,omitempty"`
	// Network is the sandbox's attached network and its published ports;
	// absent on none and host.
	Network *NetworkInfo `json:"network,omitempty"`
}

// Resources are OpenHands' get_system_stats, for the whole sandbox (its
// cgroup where there is one) rather than the server process.
type Resources struct {
	CPUPercent float64 `json:"cpu_percent"` // over 100 ms; 100 = one CPU
	Memory     struct {
		RSS     uint64  `json:"rss"` // bytes in use
		VMS     uint64  `json:"vms"` // the same (a cgroup has no virtual size)
		Percent float64 `json:"percent"`
	} `json:"memory"`
	Disk struct {
		Total   uint64  `json:"total"`
		Used    uint64  `json:"used"`
		Free    uint64  `json:"free"`
		Percent float64 `json:"percent"`
	} `json:"disk"`
	IO struct {
		ReadBytes  uint64 `json:"read_bytes"`
		WriteBytes uint64 `json:"write_bytes"`
	} `json:"io"`
}

// ListFilesRequest is the body of POST /list_files; no path means the
// executor's working directory, a relative one is taken from there.
type ListFilesRequest struct {
	Path *string `json:"path"`
}

// UploadFileResult is the answer to POST /upload_file.
type UploadFileResult struct {
	Filename    string `json:"filename"`
	Destination string `json:"destination"`
	Recursive   bool   `json:"recursive"`
}

// VSCodeToken is the body of GET /vscode/connection_token; Token is null
// without a VS Code plugin.
type VSCodeToken struct {
	Token *string `json:"token"`
}
