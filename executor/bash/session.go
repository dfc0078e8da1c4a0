package bash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/executor/internal/users"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/internal/passwd"
	"golang.org/x/sys/unix"
)

// Defaults of Options.
const (
	DefaultNoChangeTimeout = 10 * time.Second
	DefaultMaxOutput       = 30000    // characters, OpenHands' MAX_CMD_OUTPUT_SIZE
	DefaultMaxBuffer       = 10 << 20 // bytes of raw output kept per command
	DefaultStartTimeout    = 10 * time.Second
	DefaultTerm            = "xterm"
)

// drainGrace is how long an exited shell's output may take to reach the
// reader when background processes keep the terminal open.
const drainGrace = 100 * time.Millisecond

// Options configure a Session.
type Options struct {
	// Name identifies the session in a Manager.
	Name string
	// Shell is the bash binary. Empty: /bin/bash, else bash in PATH.
	// The protocol needs bash (4.0 or newer; 4.4 for \u and \h).
	Shell string
	// Cwd is the initial working directory. Empty: the user's home when
	// Username is set, else the executor's working directory.
	Cwd string
	// Env is the environment of the shell ("K=V"); nil is none (bash sets
	// its own PATH). PROMPT_COMMAND, PS0-PS2, BASH_ENV and ENV are
	// dropped; TERM defaults to DefaultTerm. The package never reads the
	// process's own environment: the caller passes what the shell gets.
	Env []string
	// Username runs the shell as this user (needs the privilege to
	// switch). Empty: the executor's user. HOME, USER and LOGNAME follow.
	Username string
	// Cred, when set and Username is not, runs the shell with these ids
	// (the sandbox's default user); HOME and USER follow (users.Env).
	Cred *passwd.Cred
	// NoChangeTimeout returns a command's partial output when it has
	// printed nothing for this long (the command keeps running).
	// Zero: DefaultNoChangeTimeout. Negative: never.
	NoChangeTimeout time.Duration
	// MaxOutput caps the characters of Result.Output (middle truncated).
	// Zero: DefaultMaxOutput. Negative: no cap.
	MaxOutput int
	// MaxBuffer caps the raw bytes kept per command (head and tail are
	// kept). Zero: DefaultMaxBuffer.
	MaxBuffer int
	// StartTimeout bounds the start-up handshake. Zero: DefaultStartTimeout.
	StartTimeout time.Duration
	// Reaper starts the shell and owns its wait; the executor passes its
	// own (a PID 1 reaper would otherwise steal the exit status). Nil: a
	// per-process reaper private to the session.
	Reaper *reap.Reaper
}

