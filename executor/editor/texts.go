package editor

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits and texts from openhands-aci. Sources: openhands_aci/editor/config.py
// (limits), openhands_aci/editor/prompts.py (notices, in the form OpenHands'
// software-agent-sdk file_editor/utils/constants.py still carries),
// openhands_aci/editor/editor.py and exceptions.py (messages).
const (
	// ToolName is OHEditor.TOOL_NAME, used in the unrecognized-command text.
	ToolName = "oh_editor"
	// MaxResponseLenChar is where outputs are clipped, in characters.
	MaxResponseLenChar = 16000
	// SnippetContextWindow is the number of lines shown around an edit.
	SnippetContextWindow = 4
	// DefaultMaxFileSize is OHEditor.MAX_FILE_SIZE_MB.
	DefaultMaxFileSize = 10 << 20
	// MaxHistoryPerFile is the depth of undo per file.
	MaxHistoryPerFile = 10
	// DefaultMaxHistoryBytes caps the undo history across files, which
	// the executor keeps in memory (openhands-aci keeps it on disk).
	DefaultMaxHistoryBytes = 16 << 20

	TextFileContentTruncatedNotice   = "<response clipped><NOTE>Due to the max output limit, only part of this file has been shown to you. You should retry this tool after you have searched inside the file with `grep -n` in order to find the line numbers of what you are looking for.</NOTE>"
	BinaryFileContentTruncatedNotice = "<response clipped><NOTE>Due to the max output limit, only part of this file has been shown to you. Please use Python libraries to view the entire file or search for specific content within the file.</NOTE>"
	DirectoryContentTruncatedNotice  = "<response clipped><NOTE>Due to the max output limit, only part of this directory has been shown to you. You should use `ls -la` instead to view large directories incrementally.</NOTE>"
)

// The commands, in the order of the tool's Command literal.
var commands = []string{"view", "create", "str_replace", "insert", "undo_edit"}

// supportedBinaryExtensions are the files openhands-aci converts to Markdown
// for view (OHEditor.SUPPORTED_BINARY_EXTENSIONS).
var supportedBinaryExtensions = []string{".docx", ".xlsx", ".pptx", ".pdf", ".mp3", ".wav", ".m4a", ".flac"}

// ToolError is an error meant for the agent: the message OpenHands shows in
// an ErrorObservation (exceptions.py ToolError and its subclasses).
type ToolError struct {
	Message string
}

func (e *ToolError) Error() string { return e.Message }

// Observation is the text OpenHands' action execution server sends back for
// this error ("ERROR:\n" + message, _execute_file_editor).
func (e *ToolError) Observation() string { return "ERROR:\n" + e.Message }

func toolErrorf(format string, args ...any) *ToolError {
	return &ToolError{Message: fmt.Sprintf(format, args...)}
}

// paramMissing is EditorToolParameterMissingError.
func paramMissing(command, parameter string) *ToolError {
	return toolErrorf("Parameter `%s` is required for command: %s.", parameter, command)
}

// paramInvalid is EditorToolParameterInvalidError; value is already
// rendered as Python's f-string would.
func paramInvalid(parameter, value, hint string) *ToolError {
	if hint == "" {
		return toolErrorf("Invalid `%s` parameter: %s.", parameter, value)
	}
	return toolErrorf("Invalid `%s` parameter: %s. %s", parameter, value, hint)
}

// fileValidation is FileValidationError.
func fileValidation(path, reason string) *ToolError {
	return toolErrorf("File validation failed for %s: %s", path, reason)
}

// encodingError is EncodingError.
func encodingError(path string) *ToolError {
	return toolErrorf("The editor only supports UTF-8 encoding files, please use bash commands for files with other encoding: %s", path)
}

// pyList renders ints as Python's str(list) does: "[1, 2]".
func pyList(v []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, n := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(n))
	}
	b.WriteByte(']')
	return b.String()
}

// maybeTruncate is results.maybe_truncate: content longer than
// MaxResponseLenChar characters (code points) is cut there and notice
// appended.
func maybeTruncate(content, notice string) string {
	if len(content) <= MaxResponseLenChar || utf8.RuneCountInString(content) <= MaxResponseLenChar {
		return content
	}
	n := 0
	for i := range content {
		if n == MaxResponseLenChar {
			return content[:i] + notice
		}
		n++
	}
	return content
}

// makeOutput is OHEditor._make_output: the snippet numbered like `cat -n`
// starting at startLine.
func makeOutput(snippet, description string, startLine int) string {
	snippet = maybeTruncate(snippet, TextFileContentTruncatedNotice)
	var b strings.Builder
	b.WriteString("Here's the result of running `cat -n` on ")
	b.WriteString(description)
	b.WriteString(":\n")
	for i, line := range strings.Split(snippet, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%6d\t%s", i+startLine, line)
	}
	b.WriteByte('\n')
	return b.String()
}
