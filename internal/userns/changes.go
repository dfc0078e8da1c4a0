package userns

import (
	"context"
	"fmt"
	"io"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// ChangesRequest asks for the changes of the overlay upper directory Upper over
// Lowers (top-most first) and, with Export set, a copy of them there.
type ChangesRequest struct {
	Upper  string
	Lowers []string
	Export string
	// Only, when not nil, is the list of changes to export, already known:
	// the upper directory is not diffed again ([]: export nothing).
	Only []rootfs.Change
}

// ChangesAs runs req with the caller's rights, or, under a subordinate-id
// mapping, inside a user namespace mapped as m by re-executing init (which
// must call ipc.Dispatch), a helper killed when ctx is done: an upper
// directory written under such a mapping may hold directories only those ids
// can read. Exported files belong to the caller either way.
func ChangesAs(ctx context.Context, init string, m Mapping, req ChangesRequest) ([]rootfs.Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.Mode != MapSubID {
		return runChanges(req)
	}
	var batch ipc.Changes
	changes := []rootfs.Change{}
	add := func(ipc.Message) error {
		more, err := fromWire(batch.Changes)
		changes = append(changes, more...)
		return err
	}
	wire := ipc.ChangesRequest{Upper: req.Upper, Lowers: req.Lowers, Export: req.Export, Only: toWire(req.Only)}
	if err := runInNS(ctx, init, m, ipc.ReexecChanges, wire, add, &batch); err != nil {
		return nil, fmt.Errorf("diff %s: %w", req.Upper, err)
	}
	return changes, nil
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

// changesHelper runs an ipc.ChangesRequest and replies with its changes.
func changesHelper(in io.Reader, out io.Writer) error {
	var wire ipc.ChangesRequest
	if _, err := ipc.Receive(in, &wire); err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	only, err := fromWire(wire.Only)
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	changes, err := runChanges(ChangesRequest{Upper: wire.Upper, Lowers: wire.Lowers, Export: wire.Export, Only: only})
	if err != nil {
		return err
	}
	return sendChanges(out, changes)
}

// sendChanges sends changes in Changes frames that each stay well under
// ipc.MaxBody.
func sendChanges(w io.Writer, changes []rootfs.Change) error {
	var batch ipc.Changes
	size := 0
	for _, c := range changes {
		// At most six bytes of JSON a byte of path (\u00XX), and the rest.
		n := 6*len(c.Path) + 32
		if size+n > ipc.MaxBody/2 && len(batch.Changes) > 0 {
			if err := ipc.Send(w, batch); err != nil {
				return err
			}
			batch.Changes, size = batch.Changes[:0], 0
		}
		batch.Changes = append(batch.Changes, ipc.Change{Kind: string(c.Kind), Path: c.Path})
		size += n
	}
	if len(batch.Changes) == 0 {
		return nil
	}
	return ipc.Send(w, batch)
}

// toWire and fromWire convert change lists for ipc, keeping nil nil.
func toWire(changes []rootfs.Change) []ipc.Change {
	if changes == nil {
		return nil
	}
	out := make([]ipc.Change, len(changes))
	for i, c := range changes {
		out[i] = ipc.Change{Kind: string(c.Kind), Path: c.Path}
	}
	return out
}

func fromWire(changes []ipc.Change) ([]rootfs.Change, error) {
	if changes == nil {
		return nil, nil
	}
	out := make([]rootfs.Change, len(changes))
	for i, c := range changes {
		if err := out[i].Kind.UnmarshalText([]byte(c.Kind)); err != nil {
			return nil, err
		}
		out[i].Path = c.Path
	}
	return out, nil
}
