package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Labels a runtime's sandbox carries: they are all serve knows of it.
const (
	// LabelSession is the OpenHands session_id the sandbox serves.
	LabelSession = "bothy.serve.session_id"
	// LabelPort, when set, is the TCP port inside the sandbox that the
	// runtime's URL reaches (an agent server); unset, the URL reaches the
	// executor's OpenHands dialect.
	LabelPort = "bothy.serve.port"
)

// Status values of a runtime, as OpenHands reads them.
const (
	StatusRunning = "running"
	StatusPaused  = "paused"
	StatusStopped = "stopped"
	StatusError   = "error"
	// Pod statuses: OpenHands waits for "ready".
	PodReady   = "ready"
	PodPending = "pending"
	PodFailed  = "failed"
)

// StartRequest is POST /start's body. Fields OpenHands sends that bothy
// does not use (runtime_class, run_as_user, run_as_group, fs_group,
// image_pull_policy) are accepted and ignored; docs/serve.md says why.
type StartRequest struct {
	Image          string            `json:"image"`
	Command        Command           `json:"command"`
	WorkingDir     string            `json:"working_dir"`
	Environment    map[string]string `json:"environment"`
	SessionID      string            `json:"session_id"`
	ResourceFactor float64           `json:"resource_factor"`
	RuntimeClass   string            `json:"runtime_class,omitempty"`
	RunAsUser      *int              `json:"run_as_user,omitempty"`
	RunAsGroup     *int              `json:"run_as_group,omitempty"`
	FSGroup        *int              `json:"fs_group,omitempty"`
	PullPolicy     string            `json:"image_pull_policy,omitempty"`
	// Snapshot, bothy's own, starts the runtime on a snapshot (POST
	// /snapshot, by name or ID) instead of the image: the snapshot's image
	// with its layers.
	Snapshot string `json:"snapshot,omitempty"`
}

// Command is a start command: OpenHands sends a list of arguments (V0) or
// one shell string (the SDK's workspace).
type Command struct {
	Argv  []string
	Shell string
}

// UnmarshalJSON accepts a string, a list of strings or null.
func (c *Command) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = Command{}
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &c.Shell)
	}
	return json.Unmarshal(b, &c.Argv)
}

// MarshalJSON writes the command as it came.
func (c Command) MarshalJSON() ([]byte, error) {
	if c.Argv != nil {
		return json.Marshal(c.Argv)
	}
	return json.Marshal(c.Shell)
}

// words is the command as words: the list, or the string split on blanks
// (only to find flags in it).
func (c Command) words() []string {
	if c.Argv != nil {
		return c.Argv
	}
	return strings.Fields(c.Shell)
}

// IsEmpty reports whether no command was given.
func (c Command) IsEmpty() bool { return len(c.Argv) == 0 && strings.TrimSpace(c.Shell) == "" }

// argv is what the sandbox runs: the list, or the string through sh -c.
func (c Command) argv() []string {
	if c.Argv != nil {
		return c.Argv
	}
	return []string{"/bin/sh", "-c", c.Shell}
}

// actionServer reports whether the command starts OpenHands' V0 action
// execution server, which the sandbox's executor replaces.
func (c Command) actionServer() bool {
	for _, w := range c.words() {
		if strings.Contains(w, "action_execution_server") {
			return true
		}
	}
	return false
}

// flag returns the value of --name V or --name=V in the command.
func (c Command) flag(name string) string {
	w := c.words()
	for i, a := range w {
		if a == "--"+name && i+1 < len(w) {
			return w[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// plugins are bothy's plugins for the OpenHands plugins the command names
// (--plugins NAME..., as the V0 action execution server takes them):
// jupyter (agent_skills are in bothy's jupyter plugin) and vscode; others
// have none.
func (c Command) plugins() []string {
	var out []string
	w := c.words()
	for i, a := range w {
		if a != "--plugins" {
			continue
		}
		for _, n := range w[i+1:] {
			if strings.HasPrefix(n, "-") {
				break
			}
			switch n {
			case "agent_skills":
				n = "jupyter"
			case "jupyter", "vscode":
			default:
				continue
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// validate checks what bothy needs of the request.
func (r *StartRequest) validate() error {
	switch {
	case r.SessionID == "":
		return errors.New("session_id is required")
	case len(r.SessionID) > 256 || strings.ContainsAny(r.SessionID, "/\x00"):
		return fmt.Errorf("invalid session_id %q: at most 256 characters, no '/'", r.SessionID)
	case r.ResourceFactor < 0 || r.ResourceFactor > 64 || r.ResourceFactor != r.ResourceFactor:
		return fmt.Errorf("resource_factor %v out of range (0 to 64)", r.ResourceFactor)
	}
	for k := range r.Environment {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("invalid environment variable name %q", k)
		}
	}
	return nil
}

// agentPort is the port the runtime's URL reaches for a command that is
// not the V0 action server: its --port, or 60000 (OpenHands' agent-server
// port).
func (r *StartRequest) agentPort() (int, error) {
	p := r.Command.flag("port")
	if p == "" {
		return DefaultAgentPort, nil
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("invalid --port %q in command", p)
	}
	return n, nil
}

// Runtime is the runtime API's description of one runtime: what /start,
// /sessions/{id}, /runtime/{id}, /list and /resume answer.
type Runtime struct {
	RuntimeID      string         `json:"runtime_id"`
	SessionID      string         `json:"session_id"`
	URL            string         `json:"url"`
	SessionAPIKey  string         `json:"session_api_key"`
	Status         string         `json:"status"`
	PodStatus      string         `json:"pod_status"`
	Image          string         `json:"image"`
	WorkHosts      map[string]int `json:"work_hosts"`
	RestartCount   int            `json:"restart_count"`
	RestartReasons []string       `json:"restart_reasons"`
	Created        string         `json:"created_at"`
	// Error says why a runtime is in StatusError.
	Error string `json:"error,omitempty"`
}