func (o Options) withDefaults() Options {
	if o.NoChangeTimeout == 0 {
		o.NoChangeTimeout = DefaultNoChangeTimeout
	}
	if o.MaxOutput == 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.MaxBuffer <= 0 {
		o.MaxBuffer = DefaultMaxBuffer
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	return o
}

// RunRequest is one agent action on a session, as OpenHands' CmdRunAction.
type RunRequest struct {
	// Command is a bash command, or with IsInput the text typed into the
	// running program (followed by Enter). "C-c", "C-d", "C-z" and any
	// "C-<letter>" send that control character (no Enter). The empty
	// command polls the running command for new output. Leading and
	// trailing whitespace is ignored, as OpenHands does.
	Command string
	// IsInput sends Command to the running command instead of starting a
	// new one.
	IsInput bool
	// Timeout is the hard timeout: the output so far is returned after
	// this long and the command keeps running. Zero: none.
	Timeout time.Duration
	// NoChangeTimeout overrides the session's for this request.
	NoChangeTimeout time.Duration
	// Blocking disables the no-change timeout: wait for completion, the
	// hard timeout or ctx.
	Blocking bool
}

// Status says how a Run ended.
type Status string

// Statuses of a Result.
const (
	// StatusCompleted: the command finished; Metadata holds its exit code.
	StatusCompleted Status = "completed"
	// StatusNoChangeTimeout: no new output for the no-change timeout; the
	// command is still running.
	StatusNoChangeTimeout Status = "no_change_timeout"
	// StatusHardTimeout: the request's Timeout passed; still running.
	StatusHardTimeout Status = "hard_timeout"
	// StatusStillRunning: a new command was refused (NOT executed)
	// because the previous one is still running.
	StatusStillRunning Status = "still_running"
	// StatusNoRunningCommand: a poll or input with nothing running.
	StatusNoRunningCommand Status = "no_running_command"
	// StatusMultipleCommands: the request held several top-level commands
	// and was refused (OpenHands answers an ErrorObservation).
	StatusMultipleCommands Status = "multiple_commands"
	// StatusExited: the shell exited while the command ran (e.g. `exit`).
	StatusExited Status = "exited"
)

// Metadata is OpenHands' CmdOutputMetadata: what the prompt reports
// after a command, and the prefix and suffix of the agent's view.
type Metadata struct {
	ExitCode          int    `json:"exit_code"`
	PID               int    `json:"pid"` // $!, the last background job; -1 when none
	Username          string `json:"username"`
	Hostname          string `json:"hostname"`
	WorkingDir        string `json:"working_dir"`
	PyInterpreterPath string `json:"py_interpreter_path"`
	Prefix            string `json:"prefix"`
	Suffix            string `json:"suffix"`
}

func emptyMetadata() Metadata { return Metadata{ExitCode: -1, PID: -1} }

// Result is the answer to a Run, as OpenHands' CmdOutputObservation.
type Result struct {
	// Command is the request's command, stripped ("" for
	// StatusNoRunningCommand, as OpenHands).
	Command string
	Status  Status
	// Output is the agent's view of the output since the last Result for
	// the same command: escape sequences interpreted, carriage returns
	// applied, no markers, stripped, middle-truncated to MaxOutput.
	Output string
	// FullOutput is the untruncated Output, set only when Truncated.
	FullOutput string
	Truncated  bool
	// ExitCode is the command's exit code, -1 while it runs.
	ExitCode int
	Metadata Metadata
}

// Untruncated returns the output before truncation.
func (r *Result) Untruncated() string {
	if r.Truncated {
		return r.FullOutput
	}
	return r.Output
}

// AgentObservation renders the result as OpenHands'
// CmdOutputObservation.to_agent_observation does (the text the LLM sees).
func (r *Result) AgentObservation() string {
	if r.Status == StatusMultipleCommands {
		return r.Output
	}
	md := r.Metadata
	var b strings.Builder
	b.WriteString(md.Prefix)
	b.WriteString(r.Output)
	b.WriteString(md.Suffix)
	if md.WorkingDir != "" {
		b.WriteString("\n[Current working directory: " + md.WorkingDir + "]")
	}
	if md.PyInterpreterPath != "" {
		b.WriteString("\n[Python interpreter: " + md.PyInterpreterPath + "]")
	}
	if md.ExitCode != -1 {
		b.WriteString("\n[Command finished with exit code " + strconv.Itoa(md.ExitCode) + "]")
	}
	return b.String()
}

// Session is one persistent interactive bash on a pseudo-terminal. Its
// methods are safe for concurrent use; Runs are served one at a time.
type Session struct {
	opts      Options
	reaper    *reap.Reaper
	ownReaper bool
	proc      *reap.Proc
	ptm       *os.File
	baseline  *unix.Termios // while bash reads protocol lines: no echo
	running   *unix.Termios // while a command runs: baseline with echo

	op chan struct{} // one-slot semaphore: one Run at a time

	mu        sync.Mutex
	cur       *cmdState     // the command the agent has not seen complete
	idle      *capBuf       // output while no command is armed
	changed   chan struct{} // closed and replaced when a command changes phase, the shell exits or the session closes
	md        Metadata      // of the last completed command
	flags     string        // $- after the last command
	exited    bool
	exitCode  int
	closed    bool
	lastNonce string

	closing    chan struct{}
	exitedCh   chan struct{}
	readerDone chan struct{}
	waiterDone chan struct{}
	closeOnce  sync.Once
}

// New starts a bash session and waits for it to be ready.
func New(ctx context.Context, opts Options) (*Session, error) {
	opts = opts.withDefaults()
	env := cleanEnv(opts.Env)
	var cred *syscall.Credential
	cwd := opts.Cwd
	if opts.Username != "" {
		u, err := user.Lookup(opts.Username)
		if err != nil {
			return nil, fmt.Errorf("look up user %s: %w", opts.Username, err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		if int(uid) != os.Geteuid() {
			cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
			if gids, err := u.GroupIds(); err == nil {
				for _, g := range gids {
					if n, err := strconv.ParseUint(g, 10, 32); err == nil {
						cred.Groups = append(cred.Groups, uint32(n))
					}
				}
			}
		}
		env = setEnv(env, "HOME", u.HomeDir)
		env = setEnv(env, "USER", u.Username)
		env = setEnv(env, "LOGNAME", u.Username)
		if cwd == "" {
			cwd = u.HomeDir
		}
	} else if opts.Cred != nil {
		cred = users.SysCred(opts.Cred)
		env = users.Env(env, opts.Cred)
	}
	shell, err := findShell(opts.Shell, env)
	if err != nil {
		return nil, err
	}

	ptm, pts, baseline, err := openPTY()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:   shell,
		Args:   []string{filepath.Base(shell), "--noediting", "--norc", "--noprofile", "-i"},
		Env:    env,
		Dir:    cwd,
		Stdin:  pts,
		Stdout: pts,
		Stderr: pts,
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:     true,
			Setctty:    true,
			Ctty:       0,
			Credential: cred,
		},
	}
	r := opts.Reaper
	own := false
	if r == nil {
		if r, err = reap.New(reap.Options{Mode: reap.PerProcess}); err != nil {
			pts.Close()
			ptm.Close()
			return nil, fmt.Errorf("create reaper: %w", err)
		}
		own = true
	}
	proc, err := r.Start(cmd)
	pts.Close()
	if err != nil {
		ptm.Close()
		if own {
			r.Close()
		}
		return nil, fmt.Errorf("start %s: %w", shell, err)
	}
	running := *baseline
	running.Lflag |= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHOCTL | unix.ECHOKE
	s := &Session{
		running:    &running,
		opts:       opts,
		reaper:     r,
		ownReaper:  own,
		proc:       proc,
		ptm:        ptm,
		baseline:   baseline,
		op:         make(chan struct{}, 1),
		idle:       newCapBuf(opts.MaxBuffer),
		changed:    make(chan struct{}),
		md:         emptyMetadata(),
		closing:    make(chan struct{}),
		exitedCh:   make(chan struct{}),
		readerDone: make(chan struct{}),
		waiterDone: make(chan struct{}),
	}
	go s.readLoop()
	go s.waitLoop()
	if err := s.handshake(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// handshake configures bash and waits for the first markers.
func (s *Session) handshake(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	tok, err := newTokens()
	if err != nil {
		return err
	}
	now := time.Now()
	c := &cmdState{tok: tok, phase: phaseRunning, out: newCapBuf(s.opts.MaxBuffer), started: now, lastChange: now}
	s.mu.Lock()
	s.cur = c
	s.lastNonce = tok.nonce
	s.mu.Unlock()
	if err := s.writeCtx(ctx, append([]byte(initScript), armLine(tok.nonce, "s")...)); err != nil {
		return fmt.Errorf("configure shell: %w", err)
	}
	why, err := s.waitFor(ctx, c, phaseDone, 0, 0, now)
	if err != nil || why != doneReached {
		s.mu.Lock()
		seen := c.out.renderSince(0)
		s.mu.Unlock()
		if len(seen) > 500 {
			seen = seen[len(seen)-500:]
		}
		if err == nil {
			err = fmt.Errorf("%w (shell said: %q)", ErrHandshake, stripPy(seen))
		}
		return fmt.Errorf("start bash session: %w", err)
	}
	s.mu.Lock()
	s.setMetaLocked(c)
	s.cur = nil
	s.idle = newCapBuf(s.opts.MaxBuffer)
	s.mu.Unlock()
	return nil
}

// Name is the session's name.
func (s *Session) Name() string { return s.opts.Name }

// Pid is the shell's process id.
func (s *Session) Pid() int { return s.proc.Pid }

// Metadata is the metadata of the last completed command (or of the
// start-up handshake).
func (s *Session) Metadata() Metadata {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.md
}

// Cwd is the working directory after the last completed command.
func (s *Session) Cwd() string { return s.Metadata().WorkingDir }

// Running reports whether a command is running (or finished without the
// agent having seen it finish).
func (s *Session) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}

// Exited is closed when the shell has exited (including after Close).
func (s *Session) Exited() <-chan struct{} { return s.exitedCh }

// Run serves one agent action; see RunRequest. Errors are for the
// session (closed, exited, ctx done); everything the agent should see,
// refusals included, is a Result.
func (s *Session) Run(ctx context.Context, req RunRequest) (*Result, error) {
	select {
	case s.op <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closing:
		return nil, ErrClosed
	}
	defer func() { <-s.op }()

	command := stripPy(req.Command)
	start := time.Now()
	key, isKey := specialKey(command)

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	c := s.cur
	if c == nil && s.exited {
		s.mu.Unlock()
		return nil, ErrExited
	}
	if c == nil {
		if command == "" {
			s.mu.Unlock()
			return noRunning(NoCommandToPoll), nil
		}
		if req.IsInput {
			s.mu.Unlock()
			return noRunning(NoCommandToInteract), nil
		}
	}
	s.mu.Unlock()

	complete := true
	if command != "" && !req.IsInput { // input is for a program, not bash
		var cmds []string
		if cmds, complete = scan(command); len(cmds) > 1 {
			return &Result{
				Command:  command,
				Status:   StatusMultipleCommands,
				Output:   multipleCommands(cmds),
				ExitCode: -1,
				Metadata: emptyMetadata(),
			}, nil
		}
	}

	s.mu.Lock()
	if c != nil && c.phase != phaseDone && s.exited {
		s.mu.Unlock()
		return s.finish(ctx, c, req, command, false, 0, start)
	}
	if c != nil && c.phase == phaseDone {
		if command == "" || req.IsInput || isKey {
			// It finished while nobody watched: report that.
			r := s.completedLocked(c, command, false)
			s.mu.Unlock()
			return r, nil
		}
		// A new command: the unseen end of the previous one comes first.
		out := newCapBuf(s.opts.MaxBuffer)
		before, _, after := c.out.Since(c.viewed)
		out.Write(before)
		out.Write(after)
		before, _, after = s.idle.Since(0)
		out.Write(before)
		out.Write(after)
		s.idle = out
		s.setMetaLocked(c)
		s.cur, c = nil, nil
	}
	if c != nil {
		if !req.IsInput && command != "" && !isKey {
			r := s.timeoutResultLocked(c, command, StatusStillRunning, notExecutedSuffix(command))
			s.mu.Unlock()
			return r, nil
		}
		s.mu.Unlock()
		return s.input(ctx, c, req, command, isKey, key, start)
	}
	s.mu.Unlock()
	return s.startCommand(ctx, req, command, complete, isKey, key, start)
}

// input sends command (text or a key; none for a poll) to the program that
// c runs, and waits for what follows.
func (s *Session) input(ctx context.Context, c *cmdState, req RunRequest, command string, isKey bool, key byte, start time.Time) (*Result, error) {
	if command != "" {
		// Input must not reach bash's own reads of the command.
		why, err := s.waitFor(ctx, c, phaseRunning, s.noChange(req), req.Timeout, start)
		if err != nil {
			return nil, err
		}
		if why != doneReached {
			return s.result(c, req, command, why, isKey, key), nil
		}
		var in []byte
		if isKey {
			in = []byte{keyByte(key)}
		} else {
			in = append([]byte(strings.ReplaceAll(command, "\x00", "")), '\r')
		}
		if err := s.writeCtx(ctx, in); err != nil {
			return nil, s.sessionErr(fmt.Errorf("send input: %w", err))
		}
	}
	return s.finish(ctx, c, req, command, isKey, key, start)
}

// startCommand runs command when nothing is running, or sends a key to the
// prompt. complete says the command parsed as a whole (errexit applies).
func (s *Session) startCommand(ctx context.Context, req RunRequest, command string, complete, isKey bool, key byte, start time.Time) (*Result, error) {
	if isKey && key != 'c' && key != 'd' {
		return noRunning(NoCommandToInteract), nil
	}
	if err := enforceTermios(s.ptm, s.baseline); err != nil {
		return nil, s.sessionErr(fmt.Errorf("reset terminal: %w", err))
	}
	tok, err := newTokens()
	if err != nil {
		return nil, fmt.Errorf("make nonce: %w", err)
	}
	s.mu.Lock()
	c := &cmdState{tok: tok, out: s.idle, started: start, lastChange: start, echo: !isKey}
	s.idle = newCapBuf(s.opts.MaxBuffer)
	s.cur = c
	s.lastNonce = tok.nonce
	s.mu.Unlock()
	if !isKey {
		s.mu.Lock()
		errexit := strings.Contains(s.flags, "e") && complete
		xtrace := strings.Contains(s.flags, "x")
		s.mu.Unlock()
		if err := s.writeCtx(ctx, commandLines(command, tok.nonce, errexit, xtrace)); err != nil {
			s.abandon(c)
			return nil, s.sessionErr(fmt.Errorf("send command: %w", err))
		}
		return s.finish(ctx, c, req, command, false, 0, start)
	}
	// A key at the prompt: its signal would flush input bash has not read
	// yet, so arm first and send the key once bash acknowledges.
	if err := s.writeCtx(ctx, armLine(tok.nonce, "k")); err != nil {
		s.abandon(c)
		return nil, s.sessionErr(fmt.Errorf("send command: %w", err))
	}
	why, err := s.waitFor(ctx, c, phaseRunning, s.noChange(req), req.Timeout, start)
	if err != nil {
		return nil, err
	}
	if why != doneReached {
		return s.result(c, req, command, why, true, key), nil
	}
	if err := s.writeCtx(ctx, []byte{keyByte(key)}); err != nil {
		return nil, s.sessionErr(fmt.Errorf("send input: %w", err))
	}
	return s.finish(ctx, c, req, command, true, key, start)
}

// abandon forgets a command whose lines could not all be written and
// sends VINTR: bash drops the partial line it holds and the terminal
// flushes its input, so the next command starts clean.
func (s *Session) abandon(c *cmdState) {
	s.mu.Lock()
	if s.cur == c {
		s.cur = nil
	}
	s.mu.Unlock()
	_ = s.write([]byte{s.baseline.Cc[unix.VINTR]})
}

func (s *Session) noChange(req RunRequest) time.Duration {
	if req.Blocking {
		return 0
	}
	d := s.opts.NoChangeTimeout
	if req.NoChangeTimeout != 0 {
		d = req.NoChangeTimeout
	}
	return max(d, 0)
}

// finish waits for c and builds the Result.
func (s *Session) finish(ctx context.Context, c *cmdState, req RunRequest, command string, isKey bool, key byte, start time.Time) (*Result, error) {
	why, err := s.waitFor(ctx, c, phaseDone, s.noChange(req), req.Timeout, start)
	if err != nil {
		return nil, err
	}
	return s.result(c, req, command, why, isKey, key), nil
}

// result builds the Result for a wait that ended for why.
func (s *Session) result(c *cmdState, req RunRequest, command string, why waitReason, isKey bool, key byte) *Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch why {
	case doneReached:
		if c.phase != phaseDone { // reached an earlier phase: still running
			return s.timeoutResultLocked(c, command, StatusNoChangeTimeout, noChangeSuffix(s.noChange(req)))
		}
		return s.completedLocked(c, command, isKey && key != 0)
	case noChangeReached:
		return s.timeoutResultLocked(c, command, StatusNoChangeTimeout, noChangeSuffix(s.noChange(req)))
	case hardReached:
		return s.timeoutResultLocked(c, command, StatusHardTimeout, hardTimeoutSuffix(req.Timeout))
	default: // exited
		r := s.viewLocked(c, command, StatusExited)
		r.ExitCode = s.exitCode
		r.Metadata.Suffix = exitedSuffix(s.exitCode)
		s.cur = nil
		return r
	}
}

type waitReason int

const (
	doneReached waitReason = iota
	noChangeReached
	hardReached
	exitedReached
)

// waitFor waits until c reaches target, the shell exits, or a timeout
// passes (zero durations disable them). It fails only when ctx is done or
// the session is closed.
func (s *Session) waitFor(ctx context.Context, c *cmdState, target phase, noChange, hard time.Duration, start time.Time) (waitReason, error) {
	var hardC <-chan time.Time
	if hard > 0 {
		t := time.NewTimer(time.Until(start.Add(hard)))
		defer t.Stop()
		hardC = t.C
	}
	// The no-change timer is set for the earliest possible deadline and,
	// when it fires, moved to the last output plus noChange if output came.
	var ncTimer *time.Timer
	var ncC <-chan time.Time
	if noChange > 0 {
		ncTimer = time.NewTimer(time.Until(start.Add(noChange)))
		defer ncTimer.Stop()
		ncC = ncTimer.C
	}
	for {
		s.mu.Lock()
		if c.phase >= target {
			s.mu.Unlock()
			return doneReached, nil
		}
		if s.closed {
			s.mu.Unlock()
			return 0, ErrClosed
		}
		if s.exited {
			s.mu.Unlock()
			return exitedReached, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ncC:
			s.mu.Lock()
			done := c.phase >= target
			last := c.lastChange
			s.mu.Unlock()
			if done {
				return doneReached, nil
			}
			d := time.Until(later(last, start).Add(noChange))
			if d <= 0 {
				return noChangeReached, nil
			}
			ncTimer.Reset(d)
		case <-hardC:
			// Completion that raced the timer wins.
			s.mu.Lock()
			done := c.phase >= target
			s.mu.Unlock()
			if done {
				return doneReached, nil
			}
			return hardReached, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-s.closing:
			return 0, ErrClosed
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// viewLocked renders c's output since the agent last saw it.
func (s *Session) viewLocked(c *cmdState, command string, st Status) *Result {
	text := stripPy(c.out.renderSince(c.viewed))
	c.viewed = c.out.Total()
	r := &Result{Command: command, Status: st, ExitCode: -1, Metadata: emptyMetadata()}
	r.Output, r.Truncated = truncateMiddle(text, s.opts.MaxOutput)
	if r.Truncated {
		r.FullOutput = text
	}
	return r
}

func (s *Session) completedLocked(c *cmdState, command string, key bool) *Result {
	r := s.viewLocked(c, command, StatusCompleted)
	r.Metadata = c.md
	r.ExitCode = c.md.ExitCode
	if key {
		r.Metadata.Suffix = completedKeySuffix(c.md.ExitCode, upper(command[len(command)-1]))
	} else {
		r.Metadata.Suffix = completedSuffix(c.md.ExitCode)
	}
	s.setMetaLocked(c)
	if s.cur == c {
		s.cur = nil
	}
	return r
}

func (s *Session) timeoutResultLocked(c *cmdState, command string, st Status, suffix string) *Result {
	r := s.viewLocked(c, command, st)
	if c.hasViewed {
		r.Metadata.Prefix = ContinuePrefix
	}
	c.hasViewed = true
	r.Metadata.Suffix = suffix
	return r
}

func (s *Session) setMetaLocked(c *cmdState) {
	s.md = c.md
	s.flags = c.flags
}

func noRunning(text string) *Result {
	return &Result{Status: StatusNoRunningCommand, Output: text, ExitCode: -1, Metadata: emptyMetadata()}
}

// sessionErr turns a failed write into the session's state when that is
// the cause.
func (s *Session) sessionErr(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.exited:
		return fmt.Errorf("%w: %w", ErrExited, err)
	}
	return err
}

func (s *Session) write(p []byte) error {
	_, err := s.ptm.Write(p)
	return err
}

// writeCtx writes within ctx's deadline: a terminal nobody reads (the
// shell exited, a job holds it) must not hang the caller. Close also
// unblocks it.
func (s *Session) writeCtx(ctx context.Context, p []byte) error {
	if d, ok := ctx.Deadline(); ok {
		if err := s.ptm.SetWriteDeadline(d); err == nil {
			defer s.ptm.SetWriteDeadline(time.Time{})
		}
	}
	return s.write(p)
}

func (s *Session) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Session) readLoop() {
	defer close(s.readerDone)
	buf := make([]byte, 64<<10)
	for {
		n, err := s.ptm.Read(buf)
		if n > 0 {
			now := time.Now()
			s.mu.Lock()
			moved, echo := s.feedLocked(buf[:n], now)
			if echo {
				// Bash has read the command and waits: give the command
				// an echoing terminal, then release bash with VEOF. Under
				// s.mu, so no input a Run sends can overtake the VEOF.
				_ = setTermios(s.ptm, s.running)
				_ = s.write([]byte{s.running.Cc[unix.VEOF]})
			}
			if moved {
				s.broadcastLocked()
			}
			s.mu.Unlock()
		}
		if err != nil {
			return // EIO: every holder of the terminal is gone; or closed
		}
	}
}

// feedLocked routes PTY output and reports whether the current command
// changed phase (output alone wakes nobody: waiters re-check the output
// time when their no-change timer fires) and whether it has just started
// running with echo wanted.
func (s *Session) feedLocked(p []byte, now time.Time) (moved, echo bool) {
	if c := s.cur; c != nil && c.phase != phaseDone {
		was := c.phase
		p = c.feed(p, now)
		moved = c.phase != was
		echo = c.echo && was == phaseAck && c.phase == phaseRunning
	}
	s.idle.Write(p)
	return moved, echo
}

// waitLoop notices the shell's exit.
func (s *Session) waitLoop() {
	defer close(s.waiterDone)
	<-s.proc.Done()
	st, _ := s.proc.Status()
	t := time.NewTimer(drainGrace)
	select {
	case <-s.readerDone:
	case <-t.C:
	case <-s.closing:
	}
	t.Stop()
	s.mu.Lock()
	s.exited = true
	s.exitCode = st.Code()
	s.broadcastLocked()
	s.mu.Unlock()
	close(s.exitedCh)
}

// Close kills the shell, its jobs and their descendants, and releases the
// terminal. It waits for the session's goroutines and is idempotent.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.closing)
		s.broadcastLocked()
		s.mu.Unlock()
		killSession(s.proc.Pid)
		if err := s.proc.Signal(unix.SIGKILL); err != nil && !errors.Is(err, reap.ErrDone) {
			_ = s.proc.SignalGroup(unix.SIGKILL)
		}
		s.ptm.Close()
		<-s.readerDone
		t := time.NewTimer(5 * time.Second)
		select {
		case <-s.waiterDone:
		case <-t.C:
		}
		t.Stop()
		if s.ownReaper {
			s.reaper.Close()
		}
	})
	return nil
}

