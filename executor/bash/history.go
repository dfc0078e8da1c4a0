package bash

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// OpenHands' V0 bash session runs in tmux and reads a command's output back
// from the pane (openhands/runtime/utils/bash.py): a history of
// HISTORY_LIMIT = 10000 rows above a 1000×1000 pane, captured with wrapped
// rows joined. An output taller than that has lost its first lines, and the
// previous command's prompt with them; OpenHands then answers the rows that
// are left before the new prompt and says so in the metadata's prefix.
const (
	tmuxHistoryRows = 10000
	tmuxPaneRows    = 1000
	tmuxColumns     = 1000
	// ps1Rows is what the prompt after a command takes at the bottom of
	// the pane: the empty row its leading newline makes, its 10 rows
	// (###PS1JSON###, 8 JSON rows, ###PS1END###) and the empty row the
	// cursor waits on.
	ps1Rows = 12
	// prevPS1Rows is the previous prompt OpenHands must still find above
	// the output: its 10 rows and the row the command was typed on.
	prevPS1Rows = 11
)

// HistoryPrefix is the metadata prefix OpenHands sets when a command's
// output was taller than its tmux history.
func HistoryPrefix(lines int) string {
	return "[Previous command outputs are truncated. Showing the last " + strconv.Itoa(lines) + " lines of the output below.]\n"
}

// rows is how many pane rows a line takes (it wraps at tmuxColumns).
func rows(line string) int {
	n := utf8.RuneCountInString(line)
	if n <= tmuxColumns {
		return 1
	}
	return (n + tmuxColumns - 1) / tmuxColumns
}

// TmuxHistory cuts a completed command's output as OpenHands' tmux pane
// does: when the output (with the prompts around it) is taller than the
// pane's history, only its last rows are kept, a line cut by the top of
// the history keeping its last rows, and lines is what OpenHands counts in
// its prefix (the kept lines and the empty row before the prompt). cut is
// false, and output unchanged, when it fits.
func TmuxHistory(output string) (kept string, lines int, cut bool) {
	const window = tmuxHistoryRows + tmuxPaneRows
	all := strings.Split(output, "\n")
	total := 0
	for _, l := range all {
		total += rows(l)
	}
	if total+prevPS1Rows+ps1Rows <= window {
		return output, 0, false
	}
	budget := window - ps1Rows
	i := len(all)
	for i > 0 && budget > 0 {
		r := rows(all[i-1])
		if r > budget {
			// The top of the history cuts this line: its last rows stay.
			line := []rune(all[i-1])
			keepFrom := (r - budget) * tmuxColumns
			all[i-1] = string(line[keepFrom:])
			i--
			break
		}
		budget -= r
		i--
	}
	keptLines := all[i:]
	return strings.Join(keptLines, "\n"), len(keptLines) + 1, true
}

// OpenHandsOutput is what OpenHands' CmdOutputObservation holds of a
// result: a completed command's output cut to the tmux history (prefix is
// then the metadata prefix OpenHands sets, else ""), and, unless hidden
// (OpenHands' internal commands, which never reach the model), middle-
// truncated at DefaultMaxOutput characters as its _maybe_truncate does.
func OpenHandsOutput(r *Result, hidden bool) (content, prefix string) {
	content = r.Untruncated()
	if r.Status == StatusCompleted {
		if kept, n, cut := TmuxHistory(content); cut {
			content, prefix = kept, HistoryPrefix(n)
		}
	}
	if !hidden {
		content, _ = truncateMiddle(content, DefaultMaxOutput)
	}
	return content, prefix
}
