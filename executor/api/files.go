package api

import (
	"github.com/bothy-sandbox/bothy/executor/editor"
	"github.com/bothy-sandbox/bothy/executor/files"
)

// The file API answers the types of the libraries that implement it; the
// aliases put them beside the other wire types.
type (
	// FileInfo describes a file (GET /v1/files/stat, list entries, the
	// answer to PUT /v1/files and POST /v1/files/move).
	FileInfo = files.Info
	// FileContent is the answer to GET /v1/files: the requested lines of a
	// text file, or an image or PDF as a data: URL, or only the kind of a
	// binary file.
	FileContent = files.ReadResult
	// UploadResult is one stored upload (a file, or an unpacked archive).
	UploadResult = files.UploadResult
	// EditorCommand is the body of POST /v1/editor: OpenHands'
	// str_replace_editor call (command, path, file_text, old_str, new_str,
	// insert_line, view_range).
	EditorCommand = editor.Command
)

// Response headers of GET /v1/files/download.
const (
	HeaderFileType = "X-Bothy-File-Type" // "file", or "dir" for an archive of a directory
	HeaderFileMode = "X-Bothy-File-Mode" // octal permission bits ("0644")
)

// FileList is the body of GET /v1/files/list.
type FileList struct {
	Entries []FileInfo `json:"entries"`
}

// MoveRequest is the body of POST /v1/files/move. Dst is the new path (not
// a directory to move into); Overwrite replaces an existing file or empty
// directory there.
type MoveRequest struct {
	Src       string `json:"src"`
	Dst       string `json:"dst"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// Deleted is the answer to DELETE /v1/files.
type Deleted struct {
	Path string `json:"path"`
}

// UploadList is the answer to POST /v1/files/upload: one result per file
// (a raw body is one file).
type UploadList struct {
	Uploads []UploadResult `json:"uploads"`
}

// EditorResult is the answer to POST /v1/editor: the tool's output as
// OpenHands' str_replace_editor prints it and, for edits, the file's text
// before and after and their unified diff (as OpenHands'
// FileEditObservation.diff). A command the editor refuses is a 400
// tool_error whose message is the agent's text.
type EditorResult struct {
	Output     string `json:"output"`
	Path       string `json:"path"`
	PrevExist  bool   `json:"prev_exist"`
	OldContent string `json:"old_content,omitempty"`
	NewContent string `json:"new_content,omitempty"`
	Diff       string `json:"diff,omitempty"`
}
