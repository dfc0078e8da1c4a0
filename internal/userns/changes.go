package userns

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/bothy-sandbox/bothy/rootfs"
)

// ChangesArg turns the binary into a change lister: an upper directory
// written under a subordinate-id mapping may hold directories only those ids
// can read, so it is read (and exported) from inside a namespace with the
// same mapping.
const ChangesArg = "__bothy_changes"

// ChangesRequest asks for the changes of the overlay upper directory Upper over
// Lowers (top-most first) and, with Export set, a copy of them there.
type ChangesRequest struct {
	Upper  string   `json:"upper"`
	Lowers []string `json:"lowers"`
	Export string   `json:"export,omitempty"`
	// Only, when set, is the list of changes to export, already known:
	// the upper directory is not diffed again.
	Only []rootfs.Change `json:"only"` // null: diff; []: export nothing
}

type changesResult struct {
	Changes []rootfs.Change `json:"changes"`
	Error   string          `json:"error,omitempty"`
}

// ChangesAs runs req with the caller's rights, or, under a subordinate-id
// mapping, inside a user namespace mapped as m by re-executing init (which
// must call Reexec), a helper killed when ctx is done. Exported files belong
// to the caller either way.
func ChangesAs(ctx context.Context, init string, m Mapping, req ChangesRequest) ([]rootfs.Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.Mode != MapSubID {
		return runChanges(req)
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var stdout bytes.Buffer
	runErr := runInNS(ctx, init, m, []string{ChangesArg}, bytes.NewReader(in), &stdout)
	var res changesResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("diff %s: %w", req.Upper, cmp.Or(runErr, err))
	}
	if res.Error != "" {
		return nil, errors.New(res.Error)
	}
	return res.Changes, nil
}

func runChanges(req ChangesRequest) ([]rootfs.Change, error) {
	changes := req.Only
	if changes == nil {
		var err error
		if changes, err = rootfs.Changes(req.Upper, req.Lowers); err != nil {
			return nil, err
		}
	}
	if req.Export != "" {
		if err := rootfs.Export(req.Upper, changes, req.Export); err != nil {
			return nil, err
		}
	}
	return changes, nil
}

func changesMain() int {
	var res changesResult
	var req ChangesRequest
	err := WaitMapped()
	if err == nil {
		err = json.NewDecoder(os.Stdin).Decode(&req)
	}
	if err == nil {
		res.Changes, err = runChanges(req)
	}
	if err != nil {
		res.Error = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "bothy changes:", err)
		return 1
	}
	return 0
}
