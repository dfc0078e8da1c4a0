// Package bash runs persistent interactive bash sessions for agents, with
// the behaviour and texts of OpenHands' execute_bash tool (BashSession in
// openhands/runtime/utils/bash.py), which agents were trained on.
//
// A Session is one bash (--noediting --norc --noprofile -i) on a
// pseudo-terminal, so the working directory, variables, functions,
// aliases and background jobs persist from one command to the next and
// programs see a terminal. Session.Run serves one agent action
// (RunRequest, as OpenHands' CmdRunAction) and answers a Result (as
// CmdOutputObservation): the command's output as a terminal shows it
// (escape sequences and carriage returns applied, middle-truncated to
// 30,000 characters with OpenHands' notice) and, once it completes, its
// metadata: exit code, $!, user, host, working directory and python
// interpreter.
//
// As in OpenHands, a command that prints nothing new for the no-change
// timeout (10 s), or outlives the request's hard timeout, returns its
// output so far and keeps running. The empty command then polls it,
// IsInput types into it, "C-c", "C-d", "C-z" (any "C-<letter>") send the
// control character, and a new command is refused ("is NOT executed")
// until it ends. A request holding several top-level commands is refused
// (Split decides as OpenHands' bashlex split does, parsing the request as
// bash with mvdan.cc/sh/v3/syntax).
//
// Completion is detected without polling: PROMPT_COMMAND prints the
// metadata between markers that carry a fresh 128-bit nonce per command,
// so no output can end a command early (see protocol.go). Output is kept
// per command up to Options.MaxBuffer (10 MiB; head and tail beyond).
//
// A Manager holds named sessions. Close kills the shell, its jobs and
// their descendants. Processes are started through an executor/reap
// Reaper so that a PID 1 reaper does not steal their exit status.
//
// Differences from OpenHands, deliberate: commands reach bash as an
// eval'd variable, not typed text, so there is no line-length limit, no
// history expansion, and a malformed command fails at once instead of
// waiting for more input; C-<x> is sent even without is_input; C-d at the
// prompt does not end the shell; comment lines are not commands. Text sent
// with IsInput is echoed as a terminal echoes it.
package bash
