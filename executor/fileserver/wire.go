package fileserver

import (
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/files"
)

// The service boundary: library results to the wire types of executor/api.

// wireInfo converts a file's description to the wire.
func wireInfo(in *files.Info) *api.FileInfo {
	return &api.FileInfo{
		Path: in.Path, Name: in.Name, Type: api.FileType(in.Type), Size: in.Size, Mode: in.Mode,
		ModTime: in.ModTime, UID: in.UID, GID: in.GID, LinkTarget: in.LinkTarget,
	}
}

// wireContent converts a read's result to the wire.
func wireContent(r *files.ReadResult) *api.FileContent {
	return &api.FileContent{
		Path: r.Path, Kind: api.FileKind(r.Kind), MIME: r.MIME, Content: r.Content, Size: r.Size,
		Start: r.Start, End: r.End, TotalLines: r.TotalLines, Truncated: r.Truncated,
	}
}

// wireUpload converts an upload's result to the wire.
func wireUpload(r *files.UploadResult) api.UploadResult {
	out := api.UploadResult{Path: r.Path}
	if r.File != nil {
		out.File = wireInfo(r.File)
	}
	if r.Archive != nil {
		x := api.ExtractResult(*r.Archive)
		out.Archive = &x
	}
	return out
}
