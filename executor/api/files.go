package api

import "time"

// Wire types of the file and editor routes. They mirror the results of
// packages executor/files and executor/editor but are defined here, so the
// JSON of API v1 is decided in this package alone: the services convert at
// their boundary, and a change in a library cannot change the wire format.

// FileType is the type of a file in a FileInfo.
type FileType string

// File types.
const (
	FileTypeFile    FileType = "file"
	FileTypeDir     FileType = "dir"
	FileTypeSymlink FileType = "symlink"
	FileTypeOther   FileType = "other" // devices, FIFOs and sockets
)

// FileInfo describes a file (GET /v1/files/stat, list entries, the answer
// to PUT /v1/files and POST /v1/files/move). A symlink is described itself,
// not followed (unless stat is asked to follow it).
type FileInfo struct {
	// Path is the absolute path.
	Path string `json:"path"`
	// Name is the base name; in a list it is the path relative to the
	// listed directory ("sub/file.txt" for recursive listings).
	Name string   `json:"name"`
	Type FileType `json:"type"`
	Size int64    `json:"size"`
	// Mode holds the Unix permission bits, setuid/setgid/sticky included
	// (0o644 = 420).
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mtime"`
	UID     int       `json:"uid"`
	GID     int       `json:"gid"`
	// LinkTarget is the content of a symlink.
	LinkTarget string `json:"link_target,omitempty"`
}

// FileKind says how FileContent.Content is to be understood.
type FileKind string

// File kinds.
const (
	KindText   FileKind = "text"   // Content holds the requested lines, line endings included
	KindImage  FileKind = "image"  // Content is a data:image/...;base64 URL of the whole file
	KindPDF    FileKind = "pdf"    // Content is a data:application/pdf;base64 URL of the whole file
	KindBinary FileKind = "binary" // neither text nor a known media type; Content is empty
)

// FileContent is the answer to GET /v1/files: the requested lines of a
// text file, or an image or PDF as a data: URL, or only the kind of a
// binary file.
type FileContent struct {
	Path string   `json:"path"`
	Kind FileKind `json:"kind"`
	// MIME is the media type for images and PDFs, "text/plain;
	// charset=utf-8" for text and "application/octet-stream" for other
	// binary files.
	MIME    string `json:"mime"`
	Content string `json:"content"`
	// Size is the size of the file in bytes.
	Size int64 `json:"size"`
	// Start and End are the lines returned (1-based, inclusive); both are
	// 0 when no line was returned.
	Start int `json:"start,omitempty"`
	End   int `json:"end,omitempty"`
	// TotalLines counts the file's lines (a last line without a newline
	// counts); -1 when reading stopped before the end of the file.
	TotalLines int `json:"total_lines"`
	// Truncated is set when max_bytes cut the content.
	Truncated bool `json:"truncated,omitempty"`
}

// ExtractResult counts what unpacking an archive created.
type ExtractResult struct {
	Files    int   `json:"files"`
	Dirs     int   `json:"dirs"`
	Symlinks int   `json:"symlinks"`
	Links    int   `json:"links"`
	Bytes    int64 `json:"bytes"`
	// Skipped counts symlinks left out because they lead out of the
	// destination.
	Skipped int `json:"skipped,omitempty"`
}

// UploadResult is one stored upload: exactly one of File (a file) and
// Archive (an unpacked archive) is set.
type UploadResult struct {
	Path    string         `json:"path"`
	File    *FileInfo      `json:"file,omitempty"`
	Archive *ExtractResult `json:"archive,omitempty"`
}

// ArchiveFormat names an archive format (the format query parameter of
// uploads and downloads).
type ArchiveFormat string

// Archive formats.
const (
	FormatAuto  ArchiveFormat = "" // uploads: detected from the first bytes; downloads: zip
	FormatZip   ArchiveFormat = "zip"
	FormatTar   ArchiveFormat = "tar"
	FormatTarGz ArchiveFormat = "tar.gz"
)

// Owner is a numeric owner for written and unpacked files (the uid and gid
// query parameters).
type Owner struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// EditorCommand is the body of POST /v1/editor: OpenHands'
// str_replace_editor call. Pointer fields tell an absent parameter (nil)
// from an empty one, as openhands-aci does with None.
type EditorCommand struct {
	// Command is view, create, str_replace, insert or undo_edit.
	Command string `json:"command"`
	// Path must be absolute.
	Path       string  `json:"path"`
	FileText   *string `json:"file_text,omitempty"`
	OldStr     *string `json:"old_str,omitempty"`
	NewStr     *string `json:"new_str,omitempty"`
	InsertLine *int    `json:"insert_line,omitempty"`
	// ViewRange is [start, end], 1-based and inclusive, end -1 meaning the
	// end of the file; empty means the whole file.
	ViewRange []int `json:"view_range,omitempty"`
}

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
