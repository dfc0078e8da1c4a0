package ipc

import "time"

// The helpers' contracts: the caller (package userns) writes one request
// frame on the helper's stdin and reads its reply on its stdout, which ends
// with Done. See the package documentation for who runs them and why.

// RemoveRequest asks the ReexecRemove helper to remove directory trees. Its
// reply is Done.
type RemoveRequest struct {
	Dirs []string `json:"dirs"`
}

// MessageType implements Message.
func (RemoveRequest) MessageType() string { return "remove.request" }

// DiffRequest asks the ReexecDiff helper for the overlay upper directory Dir
// as a layer tar (rootfs.WriteDiff with Epoch and Exclude as its options).
// Its reply is the tar in Data frames, then Done.
type DiffRequest struct {
	Dir     string    `json:"dir"`
	Epoch   time.Time `json:"epoch"`
	Exclude []string  `json:"exclude,omitempty"`
	Live    bool      `json:"live,omitempty"`
}

// MessageType implements Message.
func (DiffRequest) MessageType() string { return "diff.request" }

// ChangesRequest asks the ReexecChanges helper for the changes of the
// overlay upper directory Upper over Lowers (top-most first) and, with
// Export set, for a copy of them there. Only, when not null, is the list of
// changes to export, already known: Upper is not diffed again ([]: export
// nothing). Its reply is Changes frames, then Done.
type ChangesRequest struct {
	Upper  string   `json:"upper"`
	Lowers []string `json:"lowers"`
	Export string   `json:"export,omitempty"`
	Only   []Change `json:"only"`
}

// MessageType implements Message.
func (ChangesRequest) MessageType() string { return "changes.request" }

// Changes is a batch of a change list: a long list takes several frames.
type Changes struct {
	Changes []Change `json:"changes"`
}

// MessageType implements Message.
func (Changes) MessageType() string { return "changes" }

// Change is one changed path (rootfs.Change): Kind is "A", "C" or "D".
type Change struct {
	Kind string `json:"kind"`
	Path string `json:"path"`
}

// MergeRequest asks the ReexecMerge helper to merge the overlay lower layers
// Layers (bottom first) into Dst, an empty directory on their filesystem
// (rootfs.MergeLayers, UserXattr its option). Its reply is one MergeResult,
// then Done.
type MergeRequest struct {
	Dst       string   `json:"dst"`
	Layers    []string `json:"layers"`
	UserXattr bool     `json:"user_xattr,omitempty"`
}

// MessageType implements Message.
func (MergeRequest) MessageType() string { return "merge.request" }

// MergeResult counts what a merge made (rootfs.MergeStats).
type MergeResult struct {
	Layers    int `json:"layers"`
	Dirs      int `json:"dirs"`
	Links     int `json:"links"`
	Whiteouts int `json:"whiteouts"`
	Opaque    int `json:"opaque"`
}

// MessageType implements Message.
func (MergeResult) MessageType() string { return "merge.result" }