// specialKey recognises OpenHands' special keys "C-<x>" (three
// characters) whose control character exists. It returns x lowered.
func specialKey(cmd string) (byte, bool) {
	if len(cmd) != 3 || cmd[0] != 'C' || cmd[1] != '-' {
		return 0, false
	}
	k := cmd[2]
	switch {
	case k >= 'a' && k <= 'z':
		return k, true
	case k >= 'A' && k <= 'Z':
		return k + 'a' - 'A', true
	case strings.IndexByte("@[\\]^_?", k) >= 0:
		return k, true
	}
	return 0, false
}

func upper(b byte) byte {
	if b >= 'a' && b <= 'z' {
		return b - 'a' + 'A'
	}
	return b
}

func keyByte(k byte) byte {
	switch {
	case k >= 'a' && k <= 'z':
		return k - 'a' + 1
	case k == '?':
		return 0x7f
	default:
		return k & 0x1f
	}
}

// cleanEnv drops what would disturb the protocol and sets TERM.
func cleanEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	hasTerm := false
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PROMPT_COMMAND", "PS0", "PS1", "PS2", "BASH_ENV", "ENV":
			continue
		case "TERM":
			hasTerm = true
		}
		out = append(out, kv)
	}
	if !hasTerm {
		out = append(out, "TERM="+DefaultTerm)
	}
	return out
}

func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

func findShell(shell string, env []string) (string, error) {
	if shell != "" {
		if _, err := os.Stat(shell); err != nil {
			return "", fmt.Errorf("find shell: %w", err)
		}
		return shell, nil
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash", nil
	}
	path := ""
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = p
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, "bash")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", ErrNoShell
}
