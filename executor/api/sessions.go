package api

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// DefaultSession is the session POST /v1/sessions/default/run creates on
// first use, and the one OpenHands' "run" action uses.
const DefaultSession = "default"

// Statuses of a SessionResult (how a run ended).
const (
	StatusCompleted        = "completed"          // the command finished: exit_code and metadata are set
	StatusNoChangeTimeout  = "no_change_timeout"  // no new output for the no-change timeout; still running
	StatusHardTimeout      = "hard_timeout"       // the request's timeout passed; still running
	StatusStillRunning     = "still_running"      // refused ("is NOT executed"): the previous command runs
	StatusNoRunningCommand = "no_running_command" // a poll or input with nothing running
	StatusMultipleCommands = "multiple_commands"  // refused: several top-level commands
	StatusExited           = "exited"             // the shell exited (e.g. `exit`); the session is gone
)

// SessionCreateRequest is the body of POST /v1/sessions.
type SessionCreateRequest struct {
	// Name is the session's name: letters, digits, ".", "_", "-", at most
	// 64; empty means "default".
	Name string `json:"name,omitempty"`
	// Cwd is the initial working directory (default: the executor's).
	Cwd string `json:"cwd,omitempty"`
	// Env is merged onto the sessions' base environment.
	Env map[string]string `json:"env,omitempty"`
	// NoChangeTimeout in seconds (default 10); negative disables it.
	NoChangeTimeout float64 `json:"no_change_timeout,omitempty"`
	// MaxOutput caps the characters of a result's output (default 30000,
	// middle-truncated as OpenHands does).
	MaxOutput int `json:"max_output,omitempty"`
}

// Validate checks the request.
func (r *SessionCreateRequest) Validate() error {
	if r.Name != "" {
		if err := ValidSessionName(r.Name); err != nil {
			return err
		}
	}
	switch {
	case strings.IndexByte(r.Cwd, 0) >= 0:
		return errors.New("cwd contains a NUL byte")
	case r.NoChangeTimeout != r.NoChangeTimeout || r.NoChangeTimeout > 1e9 || r.NoChangeTimeout < -1e9:
		return fmt.Errorf("no_change_timeout %v out of range", r.NoChangeTimeout)
	case r.MaxOutput < 0:
		return fmt.Errorf("max_output %d is negative", r.MaxOutput)
	}
	for k, v := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env name %q is invalid", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("env %s contains a NUL byte", k)
		}
	}
	return nil
}

// ValidSessionName checks a session name.
func ValidSessionName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("session name %q must have 1 to 64 characters", name)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("session name %q may hold only letters, digits, '.', '_' and '-'", name)
		}
	}
	if name == "." || name == ".." {
		return fmt.Errorf("session name %q is reserved", name)
	}
	return nil
}

// Session describes a bash session.
type Session struct {
	Name      string    `json:"name"`
	PID       int       `json:"pid"` // the shell
	Cwd       string    `json:"cwd"` // after the last completed command
	Running   bool      `json:"running"`
	Exited    bool      `json:"exited,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// SessionRunRequest is the body of POST /v1/sessions/{name}/run: one agent
// action, as OpenHands' CmdRunAction.
type SessionRunRequest struct {
	// Command is a bash command; with IsInput, text typed into the running
	// program (followed by Enter). "C-c", "C-d", "C-z" (any "C-<letter>")
	// send that control key; "" polls the running command.
	Command string `json:"command"`
	IsInput bool   `json:"is_input,omitempty"`
	// Timeout is the hard timeout in seconds: the output so far is
	// returned after it and the command keeps running. Zero: none.
	Timeout float64 `json:"timeout,omitempty"`
	// NoChangeTimeout overrides the session's for this run (seconds).
	NoChangeTimeout float64 `json:"no_change_timeout,omitempty"`
	// Blocking disables the no-change timeout.
	Blocking bool `json:"blocking,omitempty"`
}

// Validate checks the request.
func (r *SessionRunRequest) Validate() error {
	for name, v := range map[string]float64{"timeout": r.Timeout, "no_change_timeout": r.NoChangeTimeout} {
		if v != v || v < 0 || v > 1e9 {
			return fmt.Errorf("%s %v out of range", name, v)
		}
	}
	return nil
}

// Seconds converts seconds to a duration.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// SessionMetadata is OpenHands' CmdOutputMetadata: what the prompt reported
// after the command (exit code, $!, user, host, working directory, python
// interpreter) and the prefix and suffix of the agent's view. While a
// command runs, ExitCode and PID are -1 and the strings empty.
type SessionMetadata struct {
	ExitCode          int    `json:"exit_code"`
	PID               int    `json:"pid"`
	Username          string `json:"username"`
	Hostname          string `json:"hostname"`
	WorkingDir        string `json:"working_dir"`
	PyInterpreterPath string `json:"py_interpreter_path"`
	Prefix            string `json:"prefix"`
	Suffix            string `json:"suffix"`
}

// SessionResult is the answer to a run, as OpenHands'
// CmdOutputObservation.
type SessionResult struct {
	Command string `json:"command"`
	Status  string `json:"status"`
	// Output is what the command printed since the last result for it,
	// as a terminal shows it, middle-truncated to the session's cap.
	Output    string `json:"output"`
	Truncated bool   `json:"truncated,omitempty"`
	// ExitCode is the command's exit code, -1 while it runs.
	ExitCode int `json:"exit_code"`
	// OOMKilled: the command died of SIGKILL (exit code 137) while the
	// sandbox's OOM-kill count rose during this call.
	OOMKilled bool            `json:"oom_killed,omitempty"`
	Metadata  SessionMetadata `json:"metadata"`
	// Observation is the text an OpenHands agent sees
	// (CmdOutputObservation.to_agent_observation): prefix, output, suffix,
	// working directory, interpreter, exit code.
	Observation string `json:"observation"`
}

// NoChangeTimeoutEnv is OpenHands' variable for the bash sessions' no-change
// timeout, in whole seconds: set in a sandbox's environment, it is the
// executor's default (bothy-executor's --no-change-timeout flag wins).
const NoChangeTimeoutEnv = "NO_CHANGE_TIMEOUT_SECONDS"
