package bash

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The texts below are the ones OpenHands' agents were trained on, copied
// verbatim from OpenHands V0 (All-Hands-AI/OpenHands):
//
//   - openhands/runtime/utils/bash_constants.py: TIMEOUT_MESSAGE_TEMPLATE
//   - openhands/runtime/utils/bash.py: BashSession.execute and its
//     _handle_*_command helpers (suffixes, prefixes, ERROR contents)
//   - openhands/events/observation/commands.py: CmdOutputObservation
//     (_maybe_truncate at MAX_CMD_OUTPUT_SIZE = 30000, to_agent_observation)
//   - openhands/events/serialization/event.py: truncate_content
//
// The same texts are used by the V1 software-agent-sdk terminal tool.

// TimeoutMessage is OpenHands' TIMEOUT_MESSAGE_TEMPLATE.
const TimeoutMessage = "You may wait longer to see additional output by sending empty command '', " +
	"send other commands to interact with the current process, " +
	`send keys ("C-c", "C-z", "C-d") to interrupt/kill the previous command before sending your new command, ` +
	"or use the timeout parameter in execute_bash for future commands."

// ContinuePrefix starts the output of a command already seen in part.
const ContinuePrefix = "[Below is the output of the previous command.]\n"

// TruncationNotice replaces the middle of an output longer than the cap.
const TruncationNotice = "\n[... Observation truncated due to length ...]\n"

// Contents of the observations for requests that cannot be served.
const (
	NoCommandToPoll     = "ERROR: No previous running command to retrieve logs from."
	NoCommandToInteract = "ERROR: No previous running command to interact with."
)

func completedSuffix(exitCode int) string {
	return fmt.Sprintf("\n[The command completed with exit code %d.]", exitCode)
}

func completedKeySuffix(exitCode int, key byte) string {
	return fmt.Sprintf("\n[The command completed with exit code %d. CTRL+%c was sent.]", exitCode, key)
}

func noChangeSuffix(d time.Duration) string {
	return fmt.Sprintf("\n[The command has no new output after %s seconds. %s]", pyInt(d), TimeoutMessage)
}

func hardTimeoutSuffix(d time.Duration) string {
	return fmt.Sprintf("\n[The command timed out after %s seconds. %s]", pyFloat(d), TimeoutMessage)
}

func notExecutedSuffix(command string) string {
	return "\n[Your command \"" + command + "\" is NOT executed. " +
		"The previous command is still running - You CANNOT send new commands until the previous command is completed. " +
		"By setting `is_input` to `true`, you can interact with the current process: " +
		TimeoutMessage + "]"
}

func exitedSuffix(code int) string {
	return fmt.Sprintf("\n[The shell exited with code %d; this session is closed.]", code)
}

// multipleCommands is the content of OpenHands' ErrorObservation for a
// request holding several top-level commands.
func multipleCommands(cmds []string) string {
	var b strings.Builder
	b.WriteString("ERROR: Cannot execute multiple commands at once.\n" +
		"Please run each command separately OR chain them into a single command via && or ;\n" +
		"Provided commands:")
	for i, c := range cmds {
		fmt.Fprintf(&b, "\n(%d) %s", i+1, c)
	}
	return b.String()
}

// pyInt renders a duration in seconds as OpenHands' integer
// NO_CHANGE_TIMEOUT_SECONDS does ("10"); fractions keep their digits.
func pyInt(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10)
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// pyFloat renders a duration in seconds as Python's repr of the float
// OpenHands parses the agent's timeout into ("30.0", "2.5").
func pyFloat(d time.Duration) string {
	s := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
